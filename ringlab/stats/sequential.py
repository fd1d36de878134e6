"""Stop on a target CI: the staged design the runner uses for ``-p target_ci PCT -p budget
SECONDS`` (``review_rows``, ``stage_stop_reason``, ``observed_components``, ``next_design``,
``stage_schedule``, ``staged_text``: see the section "the staged design" below and
ringlab/run/stopping.py), the stopping rules a finished run is judged by (``target_met``) and
the sentences that describe a stop.  The two-stage (Stein) design over rounds it replaced is
``ringlab.stats.stein``.
"""
from __future__ import annotations

import math

import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats.contract import EXACT_NOTE, verdict_ci
from ringlab.stats.rounds import comparison_columns
from ringlab.stats.summary import measurements


def ci_half_width_pct(row) -> float:
    """Half the width of a compare() row's printed CI, in percent (NaN when it has none)."""
    lo, hi = row["ci_low_pct"], row["ci_high_pct"]
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan
    return (hi - lo) / 2


def row_target(group: str, target_ci_pct: float, by_mode: dict | None = None) -> float:
    """The half-width asked of one compare() row: its mode's (``by_mode``, keyed by the mode as
    text, from the row's ``mode=M`` group) where one is given, else ``target_ci_pct``."""
    if by_mode:
        for part in str(group).split(","):
            key, _, value = part.partition("=")
            if key == "mode" and value in {str(m) for m in by_mode}:
                return float({str(m): t for m, t in by_mode.items()}[value])
    return float(target_ci_pct)


def judged(candidate: str, arms) -> bool:
    """Whether the target and the stop judge the rows of ``candidate``: every candidate when
    ``arms`` is empty, else those it names (the others are measured alongside)."""
    return not arms or str(candidate) in {str(a) for a in arms}


def target_met(compare_result: pd.DataFrame, target_ci_pct: float, by_mode: dict | None = None,
               arms=None) -> bool:
    """True when every judged comparison's printed CI half-width is at most its target
    (``row_target``; ``judged``).

    Exact (deterministic) rows count as met; a row without a CI does not."""
    if compare_result is None or not len(compare_result):
        return False
    for _, r in compare_result.iterrows():
        if r.get("design") == "exact" or r.get("note") == EXACT_NOTE or not judged(r.get("candidate"), arms):
            continue
        hw = ci_half_width_pct(r)
        if not (math.isfinite(hw) and hw <= row_target(r.get("group"), target_ci_pct, by_mode)):
            return False
    return True


def stopping_text(stopping: dict | None) -> str:
    """One or two sentences for summary.md from env.json's ``stopping`` (see ringlab/run/stopping.py):
    which decided the number of rounds (the target, the budget, or a pilot that already met
    the target) and whether every CI met the target at the end.  "" when the run had no target."""
    if not stopping or not stopping.get("target_ci"):
        return ""
    if stopping.get("stages") is not None:
        return staged_text(stopping)
    pct = f"±{float(stopping['target_ci']):g}%"
    pilot, planned, ran = stopping.get("pilot_rounds"), stopping.get("rounds_planned"), stopping.get("rounds_run")
    met = stopping.get("target_met")
    end = ("" if met is None else " Every CI reached the target." if met
           else " At the end not every CI reached it; the CIs are as printed.")
    if planned is None:
        return (f"Stop on a target ({pct} 95% CI half-width): the {pilot}-round pilot did not finish, "
                "so the number of rounds is not decided yet.")
    if ran is not None and ran < planned:
        return (f"Stop on a target ({pct}): only {ran} of {planned} planned rounds ran (the run was "
                "interrupted; `ringlab run ... --resume` finishes it), so the target is not judged.")
    reason = stopping.get("stop_reason")
    if reason == "pilot met target":
        return f"Stop on a target ({pct} 95% CI half-width): the {pilot}-round pilot already met it, so no rounds were added." + end
    if reason == "budget":
        budget = stopping.get("budget_s")
        return (f"Stopped by the budget: reaching {pct} needed {stopping.get('rounds_for_target')} rounds, "
                f"the budget of {float(budget or 0):g} s paid for {planned} ({pilot} of them the pilot), "
                "and all of them ran." + (" Every CI reached the target anyway." if met else
                                          " The CIs are wider than the target."))
    if reason == "target":
        text = (f"Stopped on the target: after a {pilot}-round pilot the two-stage plan asked for {planned} "
                f"rounds to bring every 95% CI half-width to {pct}, and all of them ran.")
        return text + (" Every CI reached the target." if met else
                       " But not every CI reached it (the pilot underestimated the spread); the CIs are as printed."
                       if met is False else "")
    return (f"Stop on a target ({pct}): the pilot could not be analysed ({stopping.get('error') or reason}), "
            f"so no rounds were added.")


