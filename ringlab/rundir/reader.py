"""``RunOutput``: the read model of one run folder, the only reader of its files.

Every module that reads a run folder (the report, ``ringlab mail``, ``ringlab.open``, compare-runs,
bisect, the fleet, the results index, the runner resuming) goes through a ``RunOutput``::

    run = RunOutput(path)
    run.raw            # raw.csv, checked row by row (rawrows.py: header, bounds, caps)
    run.env            # env.json as a RunEnv (empty without one), checked (envjson.py: no NaN/Inf,
                       # no duplicate keys) and, once raw.csv was read, of raw.csv's experiment
    run.env_file       # the RunEnv itself (DataError without a readable env.json)
    run.env_doc        # env.json, or an empty RunEnv when it is missing or unreadable (reports degrade)
    run.status         # "complete", "failed", ..., "unknown" without env.json; status_line
    run.baseline()     # the one baseline rule (baseline.py)
    run.notebook       # the executed notebook (first *.ipynb), run.papermill(): its metadata
    run.summary_md     # the text of summary.md (None without one); summary_csv, compare_csv

Reading is lazy: a file is read on first use, once.  Nothing here writes (``RunFolder`` and
``files.py`` do).  Every file is opened through ``inputs.open_input``: never through a symbolic
link, only a regular file (a step folder that is a link is not one of the run's steps).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab.errors import DataError
from ringlab.rundir.baseline import pick_baseline, run_variants
from ringlab.rundir.envjson import RunEnv, read_env
from ringlab.rundir.folder import RunFolder
from ringlab.rundir.inputs import open_input, read_input
from ringlab.rundir.rawcsv import read_raw, resume_keys

#: the files of a run folder a reader asks for by name
RAW_CSV, ENV_JSON = "raw.csv", "env.json"
SUMMARY_MD, SUMMARY_CSV, COMPARE_CSV = "summary.md", "summary.csv", "compare.csv"


def raw_experiment(df: pd.DataFrame) -> str | None:
    """The experiment named by raw.csv's ``experiment`` column (None when it has none, or several)."""
    if "experiment" not in df.columns:
        return None
    names = {str(x) for x in df["experiment"].dropna().unique()}
    return names.pop() if len(names) == 1 else None


def _there(p: Path) -> bool:
    return p.exists() or p.is_symlink()


