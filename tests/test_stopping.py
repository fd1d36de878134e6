"""Stop when the question is answered, through the runner: a pilot at the level planner's design,
stages re-planned from the run's own data, the three stop reasons, stable layouts, resume.

The mock executor (tests/fakes/fake_ptr_ring_test.py) adds seeded log-normal noise
(FAKE_NOISE, FAKE_NOISE_FILE), so the stages have a spread and the plan depends on it.  The
host has no calibration here, so the pilot is planned from CAUTIOUS.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sst

from ringlab import rundir
from ringlab.run import runner
from ringlab.build.layouts import copy_groups, layout_spec
from ringlab.errors import ParamError
from ringlab.experiments.params import has_target
from ringlab.lab import cli
from ringlab.run import stopping
from ringlab.stats import compare as stats_compare
from ringlab.report.stopping_sentences import stopping_text
from ringlab.stats import sequential
from ringlab.stats.decide import row_decision
from ringlab.stats.calibration import CAUTIOUS, LevelCalibration
from ringlab.stats.stopping_record import RowRecord, Stopping

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

#: noise the CAUTIOUS pilot does not plan for, so a second stage follows it, cut by the budget
STAGED = {"target_ci": "10", "budget": "20"}
BASE = {"profile": "smoke", "cpus": "none", "governor": "false", "variants": "batch,reorder", "modes": "0",
        "sizes": "1000", "warmup": 1, "count": 1000}


@pytest.fixture
def noisy(fakebin, tmp_path, monkeypatch):
    """The mock binaries (64 layouts of batch and reorder at seed 1) with seeded multiplicative
    noise on every trial."""
    import fake_ptr_ring_test as fake
    fake.install(str(fakebin), sys.executable, variants=("batch", "reorder"), seeds=(1,), layouts=64)
    monkeypatch.setenv("FAKE_NOISE", "0.08")
    monkeypatch.setenv("FAKE_NOISE_FILE", str(tmp_path / "noise-counter"))
    return tmp_path


def run(params, out, **kw):
    kw.setdefault("build", False)
    kw.setdefault("progress", False)
    kw.setdefault("log", lambda m: None)
    return runner.run_experiment("ptr_ring", {**BASE, **params}, out, **kw)


def measured(df: pd.DataFrame) -> pd.DataFrame:
    return df[~df["warmup"].astype(bool)]


@pytest.fixture
def fake_clock(monkeypatch):
    """The staged loop's clock (``stopping.clock``), advanced only by the trials: ``cost["trial"]``
    fake seconds a measured trial, ``cost["warmup"]`` a warm-up trial; nothing sleeps."""
    from ringlab.run import process
    now = {"t": 1000.0}
    cost = {"trial": 1.0, "warmup": 1.0}
    monkeypatch.setattr(stopping, "clock", lambda: now["t"], raising=False)
    real = process.execute

    def timed(exp, spec, order, ctx):
        rows = real(exp, spec, order, ctx)
        now["t"] += cost["warmup" if spec.warmup else "trial"]
        return rows
    monkeypatch.setattr(process, "execute", timed)
    monkeypatch.setattr(runner, "execute", timed)
    return {"now": now, "cost": cost}


def _interrupt_at_trial(monkeypatch, n: int):
    """Ctrl-C arrives as the run starts its n-th trial; returns the real executor."""
    calls = {"n": 0}
    from ringlab.run import process
    real = process.execute

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(runner, "execute", dying)
    return real


def test_params_are_off_by_default_in_smoke_and_checked():
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({"profile": "smoke"})
    assert v["target_ci"] == 0 and v["budget"] == 0 and not has_target(v)
    with pytest.raises(ParamError, match="parameter 'budget'.*without target_ci"):
        get("ptr_ring").resolve({"profile": "smoke", "budget": "30"})
    with pytest.raises(ParamError, match="parameter 'target_ci'.*too large"):
        get("ptr_ring").resolve({"target_ci": "100"})


def test_profiles_are_questions_and_explicit_counts_stay_fixed():
    from ringlab.experiments import get
    p = get("ptr_ring")
    q = p.resolve({})
    assert q["profile"] == "quick" and q["target_ci"] == 0.5 and 60 <= q["budget"] <= 80
    f = p.resolve({"profile": "full"})
    assert f["target_ci"] > 0 and f["budget"] > q["budget"]
    fixed = p.resolve({"trials": "5", "layouts": "3"})
    assert fixed["target_ci"] == 0 and fixed["budget"] == 0 and fixed["trials"] == 5 and fixed["layouts"] == 3
    assert p.resolve({"layouts": "2"})["target_ci"] == 0
    assert p.resolve({"variants": "batch"})["target_ci"] == 0          # one arm: nothing to compare
    assert p.resolve({"trials": "5", "target_ci": "2"})["target_ci"] == 2.0


def test_a_profile_plans_the_trial_length_and_a_given_count_stands(noisy, monkeypatch):
    from ringlab.experiments import get
    from ringlab.experiments.ptr_ring import DEFAULT_COUNT
    p = get("ptr_ring")
    assert p.resolve({})["count"] is None and p.resolve({"profile": "full"})["count"] is None
    assert p.resolve({"trials": "5"})["count"] == DEFAULT_COUNT          # a fixed design: the default
    assert p.resolve({"count": "2000"})["count"] == 2000
    again = p.resolve(p.resolve({}))                # a notebook's resolved set, passed to the run
    assert again["count"] is None and again["target_ci"] == 0.5
    # no calibration of this host: the cautious defaults' count
    v = dict(p.resolve({**BASE, "target_ci": "1", "budget": "10", "profile": "quick"}), count=None)
    st = stopping.opening(v, stopping.load_levels(v, "nohost"))
    assert st.count == max(stopping.planned_counts(v, stopping.load_levels(v, "nohost")).values()) == CAUTIOUS.count
    assert stopping.stage_values(v, st)["count"] == CAUTIOUS.count
    # a calibration with a trial-length probe: the longest of the modes' shortest unbiased trials
    cal = {"levels": {m: dict(CAUTIOUS.as_dict(), mode=m, source="measured", min_count=c)
                      for m, c in (("0", 250_000), ("1", 1_000_000))}}
    monkeypatch.setattr(stopping, "level_calibrations", lambda host, modes: {
        str(m): LevelCalibration.from_dict(cal["levels"][str(m)]) for m in modes})

    def opening(values, host):
        return stopping.opening(values, stopping.load_levels(values, host))
    v01 = dict(v, modes=[0, 1])
    assert opening(v01, "h").count == 1_000_000
    assert opening(v01, "h").count_by_mode == {"0": 250_000, "1": 1_000_000}
    assert stopping.stage_values(v01, opening(v01, "h"))[stopping.COUNT_BY_MODE] == \
        {"0": 250_000, "1": 1_000_000}
    assert opening(dict(v, modes=[0]), "h").count == 250_000
    # a count given is the run's, and the stopping record plans none
    given = opening(dict(v01, count=2000), "h")
    assert "count" not in given.to_json() and stopping.stage_values(dict(v01, count=2000), given)["count"] == 2000


def test_one_variant_is_refused_before_anything_is_written(noisy):
    with pytest.raises(ParamError, match="parameter 'target_ci': needs two or more variants"):
        run({"variants": "batch", "target_ci": "5"}, noisy / "r")
    assert not (noisy / "r").exists()


def test_pilot_is_the_level_planners_design_and_says_its_calibration(noisy, monkeypatch):
    monkeypatch.delenv("FAKE_NOISE")   # identical rounds: the target is met after the pilot
    res = run({"target_ci": "0.5", "budget": "60"}, noisy / "r")
    env = rundir.read_env(res.out_dir).doc
    st = env["stopping"]
    st0 = st["stages"][0]
    assert "cautious defaults" in st["calibration"] and set(st["calibration_by_mode"]) == {"0"}
    assert st0["layouts"] >= 4 and st0["rounds_per_layout"] >= sequential.POLICY.min_rounds_per_layout
    df = rundir.read_raw(res.raw_csv)
    m = measured(df)
    # the pilot: every layout pair rounds_per_layout times, both arms each round
    per = m.groupby("layout")["round"].nunique()
    assert sorted(per.index) == list(range(st0["layouts"])) and (per == st0["rounds_per_layout"]).all()
    assert (m.groupby("round")["variant"].apply(sorted).map(tuple) == ("batch", "reorder")).all()
    assert env["baseline"] == st["baseline"] == "batch"
    assert "cautious defaults" in _text(st)


def test_stops_when_the_budget_is_spent(noisy, monkeypatch, fake_clock):
    # a trial takes 1 s: the warm-up round 2 s, and the pilot is cut to the 2 x 2 rounds the
    # 12 s budget pays for; what is left after it buys too little to review again
    monkeypatch.setenv("FAKE_NOISE", "0.5")   # nothing decided in the pilot
    res = run({"target_ci": "0.5", "budget": "12"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop_reason"] == "budget" and st["budget_s"] == 12
    assert len(st["stages"]) == 1 and st["stages"][0]["stop_reason"] == "budget"
    assert st["stages"][0]["build_s"] is not None and st["stages"][0]["measure_s"] > 0   # builds are timed too
    assert st["spent_s"] == pytest.approx(st["stages"][0]["build_s"] + st["stages"][0]["measure_s"])
    assert st["rounds_run"] == st["rounds_planned"] == st["pilot_rounds"]
    assert st["target_met"] is False
    text = _text(st)
    assert text.startswith(f"stopped: budget spent ({st['spent_s']:.0f} s of 12)")
    from ringlab.report import write_report
    write_report(res.out_dir, figures=False)
    top = (res.out_dir / "summary.md").read_text().split("\n## ")[0]
    assert text in top.splitlines()


def test_stops_when_every_row_reached_its_target(noisy, monkeypatch):
    monkeypatch.delenv("FAKE_NOISE")   # identical rounds: exact comparisons
    res = run({"target_ci": "5"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop_reason"] == "target" and st["target_met"] is True
    assert len(st["stages"]) == 1 and st["stages"][0]["stop_reason"] == "target"
    assert _text(st).startswith("stopped: target reached")


def test_stops_when_every_row_is_decided(noisy):
    # reorder is 10% faster than batch in the mock: decided long before a ±0.1% target
    res = run({"target_ci": "0.1", "budget": "60"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop_reason"] == "decided", st
    assert st["target_met"] is False
    assert [r["decided"] for r in st["rows"]] == ["faster"]
    assert st["stages"][-1]["stop_reason"] == "decided"
    assert all(s["stop_reason"] == "continue" for s in st["stages"][:-1])
    text = _text(st)
    assert text.startswith("stopped: all rows decided") and "reorder (mode=0,size=1000," in text and "): faster." in text


def test_stop_target_goes_on_past_a_decided_row_to_its_half_width(noisy):
    # the same 10% effect: with -p stop target the decided row does not end the run
    res = run({"target_ci": "0.1", "budget": "4", "stop": "target"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop"] == "target"
    assert st["stop_reason"] in ("target", "budget", "stages"), st
    assert [r["decided"] for r in st["rows"]] == ["faster"]
    assert all(s["stop_reason"] != "decided" for s in st["stages"])
    assert sequential.stage_stop_reason(Stopping.from_json(st).rows, 0.0, None, 1, on_decided=True) == "decided"


def test_rows_are_judged_against_the_baseline_parameter(noisy):
    # the stop judges the comparison asked for: against reorder, batch is the candidate (slower)
    res = run({"target_ci": "0.1", "budget": "60", "baseline": "reorder"}, noisy / "r")
    env = rundir.read_env(res.out_dir).doc
    st = env["stopping"]
    assert st["baseline"] == "reorder" and env["baseline"] == "reorder"
    assert [(r["candidate"], r["decided"]) for r in st["rows"]] == [("batch", "slower")], st["rows"]


def test_a_baseline_outside_the_variants_is_refused_before_anything_is_written(noisy):
    with pytest.raises(ParamError, match=r"parameter 'baseline': 'prebatch' is not in variants; allowed: batch, reorder"):
        run({"target_ci": "5", "baseline": "prebatch"}, noisy / "r")
    assert not (noisy / "r").exists()


def test_no_change_larger_than_x_is_an_equivalence_statement():
    row = {"verdict": "inconclusive", "ci_low_pct": -0.4, "ci_high_pct": 0.3}
    assert row_decision(row, 0.5) == "no change larger than 0.5%"
    assert row_decision(dict(row, ci_high_pct=0.6), 0.5) is None
    assert row_decision(dict(row, verdict="slower", ci_low_pct=0.2), 0.5) == "slower"


def test_stages_add_layouts_and_rounds_and_keep_the_earlier_ones(noisy, monkeypatch, fake_clock):
    # the budget is a deadline: on the fake clock a trial costs 0.01 s whatever the machine's load
    fake_clock["cost"].update(trial=0.01, warmup=0.01)
    monkeypatch.setenv("FAKE_NOISE", "0.3")
    res = run(STAGED, noisy / "r")
    env = rundir.read_env(res.out_dir).doc
    st = env["stopping"]
    assert len(st["stages"]) >= 2, st
    df = rundir.read_raw(res.raw_csv)
    m = measured(df)
    # stage s's rounds follow stage s-1's, and the design is the last stage's
    assert sorted(m["round"].unique()) == list(range(1, 1 + st["rounds_planned"])) and st["rounds_run"] == st["rounds_planned"]
    per = m.groupby("layout")["round"].nunique()
    assert sorted(per.index) == list(range(st["layouts"])) and (per == st["rounds_per_layout"]).all()
    prev = st["stages"][0]
    for s in st["stages"][1:]:
        assert s["first_round"] == prev["first_round"] + prev["new_rounds"]
        assert s["layouts"] >= prev["layouts"] and s["rounds_per_layout"] >= prev["rounds_per_layout"]
        assert (s["layouts"], s["rounds_per_layout"]) != (prev["layouts"], prev["rounds_per_layout"])
        prev = s
    # layout k is the same layout in every stage: each stage's binaries hold the copies
    # layout_spec(seed, arm, 0..K-1), so layout k keeps its pad and alignments (and its place in
    # the page) whatever the number of layouts around it
    used = set(env["binaries_used"])
    for cmd_variant, k in m[["variant", "layout"]].drop_duplicates().itertuples(index=False):
        base = f"ptr_ring_test-{cmd_variant}"
        names = {g.binary_name(base) for n in range(int(k) + 1, st["layouts"] + 1)
                 for g in copy_groups([layout_spec(1, cmd_variant, i) for i in range(n)])
                 if any(lay.index == int(k) for lay in g.layouts)}
        assert used & names, (cmd_variant, k, sorted(u for u in used if u.startswith(base)))
    # the pilot's rounds are those a run that stopped after the pilot measures
    monkeypatch.setattr(sequential, "POLICY", dataclasses.replace(sequential.POLICY, max_stages=1))      # the same run, stopped after its pilot
    short = run(STAGED, noisy / "short")
    short_st = rundir.read_env(short.out_dir).doc["stopping"]
    # it stopped after its pilot: at the stage limit, or at the target or with every row decided
    # if its noise draws got there
    assert short_st["stop_reason"] in ("stages", "target", "decided") and len(short_st["stages"]) == 1, short_st
    sdf = measured(rundir.read_raw(short.raw_csv))
    pilot = m[m["round"] < 1 + st["pilot_rounds"]]
    key = ["round", "variant", "layout"]
    assert sorted(map(tuple, sdf[key].values.tolist())) == sorted(map(tuple, pilot[key].values.tolist()))
    assert env["plan"]["trials_total"] == len(df)
    assert sequential.target_met(stats_compare(df, "batch"), 10.0) is st["target_met"]
    json.dumps(st)


def test_resume_in_a_later_stage_goes_on_from_env_json(noisy, monkeypatch, fake_clock):
    fake_clock["cost"].update(trial=0.01, warmup=0.01)      # the deadline, whatever the machine's load
    monkeypatch.setenv("FAKE_NOISE", "0.3")
    out = noisy / "r"
    first = run(STAGED, noisy / "whole")
    whole = rundir.read_env(first.out_dir).doc["stopping"]
    assert len(whole["stages"]) >= 2
    pilot_trials = 2 * (1 + whole["pilot_rounds"])
    monkeypatch.setenv("FAKE_NOISE_FILE", str(noisy / "noise-counter-2"))
    real = _interrupt_at_trial(monkeypatch, pilot_trials + 3)
    with pytest.raises(KeyboardInterrupt):
        run(STAGED, out)
    env = rundir.read_env(out).doc
    assert env["status"] == "interrupted"
    assert len(env["stopping"]["stages"]) == 2 and env["stopping"]["stop_reason"] is None
    assert env["stopping"]["rounds_run"] == whole["pilot_rounds"] + 1
    assert env["stopping"]["stages"][1]["measure_s"] > 0      # the interrupted stage kept its time
    monkeypatch.setattr(runner, "execute", real)
    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    st = rundir.read_env(out).doc["stopping"]
    assert st["stop_reason"] is not None and st["rounds_run"] == st["rounds_planned"]
    assert st["stages"][:2][0] == env["stopping"]["stages"][0]
    df = rundir.read_raw(out / "raw.csv")
    assert not df.duplicated(["variant", "trial"]).any()
    assert sorted(df["order"]) == list(range(len(df)))
    assert measured(df)["round"].nunique() == st["rounds_planned"]


def test_a_finished_run_takes_no_uncounted_look(noisy, monkeypatch, fake_clock, capsys):
    """A follow-up look at a finished run's data goes through the record's look count or not at
    all: --resume with a new target or budget is refused (that look would re-test the pooled rounds
    at full alpha), and --resume with the run's own parameters looks at nothing again."""
    fake_clock["cost"].update(trial=0.01, warmup=0.01)
    out = noisy / "done"
    run(STAGED, out)
    env = rundir.read_env(out).doc
    st, raw = env["stopping"], (out / "raw.csv").read_bytes()
    assert st["stop_reason"] is not None
    looks = Stopping.from_json(st).looks
    assert looks == len(st["stages"])             # every stage of a finished run was reviewed once
    for name, value in (("target_ci", "5"), ("budget", "40")):
        rc = cli.main(["run", "ptr_ring", "-p", name, value, "--no-build", "--no-progress", "--out", str(out),
                       "--resume"])
        assert rc == 2 and f"parameter '{name}'" in capsys.readouterr().err
    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    again = rundir.read_env(out).doc["stopping"]
    assert Stopping.from_json(again).looks == looks and again["stages"] == st["stages"]
    assert (out / "raw.csv").read_bytes() == raw


