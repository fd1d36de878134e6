"""A run folder: the only code that creates, locks, appends to, resumes and reads one.

A run folder holds

* ``raw.csv``: one row per trial (``ringlab.schema`` is the column contract), written
  by ``RunFolder.append`` and read by ``read_raw``;
* ``env.json``: what ran, where and how it ended, written by ``RunFolder.write_env``
  and read by ``read_env``;
* ``summary.md``, ``summary.csv``, ``summary.tex``, ``compare.csv``, ``mail.txt``, logs,
  the patch under test and ``figures/``: rendered by the report and the studies, written
  by ``files.py`` (``write_text``, ``write_csv``, ``write_figure``, ``append_line``).

No other module writes into a run folder (tests/test_run_folder_owner.py checks it).

env.json (``ENV_VERSION`` 2) is nested: run metadata at the top, the machine
(``ringlab.system.envinfo.collect()``) under ``"environment"``::

    {"env_version": 2, "kind": "run" | "environment" | "compare-runs",
     "schema_version": 4, "ringlab_version", "run_id", "experiment", "host", "pid",
     "started_utc", "ended_utc", "resumed_utc": [...],
     "status": "running" | "complete" | "failed" | "interrupted" | "skipped",
     "status_reason", "trials": {"planned", "ok", "failed", "timeout", "skipped"},
     "parameters", "command", "git", "build", "binaries_used", "plan", "governor",
     "cpu_lock", "quiet", "c2c_latency_ns", "warnings", "skipped_reason",
     "run_constants": {column: text}, "raw_values": {column: [text, ...]},
     "environment": {...}}

``schema_version`` is the layout of the folder's raw.csv; from version 4 raw.csv keeps its run
constants in ``run_constants`` and ``raw_values`` (``rawconstants.py``), written before the
first row that needs them, and ``read_raw`` fills them back.

Older files are read as well: version-1 run folders (the same nesting, no
``env_version``), flat environment runs (``envinfo.collect()`` at the top) and
compare-runs files; ``read_env`` returns them in the shape above.

Status.  A run ends ``complete``; ``failed`` when no trial succeeded or more than
``FAILED_MAX_FRACTION`` of its trials crashed, failed to parse or timed out (its
exit code is then non-zero); ``interrupted`` after SIGINT/SIGTERM/SIGHUP or a full disk; ``skipped`` when
the experiment cannot run on this machine (env.json says why).  A run killed
outright leaves ``running`` in env.json: ``RunFolder.status()`` reports it as
``interrupted`` when no process holds the folder's lock.

Locking.  The folder itself is locked (``flock`` on the directory, exclusive, for the
life of a run or a ``--resume``): a second one fails at once with ``RunLockedError``
naming the holder's PID.

Reading.  :class:`Run` (``run.py``) is the one read model of a run folder: raw.csv, env.json,
the summary files and the executed notebook; every reader outside this package goes through it
(tests/test_one_read_model.py checks it), and ``Run.baseline`` applies the one baseline rule
(``baseline.py``).

Files: ``rawcsv.py`` (the crash-safe appender, ``repair_csv``, ``read_raw``,
``read_done``, ``resume_keys``: the one header check of a resume), ``rawrows.py`` (the checks of
raw.csv's header and rows), ``rawconstants.py`` (the run constants version 4 keeps in env.json),
``envjson.py`` (atomic write, ``read_env``), ``run.py`` (``Run``),
``baseline.py`` (``pick_baseline``); this module holds the folder, its lock and its status.
"""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab.errors import DataError, DiskFullError, ParamError, RunLockedError
from ringlab.rundir.files import (LOG_FILES, TEXT_FILES, append_line, write_bytes, write_csv, write_figure,
                                  write_text)
from ringlab.rundir.envjson import ENV_VERSION, BuildRecord, GitRecord, RunEnv, atomic_write_json, read_env
from ringlab.rundir.rawcsv import (CsvSink, cells, count_file, count_trials, read_done, read_raw, repair_csv,
                                  require_metric, resume_keys)
