"""Stop when the question is answered (``-p target_ci PCT``, ``-p budget SECONDS``): the runner's
side of the staged design.  What the design is and when a run stops is ``ringlab.stats.sequential``
(its ``Policy``, the pilot, the review after each stage, the next stage, the schedule); this
module gives it the run: the parameters, the host's calibration (loaded once, ``load_levels``),
the seconds the builds and trials took, the raw rows, and turns its designs into trials.

1. **Pilot (stage 0) at the planned design** (``opening``): ``sequential.pilot_design`` for the
   measured modes' calibrations (``rundir.calibration.level_calibrations``; ``CAUTIOUS`` where the
   host has none, and env.json and summary.md say so).  ``trials`` and ``layouts`` are the
   planner's then; ``count`` unset (profiles quick and full) is planned too and each mode's trials
   run at their own (``COUNT_BY_MODE``); a count given stays.  With a budget the first
   ``probe_layouts`` layouts are built and timed first and the pilot is cut to what its builds may
   spend (``fit_pilot_to_builds``).  The run then times its warm-up rounds and cuts the pilot to
   what its rounds cost here within the budget left (``fit_pilot_to_rounds``).  A host without a
   calibration (``uncalibrated``) sizes the pilot from those timed seconds alone, its builds' and
   its rounds' (``sequential.pilot_for_measured_costs``): the cautious defaults' costs can be far
   from this machine's; the pilot then uses only the layouts already built, and its added
   rounds are specs like a stage's (``pilot_specs``).
2. **Review after each stage** (``review``): ``sequential.review`` stops the run or appends the
   next stage; a row's target is its mode's (``target_ci_by_mode``, else ``target_ci``) and only
   the rows of ``target_arms`` are judged where it names some.
3. **Stages extend, never restart.**  Layout k of an arm is the same binary whatever the run's
   length (``build.layouts.layout_spec(seed, arm, k)``); a stage's new rounds get trial indices after
   the last one and their layouts from ``sequential.stage_schedule`` (seeded by the run's seed), and
   the block order of all stages keeps the earlier stages' order as its prefix, so ``--resume``
   rebuilds the same plan from env.json.
4. **The budget is a deadline** (``Deadline``): the runner launches no round once the run's wall
   clock (builds included: the seconds the record holds when the loop starts, then ``clock``)
   has passed the budget, whatever the stage planned; the round under way finishes, so the
   overrun is at most one round.  The run is then reviewed as stopped on "budget"
   (``review(..., out_of_time=True)``), its rounds run counted, and analysed as any other.

The state is one record, ``ringlab.stats.stopping_record.Stopping`` (env.json ``stopping``, its keys
listed there), written through ``RunFolder.write_env(stopping=record.to_json())`` and read back
with ``Stopping.from_json``.  ``ringlab.report.stopping_sentences.stopping_text`` is summary.md's
sentence ("stopped: target reached", "stopped: all rows decided", "stopped: budget spent (N s of M)").
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Callable

import pandas as pd

from ringlab import schema
from ringlab.catalog import StopReason
from ringlab.build.layouts import MAX_LAYOUTS
from ringlab.errors import ParamError
from ringlab.experiments.base import TrialSpec
from ringlab.experiments.params import parse_mode_targets
from ringlab.rundir.calibration import level_calibrations
from ringlab.run.plan import full_plan, round_layout
from ringlab.stats import sequential
from ringlab.stats.compare import compare
from ringlab.stats.calibration import LevelCalibration
from ringlab.stats.stopping_record import StageRecord, Stopping
from ringlab.stats.summary import StatsError

#: the parameters of a run (``Experiment.resolve``), read only here
Values = Mapping[str, Any]

#: the clock the staged loop times its stages and keeps its deadline by (seconds, monotonic)
clock: Callable[[], float] = time.monotonic


def baseline_of(values: Values, specs: list[TrialSpec] | None = None) -> str:
    """The arm every other is compared with: ``baseline`` when given, else the first of
    ``variants``, else the plan's first."""
    if values.get("baseline"):
        return str(values["baseline"])
    vs = values.get("variants")
    if isinstance(vs, list) and vs:
        return str(vs[0])
    return str(specs[0].config.get("variant")) if specs else ""


