"""One fit of a comparison's levels: d = theta + u_layout + e_round, by REML.

A layouts run (K seeded builds of each arm, paired: K layout pairs) measures both arms in every
round, and its per-round log ratios d = ln(candidate / baseline) hold the levels of Kalibera &
Jones ("Rigorous benchmarking in reasonable time", ISMM 2013) below the run: the layout pair
and the round (the in-process iterations are reduced to their median before d is formed).  So

    d = theta + u_k + e,    u_k ~ N(0, sigma_L^2) per layout pair k,  e ~ N(0, sigma_R^2) per round.

theta, the mean log ratio, is the log of the geometric-mean ratio candidate/baseline over layouts
and rounds: the estimand is fixed before the data are seen, whatever machine states the rounds
ran in (``ringlab.stats.states`` only describes them).

``fit`` fits the model by REML with statsmodels' ``MixedLM`` (a random intercept per layout
pair).  The CI is Student's t on K - 1 degrees of freedom with the fit's SE of theta, p the same
t test, so p <= 1 - level exactly when the CI excludes 0: the layout pair is the unit of
replication, and with K = 4-16 pairs a normal quantile would be too narrow.

Balanced designs (every layout pair measured in n rounds) have the one-way ANOVA REML solution
in closed form, and ``fit`` takes it: simulations fit 10^5 comparisons and MixedLM takes about
30 ms per fit.  With the pair means m_k, MSB = n var(m_k) and MSW the pooled within-pair variance:

* theta = mean(d) and SE^2 = MSB / (K n) = var(m_k) / K: (theta - true) / SE is then exactly
  Student's t on K - 1 df whatever sigma_L is, so the CI keeps its level;
* MSB >= MSW: sigma_R^2 = MSW, sigma_L^2 = (MSB - MSW) / n;
* MSB < MSW (the REML layout variance is 0): sigma_R^2 = sum (d - theta)^2 / (N - 1), the pooled
  rounds' variance.  The SE stays MSB's: the pooled rounds' SE is larger there, and on K - 1 df
  it makes a 5% test reject 3.4-4.9% of the time in simulation (K = 8-30, n = 2-20, the layout
  SD a fifth of the rounds'), which a family of six rows compounds to under 4%;
* n = 1 (one round per pair): the two levels cannot be told apart; SE^2 = var(d) / K and both
  components are NaN.

MixedLM gives the same theta, SE and components on balanced data (tests/test_fit.py), and fits
every unbalanced design; where its layout variance is 0 the SE is the weighted MSB's,
sum n_k (m_k - theta)^2 / ((K - 1) N), which is MSB / N when the design is balanced.  Where it
does not converge (statsmodels' ConvergenceWarning other than its boundary notice, or a result
that is not finite) the fit falls back to the closed form of the
unweighted pair means (theta = mean(m_k), SE = sd(m_k) / sqrt(K)) and says so in ``note``.  One
layout pair (K = 1) has no layout level: ``fit`` returns None and the caller keeps the one-build
design.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np
import statsmodels.api as sm
from statsmodels.tools.sm_exceptions import ConvergenceWarning
from scipy import stats as sst

#: how the fit was made (``LevelFit.method``)
CLOSED_FORM = "closed form (balanced)"
MIXEDLM = "MixedLM (REML)"
PAIR_MEANS = "unweighted pair means"
#: MixedLM's optimisers, tried in turn: derivative-free first.  statsmodels' default (BFGS, then
#: L-BFGS, CG) stopped short of the REML optimum in 16 of 120 simulated balanced designs (K = 4-16,
#: n = 2-20, layout variance 0 to 2.25 times the round variance), most near sigma_L^2 = 0, and
#: L-BFGS once raised on a singular matrix; Powell agreed with the closed form in all 120
MIXEDLM_METHODS = ("powell", "nm")
#: a REML layout variance below this share of the rounds' variance is the boundary, 0
#: (MixedLM's optimiser stops near, not at, 0)
ZERO_SHARE = 1e-6


@dataclass(frozen=True)
class LevelFit:
    """The fit of one comparison (log scale): ``theta`` with its ``se`` on ``df`` = K - 1 degrees
    of freedom, the t CI at ``level`` and the t test's two-sided ``p``; the variance components
    ``sigma2_layout`` and ``sigma2_round``; ``layouts`` (K) and ``rounds`` (N) fitted; ``method``
    (``CLOSED_FORM``, ``MIXEDLM`` or ``PAIR_MEANS``) and a ``note`` where the fit fell back."""
    theta: float
    se: float
    df: int
    level: float
    ci_low: float
    ci_high: float
    p: float
    sigma2_layout: float
    sigma2_round: float
    layouts: int
    rounds: int
    method: str
    #: the layout level's share of the variance of one pair's mean, sigma_L^2 / (sigma_L^2 +
    #: sigma_R^2 x mean(1 / n_k)): in a balanced design its share of the CI's squared width
    layout_share: float = math.nan
    note: str = ""

    def at(self, level: float) -> LevelFit:
        """The same fit with its CI at ``level`` (p does not depend on it)."""
        lo, hi = _ci(self.theta, self.se, self.df, level)
        return replace(self, level=float(level), ci_low=lo, ci_high=hi)


def _ci(theta: float, se: float, df: int, level: float) -> tuple[float, float]:
    if not (math.isfinite(se) and df >= 1):
        return math.nan, math.nan
    q = float(sst.t.ppf(0.5 + level / 2, df))
    return theta - q * se, theta + q * se


def _p(theta: float, se: float, df: int) -> float:
    if not (math.isfinite(se) and df >= 1):
        return math.nan
    if se == 0:     # no spread: the t statistic is undefined, the estimate is exact
        return 1.0 if theta == 0 else 0.0
    return float(2 * sst.t.sf(abs(theta) / se, df))


def _balanced(d: np.ndarray, inv: np.ndarray, K: int, n: int) -> tuple[float, float, float, float]:
    """(theta, se, sigma2_layout, sigma2_round): the one-way ANOVA REML solution (module docstring)."""
    y = d[np.argsort(inv, kind="stable")].reshape(K, n)
    means = y.mean(axis=1)
    theta = float(means.mean())
    N = K * n
    if n == 1:
        return theta, float(d.std(ddof=1)) / math.sqrt(K), math.nan, math.nan
    msb = n * float(means.var(ddof=1))
    msw = float(((y - means[:, None]) ** 2).sum()) / (K * (n - 1))
    if msb >= msw:
        return theta, math.sqrt(msb / N), (msb - msw) / n, msw
    s2 = float(((d - theta) ** 2).sum()) / (N - 1)
    return theta, math.sqrt(msb / N), 0.0, s2


def _msb_se(d: np.ndarray, inv: np.ndarray, theta: float) -> float:
    """sqrt(sum n_k (m_k - theta)^2 / ((K - 1) N)): the SE of theta from the spread of the layout
    pairs' means m_k, weighted by their rounds n_k (MSB / N in a balanced design)."""
    n_k = np.bincount(inv).astype(float)
    means = np.bincount(inv, weights=d) / n_k
    return math.sqrt(float((n_k * (means - theta) ** 2).sum()) / ((len(n_k) - 1) * len(d)))