# --- the staged design: plan every level, re-plan from the run's own data -----------------------
#
# ``-p target_ci PCT`` (with ``-p budget S``) runs in stages.  Stage 0 (the pilot) is the level
# planner's design (``LevelCalibration.plan``) for the host's per-mode calibration, or CAUTIOUS where
# the host has none; each later stage adds layouts and/or rounds per layout.  After every stage the
# variance components are re-estimated from the run's own paired log ratios
# (``ringlab.stats.components`` through ``levels.pair_differences``), their upper bounds re-planned
# (``allocation.allocate``), and the run stops at the first of: every row reached its target
# half-width ("target"), every row decided ("decided": faster/slower, or its CI within ±X with X the
# target, stated "no change larger than X%"), the budget spent ("budget"; builds count), or
# ``MAX_STAGES`` stages ("stages").  Looking after each stage is a sequential test.  "Decided" is
# judged at alpha / MAX_STAGES (Bonferroni over the looks), so a stop on a decision is a false one
# with probability at most alpha; the target and the budget do not depend on the sign of the
# estimate.  The verdict summary.md prints is the fixed-design verdict (at alpha) of the data that
# ran: after a stop on the target or the budget its A/A rate can exceed alpha by what the earlier
# looks' strict tests spent (at most alpha again).

#: the most stages (looks) one run makes, the pilot included
MAX_STAGES = 6
#: the share of the budget the pilot may spend, so that re-planning has room
PILOT_SHARE = 0.4
#: the most a stage multiplies the layouts or the rounds per layout by
GROWTH = 4
#: a stage is planned to cost at most the budget left divided by this: its builds and rounds run
#: a little dearer than the last stage's (a partly filled binary of layout copies is rebuilt whole)
BUDGET_MARGIN = 1.2
#: the smallest stage worth its review, as a share of the rounds before it: 10% more rounds
#: narrow a half-width by about 5% of itself
MIN_STAGE_SHARE = 0.1
#: the fewest rounds per layout of a stage design (the process level needs two to be estimated)
MIN_ROUNDS_PER_LAYOUT = 2


def row_decision(row, resolution_pct: float) -> str | None:
    """What one compare() row settles: "faster" / "slower" (its verdict), "no change larger than
    X%" (the CI its verdict rests on, Holm's, lies within ±X, X = ``resolution_pct``), else None."""
    verdict = str(row.get("verdict") or "")
    if verdict in ("faster", "slower"):
        return verdict
    lo, hi = verdict_ci(row)
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        return None
    if math.isfinite(lo) and math.isfinite(hi) and -resolution_pct <= lo and hi <= resolution_pct:
        return f"no change larger than {resolution_pct:g}%"
    return None


