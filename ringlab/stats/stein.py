"""The two-stage (Stein) design over rounds for a target CI on one fixed design, which the
staged design of ``ringlab.stats.sequential`` replaced in the runner; kept as pure functions for
analysis and its tests (``rounds_needed``, ``layouts_for_target``).

The two-stage design: how a runner would use it (pure functions; the runner decides nothing itself):

1. **Pilot**: run ``PILOT_ROUNDS`` rounds (every arm of every configuration per round).
2. ``plan = rounds_needed(pilot_df, baseline, target_ci_pct, budget_s=..., elapsed_s=...)``.
   ``plan["rounds"]`` is the **total** number of rounds; run ``plan["additional_rounds"]``
   more, once.  ``plan["stop_reason"]`` says whether the target or the budget decided it
   ("target" | "budget" | "pilot met target").
3. Analyse all rounds once with ``compare()``; ``target_met(result, target_ci_pct)`` says
   whether every printed CI reached the target, for summary.md ("target reached" or
   "budget spent").  Do not look again and add rounds: that second look is what the
   two-stage design exists to avoid.

Why the error rates are kept: the total N depends on the pilot's *spread* only, never on its
estimate, and the spread is measured in a way that cannot see the signs of the round
differences d_i = ln(candidate/baseline):

    s0 = 1.4826 x median_i |d_i|          (spread about "no difference"; sd for normal d)
    w0 = t_{n0-1, 1-alpha/2} x s0 x sqrt(pi / (3 n0))   (the printed CI's level, 1 - alpha)
    N_i = ceil(n0 * (w0 / h)^2),  h = ln(1 + target_ci_pct/100)
    N = min(max(n0, max_i N_i), max_rounds, affordable)

w0 is the half-width the Hodges-Lehmann CI would have after n0 rounds (asymptotic variance
pi sigma^2 / 3n, with Stein's t quantile for a spread estimated from n0 rounds), and the CI
narrows as 1/sqrt(n).  Under "no difference" the signs of the d_i are fair coins independent
of the |d_i|; N is a function of the |d_i| alone, so given N the signs of all N rounds are
still fair coins and the signed-rank test over all rounds keeps its exact level: A/A false
positives stay <= alpha however N came out (tests/test_stats_truth.py checks it by
simulation, and checks that a spread measured about the pilot's *estimate* (a CI width, or
the sd about the mean) would not: it gives 5.5-6%).  The price: a real effect adds to
|d|, so a comparison with an effect much larger than its noise asks for more rounds than the
target needs (its CI then ends narrower than the target); the budget caps that.

The budget: ``seconds_per_round`` is the pilot's measured time per round (sum of ``wall_s``
over the round's rows, median over rounds; from timestamps when ``wall_s`` is missing), and
``affordable_rounds`` = pilot rounds + (budget - elapsed) / seconds_per_round.  The budget is
data-independent time, so capping N by it keeps the error rates as well (the CI is then
simply wider than the target, and summary.md must say so).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import power as _power
from ringlab.stats.contract import EXACT_NOTE
from ringlab.stats.power import Calibration
from ringlab.stats.rounds import ROUND_COLUMN, Rounds, comparison_columns, round_key
from ringlab.stats.summary import StatsError, measurements

PILOT_ROUNDS = 10
MAX_ROUNDS = 10_000


def pilot_half_width(d, level: float = 0.95) -> np.ndarray | float:
    """w0 of the module docstring for pilot differences ``d`` (last axis = rounds; vectorised)."""
    d = np.asarray(d, dtype=float)
    n0 = d.shape[-1]
    s0 = 1.4826 * np.median(np.abs(d), axis=-1)
    w = sst.t.ppf(1 - (1 - level) / 2, max(n0 - 1, 1)) * s0 * math.sqrt(math.pi / 3 / n0)
    return float(w) if np.ndim(w) == 0 else w


def stein_rounds(pilot_half_width_log, n0: int, target_ci_pct: float, max_rounds: int = MAX_ROUNDS):
    """Total rounds from the pilot's CI half-width(s) on the log scale (array or float)."""
    h = math.log1p(target_ci_pct / 100.0)
    w = np.asarray(pilot_half_width_log, dtype=float)
    n = np.where(np.isfinite(w), np.ceil(n0 * (w / h) ** 2), max_rounds)
    out = np.clip(n, n0, max_rounds).astype(int)
    return int(out) if out.ndim == 0 else out