from ringlab.rundir.rawconstants import RawConstants, stored_columns
from ringlab.schema import SCHEMA_VERSION
from ringlab.rundir.baseline import pick_baseline, run_variants
from ringlab.rundir.run import COMPARE_CSV, ENV_JSON, RAW_CSV, SUMMARY_CSV, SUMMARY_MD, Run, raw_experiment

#: a run in which more than this fraction of the trials failed (crash, error, timeout)
#: ends ``failed`` and ``ringlab run`` exits non-zero; so does a run with no ok trial
FAILED_MAX_FRACTION = 0.5
#: statuses of a run (env.json "status")
RUN_STATUSES = ("running", "complete", "failed", "interrupted", "skipped")


# -- small helpers ---------------------------------------------------------------------------
def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


# -- the run folder -----------------------------------------------------------------------------
def _lock_holder(path: Path) -> int | None:
    """PID of the process holding the folder's flock: env.json's pid, else /proc/locks."""
    try:
        ino = os.stat(path).st_ino
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].endswith(f":{ino}"):
                return int(parts[4])
    except (OSError, ValueError):
        pass
    try:
        return int(read_env(path).get("pid"))
    except (DataError, TypeError, ValueError):
        return None


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


def annotate(path: str | os.PathLike, **fields: Any) -> None:
    """Add fields to a finished run's env.json (e.g. how its report was asked for), leaving its
    status alone.  Takes the folder's lock for the write: a run still in progress refuses."""
    folder = RunFolder(path)
    if not folder.env_json.is_file():
        raise DataError(f"{folder.env_json}: no env.json to annotate; expected a run folder")
    folder._lock()
    try:
        doc = dict(read_env(folder.path).doc)
        if all(doc.get(k) == v for k, v in fields.items()):
            return
        doc.update(fields)
        atomic_write_json(folder.env_json, doc)
    finally:
        folder._unlock()


