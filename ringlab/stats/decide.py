"""The verdict of one comparison from its ``Estimate`` and the thresholds, decided from the
printed CI alone (``LOWER_IS_BETTER`` gives the direction):

  faster / slower            the CI excludes 0 (note added when it also lies within +-noise)
  no significant difference  the CI includes 0 and lies within +-noise
  inconclusive               the CI includes 0 and reaches beyond +-noise, or there is no CI
                             (``Verdict.settled`` False: the planner says how many more)
  depends on machine state   two states, per-state CIs on opposite sides of 0

Instruction counts say "fewer instructions" / "more instructions"; an exact comparison of
equal counts says "same instructions" ("no significant difference" for other metrics).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ringlab import schema
from ringlab.stats.contract import STATE_DEPENDENT
from ringlab.stats.estimate import Estimate

INSTRUCTION_METRICS = {"instructions_per_op", "instructions"}


@dataclass(frozen=True)
class Verdict:
    """One of ``VERDICTS``, the note that goes with it ("" when none), and whether it is
    settled (False: inconclusive, more data would decide it)."""
    verdict: str
    note: str = ""
    settled: bool = True


def direction(sign: float, metric: str) -> str:
    """The verdict of a significant effect of this sign (negative: the candidate is lower)."""
    lib = metric in schema.LOWER_IS_BETTER
    if metric in INSTRUCTION_METRICS:
        return "fewer instructions" if sign < 0 else "more instructions"
    return "faster" if (sign < 0) == lib else "slower"


def _state_note(est: Estimate, metric: str) -> str:
    fast, slow = (est.pct(est.per_state[s].estimate) for s in (0, 1))
    return (f"{direction(fast, metric)} in the fast state ({fast:+.1f}%), {direction(slow, metric)} in the "
            f"slow state ({slow:+.1f}%)")


def decide(est: Estimate, metric: str, noise: float) -> Verdict:
    """The verdict of ``est`` at the noise threshold ``noise`` (a fraction: 0.01 = 1%)."""
    if est.design == "exact":
        if est.estimate == 0:
            return Verdict("same instructions" if metric in INSTRUCTION_METRICS else "no significant difference")
        return Verdict(direction(est.estimate, metric))
    if est.state_dependent:
        return Verdict(STATE_DEPENDENT, _state_note(est, metric))
    (lo, hi), nz = est.ci_pct, noise * 100
    if not math.isfinite(lo):
        return Verdict("inconclusive", f"too few {est.unit} ({est.n}) for a {est.level:.4g} CI", settled=False)
    if lo > 0 or hi < 0:
        within = -nz <= lo and hi <= nz
        return Verdict(direction(lo if lo > 0 else hi, metric),
                       f"significant but within the +-{nz:g}% noise threshold" if within else "")
    if -nz <= lo and hi <= nz:
        return Verdict("no significant difference")
    return Verdict("inconclusive", settled=False)
