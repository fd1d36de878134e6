"""Verdicts about the code change, not about one binary: the layout is the unit of replication.

A compiled binary is one sample from the space of code and data layouts.  The same source built
with another alignment, another function order or a few bytes of unused code ahead of it can run
several percent faster or slower, and a paired CI over the rounds of one binary pair describes
only that pair.  So an A/B run builds K layouts of each arm (seeded), pairs them, and measures
every pair in randomized blocks of rounds spread over the run.

Analysis (``layout_verdict``):

1. per layout pair k, the paired Hodges-Lehmann estimate e_k of the per-round log ratios
   ln(candidate / baseline) (the rounds of that pair only);
2. the effect is the mean of the e_k, with a t interval on K - 1 degrees of freedom.  The
   spread of the e_k holds both the layout spread and the round noise, so the interval covers
   the effect of the change over layouts, not over one binary;
3. the layout spread sigma_L is what the spread of the e_k has beyond the round noise
   (method of moments: var(e_k) minus the mean sampling variance of an HL estimate, pi/3 * s_k^2
   / n_k); ``layout_share`` is its share of var(e_k), hence of the CI's width squared;
4. ``layout_sensitive`` when sigma_L exceeds the size of the effect: the answer depends on
   where the code lands more than on what it does.

Why a t interval across layouts and not a hierarchical bootstrap: with K = 6-16 layout pairs a
bootstrap over layouts underestimates the spread (its percentile interval is too narrow at
small K), while the t interval is exact for normal layout effects and close for others; the
simulations in tests/test_stats_layouts.py check its coverage with heavy-tailed round noise,
machine states and layout spreads of 1-3.4 points.  Pooling all rounds into one signed-rank
test instead treats the K layouts as if they were one: its A/A rate grows with sigma_L.

Machine states (``ringlab.stats.states``): when the run has two states, each layout pair gets
one estimate per state (rounds that straddle a switch are left out), the per-layout headline
is the mean of its per-state estimates (the states weighted equally, so the answer does not
drift with the share of slow trials in a run), and per-state effects are reported with their
own t intervals and a heterogeneity test (paired t test across layouts of the per-state
difference).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sst

from ringlab.stats import ranktests
from ringlab.stats import states as _states
from ringlab.stats.contract import ci_side
from ringlab.stats.robust import hodges_lehmann, robust_sd

#: rounds a layout pair needs (in a state) for its estimate: one will do, since the t interval
#: across layouts takes the spread of the estimates as it is (a pair with few rounds is only noisier)
MIN_ROUNDS = 1
#: a machine state gets its own estimate (and half the headline's weight) only with at least this
#: many rounds, in at least MIN_STATE_LAYOUTS layout pairs that hold both states; a rarer state
#: would put half the weight on an estimate from a handful of rounds (a CI of -90% to +2000%
#: was seen with 4 rounds in the fast state), so its rounds are pooled with the others instead,
#: as in the one-build design (ringlab.stats.designs.one_build, which uses the same 8: a 95%
#: signed-rank CI needs 6 rounds)
MIN_STATE_ROUNDS = 8
MIN_STATE_LAYOUTS = 3


def t_interval(values, level: float = 0.95) -> dict:
    """Mean, its t interval on n - 1 df (``scipy.stats.ttest_1samp``) and the two-sided p of mean = 0."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    m = float(v.mean()) if n else math.nan
    if n < 2:
        return {"estimate": m, "ci_low": math.nan, "ci_high": math.nan, "p": math.nan, "n": n, "df": 0}
    se = float(v.std(ddof=1)) / math.sqrt(n)
    if se == 0:     # no spread: scipy's t statistic is undefined, the interval is the mean itself
        return {"estimate": m, "ci_low": m, "ci_high": m, "p": 1.0 if m == 0 else 0.0, "n": n, "df": n - 1,
                "se": se}
    res = sst.ttest_1samp(v, 0.0)
    ci = res.confidence_interval(level)
    return {"estimate": m, "ci_low": float(ci.low), "ci_high": float(ci.high), "p": float(res.pvalue), "n": n,
            "df": n - 1, "se": se}