def review_rows(compare_result: pd.DataFrame, target_ci_pct: float,
                strict: pd.DataFrame | None = None, by_mode: dict | None = None, arms=None) -> list[dict]:
    """Per compare() row: group, candidate, half_width_pct, target_pct (``row_target``),
    target_met (half-width <= target_pct, exact rows count as met), decided (``row_decision`` at
    target_pct, of the same row of ``strict`` when given: the comparison at alpha / MAX_STAGES, so
    that a stop on "decided" at any of the looks is Bonferroni-bounded by alpha), judged (whether
    the stop judges the row: ``judged``)."""
    out = []
    frame = compare_result if compare_result is not None else pd.DataFrame()
    alt = {}
    if strict is not None:
        alt = {(str(r.get("group")), str(r.get("candidate"))): r for _, r in strict.iterrows()}
    for _, r in frame.iterrows():
        exact = r.get("design") == "exact" or r.get("note") == EXACT_NOTE
        hw = ci_half_width_pct(r)
        key = (str(r.get("group")), str(r.get("candidate")))
        at = alt.get(key, r) if strict is not None else r
        want = row_target(key[0], target_ci_pct, by_mode)
        out.append({"group": key[0], "candidate": key[1],
                    "half_width_pct": float(hw) if math.isfinite(hw) else None, "target_pct": want,
                    "target_met": bool(exact or (math.isfinite(hw) and hw <= want)),
                    "decided": "exact" if exact else (row_decision(at, want)
                                                      if key in alt or strict is None else None),
                    "judged": judged(key[1], arms)})
    return out


def stage_stop_reason(rows: list[dict], spent_s: float, budget_s: float | None, stages: int,
                      on_decided: bool = True) -> str | None:
    """Why the run stops after a stage ("target", "decided", "budget", "stages"), or None to go on.
    ``on_decided`` false: a run that asks for its target half-width goes on past decided rows.
    Rows the stop does not judge (``judged`` false) do not count."""
    rows = [r for r in rows if r.get("judged", True)]
    if rows and all(r["target_met"] for r in rows):
        return "target"
    if on_decided and rows and all(r["decided"] for r in rows):
        return "decided"
    if budget_s is not None and spent_s >= budget_s:
        return "budget"
    if stages >= MAX_STAGES:
        return "stages"
    return None


def observed_components(df: pd.DataFrame, baseline: str, metric: str = schema.PRIMARY_METRIC, by=None,
                        confidence: float = 0.9) -> dict:
    """The variance components (estimate and upper bound per level) of the run's own paired log
    ratios, per (configuration, candidate), and their maxima over the rows (what re-planning uses).
    Returns ``{"rows": [{"group", "candidate", "variance", "upper", "df"}], "upper": {level: max},
    "variance": {level: max}}``; a level no row could estimate is infinite in ``upper``."""
    from ringlab.stats.components import nested_components
    from ringlab.stats.levels import LEVELS, pair_differences
    meas, _ = measurements(df, metric)
    meas["variant"] = meas["variant"].astype(str)
    cols = comparison_columns(meas, by)
    rows = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        for cand in sorted(set(sub["variant"]) - {str(baseline)}):
            try:
                d = pair_differences(sub, str(baseline), cand, metric)
            except Exception:   # noqa: BLE001 - a row without pairs says nothing about the levels
                continue
            if d["layout"].nunique() < 2:
                continue
            comps = dict(zip(LEVELS, nested_components(d, "d", ["layout", "round"], confidence)))
            rows.append({"group": label, "candidate": cand,
                         "variance": {n: _finite_or_nan(c.variance) for n, c in comps.items()},
                         "upper": {n: (c.upper if math.isfinite(c.upper) else math.inf) for n, c in comps.items()},
                         "df": {n: int(c.df) for n, c in comps.items()}})

    def worst(field):
        return {n: max([r[field][n] for r in rows if math.isfinite(r[field][n]) or field == "upper"] or
                       [math.inf if field == "upper" else math.nan]) for n in LEVELS}
    return {"rows": rows, "upper": worst("upper"), "variance": worst("variance")}


