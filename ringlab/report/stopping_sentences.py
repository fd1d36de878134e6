"""summary.md's sentences of a run that stopped on a target (env.json ``stopping``, read through
``ringlab.stats.stopping_record.Stopping``): ``stopping_text`` (which decided the number of
rounds and whether every CI met the target), ``staged_text`` (a staged run's lines) and
``target_text`` (the target as stated)."""
from __future__ import annotations

import math

from ringlab.catalog import StopReason
from ringlab.stats.sequential import POLICY, dominant_level
from ringlab.stats.stopping_record import Stopping


def stopping_text(stopping: Stopping | None) -> str:
    """One or two sentences for summary.md from env.json's ``stopping``: which decided the number
    of rounds (the target, the budget, or a pilot that already met the target) and whether every CI
    met the target at the end.  "" when the run had no target."""
    if stopping is None or not stopping.target_ci:
        return ""
    if stopping.stages is not None:
        return staged_text(stopping)
    pct = f"±{float(stopping.target_ci):g}%"
    pilot, planned, ran = stopping.pilot_rounds, stopping.rounds_planned, stopping.rounds_run
    met = stopping.target_met
    end = ("" if met is None else " Every CI reached the target." if met
           else " At the end not every CI reached it; the CIs are as printed.")
    if planned is None:
        return (f"Stop on a target ({pct} 95% CI half-width): the {pilot}-round pilot did not finish, "
                "so the number of rounds is not decided yet.")
    if ran is not None and ran < planned:
        return (f"Stop on a target ({pct}): only {ran} of {planned} planned rounds ran (the run was "
                "interrupted; `ringlab run ... --resume` finishes it), so the target is not judged.")
    reason = stopping.stop_reason
    if reason == StopReason.PILOT_MET_TARGET:
        return f"Stop on a target ({pct} 95% CI half-width): the {pilot}-round pilot already met it, so no rounds were added." + end
    if reason == StopReason.BUDGET:
        budget = stopping.budget_s
        return (f"Stopped by the budget: reaching {pct} needed {stopping.rounds_for_target} rounds, "
                f"the budget of {float(budget or 0):g} s paid for {planned} ({pilot} of them the pilot), "
                "and all of them ran." + (" Every CI reached the target anyway." if met else
                                          " The CIs are wider than the target."))
    if reason == StopReason.TARGET:
        text = (f"Stopped on the target: after a {pilot}-round pilot the two-stage plan asked for {planned} "
                f"rounds to bring every 95% CI half-width to {pct}, and all of them ran.")
        return text + (" Every CI reached the target." if met else
                       " But not every CI reached it (the pilot underestimated the spread); the CIs are as printed."
                       if met is False else "")
    return (f"Stop on a target ({pct}): the pilot could not be analysed ({stopping.error or reason}), "
            f"so no rounds were added.")


def target_text(stopping: Stopping) -> str:
    """The target as summary.md states it: "±0.5%", or "±0.5% (mode 1: ±1%)" where a mode has its
    own."""
    pct = f"±{float(stopping.target_ci):g}%"
    own = {str(m): float(t) for m, t in stopping.target_ci_by_mode.items() if float(t) != float(stopping.target_ci)}
    if own:
        pct += " (" + ", ".join(f"mode {m}: ±{t:g}%" for m, t in sorted(own.items())) + ")"
    return pct


def _judged_text(stopping: Stopping) -> str:
    """" for reorder against batch" where only some arms are judged, else ""."""
    arms = stopping.target_arms
    return f" for {', '.join(map(str, arms))} against {stopping.baseline}" if arms else ""


def staged_text(stopping: Stopping) -> str:
    """summary.md's lines for a staged run (env.json ``stopping`` with ``stages``)."""
    pct = target_text(stopping)
    stages = stopping.stages or ()
    spent, budget = stopping.spent_s, stopping.budget_s
    head = stopping.stopped_head(POLICY.max_stages)
    if not head:
        return (f"Staged run for a {pct} 95% CI half-width: {len(stages)} stage(s) so far, not finished "
                "(`ringlab run ... --resume` goes on).")
    last = stages[-1] if stages else None
    text = (f"{head}. Target {pct} 95% CI half-width" + _judged_text(stopping)
            + (f" within {float(budget):g} s" if budget else "")
            + f"; {len(stages)} stage(s), ending at {last.layouts if last else None} layouts x "
              f"{last.rounds_per_layout if last else None} rounds each, {float(spent or 0):.0f} s builds included. "
            + f"The pilot was planned from {stopping.calibration or 'the level calibration'}.")
    said = [f"{r.candidate} ({r.group}): {r.decided}" for r in stopping.rows or () if r.decided and r.decided != "exact"]
    return text + (" " + "; ".join(said) + "." if said else "") + _short_text(stopping)


def _short_text(stopping: Stopping) -> str:
    """" Not reached: ..." for a run that stopped with rows short of their target: how far each
    got, why (the levels' measured SDs, upper bounds, from the last stage) and what the last
    stage's plan says would reach it; "" when every judged row reached its target or was decided."""
    short = [r for r in stopping.rows or () if r.judged and r.target_met is False
             and (not stopping.mode.decided_answers or not r.decided)]
    if not short or StopReason.parse(stopping.stop_reason).answered:
        return ""
    last = stopping.stages[-1] if stopping.stages else None
    got = "; ".join(f"{r.candidate} {_mode_of(r.group)}±{float(r.half_width_pct):.2f}% of "
                    f"±{float(r.target_pct):g}%" for r in short if _num_ok(r.half_width_pct))
    fit = (last.components_fit if last else None) or {}
    comp = fit or (last.components_upper if last else None) or {}
    # the fit's components are estimates, 0 included (REML at its boundary); bounds only where positive
    sds = ", ".join(f"{n} {math.sqrt(v) * 100:.1f}%" for n, v in comp.items() if _num_ok(v) and (v > 0 or fit and v == 0))
    text = f" Not reached: {got}."
    if sds and fit:
        text += f" Why: the layouts fit of this run's data gives SDs of the paired log ratio of {sds}"
        top = dominant_level(fit, last.layouts, last.rounds_per_layout)
        if top is not None:
            text += (f"; at {last.layouts} layouts x {last.rounds_per_layout} rounds the {top[0]} level's "
                     f"variance makes {top[1] * 100:.0f}% of the interval's squared width")
        text += "."
    elif sds:
        text += f" Why: this run measured SDs of the paired log ratio of {sds} (upper bounds, per unit of each level)."
    if last is not None and last.planned:
        text += f" What would reach it, planned from them: {last.planned}."
    return text


def _mode_of(group: str) -> str:
    parts = dict(p.split("=", 1) for p in str(group).split(",") if "=" in p)
    return f"mode {parts['mode']} " if "mode" in parts else ""


def _num_ok(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


__all__ = ["staged_text", "stopping_text", "target_text"]
