# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 10 · ptr_ring: publish the head first, then NULL (seed 000)
#
# In June 2021 Yunsheng Lin proposed moving the `r->queue[]` clearing after the
# `consumer_head` update in `__ptr_ring_discard_one` ("reorder"), and reported +3.9% to +7.6%
# with `ptr_ring_test -s 1000 -m 0|1 -N 100000000`.  Michael Tsirkin answered: *"could be a
# fluke. How many tests did you run? What is the variance? Did you try pinning to different
# CPUs to observe numa effects? Please use perf."*
#
# This notebook answers those questions by default:
#
# * **variants**: `batch` (mainline since 2017, *unpatched*), `reorder` (the 2021 proposal,
#   *patched*) and `prebatch` (the 2016 ring, for context), all our own implementations of the
#   same algorithm; add your own trees with `kernel_headers` to A/B the real header;
# * **mode 0** (one thread alternates produce/consume) pinned to one CPU, and **mode 1** (SPSC,
#   two spinning threads) on one CPU pair per topology class;
# * many interleaved trials in fresh processes, counters read inside the measured region,
#   a CI, a p-value and a verdict for every comparison;
# * instruction counts that do not depend on noise (callgrind), beside the published ones.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (±0.5% in mode 0, ±1% in mode 1, 60 s budget) | full (±0.25% / ±0.75%, 300 s)
variants: str = "prebatch,batch,reorder"  # rings to run: prebatch, batch, reorder, spsc, or kernel-header NAMEs
baseline: str = "batch"  # the unpatched variant; every other variant is compared against it
patched: str = "reorder"  # the variant shown as "patched" in the mail-shaped table
modes: str = "0,1"  # 0: one thread alternates produce/consume, 1: SPSC producer + consumer threads
sizes: str = "1000"  # ring sizes in slots, comma-separated (seed 000 used 1000, not a power of two)
count: int = 0  # operations per trial; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: the profile's)
budget: float = 0  # seconds of builds and trials the target may spend (0: the profile's, else no limit)
cpus: str = "auto"  # mode 1 placement: auto (one pair per topology class) | all | none | "1:2,3:4"
kernel_headers: str = ""  # real headers as extra variants, comma-separated NAME then PATH joined by an equals sign (PATH: ptr_ring.h or kernel tree)
cflags: str = ""  # extra compiler flags for every ring
icount: bool = True  # also count instructions per op under callgrind (mode 0, never timed)
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
interleave: bool = False  # the arms of a round take turns loop by loop, each in its own process (csrc/harness/turns.h)
out_dir: str = ""  # run folder; empty: scratch/ptr-ring-reorder/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %% [markdown]
# Parameters are validated before anything runs: a bad value stops here with the parameter's
# name and the allowed values.

# %%
from ringlab.lab import notebook as rn
from ringlab.report import vs_published as vp

# the machine's real ptr_ring.h (a distro headers package) runs beside our rings when one is found
kernel_headers, variants = rn.real_header(kernel_headers, variants)
P = rn.params("ptr_ring", profile=profile, variants=variants, modes=modes, sizes=sizes,
              count=count or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, cpus=cpus, kernel_headers=kernel_headers,
              cflags=cflags, icount=icount, seed=seed, baseline=baseline, interleave=interleave)
rn.check_choice("patched", patched, P["variants"])
RUN = rn.run_dir(out_dir, "ptr-ring-reorder", host)
print("run folder:", RUN)

# %% [markdown]
# ## Build, tune, run
# The C rings are compiled (one binary per variant, `size` recorded), the governor is set to
# performance on the CPUs in use and restored afterwards (or the reason it cannot be is
# recorded), and every trial runs in a fresh process in a seeded, interleaved order.
# Raw rows are flushed to `raw.csv` as each trial ends.

# %%
result = rn.run("ptr_ring", P, RUN)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## The verdict, in the mail's shape
# Per arm, the centers of ns per operation the effect is computed from (their ratio is the
# %change); `%change` has one sign in every table: + means better (faster), as in mmtests.  Its
# 95% CI follows it in the same sign (one level for every row), then the Holm-corrected p and a
# verdict, which Holm decides over the configurations (summary.md's footnote says so once).
# "no significant difference" means the CI lies inside ±1%.

# %%
R = rn.report(RUN, baseline=baseline, patched=patched, labels={baseline: "unpatched", patched: "patched"})
rn.table(vp.mail_table(R, baseline=baseline, patched=patched))

# %% [markdown]
# ## Everything else: all variants, counters, outliers and their causes

# %%
rn.markdown(R.markdown)

# %% [markdown]
# ## Figures
# The forest first: each arm against the baseline per configuration, its CI and next-run
# interval, the host's A/A band, called rows filled and coloured by direction.  Then the trials
# per configuration (boxes from 20 trials, dots below; severe outliers marked at the axis edge),
# run order (drift and interleaving), SPSC throughput (medians with 95% CIs as points, with the
# core-to-core references that are on scale), the CPU-pair heatmap and counters.  A figure this
# run cannot have says why instead.

# %%
rn.show_figures(R, "forest", "box", "order", "spsc", "cpu_pairs", "counters")

# %% [markdown]
# ## Published vs reproduced
# The mail's numbers come from other machines (arm64 and x86 servers, 2021 kernels).  Absolute
# times cannot be compared, so we compare **ratios**: patched / unpatched on each side.

# %%
rn.table(vp.published_vs_reproduced_reorder(R, baseline=baseline, patched=patched))

# %% [markdown]
# ### Instructions per operation
# The thread's strongest evidence was an instruction count: 17.42e9 before and 16.12e9 after
# for 1e8 operations (x86 `perf stat`), i.e. 174 and 161 instructions per op.  Where hardware
# counters are missing (this VM), callgrind counts the measured region exactly and repeatably.
# Where the two disagree, the disassembly of the measured loop below is the evidence: callgrind
# counts only `rl_measured_simple` (produce + consume, no locks), while `perf stat` counted the
# whole `ptr_ring_test` process.

# %%
rn.table(vp.instructions_vs_published(R))
rn.markdown(rn.mail.published_counts(R, baseline=baseline) or "*Published vs our instruction counts: not "
            "available here because this run did not count both batch and reorder.*")

# %% [markdown]
# ### The measured loop, as `objdump -d` shows it
# `rl_measured_simple` of the binaries that ran (checked against their recorded sha256),
# trimmed: its static size is what one produce + consume costs here.

# %%
LOOPS = rn.measured_loop(RUN, arms=(baseline, patched))

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, variants=variants, baseline=baseline, patched=patched, modes=modes, sizes=sizes, count=count,
                 trials=trials, target_ci=target_ci, budget=budget, cpus=cpus, kernel_headers=kernel_headers,
                 cflags=cflags, icount=icount, seed=seed, interleave=interleave)
print(rn.write_mail(R, baseline=baseline, notebook=("10-ptr-ring-reorder.ipynb", NB_PARAMS)))