def _finite_or_nan(v) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def next_design(upper: dict, layouts: int, rounds_per_layout: int, target_ci_pct: float,
                seconds_per_round: float, build_s_per_layout: float, budget_left_s: float | None,
                max_layouts: int, level: float = 0.95, observed_half_width_pct: float | None = None) -> dict:
    """The next stage's total design (layouts K', rounds per layout P', K' >= K, P' >= P) from the
    upper bounds of the run's own components and its own costs: the allocation for the target,
    cut to what ``budget_left_s`` pays for (the narrowest predicted half-width it affords).  The
    iteration level is folded into the process level (``repeats`` stays as the pilot chose it).

    ``observed_half_width_pct``, the widest half-width the run's own compare() printed (at the
    target's scale), keeps the plan honest where the components' model predicts a narrower
    interval at today's design than the verdict's estimator gave (heavy tails, a slow state): both
    components are scaled up by (observed / predicted)^2 before planning, so the next stage is
    sized for the interval the verdict will print, not for the model's.

    Returns ``{"layouts", "rounds_per_layout", "new_rounds", "predicted_s",
    "predicted_half_width_pct", "planned": the allocation's basis}``; new_rounds 0 when the budget
    pays for nothing more."""
    from ringlab.stats.allocation import Level, allocate, best_repeats
    s_l = upper.get("layout", math.inf)
    s_p = upper.get("process", math.inf)
    s_i = upper.get("iteration", 0.0)
    s_p = s_p + (s_i if math.isfinite(s_i) else 0.0)   # one process = one round's value (repeats averaged)
    k, p = int(layouts), int(rounds_per_layout)
    inflation = model_inflation(s_l, s_p, k, p, observed_half_width_pct, level)
    s_l, s_p = s_l * inflation, s_p * inflation
    spr = seconds_per_round if math.isfinite(seconds_per_round) and seconds_per_round > 0 else 1.0
    cl = build_s_per_layout if math.isfinite(build_s_per_layout) and build_s_per_layout >= 0 else 0.0
    basis = "the components are not all estimable yet: one more round per layout and a quarter more layouts"
    if math.isfinite(s_l) and math.isfinite(s_p):
        levels = (Level("layout", s_l, cl), Level("process", s_p, spr), Level("iteration", 0.0, 0.0))
        plan = allocate(*levels, target_half_width=math.log1p(target_ci_pct / 100), level=level,
                        min_layouts=k, max_layouts=max_layouts)
        rounds = plan.rounds_per_layout
        if plan.limited_by != "target" and plan.layouts > k * GROWTH:
            # the target lies beyond this stage's layouts: more rounds would only stand in for the
            # layouts the next stage adds, so the rounds stay at the per-layout optimum
            rounds = min(rounds, best_repeats(*levels)[0])
        k2, p2, basis = max(k, plan.layouts), max(p, rounds), plan.basis
    else:
        k2, p2 = min(max_layouts, max(k + 1, math.ceil(k * 1.25))), p + 1
    # a stage grows each level at most GROWTH-fold: a component estimated from few units (the layout
    # level after a small pilot) is measured again before the design bets everything on it
    k2, p2 = min(k2, max_layouts, k * GROWTH), min(p2, p * GROWTH)
    if (k2, p2) == (k, p):      # the bounds say the design suffices and the data say it does not
        k2, p2 = shortfall_design(k, p, max_layouts, target_ci_pct, observed_half_width_pct)

    def cost(kk, pp):
        return (kk - k) * cl + ((kk - k) * pp + k * (pp - p)) * spr

    def half_width(kk, pp):
        var = (s_l + s_p / pp) if math.isfinite(s_l) and math.isfinite(s_p) else math.nan
        return (sst.t.ppf(0.5 + level / 2, kk - 1) * math.sqrt(var / kk)) if kk > 1 and math.isfinite(var) else math.nan
    if budget_left_s is not None and cost(k2, p2) > budget_left_s / BUDGET_MARGIN:
        k2, p2 = _affordable(k, p, k2, p2, cost, half_width, budget_left_s / BUDGET_MARGIN)
    new = (k2 - k) * p2 + k * (p2 - p)
    hw = half_width(k2, p2)
    return {"layouts": int(k2), "rounds_per_layout": int(p2), "new_rounds": int(new),
            "predicted_s": float(cost(k2, p2)),
            "predicted_half_width_pct": float(math.expm1(hw) * 100) if math.isfinite(hw) else None,
            "planned": basis}


