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
# # 12 · From a patch to a verdict on the real kernel code, and a reply for the list
#
# Every seed thread starts with a patch on a mailing list and a reviewer asking whether its
# numbers are real.  This notebook takes a **base** header source (default: the distro's kernel
# headers package, i.e. the real `include/linux/ptr_ring.h` of a released kernel) and a
# **patch** (a patch file, an mbox holding a series, `lore:MESSAGE-ID`, or one of ringlab's
# built-in test patches), builds both variants of the real header through the compat shim,
# and runs the paired A/B:
#
# * modes **0** (one thread alternates produce/consume), **1** (SPSC) and **2** (near-full
#   SPSC), interleaved in seeded rounds, each trial a fresh process;
# * **instructions per operation** of both arms under callgrind (single-threaded mode 0: exact
#   and independent of the machine's timing noise);
# * the **code size** of the measured functions (`nm -S`), to see what the compiler made of it;
# * at the end, the **reply**: the run as plain text for the list (`ringlab mail`).
#
# ## The default patch, and what we expect from it
#
# `builtin:flush-delay` is our own test patch, generated at run time against the base header
# (no kernel code is stored in ringlab).  After the batch flush in `__ptr_ring_discard_one()`
# (right after `consumer_tail` catches up with the head), it spins 64 iterations of an empty
# asm statement with a memory clobber: the kernel's `barrier()`.  The ring's logic is
# unchanged; every flush simply costs a fixed extra loop.  `builtin:flush-delay:N` sets N.
#
# What we expect, before measuring (ring of 1000, default batch of 16 slots, so 63 flushes
# per 1000 consumed entries):
#
# * **instructions/op (mode 0): more, by at least 64 × 2 × 63 / 1000 ≈ +8.1** (gcc compiles
#   the loop to a count-down and a branch), plus roughly one more for the loop set-up and the
#   reloads the memory clobber forces.  Exact under callgrind.
# * **mode 0: slower.**  The loop takes one to two cycles per iteration, so 64 to 128 cycles
#   per flush, i.e. 4 to 8 cycles per operation on a ring that costs 4-5 ns per operation
#   here: roughly +30% to +70%.
# * **mode 1 (SPSC): slower**, by up to the same absolute amount per operation (the consumer
#   does the flushes; how much of it shows depends on which thread is the bottleneck):
#   roughly +10% to +60%.
# * **mode 2 (near-full): slower.**  The producer waits for slots that the consumer now frees
#   later: similar in size to mode 1.
# * **code size:** the consumer-side functions (`consumer*`, `simple*`) change; the producer's
#   (`producer`, `producer_locked`) do not, since the producer never calls
#   `__ptr_ring_discard_one()`.
# * **the control arm** (`control`, on by default): the base header built again under another
#   name, the same source set.  Its verdict against the base must be "no significant difference"
#   or "inconclusive" in every mode, never faster or slower, and its instructions/op must be
#   identical.  If it is called, the machine or the method is lying, not the patch.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (±0.5% in mode 0, ±1% in mode 1, 60 s budget) | full (±0.25% / ±0.75%, 300 s)
base: str = ""  # unpatched header source: ptr_ring.h, kernel tree or headers package; empty: the distro headers package
patch: str = "builtin:flush-delay"  # patch file, mbox, lore:MESSAGE-ID or builtin:flush-delay[:N] (made against base)
control: bool = True  # also run the base header under a second name (same code): an A/A arm that must not be called faster or slower
modes: str = "0,1,2"  # 0: one thread alternates produce/consume, 1: SPSC, 2: near-full SPSC
sizes: str = "1000"  # ring sizes in slots, comma-separated
count: int = 0  # operations per trial; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: the profile's)
budget: float = 0  # seconds of builds and trials the target may spend (0: the profile's, else no limit)
cpus: str = "auto"  # modes 1 and 2 placement: auto (one pair per topology class) | all | none | "1:2,3:4"
cflags: str = ""  # extra compiler flags for both variants
icount: bool = True  # count instructions per op under callgrind (mode 0, never timed)
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
interleave: bool = False  # the arms of a round take turns loop by loop, each in its own process (csrc/harness/turns.h)
out_dir: str = ""  # run folder; empty: scratch/patch-ab/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %% [markdown]
# Parameters are validated before anything runs: a bad value stops here with the parameter's
# name and the allowed values.  A built-in patch is generated against the base header now
# (into `build/patches/`, and copied into the run folder after the run).  An empty `base` on a
# machine without a distro headers package is not an error of the user's: the run folder is
# recorded as skipped, with the reason and how to get the package, and every later cell says so.

