"""Stop when the question is answered (``-p target_ci PCT``, ``-p budget SECONDS``): the runner's
side of the staged design of ``ringlab.stats.sequential``.

1. **Pilot (stage 0) at the planned design.**  ``opening`` plans layouts x rounds per layout
   (and ``repeats``) with the level planner: per measured mode the host's level calibration
   (``rundir.calibration.level_calibration``; ``CAUTIOUS`` where the host has none, and env.json
   and summary.md say so), at the target, within ``PILOT_SHARE`` of the budget; the largest design
   over the modes.  ``trials`` and ``layouts`` are the planner's then.  ``count`` unset (profiles
   quick and full) is planned too (``planned_counts``): per mode the unbiased trial length of the
   calibration's trial-length probe whose plan is narrowest, and each mode's trials run at their
   own; a count given stays.
2. **Review after each stage** (``review``): the run's own compare() rows and the variance
   components of its own pair log ratios.  A row's target is its mode's (``target_ci_by_mode``,
   else ``target_ci``); only the rows of ``target_arms`` are judged where it names some (the
   others are measured alongside).  It stops at the first of: every judged row reached its target
   half-width (``"target"``), every row decided (``"decided"``: faster/slower, or "no change larger
   than X%" with X = target_ci, judged at 5% / ``MAX_STAGES``: Bonferroni over the looks; not with
   ``-p stop target``, which asks for the half-width itself), the budget spent (``"budget"``:
   builds and trials, timed; or what is left of it buys fewer than ``sequential.MIN_STAGE_SHARE``
   of the rounds so far, which would narrow a half-width by a few percent of itself), or
   ``sequential.MAX_STAGES`` stages (``"stages"``).  Otherwise it re-plans from the components'
   upper bounds and appends a stage: more layouts and/or more rounds per layout.
3. **Stages extend, never restart.**  Layout k of an arm is the same binary whatever the run's
   length (``build.layouts.layout_spec(seed, arm, k)``); a stage's new rounds get trial indices after
   the last one and their layouts from ``sequential.stage_schedule`` (seeded by the run's seed), and
   the block order of all stages keeps the earlier stages' order as its prefix, so ``--resume``
   rebuilds the same plan from env.json.

env.json ``stopping`` (written through ``RunFolder.write_env``)::

    {"target_ci": PCT, "target_ci_by_mode": {MODE: PCT} (every measured mode's target),
     "target_arms": [NAME] (the arms judged; empty: all), "budget_s": S | null, "baseline": NAME,
     "stop": "decided" | "target",
     "count": the longest planned ops per timed loop and "count_by_mode": {MODE: ops} (only where
     count was unset; each mode's trials run at its own), "calibration": TEXT,
     "calibration_by_mode": {MODE: source}, "warmup_rounds": W, "repeats": N,
     "pilot_rounds": K0 x P0, "rounds_planned": all stages' measured rounds, "rounds_run": R,
     "layouts": K, "rounds_per_layout": P, "spent_s": S, "stop_reason": "target" | "decided" |
     "budget" | "stages" | "no plan" | null, "target_met": bool | null,
     "rows": [{"group", "candidate", "half_width_pct", "target_pct", "target_met", "decided", "judged"}],
     "stages": [{"stage", "layouts", "rounds_per_layout", "new_rounds", "first_round", "planned",
                 "predicted_s", "predicted_half_width_pct", "build_s", "measure_s",
                 "stop_reason": why it stopped after this stage, or "continue"}]}

``sequential.stopping_text(stopping)`` is summary.md's sentence ("stopped: target reached",
"stopped: all rows decided", "stopped: budget spent (N s of M)").
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import pandas as pd

from ringlab import schema
from ringlab.build.layouts import MAX_LAYOUTS
from ringlab.errors import ParamError
from ringlab.experiments.base import TrialSpec
from ringlab.experiments.params import parse_mode_targets
from ringlab.rundir.calibration import level_calibration
from ringlab.run.plan import full_plan, round_layout
from ringlab.stats import sequential
from ringlab.stats.compare import compare
from ringlab.stats.summary import StatsError


def baseline_of(values: dict[str, Any], specs: list[TrialSpec] | None = None) -> str:
    """The arm every other is compared with: ``baseline`` when given, else the first of
    ``variants``, else the plan's first."""
    if values.get("baseline"):
        return str(values["baseline"])
    vs = values.get("variants")
    if isinstance(vs, list) and vs:
        return str(vs[0])
    return str(specs[0].config.get("variant")) if specs else ""


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