def model_inflation(s_l: float, s_p: float, layouts: int, rounds_per_layout: int,
                    observed_half_width_pct: float | None, level: float = 0.95) -> float:
    """(observed / predicted)^2 where the run's printed half-width is wider than the components
    predict at its design (layouts x rounds per layout), else 1."""
    k, p = int(layouts), int(rounds_per_layout)
    if observed_half_width_pct is None or not (math.isfinite(s_l) and math.isfinite(s_p)) or k < 2 or p < 1:
        return 1.0
    obs = math.log1p(float(observed_half_width_pct) / 100)
    pred = sst.t.ppf(0.5 + level / 2, k - 1) * math.sqrt((s_l + s_p / p) / k)
    if not (math.isfinite(obs) and pred > 0 and obs > pred):
        return 1.0
    return (obs / pred) ** 2


def shortfall_design(layouts: int, rounds_per_layout: int, max_layouts: int, target_ci_pct: float,
                     observed_half_width_pct: float | None) -> tuple[int, int]:
    """The design past (layouts, rounds per layout) when the plan says it suffices and the run's
    own interval says it does not: the data grown by (observed / target)^2 (a half-width narrows
    with the square root of the data), in layouts below the cap and in rounds per layout at it,
    each at most ``GROWTH``-fold and at least one step."""
    k, p = int(layouts), int(rounds_per_layout)
    factor = 1.25
    if observed_half_width_pct is not None and math.isfinite(observed_half_width_pct) and target_ci_pct > 0:
        factor = min(float(GROWTH), max(factor, (float(observed_half_width_pct) / float(target_ci_pct)) ** 2))
    if k < max_layouts:
        return min(max_layouts, max(k + 1, math.ceil(k * factor))), p
    return k, min(p * GROWTH, max(p + 1, math.ceil(p * factor)))


def _affordable(k: int, p: int, k_max: int, p_max: int, cost, half_width, budget_s: float) -> tuple[int, int]:
    """Within ``budget_s``: the (layouts, rounds per layout) between (k, p) and (k_max, p_max) with
    the narrowest predicted half-width (the fewest new rounds among equals).  Where the layouts'
    spread dominates, the budget buys layouts before rounds, and the other way round."""
    best, best_score = (k, p), math.inf
    for kk in range(k, k_max + 1):
        if cost(kk, p) > budget_s:
            break
        pp = p
        while pp < p_max and cost(kk, pp + 1) <= budget_s:
            pp += 1
        hw = half_width(kk, pp)
        # components not estimable yet: the most data the budget buys
        score = hw if math.isfinite(hw) else 1e9 - kk * pp
        if score < best_score - 1e-12:
            best, best_score = (kk, pp), score
    return best


def stage_schedule(seed: int, stage: int, layouts_before: int, rounds_before: int, layouts: int,
                   rounds_per_layout: int) -> list[int]:
    """The layout of each new round of a stage that takes the design from layouts_before x
    rounds_before to layouts x rounds_per_layout: sweeps over the layouts that still need rounds,
    each sweep in a seeded order (from the run's seed, the stage and the sweep).  Layout k is the
    same build in every stage, so a stage extends the design and never restarts it."""
    import hashlib
    import random
    need = [rounds_per_layout - (rounds_before if k < layouts_before else 0) for k in range(layouts)]
    out: list[int] = []
    for sweep in range(max(need, default=0)):
        digest = hashlib.sha256(f"ringlab-stage\0{int(seed)}\0{int(stage)}\0{sweep}".encode()).digest()
        order = list(range(layouts))
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
        out.extend(k for k in order if need[k] > sweep)
    return out


_STOPPED = {"target": "stopped: target reached", "decided": "stopped: all rows decided"}