def test_resume_inside_the_pilot_reviews_after_it(noisy, monkeypatch, fake_clock):
    monkeypatch.setenv("FAKE_NOISE", "0.5")
    real = _interrupt_at_trial(monkeypatch, 5)
    out = noisy / "r"
    with pytest.raises(KeyboardInterrupt):
        run({"target_ci": "0.5", "budget": "12"}, out)
    assert rundir.read_env(out).doc["stopping"]["stop_reason"] is None
    monkeypatch.setattr(runner, "execute", real)
    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    st = rundir.read_env(out).doc["stopping"]
    df = rundir.read_raw(out / "raw.csv")
    assert st["stop_reason"] == "budget" and st["rounds_run"] == st["pilot_rounds"]
    assert measured(df)["round"].nunique() == st["pilot_rounds"]


def test_stage_schedule_extends_the_design():
    s0 = sequential.stage_schedule(7, 0, 0, 0, 4, 2)
    assert sorted(s0) == [0, 0, 1, 1, 2, 2, 3, 3]
    s1 = sequential.stage_schedule(7, 1, 4, 2, 6, 3)
    counts = pd.Series(s0 + s1).value_counts().sort_index()
    assert list(counts.index) == list(range(6)) and (counts == 3).all()
    assert sequential.stage_schedule(7, 1, 4, 2, 6, 3) == s1          # seeded


