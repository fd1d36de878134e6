"""Stop on a target CI through the runner: pilot, one decision, extension rounds, budget, resume.

The mock executor (tests/fakes/fake_ptr_ring_test.py) adds seeded log-normal noise
(FAKE_NOISE, FAKE_NOISE_FILE), so the pilot has a spread and the plan depends on it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab.stats import compare as stats_compare

from ringlab import rundir
from ringlab.lab import cli
from ringlab import run as runner
from ringlab.errors import ParamError
from ringlab.run import stopping
from ringlab.stats import sequential

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

BASE = {"profile": "smoke", "cpus": "none", "governor": "false", "variants": "batch,reorder", "modes": "0",
        "sizes": "1000", "warmup": 1, "count": 1000}


@pytest.fixture
def noisy(fakebin, tmp_path, monkeypatch):
    """The mock binaries with seeded multiplicative noise on every trial."""
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


def pilot_rows(df: pd.DataFrame, pilot: int, warmup: int = 1) -> pd.DataFrame:
    return df[df["round"] < warmup + pilot]


def _interrupt_at_trial(monkeypatch, n: int):
    """Ctrl-C arrives as the run starts its n-th trial; returns the real executor."""
    from ringlab.run import process
    calls = {"n": 0}
    real = process.execute

    def dying(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(runner, "execute", dying)
    return real


def test_params_are_off_by_default_and_checked():
    from ringlab.experiments import get
    v = get("ptr_ring").resolve({})
    assert v["target_ci"] == 0 and v["budget"] == 0 and not stopping.enabled(v)
    with pytest.raises(ParamError, match="parameter 'budget'.*without target_ci"):
        get("ptr_ring").resolve({"budget": "30"})
    with pytest.raises(ParamError, match="parameter 'target_ci'.*too large"):
        get("ptr_ring").resolve({"target_ci": "100"})


def test_one_variant_is_refused_before_anything_is_written(noisy):
    with pytest.raises(ParamError, match="parameter 'target_ci': needs two or more variants"):
        run({"variants": "batch", "target_ci": "5"}, noisy / "r")
    assert not (noisy / "r").exists()


def test_extension_rounds_are_new_rounds_in_the_same_design(noisy):
    res = run({"target_ci": "6"}, noisy / "r")
    assert res.status == "complete"
    env = rundir.read_env(res.out_dir).doc
    st = env["stopping"]
    df = rundir.read_raw(res.raw_csv)
    # the decision is the one rounds_needed makes from the pilot's rows, made once
    plan = sequential.rounds_needed(pilot_rows(df, st["pilot_rounds"]), "batch", 6.0)
    assert st["pilot_rounds"] == sequential.PILOT_ROUNDS
    assert st["rounds_planned"] == plan["rounds"] > st["pilot_rounds"]
    assert st["stop_reason"] == plan["stop_reason"] == "target"
    assert st["rounds_run"] == st["rounds_planned"]
    assert st["target_ci"] == 6.0 and st["budget_s"] is None and st["baseline"] == env["baseline"] == "batch"
    # the recorded answer is the target check of the finished run's own comparison
    assert st["target_met"] is sequential.target_met(stats_compare(df, "batch"), 6.0)
    # every round holds both arms once, the rounds are consecutive new indices
    m = measured(df)
    assert sorted(m["round"].unique()) == list(range(1, 1 + st["rounds_planned"]))
    assert (m.groupby("round")["variant"].apply(sorted).map(tuple) == ("batch", "reorder")).all()
    assert not df.duplicated(["variant", "trial"]).any()
    # block design: the arms of a round run back to back, and `order` is the plan position
    assert sorted(df["order"]) == list(range(len(df)))
    by_order = df.sort_values("order")
    assert (by_order["round"].diff().fillna(0) >= 0).all()
    assert env["plan"]["trials_total"] == len(df) and env["plan"]["rounds"] == st["rounds_planned"]
    assert 1 < len(sequential.stopping_text(st).split(". ")) <= 3


def test_budget_cuts_the_extension(noisy):
    res = run({"target_ci": "0.5", "budget": "0.001"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop_reason"] == "budget" and st["budget_s"] == 0.001
    assert st["rounds_planned"] == st["pilot_rounds"] == st["rounds_run"]
    assert st["rounds_for_target"] > st["rounds_planned"]
    assert st["target_met"] is False
    assert "budget" in sequential.stopping_text(st)
    assert measured(rundir.read_raw(res.raw_csv))["round"].nunique() == st["pilot_rounds"]
    from ringlab.report import write_report
    write_report(res.out_dir, figures=False)
    top = (res.out_dir / "summary.md").read_text().split("\n## ")[0]
    assert sequential.stopping_text(st) in top.splitlines()


def test_pilot_that_meets_the_target_adds_nothing(noisy, monkeypatch):
    monkeypatch.delenv("FAKE_NOISE")   # identical arms every round: exact comparisons
    res = run({"target_ci": "5"}, noisy / "r")
    st = rundir.read_env(res.out_dir).doc["stopping"]
    assert st["stop_reason"] == "pilot met target"
    assert st["rounds_planned"] == st["rounds_run"] == sequential.PILOT_ROUNDS
    assert "pilot" in sequential.stopping_text(st)


def test_resume_after_the_pilot_runs_the_decided_plan(noisy, monkeypatch):
    """Killed in the extension: --resume runs to the plan in env.json, never decides again."""
    real = _interrupt_at_trial(monkeypatch, 2 * (1 + sequential.PILOT_ROUNDS) + 3)   # warm-up + pilot + 3 trials
    out = noisy / "r"
    with pytest.raises(KeyboardInterrupt):
        run({"target_ci": "6"}, out)
    env = rundir.read_env(out).doc
    assert env["status"] == "interrupted"
    planned = env["stopping"]["rounds_planned"]
    assert planned > sequential.PILOT_ROUNDS and env["stopping"]["rounds_run"] == sequential.PILOT_ROUNDS + 1
    assert f"only {sequential.PILOT_ROUNDS + 1} of {planned} planned rounds ran" in \
        sequential.stopping_text(env["stopping"])

    monkeypatch.setattr(runner, "execute", real)
    monkeypatch.setattr(sequential, "rounds_needed",
                        lambda *a, **k: pytest.fail("resume must not decide again"))
    res = runner.run_experiment("ptr_ring", {}, out, resume=True, build=False, progress=False,
                                log=lambda m: None)
    assert res.status == "complete" and res.already_done == 2 * (1 + sequential.PILOT_ROUNDS) + 2
    st = rundir.read_env(out).doc["stopping"]
    assert st["rounds_planned"] == st["rounds_run"] == planned
    df = rundir.read_raw(out / "raw.csv")
    assert not df.duplicated(["variant", "trial"]).any()
    assert measured(df)["round"].nunique() == planned
    assert sorted(df["order"]) == list(range(len(df)))


def test_resume_inside_the_pilot_decides_after_it(noisy, monkeypatch):
    real = _interrupt_at_trial(monkeypatch, 5)
    out = noisy / "r"
    with pytest.raises(KeyboardInterrupt):
        run({"target_ci": "6"}, out)
    assert rundir.read_env(out).doc["stopping"]["rounds_planned"] is None
    monkeypatch.setattr(runner, "execute", real)
    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    st = rundir.read_env(out).doc["stopping"]
    df = rundir.read_raw(out / "raw.csv")
    plan = sequential.rounds_needed(pilot_rows(df, st["pilot_rounds"]), "batch", 6.0)
    assert st["rounds_planned"] == plan["rounds"] == st["rounds_run"]
    assert measured(df)["round"].nunique() == st["rounds_planned"]


def test_stopping_text_says_what_happened():
    base = {"target_ci": 2.0, "budget_s": 600.0, "pilot_rounds": 10, "rounds_planned": 40, "rounds_run": 40,
            "rounds_for_target": 40}
    t = sequential.stopping_text(dict(base, stop_reason="target", target_met=True))
    assert "±2%" in t and "40 rounds" in t and "reached" in t
    t = sequential.stopping_text(dict(base, stop_reason="target", target_met=False))
    assert "not every" in t
    t = sequential.stopping_text(dict(base, stop_reason="budget", rounds_for_target=90, target_met=False))
    assert "budget" in t and "90" in t and "600" in t
    t = sequential.stopping_text(dict(base, stop_reason="pilot met target", rounds_planned=10, rounds_run=10,
                                      target_met=True))
    assert "pilot" in t
    t = sequential.stopping_text(dict(base, rounds_run=12, stop_reason="target", target_met=None))
    assert "12 of 40" in t
    t = sequential.stopping_text(dict(base, rounds_planned=None, rounds_run=0, stop_reason=None))
    assert "pilot" in t and "not" in t
    assert sequential.stopping_text({}) == ""
    json.dumps(base)
