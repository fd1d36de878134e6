"""The one place where the report, the notebooks and the results index read a run folder.

``read_run(run_dir)`` returns its trials (raw.csv), its env.json and its status
("complete", "failed", "interrupted", "running", "skipped", or "unknown" when no
env.json says), all through :class:`ringlab.rundir.RunFolder`, the owner of the
run-folder format.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab.errors import DataError
from ringlab.rundir import RunFolder


@dataclass
class RunData:
    path: Path
    raw: pd.DataFrame | None          # None when the folder has no raw.csv (environment, compare-runs)
    env: dict = field(default_factory=dict)
    status: str = "unknown"
    status_line: str = ""             # "" for a complete run, else "Run status: ...: counts; reason."


def read_run(run_dir, require_raw: bool = True, load_raw: bool = True) -> RunData:
    """raw.csv + env.json + status of ``run_dir``.  A missing raw.csv (when required) or a
    corrupt one raises ``DataError`` naming the file; a missing or corrupt env.json reads as
    {} with status "unknown" (a report still shows the trials).  ``load_raw=False`` reads
    env.json and the status only (``raw`` is None)."""
    folder = RunFolder(Path(run_dir))
    try:
        env = folder.read_env().doc
        st = folder.status()
        status, line = st.state, folder.status_line()
    except DataError:
        env, status, line = {}, "unknown", ""
    if not load_raw:
        return RunData(folder.path, None, env, status, line)
    if not folder.raw_csv.is_file():
        if require_raw:
            raise DataError(f"run_dir: no raw.csv in {folder.path}")
        return RunData(folder.path, None, env, status, line)
    return RunData(folder.path, folder.read_raw(), env, status, line)


__all__ = ["RunData", "read_run"]
