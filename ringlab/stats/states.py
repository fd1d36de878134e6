"""Machine states: which trials ran while the machine was fast and which while it was slow.

A virtual machine (and a laptop, or a host with a noisy neighbour) switches between a fast and
a slow state that lasts many trials and can change in the middle of a round.  A change whose cost
depends on the state (a few more instructions hidden in the fast state, exposed in the slow one)
then has a different effect in each, and a run's estimate, the geometric mean over its rounds,
moves with the share of slow trials in the run.  This module says which trials ran in which
state, so that a compare() row can report how often each state occurred and the effect in each
(``ringlab.stats.layouts``): a diagnostic beside the estimate, which never depends on it.

Method: a two-state hidden Markov model with Gaussian emissions on the trial-ordered log
metric, fitted by EM (Baum-Welch) and decoded by Viterbi.  Each arm's own level (its median,
per layout when there are layouts) is taken out first, so that a large effect of the change is
not mistaken for a state.

Why a Markov model rather than change points: the states recur (fast, slow, fast, ...).  A
change-point method cuts the series into segments but does not say which segments share a
level; the Markov model ties every segment to one of two levels, and its transition
probabilities give the mean duration of each state directly.  Why not a mixture on round
means: a switch inside a round puts the two arms of that round in different states, which only a
per-trial classification can see.

Two states are accepted only when the data need them:

* the two-state fit beats one Gaussian by ``MIN_BIC_GAIN`` in BIC;
* the levels are ``MIN_SEPARATION`` within-state SDs apart;
* each state holds ``MIN_SHARE`` of the trials and lasts ``MIN_DURATION`` trials on average
  (heavy-tailed single outliers are not a state).

Otherwise the run has one state and reads as a single-state run.

Why our own EM and Viterbi rather than statsmodels' ``MarkovRegression`` (k_regimes=2, a
switching constant, one shared variance), which fits the same model: measured on simulated A/A
runs of 8 layout pairs x 20 rounds (320 trials, ``ringlab.simulate.noise``), both give the same
trial labels (100% agreement in 4 of 4 runs) and the same levels, but ``MarkovRegression.fit``
took 0.9-1.5 s per fit against 1-20 ms here, and ``classify`` fits twice per comparison: a run
folder with a few dozen layout comparisons would spend minutes in ``ringlab summarize``.  In one
of the four runs it also stopped at another optimum (state SD 0.034 against 0.0265, with a
convergence warning).  So the 60-line fit stays.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_BIC_GAIN = 10.0
MIN_SEPARATION = 3.0
MIN_SHARE = 0.05
MIN_DURATION = 3.0
MAX_ITER = 200
TOL = 1e-6


@dataclass
class StateFit:
    """The states of a run's trials, in the order they ran."""

    #: per trial: 0 = fast (lower metric), 1 = slow; all 0 when ``n_states`` is 1
    states: np.ndarray
    n_states: int
    #: level of each state (log scale, arm levels taken out), fast first
    levels: tuple[float, ...] = ()
    sd: float = float("nan")
    #: share of trials in the slow state
    slow_share: float = 0.0
    #: mean run length of each state, in trials
    mean_duration: tuple[float, ...] = ()
    bic_gain: float = 0.0
    #: why two states were not accepted (empty when they were)
    reason: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"n_states": self.n_states, "levels": list(self.levels), "sd": self.sd,
                "slow_share": self.slow_share, "mean_duration": list(self.mean_duration),
                "bic_gain": self.bic_gain, "reason": self.reason}


def _normal_logpdf(x: np.ndarray, mu: np.ndarray, sd: float) -> np.ndarray:
    return -0.5 * ((x[:, None] - mu[None, :]) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)


