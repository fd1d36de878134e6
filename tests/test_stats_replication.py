"""The run-to-run level: random effects over runs, the between-run variance of one comparison
(its own runs, the host's A/A bound, or none) and the next-run interval.

The coverage and width of the interval under the kit's rules are simulated in
tests/test_next_run_simulation.py; here: the pieces, each against a value it must give."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ringlab.stats import compare
from ringlab.stats.contract import JSON_FIELDS, NEXT_FIELDS, to_records
from ringlab.stats.replication import (AA_UCB_LEVEL, EARLY_RUNS_LEVEL, MIN_RUNS, NO_BETWEEN_TEXT, NONE, Between, between_of_host_aa,
                                       between_of_runs, combine, next_run_interval, q_profile_upper,
                                       q_profile_upper_equal, row_se, welch_df, with_next_run)
from ringlab.stats.summary import StatsError


def test_next_run_interval_is_both_runs_noise_and_both_runs_shift():
    d, s = 0.05, 0.004
    b = Between(tau2=0.003 ** 2, df=math.inf, basis="host A/A", runs=6, text="x")
    lo, hi = next_run_interval(d, s, math.inf, b)
    assert hi - d == pytest.approx(sps.norm.ppf(0.975) * math.sqrt(2 * s * s + 2 * 0.003 ** 2))
    assert d - lo == pytest.approx(hi - d)
    lo0, hi0 = next_run_interval(d, s, 7, NONE)
    assert hi0 - d == pytest.approx(sps.t.ppf(0.975, 7) * math.sqrt(2) * s), "none: t at the CI's df, sqrt(2) SE"
    assert next_run_interval(d, s, 7, None) == (lo0, hi0)
    assert lo < lo0 and hi > hi0, "a known between-run variance widens it"
    assert all(math.isnan(v) for v in next_run_interval(math.nan, s, 7, NONE))


def test_next_run_interval_t_by_welch_satterthwaite():
    d, s = 0.0, 0.004
    b = Between(tau2=0.006 ** 2, df=3.0, basis="runs", runs=4, text="from 4 runs of this comparison")
    nu = welch_df(2 * s * s, 7, 2 * 0.006 ** 2, 3.0)
    assert 3.0 < nu < 10.0
    expect = (2 * s * s + 2 * 0.006 ** 2) ** 2 / ((2 * s * s) ** 2 / 7 + (2 * 0.006 ** 2) ** 2 / 3)
    assert nu == pytest.approx(expect)
    lo, hi = next_run_interval(d, s, 7, b)
    assert hi == pytest.approx(sps.t.ppf(0.975, nu) * math.sqrt(2 * s * s + 2 * 0.006 ** 2))
    assert welch_df(1.0, math.inf, 0.0, 3.0) == math.inf


def test_between_of_runs_needs_min_runs_and_uses_combine_tau2():
    eff = [0.017, 0.051, 0.022, 0.044, 0.034]
    var = [0.004 ** 2] * 5
    assert between_of_runs(eff[:1], var[:1]) is None, "one run has no between-run variance"
    early = between_of_runs(eff[:MIN_RUNS - 1], var[:MIN_RUNS - 1])
    assert early.basis == "runs" and early.runs == MIN_RUNS - 1 and early.df == math.inf
    assert early.tau2 == pytest.approx(q_profile_upper(eff[:MIN_RUNS - 1], var[:MIN_RUNS - 1], EARLY_RUNS_LEVEL))
    assert early.tau2 > 0 and "Q-profile 40% bound" in early.text
    assert between_of_runs([0.01, 0.01], [1e-4, 1e-4]).tau2 == 0, "two equal runs: no between-run variance"
    b = between_of_runs(eff, var)
    re = combine(eff, var)
    assert b.basis == "runs" and b.runs == 5 and b.df == 3 and b.tau2 == pytest.approx(re.tau2) and b.tau2 > 0
    assert b.text == "from 5 runs of this comparison" and b.sd_pct == pytest.approx(re.tau * 100)
    assert between_of_runs(eff + [math.nan], var + [0.01]).runs == 5, "a run without a CI is left out"


def test_q_profile_upper_bound_solves_the_generalised_q():
    rng = np.random.default_rng(5)
    y = rng.normal(0, 0.01, 6)
    v = rng.uniform(0.003, 0.008, 6) ** 2
    t2 = q_profile_upper(y, v, 0.7)
    w = 1 / (v + t2)
    mu = np.sum(w * y) / np.sum(w)
    assert np.sum(w * (y - mu) ** 2) == pytest.approx(sps.chi2.ppf(0.3, 5), rel=1e-6)
    assert q_profile_upper(y, v, 0.9) > t2 > q_profile_upper(y, v, 0.5)
    # identical runs: no spread above their noise, the bound is 0
    assert q_profile_upper([0.01, 0.01, 0.01], [1e-4] * 3, 0.7) == 0.0
    # one within-run variance: the closed form
    ve = np.full(6, 0.005 ** 2)
    q = float(np.sum((y - y.mean()) ** 2) / ve[0])
    assert q_profile_upper_equal(q, 6, ve[0], 0.7) == pytest.approx(q_profile_upper(y, ve, 0.7), rel=1e-6)


def test_between_of_host_aa_is_the_upper_bound_taken_as_known():
    y = [-0.01, 0.004, 0.012, -0.006, 0.002, 0.009]
    v = [0.004 ** 2] * 6
    b = between_of_host_aa(y, v)
    assert b.basis == "host A/A" and b.df == math.inf and b.runs == 6
    assert b.tau2 == pytest.approx(q_profile_upper(y, v, AA_UCB_LEVEL)) and b.tau2 >= combine(y, v).tau2
    assert f"{AA_UCB_LEVEL:.0%} one-sided" in b.text and "host A/A upper bound from 6 runs" in b.text
    with pytest.raises(StatsError):
        between_of_host_aa([0.01], [1e-4])
    with pytest.raises(StatsError):
        between_of_host_aa(q=3.0, k=1, within_var=1e-4)


def test_none_says_there_is_no_between_run_information():
    assert NONE.basis == "none" and NONE.runs == 0 and math.isnan(NONE.sd_pct) and NONE.text == NO_BETWEEN_TEXT
    assert "no between-run information" in NO_BETWEEN_TEXT and "if nothing drifted" in NO_BETWEEN_TEXT


def test_combine_finds_heterogeneity_and_tau():
    eff = [0.017, 0.111, 0.022, 0.034, 0.074]
    var = [0.001 ** 2, 0.02 ** 2, 0.0015 ** 2, 0.004 ** 2, 0.003 ** 2]
    re = combine(eff, var)
    assert re.k == 5 and re.tau > 0.01 and re.i2 > 0.9 and re.heterogeneous()
    assert re.pi_low < min(eff) < max(eff) < re.pi_high or re.pi_high - re.pi_low > re.ci_high - re.ci_low
    same = combine([0.05, 0.051, 0.049], [0.004 ** 2] * 3)
    assert same.tau == 0 and not same.heterogeneous()
    assert same.pi_high - same.pi_low > same.ci_high - same.ci_low


@pytest.mark.parametrize("eff,var", [([0.1], [0.01]), ([0.1, math.nan], [0.01, 0.01]), ([0.1, 0.2], [0.01, 0])])
def test_combine_refuses_what_it_cannot_combine(eff, var):
    with pytest.raises(StatsError):
        combine(eff, var)


def _frame(effect: float = 0.05, n: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for mode in (0, 1):
        for r in range(n):
            b = 100 * math.exp(rng.normal(0, 0.01))
            rows += [{"variant": "a", "mode": mode, "round": r, "trial": r, "ns_per_op": b, "status": "ok"},
                     {"variant": "b", "mode": mode, "round": r, "trial": r,
                      "ns_per_op": b * math.exp(effect + rng.normal(0, 0.01)), "status": "ok"}]
    return pd.DataFrame(rows)


def test_with_next_run_fills_every_row_with_its_basis():
    cmp = compare(_frame(), "a")
    b = Between(tau2=0.01 ** 2, df=math.inf, basis="host A/A", runs=6, text="host A/A upper bound from 6 runs")
    out = with_next_run(cmp, lambda r: b if r["mode"] == 0 else None)
    assert cmp is not out and cmp["next_low_pct"].isna().all(), "cmp is not changed"
    for _, r in out.iterrows():
        assert r["next_low_pct"] < r["ci_low_pct"] <= r["ci_high_pct"] < r["next_high_pct"]
        assert r["next_level"] == 0.95 and math.isfinite(row_se(r))
    by_mode = out.set_index("mode")
    assert by_mode.loc[0, "next_basis"] == "host A/A" and by_mode.loc[1, "next_basis"] == "none"
    assert by_mode.loc[0, "next_source"] == b.text and by_mode.loc[1, "next_source"] == NO_BETWEEN_TEXT
    assert math.isnan(by_mode.loc[1, "next_between_sd_pct"]) and by_mode.loc[0, "next_between_sd_pct"] == pytest.approx(1.0)
    rec = to_records(out)[0]
    assert list(rec) == JSON_FIELDS and set(NEXT_FIELDS) <= set(rec)
    assert {"next_basis", "next_between_sd_pct"} <= set(NEXT_FIELDS)


def test_sign_reproducible_false_when_the_next_run_reaches_across_zero():
    cmp = compare(_frame(effect=0.012, n=60), "a")
    called = cmp[cmp["verdict"] == "slower"]
    assert len(called)
    out = with_next_run(cmp, Between(tau2=0.05 ** 2, df=4.0, basis="runs", runs=5, text="from 5 runs"))
    assert (out.loc[called.index, "sign_reproducible"] == False).all()  # noqa: E712 - the value, not truth
    steady = with_next_run(cmp, NONE)
    assert (steady.loc[called.index, "sign_reproducible"] == True).all()  # noqa: E712


def test_a_large_effect_gets_no_effect_proportional_width():
    """A -89.7% row with a CI of [-90.5, -88.9]: with no between-run information its next-run
    interval is sqrt(2) times the CI about the estimate, never the tens of points a term
    proportional to the effect gave."""
    d = math.log1p(-0.897)
    lo, hi = math.log1p(-0.905), math.log1p(-0.889)
    s = (hi - lo) / (2 * sps.norm.ppf(0.975))
    nlo, nhi = next_run_interval(d, s, math.inf, NONE)
    assert (math.expm1(nhi) - math.expm1(nlo)) * 100 < 2.5


def _aa_doc(**aa):
    return {"date_utc": "2026-12-04T00:00:00Z", "span_min": 52, "modes": {"0": {"mode": "0", "tau_pct": 0.75,
                                                                              "rel": 0.0, "df": 5, "runs": 6,
                                                                              "aa": aa}}}


def test_host_between_reads_the_aa_part_of_drift_json_per_mode_only(tmp_path):
    from ringlab.rundir.calibration import host_between
    d = tmp_path / "calibration" / "h"
    d.mkdir(parents=True)
    y = [-0.01, 0.004, 0.012, -0.006, 0.002, 0.009]
    v = [0.004 ** 2, 0.005 ** 2, 0.004 ** 2, 0.006 ** 2, 0.005 ** 2, 0.004 ** 2]
    re = combine(y, v)
    (d / "drift.json").write_text(json.dumps(_aa_doc(**re.as_dict(), effects_log=y, variances_log=v)))
    got = host_between("h", tmp_path)
    assert set(got) == {"0"}, "a mode without an A/A of its own borrows none"
    assert got["0"].tau2 == pytest.approx(between_of_host_aa(y, v).tau2)
    assert host_between("none", tmp_path) == {}


def test_host_between_of_a_summary_only_file_recovers_q_and_the_within_variance(tmp_path):
    """A drift.json that kept the A/A's summary only (k, tau, Q's p, CI, prediction interval):
    with one within-run variance the bound from the summary equals the one from the runs."""
    from ringlab.rundir.calibration import host_between
    d = tmp_path / "calibration" / "h"
    d.mkdir(parents=True)
    y = [-0.01, 0.004, 0.012, -0.006, 0.002, 0.009]
    v = [0.004 ** 2] * 6
    (d / "drift.json").write_text(json.dumps(_aa_doc(**combine(y, v).as_dict())))
    got = host_between("h", tmp_path)["0"]
    assert got.tau2 == pytest.approx(between_of_host_aa(y, v).tau2, rel=1e-6) and got.runs == 6


def test_committed_drift_json_gives_each_mode_its_aa_bound():
    from ringlab.rundir.calibration import host_between
    got = host_between("epyc-kvm-2vcpu")
    if not got:
        pytest.skip("no committed drift.json for epyc-kvm-2vcpu in this checkout")
    for mode, b in got.items():
        assert b.basis == "host A/A" and b.runs >= 2 and b.tau2 >= 0 and math.isfinite(b.tau2)


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("tau_over_se", [0.0, 1.0, 2.0])
def test_combined_ci_covers_the_pooled_effect_at_its_level_with_few_runs(k, tau_over_se):
    """k runs of one comparison, each with its own run effect (SD tau) and noise (SE se): the
    combined 95% CI holds the true effect in 95% of simulated series, less four binomial standard
    errors of 2000 draws (0.93); a normal quantile covers 84-91% here at tau > 0."""
    rng = np.random.default_rng(1000 * k + int(10 * tau_over_se))
    truth, se = 0.02, 0.005
    tau = tau_over_se * se
    held = 0
    for _ in range(2000):
        sizes = se * rng.uniform(0.7, 1.3, k)          # the runs' SEs differ a little, as real runs' do
        eff = truth + rng.normal(0, tau, k) + rng.normal(0, sizes)
        re = combine(eff, sizes ** 2)
        held += re.ci_low <= truth <= re.ci_high
    assert held / 2000 >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / 2000), f"k={k}, tau={tau_over_se} SE: CI held {held / 2000:.3f}"


def test_report_says_each_modes_basis_in_words_with_its_between_run_sd():
    from ringlab.report.tables import interval_lines
    cmp = compare(_frame(), "a")
    aa = Between(tau2=0.015 ** 2, df=math.inf, basis="host A/A", runs=6, text="host A/A upper bound from 6 runs")
    text = "\n".join(interval_lines(with_next_run(cmp, lambda r: aa if r["mode"] == 0 else None)))
    assert "- next run here (95%, host A/A upper bound from 6 runs; between-run SD 1.50 points) (mode 0)." in text
    assert f"- next run here (95%, {NO_BETWEEN_TEXT}) (mode 1)." in text
