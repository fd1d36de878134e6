"""Verdicts about the code change, not about one binary: the layout is the unit of replication.

A compiled binary is one sample from the space of code and data layouts.  The same source built
with another alignment, another function order or a few bytes of unused code ahead of it can run
several percent faster or slower, and a paired CI over the rounds of one binary pair describes
only that pair.  So an A/B run builds K layouts of each arm (seeded), pairs them, and measures
every pair in randomized blocks of rounds spread over the run.

Analysis (``layout_verdict``, ``LayoutRounds.level_fit``): one fit of the comparison's levels,
d = theta + u_layout + e_round on the per-round log ratios d = ln(candidate / baseline), by REML
(``ringlab.stats.fit``): theta is the mean log ratio (the geometric-mean ratio over layouts and
rounds), its CI Student's t on K - 1 degrees of freedom, p the same t test; sigma_L and the round
SD are the fit's variance components, and ``layout_share`` the layout level's share of the CI's
squared width.  ``layout_sensitive`` when sigma_L exceeds the size of the effect: the answer
depends on where the code lands more than on what it does.

Why a t interval on K - 1 df and not a hierarchical bootstrap: with K = 6-16 layout pairs a
bootstrap over layouts underestimates the spread (its percentile interval is too narrow at small
K), while the t interval is exact for normal layout effects and close for others; the simulations
in tests/test_stats_layouts.py and tests/test_stats_states_designs.py check its coverage with
heavy-tailed round noise, machine states and layout spreads of 1-3.4 points.  Pooling all rounds
into one signed-rank test instead treats the K layouts as if they were one: its A/A rate grows
with sigma_L (``ringlab.simulate.layoutsim``'s "pooled" design).

Machine states (``ringlab.stats.states``) are a diagnostic here and never change theta, its CI or
p: per state, the same fit on the rounds whose two trials both ran in that state
(``state_levels``; a round that straddles a switch is in neither), the test that the two
effects are equal (``heterogeneity_p``) and whether their CIs lie on opposite sides of 0
(``state_dependent``).  A state whose rounds sit in a single layout pair has no fit, and the row
then reports one state.

A comparison's frames reach this analysis through ``round_data`` (a raw.csv with a ``layout``
column: which layout pair every round measured) and ``verdict``.  For a paired comparison of
positive values:

* more than one layout pair: design ``layouts``, the fit above;
* one layout pair (``fixed_build``): design ``paired``, the signed-rank Hodges-Lehmann estimate
  of every paired round, as without a ``layout`` column; the CI describes this binary pair only
  (``one_build``).  Its per-state effects are each state's signed-rank estimate and CI
  (``MIN_STATE_ROUNDS`` rounds each), with a Mann-Whitney test between the two states' rounds as
  the heterogeneity test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.stats import fit as _fit
from ringlab.stats import ranktests
from ringlab.stats import states as _states
from ringlab.stats.contract import ci_side
from ringlab.stats.ranktests import hodges_lehmann, robust_sd
from ringlab.stats.rounds import ROUND_COLUMN, Rounds

#: rounds a layout pair needs for its Hodges-Lehmann estimate (``per_layout``)
MIN_ROUNDS = 1
#: raw.csv's column naming the layout pair (seeded build of each arm) a round measured
LAYOUT_COLUMN = "layout"
#: columns that describe the layout of a trial's binary, never a configuration
LAYOUT_COLUMNS = ("layout", "ring_offset", "env_pad")
#: rounds each state needs for its per-state effect in the one-build design (a 95% signed-rank CI
#: needs 6 rounds)
MIN_STATE_ROUNDS = 8
#: the fewest layout pairs a machine state's rounds must span for its own fit (with one, there is
#: no layout level to fit: ``ringlab.stats.fit.fit`` returns None)
MIN_STATE_LAYOUTS = 2


def per_layout(d, layout) -> dict:
    """layout -> (HL estimate, robust SD of d, rounds) of each layout pair's rounds."""
    d = np.asarray(d, dtype=float)
    layout = np.asarray(layout)
    out = {}
    for k in np.unique(layout):
        m = (layout == k) & np.isfinite(d)
        if m.sum() >= MIN_ROUNDS:
            out[k] = (hodges_lehmann(d[m]), robust_sd(d[m], zero_fallback=False), int(m.sum()))
    return out


