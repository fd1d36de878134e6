import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from ringlab.stats import (JSON_FIELDS, StatsError, check_rule, compare, compare_arrays, diagnose, diagnose_ab, holm,
                           to_records)
from ringlab.simulate import noise
from ringlab.stats import ranktests as rt
from ringlab.stats.compare import holm_levels
from ringlab.stats.contract import NOT_AFTER_HOLM
from ringlab.stats.diagnose import busy_rounds
from layout_runs import tidy_frame
from synth import make_raw


def test_json_has_exactly_the_fields():
    df = make_raw(effects={"reorder": -0.05}, trials=40, seed=1, params={"mode": [0, 1], "size": [1000]})
    res = compare(df, "batch")
    recs = to_records(res)
    assert len(recs) == 2
    for r in recs:
        assert list(r) == JSON_FIELDS
        json.dumps(r)
        assert r["design"] == "paired" and r["n_pairs"] == 40 and r["family_size"] == 2
        assert r["ci_level"] == pytest.approx(0.95)
        assert 0.95 <= r["holm_ci_level"] < 1
        assert r["holm_ci_low_pct"] <= r["ci_low_pct"] <= r["ci_high_pct"] <= r["holm_ci_high_pct"]
    assert JSON_FIELDS[:14] == ["group", "baseline", "candidate", "n_baseline", "n_candidate", "median_baseline",
                                "median_candidate", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
                                "verdict", "trials_needed"]
    assert recs[0]["verdict"] == "faster"
    assert recs[0]["delta_pct"] < 0 and recs[0]["ci_high_pct"] < 0
    assert "p_welch" in res.columns and "gain_pct" in res.columns


def test_delta_is_hodges_lehmann_of_round_log_ratios_and_mail_sign():
    df = make_raw(effects={"reorder": 0.04}, trials=30, seed=2, iterations=3)
    r = compare(df, "batch").iloc[0]
    meas = df[~df["warmup"]]
    per = meas.groupby(["variant", "trial"])["ns_per_op"].median().unstack(0)
    d = np.log(per["reorder"] / per["batch"]).to_numpy()
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    assert r["delta_pct"] == pytest.approx(math.expm1(np.median(walsh)) * 100)
    assert r["ratio_medians_pct"] == pytest.approx((r["median_candidate"] / r["median_baseline"] - 1) * 100)
    assert r["n_baseline"] == 90 and r["n_pairs"] == 30  # rows vs rounds: iterations reduce to one per round
    assert r["gain_pct"] == pytest.approx(-r["delta_pct"])
    assert r["verdict"] == "slower"


def test_ci_and_p_agree_at_every_level():
    rng = np.random.default_rng(11)
    for n in (7, 12, 30, 450):
        d = rng.standard_t(3, n) * 0.05 + 0.01
        for a in np.linspace(0.002, 0.4, 60):
            q = rt.signed_rank(d, 1 - a)
            assert (q["p"] <= a) == (q["ci_low"] > 0 or q["ci_high"] < 0), (n, a)
            if math.isfinite(q["ci_low"]):
                assert q["ci_low"] <= q["estimate"] <= q["ci_high"]
            else:  # no CI from so few pairs at this level: never significant either
                assert q["p"] > a
    x, y = rng.normal(0, 1, 15), rng.normal(0.8, 1, 20)
    for a in np.linspace(0.002, 0.4, 60):
        q = rt.rank_sum(x, y, 1 - a)
        assert (q["p"] <= a) == (q["ci_low"] > 0 or q["ci_high"] < 0), a


def test_signed_rank_matches_scipy_and_bisection_matches_direct():
    from scipy import stats as sst
    rng = np.random.default_rng(12)
    d = rng.normal(0.1, 0.3, 25)
    assert rt.signed_rank(d)["p"] == pytest.approx(sst.wilcoxon(d).pvalue)
    x, y = rng.normal(0, 1, 12), rng.normal(1, 1, 9)
    assert rt.rank_sum(x, y)["p"] == pytest.approx(sst.mannwhitneyu(y, x, method="exact").pvalue)
    big = rng.normal(0.01, 0.1, 2600)  # > DIRECT_MAX Walsh averages: bisection path
    a = rt.signed_rank(big)
    old, rt.DIRECT_MAX = rt.DIRECT_MAX, 10 ** 9
    try:
        b = rt.signed_rank(big)
    finally:
        rt.DIRECT_MAX = old
    assert a["ci_low"] == pytest.approx(b["ci_low"], abs=1e-12) and a["estimate"] == pytest.approx(b["estimate"])