def modes_of(values: Values) -> list:
    """The measured modes, as the parameters give them."""
    return list(values.get("modes") or [0])


def mode_targets(values: Values) -> dict[str, float]:
    """{mode: the half-width asked in it} for every measured mode: ``target_ci_by_mode`` where it
    names the mode, else ``target_ci``."""
    own = parse_mode_targets(values.get("target_ci_by_mode"))
    return {str(m): float(own.get(str(m), values["target_ci"])) for m in modes_of(values)}


def target_arms(values: Values) -> list[str]:
    """The arms whose rows the target and the stop judge (empty: every arm but the baseline)."""
    return [a.strip() for a in str(values.get("target_arms") or "").split(",") if a.strip()]


def configurations_per_mode(values: Values) -> int:
    """How many configurations a mode's rounds measure: the product of the swept (list-valued)
    parameters other than the arms and the modes (ring sizes, alignments, lengths).  Each round
    measures every one of them, so a plan for one configuration costs that many times more."""
    n = 1
    for key, v in values.items():
        if key not in ("variants", "modes") and isinstance(v, (list, tuple)) and v:
            n *= len(v)
    return n


def load_levels(values: Values, host: str | None) -> dict[str, LevelCalibration]:
    """{mode: the host's level calibration} of every measured mode, calibration.json read once
    (``CAUTIOUS`` for a mode the host has none of)."""
    return level_calibrations(host, modes_of(values))


def pilot_design(values: Values, levels: dict[str, LevelCalibration],
                 layout_s: float | None = None) -> sequential.PilotDesign:
    """Stage 0 of this run (``sequential.pilot_design`` for its modes, targets, arms, configurations
    and budget); ``layout_s``: the seconds one layout of every arm took to build here, when timed."""
    budget = float(values.get("budget") or 0) or None
    targets = mode_targets(values)
    return sequential.pilot_design(
        {str(m): levels[str(m)] for m in modes_of(values)}, targets,
        arms=len(values.get("variants") or []) or 2, configurations=configurations_per_mode(values),
        budget_s=budget, max_layouts=MAX_LAYOUTS, layout_s=layout_s,
        plan_count="count" in values and not values.get("count"), policy=sequential.POLICY)


def planned_counts(values: Values, levels: dict[str, LevelCalibration]) -> dict[str, int]:
    """The ops per timed loop of a staged run whose ``count`` is unset, per measured mode
    (``sequential.planned_counts``)."""
    targets = mode_targets(values) if float(values.get("target_ci") or 0) > 0 else {}
    return sequential.planned_counts({str(m): levels[str(m)] for m in modes_of(values)}, targets,
                                     float(values.get("budget") or 0) or None, MAX_LAYOUTS)


def opening(values: Values, levels: dict[str, LevelCalibration], layout_s: float | None = None) -> Stopping:
    """The record before the pilot runs: the pilot design, stage 0 (``levels``: {mode:
    LevelCalibration}, the host's from ``load_levels`` or a simulation's; ``layout_s``: the seconds
    one layout of every arm took to build here, when timed)."""
    vs = values.get("variants")
    if isinstance(vs, list) and len(vs) < 2:
        raise ParamError(f"parameter 'target_ci': needs two or more variants to compare (this plan has "
                         f"{', '.join(map(str, vs)) or 'none'}); allowed: 0 (off), or more variants")
    d = pilot_design(values, levels, layout_s)
    budget = float(values.get("budget") or 0)
    repeats = int(values.get("repeats") or 1)
    repeats = d.repeats if repeats == 1 else repeats   # an explicit repeats stands
    pilot = d.layouts * d.rounds_per_layout
    warm = int(values.get("warmup") or 0)
    return Stopping(
        target_ci=float(values["target_ci"]), budget_s=budget if budget > 0 else None,
        target_ci_by_mode=mode_targets(values), target_arms=tuple(target_arms(values)),
        baseline=baseline_of(values), stop=str(values.get("stop") or "decided"), calibration=d.calibration,
        calibration_by_mode=d.calibration_by_mode, warmup_rounds=warm, repeats=repeats, pilot_rounds=pilot,
        rounds_planned=pilot, rounds_run=0, layouts=d.layouts, rounds_per_layout=d.rounds_per_layout,
        spent_s=0.0, stop_reason=None, target_met=None,
        stages=(StageRecord(stage=0, layouts=d.layouts, rounds_per_layout=d.rounds_per_layout, new_rounds=pilot,
                            first_round=warm, planned=d.planned),),
        count=d.count, count_by_mode=d.count_by_mode)