def _seconds_per_round(meas_all: pd.DataFrame) -> tuple[float, float]:
    """(median seconds per measured round, seconds spent so far incl. warm-ups) or NaN."""
    rk = round_key(meas_all)
    if rk is None or not len(meas_all):
        return math.nan, math.nan
    if "wall_s" in meas_all.columns and pd.to_numeric(meas_all["wall_s"], errors="coerce").notna().any():
        w = pd.to_numeric(meas_all["wall_s"], errors="coerce").fillna(0.0)
        per = w.groupby(rk).sum()
        return float(per.median()), float(w.sum())
    if "timestamp" in meas_all.columns:
        t = pd.to_datetime(meas_all["timestamp"], errors="coerce", utc=True)
        if t.notna().sum() >= 2:
            span = t.groupby(rk).agg(["min", "max"])
            per = (span["max"] - span["min"]).dt.total_seconds()
            total = float((t.max() - t.min()).total_seconds())
            return float(per.median()), total
    return math.nan, math.nan


def _check_plan_args(df: pd.DataFrame, target_ci_pct, budget_s) -> None:
    if not (isinstance(target_ci_pct, (int, float)) and 0 < target_ci_pct < 100):
        raise StatsError(f"target_ci: {target_ci_pct!r} not allowed; allowed: a percentage in (0, 100), e.g. 2")
    if budget_s is not None and not (isinstance(budget_s, (int, float)) and budget_s > 0):
        raise StatsError(f"budget: {budget_s!r} not allowed; allowed: seconds > 0")
    if "variant" not in df.columns:
        raise StatsError("raw.csv has no 'variant' column; the stopping rule needs one")


def _pilot_comparisons(meas: pd.DataFrame, cols: list[str], variants: list[str], baseline: str,
                       metric: str, n0: int, max_rounds: int) -> list[dict]:
    """One (record, the pilot's paired log ratios or None) per (configuration, candidate)."""
    comps = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        bsub = sub[sub["variant"] == baseline]
        for cand in variants:
            if cand == baseline:
                continue
            csub = sub[sub["variant"] == cand]
            rounds = Rounds.of_frames(bsub, csub, metric, paired=True)
            bv, cv = bsub[metric], csub[metric]
            rec = {"group": label, "candidate": cand, "n_pairs": 0, "half_width_pct": math.nan,
                   "ci_level": math.nan, "rounds": max_rounds}
            d = None
            if len(bv) and len(cv) and bv.nunique() == 1 and cv.nunique() == 1:
                rec.update(rounds=n0, note=EXACT_NOTE)
            elif rounds.n_common >= 2 and rounds.positive():
                rec["n_pairs"] = rounds.n_common
                d = rounds.log_ratios()
            comps.append((rec, d))
    return comps


def _size_comparisons(comps: list[tuple[dict, np.ndarray | None]], alpha: float, target_ci_pct: float,
                      max_rounds: int) -> list[dict]:
    """Stein's total rounds per comparison, for the printed CI (level 1 - alpha) the target judges."""
    for r, d in comps:
        if d is not None:
            level = 1 - alpha
            r["ci_level"] = level
            w = pilot_half_width(d, level)
            if math.isfinite(w):
                r["half_width_pct"] = math.expm1(w) * 100
                r["rounds"] = stein_rounds(w, len(d), target_ci_pct, max_rounds)
    return [r for r, _ in comps]


def _budget_plan(df, meas, n0: int, need: int, budget_s, elapsed_s) -> dict:
    spr, spent = _seconds_per_round(df if "warmup" in df.columns else meas)
    if elapsed_s is not None:
        spent = float(elapsed_s)
    affordable = math.nan
    if budget_s is not None and math.isfinite(spr) and spr > 0:
        left = budget_s - (spent if math.isfinite(spent) else 0.0)
        affordable = n0 + max(0, int(math.floor(left / spr + 1e-9)))
    total = need if not math.isfinite(affordable) else min(need, int(affordable))
    if need <= n0:
        reason = "pilot met target"
    elif math.isfinite(affordable) and affordable < need:
        reason = "budget"
    else:
        reason = "target"
    return {"rounds": int(max(total, n0)), "additional_rounds": int(max(total, n0) - n0),
            "seconds_per_round": spr, "elapsed_s": spent,
            "budget_s": float(budget_s) if budget_s is not None else math.nan,
            "affordable_rounds": affordable, "stop_reason": reason}