def mode_targets(values: dict[str, Any]) -> dict[str, float]:
    """{mode: the half-width asked in it} for every measured mode: ``target_ci_by_mode`` where it
    names the mode, else ``target_ci``."""
    own = parse_mode_targets(values.get("target_ci_by_mode"))
    return {str(m): float(own.get(str(m), values["target_ci"])) for m in list(values.get("modes") or [0])}


def target_arms(values: dict[str, Any]) -> list[str]:
    """The arms whose rows the target and the stop judge (empty: every arm but the baseline)."""
    return [a.strip() for a in str(values.get("target_arms") or "").split(",") if a.strip()]


def configurations_per_mode(values: dict[str, Any]) -> int:
    """How many configurations a mode's rounds measure: the product of the swept (list-valued)
    parameters other than the arms and the modes (ring sizes, alignments, lengths).  Each round
    measures every one of them, so a plan for one configuration costs that many times more."""
    n = 1
    for key, v in values.items():
        if key not in ("variants", "modes") and isinstance(v, (list, tuple)) and v:
            n *= len(v)
    return n


def _level(host: str | None, mode, levels: dict | None):
    """One mode's level calibration: ``levels[mode]`` where given (a simulation's), else the host's."""
    return levels[str(mode)] if levels else level_calibration(host, mode)


