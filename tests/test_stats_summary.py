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


def test_large_groups_get_t_and_order_statistic_intervals_without_resampling(monkeypatch):
    from scipy import stats as sst

    from ringlab.stats import summary as su
    rng = np.random.default_rng(7)
    v = rng.lognormal(0, 0.05, su.BOOTSTRAP_MAX_N + 1) * 10
    ml, mh, dl, dh = bootstrap_mean_median(v)
    t = sst.t.interval(0.95, len(v) - 1, loc=v.mean(), scale=sst.sem(v))
    assert (ml, mh) == pytest.approx(t, rel=1e-12)
    s = np.sort(v)
    # the median's interval is two order statistics with binomial coverage >= 95%, around the median
    assert dl in s and dh in s and dl < np.median(v) < dh
    k_lo, k_hi = np.searchsorted(s, dl), np.searchsorted(s, dh)
    assert sst.binom.cdf(k_hi - 1, len(v), 0.5) - sst.binom.cdf(k_lo - 1, len(v), 0.5) >= 0.95
    # and it is the width the percentile bootstrap gives, without its resamples x n cost
    monkeypatch.setattr(su, "BOOTSTRAP_MAX_N", len(v))
    bl, bh, bdl, bdh = bootstrap_mean_median(v, n_resamples=400)
    assert (dh - dl) == pytest.approx(bdh - bdl, rel=0.3) and (mh - ml) == pytest.approx(bh - bl, rel=0.3)


def test_ci_method_column_only_when_a_group_is_large(monkeypatch):
    from ringlab.stats import summary as su
    df = make_raw(trials=40, seed=4)
    assert "ci_method" not in summarize(df).columns
    monkeypatch.setattr(su, "BOOTSTRAP_MAX_N", 30)
    s = summarize(df)
    assert list(s.columns)[-1] == "ci_method"
    assert (s["ci_method"] == su.CI_METHOD_LARGE_N).all()


def test_measurements_share_the_frames_columns_and_leave_it_unchanged():
    df = make_raw(trials=20, warmup=0, seed=5)
    before = df.copy()
    meas, _ = measurements(df)
    meas.loc[meas.index[0], "order"] = -5
    pd.testing.assert_frame_equal(df, before)