def test_next_design_respects_the_budget():
    up = {"layout": 0.02 ** 2, "process": 0.03 ** 2, "iteration": 0.0}
    free = sequential.next_design(up, 4, 2, 0.5, 0.1, 0.5, None, 64)
    assert free.layouts > 4 and free.new_rounds > 0
    cut = sequential.next_design(up, 4, 2, 0.5, 0.1, 0.5, 3.0, 64)
    assert cut.predicted_s <= 3.0 and cut.layouts <= free.layouts
    none = sequential.next_design(up, 4, 2, 0.5, 0.1, 0.5, 0.01, 64)
    assert none.new_rounds == 0


def test_a_cut_budget_buys_the_level_that_narrows_the_interval():
    # layouts dominate: the budget goes to more layout pairs, not to more rounds of the same ones
    lay = {"layout": 0.02 ** 2, "process": 0.002 ** 2, "iteration": 0.0}
    cut = sequential.next_design(lay, 16, 8, 0.1, 0.01, 0.2, 10.0, 256)
    assert cut.predicted_s <= 10.0 / sequential.POLICY.budget_margin and cut.layouts > 16 and cut.rounds_per_layout == 8
    # rounds dominate and builds are dear: the budget goes to rounds
    rnd = {"layout": 0.0005 ** 2, "process": 0.05 ** 2, "iteration": 0.0}
    cut = sequential.next_design(rnd, 16, 8, 0.1, 0.01, 5.0, 10.0, 256)
    assert cut.predicted_s <= 10.0 / sequential.POLICY.budget_margin and cut.layouts == 16 and cut.rounds_per_layout > 8
    # each choice is the narrowest the budget affords among the designs it could have taken
    for up in (lay, rnd):
        best = sequential.next_design(up, 16, 8, 0.1, 0.01, 0.2, 10.0, 256)
        for k2, p2 in ((17, 8), (16, 9), (20, 10), (30, 8)):
            new = (k2 - 16) * 0.2 + ((k2 - 16) * p2 + 16 * (p2 - 8)) * 0.01
            if new <= 10.0 / sequential.POLICY.budget_margin:
                var = up["layout"] + up["process"] / p2
                assert best.predicted_half_width_pct <= math.expm1(
                    sst.t.ppf(0.975, k2 - 1) * math.sqrt(var / k2)) * 100 + 1e-9