def probe_layouts(stopping: Stopping) -> int:
    """How many of the pilot's layouts are built first, timed, before the pilot's size is fixed."""
    return min(int(stopping.layouts), sequential.POLICY.probe_layouts)


def fit_pilot_to_builds(stopping: Stopping, built: int, seconds: float) -> Stopping:
    """``stopping`` with the pilot's layouts cut so that its builds, at the seconds per layout the
    first ``built`` layouts took, fit their share of the pilot's budget
    (``sequential.pilot_layouts_for_builds``); the timed seconds count as stage 0's builds."""
    s0 = stopping.stages[0]
    k = sequential.pilot_layouts_for_builds(s0.layouts, built, seconds, stopping.budget_s, sequential.POLICY)
    p = s0.rounds_per_layout
    s0 = dataclasses.replace(s0, layouts=k, new_rounds=k * p, build_s=float(seconds),
                             build_s_per_layout_measured=float(seconds / max(1, built)))
    return dataclasses.replace(stopping, stages=(s0,) + stopping.stages[1:], layouts=k, pilot_rounds=k * p,
                               rounds_planned=k * p)


class Deadline:
    """A staged run's budget as a wall-clock deadline: what the record had not spent of its budget
    when the loop started (its builds so far included), less ``other_s`` (the seconds this
    invocation spent before the loop that the record does not hold: the environment probe, the
    quiet check, the latencies), counted down on ``clock`` from then.  Everything after counts:
    trials, builds, reviews.  ``passed()`` is never true without a budget."""

    def __init__(self, stopping: Stopping, other_s: float = 0.0):
        budget = stopping.budget_s
        self.left_at_start = None if not budget else float(budget) - spent_s(stopping) - float(other_s)
        self.started = clock()

    def left_s(self) -> float | None:
        """Seconds of the budget left now (negative once passed); None without a budget."""
        return None if self.left_at_start is None else self.left_at_start - (clock() - self.started)

    def passed(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0


def times_pilot(stopping: Stopping) -> bool:
    """Whether the pilot is still to be sized from the run's own round time: a budget, only the
    pilot recorded, its rounds not timed yet and none of its measured rounds run."""
    return (bool(stopping.budget_s) and stopping.stages is not None and len(stopping.stages) == 1
            and stopping.stages[0].round_s_measured is None and stopping.stop_reason is None)


def fit_pilot_to_rounds(stopping: Stopping, seconds: float, rounds: int, left_s: float) -> Stopping:
    """``stopping`` with the pilot cut to what its rounds cost here: its warm-up ``rounds`` took
    ``seconds`` and ``left_s`` of the budget is left (``sequential.pilot_for_round_time``).  The
    pilot's seconds per round are recorded (``round_s_measured``) and its ``predicted_s``."""
    s0 = stopping.stages[0]
    spr = float(seconds) / max(1, int(rounds))
    if uncalibrated(stopping):
        # no calibration: the pilot's shape and size come from the seconds this run timed
        k, p = sequential.pilot_for_measured_costs(s0.layouts, spr, s0.build_s_per_layout_measured, left_s,
                                                   sequential.POLICY)
        how = "sized"
    else:
        k, p = sequential.pilot_for_round_time(s0.layouts, s0.rounds_per_layout, spr, left_s, sequential.POLICY)
        how = "cut"
    planned = s0.planned
    if (k, p) != (s0.layouts, s0.rounds_per_layout):
        built = (f" and the {s0.build_s_per_layout_measured:.3g} s a layout's builds took"
                 if how == "sized" and s0.build_s_per_layout_measured is not None else "")
        planned = (f"{planned}; {how} to {k} layouts x {p} rounds (about {k * p * spr:.0f} s) at the "
                   f"{spr:.3g} s a round its warm-up took{built}, within the {max(0.0, left_s):.0f} s of budget left")
    s0 = dataclasses.replace(s0, layouts=k, rounds_per_layout=p, new_rounds=k * p, planned=planned,
                             round_s_measured=spr, predicted_s=float(k * p * spr))
    return dataclasses.replace(stopping, stages=(s0,), layouts=k, rounds_per_layout=p, pilot_rounds=k * p,
                               rounds_planned=k * p)


def uncalibrated(stopping: Stopping) -> bool:
    """Whether every mode of the run was planned without a level calibration (``CAUTIOUS``)."""
    from ringlab.stats.calibration import CAUTIOUS
    by_mode = stopping.calibration_by_mode or {}
    return bool(by_mode) and all(str(src) == CAUTIOUS.source for src in by_mode.values())


def pilot_specs(specs: list[TrialSpec], stopping: Stopping) -> list[TrialSpec]:
    """The experiment's specs with the pilot's measured rounds ending at its (re-sized)
    ``new_rounds``: those past it dropped, and where the pilot grew (a host without a calibration,
    sized from its measured costs), each timing configuration and arm once more per new round, as
    ``stage_specs`` adds a stage's."""
    s0 = stopping.stages[0]
    end = int(s0.first_round) + int(s0.new_rounds)
    out = [s for s in specs if s.kind != "timing" or s.warmup or s.trial < end]
    last: dict[tuple, TrialSpec] = {}
    for s in out:
        if s.kind == "timing" and not s.warmup:
            k = s.key()[:-1]
            if k not in last or s.trial > last[k].trial:
                last[k] = s
    have = max((s.trial for s in last.values()), default=end - 1)
    for trial in range(have + 1, end):
        for s in last.values():
            out.append(TrialSpec(dict(s.config), trial, False, s.cpus, s.pair_class, dict(s.extra)))
    return out


def check_variants(specs: list[TrialSpec]) -> None:
    """ParamError when the plan holds fewer than two arms (nothing to compare)."""
    variants = list(dict.fromkeys(str(s.config.get("variant")) for s in specs))
    if len(variants) < 2:
        raise ParamError(f"parameter 'target_ci': needs two or more variants to compare (this plan has "
                         f"{', '.join(variants) or 'none'}); allowed: 0 (off), or more variants")


#: the key of a staged run's values that holds each mode's planned ops per timed loop (the
#: experiment reads it; it is no parameter: env.json keeps it under ``stopping.count_by_mode``)
COUNT_BY_MODE = "count_by_mode"


def stage_values(values: Values, stopping: Stopping) -> dict:
    """The parameters the experiment plans the pilot with (its rounds, layouts and repeats); layouts
    is the run's current count, so every binary a trial may ask for is named."""
    out = dict(values, trials=int(stopping.stages[0].new_rounds), layouts=int(stopping.layouts),
               repeats=int(stopping.repeats))
    if stopping.count:        # a planned trial length (count unset)
        out["count"] = int(stopping.count)
        if stopping.count_by_mode:
            out[COUNT_BY_MODE] = {str(m): int(c) for m, c in stopping.count_by_mode.items()}
    return out


def round_layouts(stopping: Stopping, seed: int) -> dict[int, int]:
    """{round: layout} of every stage recorded (warm-up rounds: the pilot's first layouts)."""
    out = {}
    st0 = stopping.stages[0]
    for r in range(stopping.warmup_rounds):
        out[r] = round_layout(seed, r, st0.layouts)
    k, p = 0, 0
    for s in stopping.stages:
        sched = sequential.stage_schedule(seed, s.stage, k, p, s.layouts, s.rounds_per_layout)
        for i, lay in enumerate(sched):
            out[s.first_round + i] = lay
        k, p = s.layouts, s.rounds_per_layout
    return out


def stage_specs(specs: list[TrialSpec], stopping: Stopping) -> list[TrialSpec]:
    """The new rounds of stages 1.. : each timing configuration and arm of the pilot once per
    round, at the stage's trial indices."""
    last: dict[tuple, TrialSpec] = {}
    for s in specs:
        if s.kind != "timing" or s.warmup:
            continue
        k = s.key()[:-1]
        if k not in last or s.trial > last[k].trial:
            last[k] = s
    out = []
    for st in stopping.stages[1:]:
        for r in range(st.new_rounds):
            for s in last.values():
                out.append(TrialSpec(dict(s.config), st.first_round + r, False, s.cpus, s.pair_class,
                                     dict(s.extra)))
    return out


def staged_plan(exp, values: Values, specs: list[TrialSpec], stopping: Stopping, ctx) -> list[TrialSpec]:
    """Every stage's trials in block order with their layouts; the icount trials (``icount``)
    once the run has stopped."""
    vals = dict(values, layouts=int(stopping.layouts))
    if stopping.stop_reason is None:
        vals["icount"] = False
    plan = full_plan(exp, vals, list(specs) + stage_specs(specs, stopping), ctx)
    lays = round_layouts(stopping, int(values["seed"]))
    return [dataclasses.replace(s, extra={**s.extra, "layout": lays.get(s.trial, 0)}) if s.kind == "timing" else s
            for s in plan]


def rounds_run(df: pd.DataFrame) -> int:
    """Measured (timing, not warm-up) rounds present in raw.csv."""
    if df is None or not len(df) or "round" not in df.columns:
        return 0
    keep = ~schema.warmup_mask(df)
    if "icount_source" in df.columns:
        keep &= df["icount_source"].astype(str) != "callgrind"
    return int(pd.to_numeric(df.loc[keep, "round"], errors="coerce").dropna().nunique())


def spent_s(stopping: Stopping) -> float:
    """Machine time spent so far: every stage's builds and trials (their wall clock)."""
    return stopping.stages_spent_s()


def add_time(stopping: Stopping, measure_s: float = 0.0, build_s: float | None = None) -> Stopping:
    """``stopping`` with the last stage's measuring (accumulated) and build seconds added."""
    last = stopping.last_stage
    changes = {"measure_s": float(last.measure_s or 0) + float(measure_s)}
    if build_s is not None:
        changes["build_s"] = float(last.build_s or 0) + float(build_s)
    st = stopping.with_last_stage(**changes)
    return dataclasses.replace(st, spent_s=st.stages_spent_s())


def _timing_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "icount_source" in df.columns:
        df = df[df["icount_source"].astype(str) != "callgrind"]
    return df


def review(df: pd.DataFrame, stopping: Stopping, log: Callable[[str], None], out_of_time: bool = False) -> Stopping:
    """After a stage: stop (``stop_reason`` set) or append the next stage, re-planned from the run's
    own components and costs (``sequential.review``); the log says which.  ``out_of_time``: the
    deadline passed (``Deadline``), the run stops."""
    policy = sequential.POLICY
    st = sequential.review(_timing_rows(df), stopping, MAX_LAYOUTS, policy, out_of_time=out_of_time)
    if st.stop_reason == StopReason.NO_PLAN and st.error is not None and stopping.error is None:
        log(f"target_ci: the data cannot be analysed ({st.error}); the run stops")
    elif st.stop_reason is None:
        nxt = st.last_stage
        log(f"target_ci: stage {len(st.stages) - 1}: {nxt.layouts} layouts x "
            f"{nxt.rounds_per_layout} rounds ({nxt.new_rounds} new rounds, about "
            f"{nxt.predicted_s:.0f} s; {st.spent_s:.0f} s spent)")
    else:
        log(f"target_ci: {st.stopped_head(policy.max_stages).split('. ')[0]}")
    return st


def finish(df: pd.DataFrame, stopping: Stopping) -> Stopping:
    """``stopping`` with rounds_run and target_met (every printed CI within the target)."""
    st = dataclasses.replace(stopping, rounds_run=rounds_run(df))
    try:
        met = sequential.target_met(compare(_timing_rows(df), st.baseline), st.target_ci,
                                    st.target_ci_by_mode, list(st.target_arms))
        return dataclasses.replace(st, target_met=bool(met))
    except StatsError as e:
        return dataclasses.replace(st, target_met=False, target_note=f"not analysed: {e}")
