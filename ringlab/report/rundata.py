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
from ringlab.rundir import RunFolder, raw_experiment


@dataclass
class RunData:
    path: Path
    raw: pd.DataFrame | None          # None when the folder has no raw.csv (environment, compare-runs)
    env: dict = field(default_factory=dict)
    status: str = "unknown"
    status_line: str = ""             # "" for a complete run, else "Run status: ...: counts; reason."


def read_run(run_dir, require_raw: bool = True, load_raw: bool = True) -> RunData:
    """raw.csv + env.json + status of ``run_dir``.  A missing raw.csv (when required), a
    corrupt raw.csv or env.json, or an env.json of another experiment raises ``DataError``
    naming the file; a missing env.json reads as {} with status "unknown".  ``load_raw=False`` reads
    env.json and the status only (``raw`` is None)."""
    folder = RunFolder(Path(run_dir))
    raw = None
    if load_raw:
        if not folder.raw_csv.is_file() and not folder.raw_csv.exists():
            if require_raw:
                raise DataError(f"run_dir: no raw.csv in {folder.path}")
        else:
            raw = folder.read_raw()
    env, status, line = {}, "unknown", ""
    if folder.env_json.exists() or folder.env_json.is_symlink():
        # a corrupt env.json, or one of another experiment than raw.csv's: DataError naming it
        env = folder.read_env(raw_experiment(raw) if raw is not None else None).doc
        try:
            st = folder.status()
            status, line = st.state, folder.status_line()
        except DataError:
            pass
    return RunData(folder.path, raw, env, status, line)


__all__ = ["RunData", "read_run"]
