"""The layout and machine-state analysis of one comparison (used by ``ringlab.stats.compare``).

A raw.csv with a ``layout`` column says which layout pair (seeded build of each arm) every
round measured.  For a paired comparison of positive values:

* more than one layout pair: design ``layouts``, one fit of the comparison's levels
  (``ringlab.stats.fit``: d = theta + u_layout + e_round by REML, the t interval on K - 1 df);
* one layout pair (``fixed_build``): design ``paired``, the signed-rank Hodges-Lehmann estimate
  of every paired round, as without a ``layout`` column; the CI describes this binary pair only.

Both look for machine states (``ringlab.stats.states``: a two-state Markov model on the
trial-ordered log metric) as a diagnostic only: the headline estimate, its CI and p are the same
whatever states are found.  The per-state effects come from the rounds whose two trials ran in
one state (a round that straddles a switch is in neither): in the layouts design the same fit on
each state's rounds (``ringlab.stats.layouts.state_levels``), in the one-build design each
state's signed-rank estimate and CI (``MIN_STATE_ROUNDS`` rounds each) with a Mann-Whitney test
between the two states' rounds as the heterogeneity test.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ringlab.stats import layouts as _lay
from ringlab.stats import ranktests as _rt
from ringlab.stats.contract import ci_side
from ringlab.stats.layouts import LayoutRounds
from ringlab.stats.rounds import ROUND_COLUMN, Rounds

LAYOUT_COLUMN = "layout"
#: columns that describe the layout of a trial's binary, never a configuration
LAYOUT_COLUMNS = ("layout", "ring_offset", "env_pad")
#: rounds each state needs for its per-state effect in the one-build design (a 95% signed-rank CI
#: needs 6 rounds)
MIN_STATE_ROUNDS = 8


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


def round_data(bsub: pd.DataFrame, csub: pd.DataFrame, metric: str, states: bool = True) -> LayoutRounds | None:
    """Per common round (``Rounds.pair``): d = ln(candidate / baseline), its layout pair and
    machine state (``states=False``: every round in one state, the classifier not run).  None
    when a round key or the layout column is missing or a value is not positive."""
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
    return _lay.rounds_from_trials(order, rid, lay, arm, y, classify=states)


def one_build(d, state, level: float) -> dict:
    """The one-build verdict (log scale): the signed-rank estimate, CI and p of every round, and
    the per-state diagnostic; ``per_state`` empty unless both states hold ``MIN_STATE_ROUNDS``."""
    d, state = np.asarray(d, dtype=float), np.asarray(state)
    head = _rt.signed_rank(d, level)
    cells = {s: d[state == s] for s in (0, 1)}
    if not all(len(v) >= MIN_STATE_ROUNDS for v in cells.values()):
        return {**head, "states": 1, "per_state": {}, "state_dependent": False, "heterogeneity_p": math.nan}
    per = {s: _rt.signed_rank(v, level) for s, v in cells.items()}
    dirs = {ci_side(p["ci_low"], p["ci_high"]) for p in per.values()}
    return {**head, "states": 2, "per_state": per, "state_dependent": {1, -1} <= dirs,
            "heterogeneity_p": _rt.rank_sum(cells[0], cells[1], 0.95)["p"]}


def verdict(rd: LayoutRounds, level: float) -> dict:
    """The headline (log scale: estimate, ci_low, ci_high, p), the layout spread and the state
    diagnostic of a comparison's ``round_data``."""
    if rd.level_fit is not None:        # more than one layout pair
        v = _lay.summary(rd.level_fit, rd.state_fits, level)
        v["design"] = "layouts"
    else:
        v = one_build(rd.d, rd.state, level)
        v.update(design="paired", n=len(rd.d), layouts=1, sigma_layout=math.nan, sigma_round=math.nan,
                 layout_share=math.nan, layout_sensitive=None, note="")
    v["slow_share"] = rd.fit.slow_share if v["states"] == 2 else 0.0
    return v
