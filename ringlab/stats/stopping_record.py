"""env.json's ``stopping``, typed: ``Stopping`` (the run), ``StageRecord`` (one stage), ``RowRecord``
(one compared row as the stop judged it).

The runner (``ringlab.run.stopping``) writes it and every reader reads it through
``Stopping.from_json`` (``RunEnv.stopping_record``); ``to_json()`` writes exactly the keys, values and key
order env.json has always held::

    {"target_ci": PCT, "budget_s": S | null, "target_ci_by_mode": {MODE: PCT} (every measured
     mode's target), "target_arms": [NAME] (the arms judged; empty: all), "baseline": NAME,
     "stop": "decided" | "target", "calibration": TEXT, "calibration_by_mode": {MODE: source},
     "warmup_rounds": W, "repeats": N, "pilot_rounds": K0 x P0, "rounds_planned": all stages'
     measured rounds, "rounds_run": R, "layouts": K, "rounds_per_layout": P, "spent_s": S,
     "stop_reason": "target" | "decided" | "budget" | "stages" | "no plan" | null,
     "target_met": bool | null,
     "stages": [{"stage", "layouts", "rounds_per_layout", "new_rounds", "first_round", "planned",
                 "predicted_s", "predicted_half_width_pct", "build_s", "measure_s",
                 "stop_reason": why it stopped after this stage, "continue", or null,
                 "build_s_per_layout_measured" (the pilot's timed builds, where timed),
                 "built" (the pilot's binaries built), "components_upper" (reviewed stages
                 planned from the nested components' upper bounds),
                 "round_s_measured" (the pilot's seconds per round, timed on its warm-up rounds
                 before its size was fixed), "design_planned" (the plan the stage ran by, where
                 ``planned`` was replaced at a stop short of the target by what would reach it),
                 "components_fit" (reviewed stages planned from the layouts fit: {"layout",
                 "round"} variances at the run's target)}],
     "count": the longest planned ops per timed loop and "count_by_mode": {MODE: ops} (only where
     count was unset; each mode's trials run at its own),
     "rows": [{"group", "candidate", "half_width_pct", "target_pct", "target_met", "decided",
               "judged"}] (once a stage was reviewed),
     "error": why the data could not be analysed (stop_reason "no plan"),
     "target_note": why the end could not be judged}

The keys in brackets after a value are written only where they hold something.  Older files are
read too: staged runs from before a key existed get the value those runs implied (every mode at
``target_ci``, every arm judged, a stop on "decided", no warm-ups, one repeat, a row's target the
run's), and runs of the two-stage design that preceded the stages (no ``stages``: ``stages`` is
None, with ``rounds_for_target`` and ``error``) are written back in their own keys.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ringlab.catalog import StopReason


def _float(x) -> float | None:
    return None if x is None else float(x)


def _int(x) -> int | None:
    return None if x is None else int(x)


def _word(reason) -> str | None:
    """A stop reason as env.json holds it: the plain word (None stays None)."""
    return None if reason is None else str(reason)


def json_number(x) -> float | int | None:
    """JSON-safe number: NaN and infinities become null; ints stay ints."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return int(f) if isinstance(x, int) and not isinstance(x, bool) else f


@dataclass(frozen=True)
class RowRecord:
    """One compare() row as the stop judged it after a stage: its half-width and target (percent),
    whether it met the target, what it decided ("faster", "slower", "no change larger than X%",
    "exact" or None) and whether the stop judges it (``-p target_arms``)."""
    group: str
    candidate: str
    half_width_pct: float | None
    target_pct: float
    target_met: bool
    decided: str | None
    judged: bool = True

    def to_json(self) -> dict:
        return {"group": self.group, "candidate": self.candidate,
                "half_width_pct": json_number(self.half_width_pct), "target_pct": self.target_pct,
                "target_met": self.target_met, "decided": self.decided, "judged": self.judged}

    @classmethod
    def from_json(cls, doc: dict, target_pct: float) -> RowRecord:
        """A row of env.json; ``target_pct`` (the run's target) for rows written before a row had its own."""
        return cls(group=str(doc.get("group")), candidate=str(doc.get("candidate")),
                   half_width_pct=_float(doc.get("half_width_pct")),
                   target_pct=float(doc["target_pct"]) if doc.get("target_pct") is not None else float(target_pct),
                   target_met=doc.get("target_met"), decided=doc.get("decided"),
                   judged=bool(doc.get("judged", True)))