def _forward_backward(logb: np.ndarray, A: np.ndarray, pi: np.ndarray):
    """Scaled forward-backward: posteriors, expected transitions and the log-likelihood.

    Two states, so the recursions run on plain floats (a numpy call per trial costs more than
    the arithmetic)."""
    n = len(logb)
    shift = logb.max(axis=1)
    b0, b1 = np.exp(logb[:, 0] - shift).tolist(), np.exp(logb[:, 1] - shift).tolist()
    a00, a01, a10, a11 = (float(v) for v in A.ravel())
    f0, f1, c = [0.0] * n, [0.0] * n, [0.0] * n
    x0, x1 = float(pi[0]) * b0[0], float(pi[1]) * b1[0]
    for t in range(n):
        if t:
            p0, p1 = f0[t - 1], f1[t - 1]
            x0 = (p0 * a00 + p1 * a10) * b0[t]
            x1 = (p0 * a01 + p1 * a11) * b1[t]
        ct = x0 + x1
        c[t], f0[t], f1[t] = ct, x0 / ct, x1 / ct
    g0, g1 = [1.0] * n, [1.0] * n
    for t in range(n - 2, -1, -1):
        u0, u1 = b0[t + 1] * g0[t + 1], b1[t + 1] * g1[t + 1]
        ct = c[t + 1]
        g0[t], g1[t] = (a00 * u0 + a01 * u1) / ct, (a10 * u0 + a11 * u1) / ct
    F = np.column_stack([f0, f1])
    G = np.column_stack([g0, g1])
    B = np.column_stack([b0, b1])
    C = np.asarray(c)
    gamma = F * G
    xi = (F[:-1, :, None] * A[None] * (B[1:] * G[1:])[:, None, :]) / C[1:, None, None]
    loglik = float(np.log(C).sum() + shift.sum())
    return gamma, xi.sum(axis=0), loglik