class RunOutput:
    """What a run wrote: one run folder, read on demand (see the module docstring).

    ``names`` = (experiment, host, run id): the folder's place in
    ``results/<experiment>/<host>/<run-id>``; by default env.json's host and experiment
    where the folder is not laid out so."""

    def __init__(self, path: str | os.PathLike, names: tuple[str, str, str] | None = None):
        self.path = Path(path)
        self.raw_csv, self.env_json = self.path / RAW_CSV, self.path / ENV_JSON
        self._names = names
        self._raw: pd.DataFrame | None = None
        self._env: dict[str | None, RunEnv] = {}
        self._status: tuple[str, str] | None = None

    def __repr__(self) -> str:
        return f"RunOutput({str(self.path)!r})"

    # -- which files there are -------------------------------------------------------------------
    @property
    def has_raw(self) -> bool:
        return _there(self.raw_csv)

    @property
    def has_env(self) -> bool:
        return _there(self.env_json)

    # -- raw.csv -----------------------------------------------------------------------------------
    @property
    def raw(self) -> pd.DataFrame:
        """raw.csv (every row), read once; DataError naming the file when it is missing or corrupt."""
        if self._raw is None:
            if not self.raw_csv.exists():
                raise DataError(f"run_dir: no raw.csv in {self.path}")
            self._raw = read_raw(self.raw_csv)
        return self._raw

    def read_raw(self, required: tuple[str, ...] = ("variant",), **kw: Any) -> pd.DataFrame:
        """raw.csv read now with these checks (``rawcsv.read_raw``: ``required`` columns, ``torn_ok``,
        ``strict``); not kept."""
        return read_raw(self.raw_csv, required=required, **kw)

    def read(self, need_env: bool = False) -> tuple[pd.DataFrame, RunEnv | None]:
        """raw.csv and env.json, both checked and consistent: env.json's experiment is the one
        raw.csv names.  A missing env.json gives None (an error with ``need_env``); every other
        problem, a path that is not a folder included, is a DataError naming the file."""
        if _there(self.path) and not self.path.is_dir():
            raise DataError(f"{self.path}: not a folder; expected a run folder (raw.csv + env.json) written by "
                            "`ringlab run`")
        if self._raw is None:
            self._raw = read_raw(self.raw_csv)
        if not need_env and not self.has_env:
            return self._raw, None
        return self._raw, self._read_env(raw_experiment(self._raw))

    def resume_keys(self, config_keys: list[str], columns: list[str], plan=None) -> tuple[set, list[str] | None]:
        """The trial keys already in raw.csv and its header, for ``--resume``; RunnerError when the
        header is not ``columns`` (the one header check), DataError naming the line of a row that
        is not a trial of ``plan`` (the run's ``TrialSpec``s, when given) or repeats one."""
        return resume_keys(self.raw_csv, config_keys, columns, plan)

    @property
    def variants(self) -> list[str]:
        """raw.csv's variants in order of first appearance."""
        return run_variants(self.raw)

    # -- env.json -------------------------------------------------------------------------------------
    def _read_env(self, experiment: str | None) -> RunEnv:
        if experiment not in self._env:
            self._env[experiment] = read_env(self.path, experiment)
        return self._env[experiment]

    @property
    def env_file(self) -> RunEnv:
        """env.json as a :class:`RunEnv`; DataError naming the file when it is missing or corrupt."""
        return self._read_env(None)

    @property
    def env(self) -> RunEnv:
        """env.json as a :class:`RunEnv` (an empty one without an env.json); DataError when it is
        corrupt or, once raw.csv was read, names another experiment than raw.csv."""
        if not self.has_env:
            return RunEnv.of({})
        return self._read_env(raw_experiment(self._raw) if self._raw is not None else None)

    @property
    def env_doc(self) -> RunEnv:
        """env.json as a :class:`RunEnv` of its own copy of the fields, or an empty one when it is
        missing or unreadable (reports degrade, never fail)."""
        try:
            if self.env_json.is_file():
                f = self.env_file
                return RunEnv(f.path, f.version, f.kind, dict(f.doc))
        except (OSError, DataError):
            pass
        return RunEnv.of({})

    # -- status -----------------------------------------------------------------------------------------
    def _state(self) -> tuple[str, str]:
        if self._status is None:
            state, line = "unknown", ""
            if self.has_env:
                self.env   # a corrupt env.json: DataError naming it
                folder = RunFolder(self.path)
                try:
                    state, line = folder.status().state, folder.status_line()
                except DataError:
                    pass
            self._status = (state, line)
        return self._status

    @property
    def status(self) -> str:
        """"complete", "failed", "interrupted", "running", "skipped", or "unknown" when no env.json
        says (a killed run, "running" with no lock held, reads as interrupted)."""
        return self._state()[0]

    @property
    def status_line(self) -> str:
        """"" for a complete run, else "Run status: ...: counts; reason."."""
        return self._state()[1]

    def run_status(self):
        """The :class:`RunStatus` of the folder (env.json, raw.csv and the lock); DataError when
        env.json cannot be read."""
        return RunFolder(self.path).status()

    # -- names --------------------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, str, str]:
        if self._names is None:
            env = self.env_doc
            host = env.host
            if host and self.path.parent.name == str(host) and len(self.path.absolute().parts) >= 4:
                self._names = (self.path.parent.parent.name, str(host), self.path.name)
            else:
                self._names = (str(env.experiment or self.path.name), str(host or self.path.parent.name),
                               self.path.name)
        return self._names

    @property
    def experiment(self) -> str:
        return self.names[0]

    @property
    def host(self) -> str:
        return self.names[1]

    @property
    def run_id(self) -> str:
        return self.names[2]

    # -- the baseline ---------------------------------------------------------------------------------------
    def baseline(self, asked: str | None = None, **kw: Any) -> str | None:
        """The run's baseline by the one rule (:mod:`ringlab.rundir.baseline`)."""
        return pick_baseline(self.raw, self.env, asked, **kw)

    # -- the summary files and the executed notebook ---------------------------------------------------------
    def _text(self, name: str) -> str | None:
        p = self.path / name
        if not p.is_file():
            return None
        return read_input(p, f"the {name} ringlab writes").decode("utf-8", errors="replace")

    @property
    def summary_md(self) -> str | None:
        """The text of summary.md, None without one."""
        return self._text(SUMMARY_MD)

    def table(self, name: str) -> pd.DataFrame | None:
        """summary.csv or compare.csv as written, None without it."""
        if name not in (SUMMARY_CSV, COMPARE_CSV):
            raise ValueError(f"name: {name!r}; allowed: {SUMMARY_CSV}, {COMPARE_CSV}")
        p = self.path / name
        if not p.is_file():
            return None
        with open_input(p, f"the {name} ringlab writes") as f:
            return pd.read_csv(f)

    @property
    def summary_csv(self) -> pd.DataFrame | None:
        return self.table(SUMMARY_CSV)

    @property
    def compare_csv(self) -> pd.DataFrame | None:
        return self.table(COMPARE_CSV)

    @property
    def notebooks(self) -> list[Path]:
        """The executed notebooks of the folder (``*.ipynb``), by name."""
        return sorted(self.path.glob("*.ipynb"))

    @property
    def notebook(self) -> Path | None:
        """The executed notebook (the first ``*.ipynb``), None without one."""
        nbs = self.notebooks
        return nbs[0] if nbs else None

    @staticmethod
    def papermill(notebook: Path) -> dict[str, Any] | None:
        """The papermill metadata of an executed notebook ({} without any), None when the file
        cannot be read as a notebook."""
        try:   # a DataError (a link, not a regular file) is a ValueError
            doc = json.loads(read_input(notebook, "an executed notebook").decode("utf-8"))
        except (OSError, ValueError):
            return None
        meta = doc.get("metadata", {}) if isinstance(doc, dict) else {}
        pm = meta.get("papermill", {}) if isinstance(meta, dict) else {}
        return pm if isinstance(pm, dict) else {}

    # -- a folder of runs (bisect steps) --------------------------------------------------------------------
    def steps(self) -> list["RunOutput"]:
        """The run folders of a bisection's steps (``steps/*/`` holding an env.json), in order."""
        return [RunOutput(p.parent) for p in sorted(self.path.glob(f"steps/*/{ENV_JSON}"))
                if not p.parent.is_symlink() and not (self.path / "steps").is_symlink()]


def read_run(path: str | os.PathLike, need_env: bool = False) -> tuple[pd.DataFrame, RunEnv | None]:
    """raw.csv and env.json of a run folder (``RunOutput(path).read(need_env)``)."""
    return RunOutput(path).read(need_env)


__all__ = ["RunOutput", "read_run", "raw_experiment", "RAW_CSV", "ENV_JSON", "SUMMARY_MD", "SUMMARY_CSV", "COMPARE_CSV"]

