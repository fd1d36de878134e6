import math

import numpy as np
import pandas as pd
import pytest

from ringlab.stats import StatsError, measurements, summarize
from ringlab.stats.summary import bootstrap_mean_median, format_value, variance_components
from synth import make_raw


def test_measurements_excludes_warmup_and_failures():
    df = make_raw(trials=20, warmup=2, failed=3, seed=1)
    meas, ex = measurements(df)
    assert ex["warmup"] == 2 * 2  # two variants x 2 warm-ups
    assert ex["status_not_ok"] == 3
    assert len(meas) == len(df) - ex["total"]
    assert (meas["status"] == "ok").all() and not meas["warmup"].any()


def test_summary_columns_and_values():
    df = make_raw(trials=50, seed=2, params={"mode": [0, 1], "size": [16, 1000]})
    s = summarize(df)
    assert len(s) == 2 * 2 * 2
    for c in ("variant", "mode", "size", "n", "mean", "median", "std", "cv", "min", "max", "p5", "p95",
              "mad", "mean_ci_low", "mean_ci_high", "median_ci_low", "median_ci_high", "n_mild", "n_severe",
              "clean_n_removed", "clean_median", "n_excluded"):
        assert c in s.columns
    r = s.iloc[0]
    assert r["mean_ci_low"] < r["mean"] < r["mean_ci_high"]
    assert r["median_ci_low"] <= r["median"] <= r["median_ci_high"]
    assert 0.02 < r["cv"] < 0.1
    assert r["n"] == 50 and r["n_excluded"] == 1


def test_summary_repeats_exactly():
    df = make_raw(trials=30, seed=3)
    a, b = summarize(df), summarize(df)
    pd.testing.assert_frame_equal(a, b)


def test_summary_outliers_reported_not_dropped():
    df = make_raw(trials=100, slow_frac=0.1, seed=4)
    s = summarize(df)
    assert (s["n"] == 100).all()
    assert (s["n_severe"] > 0).all()
    assert (s["clean_n_removed"] == s["n_severe"]).all()
    assert (s["clean_mean"] < s["mean"]).all()


def test_variance_components_process_vs_iteration():
    df = make_raw(trials=40, iterations=5, process_cv=0.10, cv=0.01, seed=5)
    s = summarize(df)
    assert "var_process" in s.columns
    assert (s["process_share"] > 0.8).all()  # process noise (10%) dominates iteration noise (1%)
    one = make_raw(trials=10, seed=5)
    assert "var_process" not in summarize(one).columns


def test_variance_components_estimator():
    rng = np.random.default_rng(0)
    proc = np.repeat(rng.normal(0, 2.0, 400), 10)
    f = pd.DataFrame({"trial": np.repeat(np.arange(400), 10), "x": 100 + proc + rng.normal(0, 1.0, 4000)})
    vc = variance_components(f, "x", ["trial"])
    assert vc["var_iteration"] == pytest.approx(1.0, rel=0.1)
    assert vc["var_process"] == pytest.approx(4.0, rel=0.2)


def test_bootstrap_ci_edge_cases():
    assert all(math.isnan(x) for x in bootstrap_mean_median(np.array([1.0])))
    assert bootstrap_mean_median(np.array([5.0, 5.0, 5.0])) == (5.0, 5.0, 5.0, 5.0)


def test_bad_metric_and_by_name_allowed_values():
    df = make_raw(trials=5)
    with pytest.raises(StatsError, match="metric 'nope'.*allowed: .*ns_per_op"):
        summarize(df, metric="nope")
    with pytest.raises(StatsError, match="by: unknown column"):
        summarize(df, by="nope")


def test_format_value_units():
    assert format_value(2.25e6, "elapsed_us") == "2.25 s"
    assert format_value(440.0, "elapsed_us") == "440 us"
    assert format_value(4400.0, "elapsed_us") == "4.4 ms"
    assert format_value(25.3, "ns_per_op") == "25.3 ns"
    assert format_value(2562.0, "ns_per_op") == "2562 ns"
    assert format_value(float("nan"), "ns_per_op") == "n/a"
