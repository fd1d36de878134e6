"""How many repetitions at each level of a nested design buy the narrowest CI per machine-second.

A layout A/B measures in three nested levels: layouts (a pair of builds of the two arms with
one random pad and alignment), processes (fresh starts of each build) and iterations (timed
repeats inside one process).  Each level adds its own variance component to a per-pair log
ratio, and each costs machine time:

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

rounded to whole repetitions (at least one) and checked against both neighbours.  The answer is a
``ringlab.stats.power.Plan`` (layouts, rounds per layout = processes, iterations).  The number
of layouts then follows from the question: the fewest that bring the t half-width (n_L - 1
degrees of freedom) to the target, or the most that fit in the budget.

Planning uses upper confidence bounds of the variance components (``variance_upper``), so a
calibration measured on few units plans for the noise it may have, not for its point
estimate.  No library plans a nested design from variance components and costs (scipy and
statsmodels estimate the components but do not allocate), hence this module.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from scipy import stats as sst

from ringlab.errors import ParamError
from ringlab.stats.power import Plan

#: the fewest layout pairs a plan uses: a t interval with 3 degrees of freedom is too wide to plan on
MIN_LAYOUTS = 4
#: the most layout pairs a plan asks for
MAX_LAYOUTS = 4096
#: the most repetitions per unit at the process and iteration levels
MAX_REPEATS = 1024


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


def variance_upper(s2: float, df: int, confidence: float = 0.9) -> float:
    """The one-sided upper confidence bound of a variance from an estimate with ``df`` degrees
    of freedom (chi-square); infinite with no degrees of freedom."""
    if not math.isfinite(s2) or s2 < 0:
        return math.nan
    if df < 1:
        return math.inf
    return df * s2 / sst.chi2.ppf(1 - confidence, df)


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


@functools.lru_cache(maxsize=4096)
def _t_quantile(level: float, df: int) -> float:
    """The two-sided ``level`` t quantile on ``df`` df (cached: the planners ask for the same few
    hundred again and again, and scipy's ppf is slow next to the rest of a plan)."""
    return float(sst.t.ppf(0.5 + level / 2, df))


def _half_width(var_unit: float, n_l: int, level: float) -> float:
    if n_l < 2:
        return math.inf
    return _t_quantile(float(level), int(n_l) - 1) * math.sqrt(var_unit / n_l)


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


__all__ = ["Level", "MIN_LAYOUTS", "allocate", "best_repeats", "variance_upper"]
