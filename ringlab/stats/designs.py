"""The layout and machine-state analysis of one comparison (used by ``ringlab.stats.compare``).

A raw.csv with a ``layout`` column says which layout pair (seeded build of each arm) every
round measured.  For a paired comparison of positive values:

* more than one layout pair: design ``layouts``, the verdict of
  ``ringlab.stats.layouts.layout_verdict`` (per layout pair the paired Hodges-Lehmann estimate
  of the per-round log ratios, a t interval across the K estimates on K - 1 df, p from the
  same t test);
* one layout pair (``fixed_build``): design ``paired`` as before, and the CI describes this
  binary pair only.

Both look for machine states (``ringlab.stats.states``: a two-state Markov model on the
trial-ordered log metric).  With two states the headline weights the states equally, so that it
does not drift with the share of slow trials in a run.  In the layouts design the states of the
two trials of every round are a covariate of a per-round model, and the CIs are the jackknife
across layout pairs (``ringlab.stats.layouts.state_model``), so rounds that straddle a switch
are used.  In the one-build design rounds that straddle a switch are kept out of the per-state
estimates, and each state's effect is
the Hodges-Lehmann estimate of its rounds with the inverted signed-rank CI; the headline is the
mean of the two, with a normal interval whose standard error comes from the two 95% signed-rank
CIs (half-width / z.975 each), and its p from the same normal statistic, so that the CI excludes
0 exactly when p <= 1 - level.  The heterogeneity test is Mann-Whitney between the two states'
rounds.  A run with one state reads as before: every paired round in one signed-rank test.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.stats import layouts as _lay
from ringlab.stats import ranktests as _rt
from ringlab.stats.contract import ci_side
from ringlab.stats.layouts import LayoutRounds
from ringlab.stats.rounds import ROUND_COLUMN, Rounds

LAYOUT_COLUMN = "layout"
#: columns that describe the layout of a trial's binary, never a configuration
LAYOUT_COLUMNS = ("layout", "ring_offset", "env_pad")
#: rounds each state needs, in the one-build design as in the layouts one (ringlab.stats.layouts)
MIN_STATE_ROUNDS = _lay.MIN_STATE_ROUNDS


def n_layouts(*subs: pd.DataFrame) -> int:
    """Layout pairs named in the frames' ``layout`` column (0 without one)."""
    vals = set()
    for s in subs:
        if LAYOUT_COLUMN in s.columns:
            vals |= set(s[LAYOUT_COLUMN].dropna().astype(str))
    return len(vals)


def _per_round(sub: pd.DataFrame, metric: str) -> pd.DataFrame:
    g = sub.groupby(ROUND_COLUMN, sort=True)
    out = pd.DataFrame({"y": g[metric].median(), "layout": g[LAYOUT_COLUMN].first().astype(str)})
    if "order" in sub.columns:
        out["order"] = pd.to_numeric(sub["order"], errors="coerce").groupby(sub[ROUND_COLUMN]).min()
    else:
        out["order"] = np.nan
    return out


def round_data(bsub: pd.DataFrame, csub: pd.DataFrame, metric: str) -> LayoutRounds | None:
    """Per common round (``Rounds.pair``): d = ln(candidate / baseline), its layout pair and
    machine state.  None when a round key or the layout column is missing or a value is not
    positive."""
    if ROUND_COLUMN not in bsub.columns or LAYOUT_COLUMN not in bsub.columns or LAYOUT_COLUMN not in csub.columns:
        return None
    b, c = _per_round(bsub, metric), _per_round(csub, metric)
    common = Rounds.pair(b["y"], c["y"], paired=True).common
    if len(common) < 2:
        return None
    b, c = b.loc[common], c.loc[common]
    if not (np.all(b["y"] > 0) and np.all(c["y"] > 0)):
        return None
    rid = np.concatenate([np.arange(len(common))] * 2)
    order = np.concatenate([b["order"].to_numpy(float), c["order"].to_numpy(float)])
    if not np.isfinite(order).all():   # no execution order: the rounds' order, baseline first
        order = np.concatenate([2 * np.arange(len(common)), 2 * np.arange(len(common)) + 1]).astype(float)
    arm = np.repeat([0, 1], len(common))
    lay = np.concatenate([b["layout"].to_numpy(str), b["layout"].to_numpy(str)])
    y = np.log(np.concatenate([b["y"].to_numpy(float), c["y"].to_numpy(float)]))
    return _lay.rounds_from_trials(order, rid, lay, arm, y)


def _normal_headline(per: dict, level: float) -> dict:
    """Equal-weight mean of two per-state estimates, SE from their 95% signed-rank CIs."""
    z95 = float(sst.norm.ppf(0.975))
    ses = [(p95["ci_high"] - p95["ci_low"]) / (2 * z95) for p95 in per.values()]
    est = float(np.mean([p95["estimate"] for p95 in per.values()]))
    se = 0.5 * math.sqrt(sum(s * s for s in ses))
    if not math.isfinite(se):
        return {"estimate": est, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan}
    if se == 0:
        return {"estimate": est, "ci_low": est, "ci_high": est, "p": 1.0 if est == 0 else 0.0}
    q = float(sst.norm.ppf(0.5 + level / 2))
    return {"estimate": est, "ci_low": est - q * se, "ci_high": est + q * se,
            "p": float(2 * sst.norm.sf(abs(est) / se))}


def one_build(d, state, level: float) -> dict:
    """The one-build verdict with machine states (log scale); ``per_state`` empty with one state."""
    d, state = np.asarray(d, dtype=float), np.asarray(state)
    cells = {s: d[state == s] for s in (0, 1)}
    if all(len(v) >= MIN_STATE_ROUNDS for v in cells.values()):
        per95 = {s: _rt.signed_rank(v, 0.95) for s, v in cells.items()}
        head = _normal_headline(per95, level)
        per = {s: _rt.signed_rank(v, level) for s, v in cells.items()}
        dirs = {ci_side(p["ci_low"], p["ci_high"]) for p in per.values()}
        return {**head, "states": 2, "per_state": per, "state_dependent": {1, -1} <= dirs,
                "heterogeneity_p": _rt.rank_sum(cells[0], cells[1], 0.95)["p"]}
    head = _rt.signed_rank(d, level)
    return {**head, "states": 1, "per_state": {}, "state_dependent": False, "heterogeneity_p": math.nan}


def verdict(rd: LayoutRounds, level: float) -> dict:
    """The headline (log scale: estimate, ci_low, ci_high, p), the per-state results and the
    layout spread of a comparison's ``round_data``."""
    if rd.n_layouts > 1:
        v = _lay.layout_verdict(rd.d, rd.layout, rd.state, level, arm_states=rd.arm_states)
        # K is the run's layout pairs; the CI's df come from those with an estimate
        v.update(design="layouts", layouts_estimated=v["layouts"], layouts=rd.n_layouts)
    else:
        v = one_build(rd.d, rd.state, level)
        v.update(design="paired", layouts=1, sigma_layout=math.nan, layout_share=math.nan,
                 layout_sensitive=None)
    v["slow_share"] = rd.fit.slow_share if v["states"] == 2 else 0.0
    return v