def layout_spread(estimates, sds, ns) -> tuple[float, float]:
    """(sigma_L, layout share of var(e_k)) by the method of moments."""
    e = np.asarray(estimates, dtype=float)
    if len(e) < 2:
        return math.nan, math.nan
    total = float(e.var(ddof=1))
    w = math.pi / 3 * np.asarray(sds, dtype=float) ** 2 / np.asarray(ns, dtype=float)
    w = w[np.isfinite(w)]
    if not len(w):          # one round per layout pair: no round noise to take out
        return math.nan, math.nan
    within = float(w.mean())
    between = max(0.0, total - within)
    return math.sqrt(between), (between / total if total > 0 else 0.0)


def state_levels(d, layout, state) -> dict[int, _fit.LevelFit]:
    """Per machine state (0 fast, 1 slow) the fit of the rounds whose two trials both ran in it
    (``state`` -1: the round straddles a switch, in neither); {} unless both states have one
    (each state's rounds in ``MIN_STATE_LAYOUTS`` layout pairs).  A diagnostic that must stay
    cheap: an unbalanced state takes the unweighted pair means, not MixedLM (``fit``'s
    ``mixedlm=False``)."""
    d = np.asarray(d, dtype=float)
    layout, state = np.asarray(layout), np.asarray(state)
    out = {}
    for s in (0, 1):
        m = state == s
        spans = len(np.unique(layout[m])) >= MIN_STATE_LAYOUTS
        f = _fit.fit(d[m], layout[m], mixedlm=False) if spans else None
        if f is None or not math.isfinite(f.se):
            return {}
        out[s] = f
    return out


def state_summary(per: dict, level: float) -> dict:
    """The state fields of a verdict from ``state_levels``' fits: ``states`` (2 with both fits,
    else 1), ``per_state`` {state: estimate, ci_low, ci_high, p at ``level``}, ``heterogeneity_p``
    (t test of equal effects: their difference over sqrt(se_0^2 + se_1^2) on the fewer df, which
    counts the layout offsets both states share twice, so it errs towards "equal") and
    ``state_dependent`` (the per-state CIs lie on opposite sides of 0)."""
    if not per:
        return {"states": 1, "per_state": {}, "heterogeneity_p": math.nan, "state_dependent": False}
    at = {s: f.at(level) for s, f in per.items()}
    ps = {s: {"estimate": f.theta, "ci_low": f.ci_low, "ci_high": f.ci_high, "p": f.p} for s, f in at.items()}
    diff, se = at[1].theta - at[0].theta, math.hypot(at[0].se, at[1].se)
    df = min(at[0].df, at[1].df)
    het = float(2 * sst.t.sf(abs(diff) / se, df)) if se > 0 else (1.0 if diff == 0 else 0.0)
    dirs = {ci_side(p["ci_low"], p["ci_high"]) for p in ps.values()}
    return {"states": 2, "per_state": ps, "heterogeneity_p": het, "state_dependent": {1, -1} <= dirs}


def summary(head: _fit.LevelFit, per: dict, level: float) -> dict:
    """The verdict's fields (log scale) from the comparison's fit ``head`` and the per-state fits
    ``per``: the headline (estimate, ci_low, ci_high, p, se, df) at ``level``, the layout spread
    and the state diagnostic (``state_summary``)."""
    h = head.at(level)
    sl = math.sqrt(h.sigma2_layout) if math.isfinite(h.sigma2_layout) else math.nan
    sr = math.sqrt(h.sigma2_round) if math.isfinite(h.sigma2_round) else math.nan
    return {"estimate": h.theta, "ci_low": h.ci_low, "ci_high": h.ci_high, "p": h.p, "se": h.se, "df": h.df,
            "n": h.layouts, "layouts": h.layouts, "rounds": h.rounds, "sigma_layout": sl, "sigma_round": sr,
            "layout_share": h.layout_share, "layout_sensitive": bool(math.isfinite(sl) and sl > abs(h.theta)),
            "method": h.method, "note": h.note, "level": level, **state_summary(per, level)}


def layout_verdict(d, layout, state=None, level: float = 0.95) -> dict:
    """The effect of the change across layouts (log scale), from per-round log ratios ``d`` and
    each round's layout pair ``layout`` (at least two); ``state``: each round's machine state (0
    fast, 1 slow, -1 a round that straddles a switch) for the state diagnostic, or None."""
    head = _fit.fit(d, layout)
    if head is None:
        raise ValueError("layout: one layout pair has no layout level; the one-build design applies")
    return summary(head, state_levels(d, layout, state) if state is not None else {}, level)


