"""The scenarios of ``ringlab bench stopping``: the noise has each level, the sizes come from the
committed runs' files, and the harness counts A/A calls, coverage and widths right."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from ringlab.simulate import fitted, stoppingsim
from ringlab.simulate.noise import RunNoise
from ringlab.simulate.stoppingsim import RealRun, RowOutcome, Scenario

KEY_B, KEY_C = ("0", "batch"), ("0", "reorder")


def _noise(seed=0, **kw):
    args = dict(sigma_layout=0.0, sigma_process=0.0, sigma_iteration=0.0, effects={KEY_C: (0.0, 0.0)})
    args.update(kw)
    return RunNoise(np.random.default_rng(seed), **args)


def test_the_layout_level_gives_a_pair_its_variance_and_stays_with_the_build():
    n = RunNoise(np.random.default_rng(1), 0.03, 0.0, 0.0, {KEY_C: (0.0, 0.0)})
    lay = np.arange(4000)
    b, _ = n.trials([KEY_B] * 4000, lay, 1)
    c, _ = n.trials([KEY_C] * 4000, lay, 1)
    assert np.var(c[:, 0] - b[:, 0]) == pytest.approx(0.03 ** 2, rel=0.1)
    again, _ = n.trials([KEY_B] * 4000, lay, 1)            # the same binary again: the same offset
    np.testing.assert_array_equal(again, b)


def test_states_last_many_trials_and_carry_their_own_effect():
    n = _noise(2, state_gap=0.2, durations=(6.0, 4.0), effects={KEY_C: (0.02, -0.02)})
    y, st = n.trials([KEY_C] * 20000, np.zeros(20000, int), 1)
    assert set(np.unique(st)) == {0, 1}
    np.testing.assert_allclose(y[st == 0, 0], 0.02)
    np.testing.assert_allclose(y[st == 1, 0], 0.2 - 0.02)
    runs = np.diff(np.flatnonzero(np.diff(np.r_[-1, st, -1]) != 0))
    assert np.mean(runs) == pytest.approx(2 / (1 / 6 + 1 / 4), rel=0.15)   # mean run length of the chain
    assert st.mean() == pytest.approx(0.4, abs=0.05)


def test_the_round_level_has_heavier_tails_than_normal_at_the_same_variance():
    t4 = _noise(3, sigma_process=0.04, process_df=4.0)
    normal = _noise(3, sigma_process=0.04)
    a, _ = t4.trials([KEY_B] * 40000, np.zeros(40000, int), 1)
    b, _ = normal.trials([KEY_B] * 40000, np.zeros(40000, int), 1)
    assert np.var(a) == pytest.approx(0.04 ** 2 / 2, rel=0.15)
    assert np.var(b) == pytest.approx(0.04 ** 2 / 2, rel=0.05)
    assert sst.kurtosis(a[:, 0]) > 2.0 > abs(sst.kurtosis(b[:, 0])) + 1.5


def test_the_drift_shifts_each_run_s_effect_by_its_own_draw():
    shifts = []
    for seed in range(600):
        n = _noise(seed, drift_sd=0.01)
        y, _ = n.trials([KEY_C], np.zeros(1, int), 1)
        assert y[0, 0] == pytest.approx(n.shift[KEY_C])
        shifts.append(n.shift[KEY_C])
    assert np.std(shifts) == pytest.approx(0.01, rel=0.1)
    assert _noise(0).shift[KEY_C] == 0.0


def _run(truth=0.0, est=0.0, half=0.01, true_se=0.005, verdict="inconclusive", looks_called=0, se=None):
    row = RowOutcome(estimate=est, low=est - half, high=est + half, se=half / 1.96 if se is None else se,
                     df=math.inf, truth=truth, true_se=true_se, verdict=verdict, states=1)
    return RealRun(rows=(row,), looks=2, looks_called=looks_called, stop_reason="budget", spent_s=1.0,
                   layouts=8, rounds=32, repeats=1)


def test_the_harness_counts_calls_at_any_look_and_coverage_on_a_known_case():
    runs = [_run(true_se=0.003) for _ in range(100)]
    for i in range(6):
        runs[i] = _run(verdict="slower", true_se=0.003)    # a final call
        runs[6 + i] = _run(looks_called=1, true_se=0.003)  # a call at an earlier look only
    for i in range(12, 22):                                # 10 rows whose CI misses the truth (0)
        runs[i] = _run(est=0.05, true_se=0.003)
    s = stoppingsim.scenario_summary(runs, Scenario("known"))
    assert (s["aa"], s["aa_final"], s["aa_rate"]) == (12, 6, 0.12)
    assert s["aa_interval"] == (pytest.approx(0.01), pytest.approx(0.10))
    assert any("A/A rate 12.00% outside [1.00%, 10.00%]" in f for f in s["failed"])
    assert s["ci_coverage"] == pytest.approx(0.90)
    assert s["ci_width_ratio"] == pytest.approx(0.02 / (2 * sst.norm.ppf(0.975) * 0.003))
    assert any("CI coverage 90.0% < 94%" in f for f in s["failed"])
    assert any("CI width ratio 1.70 > 1.5" in f for f in s["failed"])


def test_a_case_that_meets_every_criterion_passes():
    rng = np.random.default_rng(5)
    runs = []
    for _ in range(400):
        e = float(rng.normal(0.0, 0.01))
        runs.append(_run(est=e, half=1.96 * 0.01, true_se=0.01, verdict="slower" if abs(e) > 0.0196 else "x"))
    s = stoppingsim.scenario_summary(runs, Scenario("normal"))
    assert 0.93 <= s["ci_coverage"] <= 0.97 and s["ci_width_ratio"] == pytest.approx(1.0, rel=1e-3)
    assert s["aa_interval"][0] <= s["aa_rate"] <= s["aa_interval"][1]
    if stoppingsim.next_run_api() is not None:
        assert 0.9 <= s["next_coverage"] <= 0.99 and s["next_pairs"] == 400 - stoppingsim.BETWEEN_RUNS
    assert s["failed"] == [] or all(f.startswith("next-run") for f in s["failed"])


@pytest.mark.skipif(stoppingsim.next_run_api() is None, reason="replication.next_run_interval not available yet")
def test_next_run_coverage_against_a_far_next_run():
    runs = [_run(est=0.0, half=0.0196, se=0.01) for _ in range(20)]
    runs[10] = _run(est=0.5, half=0.0196, se=0.01)         # run 10 lands far away: runs 9 and 10 miss
    s = stoppingsim.scenario_summary(runs, Scenario("far"))
    pairs = 20 - stoppingsim.BETWEEN_RUNS
    assert s["next_pairs"] == pairs
    # run 9's interval misses run 10; runs 10..14 take run 10 into their between-run variance
    assert s["next_coverage"] < 1.0


def _results_tree(tmp_path, states=True):
    cmp = pd.DataFrame({"design": ["layouts", "layouts", "paired"], "sigma_layout_pct": [2.0, 4.0, 9.0],
                        "states": [2, 1, 2], "delta_fast_pct": [1.0, np.nan, 5.0], "delta_slow_pct": [-2.0, np.nan, 1.0]})
    (tmp_path / "exp" / "host").mkdir(parents=True)
    cmp.to_csv(tmp_path / "exp" / "host" / "compare.csv", index=False)
    cal = tmp_path / "calibration" / "h1"
    cal.mkdir(parents=True)
    doc = {"run_id": "R1", "levels": {"0": {"variance": {"layout": 1e-4, "process": 0.03 ** 2, "iteration": 0.02 ** 2},
                                           "cost_s": {"layout": 0.5, "process": 0.01, "iteration": 0.05}}},
           "states": {"n_states": 2, "levels": [0.0, 0.1], "mean_duration": [8.0, 5.0]} if states else {"n_states": 1}}
    (cal / "calibration.json").write_text(json.dumps(doc))
    return tmp_path


def test_the_sizes_are_read_from_the_committed_files_and_say_where_from(tmp_path):
    lv = fitted.committed_levels(_results_tree(tmp_path))
    assert lv.sigma_layout == pytest.approx(0.03)          # median of the layouts-design rows only
    assert (lv.sigma_process, lv.sigma_iteration) == (pytest.approx(0.03), pytest.approx(0.02))
    assert lv.state_gap == pytest.approx(0.1) and lv.durations == (8.0, 5.0)
    assert lv.state_effect_diff == pytest.approx(0.035)    # median of |1 - -2| and |5 - 1|
    text = "\n".join(lv.lines())
    assert "2 layouts-design rows in 1 committed compare.csv" in text and "calibration/h1/calibration.json" in text
    assert lv.missing() == []


def test_a_figure_that_cannot_be_read_is_missing_not_made_up(tmp_path):
    lv = fitted.committed_levels(_results_tree(tmp_path, states=False))
    assert math.isnan(lv.state_gap) and "state gap" in lv.missing()
    assert "no two states" in "\n".join(lv.lines())


@pytest.fixture(scope="module")
def levels():
    return fitted.Levels(sigma_layout=0.02, sigma_process=0.03, sigma_iteration=0.01, state_gap=0.1,
                         durations=(6.0, 4.0), state_effect_diff=0.04,
                         cost_s={"layout": 0.5, "process": 0.005, "iteration": 0.05}, host="h", mode="0")


def test_a_seeded_run_of_each_kind_goes_through_the_run_s_stopping_code(levels):
    from ringlab.stats.calibration import LevelCalibration
    planner = LevelCalibration(mode="0", variance={"layout": 0.02 ** 2, "process": 0.03 ** 2, "iteration": 0.01 ** 2},
                               upper={"layout": 0.03 ** 2, "process": 0.035 ** 2, "iteration": 0.012 ** 2},
                               df={"layout": 7, "process": 100, "iteration": 200},
                               cost_s=dict(levels.cost_s), count=10_000_000)
    scs = {s.name: s for s in stoppingsim.scenarios(levels)}
    one = stoppingsim.simulate_real_run(levels, scs["drift 1 point"], planner, 1.0, 4, seed=4)
    assert one == stoppingsim.simulate_real_run(levels, scs["drift 1 point"], planner, 1.0, 4, seed=4)
    assert len(one.rows) == 1 and one.looks >= 1 and one.rounds >= one.layouts >= 4
    # known answer: the run's effect is theta (0) plus its drift, the first draw of the run's generator
    assert one.rows[0].truth == pytest.approx(float(np.random.default_rng(4).normal(0.0, 0.01)), abs=1e-15)
    fam = stoppingsim.simulate_real_run(levels, scs["3 candidates x 2 modes (Holm family of 6)"], planner, 1.0, 4, seed=4)
    assert len(fam.rows) == 6 and all(r.truth == 0.0 for r in fam.rows)
    st = stoppingsim.simulate_real_run(levels, scs["two states, state-dependent effect"], planner, 1.0, 4, seed=4)
    r = st.rows[0]
    # the states' effects weighted by the run's trials in each: between the two, not their mean
    assert -0.02 < r.truth < 0.02 and r.truth != 0.0 and not st.aa


def test_the_harness_reads_the_frame_the_last_look_printed_as_compare_would_make_it(levels, monkeypatch):
    from ringlab.stats.calibration import LevelCalibration
    planner = LevelCalibration(mode="0", variance={"layout": 0.02 ** 2, "process": 0.03 ** 2, "iteration": 0.01 ** 2},
                               upper={"layout": 0.03 ** 2, "process": 0.035 ** 2, "iteration": 0.012 ** 2},
                               df={"layout": 7, "process": 100, "iteration": 200},
                               cost_s=dict(levels.cost_s), count=10_000_000)
    scs = stoppingsim.scenarios(levels)
    kept = [stoppingsim.simulate_real_run(levels, sc, planner, 1.0, 4, seed=5) for sc in (scs[0], scs[3], scs[5])]
    used = []
    real = stoppingsim.last_look_printed
    monkeypatch.setattr(stoppingsim, "last_look_printed", lambda seen, df: used.append(real(seen, df)) or None)
    made = [stoppingsim.simulate_real_run(levels, sc, planner, 1.0, 4, seed=5) for sc in (scs[0], scs[3], scs[5])]
    assert kept == made and len(used) == 3 and all(u is not None for u in used)


def _bench():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "stopping_aa.py"
    spec = importlib.util.spec_from_file_location("stopping_aa_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_command_prints_each_figure_with_its_source_and_says_when_next_run_is_missing(tmp_path, capsys,
                                                                                          monkeypatch):
    bench = _bench()
    tree = _results_tree(tmp_path)
    monkeypatch.setattr(stoppingsim, "next_run_api", lambda: None)
    rc = bench.main(["--runs", "6", "--scenarios", "1", "--budget", "4", "--target", "1", "--jobs", "1",
                     "--results", str(tree), "--host", "h1"])
    out = capsys.readouterr().out
    assert rc in (0, 1)
    assert "median sigma_layout_pct of 2 layouts-design rows" in out and "calibration/h1/calibration.json" in out
    assert "next-run coverage: not available yet" in out
    assert "1. no drift" in out and "A/A over all looks" in out and "CPU s per simulated run" in out
    assert ("MISSED" in out) == (rc == 1)


def test_the_command_refuses_to_simulate_a_figure_it_cannot_read(tmp_path, capsys):
    rc = _bench().main(["--runs", "2", "--results", str(_results_tree(tmp_path, states=False)), "--host", "h1"])
    assert rc == 2 and "cannot simulate: no committed figure for state gap" in capsys.readouterr().out


def _two_state_raw(seed=3, rounds=96, layouts=8):
    """A raw frame of one pair of arms over ``layouts`` layout pairs with two machine states."""
    n = RunNoise(np.random.default_rng(seed), 0.02, 0.01, 0.005, {KEY_C: (0.03, -0.01)}, state_gap=0.3,
                 durations=(10.0, 8.0))
    keys, lay, rnd = [], [], []
    rng = np.random.default_rng(seed + 1)
    for r in range(rounds):
        for k in rng.permutation([KEY_B, KEY_C]):
            keys.append(tuple(k))
            lay.append(r % layouts)
            rnd.append(r)
    y, _ = n.trials(keys, np.array(lay), 1)
    return pd.DataFrame({"variant": [k[1] for k in keys], "mode": "0", "size": 1000, "trial": rnd, "round": rnd,
                         "layout": lay, "iteration": 0, "order": np.tile([0, 1], rounds), "warmup": False,
                         "status": "ok", "ns_per_op": 3.0 * np.exp(y[:, 0])})


def test_compare_without_the_state_classifier_gives_the_same_headline():
    from ringlab.stats.compare import compare, states_diagnostic
    df = _two_state_raw()
    full = compare(df, "batch")
    assert int(full["states"].iloc[0]) == 2                # the classifier found the two states
    head = ["delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "verdict", "design"]
    for quick in (compare(df, "batch", states=False), _in_context(df)):
        assert int(quick["states"].iloc[0]) == 1
        pd.testing.assert_frame_equal(quick[head], full[head])
    with states_diagnostic(False):
        assert int(compare(df, "batch", states=True)["states"].iloc[0]) == 2   # an explicit keyword wins


def test_compare_at_several_alphas_gives_each_alpha_s_own_compare():
    from ringlab.stats.compare import compare, compare_alphas
    frames = [_two_state_raw(seed=s, rounds=r, layouts=k) for s, r, k in ((3, 96, 8), (5, 24, 4), (7, 40, 1))]
    family = pd.concat([f.assign(variant=f["variant"].replace("reorder", v), mode=m)
                        for f, (v, m) in zip(frames[:2] * 2, (("reorder", "0"), ("kernel", "0"),
                                                               ("reorder", "1"), ("kernel", "1")))])
    family = family[~(family["variant"].eq("batch") & family.duplicated(["variant", "mode", "round"]))]
    for df in (*frames, family):
        for states in (True, False):
            alphas = (0.05, 0.0125, 0.05 / 3)
            for alpha, got in zip(alphas, compare_alphas(df, "batch", alphas, states=states)):
                pd.testing.assert_frame_equal(got, compare(df, "batch", alpha=alpha, states=states))


def test_the_rule_check_of_the_rows_is_the_check_of_their_frame():
    from ringlab.stats.compare import compare
    from ringlab.stats.contract import NOT_AFTER_HOLM, check_rule
    from ringlab.stats.summary import StatsError
    row = compare(_two_state_raw(), "batch").iloc[0].to_dict()
    called = dict(row, verdict="slower", holm_ci_low_pct=1.0, holm_ci_high_pct=3.0, ci_low_pct=1.5, ci_high_pct=2.5)
    cases = {"called": (called, True),
             "inconclusive, CI excludes 0": (dict(called, verdict="inconclusive"), False),
             "called, printed CI holds 0": (dict(called, holm_ci_low_pct=math.nan, holm_ci_high_pct=math.nan,
                                                 ci_low_pct=-1.0, ci_high_pct=1.0), False),
             "not after Holm": (dict(called, verdict=NOT_AFTER_HOLM, holm_ci_low_pct=-1.0), True),
             "no difference, printed CI excludes 0": (dict(called, verdict="no significant difference",
                                                           holm_ci_low_pct=-1.0), False)}
    for name, (r, ok) in cases.items():
        for form in ([r], pd.DataFrame([r]), [r, called]):
            if ok:
                check_rule(form)
            else:
                with pytest.raises(StatsError):
                    check_rule(form)


def test_a_two_state_run_s_effect_is_what_its_rounds_estimate():
    gap = 0.2
    eff = (gap, -gap)   # the slow state slows the baseline alone: a round's log ratio is then the mean
    #                     effect of its two trials' states, whatever order the arms ran in
    apart = 0
    for seed in range(20):
        n = _noise(seed, state_gap=gap, durations=(3.0, 2.0), effects={KEY_C: eff})
        order = np.random.default_rng(100 + seed)
        keys = [tuple(k) for _ in range(200) for k in order.permutation([KEY_B, KEY_C])]
        y, st = n.trials(keys, np.zeros(len(keys), int), 1)
        log = {}
        for k, s in zip(keys, st):
            log.setdefault(k, []).append(int(s))
        by = {k: y[[i for i, kk in enumerate(keys) if kk == k], 0] for k in (KEY_B, KEY_C)}
        mean_log_ratio = float(np.mean(by[KEY_C] - by[KEY_B]))
        truth = stoppingsim.run_effect(eff, stoppingsim.slow_share(log), 0.0)
        assert mean_log_ratio == pytest.approx(truth, abs=1e-12)
        # the candidate's trials alone: off by the state gap between a round's two trials
        apart += abs(stoppingsim.run_effect(eff, float(np.mean(log[KEY_C])), 0.0) - truth) > 1e-3
    assert apart >= 10
    assert stoppingsim.slow_share({}) == 0.0
    assert stoppingsim.slow_share({KEY_B: [0, 1, 1], KEY_C: [1]}) == 0.75


def _in_context(df):
    from ringlab.stats.compare import compare, states_diagnostic
    with states_diagnostic(False):
        return compare(df, "batch")


def test_the_cached_t_quantile_is_scipy_s():
    from ringlab.stats import plan
    for df in (1, 2, 7, 40, 300):
        for level in (0.95, 0.99):
            assert plan._half_width(0.04, df + 1, level) == \
                float(sst.t.ppf(0.5 + level / 2, df) * math.sqrt(0.04 / (df + 1)))


def test_a_run_s_effect_is_its_state_mix_plus_its_drift_and_a_false_call_is_against_it():
    assert stoppingsim.run_effect((0.02, -0.02), 0.25, 0.0) == pytest.approx(0.01)
    assert stoppingsim.run_effect((0.0, 0.0), 0.5, 0.007) == pytest.approx(0.007)
    assert stoppingsim.false_call("slower", 0.0) and stoppingsim.false_call("faster", 0.0)
    assert stoppingsim.false_call("faster", 0.004) and not stoppingsim.false_call("slower", 0.004)
    assert stoppingsim.false_call("slower", -0.004) and not stoppingsim.false_call("inconclusive", 0.0)


def test_with_drift_a_run_s_ci_is_checked_against_its_own_effect_not_theta():
    drifts = [0.01 * (1 if i % 2 else -1) for i in range(100)]
    # each CI holds theta + b_run (and not theta = 0); the calls have the sign of the run's effect
    runs = [_run(truth=b, est=b, half=0.004, true_se=0.002, verdict="slower" if b > 0 else "faster") for b in drifts]
    s = stoppingsim.scenario_summary(runs, Scenario("drift", drift_sd=0.01))
    assert s["ci_coverage"] == 1.0 and not s["aa_only"]
    assert (s["aa"], s["aa_looks"], s["aa_final"]) == (0, 0, 0)
    wrong = [_run(truth=b, est=-b, half=0.004, true_se=0.002, verdict="faster" if b > 0 else "slower")
             for b in drifts]
    s = stoppingsim.scenario_summary(wrong, Scenario("drift", drift_sd=0.01))
    assert s["ci_coverage"] == 0.0 and s["aa"] == 100
    assert any(f.startswith("false-call rate 100.00% above") for f in s["failed"])