def _pair_means(d: np.ndarray, inv: np.ndarray, n_k: np.ndarray) -> tuple[float, float, float, float]:
    """(theta, se, sigma2_layout, sigma2_round) from the unweighted pair means."""
    K, N = len(n_k), len(d)
    means = np.bincount(inv, weights=d, minlength=K) / n_k
    theta = float(means.mean())
    var_m = float(means.var(ddof=1))
    s2r = float(((d - means[inv]) ** 2).sum()) / (N - K) if N > K else math.nan
    s2l = max(0.0, var_m - s2r * float(np.mean(1.0 / n_k))) if math.isfinite(s2r) else math.nan
    return theta, math.sqrt(var_m / K), s2l, s2r


def _mixedlm(d: np.ndarray, inv: np.ndarray) -> tuple[float, float, float, float] | None:
    """(theta, se, sigma2_layout, sigma2_round) by statsmodels' MixedLM (REML), or None where it
    did not converge.  The data are standardised first: MixedLM's boundary notice and its
    optimisers' tolerances are absolute, and log ratios of a few percent sit far below them."""
    c, s = float(d.mean()), float(d.std(ddof=1))
    z = (d - c) / s
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            res = sm.MixedLM(z, np.ones((len(z), 1)), groups=inv).fit(reml=True, method=list(MIXEDLM_METHODS))
            s2l, s2r = float(np.asarray(res.cov_re)[0, 0]), float(res.scale)
            fe, bse = float(np.asarray(res.fe_params)[0]), float(np.asarray(res.bse_fe)[0])
        except (np.linalg.LinAlgError, ValueError):
            return None
    if not (res.converged and all(map(math.isfinite, (s2l, s2r, fe)))) or s2r <= 0 or s2l < 0:
        return None
    if s2l <= ZERO_SHARE * s2r:
        # the boundary: with sigma_L^2 = 0 the REML sigma_R^2 is the pooled rounds' variance,
        # sum (d - mean)^2 / (N - 1), and theta their mean.  Taken from the data, not from the
        # result: statsmodels' L-BFGS fit that lands exactly on 0 reports another scale (and an
        # infinite log-likelihood).  The SE is the weighted MSB's, as in a balanced design
        return c, _msb_se(d, inv, c), 0.0, s * s
    # the boundary notice is about sigma_L^2, handled above; "Retrying" is followed by a converged fit
    trouble = [w for w in caught if issubclass(w.category, ConvergenceWarning)
               and "boundary" not in str(w.message) and "Retrying" not in str(w.message)]
    if trouble or not (math.isfinite(bse) and bse > 0):
        return None
    return c + s * fe, s * bse, s * s * s2l, s * s * s2r


