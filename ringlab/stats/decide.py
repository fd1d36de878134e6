"""The verdict of one comparison from its ``Estimate`` and the thresholds, decided from the
printed CI alone (``LOWER_IS_BETTER`` gives the direction):

  faster / slower            the CI excludes 0 (note added when it also lies within +-margin)
  no significant difference  the CI includes 0 and lies within +-margin: an equivalence test
                             against the margin, whose note states the margin tested
  inconclusive               the CI includes 0 and reaches beyond +-margin, or there is no CI
                             (``Decision.settled`` False: the planner says how many more)

The margin is the equivalence margin (``EQUIVALENCE_MARGIN``, a fraction: 0.01 = +-1%, the
default of compare()'s ``noise``, ``ringlab compare --noise`` and a run's ``-p margin``): the
largest change a row may call "no significant difference".  The verdict's note names it
(``margin_text``), so every table that prints the note says what was tested.

Machine states never change the verdict: a row whose per-state CIs lie on opposite sides of 0
(``Estimate.state_dependent``) keeps the verdict of its CI, and its note adds the two states'
effects (``state_note``).

Instruction counts say "fewer instructions" / "more instructions"; an exact comparison of
equal counts says "same instructions" ("no significant difference" for other metrics).

Holm's step-down correction (``holm``) and the CI levels that agree with it (``holm_levels``):
the family is the run, every candidate against the baseline in every configuration (the rows of
one ``compare()`` call).  The CI a row's verdict rests on is at the Holm step's level,
``1 - alpha / (m - j + 1)``, where j is the row's rank among the family's p-values, or, for rows
Holm does not reject, the rank of the first non-rejected row.  A row is then significant
(``p_holm <= alpha``) exactly when that CI excludes 0.  Reports print every row's CI at
1 - alpha instead (``ringlab.stats.compare``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from statsmodels.stats.multitest import multipletests

from ringlab import schema
from ringlab.catalog import Verdict
from ringlab.stats.contract import SIGNIFICANT, verdict_ci
from ringlab.stats.estimate import Estimate

INSTRUCTION_METRICS = {"instructions_per_op", "instructions"}

#: the equivalence margin "no significant difference" is tested against, a fraction (0.01 = +-1%)
EQUIVALENCE_MARGIN = 0.01


def margin_text(margin: float) -> str:
    """The margin as the notes state it: "+-1% (the equivalence margin)" for 0.01."""
    return f"±{margin * 100:g}% (the equivalence margin)"


@dataclass(frozen=True)
class Decision:
    """A row's verdict (a ``ringlab.catalog.Verdict``; its word is read into one), the note that
    goes with it ("" when none), and whether it is settled (False: more data would decide it; by
    default what the word says, ``Verdict.is_settled``)."""
    verdict: Verdict
    note: str = ""
    settled: bool | None = None

    def __post_init__(self):
        v = Verdict.parse(self.verdict)
        object.__setattr__(self, "verdict", v)
        if self.settled is None:
            object.__setattr__(self, "settled", v.is_settled)


def direction(sign: float, metric: str) -> Verdict:
    """The verdict of a significant effect of this sign (negative: the candidate is lower): the
    call in the candidate's favour when lower is better (fewer instructions, always), else
    against it."""
    instructions = metric in INSTRUCTION_METRICS
    better = (sign < 0) == (instructions or metric in schema.LOWER_IS_BETTER)
    return Verdict.call(+1 if better else -1, instructions=instructions)


def state_note(est: Estimate, metric: str) -> str:
    """The note of a row whose per-state CIs lie on opposite sides of 0 ("" for any other row)."""
    if not est.state_dependent:
        return ""
    fast, slow = (est.pct(est.per_state[s].estimate) for s in (0, 1))
    return (f"machine states: {direction(fast, metric)} in the fast state ({fast:+.1f}%), "
            f"{direction(slow, metric)} in the slow state ({slow:+.1f}%), slow in {est.slow_share:.0%} "
            "of the trials")


def decide(est: Estimate, metric: str, noise: float = EQUIVALENCE_MARGIN) -> Decision:
    """The verdict of ``est`` at the equivalence margin ``noise`` (a fraction: 0.01 = +-1%)."""
    if est.design == "exact":
        if est.estimate == 0:
            return Decision(Verdict.SAME_INSTRUCTIONS if metric in INSTRUCTION_METRICS else Verdict.NO_DIFFERENCE)
        return Decision(direction(est.estimate, metric))
    if est.state_dependent:     # the verdict of the CI, with the states' note
        v = decide(replace(est, state_dependent=False), metric, noise)
        return replace(v, note="; ".join(t for t in (v.note, state_note(est, metric)) if t))
    (lo, hi), nz = est.ci_pct, noise * 100
    if not math.isfinite(lo):
        return Decision(Verdict.INCONCLUSIVE, f"too few {est.unit} ({est.n}) for a {est.level:.4g} CI")
    if lo > 0 or hi < 0:
        within = -nz <= lo and hi <= nz
        return Decision(direction(lo if lo > 0 else hi, metric),
                        f"significant but within {margin_text(noise)}" if within else "")
    if -nz <= lo and hi <= nz:
        return Decision(Verdict.NO_DIFFERENCE, f"within {margin_text(noise)}")
    return Decision(Verdict.INCONCLUSIVE, f"the CI reaches beyond {margin_text(noise)}")


# What a finished compare() row has decided.  A staged run stops when every row is decided
# (``ringlab.stats.sequential``), and bisect measures its endpoints until they are
# (``ringlab.lab.bisect.steps``): both read a row through these three, and nothing else
# decides what "decided" means.

def called(row) -> bool:
    """The row is called (faster/slower, fewer/more instructions): its Holm CI excludes 0."""
    return str(row.get("verdict") or "") in SIGNIFICANT


def within(row, resolution_pct: float) -> bool:
    """The CI the row's verdict rests on (Holm's) lies within +-``resolution_pct``: no change
    that large (False when the row has no CI)."""
    lo, hi = verdict_ci(row)
    try:
        lo, hi = float(lo), float(hi)
    except (TypeError, ValueError):
        return False
    return math.isfinite(lo) and math.isfinite(hi) and -resolution_pct <= lo and hi <= resolution_pct


def row_decision(row, resolution_pct: float) -> str | None:
    """What one compare() row settles: its call (``called``), else "no change larger than X%"
    (``within``, X = ``resolution_pct``), else None."""
    if called(row):
        return str(row.get("verdict"))
    if within(row, resolution_pct):
        return f"no change larger than {resolution_pct:g}%"
    return None


def _holm_order(p_values) -> tuple[np.ndarray, np.ndarray, int]:
    """(p as floats, the finite p's indices from smallest p up, how many there are): Holm's set-up."""
    p = np.asarray(p_values, dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    return p, ok[np.argsort(p[ok], kind="stable")], len(ok)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (statsmodels' ``multipletests(method="holm")``; NaN
    stays NaN and does not count)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.isfinite(p)
    if ok.sum() == 1:       # a family of one is its own adjustment (and multipletests runs gc.collect)
        out[ok] = p[ok]
    elif ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def holm_levels(p_values, alpha: float) -> np.ndarray:
    """The CI level that agrees with Holm for each p (NaN for NaN p), see the module doc."""
    p, order, m = _holm_order(p_values)
    out = np.full(len(p), np.nan)
    if m == 0:
        return out
    stop = m  # 0-based rank of the first row Holm does not reject (m: all rejected)
    for i, j in enumerate(order):
        if p[j] > alpha / (m - i):
            stop = i
            break
    for i, j in enumerate(order):
        out[j] = 1 - alpha / (m - min(i, stop))
    return out
