"""A/A false positives and power of the layout design, beside the one-build design, by simulation.

Why a simulation and not the committed rounds: ``ringlab.simulate.powersim`` resamples one build
pair's rounds and swaps the two arms at random inside each round, so its null is exactly true
for that build pair and its A/A rate cannot exceed the test's level whatever the layout does.
A second build of the same code lands elsewhere in memory and runs a few percent faster or
slower (sigma_L); an A/A across independent layouts is what shows whether a verdict is about
the code or about one layout.  So each simulated run here draws new layouts.

Method (``layout_rates``):

* ``ringlab.simulate.noise.simulate_ab`` draws a run of the machine (persistent two-state noise
  with switches inside rounds, t4 trial noise) at a given sigma_L (calibrated or default);
* **layout design**: K layout pairs x R rounds, per-round log ratios and trial states from
  ``layouts.rounds_from_trials``, verdict from ``layouts.layout_verdict`` (the REML fit of
  layout pair and round, ``ringlab.stats.fit``: its t interval on K - 1 df);
* **one build** (today's design): one layout pair measured for the same K x R rounds, the
  signed-rank CI over its rounds (what ``compare`` does with one build per arm);
* **pooled**: the layout design's K x R rounds in one signed-rank test, as if the K layouts
  were one build (for comparison; its A/A rate grows with sigma_L);
* an effect e is added to every per-round log ratio as ln(1 + e) (the same for both states);
  a run "calls" when its 95% CI excludes 0.

``machine_time_s`` prices a plan: K x R rounds x seconds per round (two trials), builds not
counted.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import layouts as _layouts
from ringlab.simulate import noise as _noise
from ringlab.stats import ranktests as _rt
from ringlab.stats.contract import ci_side

DESIGNS = ("layouts", "one-build", "pooled")
EFFECTS = (0.0, 0.02, 0.05)


def _calls(lo: float, hi: float, shift: float) -> bool:
    return bool(np.isfinite(lo) and (lo + shift > 0 or hi + shift < 0))


def _one_run(K: int, R: int, sigma_layout: float, rng: np.random.Generator, sim_kw: dict,
             effects) -> dict[str, list[bool]]:
    """Calls of each design in one simulated run, per effect."""
    shifts = [math.log1p(e) for e in effects]
    sim = _noise.simulate_ab(K, R, (0.0, 0.0), sigma_layout, rng=rng, **sim_kw)
    r = _layouts.rounds_from_trials(sim["order"], sim["round"], sim["layout"], sim["arm"], sim["log_y"])
    out: dict[str, list[bool]] = {"layouts": [], "pooled": []}
    for s in shifts:
        v = _layouts.layout_verdict(r.d + s, r.layout)
        out["layouts"].append(_direction_called(v))
    p = _rt.signed_rank(np.asarray(r.d, dtype=float))
    out["pooled"] = [_calls(p["ci_low"], p["ci_high"], s) for s in shifts]
    one = _noise.simulate_ab(1, K * R, (0.0, 0.0), sigma_layout, rng=rng, **sim_kw)
    d1 = _layouts.rounds_from_trials(one["order"], one["round"], one["layout"], one["arm"], one["log_y"],
                                     classify=False).d
    q = _rt.signed_rank(d1)
    out["one-build"] = [_calls(q["ci_low"], q["ci_high"], s) for s in shifts]
    return out


def _direction_called(v: dict) -> bool:
    return ci_side(v["ci_low"], v["ci_high"]) != 0


def layout_rates(K: int, R: int, sigma_layout: float, reps: int = 200, seed: int = 0, effects=EFFECTS,
                 durations=_noise.DURATIONS, state_gap: float = _noise.STATE_GAP,
                 noise_sd: float = _noise.NOISE_SD) -> dict:
    """Per design: {"calls": {effect: number of runs that called}, "reps", "rate": {effect: share}}.

    ``rate[0.0]`` is the A/A false-positive rate, the others the power (single comparison, 95%)."""
    rng = np.random.default_rng(seed)
    kw = {"durations": durations, "state_gap": state_gap, "noise_sd": noise_sd}
    calls = {d: np.zeros(len(effects), dtype=int) for d in DESIGNS}
    for _ in range(reps):
        got = _one_run(K, R, sigma_layout, rng, kw, effects)
        for d in DESIGNS:
            calls[d] += np.asarray(got[d], dtype=int)
    return {d: {"reps": reps, "calls": dict(zip(effects, map(int, calls[d]))),
                "rate": dict(zip(effects, (calls[d] / reps).tolist()))} for d in DESIGNS}


def aa_check(calls: int, reps: int, level: float = 0.05, alpha: float = 0.01) -> tuple[bool, float]:
    """(A/A rate consistent with <= ``level``, one-sided binomial p).  Fails when P(X >= calls)
    under Binomial(reps, level) is below ``alpha``."""
    p = float(sst.binomtest(int(calls), int(reps), level, alternative="greater").pvalue)
    return p >= alpha, p


def machine_time_s(layouts: int, rounds_per_layout: int, seconds_per_round: float) -> float:
    """Seconds of trials a layout plan costs: K x R rounds x seconds per round (builds not counted)."""
    if not (math.isfinite(seconds_per_round) and seconds_per_round > 0) or not math.isfinite(layouts):
        return math.nan
    return float(layouts * rounds_per_layout * seconds_per_round)


def seconds_per_round_of(frame, metric_col: str = "wall_s") -> float:
    """Seconds one round of the layout design takes (one trial of each arm): twice the median
    measured trial's ``wall_s`` of a run's raw.csv frame; NaN without one."""
    if metric_col not in frame.columns:
        return math.nan
    w = pd.to_numeric(schema.measured(frame)[metric_col], errors="coerce").dropna()
    w = w[np.isfinite(w) & (w > 0)]
    return float(2 * np.median(w)) if len(w) else math.nan
