# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 95 · Explore committed runs
#
# The first thing a reviewer does after reading a `summary.md`: open the run, slice its trials,
# compare it against another baseline, and draw one more figure.  `ringlab.open(PATH)` takes a
# run folder, `results/<experiment>` (its latest complete run, any host) or `results/` (every
# run); `ringlab.open_all(PATH)` is one tidy frame of every run's trials.  Opening a run never
# writes into it: report figures are drawn in a scratch folder.

# %% tags=["parameters"]
profile: str = "quick"  # smoke | quick | full (no effect here: this notebook only reads runs)
results_root: str = ""  # folder of runs to explore; empty: $RINGLAB_RESULTS, else the repository's results/
experiment: str = "ptr-ring-reorder"  # results folder whose latest run is re-compared
baseline: str = "prebatch"  # the other baseline to compare that run against
candidate: str = "reorder"  # the variant whose per-round ratio to the baseline is drawn
out_dir: str = ""  # run folder; empty: scratch/explore/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from IPython.display import display

import ringlab
from ringlab.studies import explore
from ringlab.lab import notebook as rn
from ringlab import paths

rn.check_choice("profile", profile, ["smoke", "quick", "full"])
RUN = rn.run_dir(out_dir, "explore", host)
runs = ringlab.open(results_root or paths.results_dir())
rn.markdown(runs.describe())

# %% [markdown]
# ## The latest run of each experiment
# A run shows itself as a card: experiment, host, profile, status and its A/B verdicts.

# %%
latest = runs.latest()
for r in latest:
    display(r)
if not latest:
    rn.not_available("run cards", f"{runs.root} holds no complete run yet")

# %% [markdown]
# ## Slice the trials
# `run.raw` holds the measured trials (no warm-ups, no failed trials; `run.trials(warmup=True,
# failed=True)` has them all), one row per trial, every parameter a column.

# %%
run = runs.latest(experiment)
if run is None:
    rn.not_available(f"the latest run of {experiment}", f"{runs.root} holds no complete run of it")
else:
    rn.table(run.raw.groupby("variant")[run.metric].describe().reset_index())

# %% [markdown]
# ## Re-compare against another baseline
# `run.compare(baseline=...)` is the paired analysis of the report (per round, Hodges-Lehmann,
# Holm over the configurations), as a frame to slice; shown here in the tables' one sign:
# `gain_pct` (+ = better) with its CI, beside the arm centers it is computed from.

# %%
cmp = None
if run is not None:
    cmp = run.compare(baseline=baseline)
    cols = cmp.attrs["group_columns"] + ["candidate", "design", "n_pairs", "center_baseline",
                                         "center_candidate", "gain_pct", "gain_low_pct", "gain_high_pct",
                                         "ci_level", "verdict"]
    cmp = cmp[[c for c in cols if c in cmp.columns]]
    rn.table(cmp)
else:
    rn.not_available(f"a comparison against {baseline}", f"there is no complete run of {experiment}")

# %% [markdown]
# ## One more figure: the ratio per round, over time
# Not in the standard report: for each round, the candidate's median over the baseline's in
# that round, drawn at the time the round started.  Drift, a slow phase of the machine or a
# warm-up the trials did not absorb shows here as a trend rather than as noise.

# %%
figs = []
if run is not None:
    figs = rn.round_ratio_figure(RUN, run, candidate, baseline)
else:
    rn.not_available("the per-round ratio figure", f"there is no complete run of {experiment}")

# %% [markdown]
# ## This notebook's run folder
# What was opened, the comparison and the figure, with env.json, as every notebook's run.

# %%
written = explore.record(RUN, latest, parameters={"profile": profile, "results_root": str(runs.root), "experiment": experiment,
                                                  "baseline": baseline, "candidate": candidate},
                         tables={f"{experiment}: against {baseline}": cmp} if cmp is not None else {},
                         figures=[f for f in figs if f.suffix == ".png"], note=runs.describe())
print("written:", *[str(p) for p in written], sep="\n  ")
