"""The layouts verdict at every design the level planner can pick, with machine states.

Simulated runs (``ringlab.simulate.designsim``) have variance at three levels (layout, process,
iteration), a persistent two-state machine that switches between the two processes of a round,
and an effect that depends on the state.  Per design (K layout pairs x R rounds x I iterations):

* layout A/A at most 5%;
* coverage of what the verdict claims, the run's geometric-mean effect (the mean over its rounds
  of the effect in the state its candidate trial ran in), at least 95%, whatever states the
  classifier finds;
* disjoint reruns (two independent runs' CIs apart) at most 5% for an effect the same in both
  states;
* power at least 80% for the effect the design is planned for.

Each bound is a one-sided binomial test at the 1% level (``scipy.stats.binomtest``) that fails
when the simulated rate is beyond it; ``test_the_equal_weight_effect_is_another_estimand`` shows
the coverage bound failing on the same kind of runs for an estimand the fit does not claim.  The
full grid is marked slow; a subset runs by default.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy import stats as sst

from ringlab.simulate import designsim as ds
from ringlab.stats import layouts, plan

RUNS = 200
FAST = (ds.Design(4, 1, 1), ds.Design(4, 8, 5), ds.Design(16, 2, 1), ds.Design(32, 1, 5))
SLOW = tuple(d for d in ds.GRID if d not in FAST)
STAGED = (ds.Design(8, 2, 1),)


def _name(d: ds.Design) -> str:
    return f"K{d.layouts}-R{d.rounds}-I{d.iterations}"


@functools.lru_cache(maxsize=None)
def _rates(design: ds.Design, stages: int = 1) -> dict:
    return ds.design_rates(design, runs=RUNS, seed=design.layouts * 100 + design.rounds * 10 + design.iterations,
                           stages=stages)


def _at_most(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(count, n, rate, alternative="greater").pvalue > 0.01


def _at_least(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(count, n, rate, alternative="less").pvalue > 0.01


def _check(r: dict) -> None:
    n = r["runs"]
    assert _at_most(r["aa"], n, 0.05), f"A/A {r['aa']}/{n}"
    assert _at_most(n - r["covered"], n, 0.05), f"coverage {r['covered']}/{n}"
    assert _at_least(r["power"], n, 0.80), f"power {r['power']}/{n} for {np.expm1(r['planned_effect']):.2%}"
    assert _at_most(r["disjoint_uniform"], r["pairs"], 0.05), f"disjoint reruns {r['disjoint_uniform']}/{r['pairs']}"


def test_the_grid_is_what_the_planner_can_pick():
    assert min(d.layouts for d in ds.GRID) == plan.MIN_LAYOUTS
    assert {(d.layouts, d.rounds, d.iterations) for d in ds.GRID} == {
        (K, R, I) for K in (4, 8, 16, 32) for R in (1, 2, 4, 8) for I in (1, 5)}


@pytest.mark.parametrize("design", FAST, ids=_name)
def test_error_rates_at_a_design(design):
    _check(_rates(design))


@pytest.mark.slow
@pytest.mark.parametrize("design", SLOW, ids=_name)
def test_error_rates_at_every_design(design):
    _check(_rates(design))


@pytest.mark.parametrize("design", STAGED, ids=_name)
def test_error_rates_with_sequential_stages(design):
    r = _rates(design, stages=2)
    assert r["stages"] > 1.0            # some runs measured a second stage
    _check(r)


def test_the_equal_weight_effect_is_another_estimand():
    """The same kind of runs: the fit's CI does not cover the effect with the states weighted
    equally (the slow state holds about 64% of the trials), so the coverage bound can fail; it
    covers each run's geometric-mean effect."""
    design = ds.Design(16, 8, 1)
    rng = np.random.default_rng(3)
    sim = ds.simulate_runs(design, RUNS, ds.STATE_EFFECT, rng)
    equal = float(np.mean(ds.STATE_EFFECT))
    n_rounds = design.layouts * design.rounds
    covered_equal = covered = 0
    for i in range(RUNS):
        r = ds.analyse(sim, i)
        v = layouts.layout_verdict(r.d, r.layout)
        covered_equal += bool(v["ci_low"] <= equal <= v["ci_high"])
        covered += bool(v["ci_low"] <= ds.true_effect(sim, i, n_rounds, ds.STATE_EFFECT) <= v["ci_high"])
    assert not _at_most(RUNS - covered_equal, RUNS, 0.10), f"coverage of the equal-weight effect {covered_equal}/{RUNS}"
    assert _at_most(RUNS - covered, RUNS, 0.05), f"coverage {covered}/{RUNS}"


def test_runs_of_128_rounds_find_both_states():
    r = ds.design_rates(ds.Design(16, 8, 1), runs=60, seed=4)
    assert r["two_states"] >= 54        # 90% of runs of 128 rounds: the state columns are filled in
