"""The two-stage stopping rule's plan on raw.csv frames (error rates: test_stats_truth.py)."""
import math

import numpy as np
import pytest

from ringlab.stats import StatsError, compare, rounds_needed, target_met
from ringlab.stats.stein import pilot_half_width, stein_rounds
from synth import make_raw


def test_plan_from_a_pilot():
    pilot = make_raw(trials=10, seed=1, cv=0.03, round_cv=0.1, params={"mode": [0, 1]})
    plan = rounds_needed(pilot, "batch", 1.0)
    assert plan["pilot_rounds"] == 10
    assert len(plan["comparisons"]) == 2 and all(c["n_pairs"] == 10 for c in plan["comparisons"])
    assert all(c["ci_level"] == pytest.approx(0.95) for c in plan["comparisons"])   # the printed CI the target judges
    assert plan["rounds"] == max(c["rounds"] for c in plan["comparisons"]) > 10
    assert plan["additional_rounds"] == plan["rounds"] - 10 and plan["stop_reason"] == "target"
    # a looser target needs fewer rounds; the pilot alone can meet a very loose one
    assert rounds_needed(pilot, "batch", 3.0)["rounds"] < plan["rounds"]
    assert rounds_needed(pilot, "batch", 50.0)["stop_reason"] == "pilot met target"


def test_plan_ignores_the_estimate_under_the_null_spread():
    # the plan is a function of |d| only: flipping the sign of every round's difference
    # (swapping the arms) leaves it unchanged
    pilot = make_raw(trials=10, seed=2, cv=0.03, round_cv=0.1)
    swapped = pilot.copy()
    swapped["variant"] = swapped["variant"].map({"batch": "reorder", "reorder": "batch"})
    assert rounds_needed(pilot, "batch", 1.0)["rounds"] == rounds_needed(swapped, "batch", 1.0)["rounds"]
    d = np.array([0.01, -0.03, 0.02, 0.05, -0.01, 0.0, 0.02, -0.04])
    assert pilot_half_width(d) == pytest.approx(pilot_half_width(-d))
    assert stein_rounds(pilot_half_width(d), 8, 1.0) >= 8


def test_budget_caps_the_plan():
    pilot = make_raw(trials=10, seed=3, cv=0.05, round_cv=0.1)
    free = rounds_needed(pilot, "batch", 0.5)
    spr = free["seconds_per_round"]
    assert spr > 0  # from wall_s
    capped = rounds_needed(pilot, "batch", 0.5, budget_s=spr * 15, elapsed_s=spr * 10)
    assert capped["stop_reason"] == "budget" and capped["rounds"] == 15 and capped["rounds_for_target"] > 15


def test_target_met_reads_the_printed_ci():
    df = make_raw(trials=40, seed=4, cv=0.01, round_cv=0.1, effects={"reorder": 0.05})
    res = compare(df, "batch")
    hw = float((res["ci_high_pct"] - res["ci_low_pct"]).iloc[0] / 2)
    assert target_met(res, hw + 0.01) and not target_met(res, hw - 0.01)
    few = compare(make_raw(trials=3, seed=5), "batch")  # no CI at all from 3 rounds
    assert not target_met(few, 50.0)


def test_bad_target_names_the_parameter():
    pilot = make_raw(trials=5)
    with pytest.raises(StatsError, match="target_ci"):
        rounds_needed(pilot, "batch", 0)
    with pytest.raises(StatsError, match="budget"):
        rounds_needed(pilot, "batch", 2.0, budget_s=-1)
    with pytest.raises(StatsError, match="baseline"):
        rounds_needed(pilot, "nope", 2.0)
    assert math.isfinite(rounds_needed(pilot, "batch", 2.0)["rounds"])
