"""How much to measure: the rounds, layout pairs, processes and iterations a comparison needs.

Every planner answers with a ``Plan``.  Three questions:

1. **More of a finished comparison** (``plan_more``): what ``compare`` reports as
   ``trials_needed`` for a row that is not settled (inconclusive, or not significant after Holm):
   the rounds, or for the layouts design the layout pairs, that bring the CI half-width the
   verdict rests on to the run's target, at the variances the run measured.  The target is the
   equivalence margin (``ringlab.stats.decide``), or a staged run's ``target_ci`` when the caller
   gives it: a CI that narrow either excludes 0 or lies within +-target, so the row is then
   decided.  The plan never reads the observed effect: planning from it is post-hoc power, which
   only restates the p-value (a row whose effect happens to be small would be sent after an ever
   larger run), and a plan that depends on the estimate is a look whose size depends on its sign.

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

2. **Power of a layout design** (``layout_plan``): the K layout pairs of R rounds that detect a
   given effect with a given power, from a layout spread and a round noise.  ``least_layouts`` is
   the one search for K that both use.

3. **A nested design within a budget** (``allocate``): a layout A/B measures in three nested
   levels, layouts (a pair of builds of the two arms with one random pad and alignment),
   processes (fresh starts of each build) and iterations (timed repeats inside one process).
   Each level adds its own variance component to a per-pair log ratio, and each costs machine
   time:

       Var(estimate) = s2_L / n_L + s2_P / (n_L n_P) + s2_I / (n_L n_P n_I)
       time          = n_L (c_L + n_P (c_P + n_I c_I))

   where ``s2_*`` are the variance components of the log ratio at each level and ``c_*`` the
   cost of one unit of that level on its own (a pair of builds; a pair of process starts; a pair
   of timed iterations).  The product Var x time does not depend on n_L, and setting its
   derivatives in n_P and n_I to zero gives the repetitions of each level from its variance and
   its cost relative to the level above (the rule of Kalibera and Jones, "Rigorous benchmarking
   in reasonable time", ISMM 2013, derived here for these three levels):

       n_I = sqrt((s2_I / s2_P) (c_P / c_I))
       n_P = sqrt((s2_P / s2_L) (c_L / c_P))

   rounded to whole repetitions (at least one) and checked against both neighbours
   (``best_repeats``).  The number of layouts then follows from the question: the fewest that
   bring the t half-width (n_L - 1 degrees of freedom) to the target, or the most that fit in the
   budget.  The level calibration (``ringlab.stats.calibration.LevelCalibration.plan``) plans with
   the components' upper confidence bounds, so a calibration measured on few units plans for the
   noise it may have, not for its point estimate.

No library plans a sample size for a CI half-width of a rank estimator (statsmodels'
``stats.power`` plans for power against a given effect), nor a nested design from variance
components and costs (scipy and statsmodels estimate the components but do not allocate), hence
the closed forms here.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats as sst

from ringlab.errors import ParamError
from ringlab.stats.ranktests import robust_sd

if TYPE_CHECKING:
    from ringlab.stats.estimate import Estimate
    from ringlab.stats.layouts import LayoutRounds

#: the signed-rank (Hodges-Lehmann) CI's efficiency relative to the t interval for normal data
RANK_EFFICIENCY = 3 / math.pi
#: rounds per layout pair the layout design plans with (doubling it hardly changes K)
ROUNDS_PER_LAYOUT = 20
#: the fewest and the most layout pairs ``least_layouts`` searches (``layout_plan``'s range)
LEAST_LAYOUTS_MIN = 3
LEAST_LAYOUTS_MAX = 1000
#: the fewest layout pairs ``allocate`` plans: a t interval with 3 degrees of freedom is too wide to plan on
MIN_LAYOUTS = 4
#: the most layout pairs ``allocate`` plans
MAX_LAYOUTS = 4096
#: the most repetitions per unit at the process and iteration levels
MAX_REPEATS = 1024
#: layout pairs the compare planner (``plan_more``) searches up to
PLAN_MAX_LAYOUTS = 200


@dataclass(frozen=True)
class Plan:
    """A planner's answer: ``trials`` rounds (= trials per arm) in all, for the layouts design as
    ``layouts`` pairs of ``rounds_per_layout`` rounds (integers where the planner counts them,
    NaN where it has none); ``basis`` says what it is planned for.  ``allocate`` also fills
    ``iterations`` (timed repeats per process), the predicted ``seconds`` of machine time, the
    predicted t ``half_width`` (log scale) at ``level``, and ``limited_by`` ("target", "budget" or
    "cap")."""
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
def t_quantile(q: float, df: int) -> float:
    """scipy's t quantile, cached: a plan walks K upwards and asks for the same quantiles at every
    look of a staged run (and a simulation makes thousands of plans), and the ppf is the slow part."""
    return float(sst.t.ppf(q, df))


def least_layouts(var_estimate: float, shift: float, alpha: float = 0.05, power: float | None = 0.8,
                  k_max: int = LEAST_LAYOUTS_MAX) -> float:
    """The least K >= LEAST_LAYOUTS_MIN layout pairs with (t_{1-alpha/2,K-1} + t_{power,K-1})^2 var / shift^2
    <= K, ``var_estimate`` the variance of one layout pair's estimate and ``shift`` the effect on
    the log scale; ``power`` None: the t interval's half-width alone (t_{1-alpha/2,K-1}
    sqrt(var / K) <= shift).  NaN when no K up to ``k_max`` is enough or an input is not finite."""
    if not (math.isfinite(var_estimate) and math.isfinite(shift)) or shift == 0:
        return math.nan
    for k in range(LEAST_LAYOUTS_MIN, k_max + 1):
        q = t_quantile(1 - alpha / 2, k - 1) + (t_quantile(power, k - 1) if power is not None else 0.0)
        if q * q * var_estimate / (shift * shift) <= k:
            return float(k)
    return math.nan


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
            z = float(sst.norm.ppf(1 - alpha / 2))     # the CI half-width alone: no power term
            trials = float(math.ceil(factor * z * z * sigma ** 2 / h ** 2 / RANK_EFFICIENCY))
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
    ``trials`` are NaN when no K up to ``LEAST_LAYOUTS_MAX`` suffices or the inputs are not finite."""
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


