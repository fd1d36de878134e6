"""The staged design of a run that stops when its question is answered (``-p target_ci PCT``,
``-p budget SECONDS``): from a calibration and the run's own data to the next stage, and the rules
a run stops by.  ``ringlab.run.stopping`` runs it (it loads the calibration, measures, times the
stages and writes the record); this module plans and judges and opens no file.  The record it
reads and returns is ``ringlab.stats.stopping_record.Stopping`` (env.json's ``stopping``).

Read top to bottom:

1. **Policy** (``Policy``, ``POLICY``): every number the design is tuned by, one documented field each.
2. **The pilot** (stage 0, ``pilot_design``): the level planner's design (``LevelCalibration.plan``,
   ``ringlab.stats.plan``) for each measured mode's calibration (the host's, or ``CAUTIOUS``
   where it has none), within ``pilot_share`` of the budget shared over the modes, configurations
   and arm pairs a round measures; the largest over the modes.  A trial length left unset is
   planned per mode (``planned_counts``); the pilot's layouts are cut to the builds the run timed
   (``pilot_layouts_for_builds``) and, once its warm-up rounds are timed, to what its rounds cost
   here (``pilot_for_round_time``: within ``pilot_share`` of the budget left, whatever the
   calibration predicted).  A host without a calibration sizes its pilot from the seconds the run
   timed itself, its first builds and its warm-up rounds (``pilot_for_measured_costs``), not from
   the cautious defaults' costs.
3. **The review after each stage** (``review``): the run's own compare() rows (``review_rows``)
   and the stop (``stage_stop_reason``): every judged row reached its target half-width
   ("target"), every row decided ("decided": faster/slower, or its CI within +-X with X the
   target, stated "no change larger than X%"), the budget spent ("budget"; builds count, and a
   budget whose rest buys less than ``min_stage_share`` of the rounds so far counts as spent), or
   ``max_stages`` stages ("stages").  Looking after each stage is a sequential test: "decided" is
   judged at the interim level (``interim_alpha``: 0.001 a look, Haybittle-Peto; the record counts
   the looks, ``Stopping.looks``), and the verdict summary.md prints is the fixed-design verdict
   (at alpha) of the data that ran, so the run's error over all its looks is at most alpha plus
   0.001 a look before the last; the target and the budget do not depend on the sign of the
   estimate.  (Interim looks at alpha / max_stages each would make the A/A rate over all looks
   6.2% in ``ringlab bench stopping``: each early stop on a decision adds to the final verdict's
   5%.)  A run whose wall clock passes its
   budget mid-stage stops at the next round boundary and is reviewed as stopped on "budget"
   (``out_of_time``); a stop short of the target says what would reach it (``reach_design`` of
   the fit's components at the costs measured) and which level's variance stopped it
   (``dominant_level``).
4. **The next stage** (``next_design``): the variance components of the layouts fit the printed
   CIs come from (``fit_components``: sigma_L^2 and sigma_R^2 of ``ringlab.stats.fit``), so the
   plan and the interval share one variance model; the upper bounds of the nested components
   (``observed_components``) only where the fit has none (one round per layout).  Planned
   again (``plan.allocate``) at the run's own costs, grown at most ``growth``-fold a level and
   cut to what the budget left pays for: a ``StageDesign``.
5. **The schedule** (``stage_schedule``): which layout each new round measures; layout k is the
   same build in every stage, so a stage extends the design and never restarts it.

The rule a finished run is judged by is ``target_met``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.catalog import StopReason
from ringlab.stats.compare import compare_alphas
from ringlab.stats.contract import EXACT_NOTE
from ringlab.stats.decide import row_decision
from ringlab.stats.calibration import LevelCalibration
from ringlab.stats.rounds import comparison_columns
from ringlab.stats.stopping_record import RowRecord, StageRecord, Stopping, json_number
from ringlab.stats.summary import StatsError, measurements


# --- 1. policy ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """The numbers the staged design is tuned by."""
    #: the most stages (looks) one run makes, the pilot included
    max_stages: int = 6
    #: the share of the budget the pilot may spend, so that re-planning has room
    pilot_share: float = 0.4
    #: the share of the pilot's budget its builds may spend (one build serves every mode)
    pilot_build_share: float = 0.5
    #: the fewest layouts of a pilot (a t interval over fewer layout pairs is too wide to plan on)
    pilot_min_layouts: int = 4
    #: the most rounds per layout of a pilot without a budget: it is re-planned after it anyway
    unbudgeted_rounds_per_layout: int = 8
    #: the pilot's first layouts, built and timed before the pilot's size is fixed
    probe_layouts: int = 4
    #: the fewest rounds per layout of a stage design (the process level needs two to be estimated)
    min_rounds_per_layout: int = 2
    #: the most a stage multiplies the layouts or the rounds per layout by
    growth: int = 4
    #: a stage is planned to cost at most the budget left divided by this: its builds and rounds run
    #: a little dearer than the last stage's (a partly filled binary of layout copies is rebuilt whole)
    budget_margin: float = 1.2
    #: the smallest stage worth its review, as a share of the rounds before it: 10% more rounds
    #: narrow a half-width by about 5% of itself
    min_stage_share: float = 0.1
    #: the level of the verdict a run prints, and the most repeated looks that are each a final
    #: answer spend together (``look_alpha``)
    alpha: float = 0.05
    #: the level of each interim look of a staged run, whose "decided" only stops it early
    #: (``interim_alpha``: Haybittle-Peto)
    interim_alpha: float = 0.001
    #: the confidence level of the half-widths planned and predicted
    level: float = 0.95


#: the policy a run stops by
POLICY = Policy()


def look_alpha(look: int, max_looks: int, alpha: float = POLICY.alpha) -> float:
    """The level of the ``look``-th look (1-based) at one question asked of growing data, of at
    most ``max_looks``, where every look is itself the answer (bisect's re-runs of a step; a
    staged run's interim looks, which only stop it early, take ``interim_alpha``).  Bonferroni
    spending: alpha / max_looks at each look, alpha x look / max_looks spent after ``look``, so a
    call at any of the looks is a false one with probability at most alpha whatever the looks'
    correlation; 0 past ``max_looks``: the error is spent and a
    further look calls nothing.  Equal shares rather than a group-sequential boundary (O'Brien-
    Fleming): the looks test rank statistics whose joint law the boundary's normal model does not
    give, and the number of looks a run takes depends on its costs; no library of the field (scipy,
    statsmodels) provides a spending function, hence this one line."""
    look, max_looks = int(look), int(max_looks)
    if max_looks < 1 or look < 1:
        raise ValueError(f"look {look} of {max_looks}: allowed: 1 <= look, 1 <= max_looks")
    return float(alpha) / max_looks if look <= max_looks else 0.0


def interim_alpha(look: int, max_looks: int, level: float = POLICY.interim_alpha) -> float:
    """The level of a staged run's ``look``-th review (1-based), of at most ``max_looks``: a stop on
    "decided" there ends the run early, and the run's verdict is then the fixed-design verdict at
    alpha of the data that ran.  Haybittle-Peto: every interim look at the small fixed ``level``
    (0.001), so a run's error over all its looks is at most alpha + (looks - 1) x ``level`` (5.5%
    with six stages; in ``ringlab bench stopping`` the final verdict's 5%), and an effect large
    against its noise still stops the run early; 0 past ``max_looks``.  Where each look is itself
    the answer (bisect's re-runs of a step, a follow-up look) the looks split alpha
    (``look_alpha``)."""
    look, max_looks = int(look), int(max_looks)
    if max_looks < 1 or look < 1:
        raise ValueError(f"look {look} of {max_looks}: allowed: 1 <= look, 1 <= max_looks")
    return float(level) if look <= max_looks else 0.0


# --- 2. the pilot ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PilotDesign:
    """Stage 0: layouts x rounds per layout x ``repeats`` iterations, where each mode's plan came
    from (``calibration_by_mode``, and as one text) and the plans' bases; with the trial length
    planned (``count`` unset): each mode's ops per timed loop and the longest of them."""
    layouts: int
    rounds_per_layout: int
    repeats: int
    calibration: str
    calibration_by_mode: dict[str, str]
    planned: str
    count: int | None = None
    count_by_mode: dict[str, int] | None = None


def pilot_design(levels: dict[str, LevelCalibration], targets: dict[str, float], *, arms: int,
                 configurations: int, budget_s: float | None, max_layouts: int, layout_s: float | None = None,
                 plan_count: bool = False, policy: Policy = POLICY) -> PilotDesign:
    """Stage 0 for the modes of ``levels`` ({mode: its calibration}, in the run's order) at their
    ``targets`` ({mode: half-width %}): the level planner's design for every mode, the largest over
    them, each mode's plan within its share of the pilot's budget divided over its
    ``configurations`` and arm pairs.  ``layout_s``, the seconds one layout of every arm took to
    build here (timed by the run), stands for the calibration's build cost: builds cost what this
    checkout's build folder makes them (its kept objects, ringlab.build.shared_objects), and their
    cost sets how many rounds a layout is worth.  ``plan_count``: the trial length is planned too."""
    pair_s = 2 * float(layout_s) / arms if layout_s is not None and layout_s >= 0 else None
    modes = list(levels)
    # a mode's plan prices one pair of arms in one configuration; a round measures every arm in
    # every configuration of every mode
    share = (budget_s * policy.pilot_share / (len(modes) * configurations * max(1.0, arms / 2))
             if budget_s else None)
    k, p, n_i, by_mode, bases = policy.pilot_min_layouts, policy.min_rounds_per_layout, 1, {}, []
    counts = planned_counts(levels, targets, budget_s, max_layouts) if plan_count else {}
    for m, cal in levels.items():
        cal = cal.at_count(counts[m]) if counts else cal
        if pair_s is not None:
            cal = dataclasses.replace(cal, cost_s=dict(cal.cost_s, layout=pair_s))
        plan = cal.plan(targets[m], budget_s=share, max_layouts=max_layouts)
        k, p, n_i = max(k, plan.layouts), max(p, plan.rounds_per_layout), max(n_i, plan.iterations)
        by_mode[m] = cal.source
        bases.append(f"mode {m}: {plan.basis}")
    if budget_s is None:   # no budget: a short pilot, re-planned after it
        p = min(p, policy.unbudgeted_rounds_per_layout)
    else:                  # one build serves every mode: the pilot's builds get their share of the pilot's
        per_build = pair_s / 2 if pair_s is not None else \
            max(float(cal.cost_s.get("layout") or 0) / 2 for cal in levels.values())
        if per_build > 0:
            room = budget_s * policy.pilot_share * policy.pilot_build_share
            k = max(policy.pilot_min_layouts, min(k, int(room // (arms * per_build))))
    k = min(k, max_layouts)
    return PilotDesign(layouts=int(k), rounds_per_layout=int(p), repeats=int(n_i),
                       calibration="; ".join(f"mode {m}: {src}" for m, src in by_mode.items()),
                       calibration_by_mode=by_mode, planned="; ".join(bases),
                       count=max(counts.values()) if counts else None, count_by_mode=counts or None)


def planned_counts(levels: dict[str, LevelCalibration], targets: dict[str, float], budget_s: float | None,
                   max_layouts: int) -> dict[str, int]:
    """The ops per timed loop of a staged run whose ``count`` is unset, per mode: the unbiased
    trial length whose plan is narrowest (``best_count``; the count the calibration measured at
    where it has no trial-length probe).  Each mode's trials run at its own: a round costs what
    its modes' shortest unbiased trials cost."""
    return {m: int(best_count(cal, targets.get(m), budget_s, max_layouts)) for m, cal in levels.items()}


def best_count(cal: LevelCalibration, target_pct: float | None, budget_s: float | None, max_layouts: int) -> int:
    """Of the calibration's unbiased trial lengths, the one whose plan is narrowest within the
    budget (the cheapest that reaches the target, where one does): a shorter trial buys more
    processes per second and may be noisier, and the probe says by how much."""
    counts = cal.unbiased_counts()
    if len(counts) == 1 or not (target_pct or budget_s):
        return counts[-1]

    def key(c):
        plan = cal.at_count(c).plan(target_pct, budget_s=budget_s, max_layouts=max_layouts)
        if target_pct and plan.half_width <= math.log1p(target_pct / 100):
            return (0.0, plan.seconds)
        return (1.0, plan.half_width)
    return min(counts, key=key)


def pilot_layouts_for_builds(layouts: int, built: int, seconds: float, budget_s: float,
                             policy: Policy = POLICY) -> int:
    """The pilot's layouts once its first ``built`` layouts took ``seconds`` to build: as many as
    fit the builds' share of the pilot's budget at that pace, at least ``pilot_min_layouts`` (and
    those built), at most ``layouts``."""
    per_layout = seconds / max(1, built)
    room = float(budget_s) * policy.pilot_share * policy.pilot_build_share
    k = int(layouts)
    if per_layout > 0:
        k = max(built, policy.pilot_min_layouts, min(k, int(room // per_layout)))
    return k


def pilot_for_round_time(layouts: int, rounds_per_layout: int, seconds_per_round: float,
                         budget_left_s: float | None, policy: Policy = POLICY) -> tuple[int, int]:
    """The pilot's (layouts, rounds per layout) once the run has timed its own rounds (its warm-up
    rounds, ``seconds_per_round`` each) with ``budget_left_s`` of its budget left: the planned
    design where its rounds fit ``pilot_share`` of what is left, else its layouts cut (the rounds
    per layout kept) to that share, at least ``pilot_min_layouts``; where even that does not fit
    all that is left, as many rounds as the rest pays for (at least 2 layouts x 1 round).  Never
    larger than planned: the pilot's planned time is bounded by the budget left whatever the
    calibration (or its absence) predicted."""
    k, p = int(layouts), int(rounds_per_layout)
    if budget_left_s is None or not (math.isfinite(seconds_per_round) and seconds_per_round > 0):
        return k, p
    left = max(0.0, float(budget_left_s))
    fit = int(policy.pilot_share * left // seconds_per_round)
    if k * p <= fit:
        return k, p
    k = min(k, max(policy.pilot_min_layouts, fit // max(1, p)))
    whole = int(left // seconds_per_round)
    if k * p > whole:          # the smallest pilot costs more than the whole rest
        k = min(k, max(2, whole // max(1, p)))
        if k * p > whole:
            p = max(1, min(p, whole // k))
    return int(k), int(p)


def pilot_for_measured_costs(layouts: int, seconds_per_round: float, build_s_per_layout: float | None,
                             budget_left_s: float | None, policy: Policy = POLICY) -> tuple[int, int]:
    """The pilot of a host without a calibration, sized from what the run timed itself: its
    ``seconds_per_round`` (the warm-up rounds) and ``build_s_per_layout`` (its first builds, one
    layout of every arm), within ``pilot_share`` of ``budget_left_s``.  Nothing says yet which
    level dominates, so the rounds per layout are the cost-optimal ones for equal layout and round
    variances (``plan.best_repeats``: sqrt(build / round seconds)), at least
    ``min_rounds_per_layout``; the layouts as many as the share then pays for, at most ``layouts``
    (the ones built for it), at least ``pilot_min_layouts``; with the layouts at that cap the
    share buys more rounds per layout instead.  Where even the smallest pilot costs more than the
    whole rest, as many rounds as the rest pays for (``pilot_for_round_time``)."""
    from ringlab.stats.plan import Level, best_repeats
    k_max = int(layouts)
    if budget_left_s is None or not (math.isfinite(seconds_per_round) and seconds_per_round > 0):
        return k_max, policy.min_rounds_per_layout
    cl = float(build_s_per_layout) if build_s_per_layout is not None and build_s_per_layout >= 0 else 0.0
    p = max(policy.min_rounds_per_layout,
            best_repeats(Level("layout", 1.0, cl), Level("process", 1.0, seconds_per_round),
                         Level("iteration", 0.0, 0.0))[0])
    fit = int(policy.pilot_share * max(0.0, float(budget_left_s)) // seconds_per_round)
    k = min(k_max, max(policy.pilot_min_layouts, fit // p))
    if k == k_max and k * p < fit:      # every layout built: the share buys rounds on them
        p = max(p, min(fit // k, policy.unbudgeted_rounds_per_layout))
    return pilot_for_round_time(k, p, seconds_per_round, budget_left_s, dataclasses.replace(policy, pilot_share=1.0)) \
        if k * p > fit else (int(k), int(p))


# --- 3. the review after each stage ---------------------------------------------------------------

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


def review_rows(compare_result: pd.DataFrame, target_ci_pct: float,
                strict: pd.DataFrame | None = None, by_mode: dict | None = None, arms=None) -> list[RowRecord]:
    """Per compare() row: group, candidate, half_width_pct, target_pct (``row_target``),
    target_met (half-width <= target_pct, exact rows count as met), decided (``decide.row_decision`` at
    target_pct, of the same row of ``strict`` when given: the comparison at the look's level,
    ``interim_alpha``), judged (whether
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
        out.append(RowRecord(group=key[0], candidate=key[1],
                             half_width_pct=float(hw) if math.isfinite(hw) else None, target_pct=want,
                             target_met=bool(exact or (math.isfinite(hw) and hw <= want)),
                             decided="exact" if exact else (row_decision(at, want)
                                                            if key in alt or strict is None else None),
                             judged=judged(key[1], arms)))
    return out


def stage_stop_reason(rows: list[RowRecord], spent_s: float, budget_s: float | None, stages: int,
                      on_decided: bool = True, policy: Policy = POLICY) -> str | None:
    """Why the run stops after a stage ("target", "decided", "budget", "stages"), or None to go on.
    ``on_decided`` false: a run that asks for its target half-width goes on past decided rows.
    Rows the stop does not judge (``judged`` false) do not count."""
    rows = [r for r in rows if r.judged]
    if rows and all(r.target_met for r in rows):
        return StopReason.TARGET
    if on_decided and rows and all(r.decided for r in rows):
        return StopReason.DECIDED
    if budget_s is not None and spent_s >= budget_s:
        return StopReason.BUDGET
    if stages >= policy.max_stages:
        return StopReason.STAGES
    return None


def review(df: pd.DataFrame, stopping: Stopping, max_layouts: int, policy: Policy = POLICY,
           out_of_time: bool = False) -> Stopping:
    """After a stage (``df``: the run's timing rows so far): ``stopping`` stopped (``stop_reason``
    set on it and on its last stage; "no plan", with ``error``, where the data cannot be analysed)
    or with the next stage appended, re-planned from the run's own components and costs.
    ``out_of_time``: the run's wall clock passed its budget (the runner stopped launching rounds):
    it stops, on "budget" unless the data met the target or decided every row.  A stop with
    judged rows short of their target records, as the last stage's ``planned`` (its own plan kept
    as ``design_planned``), what would reach the target: ``reach_design`` from the components of
    all the data and the seconds per round and per layout's builds the run measured."""
    st, target, budget = stopping, stopping.target_ci, stopping.budget_s
    by_mode, arms = st.target_ci_by_mode, list(st.target_arms)
    try:
        printed, strict = compare_alphas(df, st.baseline,
                                         (policy.alpha, interim_alpha(st.looks + 1, policy.max_stages, policy.interim_alpha)))
        rows = review_rows(printed, target, strict=strict, by_mode=by_mode, arms=arms)
    except StatsError as e:   # out of time: the budget stopped it, and the data say why no verdict
        reason = StopReason.BUDGET if out_of_time else StopReason.NO_PLAN
        return dataclasses.replace(st, stop_reason=reason, error=str(e), target_met=False
                                   ).with_last_stage(stop_reason=reason)
    spent = st.stages_spent_s()
    st = dataclasses.replace(st, rows=tuple(rows), spent_s=spent,
                             target_met=bool(rows) and all(r.target_met for r in rows))
    reason = stage_stop_reason(rows, spent, budget, len(st.stages), on_decided=st.mode.decided_answers,
                               policy=policy)
    if reason is None and out_of_time:
        reason = StopReason.BUDGET
    if reason is None:
        last = st.last_stage
        fitted = fit_components(printed, target, by_mode, arms)
        upper = fitted or planning_bounds(df, st.baseline, target, by_mode, arms)
        rounds_in_last = last.new_rounds + (st.warmup_rounds if last.stage == 0 else 0)
        new_layouts = last.layouts - (st.stages[-2].layouts if len(st.stages) > 1 else 0)
        nxt = next_design(upper, st.layouts, st.rounds_per_layout, target,
                          seconds_per_round=last.measure_s / max(1, rounds_in_last),
                          build_s_per_layout=float(last.build_s or 0) / max(1, new_layouts),
                          budget_left_s=(budget - spent) if budget else None, max_layouts=max_layouts,
                          observed_half_width_pct=widest_at_target(rows, target), policy=policy)
        st = st.with_last_stage(**_components_fields(upper, fitted))
        if nxt.new_rounds < max(1, policy.min_stage_share * int(st.rounds_planned)):
            reason = StopReason.BUDGET     # what the budget left buys would not move the half-widths
        else:
            stage = StageRecord(stage=len(st.stages), layouts=nxt.layouts, rounds_per_layout=nxt.rounds_per_layout,
                                new_rounds=nxt.new_rounds, first_round=last.first_round + last.new_rounds,
                                planned=nxt.planned, predicted_s=json_number(nxt.predicted_s),
                                predicted_half_width_pct=json_number(nxt.predicted_half_width_pct))
            st = st.with_last_stage(stop_reason=StopReason.CONTINUE)
            return dataclasses.replace(st, stages=st.stages + (stage,), layouts=nxt.layouts,
                                       rounds_per_layout=nxt.rounds_per_layout,
                                       rounds_planned=int(st.rounds_planned) + nxt.new_rounds)
    st = dataclasses.replace(st, stop_reason=reason).with_last_stage(stop_reason=reason)
    # a run that asks for its half-width (stop "target") is short of it on a decided row too
    short = [r for r in rows if r.judged and not r.target_met and (not st.mode.decided_answers or not r.decided)]
    if StopReason(reason).limit and short:
        st = _with_reach(df, st, short, max_layouts, policy, printed)
    return st


def fit_components(compare_result: pd.DataFrame, target: float, by_mode: dict | None = None,
                   arms=None) -> dict[str, float]:
    """The variance components the printed CIs come from: per level, the largest over the judged
    rows of the layouts fit's (``ringlab.stats.fit``: compare()'s ``sigma_layout_pct`` and
    ``sigma_round_pct``, REML), each scaled by (target / the row's own target)^2 as
    ``scaled_upper`` scales.  ``{"layout", "process", "iteration"}`` with the round's variance as
    the process level's (a round's log ratio holds its process and its iterations), so a plan and
    the interval the run prints share one variance model.  {} when no judged row has both
    components (one layout, or one round per layout)."""
    out: dict[str, float] = {}
    frame = compare_result if compare_result is not None else pd.DataFrame()
    for _, r in frame.iterrows():
        if not judged(r.get("candidate"), arms):
            continue
        sl, sr = _finite_or_nan(r.get("sigma_layout_pct")), _finite_or_nan(r.get("sigma_round_pct"))
        if not (math.isfinite(sl) and math.isfinite(sr)):
            continue
        factor = (float(target) / row_target(r.get("group"), target, by_mode)) ** 2
        out["layout"] = max(out.get("layout", 0.0), (sl / 100) ** 2 * factor)
        out["process"] = max(out.get("process", 0.0), (sr / 100) ** 2 * factor)
    if out:
        out["iteration"] = 0.0
    return out


def planning_bounds(df: pd.DataFrame, baseline: str, target: float, by_mode: dict | None, arms) -> dict:
    """The components a plan falls back on where the fit gives none: the upper bounds of the run's
    own nested components (``observed_components``, ``scaled_upper``)."""
    try:
        comps = observed_components(df, baseline)
    except Exception:   # noqa: BLE001 - data without components: the plan scales the interval alone
        return {}
    return scaled_upper(comps["rows"], target, by_mode, arms) or comps["upper"]


def _components_fields(upper: dict, fitted: dict) -> dict:
    """The stage record's fields for the components a plan used: ``components_fit`` (layout and
    round variances of the layouts fit) where it came from the fit, else ``components_upper``."""
    if fitted:
        return {"components_fit": {"layout": json_number(fitted["layout"]), "round": json_number(fitted["process"])}}
    return {"components_upper": {k: json_number(v) for k, v in upper.items()}}


def dominant_level(components: dict, layouts: int, rounds_per_layout: int) -> tuple[str, float] | None:
    """(the level, its share) whose variance makes the larger part of the squared half-width at
    ``layouts`` x ``rounds_per_layout``: sigma_L^2 / K against sigma_R^2 / (K P); None without both."""
    sl, sr = components.get("layout"), components.get("round", components.get("process"))
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (sl, sr)) or sl + sr <= 0:
        return None
    a, b = float(sl), float(sr) / max(1, int(rounds_per_layout))
    share = a / (a + b) if a + b > 0 else 0.0
    return ("layout", share) if share >= 0.5 else ("round", 1 - share)


def measured_costs(df: pd.DataFrame, stopping: Stopping) -> tuple[float, float]:
    """(seconds per round, build seconds per layout) the run measured: every stage's trial
    seconds over the rounds ``df`` holds (warm-ups included, as their seconds are; the rounds the
    stages planned where ``df`` has no round column), and every stage's build seconds over the
    layouts of the design."""
    stages = stopping.stages or ()
    rounds = 0
    if df is not None and len(df) and "round" in df.columns:
        rounds = int(pd.to_numeric(df["round"], errors="coerce").dropna().nunique())
    if rounds <= 0:
        rounds = sum(int(s.new_rounds) for s in stages) + int(stopping.warmup_rounds or 0)
    measure = sum(float(s.measure_s or 0) for s in stages)
    build = sum(float(s.build_s or 0) for s in stages)
    return measure / max(1, rounds), build / max(1, int(stopping.layouts or 0))


def _with_reach(df: pd.DataFrame, st: Stopping, short: list[RowRecord], max_layouts: int,
                policy: Policy, printed: pd.DataFrame | None = None) -> Stopping:
    """``st`` (stopped short of its target) with its last stage's ``planned`` saying what would
    reach the target (``reach_design``) from the layouts fit's components (``fit_components``;
    the nested components' upper bounds where the fit has none), its components and its own
    plan kept beside it."""
    target, by_mode, arms = st.target_ci, st.target_ci_by_mode, list(st.target_arms)
    fitted = fit_components(printed, target, by_mode, arms) if printed is not None else {}
    upper = fitted or planning_bounds(df, st.baseline, target, by_mode, arms)
    spr, cl = measured_costs(df, st)
    reach = reach_design(upper, st.layouts, st.rounds_per_layout, target, spr, cl, max_layouts,
                         observed_half_width_pct=widest_at_target(list(st.rows or ()), target), policy=policy)
    own = {float(r.target_pct) for r in short}
    if reach.predicted_half_width_pct is None:
        shown = "the target"
    elif len(own) == 1:
        shown = f"{reach.predicted_half_width_pct * own.pop() / target:.2f}%"
    else:
        shown = f"{reach.predicted_half_width_pct / target:.2f} x each row's target"
    text = (f"{reach.layouts} layout pairs x {reach.rounds_per_layout} rounds each for a t half-width of "
            f"about {shown} in about {reach.predicted_s:.0f} s, builds included (at the {spr:.3g} s a round "
            f"and {cl:.3g} s of builds a layout this run measured)")
    if reach.planned:
        text += f"; {reach.planned}"
    last = st.last_stage
    return st.with_last_stage(
        planned=text, design_planned=last.design_planned if last.design_planned is not None else last.planned,
        **_components_fields(upper, fitted))


def reach_design(upper: dict, layouts: int, rounds_per_layout: int, target_ci_pct: float,
                 seconds_per_round: float, build_s_per_layout: float, max_layouts: int,
                 observed_half_width_pct: float | None = None, level: float | None = None,
                 policy: Policy = POLICY) -> StageDesign:
    """The whole design (layouts x rounds per layout, counted from the start) that would reach
    ``target_ci_pct`` at the run's own measured costs, for the statement of a run that stopped
    short: the allocation for the components' upper bounds (scaled up where the printed interval
    is wider than they predict, as ``next_design`` does), never smaller than the design that ran
    (``layouts`` x ``rounds_per_layout``), and where the bounds say that design suffices (the
    data say it does not) the data grown by (observed / target)^2.  ``predicted_s``: its machine
    time from the start at the measured costs (layouts x ``build_s_per_layout`` + layouts x
    rounds x ``seconds_per_round``), so it is never less than what the design that ran cost;
    ``new_rounds``: the rounds it adds; ``planned``: "" or why it falls short (the layout cap)."""
    from ringlab.stats.plan import Level, allocate
    level = policy.level if level is None else level

    def var(name, default):
        v = upper.get(name, default)
        return float(v) if isinstance(v, (int, float)) and not math.isnan(v) else default
    s_l, s_p, s_i = var("layout", math.inf), var("process", math.inf), var("iteration", 0.0)
    s_p = s_p + (s_i if math.isfinite(s_i) else 0.0)
    k, p = max(1, int(layouts)), max(1, int(rounds_per_layout))
    inflation = model_inflation(s_l, s_p, k, p, observed_half_width_pct, level)
    s_l, s_p = s_l * inflation, s_p * inflation
    spr = seconds_per_round if math.isfinite(seconds_per_round) and seconds_per_round > 0 else 1.0
    cl = build_s_per_layout if math.isfinite(build_s_per_layout) and build_s_per_layout >= 0 else 0.0
    target = math.log1p(target_ci_pct / 100)
    finite = math.isfinite(s_l) and math.isfinite(s_p)

    def half_width(kk, pp):
        if not finite or kk < 2:
            return math.nan
        return sst.t.ppf(0.5 + level / 2, kk - 1) * math.sqrt((s_l + s_p / pp) / kk)
    k2, p2 = k, p
    if finite:
        plan = allocate(Level("layout", s_l, cl), Level("process", s_p, spr), Level("iteration", 0.0, 0.0),
                        target_half_width=target, level=level, min_layouts=k, max_layouts=max_layouts)
        k2, p2 = max(k, plan.layouts), max(p, plan.rounds_per_layout)
        while k2 > k and half_width(k2 - 1, p2) <= target:   # rounds kept at p: fewer layouts may do
            k2 -= 1
        if p2 > p and half_width(k2, p2) <= target:
            # the fewest rounds per layout that reach it (a layout variance at 0 sends the
            # allocation's rounds to their cap, far past the target): bisection, the half-width
            # falls as the rounds grow
            lo, hi = p, p2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if half_width(k2, mid) <= target else (mid, hi)
            p2 = hi if half_width(k2, lo) > target else lo
    obs = observed_half_width_pct
    hw = half_width(k2, p2)
    if (k2, p2) == (k, p):     # the bounds say the design that ran suffices; the data say it does not
        factor = 2.0
        if obs is not None and math.isfinite(obs) and target_ci_pct > 0:
            factor = max(1.25, (float(obs) / float(target_ci_pct)) ** 2)
        k2 = min(int(max_layouts), max(k + 1, math.ceil(k * factor))) if k < max_layouts else k
        p2 = max(p, math.ceil(p * k * factor / k2))
        hw = (math.log1p(float(obs) / 100) * math.sqrt(k * p / (k2 * p2))
              if obs is not None and math.isfinite(obs) else half_width(k2, p2))
    hw_pct = float(math.expm1(hw) * 100) if math.isfinite(hw) else None
    note = ""
    if hw_pct is not None and hw > target * (1 + 1e-9):
        note = f"the narrowest this planner reaches at the cap of {int(max_layouts)} layouts"
    return StageDesign(layouts=int(k2), rounds_per_layout=int(p2), new_rounds=int(k2 * p2 - k * p),
                       predicted_s=float(k2 * cl + k2 * p2 * spr), predicted_half_width_pct=hw_pct, planned=note)


def widest_at_target(rows: list[RowRecord], target: float) -> float | None:
    """The widest half-width of the judged rows, each scaled to ``target`` by (target / the row's
    own target), as ``scaled_upper`` scales the components; None when no judged row has one."""
    out = [float(r.half_width_pct) * float(target) / float(r.target_pct)
           for r in rows if r.judged and r.half_width_pct is not None and float(r.target_pct or 0) > 0]
    return max(out) if out else None


def scaled_upper(rows: list[dict], target: float, by_mode: dict | None, arms) -> dict[str, float]:
    """Per level, the largest upper bound over the judged rows of ``observed_components``, each
    scaled by (target / the row's own target)^2: a design whose half-width at ``target`` holds for
    these bounds gives every row its own target (a half-width grows with the square root of the
    variance).  {} when no judged row has components."""
    out: dict[str, float] = {}
    for r in rows:
        if not judged(r["candidate"], arms):
            continue
        factor = (float(target) / row_target(r["group"], target, by_mode)) ** 2
        for level, v in r["upper"].items():
            out[level] = max(out.get(level, -math.inf), float(v) * factor)
    return out


def observed_components(df: pd.DataFrame, baseline: str, metric: str = schema.PRIMARY_METRIC, by=None,
                        confidence: float = 0.9) -> dict:
    """The variance components (estimate and upper bound per level) of the run's own paired log
    ratios, per (configuration, candidate), and their maxima over the rows (what re-planning uses).
    Returns ``{"rows": [{"group", "candidate", "variance", "upper", "df"}], "upper": {level: max},
    "variance": {level: max}}``; a level no row could estimate is infinite in ``upper``."""
    from ringlab.stats.calibration import LEVELS, nested_components, pair_differences
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


# --- 4. the next stage ----------------------------------------------------------------------------

@dataclass(frozen=True)
class StageDesign:
    """The next stage's total design (layouts x rounds per layout), the rounds it adds, its
    predicted seconds and half-width (%; None where the components are not all estimable yet) and
    the allocation's basis."""
    layouts: int
    rounds_per_layout: int
    new_rounds: int
    predicted_s: float
    predicted_half_width_pct: float | None
    planned: str


def next_design(upper: dict, layouts: int, rounds_per_layout: int, target_ci_pct: float,
                seconds_per_round: float, build_s_per_layout: float, budget_left_s: float | None,
                max_layouts: int, level: float | None = None, observed_half_width_pct: float | None = None,
                policy: Policy = POLICY) -> StageDesign:
    """The next stage's total design (layouts K', rounds per layout P', K' >= K, P' >= P) from the
    upper bounds of the run's own components and its own costs: the allocation for the target,
    cut to what ``budget_left_s`` pays for (the narrowest predicted half-width it affords).  The
    iteration level is folded into the process level (``repeats`` stays as the pilot chose it).

    ``observed_half_width_pct``, the widest half-width the run's own compare() printed (at the
    target's scale), keeps the plan honest where the components' model predicts a narrower
    interval at today's design than the verdict's estimator gave (heavy tails, a slow state): both
    components are scaled up by (observed / predicted)^2 before planning, so the next stage is
    sized for the interval the verdict will print, not for the model's.

    ``level``: the confidence level (``policy.level`` unless given).  new_rounds is 0 when the
    budget pays for nothing more."""
    from ringlab.stats.plan import Level, allocate, best_repeats
    level = policy.level if level is None else level
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
        if plan.limited_by != "target" and plan.layouts > k * policy.growth:
            # the target lies beyond this stage's layouts: more rounds would only stand in for the
            # layouts the next stage adds, so the rounds stay at the per-layout optimum
            rounds = min(rounds, best_repeats(*levels)[0])
        k2, p2, basis = max(k, plan.layouts), max(p, rounds), plan.basis
    else:
        k2, p2 = min(max_layouts, max(k + 1, math.ceil(k * 1.25))), p + 1
    # a stage grows each level at most ``growth``-fold: a component estimated from few units (the layout
    # level after a small pilot) is measured again before the design bets everything on it
    k2, p2 = min(k2, max_layouts, k * policy.growth), min(p2, p * policy.growth)
    if (k2, p2) == (k, p):      # the bounds say the design suffices and the data say it does not
        k2, p2 = shortfall_design(k, p, max_layouts, target_ci_pct, observed_half_width_pct, policy)

    def cost(kk, pp):
        return (kk - k) * cl + ((kk - k) * pp + k * (pp - p)) * spr

    def half_width(kk, pp):
        var = (s_l + s_p / pp) if math.isfinite(s_l) and math.isfinite(s_p) else math.nan
        return (sst.t.ppf(0.5 + level / 2, kk - 1) * math.sqrt(var / kk)) if kk > 1 and math.isfinite(var) else math.nan
    if budget_left_s is not None and cost(k2, p2) > budget_left_s / policy.budget_margin:
        k2, p2 = _affordable(k, p, k2, p2, cost, half_width, budget_left_s / policy.budget_margin)
    new = (k2 - k) * p2 + k * (p2 - p)
    hw = half_width(k2, p2)
    return StageDesign(layouts=int(k2), rounds_per_layout=int(p2), new_rounds=int(new),
                       predicted_s=float(cost(k2, p2)),
                       predicted_half_width_pct=float(math.expm1(hw) * 100) if math.isfinite(hw) else None,
                       planned=basis)


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
                     observed_half_width_pct: float | None, policy: Policy = POLICY) -> tuple[int, int]:
    """The design past (layouts, rounds per layout) when the plan says it suffices and the run's
    own interval says it does not: the data grown by (observed / target)^2 (a half-width narrows
    with the square root of the data), in layouts below the cap and in rounds per layout at it,
    each at most ``growth``-fold and at least one step."""
    k, p = int(layouts), int(rounds_per_layout)
    factor = 1.25
    if observed_half_width_pct is not None and math.isfinite(observed_half_width_pct) and target_ci_pct > 0:
        factor = min(float(policy.growth), max(factor, (float(observed_half_width_pct) / float(target_ci_pct)) ** 2))
    if k < max_layouts:
        return min(max_layouts, max(k + 1, math.ceil(k * factor))), p
    return k, min(p * policy.growth, max(p + 1, math.ceil(p * factor)))


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


# --- 5. the schedule ------------------------------------------------------------------------------

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


# --- a finished run -------------------------------------------------------------------------------

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