def test_paired_design_sees_through_shared_round_noise():
    # 4% effect under 15% round-to-round noise shared by both arms: pairing resolves it
    df = make_raw(effects={"reorder": 0.04}, trials=30, seed=3, cv=0.01, round_cv=0.15)
    r = compare(df, "batch").iloc[0]
    assert r["design"] == "paired" and r["verdict"] == "slower"
    assert 2 < r["ci_low_pct"] < 4 < r["ci_high_pct"] < 6
    # the same rows without rounds: the unpaired fallback cannot
    u = compare(df.drop(columns=["trial"]), "batch").iloc[0]
    assert u["design"] == "unpaired" and u["n_pairs"] == 0 and u["verdict"] == "inconclusive"
    assert u["ci_high_pct"] - u["ci_low_pct"] > 3 * (r["ci_high_pct"] - r["ci_low_pct"])


def test_round_column_wins_over_trial_and_incomplete_rounds_fall_back():
    df = make_raw(effects={"reorder": 0.05}, trials=20, seed=4, cv=0.01, round_cv=0.1, rounds_col=True)
    df["trial"] = np.random.default_rng(0).permutation(len(df)) % 21  # trial no longer the round
    assert compare(df, "batch").iloc[0]["n_pairs"] == 20
    # candidate measured in other rounds than the baseline: unpaired
    inc = df.copy()
    inc.loc[inc["variant"] == "reorder", "round"] += 100
    assert compare(inc, "batch").iloc[0]["design"] == "unpaired"


def test_verdict_never_contradicts_the_ci():
    printed_only = 0
    for seed in range(12):
        df = make_raw(effects={"reorder": 0.01 * (seed % 4)}, trials=12 + seed, seed=seed, cv=0.03,
                      round_cv=0.05, params={"mode": [0, 1, 2]})
        res = compare(df, "batch")
        check_rule(res)
        for r in res.itertuples():
            excl = r.holm_ci_low_pct > 0 or r.holm_ci_high_pct < 0
            printed = r.ci_low_pct > 0 or r.ci_high_pct < 0
            assert (r.verdict in ("faster", "slower")) == excl
            assert (r.p_holm <= 0.05) == excl
            assert printed or not excl          # a called row's printed CI excludes 0 too
            # a row not called reads "inconclusive" / "no significant difference" only beside a printed
            # CI that includes 0; excluded at 95% only, it says so, and the note gives p (Holm)
            assert (r.verdict == NOT_AFTER_HOLM) == (printed and not excl)
            if printed and not excl:
                printed_only += 1
                assert "CI excludes 0; p (Holm) = " in r.note
    assert printed_only > 0                     # the case the verdict is for does occur here
    bad = res.copy()    # printed CI excludes 0, Holm's does not: "inconclusive" is refused
    bad.loc[bad.index[0], ["ci_low_pct", "ci_high_pct", "holm_ci_low_pct", "holm_ci_high_pct", "verdict"]] = \
        [0.5, 2.0, -0.5, 3.0, "inconclusive"]
    with pytest.raises(StatsError, match="not significant after Holm"):
        check_rule(bad)
    bad = res.copy()
    bad.loc[bad.index[0], ["holm_ci_low_pct", "holm_ci_high_pct", "verdict"]] = [1.0, 2.0, "inconclusive"]
    with pytest.raises(StatsError, match="excludes 0"):
        check_rule(bad)
    bad = res.copy()
    bad.loc[bad.index[0], ["ci_low_pct", "ci_high_pct", "holm_ci_low_pct", "holm_ci_high_pct", "verdict"]] = \
        [-1.0, 2.0, 0.5, 2.0, "slower"]
    with pytest.raises(StatsError, match="printed CI"):
        check_rule(bad)