@dataclass(frozen=True)
class StageRecord:
    """One stage: the design it takes the run to (layouts x rounds per layout), its new rounds from
    ``first_round``, the plan and its prediction, the seconds its builds and trials took, and why
    the run stopped after it ("continue" where it went on; None while it runs)."""
    stage: int
    layouts: int
    rounds_per_layout: int
    new_rounds: int
    first_round: int
    planned: str = ""
    predicted_s: float | None = None
    predicted_half_width_pct: float | None = None
    build_s: float | None = None
    measure_s: float = 0.0
    stop_reason: str | None = None
    #: the pilot's seconds per layout, timed on its first layouts' builds (None: not timed)
    build_s_per_layout_measured: float | None = None
    #: the pilot's binaries were built and their seconds counted (None: not yet)
    built: bool | None = None
    #: per level, the upper bound of the variance the stage's review planned from (None: not reviewed)
    components_upper: dict[str, float | None] | None = None
    #: the pilot's seconds per round, timed on its warm-up rounds before its size was fixed (None: not timed)
    round_s_measured: float | None = None
    #: the plan the stage ran by, kept where ``planned`` now says what would reach the target (a
    #: stop short of it: planned from the run's own components and seconds per round)
    design_planned: str | None = None
    #: the layouts fit's variance components ({"layout", "round"}, log scale, scaled to the run's
    #: target) the stage's review planned from (None: planned from ``components_upper``, or not reviewed)
    components_fit: dict[str, float | None] | None = None

    def to_json(self) -> dict:
        out = {"stage": self.stage, "layouts": self.layouts, "rounds_per_layout": self.rounds_per_layout,
               "new_rounds": self.new_rounds, "first_round": self.first_round, "planned": self.planned,
               "predicted_s": self.predicted_s, "predicted_half_width_pct": self.predicted_half_width_pct,
               "build_s": self.build_s, "measure_s": self.measure_s, "stop_reason": _word(self.stop_reason)}
        if self.build_s_per_layout_measured is not None:
            out["build_s_per_layout_measured"] = self.build_s_per_layout_measured
        if self.built is not None:
            out["built"] = self.built
        if self.components_upper is not None:
            out["components_upper"] = dict(self.components_upper)
        if self.round_s_measured is not None:
            out["round_s_measured"] = self.round_s_measured
        if self.design_planned is not None:
            out["design_planned"] = self.design_planned
        if self.components_fit is not None:
            out["components_fit"] = dict(self.components_fit)
        return out

    @classmethod
    def from_json(cls, doc: dict) -> StageRecord:
        comps = doc.get("components_upper")
        return cls(stage=int(doc.get("stage") or 0), layouts=int(doc.get("layouts") or 0),
                   rounds_per_layout=int(doc.get("rounds_per_layout") or 0),
                   new_rounds=int(doc.get("new_rounds") or 0), first_round=int(doc.get("first_round") or 0),
                   planned=str(doc.get("planned") or ""), predicted_s=_float(doc.get("predicted_s")),
                   predicted_half_width_pct=_float(doc.get("predicted_half_width_pct")),
                   build_s=_float(doc.get("build_s")), measure_s=float(doc.get("measure_s") or 0.0),
                   stop_reason=doc.get("stop_reason"),
                   build_s_per_layout_measured=_float(doc.get("build_s_per_layout_measured")),
                   built=doc.get("built"),
                   components_upper={str(k): _float(v) for k, v in comps.items()} if isinstance(comps, dict) else None,
                   round_s_measured=_float(doc.get("round_s_measured")),
                   design_planned=None if doc.get("design_planned") is None else str(doc["design_planned"]),
                   components_fit=({str(k): _float(v) for k, v in doc["components_fit"].items()}
                                   if isinstance(doc.get("components_fit"), dict) else None))

    def spent_s(self) -> float:
        """The stage's machine time: its builds and its trials."""
        return float(self.build_s or 0) + float(self.measure_s or 0)