# %%
from ringlab.sources import patches
from ringlab.sources import builtin_patches
from ringlab.lab import notebook as rn
from ringlab.report import patch_ab
from ringlab.report import vs_published as vp

RUN = rn.run_dir(out_dir, "patch-ab", host)
rn.skip_rest_if(patches.missing_default_base(base), "ptr_ring", RUN)

# %%
AB = patches.plan_ab(base, patch, control=control)
P = rn.params("ptr_ring", profile=profile, variants=AB.variants, modes=modes, sizes=sizes,
              count=count or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, cpus=cpus, kernel_headers=AB.kernel_headers,
              cflags=cflags, icount=icount, seed=seed, baseline=AB.baseline,
              interleave=interleave)
print("run folder:", RUN)
print("base:      ", AB.base)
print("patch:     ", AB.patch, f"({AB.patch_file})" if AB.patch_file else "")
if AB.builtin:
    print("           ", AB.builtin.subject)
    print(f"expected:   instructions/op in mode 0 at least "
          f"{builtin_patches.expected_extra_per_op(AB.builtin.spins):+.2f} for a ring of 1000 (batch 16)")

# %% [markdown]
# ## Build, tune, run
# Both variants are compiled from the real header (the patched one after applying the patch
# to a copy); the governor is set to performance on the CPUs in use and restored afterwards (or
# the reason it cannot be is recorded); trials run in seeded, interleaved rounds, and raw rows
# are flushed to `raw.csv` as each trial ends.  Callgrind counts run after the timed rounds.

# %%
result = rn.run("ptr_ring", P, RUN)
kept = patches.keep_patch(AB, RUN)
rn.markdown(rn.run_overview(RUN))
print("patch kept in the run folder:", kept)

# %% [markdown]
# ## Verdicts
# Per arm, the centers of ns per operation the effect is computed from (their ratio is the
# %change); `%change` has one sign: + means better (patched faster), as in mmtests, with its CI
# in the same sign under the report's one CI heading, the Holm-corrected p and a verdict.  For
# this patch we expect a negative %change (patched slower) in every mode.

# %%
R = rn.report(RUN, baseline=AB.baseline, patched=AB.candidate,
              labels={AB.baseline: "unpatched", AB.candidate: "patched"})
rn.table(vp.mail_table(R, baseline=AB.baseline, patched=AB.candidate))

# %% [markdown]
# ## Instructions per operation, both arms
# Callgrind counts the measured region only.  `expected difference` is the built-in patch's
# lower bound from the loop's shape (n/a for other patches).

# %%
rn.table(patch_ab.instructions_table(RUN, AB))

# %% [markdown]
# ## Code size of the measured functions
# Bytes of each `rl_measured_*` function of the two binaries that ran (`nm -S`).

# %%
rn.table(patch_ab.function_sizes(patches.run_binaries(RUN, AB)))

# %% [markdown]
# ## Everything else: counters, distributions, outliers and their causes

# %%
rn.markdown(R.markdown)
rn.show_figures(R, "forest", "box", "order", "spsc", "cpu_pairs", "counters")

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better, the control arm as the bound its CI allows):
# `ringlab mail RUN` prints the same text.  It is also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, base=AB.base, patch=patch, control=control, modes=modes, sizes=sizes, count=count,
                 trials=trials, target_ci=target_ci, budget=budget, cpus=cpus, cflags=cflags,
                 icount=icount, seed=seed, interleave=interleave)
print(rn.write_mail(R, baseline=AB.baseline, notebook=("12-patch-ab.ipynb", NB_PARAMS)))
