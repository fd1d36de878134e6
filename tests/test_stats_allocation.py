"""The nested-design allocation: repetitions per level from variances and costs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ringlab.errors import ParamError
from ringlab.stats.plan import Level, allocate


def _brute(layout, process, iteration, n_l):
    """The smallest variance x time over a grid of whole (n_p, n_i)."""
    best = None
    for n_p, n_i in itertools.product(range(1, 60), range(1, 60)):
        v = layout.variance + process.variance / n_p + iteration.variance / (n_p * n_i)
        c = layout.cost_s + n_p * (process.cost_s + n_i * iteration.cost_s)
        if best is None or v * c < best[0]:
            best = (v * c, n_p, n_i)
    return best


@pytest.mark.parametrize("s2", [(1e-4, 1e-4, 1e-4), (4e-4, 1e-5, 1e-3), (1e-5, 1e-3, 1e-6), (1e-4, 0.0, 1e-4)])
@pytest.mark.parametrize("cost", [(1.0, 0.01, 0.001), (0.3, 0.003, 0.0002), (5.0, 0.05, 0.05)])
def test_repeats_are_the_cost_optimum_of_a_grid(s2, cost):
    L, P, I = (Level(n, v, c) for n, v, c in zip(("layout", "process", "iteration"), s2, cost))
    a = allocate(L, P, I, target_half_width=0.01)
    var = L.variance + P.variance / a.rounds_per_layout + I.variance / (a.rounds_per_layout * a.iterations)
    vc = var * (a.seconds / a.layouts)
    best = _brute(L, P, I, a.layouts)
    assert vc <= best[0] * 1.02, (a, best)


def test_expensive_builds_buy_more_processes_per_layout():
    cheap = allocate(Level("layout", 1e-4, 0.01), Level("process", 1e-4, 0.01), Level("iteration", 1e-6, 1e-4),
                     target_half_width=0.005)
    dear = allocate(Level("layout", 1e-4, 10.0), Level("process", 1e-4, 0.01), Level("iteration", 1e-6, 1e-4),
                    target_half_width=0.005)
    assert dear.rounds_per_layout > cheap.rounds_per_layout


def test_target_is_met_with_the_fewest_layouts():
    L, P, I = Level("layout", 2e-4, 0.5), Level("process", 5e-5, 0.01), Level("iteration", 1e-5, 1e-3)
    a = allocate(L, P, I, target_half_width=0.0025)
    assert a.limited_by == "target" and a.half_width <= 0.0025
    fewer = allocate(L, P, I, target_half_width=0.0025, budget_s=a.seconds - (a.seconds / a.layouts))
    assert fewer.layouts == a.layouts - 1 and fewer.half_width > 0.0025 and fewer.limited_by == "budget"


def test_budget_only_buys_the_narrowest_plan_that_fits():
    L, P, I = Level("layout", 2e-4, 0.5), Level("process", 5e-5, 0.01), Level("iteration", 1e-5, 1e-3)
    a = allocate(L, P, I, budget_s=60)
    assert a.seconds <= 60 and a.limited_by == "budget"
    b = allocate(L, P, I, budget_s=120)
    assert b.half_width < a.half_width


def test_predicted_half_width_holds_in_simulation():
    """The planned design, simulated with the planned components, covers at its level."""
    rng = np.random.default_rng(7)
    L, P, I = Level("layout", 1e-4, 0.5), Level("process", 4e-5, 0.01), Level("iteration", 1e-5, 1e-3)
    a = allocate(L, P, I, target_half_width=0.004)
    from scipy import stats as sst
    hits, n = 0, 400
    for _ in range(n):
        lay = rng.normal(0, math.sqrt(L.variance), a.layouts)
        proc = rng.normal(0, math.sqrt(P.variance), (a.layouts, a.rounds_per_layout))
        it = rng.normal(0, math.sqrt(I.variance), (a.layouts, a.rounds_per_layout, a.iterations))
        per = lay + (proc + it.mean(axis=2)).mean(axis=1)
        lo, hi = sst.ttest_1samp(per, 0).confidence_interval(a.level)
        hits += lo <= 0 <= hi
    assert sst.binomtest(hits, n, a.level).pvalue > 0.001


@pytest.mark.parametrize("kw, word", [({}, "neither"), ({"target_half_width": -1}, "target_half_width"),
                                      ({"budget_s": 0}, "budget_s"), ({"budget_s": 1, "level": 1.5}, "level")])
def test_bad_arguments_are_named(kw, word):
    with pytest.raises(ParamError, match=word):
        allocate(Level("layout", 1, 1), Level("process", 1, 1), Level("iteration", 1, 1), **kw)


def test_bad_level_values_are_named():
    with pytest.raises(ParamError, match="process variance"):
        Level("process", -1.0, 1.0)


def test_layout_cap_buys_processes_instead():
    L, P, I = Level("layout", 1e-4, 0.5), Level("process", 1e-4, 0.01), Level("iteration", 1e-6, 1e-3)
    free = allocate(L, P, I, target_half_width=0.002)
    capped = allocate(L, P, I, target_half_width=0.002, max_layouts=64)
    assert free.layouts > 64 and capped.layouts == 64
    assert capped.rounds_per_layout > free.rounds_per_layout
