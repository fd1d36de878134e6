"""`ringlab bench power`'s layout design: A/A across independent layouts by simulation.

The check (one-sided binomial test of the A/A calls against 5%, at 1%) must pass for the
layout design and must be able to fail: the same check applied to the K layouts pooled into
one signed-rank test, or to one build per arm, fails at a layout spread of 2 points."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ringlab.simulate import layoutsim
from ringlab.stats.plan import layout_plan
from tests.committed import committed

REPS = 120
SIGMA = 0.02


@pytest.fixture(scope="module")
def rates():
    plan = layout_plan(5.0, SIGMA, 0.03)
    return plan, layoutsim.layout_rates(plan.layouts, plan.rounds_per_layout, SIGMA, reps=REPS, seed=11)


def test_layout_design_aa_passes_binomial_check(rates):
    _, r = rates
    met, p = layoutsim.aa_check(r["layouts"]["calls"][0.0], REPS)
    assert met, f"layout design A/A {r['layouts']['rate'][0.0]:.1%}, binomial p {p:.3g}"


def test_pooled_and_one_build_fail_the_same_check(rates):
    _, r = rates
    assert not layoutsim.aa_check(r["pooled"]["calls"][0.0], REPS)[0]
    assert not layoutsim.aa_check(r["one-build"]["calls"][0.0], REPS)[0]


def test_check_can_fail():
    assert not layoutsim.aa_check(15, 100)[0]          # 15% false positives
    assert layoutsim.aa_check(5, 100)[0]


def test_planned_power_is_reached(rates):
    """K from layout_plan for 5% gives power near 80%: at least 65% in REPS runs."""
    _, r = rates
    assert r["layouts"]["rate"][0.05] >= 0.65


def test_no_layout_spread_one_build_is_fine():
    r = layoutsim.layout_rates(4, 20, 0.0, reps=60, seed=3, effects=(0.0,))
    assert layoutsim.aa_check(r["one-build"]["calls"][0.0], 60)[0]


def test_machine_time():
    assert layoutsim.machine_time_s(4, 20, 0.5) == 40.0
    assert math.isnan(layoutsim.machine_time_s(4, 20, math.nan))


def test_bench_power_prints_layout_section(capsys):
    import importlib.util

    from ringlab import paths
    spec = importlib.util.spec_from_file_location("stats_power", paths.ROOT / "benchmarks" / "stats_power.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    files = committed(sorted((paths.ROOT / "results").glob("*/*/*/raw.csv")))
    a = SimpleNamespace(layout_reps=40, seed=0, sigma_layout=2.0)
    assert mod.layout_section(a, files) in (True, False)
    out = capsys.readouterr().out
    for needle in ("layouts |", "one-build |", "pooled |", "80% power for a 5% effect", "80% power for a 2% effect",
                   "layout design A/A false positives"):
        assert needle in out
