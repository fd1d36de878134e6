"""env.json's ``stopping`` as one typed record: it writes the keys, values and order runs have
always written (the committed runs' files and staged runs recorded before the record existed,
byte for byte), reads older files with the defaults they implied, and round-trips."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pandas as pd

from ringlab.report.stopping_sentences import stopping_text
from ringlab.run import stopping
from ringlab.simulate import stoppingsim
from ringlab.stats import compare
from ringlab.stats.sequential import ci_half_width_pct
from ringlab.stats.calibration import CAUTIOUS, LevelCalibration
from ringlab.stats.stopping_record import RowRecord, StageRecord, Stopping
from tests.committed import committed

ROOT = Path(__file__).resolve().parent.parent
#: staged runs simulated through the runner's stopping code before the record existed: every
#: simulated run's ``stopping`` after its last review and after ``finish``, its summary.md sentence,
#: and openings with a planned trial length, warm-ups, judged arms and builds timed
GOLDEN = json.loads((ROOT / "tests" / "data" / "stopping" / "staged_runs.json").read_text())

TRUTH = LevelCalibration(mode="0", variance={"layout": 0.009 ** 2, "process": 0.016 ** 2, "iteration": 0.0044 ** 2},
                         upper={"layout": 0.015 ** 2, "process": 0.018 ** 2, "iteration": 0.0047 ** 2},
                         df={"layout": 7, "process": 120, "iteration": 256},
                         cost_s={"layout": 0.42, "process": 0.0033, "iteration": 0.065}, count=10_000_000,
                         min_count=1_000_000, lengths=({"count": 10_000_000, "sd_pct": 1.0},
                                                       {"count": 1_000_000, "sd_pct": 1.5},
                                                       {"count": 100_000, "sd_pct": 3.0}))
CALS = {"truth": TRUTH, "cautious": CAUTIOUS,
        "loud": dataclasses.replace(TRUTH, variance={k: v * 100 for k, v in TRUTH.variance.items()})}


def committed_stoppings() -> list[tuple[Path, dict]]:
    out = []
    for path in committed(sorted((ROOT / "results").rglob("env.json"))):
        doc = json.loads(path.read_text())
        if isinstance(doc.get("stopping"), dict):
            out.append((path, doc["stopping"]))
    return out


def test_the_committed_runs_stopping_is_written_back_byte_for_byte():
    found = committed_stoppings()
    assert found, "no committed staged run"
    for path, doc in found:
        rec = Stopping.from_json(doc)
        assert json.dumps(rec.to_json()) == json.dumps(doc), path
        assert Stopping.from_json(rec.to_json()) == rec


def same_json(got, want, where: str = "$") -> list[str]:
    """Where two JSON values differ: the same keys in the same order, the same strings, integers
    and nulls, and floats equal to 1e-9 relative (a float computed by numpy may differ in its last
    printed digits between builds of numpy and BLAS; nothing a run records depends on those)."""
    if isinstance(want, float) or isinstance(got, float):
        ok = (isinstance(got, (int, float)) and isinstance(want, (int, float))
              and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12))
        return [] if ok else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return [f"{where}: keys {list(got) if isinstance(got, dict) else got!r} != {list(want)}"]
        return [d for k in want for d in same_json(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: {got!r} != {want!r}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in same_json(g, w, f"{where}[{i}]")]
    return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]


def test_same_json_tells_a_changed_value_from_a_last_digit():
    assert same_json({"a": 0.52454750693, "b": [1, "x"]}, {"a": 0.524547506915, "b": [1, "x"]}) == []
    assert same_json({"a": 0.5246}, {"a": 0.5245}) == ["$.a: 0.5246 != 0.5245"]
    assert same_json({"b": 1, "a": 1}, {"a": 1, "b": 1})        # the key order is part of the record
    assert same_json({"a": 1}, {"a": 1.0}) == [] and same_json({"a": "1"}, {"a": 1})


def with_printed_half_widths(doc: dict, df: pd.DataFrame) -> dict:
    """``doc`` (a recorded ``stopping``) with each row's ``half_width_pct`` the one compare()
    prints for ``df`` today: the half-width is the estimator's (the layouts fit), not the
    record's, so the record is checked against the estimator's current figure and everything
    else the record holds stays pinned."""
    printed = {(str(r["group"]), str(r["candidate"])): ci_half_width_pct(r)
               for _, r in compare(df, doc["baseline"]).iterrows()}
    rows = [dict(r, half_width_pct=printed[(r["group"], r["candidate"])]) for r in doc.get("rows") or []]
    return dict(doc, rows=rows) if "rows" in doc else doc


def test_a_staged_run_writes_the_same_json_as_before_the_record():
    for case in GOLDEN["simulated"]:
        st, df = stoppingsim.simulated_stopping(CALS[case["truth"]], CALS[case["planner"]], case["target_pct"],
                                                case["budget_s"], case["stop"], case["effect_pct"], case["seed"])
        want = with_printed_half_widths(json.loads(case["stopping"]), df)
        assert same_json(st.to_json(), want) == [], case["seed"]
        done = stopping.finish(df, st)
        finished = with_printed_half_widths(json.loads(case["finished"]), df)
        assert same_json(done.to_json(), finished) == [], case["seed"]
        assert stopping_text(Stopping.from_json(json.loads(case["finished"]))) == case["text"]
        assert stopping_text(done) == stopping_text(Stopping.from_json(finished))
        assert Stopping.from_json(done.to_json()) == done


def test_an_opening_writes_the_same_json_as_before_the_record():
    for case in GOLDEN["openings"]:
        st = stopping.opening(case["values"], {"0": CALS[case["planner"]]}, layout_s=case["layout_s"])
        st = stopping.fit_pilot_to_builds(st, *case["fit"])
        assert same_json(st.to_json(), json.loads(case["stopping"])) == []
        assert Stopping.from_json(st.to_json()) == st
    assert GOLDEN["openings"][0]["values"]["count"] is None and stopping.opening(
        GOLDEN["openings"][0]["values"], {"0": TRUTH}).count == 1_000_000     # a planned trial length


def test_a_record_round_trips_with_every_optional_key():
    st = Stopping(target_ci=0.5, budget_s=30.0, target_ci_by_mode={"0": 0.5, "1": 1.0}, target_arms=("reorder",),
                  baseline="batch", stop="target", calibration="mode 0: measured", calibration_by_mode={"0": "measured"},
                  warmup_rounds=1, repeats=2, pilot_rounds=8, rounds_planned=20, rounds_run=20, layouts=6,
                  rounds_per_layout=3, spent_s=12.5, stop_reason="no plan", target_met=False,
                  stages=(StageRecord(0, 4, 2, 8, 1, "plan", None, None, 2.0, 4.0, "continue", 0.5, True,
                                      {"layout": 1e-4, "process": None}),
                          StageRecord(1, 6, 3, 12, 9, "more", 6.0, 0.6, 1.0, 5.5, "no plan")),
                  count=250_000, count_by_mode={"0": 250_000}, error="no ok trial", target_note="not analysed: x",
                  rows=(RowRecord("mode=0", "reorder", None, 0.5, False, None, True),))
    doc = st.to_json()
    assert list(doc)[-5:] == ["count", "count_by_mode", "rows", "error", "target_note"]
    assert Stopping.from_json(json.loads(json.dumps(doc))) == st


def test_older_files_are_read_with_the_defaults_they_implied():
    # a staged run from before per-mode targets, judged arms, -p stop, warm-up rounds and row targets
    old = {"target_ci": 2.0, "budget_s": None, "baseline": "batch", "calibration": "mode 0: measured",
           "pilot_rounds": 8, "rounds_planned": 8, "rounds_run": 8, "layouts": 4, "rounds_per_layout": 2,
           "spent_s": 3.0, "stop_reason": "target", "target_met": True,
           "stages": [{"stage": 0, "layouts": 4, "rounds_per_layout": 2, "new_rounds": 8, "first_round": 0,
                       "build_s": 1.0, "measure_s": 2.0, "stop_reason": "target"}],
           "rows": [{"group": "mode=0", "candidate": "reorder", "half_width_pct": 1.5, "target_met": True,
                     "decided": "faster"}]}
    st = Stopping.from_json(old)
    assert (st.target_ci_by_mode, st.target_arms, st.stop, st.warmup_rounds, st.repeats) == ({}, (), "decided", 0, 1)
    assert st.rows[0].target_pct == 2.0 and st.rows[0].judged is True
    assert st.stages[0].planned == "" and st.stages[0].components_upper is None
    assert stopping_text(st).startswith("stopped: target reached. Target ±2% 95% CI half-width; 1 stage(s)")
    # the two-stage design before the stages: no stages, written back in its own keys
    two = {"target_ci": 2.0, "budget_s": 60.0, "pilot_rounds": 10, "rounds_planned": 25, "rounds_run": 25,
           "stop_reason": "budget", "target_met": False, "baseline": "batch", "rounds_for_target": 90}
    rec = Stopping.from_json(two)
    assert rec.stages is None and not rec.staged and rec.to_json() == two
    assert stopping_text(rec).startswith("Stopped by the budget: reaching ±2% needed 90 rounds")
    assert Stopping.from_json(None) is None and Stopping.from_json("x") is None
    assert stopping_text(Stopping.from_json({})) == ""


def test_the_record_is_what_a_simulated_run_reports():
    st, df = stoppingsim.simulated_stopping(TRUTH, TRUTH, 0.5, 60, "target", 0.0, 3)
    assert isinstance(st, Stopping) and isinstance(df, pd.DataFrame)
    run = stoppingsim.simulate_run(TRUTH, TRUTH, 0.5, 60, "target", 0.0, 3)
    assert (run.stop_reason, run.stages, run.layouts) == (st.stop_reason, len(st.stages), st.layouts)
