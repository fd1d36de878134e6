"""The staged design simulated through the run's own stopping code: its calls, its stops, its rates."""
from __future__ import annotations

import dataclasses

import pytest

from ringlab.simulate import stoppingsim
from ringlab.stats.calibration import CAUTIOUS, LevelCalibration

#: a host like the EPYC guest's mode 0: SDs of a pair's log ratio 0.9% (layout), 1.6% (process), 0.4%
#: (iteration); a layout pair builds in 0.4 s, a process costs 3 ms and an iteration 65 ms
TRUTH = LevelCalibration(mode="0", variance={"layout": 0.009 ** 2, "process": 0.016 ** 2, "iteration": 0.0044 ** 2},
                         upper={"layout": 0.015 ** 2, "process": 0.018 ** 2, "iteration": 0.0047 ** 2},
                         df={"layout": 7, "process": 120, "iteration": 256},
                         cost_s={"layout": 0.42, "process": 0.0033, "iteration": 0.065}, count=10_000_000)


def test_a_run_stops_at_its_target_within_its_budget():
    r = stoppingsim.simulate_run(TRUTH, TRUTH, 0.5, 60, stop="target", seed=3)
    assert r.stop_reason in ("target", "budget")
    assert r.spent_s <= 60 * 1.5
    if r.stop_reason == "target":
        assert r.half_width_pct <= 0.5
    assert r.rounds >= r.layouts >= 4


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    a = stoppingsim.simulate_run(TRUTH, TRUTH, 0.5, 60, seed=7)
    assert a == stoppingsim.simulate_run(TRUTH, TRUTH, 0.5, 60, seed=7)
    assert a.delta_pct != stoppingsim.simulate_run(TRUTH, TRUTH, 0.5, 60, seed=8).delta_pct


def test_a_real_effect_is_called_with_its_sign():
    runs = stoppingsim.simulate_runs(TRUTH, TRUTH, 0.5, 60, 6, stop="decided", effect_pct=2.0, seed=11)
    assert all(r.verdict == "slower" for r in runs), [r.verdict for r in runs]
    assert all(r.delta_pct > 1.0 for r in runs)       # delta_pct: the change in ns/op


def test_a_first_run_plans_from_the_cautious_defaults_and_still_reaches_the_target():
    r = stoppingsim.simulate_run(TRUTH, CAUTIOUS, 0.5, 60, stop="target", seed=5)
    assert r.stages >= 1 and r.stop_reason in ("target", "budget")


def test_a_run_with_more_noise_than_its_budget_buys_stops_on_the_budget():
    loud = dataclasses.replace(TRUTH, variance={k: v * 100 for k, v in TRUTH.variance.items()})
    r = stoppingsim.simulate_run(loud, TRUTH, 0.5, 20, stop="target", seed=2)
    assert r.stop_reason == "budget" and r.half_width_pct > 0.5


def test_the_aa_rate_over_many_runs_is_near_its_level():
    """40 A/A runs: more than 7 false calls has probability < 0.2% at an exact 5% rate."""
    runs = stoppingsim.simulate_runs(TRUTH, TRUTH, 1.0, 30, 40, stop="decided", seed=100)
    assert sum(r.called for r in runs) <= 7


def test_the_binomial_interval_of_an_exact_five_percent_rate():
    lo, hi = stoppingsim.aa_interval(2000)
    assert lo == pytest.approx(0.0405, abs=0.001) and hi == pytest.approx(0.0595, abs=0.001)
    clo, chi = stoppingsim.rate_interval(100, 2000)
    assert clo < 0.05 < chi