def target_text(stopping: dict) -> str:
    """The target as summary.md states it: "±0.5%", or "±0.5% (mode 1: ±1%)" where a mode has its
    own."""
    pct = f"±{float(stopping['target_ci']):g}%"
    own = {str(m): float(t) for m, t in (stopping.get("target_ci_by_mode") or {}).items()
           if float(t) != float(stopping["target_ci"])}
    if own:
        pct += " (" + ", ".join(f"mode {m}: ±{t:g}%" for m, t in sorted(own.items())) + ")"
    return pct


def _judged_text(stopping: dict) -> str:
    """" for reorder against batch" where only some arms are judged, else ""."""
    arms = stopping.get("target_arms") or []
    return f" for {', '.join(map(str, arms))} against {stopping.get('baseline')}" if arms else ""


def staged_text(stopping: dict) -> str:
    """summary.md's lines for a staged run (env.json ``stopping`` with ``stages``)."""
    pct = target_text(stopping)
    stages = stopping.get("stages") or []
    reason = stopping.get("stop_reason")
    spent, budget = stopping.get("spent_s"), stopping.get("budget_s")
    if reason in _STOPPED:
        head = _STOPPED[reason]
    elif reason == "budget":
        head = f"stopped: budget spent ({float(spent or 0):.0f} s of {float(budget or 0):g})"
    elif reason == "stages":
        head = f"stopped: {MAX_STAGES} stages ran, the most a run makes"
    elif reason == "no plan":
        head = f"stopped: the data could not be analysed ({stopping.get('error')})"
    else:
        return (f"Staged run for a {pct} 95% CI half-width: {len(stages)} stage(s) so far, not finished "
                "(`ringlab run ... --resume` goes on).")
    last = stages[-1] if stages else {}
    text = (f"{head}. Target {pct} 95% CI half-width" + _judged_text(stopping)
            + (f" within {float(budget):g} s" if budget else "")
            + f"; {len(stages)} stage(s), ending at {last.get('layouts')} layouts x "
              f"{last.get('rounds_per_layout')} rounds each, {float(spent or 0):.0f} s builds included. "
            + f"The pilot was planned from {stopping.get('calibration') or 'the level calibration'}.")
    said = [f"{r['candidate']} ({r['group']}): {r['decided']}" for r in stopping.get("rows") or []
            if r.get("decided") and r["decided"] != "exact"]
    return text + (" " + "; ".join(said) + "." if said else "") + _short_text(stopping)


def _short_text(stopping: dict) -> str:
    """" Not reached: ..." for a run that stopped with rows short of their target: how far each
    got, why (the levels' measured SDs, upper bounds, from the last stage) and what the last
    stage's plan says would reach it; "" when every judged row reached its target or was decided."""
    short = [r for r in stopping.get("rows") or [] if r.get("judged", True) and r.get("target_met") is False
             and not r.get("decided")]
    if not short or stopping.get("stop_reason") in _STOPPED:
        return ""
    last = (stopping.get("stages") or [{}])[-1]
    got = "; ".join(f"{r['candidate']} {_mode_of(r['group'])}±{float(r['half_width_pct']):.2f}% of "
                    f"±{float(r['target_pct']):g}%" for r in short if _num_ok(r.get("half_width_pct")))
    comp = last.get("components_upper") or {}
    sds = ", ".join(f"{n} {math.sqrt(v) * 100:.1f}%" for n, v in comp.items() if _num_ok(v) and v > 0)
    text = f" Not reached: {got}."
    if sds:
        text += f" Why: this run measured SDs of the paired log ratio of {sds} (upper bounds, per unit of each level)."
    if last.get("planned"):
        text += f" What would reach it, planned from them: {last['planned']}."
    return text


def _mode_of(group: str) -> str:
    parts = dict(p.split("=", 1) for p in str(group).split(",") if "=" in p)
    return f"mode {parts['mode']} " if "mode" in parts else ""


def _num_ok(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