class RunFolder:
    """One run folder.  ``with RunFolder(path, mode="create") as f:`` creates and locks it;
    ``mode="resume"`` locks an existing one; ``mode="write"`` (the environment and
    compare-runs folders, which hold no raw.csv) locks a new or existing folder and starts
    a fresh env.json; ``RunFolder(path)`` only reads.

    While held: ``f.env`` (the env.json dict), ``f.fields`` (read through ``RunEnv``),
    ``f.write_env(**fields)``, ``f.update_env(**fields)`` (written on exit),
    ``f.open_csv(columns, config_keys)`` (repairs and returns the done keys),
    ``f.append(rows)``, ``f.trials``.  On exit the status is written: ``complete`` or
    ``failed`` (``judge``), ``interrupted`` on KeyboardInterrupt or DiskFullError, ``failed`` with the
    error on any other exception; the lock is released.
    """

    def __init__(self, path: str | os.PathLike, mode: str = "read", kind: str = "run"):
        if mode not in ("read", "create", "resume", "write"):
            raise ValueError(f"mode {mode!r}")
        self.path, self.mode, self.kind = Path(path), mode, kind
        self.raw_csv, self.env_json = self.path / "raw.csv", self.path / "env.json"
        self.env: dict[str, Any] = {}
        self.trials: dict[str, int] = count_trials(())
        self.final_status: str | None = None
        self._dirfd: int | None = None
        self._sink: CsvSink | None = None
        self._columns: list[str] = []
        self._constants: RawConstants | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "RunFolder":
        if self.mode == "read":
            return self
        if self.mode == "create":
            if self.path.exists():
                raise ParamError(f"parameter '--out': {self.path} already exists; allowed: a new folder"
                                 + (" (or pass --resume to continue the run in it)"
                                    if (self.path / "env.json").is_file() else ""))
            self.path.mkdir(parents=True)
        elif self.mode == "write":
            self.path.mkdir(parents=True, exist_ok=True)
        self._lock()
        if self.mode == "resume":
            self.env = dict(read_env(self.path).doc)
            self.env.setdefault("resumed_utc", []).append(utc_now())
        else:
            self.env = {"env_version": ENV_VERSION, "kind": self.kind, "started_utc": utc_now()}
        self.env.update(env_version=ENV_VERSION, kind=self.env.get("kind") or self.kind, pid=os.getpid(),
                        status="running", ended_utc=None)
        return self

    def __exit__(self, et, ev, _tb) -> bool:
        try:
            if self._sink is not None:
                self._sink.sync()       # raw.csv's rows reach the disk before env.json counts them
            if self.mode != "read" and self.env:
                if et is None and self.final_status:
                    status, reason = self.final_status, self.env.get("status_reason") or ""
                elif et is None:
                    status, reason = judge(self.trials)
                elif issubclass(et, (KeyboardInterrupt, DiskFullError)):
                    status, reason = "interrupted", str(ev) or "interrupted"
                else:
                    status, reason = "failed", f"{et.__name__}: {ev}"
                self.final_status = status
                self.env.update(status=status, status_reason=reason, ended_utc=utc_now(), trials=self.trials)
                self.env.pop("pid", None)
                try:   # when even this fails, "running" with no lock held reads as interrupted
                    atomic_write_json(self.env_json, self.env)
                except (OSError, DiskFullError):
                    pass
        finally:
            if self._sink is not None:
                self._sink.close()
                self._sink = None
            self._unlock()
        return False

    def _lock(self) -> None:
        self._dirfd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self._dirfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self._dirfd)
            self._dirfd = None
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise self._locked_error() from None

    def check_free(self) -> None:
        """Raise RunLockedError now if another process holds the folder (a fast check before
        waiting for CPUs; entering the folder takes the lock for real)."""
        if self.path.is_dir() and self.is_locked():
            raise self._locked_error()

    def _locked_error(self) -> RunLockedError:
        pid = _lock_holder(self.path)
        return RunLockedError(f"run folder {self.path} is in use by {f'PID {pid}' if pid else 'another process'} "
                              "(a run or --resume in progress); wait for it to end, or stop it first", pid)

    def _unlock(self) -> None:
        if self._dirfd is not None:
            os.close(self._dirfd)  # closing the last descriptor releases the flock
            self._dirfd = None

    @property
    def fields(self) -> RunEnv:
        """env.json's fields as written so far, read through :class:`RunEnv` (a view of ``env``)."""
        return RunEnv(self.env_json, ENV_VERSION, str(self.env.get("kind") or self.kind), self.env)

    # -- writing ---------------------------------------------------------------------------------------
    def update_env(self, **fields: Any) -> None:
        """Update env.json's fields in memory; they are written with the next ``write_env`` or
        when the folder is released."""
        self.env.update(fields)

    def write_env(self, **fields: Any) -> None:
        """Update env.json's fields and write it atomically (the only writer of env.json)."""
        if self._dirfd is None:
            raise RuntimeError(f"{self.path}: env.json is written only while the folder is held")
        self.env.update(fields)
        atomic_write_json(self.env_json, self.env)

    def open_csv(self, columns: list[str], config_keys: list[str], log=None) -> set:
        """Open raw.csv for appending (repairing a torn last line on resume); the keys already done.

        ``columns`` is the full layout (``schema.ordered_columns``).  A new raw.csv is written in
        schema version 4 (``rawconstants``: the run constants in env.json, ``schema_version`` 4);
        a resumed one keeps the layout its header has (a version-3 file gets full rows)."""
        if self.mode == "resume":
            removed = repair_csv(self.raw_csv)
            if removed and log:
                log(f"resume: removed a torn last line ({removed} bytes) from raw.csv")
        done, header = resume_keys(self.raw_csv, config_keys, columns)
        if header is not None:
            self.trials = count_file(self.raw_csv)
        self._columns = list(columns)
        if header is None or header != columns:
            self._constants = RawConstants(columns, self.env)
            if header is None:
                self.write_env(schema_version=SCHEMA_VERSION, **self._constants.env_fields())
        self._sink = CsvSink(self.raw_csv, stored_columns(columns) if self._constants else columns)
        return done

    def append(self, rows: list[dict[str, Any]]) -> None:
        """One trial's rows, written and flushed at once; the first row's status is counted."""
        if self._sink is None:
            raise RuntimeError("open_csv() first")
        if self._constants is None:
            self._sink.write_rows(rows)
        else:
            stored, changed = self._constants.encode(cells(rows, self._columns))
            if changed:   # env.json holds every cell a written row refers to
                self.write_env(**self._constants.env_fields())
            self._sink.write_cells(stored)
        if rows:
            for k, v in count_trials([rows[0].get("status")]).items():
                self.trials[k] += v

    def finish(self, status: str, reason: str = "") -> None:
        """Force the final status (``skipped``) instead of judging the trial counts."""
        self.final_status = status
        self.env["status_reason"] = reason

    # -- reading ---------------------------------------------------------------------------------------
    def read_raw(self) -> pd.DataFrame:
        """raw.csv; while this process holds the folder (a run), its own rows are read as written."""
        if self.mode != "read":
            return read_raw(self.raw_csv, torn_ok=True, strict=False)
        return read_raw(self.raw_csv)

    def read_env(self, experiment: str | None = None) -> RunEnv:
        return read_env(self.path, experiment)

    def is_locked(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)

    def status(self) -> RunStatus:
        """The run's status, from env.json, raw.csv and the lock (a killed run: interrupted)."""
        env = read_env(self.path)
        state = env.status or "complete"
        trials = count_file(self.raw_csv) if self.raw_csv.is_file() else dict(env.get("trials") or {})
        reason = env.get("status_reason") or env.get("skipped_reason") or ""
        pid = None
        if state == "running":
            if self.is_locked():
                pid = _lock_holder(self.path)
            else:
                state, reason = "interrupted", "killed: env.json still says running and no process holds the folder"
        elif isinstance(state, str) and state.startswith("failed:"):  # version-1 wording
            state, reason = "failed", state[len("failed: "):]
        return RunStatus(state, trials, reason, pid)

    def status_line(self) -> str:
        """One line for the top of a summary: empty for a complete run, else its status and counts."""
        try:
            st = self.status()
        except DataError as e:
            return f"Run status: unknown ({e})"
        if st.state == "complete":
            return ""
        counts = ", ".join(f"{st.trials.get(k, 0)} {k}" for k in ("ok", "failed", "timeout"))
        planned = ((self.read_env().get("plan") or {}).get("trials_total"))
        of = f" of {planned} planned" if planned else ""
        line = f"Run status: {st.state.upper()}: {counts} trial(s){of}"
        if st.reason:
            line += f"; {st.reason}"
        if st.state == "running" and st.pid:
            line += f" (PID {st.pid} is still writing it)"
        if st.state == "interrupted":
            line += f"; continue it with `ringlab run {self.read_env().get('experiment') or 'EXPERIMENT'} --out {self.path} --resume`"
        return line + "."


def read_run(path: str | os.PathLike, need_env: bool = False) -> tuple[pd.DataFrame, RunEnv | None]:
    """raw.csv and env.json of a run folder (``Run(path).read(need_env)``)."""
    return Run(path).read(need_env)


__all__ = ["Run", "RAW_CSV", "ENV_JSON", "SUMMARY_MD", "SUMMARY_CSV", "COMPARE_CSV", "pick_baseline", "run_variants", "resume_keys", "RunFolder", "RunEnv", "GitRecord", "BuildRecord", "RunStatus", "read_raw", "read_env", "read_run", "raw_experiment", "require_metric", "CsvSink", "repair_csv", "read_done",
           "count_trials", "judge", "atomic_write_json", "utc_now", "ENV_VERSION",
           "FAILED_MAX_FRACTION", "DataError", "TEXT_FILES", "LOG_FILES", "write_text", "write_bytes",
           "write_csv", "write_figure", "append_line"]
