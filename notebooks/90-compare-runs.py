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
# # 90 · Compare runs across machines and dates
#
# Every run under `results/` carries its raw data and its `env.json`.  This notebook merges
# them: one cross-machine table in the mail's shape ("arch/host | unpatched | patched | %change",
# + = faster),
# and the stale-data check Alexander Duyck asked for in seed 002 ("Is this actually the
# numbers for this patch set?"): runs whose compared binaries, or whose sources, are identical,
# and runs whose raw numbers are identical to another run's.

# %% tags=["parameters"]
profile: str = "quick"  # smoke | quick | full (no effect here: this notebook only reads results/)
results_root: str = ""  # folder to scan; empty: the repository's results/
baseline: str = "batch"  # unpatched variant for the ptr_ring cross-machine table
patched: str = "reorder"  # patched variant for the ptr_ring cross-machine table
out_dir: str = ""  # run folder; empty: scratch/compare-runs/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
import ringlab
from ringlab.studies import compare_runs as cr
from ringlab.lab import notebook as rn
from ringlab import paths

rn.check_choice("profile", profile, ["smoke", "quick", "full"])
RUN = rn.run_dir(out_dir, "compare-runs", host)
ROOT = results_root or paths.results_dir()
runs = ringlab.open(ROOT)  # every run under ROOT, each read through its RunFolder
trials = ringlab.open_all(ROOT)  # one tidy frame: the measured trials of every run and host
rn.markdown(runs.describe())

# %% [markdown]
# ## Runs found

# %%
rn.table(runs.table())

# %% [markdown]
# ## Trials per experiment and host
# From `ringlab.open_all`: one row per measured trial (warm-ups and failed trials left out),
# with the run, its experiment, host and profile beside every raw.csv column.

# %%
if len(trials):
    rn.table(trials.groupby(["results_experiment", "host"]).agg(
        runs=("run", "nunique"), trials=("run", "size"),
        variants=("variant", lambda v: ", ".join(sorted(set(map(str, v)))))).reset_index())
else:
    rn.not_available("trials", f"there is no run under {ROOT}")

# %% [markdown]
# ## Cross-machine table (ptr_ring, seed 000 shape)

# %%
rn.table(cr.cross_machine_table(runs, baseline=baseline, patched=patched))

# %% [markdown]
# ## Stale data?
# A comparison whose two arms ran the same binary, or binaries built from the same sources, is
# not an A/B test; a run whose numbers equal another run's to the last digit was not
# re-measured.

# %%
rn.table(cr.stale_checks(runs))

# %% [markdown]
# ## Forest plots: one per experiment, rows = configuration x host
# Each line is one configuration of one host's run: the point is the paired effect in one sign
# (+ = better: the candidate faster), the bar its CI at the level the x axis states once; the
# shaded band is the host's A/A bound (its noise floor, from its calibration), and an open
# diamond marks the effect the seed thread published.  An effect inside its host's band cannot
# be told from noise on that host.  The first plot follows `patched` against `baseline` through
# every run; the others take each host's latest run of one experiment.

# %%
paths = cr.write(RUN, runs, baseline=baseline, patched=patched)
print("written:", *[str(p) for p in paths], sep="\n  ")
rn.show_file(paths, "forest.png", why=f"no run under results/ holds both {baseline} and {patched}")
META_FIGURES = sorted(p.name for p in paths if p.name.startswith("forest-random-effects") and p.suffix == ".png")
for name in sorted(p.name for p in paths if p.name.startswith("forest-") and p.suffix == ".png"):
    if name not in META_FIGURES:
        rn.show_file(paths, name, why="")

# %% [markdown]
# ## The same comparison across runs and hosts: random effects
# A run's CI says how sure that run is of its own effect; it does not say what the next run
# will show, because between runs the machine changes (the guest's host, its neighbours, its
# frequency) and with it the size of an effect.  Here every comparison measured in two or more
# committed runs (any host, any date) is combined by a random-effects model (statsmodels'
# `combine_effects`, Paule-Mandel tau²): the pooled effect with its CI, tau (the SD of the runs'
# own effects), I² (the share of the spread that is not the runs' noise), Cochran's Q, and, with
# three runs or more, the interval the next run is expected in.  A comparison is
# **heterogeneous** when Q rejects (p < 0.05): its runs disagree by more than their own noise
# allows, so no single run's interval describes it.  Across hosts that is expected (different
# machines); within one host it is the drift `ringlab calibrate --between` measures.

# %%
META_ROWS, META = cr.random_effects(runs)
for line in cr.heterogeneity_lines(META_ROWS, META):
    print(line)
if len(META):
    rn.table(META[["experiment", "candidate", "baseline", "config", "k", "hosts", "estimate_pct", "ci_low_pct",
                   "ci_high_pct", "tau_pct", "i2", "q_p", "heterogeneous", "pi_low_pct", "pi_high_pct"]].round(3))
for name in META_FIGURES or ["forest-random-effects.png"]:   # one figure per experiment
    rn.show_file(paths, name, why="no comparison was measured in two or more runs")