@dataclass(frozen=True)
class LayoutRounds:
    """Per round of one pair of arms: ``d`` = ln(candidate / baseline), its ``layout`` pair and
    machine ``state`` (-1: the round straddles a switch); ``fit``: the state classifier's fit.
    ``level_fit`` and ``state_fits`` are fitted once, at first use, whatever levels the caller
    asks its CIs at."""
    d: np.ndarray
    layout: np.ndarray
    state: np.ndarray
    fit: _states.StateFit

    @property
    def n_layouts(self) -> int:
        return len(set(self.layout))

    @property
    def rounds_per_layout(self) -> float:
        """Mean rounds per layout pair (rounds used, straddling ones included)."""
        return len(self.d) / max(self.n_layouts, 1)

    @cached_property
    def level_fit(self) -> _fit.LevelFit | None:
        """The comparison's fit (``ringlab.stats.fit``); None with one layout pair."""
        return _fit.fit(self.d, self.layout)

    @cached_property
    def state_fits(self) -> dict[int, _fit.LevelFit]:
        """``state_levels`` of the rounds; {} when the classifier found one state."""
        return state_levels(self.d, self.layout, self.state) if self.fit.n_states == 2 else {}


def rounds_from_trials(order, round_id, layout, arm, log_y, classify: bool = True) -> LayoutRounds:
    """Per-round log ratios and states from one pair of arms' trials.

    ``arm`` is 0 for the baseline and 1 for the candidate; every round holds one trial of each.
    The states are those of ``ringlab.stats.states.classify`` on the trials."""
    order = np.asarray(order)
    idx = np.argsort(order, kind="stable")
    rid, lay, arm, y = (np.asarray(a)[idx] for a in (round_id, layout, arm, log_y))
    rounds, inv = np.unique(rid, return_inverse=True)
    d = np.zeros(len(rounds))
    np.add.at(d, inv, np.where(arm == 1, y, -y))
    shift = float(np.median(d)) if len(d) else 0.0
    groups = np.char.add(arm.astype(str), np.char.add(":", lay.astype(str)))
    fit = _states.classify(y - shift * (arm == 1), groups) if classify else _states.StateFit(
        states=np.zeros(len(y), dtype=int), n_states=1, reason="not classified")
    cross = _states.straddles(rid, fit.states)
    rl = np.empty(len(rounds), dtype=lay.dtype)
    rl[inv] = lay
    st = np.empty(len(rounds), dtype=int)
    st[inv] = np.where(cross, -1, fit.states)
    return LayoutRounds(d, rl, st, fit)


# --- a comparison's frames: its rounds and its verdict ----------------------------------------------

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
    return rounds_from_trials(order, rid, lay, arm, y, classify=states)


def one_build(d, state, level: float) -> dict:
    """The one-build verdict (log scale): the signed-rank estimate, CI and p of every round, and
    the per-state diagnostic; ``per_state`` empty unless both states hold ``MIN_STATE_ROUNDS``."""
    d, state = np.asarray(d, dtype=float), np.asarray(state)
    head = ranktests.signed_rank(d, level)
    cells = {s: d[state == s] for s in (0, 1)}
    if not all(len(v) >= MIN_STATE_ROUNDS for v in cells.values()):
        return {**head, "states": 1, "per_state": {}, "state_dependent": False, "heterogeneity_p": math.nan}
    per = {s: ranktests.signed_rank(v, level) for s, v in cells.items()}
    dirs = {ci_side(p["ci_low"], p["ci_high"]) for p in per.values()}
    return {**head, "states": 2, "per_state": per, "state_dependent": {1, -1} <= dirs,
            "heterogeneity_p": ranktests.rank_sum(cells[0], cells[1], 0.95)["p"]}


def verdict(rd: LayoutRounds, level: float) -> dict:
    """The headline (log scale: estimate, ci_low, ci_high, p), the layout spread and the state
    diagnostic of a comparison's ``round_data``."""
    if rd.level_fit is not None:        # more than one layout pair
        v = summary(rd.level_fit, rd.state_fits, level)
        v["design"] = "layouts"
    else:
        v = one_build(rd.d, rd.state, level)
        v.update(design="paired", n=len(rd.d), layouts=1, sigma_layout=math.nan, sigma_round=math.nan,
                 layout_share=math.nan, layout_sensitive=None, note="")
    v["slow_share"] = rd.fit.slow_share if v["states"] == 2 else 0.0
    return v
