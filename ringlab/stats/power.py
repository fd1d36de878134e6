"""How many trials per arm (rounds) a comparison needs.

``plan_more`` is what ``compare`` reports as ``trials_needed`` for a row that is not settled
(inconclusive, or not significant after Holm): the rounds, or for the layouts design the layout
pairs, that bring the CI half-width the verdict rests on to the run's target, at the variances
the run measured.  The target is the equivalence margin (``ringlab.stats.decide``), or a staged
run's ``target_ci`` when the caller gives it: a CI that narrow either excludes 0 or lies within
+-target, so the row is then decided.  The plan never reads the observed effect: planning from
it is post-hoc power, which only restates the p-value (a row whose effect happens to be small
would be sent after an ever larger run), and a plan that depends on the estimate is a look
whose size depends on its sign.

* paired design: sigma the robust spread of the run's per-round differences
  d = ln(candidate/baseline) (1.4826 x MAD about their median: it does not move with their
  centre, the effect), and the signed-rank (Hodges-Lehmann) CI half-width
  z_{1-a/2} sigma sqrt(pi / (3 n)), so n = z_{1-a/2}^2 sigma^2 / h^2 x pi/3 with
  h = ln(1 + target) (pi/3: the Wilcoxon/Hodges-Lehmann efficiency relative to the t interval
  for normal data);
* unpaired design: the same with the pooled robust spread of each arm's log round values and
  a factor 2 (two independent samples);
* layouts design: the variance of one layout pair's estimate as measured (layout spread plus
  round noise at the run's rounds per layout), and the least K with
  t_{1-a/2,K-1} sqrt(var / K) <= h (``least_layouts``), K pairs of the run's rounds per pair;
* a is the family's Bonferroni level alpha/m (Holm's strictest step: the plan holds for every
  row's Holm level);
* ``plan_more`` never reports fewer rounds than the row already had (+1).

No library plans a sample size for a CI half-width of a rank estimator (statsmodels'
``stats.power`` plans for power against a given effect), hence the closed forms here.

``least_layouts`` is the one search for K that ``plan_more`` and ``layout_plan`` use.

``trials_needed`` and ``recommended_trials`` plan without data for a given effect, for two
independent samples compared on the median (verified in tests/test_stats_truth.py): on the log
scale, sigma the pooled robust SD of log(metric) over both arms, n = 2 (z_{1-alpha/2} +
z_power)^2 sigma^2 / ln(1 + d)^2 per arm, times pi/2 (the sample median's efficiency 2/pi
relative to the mean for normal data), rounded up and never below 5 per arm.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sst

from ringlab.stats.estimate import Estimate
from ringlab.stats.layouts import LayoutRounds
from ringlab.stats.robust import robust_sd

MEDIAN_EFFICIENCY = 2 / math.pi
RANK_EFFICIENCY = 3 / math.pi
MIN_TRIALS = 5


def _z(alpha: float, power: float) -> float:
    return float(sst.norm.ppf(1 - alpha / 2) + sst.norm.ppf(power))


def normal_rounds(sigma: float, shift: float, alpha: float, power: float, factor: float, efficiency: float) -> int:
    """The normal-approximation sample size: ceil(factor (z_{1-alpha/2} + z_power)^2 sigma^2 /
    shift^2 / efficiency), ``factor`` 1 for paired differences, 2 for two independent samples,
    ``efficiency`` the test's relative to the t test (the planners' one formula)."""
    z = _z(alpha, power)
    return math.ceil(factor * z * z * sigma ** 2 / shift ** 2 / efficiency)


def trials_needed(effect_pct: float, sigma_log: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Trials per arm to detect a relative effect of ``effect_pct`` percent (two-sided)."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1)")
    if not (0 < power < 1):
        raise ValueError(f"power: {power!r} not allowed; allowed: a number in (0, 1)")
    if not math.isfinite(sigma_log) or not math.isfinite(effect_pct) or effect_pct == 0 \
            or effect_pct <= -100:
        return math.nan
    if sigma_log == 0:
        return float(MIN_TRIALS)
    shift = abs(math.log1p(effect_pct / 100.0))
    return float(max(MIN_TRIALS, normal_rounds(sigma_log, shift, alpha, power, 2.0, MEDIAN_EFFICIENCY)))


def recommended_trials(effect_pct: float, cv: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Trials per arm for an effect at a given coefficient of variation (planning, no data)."""
    sigma = math.sqrt(math.log1p(cv * cv))  # sd of log for a lognormal with this CV
    return trials_needed(effect_pct, sigma, alpha, power)