def fit(d, layout, level: float = 0.95, mixedlm: bool = True, closed_form: bool = True) -> LevelFit | None:
    """The REML fit of d = theta + u_layout + e_round (module docstring) of the per-round log
    ratios ``d`` and each round's layout pair ``layout``; None with fewer than 2 layout pairs.
    Balanced designs take the closed form (``closed_form`` False: MixedLM, as the tests compare
    them); unbalanced ones MixedLM, or with ``mixedlm`` False the unweighted pair means (for
    diagnostics that must stay cheap)."""
    d = np.asarray(d, dtype=float)
    layout = np.asarray(layout)
    ok = np.isfinite(d)
    d, layout = d[ok], layout[ok]
    _, inv = np.unique(layout, return_inverse=True)
    n_k = np.bincount(inv).astype(float)
    K, N = len(n_k), len(d)
    if K < 2:
        return None
    note = ""
    balanced = bool(np.all(n_k == n_k[0]))
    if float(d.std(ddof=1)) == 0:
        theta, se, s2l, s2r = float(d.mean()), 0.0, 0.0, 0.0
        method = CLOSED_FORM if balanced else PAIR_MEANS
    elif balanced and (closed_form or n_k[0] == 1):
        theta, se, s2l, s2r = _balanced(d, inv, K, int(n_k[0]))
        method = CLOSED_FORM
    else:
        got = _mixedlm(d, inv) if mixedlm else None
        if got is not None:
            (theta, se, s2l, s2r), method = got, MIXEDLM
        else:
            (theta, se, s2l, s2r), method = _pair_means(d, inv, n_k), PAIR_MEANS
            if mixedlm:
                note = "the MixedLM fit did not converge: the CI is the t interval of the unweighted layout-pair means"
    share = math.nan
    if math.isfinite(s2l) and math.isfinite(s2r):
        unit = s2l + s2r * float(np.mean(1.0 / n_k))
        share = s2l / unit if unit > 0 else 0.0
    df = K - 1
    lo, hi = _ci(theta, se, df, level)
    return LevelFit(theta, se, df, float(level), lo, hi, _p(theta, se, df), s2l, s2r, K, N, method, share, note)