def test_a_target_beyond_the_stage_grows_layouts_not_rounds():
    # the pilot's 23 layout pairs say the target needs more than the 256-layout cap: the stage
    # adds layouts (4x) at the per-layout optimum of rounds, not hundreds of rounds per layout
    up = {"layout": 0.0244 ** 2, "process": 0.0233 ** 2, "iteration": 0.0}
    nxt = sequential.next_design(up, 23, 11, 0.25, 0.0077, 0.27, None, 256)
    assert nxt.layouts == 23 * sequential.POLICY.growth and nxt.rounds_per_layout == 11
    # a run already near the cap: more rounds per layout are what is left
    near = sequential.next_design(up, 200, 11, 0.25, 0.0077, 0.27, None, 256)
    assert near.layouts == 256 and near.rounds_per_layout > 11


def test_stopping_text_says_what_happened():
    base = {"target_ci": 2.0, "budget_s": 600.0, "calibration": "mode 0: measured", "spent_s": 42.0,
            "stages": [{"stage": 0, "layouts": 8, "rounds_per_layout": 2}], "rows": []}
    assert _text(dict(base, stop_reason="target")).startswith("stopped: target reached")
    assert _text(dict(base, stop_reason="decided")).startswith("stopped: all rows decided")
    assert _text(dict(base, stop_reason="budget")).startswith("stopped: budget spent (42 s of 600)")
    t = _text(dict(base, stop_reason=None))
    assert "not finished" in t and "--resume" in t
    t = _text(dict(base, stop_reason="decided", rows=[
        {"group": "mode=0", "candidate": "reorder", "decided": "no change larger than 2%"}]))
    assert "reorder (mode=0): no change larger than 2%" in t
    assert _text({}) == ""


def test_the_pilot_fits_its_timed_builds_in_the_budget():
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({"variants": "batch,reorder", "modes": "0", "target_ci": "0.5", "budget": "70"})
    st = stopping.opening(v, stopping.load_levels(v, None))
    first = stopping.probe_layouts(st)
    assert first == 4 <= st.layouts
    slow = stopping.fit_pilot_to_builds(st, first, 4 * 5.0)       # 5 s a layout: 14 s pay for 2, so 4
    assert slow.layouts == 4 and slow.pilot_rounds == 4 * st.rounds_per_layout
    assert slow.stages[0].build_s == 20.0 and slow.stages[0].new_rounds == slow.pilot_rounds
    fast = stopping.fit_pilot_to_builds(st, first, 4 * 0.01)
    assert fast.layouts == st.layouts                           # cheap builds: the planner's design


def test_the_pilot_shares_its_budget_over_the_configurations_it_measures():
    """A size sweep measures every size each round: its pilot plans each configuration within its
    share, so five sizes get a smaller (or equal) pilot than one, never five times the time."""
    from ringlab.experiments import get
    p = get("ptr_ring")
    one = p.resolve({"profile": "full", "modes": "2", "sizes": "1024"})
    five = p.resolve({"profile": "full", "modes": "2", "sizes": "16,64,256,1024,4096"})
    assert stopping.configurations_per_mode(one) == 1 and stopping.configurations_per_mode(five) == 5
    d1 = stopping.pilot_design(one, stopping.load_levels(one, "no-such-host"))
    d5 = stopping.pilot_design(five, stopping.load_levels(five, "no-such-host"))
    assert d5.layouts * d5.rounds_per_layout < d1.layouts * d1.rounds_per_layout
    frag = get("page_frag").resolve({"profile": "full"})
    assert stopping.configurations_per_mode(frag) == len(frag["aligns"]) * len(frag["alloc_lens"])


def test_a_mode_asks_for_its_own_half_width_and_an_explicit_target_holds_in_every_mode():
    from ringlab.experiments import get
    p = get("ptr_ring")
    q = p.resolve({})
    assert q["stop"] == "target" and stopping.mode_targets(q) == {"0": 0.5, "1": 1.0}
    assert stopping.mode_targets(p.resolve({"profile": "full"})) == {"0": 0.25, "1": 0.75, "2": 0.75}
    # a target given alone is the target of every mode; with its own per-mode targets they stand
    assert stopping.mode_targets(p.resolve({"target_ci": "0.3"})) == {"0": 0.3, "1": 0.3}
    both = p.resolve({"target_ci": "0.3", "target_ci_by_mode": "1:0.9"})
    assert stopping.mode_targets(both) == {"0": 0.3, "1": 0.9}
    for bad in ("5:1", "1:0", "1:100", "1", "x:1", "1:1,1:2", "1:nan"):
        with pytest.raises(ParamError, match=r"parameter 'target_ci_by_mode': bad entry .*allowed: MODE:PCT pairs"):
            p.resolve({"target_ci_by_mode": bad})