def layouts_for_target(calibration: Calibration | None, target_ci_pct: float, alpha: float = 0.05,
                       rounds_per_layout: int = _power.ROUNDS_PER_LAYOUT) -> dict:
    """With a calibration: the layout pairs K whose t interval (df K-1) has a half-width of at
    most ``target_ci_pct``, at the calibrated sigma_L and round noise s:
    t_{1-a/2,K-1} sqrt((sigma_L^2 + s^2/R) / K) <= ln(1 + target) (``power.least_layouts``).
    Without one: the one-build plan, stated."""
    if not calibration:
        return {"calibration": None, "layouts_for_target": math.nan, "rounds_per_layout": math.nan,
                "calibration_note": "no calibration for this host (`ringlab calibrate`): the plan is the "
                                    "one-build rounds, and the layout spread is not counted"}
    sl, s = calibration.sigma_layout, calibration.round_sd
    var, h = sl ** 2 + s ** 2 / rounds_per_layout, math.log1p(target_ci_pct / 100.0)
    k = _power.least_layouts(var, h, alpha, power=None)
    k = int(k) if math.isfinite(k) else math.nan
    where = calibration.source or "given"
    return {"calibration": where, "layouts_for_target": k, "rounds_per_layout": rounds_per_layout,
            "calibration_note": f"calibration {where}: sigma_L {sl * 100:.2f} pts, round noise {s * 100:.2f} pts; "
                                f"an honest ±{target_ci_pct:g}% across layouts needs {k} layout pairs x "
                                f"{rounds_per_layout} rounds (the one-build rounds below do not see sigma_L)"}


def rounds_needed(df: pd.DataFrame, baseline: str, target_ci_pct: float, metric: str = schema.PRIMARY_METRIC,
                  by=None, alpha: float = 0.05, budget_s: float | None = None,
                  elapsed_s: float | None = None, max_rounds: int = MAX_ROUNDS,
                  calibration: Calibration | None = None) -> dict:
    """The two-stage plan after a pilot (see the module docstring).

    Returns ``{"pilot_rounds", "target_ci_pct", "rounds_for_target", "rounds",
    "additional_rounds", "seconds_per_round", "elapsed_s", "budget_s", "affordable_rounds",
    "stop_reason", "comparisons": [{"group", "candidate", "n_pairs", "half_width_pct",
    "ci_level", "rounds"}], "calibration", "layouts_for_target", "rounds_per_layout",
    "calibration_note"}``; half_width_pct is the pilot's w0 in percent.  Comparisons that cannot
    be paired or have no CI at the pilot size ask for ``max_rounds``; exact (deterministic)
    comparisons ask for nothing.  ``calibration``: this host's ``Calibration`` (the caller
    loads it, e.g. ``ringlab.rundir.calibration.load_calibration``), or None; it adds the
    layout plan (``layouts_for_target``) and never changes the rounds.
    """
    _check_plan_args(df, target_ci_pct, budget_s)
    meas, _ = measurements(df, metric)
    variants = sorted(map(str, meas["variant"].dropna().unique()))
    if str(baseline) not in variants:
        raise StatsError(f"baseline: {baseline!r} is not a variant of this raw.csv; allowed: " + ", ".join(variants))
    meas["variant"] = meas["variant"].astype(str)
    cols = comparison_columns(meas, by)
    rk = round_key(meas)
    if rk is None:
        raise StatsError("raw.csv has neither a 'round' nor a 'trial' column; the stopping rule pairs by round")
    meas[ROUND_COLUMN] = rk
    n0 = int(meas[ROUND_COLUMN].nunique())
    comps = _size_comparisons(_pilot_comparisons(meas, cols, variants, str(baseline), metric, n0, max_rounds),
                              alpha, target_ci_pct, max_rounds)
    need = max(max([r["rounds"] for r in comps], default=n0), n0)
    plan = {"pilot_rounds": n0, "target_ci_pct": float(target_ci_pct), "rounds_for_target": int(need),
            **_budget_plan(df, meas, n0, need, budget_s, elapsed_s), "comparisons": comps}
    plan.update(layouts_for_target(calibration, target_ci_pct, alpha))
    return plan
