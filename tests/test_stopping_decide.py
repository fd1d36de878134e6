"""``ringlab bench decide``'s judgements: the staged run's wall time against its deadline
(budget + one round + the slack) and the "Not reached" statement it prints."""
from __future__ import annotations

import math

from benchmarks import decide
from ringlab.stats.stopping_record import RowRecord, StageRecord, Stopping


def _stopped(met: bool) -> Stopping:
    row = RowRecord(group="mode=0,size=1000", candidate="reorder", half_width_pct=0.5 if met else 1.8,
                    target_pct=0.5, target_met=met, decided=None, judged=True)
    stage = StageRecord(stage=0, layouts=64, rounds_per_layout=2, new_rounds=128, first_round=1,
                        planned="70 layout pairs x 30 rounds each for a t half-width of about 0.50% in 400 s",
                        measure_s=50.0, build_s=5.0, stop_reason="target" if met else "budget",
                        components_fit={"layout": 0.003 ** 2, "round": 0.06 ** 2})
    return Stopping(target_ci=0.5, budget_s=60.0, target_ci_by_mode={"0": 0.5}, baseline="batch", stop="target",
                    calibration="mode 0: none", layouts=64, rounds_per_layout=2, pilot_rounds=128,
                    rounds_planned=128, rounds_run=128, spent_s=55.0, stop_reason="target" if met else "budget",
                    target_met=met, stages=(stage,), rows=(row,))


def test_the_deadline_is_the_budget_plus_one_round_plus_the_slack():
    ok, line = decide.deadline_text(65.0, 60.0, 0.2)
    assert ok and "65.2 s: pass" in line
    ok, line = decide.deadline_text(65.3, 60.0, 0.2)
    assert not ok and line.endswith("FAIL")
    assert decide.deadline_text(64.9, 60.0, math.nan)[0] and not decide.deadline_text(65.1, 60.0, math.nan)[0]


def test_a_staged_run_short_of_its_target_prints_how_far_why_and_what_would_reach_it():
    text = decide.short_text(_stopped(False))
    assert text.startswith("Not reached: reorder mode 0 ±1.80% of ±0.5%.")
    assert "layout 0.3%, round 6.0%" in text and "the round level's variance makes" in text
    assert "70 layout pairs x 30 rounds each" in text and "400 s" in text
    assert decide.short_text(_stopped(True)) == ""
