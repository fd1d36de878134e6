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

Machine states (``ringlab.stats.states``): when the run has two states, the state of each
arm's trial in a round is a covariate.  Per round, with s_b and s_c the states (0 fast, 1 slow)
of the baseline's and the candidate's trial,

    d = theta + g_c (s_c - 1/2) - g_b (s_b - 1/2) + u_k + e

where g_b and g_c are the two arms' slow-state gaps, u_k the layout pair's own offset (mean 0
over layouts) and e the round noise.  theta is the effect with the states weighted equally (so
the answer does not drift with the share of slow trials in a run), theta -/+ (g_c - g_b) / 2
the effect in the fast / slow state and g_c - g_b their difference.  The model is fitted by
least squares over every round, each layout pair weighted equally, and the CIs come from the
jackknife over layout pairs (delete one pair, refit) with a t quantile on m - 1 df, m the
layout pairs that hold trials of the rarer state (K when every pair holds both): the layout
pair stays the unit of replication, the estimation error of the two gaps is inside each
replicate, and a state seen in few pairs is known from those pairs only.  A round that straddles a switch is used (its two trials' states say how), so the
model holds at a round per layout pair and with switches inside rounds; with one state it is
the t interval above.  Where a state's rounds sit in a single layout pair (the jackknife would
lose it), or only one state is seen, the rounds read as one state.
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
#: the fewest layout pairs that must hold trials of each state for the state model (with fewer,
#: deleting one pair in the jackknife would leave a state unseen)
MIN_STATE_LAYOUTS = 2
#: rounds a state needs in the one-build design (``ringlab.stats.designs.one_build``: a 95%
#: signed-rank CI needs 6 rounds)
MIN_STATE_ROUNDS = 8


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


#: contrasts of the state model's coefficients (theta, g_c, -g_b)
_CONTRASTS = {"effect": np.array([1.0, 0.0, 0.0]), "difference": np.array([0.0, 1.0, 1.0]),
              0: np.array([1.0, -0.5, -0.5]), 1: np.array([1.0, 0.5, 0.5])}