def test_rows_are_judged_at_their_modes_target_and_only_the_arms_asked_for():
    rows = pd.DataFrame([
        {"group": "mode=0,size=1000", "candidate": "reorder", "verdict": "faster", "ci_low_pct": 0.6, "ci_high_pct": 1.4},
        {"group": "mode=1,size=1000", "candidate": "reorder", "verdict": "slower", "ci_low_pct": -2.7, "ci_high_pct": -1.1},
        {"group": "mode=0,size=1000", "candidate": "prebatch", "verdict": "inconclusive", "ci_low_pct": -3.0,
         "ci_high_pct": 1.0}])
    judged = sequential.review_rows(rows, 0.5, by_mode={"0": 0.5, "1": 1.0})
    assert [(r.target_pct, r.target_met) for r in judged] == [(0.5, True), (1.0, True), (0.5, False)]
    assert sequential.stage_stop_reason(judged, 0.0, None, 1) is None          # prebatch is not there yet
    only = sequential.review_rows(rows, 0.5, by_mode={"0": 0.5, "1": 1.0}, arms=["reorder"])
    assert [r.judged for r in only] == [True, True, False]
    assert sequential.stage_stop_reason(only, 0.0, None, 1) == "target"        # prebatch rides along
    assert not sequential.target_met(rows, 0.5, {"0": 0.5, "1": 1.0})
    assert sequential.target_met(rows, 0.5, {"0": 0.5, "1": 1.0}, ["reorder"])
    assert not sequential.target_met(rows, 0.5)                                 # mode 1 at +-0.5%: not met
    text = _text({"target_ci": 0.5, "target_ci_by_mode": {"0": 0.5, "1": 1.0},
                                     "target_arms": ["reorder"], "baseline": "batch", "stop_reason": "target",
                                     "stages": [{"stage": 0, "layouts": 8, "rounds_per_layout": 2}]})
    assert "Target ±0.5% (mode 1: ±1%) 95% CI half-width for reorder against batch" in text


def test_the_next_stage_is_planned_for_the_row_furthest_from_its_own_target():
    rows = [{"group": "mode=0", "candidate": "reorder", "upper": {"layout": 1e-5, "process": 4e-5}},
            {"group": "mode=1", "candidate": "reorder", "upper": {"layout": 3e-5, "process": 8e-5}},
            {"group": "mode=0", "candidate": "prebatch", "upper": {"layout": 9e-4, "process": 9e-4}}]
    # mode 1's bounds at a target twice as wide weigh a quarter; prebatch is not judged
    up = sequential.scaled_upper(rows, 0.5, {"0": 0.5, "1": 1.0}, ["reorder"])
    assert up == pytest.approx({"layout": 1e-5, "process": 4e-5})
    up = sequential.scaled_upper(rows, 0.5, {"0": 0.5, "1": 0.5}, ["reorder"])
    assert up == pytest.approx({"layout": 3e-5, "process": 8e-5})
    assert sequential.scaled_upper(rows, 0.5, None, [])["layout"] == pytest.approx(9e-4)


def test_target_arms_must_be_arms_compared_with_the_baseline():
    from ringlab.experiments import get
    p = get("ptr_ring")
    assert stopping.target_arms(p.resolve({"variants": "batch,reorder,prebatch", "target_arms": "reorder"})) == ["reorder"]
    for bad in ("batch", "spsc"):
        with pytest.raises(ParamError, match=r"parameter 'target_arms': '\w+' is not an arm compared with the "
                                             r"baseline 'batch'; allowed: reorder, prebatch"):
            p.resolve({"variants": "batch,reorder,prebatch", "target_arms": bad})


def test_cheap_builds_buy_layouts_rather_than_rounds_in_the_pilot(monkeypatch):
    """The pilot prices a layout at what the run's first builds took here: with kept objects a
    layout costs little, so the pilot measures more layouts and fewer rounds of each."""
    from ringlab.experiments import get
    up = {"layout": 2.3e-4, "process": 3.2e-4, "iteration": 2.2e-5}
    cal = LevelCalibration(mode="0", variance=up, upper=up, df={"layout": 16, "process": 64, "iteration": 64},
                           cost_s={"layout": 0.42, "process": 0.0033, "iteration": 0.065}, count=10_000_000)

    v = get("ptr_ring").resolve({"variants": "batch,reorder", "modes": "0", "count": "10000000",
                                 "target_ci": "0.5", "budget": "70"})
    dear, cheap = stopping.pilot_design(v, {"0": cal}, layout_s=2.0), stopping.pilot_design(v, {"0": cal}, layout_s=0.01)
    assert cheap.rounds_per_layout < dear.rounds_per_layout
    assert cheap.layouts > dear.layouts


def test_the_pilot_shares_its_budget_over_the_arms_it_measures():
    from ringlab.experiments import get
    p = get("ptr_ring")
    two = p.resolve({"variants": "batch,reorder", "modes": "0", "target_ci": "0.5", "budget": "70"})
    four = p.resolve({"variants": "prebatch,batch,reorder,spsc", "modes": "0", "target_ci": "0.5", "budget": "70"})
    d2 = stopping.pilot_design(two, stopping.load_levels(two, None), layout_s=0.0)
    d4 = stopping.pilot_design(four, stopping.load_levels(four, None), layout_s=0.0)
    assert d4.layouts * d4.rounds_per_layout < d2.layouts * d2.rounds_per_layout


def test_a_stage_too_small_to_move_the_half_widths_is_not_run(monkeypatch):
    """What the budget left buys is measured only when it adds at least ``min_stage_share`` of the
    rounds so far: a smaller stage would cost its review and narrow nothing."""
    up = {"layout": 1e-4, "process": 1e-4, "iteration": 0.0}
    monkeypatch.setattr(sequential, "compare_alphas", lambda df, base, alphas, **kw: [pd.DataFrame()] * len(alphas))
    monkeypatch.setattr(sequential, "review_rows", lambda *a, **kw: [
        RowRecord(group="mode=0", candidate="reorder", half_width_pct=0.7, target_pct=0.5,
                  target_met=False, decided="faster", judged=True)])
    monkeypatch.setattr(sequential, "observed_components", lambda df, base: {"rows": [], "upper": up})
    st = Stopping.from_json({
        "target_ci": 0.5, "budget_s": 60.0, "baseline": "batch", "stop": "target", "rounds_planned": 400,
        "layouts": 200, "rounds_per_layout": 2, "warmup_rounds": 0, "spent_s": 55.0,
        "stages": [{"stage": 0, "layouts": 200, "rounds_per_layout": 2, "new_rounds": 400, "first_round": 0,
                    "build_s": 5.0, "measure_s": 50.0}]})
    for new, reason in ((39, "budget"), (40, None)):
        monkeypatch.setattr(sequential, "next_design", lambda *a, n=new, **kw: sequential.StageDesign(
            layouts=200 + n // 2, rounds_per_layout=2, new_rounds=n, predicted_s=4.0,
            predicted_half_width_pct=0.68, planned="test"))
        out = stopping.review(pd.DataFrame(), st, lambda m: None)
        assert out.stop_reason == reason, (new, out.stop_reason)
        assert len(out.stages) == (1 if reason else 2)


def test_each_mode_runs_at_its_own_planned_trial_length(noisy, monkeypatch):
    cal = {m: dict(CAUTIOUS.as_dict(), mode=m, source="measured", min_count=c)
           for m, c in (("0", 250_000), ("1", 1_000_000))}
    monkeypatch.setattr(stopping, "level_calibrations",
                        lambda host, modes: {str(m): LevelCalibration.from_dict(cal[str(m)]) for m in modes})
    from ringlab.experiments.ptr_ring import PtrRing
    monkeypatch.setitem(PtrRing.profiles, "smoke", {k: v for k, v in PtrRing.profiles["smoke"].items() if k != "count"})
    res = run({"target_ci": "10", "budget": "3", "modes": "0,1", "count": None}, noisy / "r")
    df = measured(rundir.read_raw(res.out_dir))
    assert dict(df.groupby("mode")["count"].unique().map(list)) == {0: [250_000], 1: [1_000_000]}
    env = rundir.read_env(res.out_dir).doc
    assert env["stopping"]["count_by_mode"] == {"0": 250_000, "1": 1_000_000}
    assert env["parameters"]["count"] == 1_000_000 and "count_by_mode" not in env["parameters"]