def test_family_is_the_run_and_verdicts_follow_holm():
    df = make_raw(variants=("batch", "reorder", "prebatch"), effects={"reorder": -0.05}, trials=30, seed=5,
                  cv=0.02, params={"mode": [0, 1, 2, 3]})
    res = compare(df, "batch")
    assert set(res["family_size"]) == {8}          # every candidate in every configuration
    assert len(res) == 8
    assert (res["ci_level"] == 0.95).all()          # one printed level
    for fam in (res,):
        # the levels the verdicts rest on are Holm's steps of the p-values compare() printed
        p = fam["p_value"].to_numpy()
        order = np.argsort(p, kind="stable")
        m = len(p)
        rejected = 0
        while rejected < m and p[order[rejected]] <= 0.05 / (m - rejected):
            rejected += 1
        for rank, i in enumerate(order):
            step = min(rank, rejected)
            assert fam["holm_ci_level"].iloc[i] == pytest.approx(1 - 0.05 / (m - step))
            assert fam["p_holm"].iloc[i] >= fam["p_value"].iloc[i]
        excl = (fam["holm_ci_low_pct"] > 0) | (fam["holm_ci_high_pct"] < 0)
        assert ((fam["p_holm"] <= 0.05) == excl).all()   # rejected by Holm <=> its Holm CI excludes 0
        # same estimator, nested intervals: the printed 95% CI lies inside the Holm one
        assert (fam["holm_ci_low_pct"] <= fam["ci_low_pct"] + 1e-12).all()
        assert (fam["ci_high_pct"] <= fam["holm_ci_high_pct"] + 1e-12).all()
    assert (res[res["candidate"] == "reorder"]["verdict"] == "faster").all()
    p = [0.001, 0.04, 0.012, 0.3]  # Holm rejects 0.001 (<= .05/4) and 0.012 (<= .05/3), stops at 0.04
    lv = holm_levels(p, 0.05)
    assert lv[0] == pytest.approx(1 - 0.05 / 4) and lv[2] == pytest.approx(1 - 0.05 / 3)
    assert lv[1] == pytest.approx(1 - 0.05 / 2) and lv[3] == pytest.approx(1 - 0.05 / 2)


def _aa_frame(rng, rounds=12, candidates=3, modes=2):
    """An A/A run: a baseline and ``candidates`` arms of the same code, ``modes`` configurations,
    every arm measured in every round (round noise shared within a mode)."""
    variants = ["base"] + [f"c{i}" for i in range(candidates)]
    n = len(variants) * rounds
    mode = np.repeat(np.arange(modes), n)
    var = np.tile(np.repeat(variants, rounds), modes)
    rnd = np.tile(np.arange(rounds), modes * len(variants))
    shared = rng.normal(0, 0.05, (modes, rounds))
    val = 10 * np.exp(shared[mode, rnd] + rng.normal(0, 0.02, len(mode)))
    return pd.DataFrame({"variant": var, "mode": mode, "round": rnd, "trial": rnd, "ns_per_op": val})


def test_run_wise_aa_rate_with_three_candidates_and_two_modes():
    # Holm over the run: with 3 candidates x 2 modes of identical code the chance that any row
    # of the run is called stays at most 5% (binomial 95% upper tolerance over the runs); a
    # family per candidate gives about 1 - 0.95^3 = 14%
    rng = np.random.default_rng(2026)
    runs, called = 300, 0
    for _ in range(runs):
        res = compare(_aa_frame(rng), "base")
        assert set(res["family_size"]) == {6}
        called += bool(res["verdict"].isin(["faster", "slower"]).any())
    assert called <= sst.binom.ppf(0.95, runs, 0.05), called


def test_identical_arms_get_an_interval_of_real_width():
    rng = np.random.default_rng(6)
    a = rng.lognormal(0, 0.05, 30)
    r = compare_arrays(a, a.copy())  # same numbers in two independent arms
    assert r["ci_low_pct"] < -1 and r["ci_high_pct"] > 1 and r["verdict"] == "inconclusive"
    assert r["delta_pct"] == pytest.approx(0.0, abs=1e-9)


