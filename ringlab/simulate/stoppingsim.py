"""A/A rate and power of the staged design, through the run's own stopping code, by simulation.

Each simulated run is what ``ringlab run`` does with ``-p target_ci`` (``ringlab.run.stopping``),
with only the measuring replaced by draws:

* ``stopping.opening`` plans stage 0 from the planner's calibration (the host's, or ``CAUTIOUS``
  for a first run on a host without one), passed in as the runner passes the host's;
* each stage's rounds get their layouts from ``stopping.round_layouts``, the schedule a run
  measures; in a round each arm runs one process, in a random order;
* a trial's ns/op is drawn from the *true* noise, a ``LevelCalibration`` whose point estimates
  are taken as the truth: per arm and layout a fixed offset N(0, s_L^2 / 2), per process
  N(0, s_P^2 / 2), per timed iteration N(0, s_I^2 / 2) (a pair's log ratio then carries the
  variances the calibration measured), on the log scale, times exp(effect) for the candidate;
* the stage costs what the true calibration says a round and a layout cost (``cost_s``), and that
  is the machine time ``stopping.add_time`` records, so the budget binds as it does in a run;
* ``stopping.review`` stops the run or plans its next stage from the rows and components of the
  simulated raw data, exactly as after a measured stage (stop on ``target`` or on ``decided``);
* the call is ``compare()``'s verdict of the run's whole data when it stopped: what summary.md
  would print.  Under A/A a "faster" or "slower" is a false call.

Stopping on "decided" looks at significance (at 5% / ``Policy.max_stages`` a look) as well as width, so
that is where an A/A rate above 5% would come from; ``aa_interval`` gives the binomial interval
the rate of a correct design lies in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.run import stopping
from ringlab.stats.compare import compare
from ringlab.stats.levels import LevelCalibration
from ringlab.stats.stopping_record import StageRecord, Stopping

BASELINE, CANDIDATE = "batch", "reorder"
#: the simulated baseline ns/op (the verdicts are of ratios: any value serves)
NS_PER_OP = 3.0


@dataclass(frozen=True)
class SimRun:
    """One simulated staged run: its call, its estimate and half-width (%), why it stopped, how
    many stages it took and the machine time it would have spent (s)."""
    verdict: str
    delta_pct: float
    half_width_pct: float
    stop_reason: str
    stages: int
    spent_s: float
    layouts: int
    rounds: int

    @property
    def called(self) -> bool:
        return self.verdict in ("faster", "slower")


def _values(target_pct: float, budget_s: float | None, stop: str, mode: str) -> dict:
    return {"variants": [BASELINE, CANDIDATE], "modes": [int(mode)], "target_ci": float(target_pct),
            "budget": float(budget_s or 0), "stop": stop, "baseline": BASELINE, "warmup": 0, "repeats": 1}


def _draw_stage(rng: np.random.Generator, st: Stopping, stage: StageRecord, seed: int, truth: LevelCalibration,
                offsets: dict, effect: float, mode: str) -> pd.DataFrame:
    """The raw rows of one stage's new rounds (every arm once a round, one row per iteration)."""
    lays = stopping.round_layouts(st, seed)
    reps = int(st.repeats or 1)
    v = {k: (float(x) if isinstance(x, (int, float)) and math.isfinite(x) else 0.0) for k, x in truth.variance.items()}
    rows = []
    first = stage.first_round
    for r in range(first, first + stage.new_rounds):
        k = int(lays.get(r, 0))
        for order, arm in enumerate(rng.permutation([BASELINE, CANDIDATE])):
            key = (arm, k)
            if key not in offsets:
                offsets[key] = rng.normal(0.0, math.sqrt(v["layout"] / 2))
            proc = rng.normal(0.0, math.sqrt(v["process"] / 2))
            its = rng.normal(0.0, math.sqrt(v["iteration"] / 2), reps)
            shift = effect if arm == CANDIDATE else 0.0
            for i, e in enumerate(its):
                rows.append({"variant": arm, "mode": mode, "size": 1000, "trial": r, "round": r, "layout": k,
                             "iteration": i, "order": order, "warmup": False, "status": "ok",
                             "ns_per_op": NS_PER_OP * math.exp(offsets[key] + proc + e + shift)})
    return pd.DataFrame(rows)


def _stage_cost(truth: LevelCalibration, stage: StageRecord, layouts_before: int, repeats: int) -> tuple[float, float]:
    """(build seconds, measuring seconds) of one stage at the true calibration's costs."""
    c = {k: float(x or 0) for k, x in truth.cost_s.items()}
    new_layouts = max(0, stage.layouts - layouts_before)
    per_round = c.get("process", 0.0) + repeats * c.get("iteration", 0.0)
    return new_layouts * c.get("layout", 0.0), stage.new_rounds * per_round


def simulated_stopping(truth: LevelCalibration, planner: LevelCalibration, target_pct: float,
                       budget_s: float | None, stop: str = "decided", effect_pct: float = 0.0,
                       seed: int = 0) -> tuple[Stopping, pd.DataFrame]:
    """One staged run planned from ``planner`` and measured from ``truth`` (see the module doc):
    its stopping record when it stopped and its raw rows."""
    rng = np.random.default_rng(seed)
    mode = str(truth.mode if truth.mode != "any" else "0")
    values = _values(target_pct, budget_s, stop, mode)
    st = stopping.opening(values, {mode: planner})
    effect = math.log1p(effect_pct / 100)
    offsets: dict = {}
    frames = []
    layouts_before = 0
    while True:
        stage = st.last_stage
        frames.append(_draw_stage(rng, st, stage, seed, truth, offsets, effect, mode))
        build_s, measure_s = _stage_cost(truth, stage, layouts_before, int(st.repeats or 1))
        layouts_before = stage.layouts
        st = stopping.add_time(st, measure_s=measure_s, build_s=build_s)
        df = pd.concat(frames, ignore_index=True)
        st = stopping.review(df, st, lambda _m: None)
        if st.stop_reason:
            return st, df


def simulate_run(truth: LevelCalibration, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                 stop: str = "decided", effect_pct: float = 0.0, seed: int = 0) -> SimRun:
    """One staged run planned from ``planner`` and measured from ``truth`` (see the module doc)."""
    st, df = simulated_stopping(truth, planner, target_pct, budget_s, stop, effect_pct, seed)
    row = compare(df, BASELINE).iloc[0]
    return SimRun(str(row["verdict"]), float(row["delta_pct"]),
                  float((row["ci_high_pct"] - row["ci_low_pct"]) / 2), str(st.stop_reason), len(st.stages),
                  float(stopping.spent_s(st)), int(st.layouts), int(df["round"].nunique()))


def simulate_runs(truth: LevelCalibration, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                  runs: int, stop: str = "decided", effect_pct: float = 0.0, seed: int = 0) -> list[SimRun]:
    """``runs`` independent staged runs (seeds ``seed`` .. ``seed + runs - 1``)."""
    return [simulate_run(truth, planner, target_pct, budget_s, stop, effect_pct, seed + i) for i in range(runs)]


def aa_interval(runs: int, level: float = 0.05, confidence: float = 0.95) -> tuple[float, float]:
    """The interval a correct design's A/A rate over ``runs`` runs falls in ``confidence`` of the
    time: the binomial(runs, level) central interval, as rates."""
    lo, hi = sst.binom.interval(confidence, runs, level)
    return lo / runs, hi / runs


def rate_interval(calls: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a measured rate (statsmodels' ``proportion_confint``, beta)."""
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = proportion_confint(calls, runs, alpha=1 - confidence, method="beta")
    return float(lo), float(hi)