def test_a_run_short_of_its_target_says_how_far_why_and_what_would_reach_it():
    st = {"target_ci": 0.5, "budget_s": 60.0, "stop_reason": "budget", "spent_s": 59.0, "calibration": "x",
          "stages": [{"layouts": 81, "rounds_per_layout": 4, "planned": "256 layout pairs x 22 processes x 1 "
                      "iterations for a t half-width of 0.50% in 847 s",
                      "components_upper": {"layout": 0.034 ** 2, "process": 0.082 ** 2, "iteration": None}}],
          "rows": [{"group": "mode=0,size=1000", "candidate": "reorder", "half_width_pct": 1.216, "target_pct": 0.5,
                    "target_met": False, "decided": None, "judged": True},
                   {"group": "mode=1,size=1000", "candidate": "reorder", "half_width_pct": 0.97, "target_pct": 1.0,
                    "target_met": True, "decided": None, "judged": True}]}
    text = _text(st)
    assert "Not reached: reorder mode 0 ±1.22% of ±0.5%" in text and "mode 1 ±0.97" not in text
    assert "layout 3.4%, process 8.2%" in text and "in 847 s" in text
    st["stop_reason"], st["rows"][0]["target_met"] = "target", True
    assert "Not reached" not in _text(st)


def test_a_run_at_the_layout_cap_short_of_its_target_buys_rounds_with_the_budget_left():
    # the bounds say 256 x 12 suffices, the run's own interval is twice the target: the stage grows
    # the rounds per layout by (observed / target)^2, at most ``growth``-fold, within the budget left
    up = {"layout": 0.0001 ** 2, "process": 0.01 ** 2, "iteration": 0.0}
    nxt = sequential.next_design(up, 256, 12, 0.25, 0.007, 0.1, 19.0, 256, observed_half_width_pct=0.5)
    assert nxt.layouts == 256 and nxt.rounds_per_layout > 13
    assert nxt.new_rounds >= sequential.POLICY.min_stage_share * 256 * 12
    assert nxt.predicted_s <= 19.0 / sequential.POLICY.budget_margin
    # without an observed interval: a quarter more data, as below the cap
    assert sequential.shortfall_design(256, 12, 256, 0.25, None) == (256, 15)
    assert sequential.shortfall_design(100, 12, 256, 0.25, 0.5) == (256, 12)
    assert sequential.shortfall_design(256, 12, 256, 0.25, 0.3) == (256, 18)


def test_the_plan_is_sized_for_the_interval_the_verdict_printed():
    up = {"layout": 0.002 ** 2, "process": 0.01 ** 2, "iteration": 0.0}
    k, p = 16, 4
    pred = math.expm1(sst.t.ppf(0.975, k - 1) * math.sqrt((up["layout"] + up["process"] / p) / k)) * 100
    assert sequential.model_inflation(up["layout"], up["process"], k, p, pred / 2) == 1.0
    f = sequential.model_inflation(up["layout"], up["process"], k, p, 2 * pred)
    assert 3.8 < f < 4.2
    plain = sequential.next_design(up, k, p, 0.1, 0.01, 0.2, None, 4096)
    wide = sequential.next_design(up, k, p, 0.1, 0.01, 0.2, None, 4096, observed_half_width_pct=2 * pred)
    assert wide.layouts * wide.rounds_per_layout >= plain.layouts * plain.rounds_per_layout
    assert wide.predicted_half_width_pct > plain.predicted_half_width_pct


def _text(stopping: dict) -> str:
    """summary.md's sentence of env.json's ``stopping``, read through the record as the report reads it."""
    return stopping_text(Stopping.from_json(stopping))


def _wide_pilot(monkeypatch, layouts: int, rounds_per_layout: int):
    """The pilot planned at ``layouts`` x ``rounds_per_layout`` whatever the budget."""
    real = stopping.pilot_design

    def wide(values, levels, layout_s=None):
        return dataclasses.replace(real(values, levels, layout_s), layouts=layouts, rounds_per_layout=rounds_per_layout)
    monkeypatch.setattr(stopping, "pilot_design", wide)