def test_single_threaded_arm_shares_its_placement_group():
    df = make_raw(variants=("base", "forward", "backward"), params={"placement": ["none", "split", "same-core"]},
                  trials=20, seed=7, single_thread=("base",))
    assert (df.loc[df["variant"] == "base", "cpu_req_consumer"] == -1).all()
    res = compare(df, "base")
    assert len(res) == 6
    assert not res["note"].str.contains("too few").any()
    assert "cpu_req_consumer" not in res.attrs["group_columns"] and "placement" in res.attrs["group_columns"]
    # a real sweep over consumer CPUs keeps them apart
    sweep = make_raw(trials=10, seed=8, cpu_pairs=[(0, 1), (0, 2)])
    assert "cpu_req_consumer" in compare(sweep, "batch").attrs["group_columns"]


def test_mail_sign_convention_matches_seed000():
    # thread 000: unpatched -> patched ms and the mail's "gain", which the mail truncated to one
    # decimal; compare()'s gain_pct of the same two numbers must give it
    for base, cand, mail in [(4648, 4464, 3.9), (2562, 2401, 6.2), (3624, 3462, 4.4), (2758, 2547, 7.6)]:
        r = compare_arrays([base] * 5, [cand] * 5)     # constant arms: compared exactly
        assert r["design"] == "exact"
        gain = -r["delta_pct"]
        assert math.floor(gain * 10) / 10 == mail
        frame = make_raw(trials=6, seed=1, cv=0.0, base_ns=base, effects={"reorder": cand / base - 1})
        row = compare(frame, "batch").iloc[0]
        assert math.floor(row["gain_pct"] * 10) / 10 == mail and row["gain_pct"] == pytest.approx(-row["delta_pct"])


def test_holm():
    p = holm([0.01, 0.04, 0.03, np.nan])
    assert np.allclose(p[:3], [0.03, 0.06, 0.06])
    assert np.isnan(p[3])


def test_no_significant_difference_needs_ci_within_noise():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.005, 200), rng.lognormal(0, 0.005, 200)
    r = compare_arrays(a, b)
    assert r["verdict"] == "no significant difference"
    r = compare_arrays(a[:10], b[:10] * 1.0, noise=0.0001)
    assert r["verdict"] == "inconclusive" and r["trials_needed"] >= 10


def test_inconclusive_trials_needed_never_below_what_was_run():
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 0.05, 8), rng.lognormal(0.01, 0.05, 8)
    r = compare_arrays(a, b)
    assert r["verdict"] == "inconclusive"
    assert r["trials_needed"] > 8
    # a large observed effect with a huge CI (heavy-tailed rounds): the formula alone would
    # ask for a handful of rounds; the answer must exceed the 8 just run
    d = np.array([0.9, -0.5, 0.6, 0.05, 0.7, -0.6, 0.8, 0.3])
    r = compare_arrays(np.ones(8), np.exp(d), paired=True)
    assert r["verdict"] == "inconclusive" and r["ci_low_pct"] < -20 and r["ci_high_pct"] > 50
    assert r["trials_needed"] > 8


def test_layout_suspected_when_time_moves_against_the_counts():
    # more instructions, yet faster beyond the CI: the layout, not the code
    df = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                  deterministic_icount={"batch": 110.0, "reorder": 120.0})
    (d,) = diagnose_ab(df, "batch", "reorder")
    assert d["finding"] == "different instructions" and d["layout_suspected"]
    assert d["layout_text"].startswith("layout suspected") and "layout suspected" not in d["text"]
    (dl,) = diagnose_ab(df.assign(layout=0), "batch", "reorder")
    assert "layout suspected" in dl["text"]
    # fewer instructions and faster: what the counts predict
    df2 = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                   deterministic_icount={"batch": 120.0, "reorder": 110.0})
    (d2,) = diagnose_ab(df2, "batch", "reorder")
    assert not d2["layout_suspected"] and "layout suspected" not in d2["text"]


