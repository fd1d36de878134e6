"""``RunFolder``: the writer of a run folder, the one code that creates, locks, appends to and
resumes one, and writes its env.json and its status when the run ends; ``annotate`` adds fields to
a finished run's env.json under the same lock."""
from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import os
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab.errors import DataError, DiskFullError, ParamError, RunLockedError
from ringlab.rundir.envjson import ENV_VERSION, RunEnv, atomic_write_json, read_env
from ringlab.rundir.rawconstants import RawConstants, stored_columns
from ringlab.rundir.rawcsv import CsvSink, cells, count_file, count_trials, read_raw, repair_csv, resume_keys
from ringlab.rundir.status import RunStatus, judge
from ringlab.schema import SCHEMA_VERSION


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