@pytest.mark.parametrize("build_s", [0.0, 14.0])
def test_the_budget_is_a_deadline_within_one_round_whatever_the_plan(noisy, monkeypatch, fake_clock, build_s):
    """A pilot of 16 x 4 rounds (2 s a round: 128 s) in a 20 s budget: the warm-up round looks
    cheap, so the pilot keeps its size, and the run stops launching rounds at the deadline; the
    builds' seconds (``build_s`` more of them here) count against it."""
    monkeypatch.setenv("FAKE_NOISE", "0.5")
    fake_clock["cost"].update(warmup=0.001, trial=1.0)
    _wide_pilot(monkeypatch, 16, 4)
    if build_s:
        real_opening = stopping.opening
        monkeypatch.setattr(stopping, "opening", lambda *a, **kw: stopping.add_time(real_opening(*a, **kw),
                                                                                     build_s=build_s))
    res = run({"target_ci": "0.5", "budget": "20"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    round_s = 2 * fake_clock["cost"]["trial"]
    # the rounds the budget left after the builds pays for, and at most one more
    assert st["rounds_run"] <= math.ceil((20 - build_s) / round_s) + 1, st
    assert st["stop_reason"] == "budget" and st["stages"][-1]["stop_reason"] == "budget"
    # the plan stood (a host without a calibration sizes its pilot at the cheap warm-up round it
    # timed: more rounds on the same layouts, never fewer)
    assert st["stages"][0]["layouts"] == 16 and st["rounds_planned"] >= 64
    assert st["stages"][0]["build_s"] >= build_s
    assert 20 - 0.5 <= st["spent_s"] <= 20 + round_s + 0.5                # at most one round past the budget
    assert st["rounds_run"] < st["rounds_planned"]
    assert measured(rundir.read_raw(res.raw_csv))["round"].nunique() == st["rounds_run"]
    assert res.status == "complete"
    assert _text(st).startswith("stopped: budget spent")


def test_a_stages_builds_count_against_the_deadline(noisy, monkeypatch, fake_clock):
    """A stage whose builds take what the budget had left runs none of its rounds."""
    monkeypatch.setenv("FAKE_NOISE", "0.5")
    fake_clock["cost"].update(warmup=0.25, trial=0.25)
    import importlib
    prepare = importlib.import_module("ringlab.run.prepare")
    real_check = prepare.check_built

    def slow_check(exp, values):
        if int(values.get("layouts") or 0) > 4:         # a stage's new layouts, not the pilot's
            fake_clock["now"]["t"] += 30.0
        return real_check(exp, values)
    monkeypatch.setattr(prepare, "check_built", slow_check)
    _wide_pilot(monkeypatch, 4, 2)
    res = run({"target_ci": "0.5", "budget": "20"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert len(st["stages"]) == 2 and st["stages"][1]["build_s"] >= 30.0, st
    assert st["stop_reason"] == "budget" and st["rounds_run"] == st["pilot_rounds"]
    assert st["stages"][1]["measure_s"] == pytest.approx(0.0, abs=0.01)


def test_an_uncalibrated_hosts_pilot_fits_its_budget_at_the_round_time_measured(noisy, monkeypatch, fake_clock):
    """This host has no calibration: the pilot comes from cautious defaults that know nothing of
    this machine's trials (2 s each here).  The run times its warm-up round and cuts the pilot so
    that its rounds fit the budget left."""
    monkeypatch.setenv("FAKE_NOISE", "0.5")
    fake_clock["cost"].update(warmup=2.0, trial=2.0)
    import importlib
    prepare = importlib.import_module("ringlab.run.prepare")
    real_check, checked = prepare.check_built, []

    def spy(exp, values):
        checked.append(int(values.get("layouts") or 0))
        return real_check(exp, values)
    monkeypatch.setattr(prepare, "check_built", spy)
    res = run({"target_ci": "0.5", "budget": "30"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    st0 = st["stages"][0]
    # the planned pilot's binaries (prepare), then the re-sized pilot's, before any stage's
    assert checked[0] != st0["layouts"] and checked[1] == st0["layouts"], checked
    assert "cautious defaults" in st["calibration"]
    round_s = 2 * 2.0
    left = 30 - st0["build_s"] - round_s          # after the builds and the warm-up round
    assert st0["new_rounds"] * round_s <= left, st0
    assert st0["round_s_measured"] == pytest.approx(round_s, rel=0.01)
    # the re-sized pilot's layouts sit in other binaries than the planned pilot's: they were built
    # (checked, here) before its rounds ran, so none of its trials failed
    raw = rundir.read_raw(res.raw_csv)
    assert (raw["status"] == "ok").all(), raw["status"].value_counts()
    assert st0["new_rounds"] * round_s <= sequential.POLICY.pilot_share * left or \
        st0["layouts"] * st0["rounds_per_layout"] <= sequential.POLICY.pilot_min_layouts * st0["rounds_per_layout"]
    assert st["spent_s"] <= 30 + round_s
    # the pilot's planned time is bounded by the budget left, for any round time and budget
    for layouts, per in ((189, 2), (16, 4), (4, 2)):
        for spr in (0.01, 0.3, 2.0, 9.0):
            for left in (5.0, 40.0, 300.0):
                k, p = sequential.pilot_for_round_time(layouts, per, spr, left)
                assert k <= layouts and p <= per and k >= 2 and p >= 1
                assert k * p * spr <= left or (k, p) == (2, 1), (layouts, per, spr, left, k, p)


def test_what_would_reach_the_target_is_planned_at_the_seconds_per_round_measured(monkeypatch):
    """A first run on a host without a calibration spent its 60 s on a 163 x 2 pilot and missed
    its target: what the summary says would reach it is planned from the run's own components
    and its measured seconds per round and per layout's builds, so it is a larger design than
    the one that missed, and costs more than that one took."""
    import re
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({"variants": "batch,reorder", "modes": "0", "sizes": "1000", "target_ci": "0.5",
                                 "budget": "60", "stop": "target"})
    st = stopping.opening(v, stopping.load_levels(v, "no-such-host"), layout_s=0.05)
    k0, p0 = st.layouts, st.rounds_per_layout
    assert k0 * p0 > 100                          # the cautious pilot: many cheap layouts
    build_s, measure_s = 10.0, 50.0
    st = stopping.add_time(st, measure_s=measure_s, build_s=build_s)
    rounds = k0 * p0 + st.warmup_rounds
    df = pd.DataFrame({"round": range(rounds)})
    up = {"layout": 0.03 ** 2, "process": 0.05 ** 2, "iteration": 0.0}
    monkeypatch.setattr(sequential, "compare_alphas", lambda df, base, alphas, **kw: [pd.DataFrame()] * len(alphas))
    monkeypatch.setattr(sequential, "review_rows", lambda *a, **kw: [
        RowRecord(group="mode=0,size=1000", candidate="reorder", half_width_pct=1.6, target_pct=0.5,
                  target_met=False, decided=None, judged=True)])
    monkeypatch.setattr(sequential, "observed_components", lambda df, base: {"rows": [], "upper": up})
    out = sequential.review(df, st, 4096)
    assert out.stop_reason == "budget"
    text = _text(out.to_json())
    m = re.search(r"What would reach it, planned from them: (?:mode \d+: )?(\d+) layout pairs x (\d+) "
                  r"(?:processes|rounds)\b.*? in (?:about )?(\d+) s", text)
    assert m, text
    k, p, seconds = (int(x) for x in m.groups())
    spr, per_layout = measure_s / rounds, build_s / k0
    assert k >= k0 and p >= p0 and k * p > k0 * p0                       # more than the design that missed
    assert seconds >= build_s + measure_s - 1                              # and more time than it took
    assert seconds == pytest.approx(k * per_layout + k * p * spr, abs=1)   # at the costs measured
    assert out.last_stage.design_planned == st.last_stage.planned          # the pilot's own plan is kept


def _fit_row(sigma_layout_pct: float, sigma_round_pct: float, group: str = "mode=0,size=1000") -> pd.DataFrame:
    """One compare() row of a layouts fit with its components (the columns planning reads)."""
    return pd.DataFrame([{"group": group, "candidate": "reorder", "design": "layouts", "note": "",
                          "ci_low_pct": -1.6, "ci_high_pct": 1.6, "sigma_layout_pct": sigma_layout_pct,
                          "sigma_round_pct": sigma_round_pct}])


def test_stages_are_planned_from_the_layouts_fit_the_interval_comes_from():
    """The components a stage is planned from are the fit's (sigma_L^2, sigma_R^2 of the printed
    CI), each row scaled to the target; a fit without a layout level (one round per layout) gives
    none and the plan falls back on the nested components' bounds."""
    comps = sequential.fit_components(_fit_row(0.5, 4.0), 0.5)
    assert comps == pytest.approx({"layout": 0.005 ** 2, "process": 0.04 ** 2, "iteration": 0.0})
    # a row whose own target is twice the run's is scaled by (1/2)^2
    half = sequential.fit_components(_fit_row(0.5, 4.0, "mode=1,size=1000"), 0.5, {"0": 0.5, "1": 1.0})
    assert half["process"] == pytest.approx(0.04 ** 2 / 4)
    assert sequential.fit_components(_fit_row(math.nan, math.nan), 0.5) == {}
    assert sequential.fit_components(_fit_row(0.5, 4.0), 0.5, arms=["other"]) == {}
    # the round level dominates: the next stage buys rounds per layout; the layout level: layouts
    rounds = sequential.next_design(comps, 64, 2, 0.5, 0.17, 0.03, None, 256)
    lays = sequential.next_design(sequential.fit_components(_fit_row(4.0, 0.5), 0.5), 64, 2, 0.5, 0.17, 0.03, None, 256)
    assert rounds.rounds_per_layout > 2 and lays.layouts > 64 and lays.rounds_per_layout == 2
    assert sequential.dominant_level({"layout": 0.005 ** 2, "round": 0.04 ** 2}, 64, 2)[0] == "round"
    assert sequential.dominant_level({"layout": 0.04 ** 2, "round": 0.005 ** 2}, 64, 2)[0] == "layout"


def test_a_stop_short_says_which_level_stopped_it_and_plans_the_reach_from_the_fit(monkeypatch):
    """A run out of budget short of its target: what would reach it is ``reach_design`` of the
    fit's components at the costs measured (not the plan that just missed), and the sentence
    names the level whose variance makes most of the interval."""
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({"variants": "batch,reorder", "modes": "0", "sizes": "1000", "target_ci": "0.5",
                                 "budget": "60", "stop": "target"})
    st = stopping.opening(v, stopping.load_levels(v, "no-such-host"), layout_s=0.05)
    st = dataclasses.replace(st, layouts=64, rounds_per_layout=2, rounds_planned=128,
                             stages=(dataclasses.replace(st.stages[0], layouts=64, rounds_per_layout=2,
                                                         new_rounds=128),))
    st = stopping.add_time(st, measure_s=55.0, build_s=3.0)
    df = pd.DataFrame({"round": range(128 + st.warmup_rounds)})
    monkeypatch.setattr(sequential, "compare_alphas",
                        lambda df, base, alphas, **kw: [_fit_row(0.3, 6.0) for _ in alphas])
    monkeypatch.setattr(sequential, "review_rows", lambda *a, **kw: [
        RowRecord(group="mode=0,size=1000", candidate="reorder", half_width_pct=1.6, target_pct=0.5,
                  target_met=False, decided=None, judged=True)])
    monkeypatch.setattr(sequential, "observed_components", lambda *a, **kw: pytest.fail("planned from bounds"))
    out = sequential.review(df, st, 4096)
    assert out.stop_reason == "budget"
    last = out.last_stage
    assert last.components_fit == pytest.approx({"layout": 0.003 ** 2, "round": 0.06 ** 2})
    spr, cl = sequential.measured_costs(df, out)
    want = sequential.reach_design({"layout": 0.003 ** 2, "process": 0.06 ** 2, "iteration": 0.0}, 64, 2, 0.5,
                                   spr, cl, 4096, observed_half_width_pct=1.6)
    assert last.planned.startswith(f"{want.layouts} layout pairs x {want.rounds_per_layout} rounds each")
    assert want.rounds_per_layout > 2          # the round level stopped it: the reach adds rounds
    text = _text(out.to_json())
    assert "layouts fit of this run's data gives SDs of the paired log ratio of layout 0.3%, round 6.0%" in text
    share = (0.06 ** 2 / 2) / (0.003 ** 2 + 0.06 ** 2 / 2)          # sigma_R^2 / P against sigma_L^2
    assert (f"at 64 layouts x 2 rounds the round level's variance makes {share * 100:.0f}% of the interval's "
            "squared width") in text
    assert Stopping.from_json(out.to_json()) == out


@pytest.mark.parametrize("spr,build", [(0.02, 1.0), (0.3, 0.02)])
def test_an_uncalibrated_hosts_pilot_is_sized_from_its_measured_round_and_build_times(spr, build):
    """Without a calibration the pilot's size and shape follow the seconds the run timed: its
    rounds fill the pilot's share of the budget left, and dear builds with cheap rounds buy more
    rounds per layout than cheap builds with dear rounds."""
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({"variants": "batch,reorder", "modes": "0", "sizes": "1000", "target_ci": "0.5",
                                 "budget": "60", "stop": "target"})
    st = stopping.opening(v, stopping.load_levels(v, "no-such-host"), layout_s=build)
    assert stopping.uncalibrated(st)
    st = stopping.fit_pilot_to_builds(st, 4, 4 * build)
    left = 60 - 4 * build - spr
    out = stopping.fit_pilot_to_rounds(st, spr, 1, left)
    k, p = out.layouts, out.rounds_per_layout
    share = sequential.POLICY.pilot_share * left
    assert k * p * spr <= share and k >= sequential.POLICY.pilot_min_layouts
    assert (k * p + 2 * p) * spr > share or k == st.layouts or k * p == st.stages[0].new_rounds  # the share is spent
    assert out.stages[0].round_s_measured == pytest.approx(spr)
    other = sequential.pilot_for_measured_costs(st.layouts, 0.3 if spr < 0.1 else 0.02,
                                                1.0 if build < 0.1 else 0.02, left)
    assert other != (k, p)       # other measured costs, another pilot
    if build > spr:
        assert p > sequential.POLICY.min_rounds_per_layout
    else:
        assert p == sequential.POLICY.min_rounds_per_layout
    # a calibrated host keeps its planned pilot where it fits
    cal = dataclasses.replace(st, calibration_by_mode={"0": "measured"})
    assert not stopping.uncalibrated(cal)


def test_what_would_reach_it_is_the_fewest_rounds_where_the_layouts_do_not_vary():
    """A fit with no layout variance (REML at its boundary) sends the allocation's rounds to their
    cap; the reach is the fewest rounds per layout whose half-width is within the target."""
    up = {"layout": 0.0, "process": 0.109 ** 2, "iteration": 0.0}
    r = sequential.reach_design(up, 20, 8, 1.0, 0.314, 0.176, 4096, observed_half_width_pct=1.84)
    hw = lambda p: math.expm1(sst.t.ppf(0.975, r.layouts - 1) * math.sqrt(up["process"] / p / r.layouts)) * 100
    assert r.predicted_half_width_pct <= 1.0 and hw(r.rounds_per_layout) <= 1.0 < hw(r.rounds_per_layout - 1)
    assert r.rounds_per_layout < 1024


def test_a_run_asking_for_its_half_width_is_short_of_it_on_a_decided_row_too():
    st = {"target_ci": 0.5, "budget_s": 60.0, "stop_reason": "budget", "spent_s": 58.0, "calibration": "x",
          "stop": "target",
          "stages": [{"layouts": 53, "rounds_per_layout": 8, "planned": "60 layout pairs x 90 rounds each",
                      "components_fit": {"layout": 0.01 ** 2, "round": 0.08 ** 2}}],
          "rows": [{"group": "mode=0,size=1000", "candidate": "reorder", "half_width_pct": 2.37, "target_pct": 0.5,
                    "target_met": False, "decided": "slower", "judged": True}]}
    assert "Not reached: reorder mode 0 ±2.37% of ±0.5%" in _text(st)
    st["stages"][0]["components_fit"]["layout"] = 0.0        # REML at its boundary: said, not hidden
    assert "SDs of the paired log ratio of layout 0.0%, round 8.0%" in _text(st)
    st["stop"] = "decided"
    assert "Not reached" not in _text(st)