def minimum_detectable_effect(n: int, sigma_log: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest relative effect (percent) the design detects with the given power."""
    if n < 2 or not math.isfinite(sigma_log):
        return math.nan
    shift = _z(alpha, power) * sigma_log * math.sqrt(2 / n / MEDIAN_EFFICIENCY)
    return math.expm1(shift) * 100


#: rounds per layout pair the layout design plans with (doubling it hardly changes K)
ROUNDS_PER_LAYOUT = 20
MIN_LAYOUTS = 3
MAX_LAYOUTS = 1000


@dataclass(frozen=True)
class Plan:
    """A planner's answer: ``trials`` rounds (= trials per arm) in all, for the layouts design as
    ``layouts`` pairs of ``rounds_per_layout`` rounds (integers where the planner counts them,
    NaN where it has none); ``basis`` says what it is planned for.  The level planner
    (``ringlab.stats.allocation``) also fills ``iterations`` (timed repeats per process), the
    predicted ``seconds`` of machine time, the predicted t ``half_width`` (log scale) at
    ``level``, and ``limited_by`` ("target", "budget" or "cap")."""
    trials: float | int
    basis: str
    layouts: float | int = math.nan
    rounds_per_layout: float | int = math.nan
    iterations: int = 1
    seconds: float = math.nan
    half_width: float = math.nan
    level: float = math.nan
    limited_by: str = ""

    @property
    def half_width_pct(self) -> float:
        return math.expm1(self.half_width) * 100 if math.isfinite(self.half_width) else math.nan


@functools.lru_cache(maxsize=8192)
def _t_ppf(q: float, df: int) -> float:
    """scipy's t quantile, cached: a plan walks K upwards and asks for the same quantiles at every
    look of a staged run (and a simulation makes thousands of plans), and the ppf is the slow part."""
    return float(sst.t.ppf(q, df))


def least_layouts(var_estimate: float, shift: float, alpha: float = 0.05, power: float | None = 0.8,
                  k_max: int = MAX_LAYOUTS) -> float:
    """The least K >= MIN_LAYOUTS layout pairs with (t_{1-alpha/2,K-1} + t_{power,K-1})^2 var / shift^2
    <= K, ``var_estimate`` the variance of one layout pair's estimate and ``shift`` the effect on
    the log scale; ``power`` None: the t interval's half-width alone (t_{1-alpha/2,K-1}
    sqrt(var / K) <= shift).  NaN when no K up to ``k_max`` is enough or an input is not finite."""
    if not (math.isfinite(var_estimate) and math.isfinite(shift)) or shift == 0:
        return math.nan
    for k in range(MIN_LAYOUTS, k_max + 1):
        q = _t_ppf(1 - alpha / 2, k - 1) + (_t_ppf(power, k - 1) if power is not None else 0.0)
        if q * q * var_estimate / (shift * shift) <= k:
            return float(k)
    return math.nan


#: layout pairs the compare planner searches up to
PLAN_MAX_LAYOUTS = 200


def plan_more(est: Estimate, target: float, alpha: float, d=None, x=None, y=None,
              layout_rounds: LayoutRounds | None = None, target_name: str = "the equivalence margin") -> Plan:
    """The rounds (or layout pairs) that bring the CI half-width at level 1 - ``alpha`` to
    ``target`` (a fraction: 0.01 = +-1%) at the run's measured variances, never fewer rounds than
    were run (+1); see the module docstring.  ``d`` (paired) or ``x``/``y`` (unpaired): the run's
    values on the estimate's scale; ``layout_rounds``: the layouts design's rounds (K from the
    spread of the per-layout-pair estimates).  ``est`` gives the design, its scale and, for the
    layouts design, the spread; never its estimate.  ``target_name`` says what the target is."""
    what = f"a CI half-width of ±{target * 100:g}% ({target_name}) at the measured "
    h = math.log1p(target) if est.scale.log else target * est.scale.ref
    k, per, trials = math.nan, math.nan, math.nan
    if layout_rounds is not None and layout_rounds.n_layouts > 1:
        what += "layout and round variance"
        per = layout_rounds.rounds_per_layout
        s_l, s_r = est.sigma_layout, getattr(est, "sigma_round", math.nan)
        if math.isfinite(s_l) and math.isfinite(s_r) and per > 0:
            var = s_l ** 2 + s_r ** 2 / per   # one layout pair's estimate from the fit's components
        else:
            var = est.se ** 2 * est.n         # the same, as the spread of the K pairs' estimates
        k = least_layouts(var, h, alpha, None, PLAN_MAX_LAYOUTS) if h > 0 else math.nan
        trials, n_run = k * per, len(layout_rounds.d)
        what += f" ({k:.0f} layout pairs of {per:.0f} rounds)" if math.isfinite(k) else ""
    else:
        what += "round variance"
        sigma, factor = math.nan, 1.0
        if d is not None:
            sigma = robust_sd(np.asarray(d, dtype=float))
        elif x is not None and y is not None:
            sigma = math.sqrt((robust_sd(np.asarray(x, dtype=float)) ** 2
                               + robust_sd(np.asarray(y, dtype=float)) ** 2) / 2)
            factor = 2.0
        if math.isfinite(sigma) and h > 0:
            # power 0.5 drops z_power: the CI half-width alone
            trials = float(normal_rounds(sigma, h, alpha, 0.5, factor, RANK_EFFICIENCY))
        n_run = est.n
    return Plan(float(max(trials, n_run + 1)) if math.isfinite(trials) else math.nan,
                f"trials_needed for {what}", k, per)


def layout_plan(effect_pct: float, sigma_layout: float, round_sd: float,
                rounds_per_layout: int = ROUNDS_PER_LAYOUT, alpha: float = 0.05, power: float = 0.8) -> Plan:
    """Layouts K per arm and rounds R per layout pair for ``power`` against ``effect_pct`` percent.

    The layout design's estimate is the mean over K layout pairs of per-pair estimates whose
    variance is sigma_L^2 + s^2/R (``sigma_layout``, ``round_sd``: log scale, e.g. 0.02 = 2
    points), tested with a t interval on K - 1 df, so K is the smallest K >= 3 with
    K >= (t_{1-a/2,K-1} + t_{power,K-1})^2 (sigma_L^2 + s^2/R) / ln(1 + effect)^2
    (``least_layouts``).  The ``Plan``'s ``trials`` = K x R (= trials per arm); ``layouts`` and
    ``trials`` are NaN when no K up to ``MAX_LAYOUTS`` suffices or the inputs are not finite."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1)")
    if not (0 < power < 1):
        raise ValueError(f"power: {power!r} not allowed; allowed: a number in (0, 1)")
    if not (isinstance(rounds_per_layout, int) and rounds_per_layout >= 1):
        raise ValueError(f"rounds_per_layout: {rounds_per_layout!r} not allowed; allowed: an integer >= 1")
    basis = (f"a {effect_pct:g}% effect at sigma_L {sigma_layout * 100:.2f} pts, round noise "
             f"{round_sd * 100:.2f} pts")
    none = Plan(math.nan, basis, math.nan, rounds_per_layout)
    ok = all(math.isfinite(v) for v in (effect_pct, sigma_layout, round_sd))
    if not ok or effect_pct == 0 or effect_pct <= -100 or sigma_layout < 0 or round_sd < 0:
        return none
    var = sigma_layout ** 2 + round_sd ** 2 / rounds_per_layout
    k = least_layouts(var, math.log1p(effect_pct / 100.0), alpha, power)
    if not math.isfinite(k):
        return none
    return Plan(int(k) * rounds_per_layout, basis, int(k), rounds_per_layout)