def test_deterministic_metric_is_exact():
    df = make_raw(trials=10, seed=5, deterministic_icount={"batch": 120.0, "reorder": 114.0})
    r = compare(df, "batch", metric="instructions_per_op").iloc[0]
    assert r["note"] == "exact (deterministic metric)" and r["design"] == "exact"
    assert r["verdict"] == "fewer instructions" and math.isnan(r["p_value"]) and math.isnan(r["ci_low_pct"])
    assert r["delta_abs"] == -6.0 and r["delta_pct"] == pytest.approx(-5.0)
    same = make_raw(trials=10, seed=5, deterministic_icount={"batch": 120.0, "reorder": 120.0})
    assert compare(same, "batch", metric="instructions_per_op").iloc[0]["verdict"] == "same instructions"
    # a 0.04% difference is still a difference when counted exactly: no noise band
    tiny = make_raw(trials=10, seed=5, deterministic_icount={"batch": 120.0, "reorder": 120.05})
    assert compare(tiny, "batch", metric="instructions_per_op").iloc[0]["verdict"] == "more instructions"
    # callgrind counts that differ slightly between trials are still exact counts
    jit = df.copy()
    jit["instructions_per_op"] += np.arange(len(jit)) % 3 * 0.001
    r = compare(jit, "batch", metric="instructions_per_op").iloc[0]
    assert r["design"] == "exact" and r["verdict"] == "fewer instructions"


def test_noisy_instruction_counts_say_fewer_instructions():
    df = make_raw(trials=30, seed=5, counters=True, effects={"reorder": -0.1})
    r = compare(df, "batch", metric="instructions_per_op").iloc[0]
    assert r["design"] == "paired" and r["verdict"] == "fewer instructions"


def test_machine_busy_is_named():
    df = make_raw(trials=40, seed=10, cv=0.02, busy_frac=0.3, busy_factor=1.4, rounds_col=True)
    b = busy_rounds(df)
    assert b["cause"] == "machine busy" and b["column"] in ("procs_running", "load1") and b["rho"] > 0.5
    texts = [d["text"] for d in diagnose(df)]
    assert any(t.startswith("all rounds: machine busy") for t in texts)
    assert any("machine busy: slow trials had higher" in t for t in texts)
    # busy indicators that do not follow the slow rounds are not blamed
    quiet = df.copy()
    rng = np.random.default_rng(1)
    quiet["procs_running"] = rng.permutation(quiet["procs_running"].to_numpy())
    quiet["load1"] = rng.permutation(quiet["load1"].to_numpy())
    assert busy_rounds(quiet)["cause"] is None


def test_same_instructions_different_time():
    df = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                  deterministic_icount={"batch": 120.0, "reorder": 120.05})
    (d,) = diagnose_ab(df, "batch", "reorder")
    assert d["finding"] == "same instructions, different time"
    assert "objdump" in d["text"] and "align" in d["text"]
    df2 = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                   deterministic_icount={"batch": 120.0, "reorder": 110.0})
    (d2,) = diagnose_ab(df2, "batch", "reorder")
    assert d2["finding"] == "different instructions" and "120" in d2["text"] and "110" in d2["text"]


def test_bad_arguments_name_allowed_values():
    df = make_raw(trials=5)
    with pytest.raises(StatsError, match="baseline: 'x'.*allowed: batch, reorder"):
        compare(df, "x")
    with pytest.raises(StatsError, match="noise"):
        compare(df, "batch", noise=5)


def test_cli_compare_json_and_table(tmp_path):
    df = make_raw(effects={"reorder": -0.05}, trials=30, seed=7)
    p = tmp_path / "raw.csv"
    df.to_csv(p, index=False)
    out = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "batch", "--json"],
                         capture_output=True, text=True, check=True).stdout
    recs = json.loads(out)
    assert [list(r) for r in recs] == [JSON_FIELDS]
    txt = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "batch"],
                         capture_output=True, text=True, check=True).stdout
    assert "| batch | reorder | design | n_pairs | %change (+ = faster) | 95% CI" in txt and "Welch" in txt
    assert "Holm-corrected over the run (1 comparison(s)" in txt
    bad = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "allowed: batch, reorder" in bad.stderr


