"""A level calibration from an A/A frame: components of the paired log ratio, costs, the plan."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ringlab.errors import DataError
from ringlab.stats.calibration import CAUTIOUS, LevelCalibration, calibrate_levels


def _aa(rng, s_l=0.01, s_p=0.005, s_i=0.002, n_l=16, n_r=8, n_i=4, ns=3.0, count=1_000_000):
    rows = []
    for lay in range(n_l):
        lay_eff = {arm: rng.normal(0, s_l / math.sqrt(2)) for arm in "ab"}
        for r in range(n_r):
            for arm in "ab":
                p = rng.normal(0, s_p / math.sqrt(2))
                for it in range(n_i):
                    v = ns * math.exp(lay_eff[arm] + p + rng.normal(0, s_i / math.sqrt(2)))
                    rows.append(dict(variant=arm, layout=lay, round=lay * n_r + r, iteration=it, ns_per_op=v,
                                     elapsed_ns=v * count, wall_s=n_i * v * count / 1e9 + 0.004, count=count))
    return pd.DataFrame(rows)


def test_components_and_costs_of_the_ratio():
    rng = np.random.default_rng(5)
    cal = calibrate_levels(_aa(rng), "a", "b", "ns_per_op", mode=0, build_s=0.25)
    assert math.sqrt(cal.variance["layout"]) == pytest.approx(0.01, rel=0.5)
    assert math.sqrt(cal.variance["process"]) == pytest.approx(0.005, rel=0.3)
    assert math.sqrt(cal.variance["iteration"]) == pytest.approx(0.002, rel=0.15)
    assert all(cal.upper[k] >= cal.variance[k] for k in cal.upper)
    assert cal.cost_s["layout"] == 0.5
    assert cal.cost_s["process"] == pytest.approx(0.008, rel=0.01)
    assert cal.cost_s["iteration"] == pytest.approx(2 * 3.0e-3, rel=0.1)
    assert cal.count == 1_000_000 and cal.source == "measured"


def test_round_trip_and_plan():
    rng = np.random.default_rng(6)
    cal = calibrate_levels(_aa(rng), "a", "b", "ns_per_op", mode=1, build_s=0.25)
    again = LevelCalibration.from_dict(cal.as_dict())
    assert again == cal
    plan = cal.plan(0.5, budget_s=600)
    assert plan.half_width_pct <= 0.5 and plan.seconds <= 600


def test_cautious_defaults_plan_and_say_so():
    plan = CAUTIOUS.plan(1.0, budget_s=120)
    assert plan.layouts >= 4 and plan.seconds <= 120
    assert "no calibration" in CAUTIOUS.source


def test_missing_columns_and_arms_are_named():
    with pytest.raises(DataError, match="layout"):
        calibrate_levels(pd.DataFrame({"variant": ["a"], "ns_per_op": [1.0]}), "a", "b", "ns_per_op", 0, 1.0)
    rng = np.random.default_rng(1)
    f = _aa(rng, n_l=3)
    with pytest.raises(DataError, match="both a and c"):
        calibrate_levels(f, "a", "c", "ns_per_op", 0, 1.0)
    with pytest.raises(DataError, match="calibration levels"):
        LevelCalibration.from_dict({"mode": 0})


def _lengths(rng, counts, startup_ns, ns=3.0, sd=0.01, n=12):
    """One build's fresh processes at several counts: a fixed start-up cost spread over the ops."""
    return pd.DataFrame([dict(count=c, ns_per_op=ns * math.exp(rng.normal(0, sd)) + startup_ns / c)
                         for c in counts for _ in range(n)])


