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
# # 30 · perf ring buffer overhead: base, forward, backward (seed 004)
#
# Wang Nan timed 3,000,000 `close(-1)` calls alone (BASE) and under
# `perf record -o /dev/null -e raw_syscalls:*`, before and after making the kernel able to
# write its ring buffer backward.  Peter Zijlstra asked why the variance was immense: about 10%
# of the runs were twice as slow, because perf and the workload ran on different CPUs.  Pinning
# them and setting the performance governor brought the stdvar from 603,473 down to 9,997.
#
# This runs on the real kernel of this machine: `base` (no perf), `forward`
# (`perf record -e raw_syscalls:*`) and `backward` (`--overwrite`, the kernel writes backward),
# unpinned, both on one CPU, and split over two CPUs, interleaved.  The outlier analysis should
# find any placement-driven slow mode by itself and name the column that explains it.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (minutes) | full (about 20 minutes)
variants: str = "base,forward,backward"  # configurations: base (no perf), forward, backward (--overwrite)
placements: str = "none,same-core,split"  # none (unpinned), same-core, split, or topology classes
count: int = 0  # close(-1) calls per trial; 0: the profile's default (3,000,000 in full)
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: fixed trials)
budget: float = 0  # seconds of trial time the target may spend (0: no limit)
perf: str = "perf"  # the perf executable
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
out_dir: str = ""  # run folder; empty: scratch/perf-ring-buffer/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.lab import notebook as rn
from ringlab.report import vs_published as vp

P = rn.params("perf_rb", profile=profile, variants=variants, placements=placements,
              count=count or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, perf=perf, seed=seed)
RUN = rn.run_dir(out_dir, "perf-ring-buffer", host)
print("run folder:", RUN)

# %%
result = rn.run("perf_rb", P, RUN)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## The thread's table: MEAN, STDVAR and median per configuration and placement
# With bootstrap CIs, the cost per record ((forward − base) / N, in ns), and backward against
# forward with a verdict.

# %%
rn.table(vp.perf_rb_table(RUN))
rn.table(vp.perf_rb_verdicts(RUN))

# %% [markdown]
# ## Distributions by placement, and what explains the slow mode

# %%
R = rn.report(RUN, baseline="forward", labels={"forward": "forward", "backward": "backward"})
rn.markdown(R.markdown)
rn.show_figures(R, "forest", "box", "order")

# %% [markdown]
# ## Published vs reproduced
# The thread's means after the fix, as ratios to BASE, beside ours.

# %%
rn.table(vp.published_vs_reproduced_perf_rb(R))

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, variants=variants, placements=placements, count=count, trials=trials,
                 target_ci=target_ci, budget=budget, perf=perf, seed=seed)
print(rn.write_mail(R, baseline="forward", notebook=("30-perf-ring-buffer.ipynb", NB_PARAMS)))