def pilot_design(values: dict[str, Any], host: str | None, layout_s: float | None = None,
                 levels: dict | None = None) -> dict[str, Any]:
    """Stage 0: the level planner's design for every measured mode, the largest over them, each
    mode's plan within its share of the pilot's budget divided over its configurations and arm pairs.
    ``layout_s``, the seconds one layout of every arm took to build here (timed by the run), stands
    for the calibration's build cost: builds cost what this checkout's build folder makes them
    (its kept objects, ringlab.build.shared_objects), and their cost sets how many rounds a
    layout is worth."""
    targets = mode_targets(values)
    arms = len(values.get("variants") or []) or 2
    pair_s = 2 * float(layout_s) / arms if layout_s is not None and layout_s >= 0 else None
    budget = float(values.get("budget") or 0) or None
    modes = list(values.get("modes") or [0])
    # a mode's plan prices one pair of arms in one configuration; a round measures every arm in
    # every configuration of every mode
    share = (budget * sequential.PILOT_SHARE / (len(modes) * configurations_per_mode(values) * max(1.0, arms / 2))
             if budget else None)
    k, p, n_i, by_mode, bases = 4, sequential.MIN_ROUNDS_PER_LAYOUT, 1, {}, []
    counts = planned_counts(values, host, levels) if "count" in values and not values.get("count") else {}
    for m in modes:
        cal = _level(host, m, levels)
        cal = cal.at_count(counts[str(m)]) if counts else cal
        if pair_s is not None:
            cal = dataclasses.replace(cal, cost_s=dict(cal.cost_s, layout=pair_s))
        plan = cal.plan(targets[str(m)], budget_s=share, max_layouts=MAX_LAYOUTS)
        k, p, n_i = max(k, plan.layouts), max(p, plan.rounds_per_layout), max(n_i, plan.iterations)
        by_mode[str(m)] = cal.source
        bases.append(f"mode {m}: {plan.basis}")
    if budget is None:   # no budget: a pilot of at most 8 rounds per layout, re-planned after it
        p = min(p, 8)
    else:                # one build serves every mode: the pilot's builds get half the pilot's share
        per_build = pair_s / 2 if pair_s is not None else \
            max(float(_level(host, m, levels).cost_s.get("layout") or 0) / 2 for m in modes)
        if per_build > 0:
            k = max(4, min(k, int(budget * sequential.PILOT_SHARE / 2 // (arms * per_build))))
    k = min(k, MAX_LAYOUTS)
    where = "; ".join(f"mode {m}: {src}" for m, src in by_mode.items())
    out = {"layouts": int(k), "rounds_per_layout": int(p), "repeats": int(n_i), "calibration": where,
           "calibration_by_mode": by_mode, "planned": "; ".join(bases)}
    if counts:
        out["count"] = max(counts.values())
        out["count_by_mode"] = counts
    return out


def planned_counts(values: dict[str, Any], host: str | None, levels: dict | None = None) -> dict[str, int]:
    """The ops per timed loop of a staged run whose ``count`` is unset, per measured mode: the
    unbiased trial length whose plan is narrowest (``best_count``; the count the calibration
    measured at where it has no trial-length probe).  Each mode's trials run at its own: a
    round costs what its modes' shortest unbiased trials cost."""
    targets = mode_targets(values) if float(values.get("target_ci") or 0) > 0 else {}
    budget = float(values.get("budget") or 0) or None
    return {str(m): int(best_count(_level(host, m, levels), targets.get(str(m)), budget))
            for m in list(values.get("modes") or [0])}


def best_count(cal, target_pct: float | None, budget_s: float | None) -> int:
    """Of the calibration's unbiased trial lengths, the one whose plan is narrowest within the
    budget (the cheapest that reaches the target, where one does): a shorter trial buys more
    processes per second and may be noisier, and the probe says by how much."""
    counts = cal.unbiased_counts()
    if len(counts) == 1 or not (target_pct or budget_s):
        return counts[-1]

    def key(c):
        plan = cal.at_count(c).plan(target_pct, budget_s=budget_s, max_layouts=MAX_LAYOUTS)
        if target_pct and plan.half_width <= math.log1p(target_pct / 100):
            return (0.0, plan.seconds)
        return (1.0, plan.half_width)
    return min(counts, key=key)


def opening(values: dict[str, Any], host: str | None, layout_s: float | None = None,
            levels: dict | None = None) -> dict[str, Any]:
    """env.json's ``stopping`` before the pilot runs: the pilot design, stage 0 (``layout_s``:
    the seconds one layout of every arm took to build here, when timed; ``levels``: {mode:
    LevelCalibration} to plan from instead of the host's, as a simulation does)."""
    vs = values.get("variants")
    if isinstance(vs, list) and len(vs) < 2:
        raise ParamError(f"parameter 'target_ci': needs two or more variants to compare (this plan has "
                         f"{', '.join(map(str, vs)) or 'none'}); allowed: 0 (off), or more variants")
    d = pilot_design(values, host, layout_s, levels)
    budget = float(values.get("budget") or 0)
    repeats = int(values.get("repeats") or 1)
    repeats = d["repeats"] if repeats == 1 else repeats   # an explicit repeats stands
    pilot = d["layouts"] * d["rounds_per_layout"]
    warm = int(values.get("warmup") or 0)
    out = {"target_ci": float(values["target_ci"]), "budget_s": budget if budget > 0 else None,
            "target_ci_by_mode": mode_targets(values), "target_arms": target_arms(values),
            "baseline": baseline_of(values), "stop": str(values.get("stop") or "decided"),
            "calibration": d["calibration"],
            "calibration_by_mode": d["calibration_by_mode"], "warmup_rounds": warm, "repeats": repeats,
            "pilot_rounds": pilot, "rounds_planned": pilot, "rounds_run": 0,
            "layouts": d["layouts"], "rounds_per_layout": d["rounds_per_layout"], "spent_s": 0.0,
            "stop_reason": None, "target_met": None,
            "stages": [{"stage": 0, "layouts": d["layouts"], "rounds_per_layout": d["rounds_per_layout"],
                        "new_rounds": pilot, "first_round": warm, "planned": d["planned"],
                        "predicted_s": None, "predicted_half_width_pct": None, "build_s": None,
                        "measure_s": 0.0, "stop_reason": None}]}
    if "count" in d:
        out["count"], out["count_by_mode"] = d["count"], d["count_by_mode"]
    return out


def probe_layouts(stopping: dict[str, Any]) -> int:
    """How many of the pilot's layouts are built first, timed, before the pilot's size is fixed."""
    return min(int(stopping["layouts"]), 4)


def fit_pilot_to_builds(stopping: dict[str, Any], values: dict[str, Any], built: int,
                        seconds: float) -> dict[str, Any]:
    """``stopping`` with the pilot's layouts cut so that its builds, at the seconds per layout the
    first ``built`` layouts took, fit half the pilot's share of the budget (at least 4 layouts);
    the timed seconds count as stage 0's builds."""
    st = dict(stopping, stages=[dict(s) for s in stopping["stages"]])
    s0 = st["stages"][0]
    per_layout = seconds / max(1, built)
    room = float(st["budget_s"]) * sequential.PILOT_SHARE / 2
    k = int(s0["layouts"])
    if per_layout > 0:
        k = max(built, 4, min(k, int(room // per_layout)))
    p = int(s0["rounds_per_layout"])
    s0.update(layouts=k, new_rounds=k * p, build_s=float(seconds),
              build_s_per_layout_measured=float(per_layout))
    st.update(layouts=k, pilot_rounds=k * p, rounds_planned=k * p)
    return st


def check_variants(specs: list[TrialSpec]) -> None:
    """ParamError when the plan holds fewer than two arms (nothing to compare)."""
    variants = list(dict.fromkeys(str(s.config.get("variant")) for s in specs))
    if len(variants) < 2:
        raise ParamError(f"parameter 'target_ci': needs two or more variants to compare (this plan has "
                         f"{', '.join(variants) or 'none'}); allowed: 0 (off), or more variants")


#: the key of a staged run's values that holds each mode's planned ops per timed loop (the
#: experiment reads it; it is no parameter: env.json keeps it under ``stopping.count_by_mode``)
COUNT_BY_MODE = "count_by_mode"


def stage_values(values: dict[str, Any], stopping: dict[str, Any]) -> dict[str, Any]:
    """The parameters the experiment plans the pilot with (its rounds, layouts and repeats); layouts
    is the run's current count, so every binary a trial may ask for is named."""
    st0 = stopping["stages"][0]
    out = dict(values, trials=int(st0["new_rounds"]), layouts=int(stopping["layouts"]),
               repeats=int(stopping["repeats"]))
    if stopping.get("count"):        # a planned trial length (count unset)
        out["count"] = int(stopping["count"])
        if stopping.get("count_by_mode"):
            out[COUNT_BY_MODE] = {str(m): int(c) for m, c in stopping["count_by_mode"].items()}
    return out


def round_layouts(stopping: dict[str, Any], seed: int) -> dict[int, int]:
    """{round: layout} of every stage recorded (warm-up rounds: the pilot's first layouts)."""
    out = {}
    warm = int(stopping.get("warmup_rounds") or 0)
    st0 = stopping["stages"][0]
    for r in range(warm):
        out[r] = round_layout(seed, r, int(st0["layouts"]))
    k, p = 0, 0
    for s in stopping["stages"]:
        sched = sequential.stage_schedule(seed, int(s["stage"]), k, p, int(s["layouts"]), int(s["rounds_per_layout"]))
        for i, lay in enumerate(sched):
            out[int(s["first_round"]) + i] = lay
        k, p = int(s["layouts"]), int(s["rounds_per_layout"])
    return out


def stage_specs(specs: list[TrialSpec], stopping: dict[str, Any]) -> list[TrialSpec]:
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
    for st in stopping["stages"][1:]:
        for r in range(int(st["new_rounds"])):
            for s in last.values():
                out.append(TrialSpec(dict(s.config), int(st["first_round"]) + r, False, s.cpus, s.pair_class,
                                     dict(s.extra)))
    return out


def staged_plan(exp, values: dict[str, Any], specs: list[TrialSpec], stopping: dict[str, Any], ctx) -> list[TrialSpec]:
    """Every stage's trials in block order with their layouts; the icount trials (``icount``)
    once the run has stopped."""
    import dataclasses
    vals = dict(values, layouts=int(stopping["layouts"]))
    if stopping.get("stop_reason") is None:
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


def spent_s(stopping: dict[str, Any]) -> float:
    """Machine time spent so far: every stage's builds and trials (their wall clock)."""
    return float(sum(float(s.get("build_s") or 0) + float(s.get("measure_s") or 0) for s in stopping["stages"]))


def add_time(stopping: dict[str, Any], measure_s: float = 0.0, build_s: float | None = None) -> dict[str, Any]:
    """``stopping`` with the last stage's measuring (accumulated) and build seconds added."""
    st = dict(stopping, stages=[dict(s) for s in stopping["stages"]])
    last = st["stages"][-1]
    last["measure_s"] = float(last.get("measure_s") or 0) + float(measure_s)
    if build_s is not None:
        last["build_s"] = float(last.get("build_s") or 0) + float(build_s)
    st["spent_s"] = spent_s(st)
    return st


def _timing_rows(df: pd.DataFrame) -> pd.DataFrame:
    if "icount_source" in df.columns:
        df = df[df["icount_source"].astype(str) != "callgrind"]
    return df


def review(df: pd.DataFrame, stopping: dict[str, Any], log: Callable[[str], None]) -> dict[str, Any]:
    """After a stage: stop (``stop_reason`` set) or append the next stage, re-planned from the run's
    own components and costs."""
    st = dict(stopping, stages=[dict(s) for s in stopping["stages"]])
    target, budget = float(st["target_ci"]), st.get("budget_s")
    df = _timing_rows(df)
    by_mode, arms = st.get("target_ci_by_mode"), st.get("target_arms")
    try:
        rows = sequential.review_rows(compare(df, st["baseline"]), target,
                                      strict=compare(df, st["baseline"], alpha=0.05 / sequential.MAX_STAGES),
                                      by_mode=by_mode, arms=arms)
    except StatsError as e:
        st.update(stop_reason="no plan", error=str(e), target_met=False)
        st["stages"][-1]["stop_reason"] = "no plan"
        log(f"target_ci: the data cannot be analysed ({e}); the run stops")
        return st
    spent = spent_s(st)
    st.update(rows=[{k: _num(v) if k == "half_width_pct" else v for k, v in r.items()} for r in rows],
              spent_s=spent, target_met=bool(rows) and all(r["target_met"] for r in rows))
    reason = sequential.stage_stop_reason(rows, spent, budget, len(st["stages"]),
                                          on_decided=st.get("stop", "decided") == "decided")
    last = st["stages"][-1]
    if reason is None:
        comps = sequential.observed_components(df, st["baseline"])
        comps["upper"] = scaled_upper(comps["rows"], target, by_mode, arms) or comps["upper"]
        rounds_in_last = int(last["new_rounds"]) + (int(st.get("warmup_rounds") or 0) if last["stage"] == 0 else 0)
        spr = float(last.get("measure_s") or 0) / max(1, rounds_in_last)
        new_layouts = int(last["layouts"]) - (int(st["stages"][-2]["layouts"]) if len(st["stages"]) > 1 else 0)
        bpl = float(last.get("build_s") or 0) / max(1, new_layouts)
        nxt = sequential.next_design(comps["upper"], int(st["layouts"]), int(st["rounds_per_layout"]), target,
                                     spr, bpl, (budget - spent) if budget else None, MAX_LAYOUTS,
                                     observed_half_width_pct=widest_at_target(rows, target))
        last["components_upper"] = {k: _num(v) for k, v in comps["upper"].items()}
        if nxt["new_rounds"] < max(1, sequential.MIN_STAGE_SHARE * int(st["rounds_planned"])):
            reason = "budget"     # what the budget left buys would not move the half-widths
        else:
            last["stop_reason"] = "continue"
            st["stages"].append({"stage": len(st["stages"]), "layouts": nxt["layouts"],
                                 "rounds_per_layout": nxt["rounds_per_layout"], "new_rounds": nxt["new_rounds"],
                                 "first_round": int(last["first_round"]) + int(last["new_rounds"]),
                                 "planned": nxt["planned"], "predicted_s": _num(nxt["predicted_s"]),
                                 "predicted_half_width_pct": _num(nxt["predicted_half_width_pct"]),
                                 "build_s": None, "measure_s": 0.0, "stop_reason": None})
            st.update(layouts=nxt["layouts"], rounds_per_layout=nxt["rounds_per_layout"],
                      rounds_planned=int(st["rounds_planned"]) + nxt["new_rounds"])
            log(f"target_ci: stage {len(st['stages']) - 1}: {nxt['layouts']} layouts x "
                f"{nxt['rounds_per_layout']} rounds ({nxt['new_rounds']} new rounds, about "
                f"{nxt['predicted_s']:.0f} s; {spent:.0f} s spent)")
            return st
    last["stop_reason"] = reason
    st["stop_reason"] = reason
    log(f"target_ci: {sequential.staged_text(st).split('. ')[0]}")
    return st


def widest_at_target(rows: list[dict], target: float) -> float | None:
    """The widest half-width of the judged rows, each scaled to ``target`` by (target / the row's
    own target), as ``scaled_upper`` scales the components; None when no judged row has one."""
    out = [float(r["half_width_pct"]) * float(target) / float(r["target_pct"])
           for r in rows if r.get("judged", True) and r.get("half_width_pct") is not None
           and float(r.get("target_pct") or 0) > 0]
    return max(out) if out else None


def scaled_upper(rows: list[dict], target: float, by_mode: dict | None, arms) -> dict[str, float]:
    """Per level, the largest upper bound over the judged rows, each scaled by (target / the
    row's own target)^2: a design whose half-width at ``target`` holds for these bounds gives
    every row its own target (a half-width grows with the square root of the variance).  {}
    when no judged row has components."""
    out: dict[str, float] = {}
    for r in rows:
        if not sequential.judged(r["candidate"], arms):
            continue
        factor = (float(target) / sequential.row_target(r["group"], target, by_mode)) ** 2
        for level, v in r["upper"].items():
            out[level] = max(out.get(level, -math.inf), float(v) * factor)
    return out


def finish(df: pd.DataFrame, stopping: dict[str, Any]) -> dict[str, Any]:
    """``stopping`` with rounds_run and target_met (every printed CI within the target)."""
    st = dict(stopping, rounds_run=rounds_run(df))
    try:
        st["target_met"] = bool(sequential.target_met(compare(_timing_rows(df), st["baseline"]), st["target_ci"],
                                                      st.get("target_ci_by_mode"), st.get("target_arms")))
    except StatsError as e:
        st.update(target_met=False, target_note=f"not analysed: {e}")
    return st
