"""A level calibration from an A/A frame: components of the paired log ratio, costs, the plan."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ringlab.errors import DataError
from ringlab.stats.levels import CAUTIOUS, LevelCalibration, calibrate_levels


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
