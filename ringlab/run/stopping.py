"""Stop on a target CI (``-p target_ci PCT -p budget SECONDS``): the runner's side of the
two-stage (Stein) design of ``ringlab.stats.sequential``.

1. **Pilot.**  A run with a target plans ``sequential.PILOT_ROUNDS`` measured rounds (after
   its warm-ups); ``trials`` is not used.  The icount trials wait for the last round.
2. **One decision.**  Once every pilot trial has run, ``decide`` calls
   ``sequential.rounds_needed`` once on the pilot's rows of raw.csv.  ``extension`` makes the
   ``additional_rounds`` (fewer when the budget cannot pay for them): new rounds with new
   trial indices, every configuration and arm of the pilot, in the same block design.
   ``plan.order_plan`` over pilot + extension keeps the pilot's order as its prefix.
3. **No second look.**  Every planned round runs, whatever the CIs look like in between:
   stopping as soon as a CI is narrow enough would break the error-rate guarantee.
   ``finish`` records how many rounds ran and whether every CI met the target.

env.json ``stopping`` (written through ``RunFolder.write_env``)::

    {"target_ci": PCT, "budget_s": SECONDS | null, "pilot_rounds": 10,
     "rounds_planned": N | null, "rounds_run": R, "stop_reason": "target" | "budget" |
     "pilot met target" | null, "target_met": true | false | null, "baseline": NAME,
     "rounds_for_target": N0, "seconds_per_round": S, "affordable_rounds": M | null,
     "comparisons": [{"group", "candidate", "n_pairs", "half_width_pct", "rounds"}]}

env.json's top-level ``baseline`` is set to the same arm, so summary.md compares what the
plan was made for.  ``rounds_planned`` stays null until the pilot has been analysed; once set, ``--resume``
runs to that plan and never decides again.  When the pilot cannot be analysed (no ok
trial, say) ``stop_reason`` is ``"no plan"`` with the reason in ``error``, and no round is
added.  ``sequential.stopping_text(stopping)`` is the sentence summary.md shows.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import pandas as pd

from ringlab.errors import ParamError
from ringlab.experiments.base import TrialSpec
from ringlab.rundir.calibration import frame_calibration
from ringlab.stats import sequential
from ringlab.stats.summary import StatsError
from ringlab.stats.compare import compare


def enabled(values: dict[str, Any]) -> bool:
    return float(values.get("target_ci") or 0) > 0


def pilot_values(values: dict[str, Any]) -> dict[str, Any]:
    """The parameters the experiment plans the pilot with: ``PILOT_ROUNDS`` measured trials."""
    return dict(values, trials=sequential.PILOT_ROUNDS)


def baseline_of(values: dict[str, Any], specs: list[TrialSpec]) -> str:
    """The arm every other is compared with: the first of ``variants``, else the plan's first."""
    vs = values.get("variants")
    if isinstance(vs, list) and vs:
        return str(vs[0])
    return str(specs[0].config.get("variant"))


def opening(values: dict[str, Any], specs: list[TrialSpec]) -> dict[str, Any]:
    """env.json's ``stopping`` before the pilot is analysed; ParamError with a single arm."""
    variants = list(dict.fromkeys(str(s.config.get("variant")) for s in specs))
    if len(variants) < 2:
        raise ParamError(f"parameter 'target_ci': needs two or more variants to compare (this plan has "
                         f"{', '.join(variants) or 'none'}); allowed: 0 (off), or more variants")
    budget = float(values.get("budget") or 0)
    return {"target_ci": float(values["target_ci"]), "budget_s": budget if budget > 0 else None,
            "pilot_rounds": sequential.PILOT_ROUNDS, "rounds_planned": None, "rounds_run": 0,
            "stop_reason": None, "target_met": None, "baseline": baseline_of(values, specs)}


def _num(x) -> float | int | None:
    """JSON-safe number: NaN and infinities become null."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        return None
    return int(f) if isinstance(x, (int,)) and not isinstance(x, bool) else f


def decide(df: pd.DataFrame, stopping: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """The one decision after the pilot: ``stopping`` with rounds_planned and stop_reason set."""
    st = dict(stopping)
    try:
        plan = sequential.rounds_needed(df, st["baseline"], st["target_ci"], budget_s=st.get("budget_s"),
                                       calibration=frame_calibration(df))
    except StatsError as e:
        st.update(rounds_planned=st["pilot_rounds"], stop_reason="no plan", error=str(e))
        log(f"target_ci: the pilot cannot be analysed ({e}); no rounds added")
        return st
    st.update(pilot_rounds=int(plan["pilot_rounds"]), rounds_planned=int(plan["rounds"]),
              stop_reason=plan["stop_reason"], rounds_for_target=int(plan["rounds_for_target"]),
              seconds_per_round=_num(plan["seconds_per_round"]),
              affordable_rounds=_num(plan["affordable_rounds"]),
              comparisons=[{"group": c["group"], "candidate": c["candidate"], "n_pairs": int(c["n_pairs"]),
                            "half_width_pct": _num(c["half_width_pct"]), "rounds": int(c["rounds"])}
                           for c in plan["comparisons"]])
    log(f"target_ci: pilot of {st['pilot_rounds']} rounds; {st['rounds_for_target']} rounds reach "
        f"±{st['target_ci']:g}%, {st['rounds_planned']} planned ({plan['additional_rounds']} more; "
        f"{st['stop_reason']})")
    return st


def extension(specs: list[TrialSpec], pilot_rounds: int, rounds_planned: int) -> list[TrialSpec]:
    """Rounds pilot_rounds .. rounds_planned-1: each timing configuration and arm of the pilot
    once per round, with trial indices after its last pilot trial (new rounds)."""
    last: dict[tuple, TrialSpec] = {}
    for s in specs:
        if s.kind != "timing" or s.warmup:
            continue
        k = s.key()[:-1]
        if k not in last or s.trial > last[k].trial:
            last[k] = s
    out = []
    for r in range(rounds_planned - pilot_rounds):
        for s in last.values():
            out.append(TrialSpec(dict(s.config), s.trial + 1 + r, False, s.cpus, s.pair_class, dict(s.extra)))
    return out


def rounds_run(df: pd.DataFrame) -> int:
    """Measured (timing, not warm-up) rounds present in raw.csv."""
    if df is None or not len(df) or "round" not in df.columns:
        return 0
    keep = pd.Series(True, index=df.index)
    if "warmup" in df.columns:
        keep &= ~df["warmup"].map(lambda v: str(v).strip().lower() in ("true", "1", "yes")).astype(bool)
    if "icount_source" in df.columns:
        keep &= df["icount_source"].astype(str) != "callgrind"
    return int(pd.to_numeric(df.loc[keep, "round"], errors="coerce").dropna().nunique())


def finish(df: pd.DataFrame, stopping: dict[str, Any]) -> dict[str, Any]:
    """``stopping`` with rounds_run and target_met (every printed CI within the target)."""
    st = dict(stopping, rounds_run=rounds_run(df))
    try:
        st["target_met"] = bool(sequential.target_met(compare(df, st["baseline"]), st["target_ci"]))
    except StatsError as e:
        st.update(target_met=False, target_note=f"not analysed: {e}")
    return st