def per_layout(d, layout, state=None) -> dict:
    """(layout, state) -> (HL estimate, robust SD of d, rounds).  ``state`` -1 = straddling round."""
    d = np.asarray(d, dtype=float)
    layout = np.asarray(layout)
    state = np.zeros(len(d), dtype=int) if state is None else np.asarray(state)
    out = {}
    for k in np.unique(layout):
        for s in np.unique(state[state >= 0]):
            m = (layout == k) & (state == s) & np.isfinite(d)
            if m.sum() >= MIN_ROUNDS:
                out[(k, int(s))] = (hodges_lehmann(d[m]), robust_sd(d[m], zero_fallback=False), int(m.sum()))
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


def _combine_states(cells: dict, states: list[int]) -> tuple[list, list, list]:
    """Per layout with an estimate in every state: the mean over states (equal weights)."""
    keys = sorted({k for k, _ in cells})
    est, sds, ns = [], [], []
    for k in keys:
        if all((k, s) in cells for s in states):
            est.append(float(np.mean([cells[(k, s)][0] for s in states])))
            sds.append(float(np.sqrt(np.mean([cells[(k, s)][1] ** 2 / len(states) for s in states]))))
            ns.append(float(np.mean([cells[(k, s)][2] for s in states])))
    return est, sds, ns


def _heterogeneity(cells: dict, level: float) -> dict:
    keys = sorted({k for k, _ in cells})
    diff = [cells[(k, 1)][0] - cells[(k, 0)][0] for k in keys if (k, 0) in cells and (k, 1) in cells]
    r = t_interval(diff, level)
    return {"difference": r["estimate"], "p": r["p"], "layouts": len(diff)}


def layout_verdict(d, layout, state=None, level: float = 0.95) -> dict:
    """The effect of the change across layouts (log scale), from per-round log ratios.

    ``d``: ln(candidate / baseline) per round; ``layout``: the round's layout pair; ``state``:
    the round's machine state (0 fast, 1 slow, -1 a round that straddles a switch), or None."""
    cells = per_layout(d, layout, state)
    states = sorted({s for _, s in cells})
    two = len(states) == 2 and _states_estimable(cells)
    if not two:
        cells, states = per_layout(d, layout), [0]
    est, sds, ns = _combine_states(cells, states) if two else (
        [v[0] for v in cells.values()], [v[1] for v in cells.values()], [v[2] for v in cells.values()])
    head = t_interval(est, level)
    sigma_l, share = layout_spread(est, sds, ns)
    out = {**head, "layouts": len(est), "sigma_layout": sigma_l, "layout_share": share,
           "layout_sensitive": bool(np.isfinite(sigma_l) and sigma_l > abs(head["estimate"])),
           "states": len(states), "per_state": {}, "heterogeneity_p": math.nan,
           "state_dependent": False, "level": level}
    if two:
        for s in states:
            out["per_state"][s] = t_interval([v[0] for (k, st), v in cells.items() if st == s], level)
        out["heterogeneity_p"] = _heterogeneity(cells, level)["p"]
        dirs = {ci_side(r["ci_low"], r["ci_high"]) for r in out["per_state"].values()}
        out["state_dependent"] = {1, -1} <= dirs
    return out


def _states_estimable(cells: dict) -> bool:
    """Whether both states hold MIN_STATE_ROUNDS rounds and MIN_STATE_LAYOUTS layout pairs hold both."""
    rounds = {s: sum(v[2] for (_, st), v in cells.items() if st == s) for s in (0, 1)}
    both = {k for k, s in cells if s == 0} & {k for k, s in cells if s == 1}
    return min(rounds.values()) >= MIN_STATE_ROUNDS and len(both) >= MIN_STATE_LAYOUTS


def pooled_signed_rank(d, level: float = 0.95) -> dict:
    """The one-binary analysis applied to every round at once (for comparison in benchmarks)."""
    return ranktests.signed_rank(np.asarray(d, dtype=float), level)


@dataclass(frozen=True)
class LayoutRounds:
    """Per round of one pair of arms: ``d`` = ln(candidate / baseline), its ``layout`` pair and
    machine ``state`` (-1: the round straddles a switch); ``fit``: the state model's fit."""
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