def _wls(X: np.ndarray, d: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares (minimum-norm where the columns are collinear) and the projection
    onto the row space of X: a contrast c is estimable when c @ P == c."""
    sw = np.sqrt(w)[:, None]
    Xw = X * sw
    pinv = np.linalg.pinv(Xw)
    return pinv @ (d * sw[:, 0]), pinv @ Xw


def _estimable(P: np.ndarray) -> bool:
    return all(np.allclose(c @ P, c, atol=1e-8) for c in _CONTRASTS.values())


def state_model(d, layout, arm_states, level: float = 0.95) -> dict | None:
    """The state model of the module docstring: per contrast (``"effect"``, ``"difference"``,
    state 0, state 1) the estimate, its jackknife t interval across layout pairs and p; plus the
    per-pair state-adjusted estimates ``pairs``.  None where the model cannot be estimated (one
    state seen, a state in fewer than MIN_STATE_LAYOUTS pairs, fewer than 3 pairs)."""
    d = np.asarray(d, dtype=float)
    layout = np.asarray(layout)
    s = np.asarray(arm_states, dtype=float).reshape(len(d), 2)
    ok = np.isfinite(d) & np.isfinite(s).all(axis=1) & (s >= 0).all(axis=1)
    d, layout, s = d[ok], layout[ok], s[ok]
    keys, inv = np.unique(layout, return_inverse=True)
    K = len(keys)
    if K < 3:
        return None
    holding = min(len(np.unique(inv[(s == st).any(axis=1)])) for st in (0, 1))
    if holding < MIN_STATE_LAYOUTS:
        return None
    n_k = np.bincount(inv, minlength=K).astype(float)
    w = 1.0 / n_k[inv]
    X = np.column_stack([np.ones(len(d)), s[:, 1] - 0.5, s[:, 0] - 0.5])
    beta, P = _wls(X, d, w)
    if not _estimable(P):
        return None
    reps = np.empty((K, 3))
    for k in range(K):
        m = inv != k
        bk, Pk = _wls(X[m], d[m], w[m])
        if not _estimable(Pk):
            return None
        reps[k] = bk
    # a state seen in m layout pairs is known from m pairs only: its contrasts' jackknife rests
    # on m - 1 degrees of freedom, not K - 1
    df = max(1, min(K, holding) - 1)
    q = float(sst.t.ppf(0.5 + level / 2, df))
    out = {}
    for name, c in _CONTRASTS.items():
        est = float(c @ beta)
        r = reps @ c
        se = math.sqrt(max(0.0, (K - 1) / K * float(((r - r.mean()) ** 2).sum())))
        if se == 0:
            out[name] = {"estimate": est, "ci_low": est, "ci_high": est, "p": 1.0 if est == 0 else 0.0,
                         "n": K, "df": df, "se": se}
            continue
        out[name] = {"estimate": est, "ci_low": est - q * se, "ci_high": est + q * se,
                     "p": float(2 * sst.t.sf(abs(est) / se, df)), "n": K, "df": df, "se": se}
    adj = d - X[:, 1:] @ beta[1:]
    pairs = np.bincount(inv, weights=adj, minlength=K) / n_k
    resid = adj - pairs[inv]
    ss = np.bincount(inv, weights=resid ** 2, minlength=K)
    within = np.where(n_k > 1, ss / np.maximum(n_k - 1, 1) / n_k, np.nan)
    out["pairs"] = pairs
    out["within"] = within
    return out


def _spread_of_pairs(pairs: np.ndarray, within: np.ndarray) -> tuple[float, float]:
    """(sigma_L, layout share) of state-adjusted per-pair means (method of moments)."""
    if len(pairs) < 2:
        return math.nan, math.nan
    total = float(np.var(pairs, ddof=1))
    w = within[np.isfinite(within)]
    if not len(w):
        return math.nan, math.nan
    between = max(0.0, total - float(w.mean()))
    return math.sqrt(between), (between / total if total > 0 else 0.0)


def arm_states_of(state) -> np.ndarray:
    """Per round (baseline, candidate) states from one state per round: -1 (a round that
    straddles a switch, arms unknown) becomes NaN, and the round is left out of the state model."""
    st = np.asarray(state, dtype=float)
    st = np.where(st >= 0, st, np.nan)
    return np.column_stack([st, st])


def layout_verdict(d, layout, state=None, level: float = 0.95, arm_states=None) -> dict:
    """The effect of the change across layouts (log scale), from per-round log ratios.

    ``d``: ln(candidate / baseline) per round; ``layout``: the round's layout pair;
    ``arm_states``: per round the (baseline, candidate) trial's machine state (0 fast, 1 slow),
    or ``state``: one state per round (-1 a round that straddles a switch), or neither."""
    d = np.asarray(d, dtype=float)
    if arm_states is None and state is not None:
        arm_states = arm_states_of(state)
    model = state_model(d, layout, arm_states, level) if arm_states is not None else None
    if model is None:
        cells = per_layout(d, layout)
        est = [v[0] for v in cells.values()]
        head = t_interval(est, level)
        sigma_l, share = layout_spread(est, [v[1] for v in cells.values()], [v[2] for v in cells.values()])
        n_states = 1
    else:
        head = {k: model["effect"][k] for k in ("estimate", "ci_low", "ci_high", "p", "n", "df", "se")}
        est = model["pairs"]
        sigma_l, share = _spread_of_pairs(model["pairs"], model["within"])
        n_states = 2
    out = {**head, "layouts": len(est), "sigma_layout": sigma_l, "layout_share": share,
           "layout_sensitive": bool(np.isfinite(sigma_l) and sigma_l > abs(head["estimate"])),
           "states": n_states, "per_state": {}, "heterogeneity_p": math.nan,
           "state_dependent": False, "level": level}
    if model is not None:
        out["per_state"] = {s: model[s] for s in (0, 1)}
        out["heterogeneity_p"] = model["difference"]["p"]
        dirs = {ci_side(r["ci_low"], r["ci_high"]) for r in out["per_state"].values()}
        out["state_dependent"] = {1, -1} <= dirs
    return out


def pooled_signed_rank(d, level: float = 0.95) -> dict:
    """The one-binary analysis applied to every round at once (for comparison in benchmarks)."""
    return ranktests.signed_rank(np.asarray(d, dtype=float), level)


@dataclass(frozen=True)
class LayoutRounds:
    """Per round of one pair of arms: ``d`` = ln(candidate / baseline), its ``layout`` pair and
    machine ``state`` (-1: the round straddles a switch); ``fit``: the state model's fit;
    ``arm_states``: per round the (baseline, candidate) trial's state (rounds x 2)."""
    d: np.ndarray
    layout: np.ndarray
    state: np.ndarray
    fit: _states.StateFit
    arm_states: np.ndarray | None = None

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
    arms = np.zeros((len(rounds), 2))
    arms[inv, arm] = fit.states
    return LayoutRounds(d, rl, st, fit, arms if fit.n_states == 2 else None)