# -- layouts and machine states ----------------------------------------------------------------

def _layout_frame(K, R, effect, sigma_layout, seed, **kw):
    sim = noise.simulate_ab(K, R, effect=effect, sigma_layout=sigma_layout, rng=np.random.default_rng(seed), **kw)
    return tidy_frame(sim, ("base", "cand"))


def test_layouts_design_fields_and_json():
    res = compare(_layout_frame(8, 20, (math.log(1.05),) * 2, 0.02, seed=1), "base")
    r = res.iloc[0]
    assert r["design"] == "layouts" and r["layouts"] == 8 and not r["fixed_build"]
    assert "layout" not in res.attrs["group_columns"]
    assert r["verdict"] == "slower" and r["ci_low_pct"] > 0
    assert 0 <= r["layout_share"] <= 1 and r["sigma_layout_pct"] >= 0
    assert r["states"] in (1, 2)
    (rec,) = to_records(res)
    assert list(rec) == JSON_FIELDS
    assert rec["layouts"] == 8 and rec["fixed_build"] is False and isinstance(rec["layout_sensitive"], bool)
    check_rule(res)


def test_layouts_p_and_ci_are_the_fit_of_layout_pair_and_round():
    """Balanced rounds (every layout pair 20 times): the REML fit's theta is the mean log ratio,
    and with a layout variance above 0 its t interval on K - 1 df is the t interval across the
    layout pairs' mean log ratios."""
    df = _layout_frame(6, 20, (0.02, 0.02), 0.02, seed=2, state_gap=0.0)
    r = compare(df, "base").iloc[0]
    lay = df.pivot_table(index=["round", "layout"], columns="variant", values="ns_per_op").reset_index()
    d = np.log(lay["cand"] / lay["base"]).to_numpy()
    e = [d[lay["layout"] == k].mean() for k in range(6)]
    t = sst.ttest_1samp(e, 0.0)
    assert r["states"] == 1 and r["sigma_layout_pct"] > 0 and r["sigma_round_pct"] > 0
    assert r["p_value"] == pytest.approx(t.pvalue)
    assert r["delta_pct"] == pytest.approx(math.expm1(d.mean()) * 100)
    lo, hi = sst.t.interval(0.95, 5, loc=np.mean(e), scale=sst.sem(e))
    assert (r["ci_low_pct"], r["ci_high_pct"]) == pytest.approx((math.expm1(lo) * 100, math.expm1(hi) * 100))


def test_one_fixed_build_with_opposite_state_effects_keeps_its_signed_rank_verdict():
    df = _layout_frame(1, 120, (-0.035, 0.087), 0.0, seed=4)
    res = compare(df, "base")
    r = res.iloc[0]
    assert r["design"] == "paired" and r["fixed_build"] and r["layouts"] == 1 and r["states"] == 2
    assert r["ci_fast_high_pct"] < 0 < r["ci_slow_low_pct"] and r["heterogeneity_p"] < 1e-3
    # the headline is the signed-rank estimate of every round, as without a layout column
    plain = compare(df.drop(columns="layout"), "base").iloc[0]
    for k in ("delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm", "verdict"):
        assert r[k] == plain[k], k
    assert r["verdict"] == "slower" and "machine states: faster in the fast state" in r["note"]
    check_rule(res)
    # files made when the states could decide the verdict are still checked
    old = res.copy()
    old["verdict"] = "depends on machine state"
    check_rule(old)
    old["ci_fast_high_pct"] = 1.0
    with pytest.raises(StatsError, match="per-state CIs"):
        check_rule(old)


def test_runs_without_a_layout_column_have_null_layout_fields():
    res = compare(make_raw(effects={"reorder": -0.05}, trials=30, seed=1), "batch")
    (rec,) = to_records(res)
    assert rec["design"] == "paired"
    assert all(rec[k] is None for k in ("layouts", "states", "fixed_build", "layout_sensitive", "delta_fast_pct"))
    # a frame made before the layout fields existed still has every JSON field
    assert list(to_records(res.drop(columns=["layouts", "states"]))[0]) == JSON_FIELDS