@dataclass(frozen=True)
class Level:
    """One level of the design: its variance component (of the log ratio) and the cost in
    seconds of one unit of it, not counting the levels below."""
    name: str
    variance: float
    cost_s: float

    def __post_init__(self):
        for what, v in (("variance", self.variance), ("cost_s", self.cost_s)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ParamError(f"{self.name} {what}: {v!r} not allowed; allowed: a finite number >= 0")


def _clamp(n: float) -> float:
    return min(float(MAX_REPEATS), max(1.0, n)) if math.isfinite(n) else float(MAX_REPEATS)


def _ratio_sqrt(num: float, den: float) -> float:
    """sqrt(num / den), infinite where den is 0 and num is not."""
    if num == 0:
        return 1.0
    return math.sqrt(num / den) if den > 0 else math.inf


def _unit(layout: Level, process: Level, iteration: Level, n_p: int, n_i: int) -> tuple[float, float]:
    """Variance x n_L and seconds of one layout pair at (n_p, n_i)."""
    var = layout.variance + process.variance / n_p + iteration.variance / (n_p * n_i)
    cost = layout.cost_s + n_p * (process.cost_s + n_i * iteration.cost_s)
    return var, cost


def best_repeats(layout: Level, process: Level, iteration: Level) -> tuple[int, int]:
    """The whole (n_p, n_i) with the smallest Var x time.  Each of the two is optimal in closed
    form when the other is held (the formulas of the module docstring, where the level above
    holds the variance of the levels below it divided by their repetitions); alternating the two
    converges to the joint optimum, and the whole neighbours of it are compared."""
    s_l, s_p, s_i = layout.variance, process.variance, iteration.variance
    n_p = n_i = 1.0
    for _ in range(50):
        n_i = _clamp(_ratio_sqrt(s_i * (layout.cost_s + n_p * process.cost_s),
                                 (s_l + s_p / n_p) * iteration.cost_s) / n_p)
        n_p = _clamp(_ratio_sqrt((s_p + s_i / n_i) * layout.cost_s,
                                 s_l * (process.cost_s + n_i * iteration.cost_s)))
    cands = {(max(1, min(MAX_REPEATS, p)), max(1, min(MAX_REPEATS, i)))
             for p in (math.floor(n_p), math.ceil(n_p)) for i in (math.floor(n_i), math.ceil(n_i))}

    def score(pi):
        v, c = _unit(layout, process, iteration, *pi)
        return (v * c, pi)
    return min(cands, key=score)


def _half_width(var_unit: float, n_l: int, level: float) -> float:
    if n_l < 2:
        return math.inf
    return t_quantile(0.5 + level / 2, int(n_l) - 1) * math.sqrt(var_unit / n_l)


def allocate(layout: Level, process: Level, iteration: Level, *, target_half_width: float | None = None,
             budget_s: float | None = None, level: float = 0.95, min_layouts: int = MIN_LAYOUTS,
             max_layouts: int = MAX_LAYOUTS) -> Plan:
    """The cheapest design whose t half-width (log scale, at ``level``) reaches
    ``target_half_width``, within ``budget_s`` seconds when one is given; with a budget and no
    target, the narrowest design the budget buys.  At least ``min_layouts`` layout pairs and at
    most ``max_layouts`` (an experiment's cap): past it, more processes per layout narrow what
    the layouts allow."""
    if target_half_width is None and budget_s is None:
        raise ParamError("allocate: neither a target half-width nor a budget; allowed: either or both")
    if target_half_width is not None and not (math.isfinite(target_half_width) and target_half_width > 0):
        raise ParamError(f"target_half_width: {target_half_width!r} not allowed; allowed: a number > 0")
    if budget_s is not None and not (math.isfinite(budget_s) and budget_s > 0):
        raise ParamError(f"budget_s: {budget_s!r} not allowed; allowed: seconds > 0")
    if not 0 < level < 1:
        raise ParamError(f"level: {level!r} not allowed; allowed: a number in (0, 1)")
    cap = max(2, min(int(max_layouts), MAX_LAYOUTS))
    lo = max(2, min(int(min_layouts), cap))
    n_p, n_i = best_repeats(layout, process, iteration)
    var, cost = _unit(layout, process, iteration, n_p, n_i)
    n_l, why = lo, "target"
    if target_half_width is not None:
        while n_l < cap and _half_width(var, n_l, level) > target_half_width:
            n_l = min(cap, max(n_l + 1, int(n_l * 1.05)))
        while n_l > lo and _half_width(var, n_l - 1, level) <= target_half_width:
            n_l -= 1
        while _half_width(var, n_l, level) > target_half_width and n_p < MAX_REPEATS \
                and _unit(layout, process, iteration, n_p + 1, n_i)[0] < var:
            n_p += 1                    # at the layout cap: more processes per layout
            var, cost = _unit(layout, process, iteration, n_p, n_i)
        if _half_width(var, n_l, level) > target_half_width:
            why = "cap"
    if budget_s is not None:
        while n_p > 1 and n_l * cost > budget_s and n_l >= cap:
            n_p -= 1                    # undo processes the budget cannot pay for
            var, cost = _unit(layout, process, iteration, n_p, n_i)
        fit = int(budget_s // cost) if cost > 0 else cap
        if target_half_width is None:
            n_l, why = max(lo, min(cap, fit)), "budget"
        elif fit < n_l:
            n_l, why = max(lo, fit), "budget"
    basis = (f"{n_l} layout pairs x {n_p} processes x {n_i} iterations for a t half-width of "
             f"{math.expm1(_half_width(var, n_l, level)) * 100:.2f}% in {n_l * cost:.0f} s")
    return Plan(trials=n_l * n_p, basis=basis, layouts=n_l, rounds_per_layout=n_p, iterations=n_i,
                seconds=n_l * cost, half_width=_half_width(var, n_l, level), level=level, limited_by=why)