@dataclass(frozen=True)
class Stopping:
    """A run's stop on a target: what it asked (the targets, the arms judged, the budget, the stop
    rule), how the pilot was planned, its stages, the rows' state after the last review and why it
    stopped.  ``stages`` is None for a run of the two-stage design that preceded the stages."""
    target_ci: float = 0.0
    budget_s: float | None = None
    target_ci_by_mode: dict[str, float] = field(default_factory=dict)
    target_arms: tuple[str, ...] = ()
    baseline: str = ""
    stop: str = "decided"
    calibration: str = ""
    calibration_by_mode: dict[str, str] = field(default_factory=dict)
    warmup_rounds: int = 0
    repeats: int = 1
    pilot_rounds: int | None = None
    rounds_planned: int | None = None
    rounds_run: int | None = None
    layouts: int = 0
    rounds_per_layout: int = 0
    spent_s: float = 0.0
    stop_reason: str | None = None
    target_met: bool | None = None
    stages: tuple[StageRecord, ...] | None = ()
    #: the planned ops per timed loop (the longest of ``count_by_mode``); None where count was given
    count: int | None = None
    count_by_mode: dict[str, int] | None = None
    #: the rows after the last review (None: no stage reviewed yet)
    rows: tuple[RowRecord, ...] | None = None
    error: str | None = None
    target_note: str | None = None
    #: the two-stage design's rounds for the target (older runs only)
    rounds_for_target: int | None = None

    @property
    def staged(self) -> bool:
        return self.stages is not None

    @property
    def last_stage(self) -> StageRecord:
        return self.stages[-1]

    @property
    def looks(self) -> int:
        """The looks taken at the run's data: its reviewed stages (those with a ``stop_reason``,
        "continue" included).  The next look's level is ``sequential.interim_alpha(looks + 1, ...)``."""
        return sum(1 for s in self.stages or () if s.stop_reason is not None)

    def with_last_stage(self, **changes) -> Stopping:
        """This record with the last stage's fields changed."""
        return dataclasses.replace(self, stages=self.stages[:-1] + (dataclasses.replace(self.stages[-1], **changes),))

    def stopped_head(self, max_stages: int) -> str:
        """How the run stopped, as the runner's log and summary.md's first sentence say it ("" while
        it runs); ``max_stages``: the policy's most stages."""
        reason = StopReason.lookup(self.stop_reason)
        return "" if reason is None else reason.stopped_head(self.spent_s, self.budget_s, max_stages, self.error)

    @property
    def mode(self) -> StopReason:
        """The stop asked for (``stop``, ``-p stop``) as its ``StopReason``."""
        return StopReason.mode_of(self.stop)

    def stages_spent_s(self) -> float:
        """Machine time spent so far: every stage's builds and trials (their wall clock)."""
        return float(sum(s.spent_s() for s in self.stages or ()))

    def to_json(self) -> dict:
        """env.json's ``stopping``: the same keys, values and order a run has always written."""
        if self.stages is None:
            return self._two_stage_json()
        out = {"target_ci": self.target_ci, "budget_s": self.budget_s,
               "target_ci_by_mode": dict(self.target_ci_by_mode), "target_arms": list(self.target_arms),
               "baseline": self.baseline, "stop": self.stop, "calibration": self.calibration,
               "calibration_by_mode": dict(self.calibration_by_mode), "warmup_rounds": self.warmup_rounds,
               "repeats": self.repeats, "pilot_rounds": self.pilot_rounds, "rounds_planned": self.rounds_planned,
               "rounds_run": self.rounds_run, "layouts": self.layouts, "rounds_per_layout": self.rounds_per_layout,
               "spent_s": self.spent_s, "stop_reason": _word(self.stop_reason), "target_met": self.target_met,
               "stages": [s.to_json() for s in self.stages]}
        if self.count is not None:
            out["count"] = self.count
            out["count_by_mode"] = dict(self.count_by_mode or {})
        if self.rows is not None:
            out["rows"] = [r.to_json() for r in self.rows]
        if self.error is not None:
            out["error"] = self.error
        if self.target_note is not None:
            out["target_note"] = self.target_note
        return out

    def _two_stage_json(self) -> dict:
        out = {"target_ci": self.target_ci, "budget_s": self.budget_s, "pilot_rounds": self.pilot_rounds,
               "rounds_planned": self.rounds_planned, "rounds_run": self.rounds_run,
               "stop_reason": _word(self.stop_reason), "target_met": self.target_met, "baseline": self.baseline}
        if self.rounds_for_target is not None:
            out["rounds_for_target"] = self.rounds_for_target
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def from_json(cls, doc: dict | None) -> Stopping | None:
        """The record of env.json's ``stopping``; None for a run without one (or not a mapping)."""
        if not isinstance(doc, dict):
            return None
        target = float(doc.get("target_ci") or 0)
        stages = doc.get("stages")
        by_mode = doc.get("target_ci_by_mode") or {}
        counts = doc.get("count_by_mode")
        rows = doc.get("rows")
        return cls(
            target_ci=target, budget_s=_float(doc.get("budget_s")),
            target_ci_by_mode={str(m): float(t) for m, t in by_mode.items()},
            target_arms=tuple(str(a) for a in doc.get("target_arms") or ()),
            baseline=str(doc.get("baseline") or ""), stop=str(doc.get("stop") or "decided"),
            calibration=str(doc.get("calibration") or ""),
            calibration_by_mode={str(m): str(s) for m, s in (doc.get("calibration_by_mode") or {}).items()},
            warmup_rounds=int(doc.get("warmup_rounds") or 0), repeats=int(doc.get("repeats") or 1),
            pilot_rounds=_int(doc.get("pilot_rounds")), rounds_planned=_int(doc.get("rounds_planned")),
            rounds_run=_int(doc.get("rounds_run")), layouts=int(doc.get("layouts") or 0),
            rounds_per_layout=int(doc.get("rounds_per_layout") or 0), spent_s=float(doc.get("spent_s") or 0.0),
            stop_reason=doc.get("stop_reason"), target_met=doc.get("target_met"),
            stages=tuple(StageRecord.from_json(s) for s in stages) if isinstance(stages, list) else None,
            count=_int(doc.get("count")) if doc.get("count") else None,
            count_by_mode={str(m): int(c) for m, c in counts.items()} if isinstance(counts, dict) else None,
            rows=tuple(RowRecord.from_json(r, target) for r in rows) if isinstance(rows, list) else None,
            error=None if doc.get("error") is None else str(doc["error"]),
            target_note=None if doc.get("target_note") is None else str(doc["target_note"]),
            rounds_for_target=_int(doc.get("rounds_for_target")))


__all__ = ["RowRecord", "StageRecord", "Stopping", "json_number"]
