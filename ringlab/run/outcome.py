"""A trial's outcome: what running one trial process gave, however it was spawned
(``ringlab.run.process.run_process`` or the trial launcher, ``ringlab.run.launcher``)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrialOutcome:
    status: str           # ok | crash | timeout
    exit_code: int
    stdout: str
    stderr: str
    wall_s: float