def _two_means(x: np.ndarray) -> tuple[np.ndarray, float]:
    """The split of the sorted values into a low and a high group with the least squared error."""
    v = np.sort(x)
    n = len(v)
    k = np.arange(1, n)
    cs = np.cumsum(v)
    cs2 = np.cumsum(v * v)
    left = cs2[:-1] - cs[:-1] ** 2 / k
    right = (cs2[-1] - cs2[:-1]) - (cs[-1] - cs[:-1]) ** 2 / (n - k)
    lo = max(2, n // 50)                       # neither group is a couple of outliers
    i = lo - 1 + int(np.argmin((left + right)[lo - 1:n - lo]))
    mu = np.array([v[:i + 1].mean(), v[i + 1:].mean()])
    sd = max(float(np.sqrt(max(left[i] + right[i], 0.0) / n)), 1e-9)
    return mu, sd


def _em(x: np.ndarray):
    """Baum-Welch for two Gaussian states with a shared SD, started from the best 2-means split."""
    mu, sd = _two_means(x)
    A = np.array([[0.95, 0.05], [0.05, 0.95]])
    pi = np.array([0.5, 0.5])
    prev = -np.inf
    for _ in range(MAX_ITER):
        gamma, xi, ll = _forward_backward(_normal_logpdf(x, mu, sd), A, pi)
        w = gamma.sum(axis=0)
        if w.min() < 1e-9:
            break
        mu = (gamma * x[:, None]).sum(axis=0) / w
        sd = max(float(np.sqrt((gamma * (x[:, None] - mu) ** 2).sum() / len(x))), 1e-9)
        A = xi / xi.sum(axis=1, keepdims=True)
        pi = gamma[0]
        if ll - prev < TOL * abs(ll):
            break
        prev = ll
    return mu, sd, A, pi, ll


def _viterbi(logb: np.ndarray, A: np.ndarray, pi: np.ndarray) -> np.ndarray:
    n = len(logb)
    la00, la01, la10, la11 = (float(v) for v in np.log(np.maximum(A, 1e-300)).ravel())
    l0, l1 = logb[:, 0].tolist(), logb[:, 1].tolist()
    lp = np.log(np.maximum(pi, 1e-300))
    d0, d1 = float(lp[0]) + l0[0], float(lp[1]) + l1[0]
    back0, back1 = [0] * n, [0] * n
    for t in range(1, n):
        s00, s10 = d0 + la00, d1 + la10
        s01, s11 = d0 + la01, d1 + la11
        back0[t] = 0 if s00 >= s10 else 1
        back1[t] = 0 if s01 >= s11 else 1
        d0, d1 = max(s00, s10) + l0[t], max(s01, s11) + l1[t]
    path = np.empty(n, dtype=int)
    cur = 0 if d0 >= d1 else 1
    path[-1] = cur
    for t in range(n - 1, 0, -1):
        cur = back0[t] if cur == 0 else back1[t]
        path[t - 1] = cur
    return path


def _run_lengths(states: np.ndarray) -> dict[int, float]:
    edges = np.flatnonzero(np.diff(states)) + 1
    starts = np.r_[0, edges]
    lengths = np.diff(np.r_[starts, len(states)])
    out = {}
    for s in (0, 1):
        ls = lengths[states[starts] == s]
        out[s] = float(ls.mean()) if len(ls) else 0.0
    return out


def _fit(x: np.ndarray) -> StateFit:
    n = len(x)
    one = StateFit(states=np.zeros(n, dtype=int), n_states=1)
    if n < 20 or not np.isfinite(x).all() or np.ptp(x) == 0:
        one.reason = "too few trials to look for states" if n < 20 else "no spread"
        return one
    mu, sd, A, pi, ll2 = _em(x)
    sd1 = max(float(np.std(x)), 1e-12)
    ll1 = float(np.sum(-0.5 * ((x - x.mean()) / sd1) ** 2 - np.log(sd1) - 0.5 * np.log(2 * np.pi)))
    gain = 2 * (ll2 - ll1) - 4 * np.log(n)   # 4 more parameters: a level, two transitions, a start
    order = np.argsort(mu)
    mu, A, pi = mu[order], A[np.ix_(order, order)], pi[order]
    states = _viterbi(_normal_logpdf(x, mu, sd), A, pi)
    share = float(states.mean())
    dur = _run_lengths(states)
    sep = (mu[1] - mu[0]) / sd
    why = ("the two-state model does not fit better (BIC)" if gain < MIN_BIC_GAIN else
           f"levels only {sep:.1f} SDs apart" if sep < MIN_SEPARATION else
           "one state holds too few trials" if min(share, 1 - share) < MIN_SHARE else
           "states too short to be states (outliers)" if min(dur.values()) < MIN_DURATION else "")
    if why:
        one.reason, one.bic_gain, one.sd = why, float(gain), sd1
        return one
    return StateFit(states=states, n_states=2, levels=(float(mu[0]), float(mu[1])), sd=sd,
                    slow_share=share, mean_duration=(dur[0], dur[1]), bic_gain=float(gain))


def _state_offsets(y: np.ndarray, groups: np.ndarray, fit: StateFit) -> np.ndarray:
    """``y`` minus each group's own level, measured against the state level of each trial.

    A group of one trial keeps its value: its own level would be the trial itself, and taking it
    out would leave the first fit's levels with no spread (a round per layout pair)."""
    level = np.asarray(fit.levels)[fit.states]
    out = np.array(y, dtype=float)
    for g in np.unique(groups):
        m = groups == g
        if m.sum() > 1:
            out[m] = y[m] - np.median(y[m] - level[m])
    return out


def classify(log_y, groups=None) -> StateFit:
    """The state of each trial, given the log metric in the order the trials ran.

    The caller takes the change's own effect out of ``log_y`` first (for an A/B run: the median
    per-round log ratio, subtracted from the candidate's trials; per-arm medians would not do,
    since an arm's median falls on either level when its trials are half slow).  ``groups`` (an
    arm × layout label) then refines the fit: each group's own level is measured against the
    state of each of its trials and taken out, and the states are fitted again."""
    y = np.asarray(log_y, dtype=float)
    fit = _fit(y - np.median(y) if len(y) else y)
    if groups is None or fit.n_states == 1:
        return fit
    return _fit(_state_offsets(y - np.median(y), np.asarray(groups), fit))


def straddles(round_ids, states) -> np.ndarray:
    """Per trial: True when its round holds trials in more than one state (a switch inside it)."""
    _, inv = np.unique(np.asarray(round_ids), return_inverse=True)
    s = np.asarray(states)
    lo = np.full(inv.max() + 1, np.iinfo(s.dtype).max if s.dtype.kind == "i" else np.inf)
    hi = np.full(inv.max() + 1, np.iinfo(s.dtype).min if s.dtype.kind == "i" else -np.inf)
    np.minimum.at(lo, inv, s)
    np.maximum.at(hi, inv, s)
    return (lo != hi)[inv]
