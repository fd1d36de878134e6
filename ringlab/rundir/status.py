"""How a run ends: the statuses env.json records, the rule that judges a finished run from its
trial counts (``judge``), and ``RunStatus``, a run folder's status as ``RunFolder.status()`` reads it."""
from __future__ import annotations

from dataclasses import dataclass, field

#: a run in which more than this fraction of the trials failed (crash, error, timeout)
#: ends ``failed`` and ``ringlab run`` exits non-zero; so does a run with no ok trial
FAILED_MAX_FRACTION = 0.5
#: statuses of a run (env.json "status")
RUN_STATUSES = ("running", "complete", "failed", "interrupted", "skipped")


@dataclass
class RunStatus:
    """How a run stands: ``state`` (RUN_STATUSES), trial counts, and the PID that holds it."""
    state: str
    trials: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    pid: int | None = None

    @property
    def exit_code(self) -> int:
        """0 for complete or skipped runs, 1 otherwise."""
        return 0 if self.state in ("complete", "skipped") else 1


def judge(trials: dict[str, int], arms: dict[str, dict[str, int]] | None = None,
          unavailable: dict[str, str] | None = None) -> tuple[str, str]:
    """(status, reason) of a run that went to its end, from its trial counts.

    ``arms``: each arm's (variant's) counts of its measured trials, for an experiment run (the
    runner passes them; None for a folder that holds no arms, such as compare-runs); an arm with
    no successful trial fails the run, and the reason names it.  ``unavailable``: arms that could
    not run on this machine, with why; they fail the run too.  A run in which no trial ran at all
    (nothing to measure) is ``skipped``, with the reason "no trial to run"."""
    bad = trials.get("failed", 0) + trials.get("timeout", 0)
    ran = trials.get("ok", 0) + bad
    unavailable = dict(unavailable or {})
    if ran == 0 and not unavailable:
        return ("complete" if arms is None else "skipped"), "no trial to run"
    empty = [f"arm '{arm}' could not run: {why}" for arm, why in unavailable.items()]
    for arm, counts in (arms or {}).items():
        if arm not in unavailable and counts.get("ok", 0) == 0:
            empty.append(f"arm '{arm}' has no successful trial ({counts.get('failed', 0)} failed, "
                         f"{counts.get('timeout', 0)} timed out, {counts.get('skipped', 0)} skipped)")
    if trials.get("ok", 0) == 0:
        return "failed", (f"no trial succeeded ({trials.get('failed', 0)} failed, {trials.get('timeout', 0)} "
                          "timed out)" + (": " + "; ".join(empty) if empty else ""))
    if bad > FAILED_MAX_FRACTION * ran:
        empty.insert(0, f"{bad} of {ran} trials failed or timed out (more than {FAILED_MAX_FRACTION:.0%})")
    return ("failed", "; ".join(empty)) if empty else ("complete", "")
