"""The one place where the report, the notebooks and the results index read a run folder.

``read_run(run_dir)`` returns its trials (raw.csv), its env.json and its status
("complete", "failed", "interrupted", "running", or "unknown" when nothing says).
Everything under ``ringlab.report``, ``ringlab.notebook`` and ``ringlab.results_index``
goes through it, so that a change of the run-folder format is one edit here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab.provenance import read_env


@dataclass
class RunData:
    path: Path
    raw: pd.DataFrame | None          # None when the folder has no raw.csv (environment, compare-runs)
    env: dict = field(default_factory=dict)
    status: str = "unknown"


def run_status(env: dict) -> str:
    """"complete" / "failed" / "interrupted" / "running" from env.json; "unknown" if unrecorded."""
    st = env.get("status")
    if isinstance(st, dict):  # a status record: {"state": ..., counts}
        st = st.get("state") or st.get("status")
    if not isinstance(st, str) or not st.strip():
        return "unknown"
    st = st.strip().lower()
    for word in ("complete", "failed", "interrupted", "running"):
        if st.startswith(word):
            return word
    return st


def read_run(run_dir, require_raw: bool = True) -> RunData:
    """raw.csv + env.json + status of ``run_dir``; ``FileNotFoundError`` naming the folder
    when raw.csv is required and missing."""
    run_dir = Path(run_dir)
    raw_path = run_dir / "raw.csv"
    env = read_env(run_dir)
    if not raw_path.is_file():
        if require_raw:
            raise FileNotFoundError(f"run_dir: no raw.csv in {run_dir}")
        return RunData(run_dir, None, env, run_status(env))
    return RunData(run_dir, pd.read_csv(raw_path), env, run_status(env))


__all__ = ["RunData", "read_run", "run_status"]