def test_the_shortest_unbiased_trial_is_where_start_up_stays_within_the_tolerance():
    from ringlab.stats.calibration import LENGTH_TOLERANCE, shortest_unbiased, trial_lengths
    rng = np.random.default_rng(3)
    counts = (10_000_000, 2_500_000, 625_000, 156_250)
    # a start-up of 20 us at 3 ns/op: 0.07% of a 10M-op trial, 1.1% at 625k ops, 4.3% at 156k
    rows = trial_lengths(_lengths(rng, counts, 20_000.0), "ns_per_op")
    assert [r["count"] for r in rows] == list(counts) and all(r["n"] == 12 for r in rows)
    assert [r["agrees"] for r in rows] == [True, True, True, False]
    assert shortest_unbiased(rows) == 625_000
    # no start-up cost: the shortest probed is unbiased; a large one: only the longest
    assert shortest_unbiased(trial_lengths(_lengths(rng, counts, 0.0), "ns_per_op")) == 156_250
    assert shortest_unbiased(trial_lengths(_lengths(rng, counts, 5e6), "ns_per_op")) == 10_000_000
    # a count that disagrees stops the walk, even when a shorter one happens to agree
    rows[1]["agrees"] = False
    assert shortest_unbiased(rows) == 10_000_000 and shortest_unbiased([]) is None
    assert 0 < LENGTH_TOLERANCE <= 0.05


def test_a_calibration_at_another_count_prices_and_scales_its_iterations():
    rng = np.random.default_rng(5)
    cal = calibrate_levels(_aa(rng, count=10_000_000), "a", "b", "ns_per_op", mode=0, build_s=0.25)
    lengths = ({"count": 10_000_000, "sd_pct": 1.0}, {"count": 2_500_000, "sd_pct": 2.0},
               {"count": 625_000, "sd_pct": 9.0})
    cal = LevelCalibration.from_dict(dict(cal.as_dict(), min_count=2_500_000, lengths=[dict(r) for r in lengths]))
    assert LevelCalibration.from_dict(cal.as_dict()) == cal
    assert cal.unbiased_counts() == [10_000_000, 2_500_000]
    short = cal.at_count(2_500_000)
    assert short.count == 2_500_000
    assert short.cost_s["iteration"] == pytest.approx(cal.cost_s["iteration"] / 4)
    assert short.cost_s["layout"] == cal.cost_s["layout"] and short.cost_s["process"] == cal.cost_s["process"]
    # a pair of trials at 2.5M carries 2 x (2%^2 - 1%^2) more variance per process; layouts as they were
    assert short.upper["process"] == pytest.approx(cal.upper["process"] + 2 * (0.02 ** 2 - 0.01 ** 2))
    assert short.variance["process"] == pytest.approx(cal.variance["process"] + 2 * (0.02 ** 2 - 0.01 ** 2))
    assert short.upper["layout"] == cal.upper["layout"] and short.upper["iteration"] == cal.upper["iteration"]
    assert cal.at_count(cal.count) is cal
    # without a probe: the count it was measured at, and the variances as they were
    bare = calibrate_levels(_aa(rng, count=10_000_000), "a", "b", "ns_per_op", mode=0, build_s=0.25)
    assert bare.unbiased_counts() == [10_000_000]
    assert bare.at_count(5_000_000).upper == bare.upper


def test_the_planned_trial_length_is_the_one_whose_plan_is_narrowest():
    from ringlab.build.layouts import MAX_LAYOUTS
    from ringlab.stats import sequential

    def best_count(cal, target_pct, budget_s):
        return sequential.best_count(cal, target_pct, budget_s, MAX_LAYOUTS)
    base = dict(CAUTIOUS.as_dict(), mode="0", source="measured", count=10_000_000,
                variance={"layout": 0.002 ** 2, "process": 0.01 ** 2, "iteration": 0.0},
                upper={"layout": 0.002 ** 2, "process": 0.01 ** 2, "iteration": 0.0},
                cost_s={"layout": 0.2, "process": 0.003, "iteration": 0.06}, min_count=625_000)
    # short trials as steady as long ones: the shortest unbiased one buys the most processes
    flat = [{"count": c, "sd_pct": 0.5} for c in (10_000_000, 2_500_000, 625_000)]
    assert best_count(LevelCalibration.from_dict(dict(base, lengths=flat)), 0.1, 30.0) == 625_000
    # short trials far noisier: the longer ones win
    noisy = [{"count": 10_000_000, "sd_pct": 0.5}, {"count": 2_500_000, "sd_pct": 0.6},
             {"count": 625_000, "sd_pct": 20.0}]
    assert best_count(LevelCalibration.from_dict(dict(base, lengths=noisy)), 0.1, 30.0) == 2_500_000
    # a biased short count is never a candidate
    assert best_count(LevelCalibration.from_dict(dict(base, lengths=flat, min_count=10_000_000)), 0.1, 30.0) \
        == 10_000_000
