"""A run folder: the only code that creates, locks, appends to, resumes and reads one.

A run folder holds

* ``raw.csv``: one row per trial (``ringlab.schema`` is the column contract), written
  by ``RunFolder.append`` and read by ``read_raw``;
* ``env.json``: what ran, where and how it ended, written by ``RunFolder.write_env``
  and read by ``read_env``.

env.json (``ENV_VERSION`` 2) is nested: run metadata at the top, the machine
(``ringlab.system.envinfo.collect()``) under ``"environment"``::

    {"env_version": 2, "kind": "run" | "environment" | "compare-runs",
     "schema_version": 2, "ringlab_version", "run_id", "experiment", "host", "pid",
     "started_utc", "ended_utc", "resumed_utc": [...],
     "status": "running" | "complete" | "failed" | "interrupted" | "skipped",
     "status_reason", "trials": {"planned", "ok", "failed", "timeout", "skipped"},
     "parameters", "command", "git", "build", "binaries_used", "plan", "governor",
     "cpu_lock", "quiet", "c2c_latency_ns", "warnings", "skipped_reason",
     "environment": {...}}

Older files are read as well: version-1 run folders (the same nesting, no
``env_version``), flat environment runs (``envinfo.collect()`` at the top) and
compare-runs files; ``read_env`` returns them in the shape above.

Status.  A run ends ``complete``; ``failed`` when no trial succeeded or more than
``FAILED_MAX_FRACTION`` of its trials crashed, failed to parse or timed out (its
exit code is then non-zero); ``interrupted`` after SIGINT/SIGTERM; ``skipped`` when
the experiment cannot run on this machine (env.json says why).  A run killed
outright leaves ``running`` in env.json: ``RunFolder.status()`` reports it as
``interrupted`` when no process holds the folder's lock.

Locking.  The folder itself is locked (``flock`` on the directory, exclusive, for the
life of a run or a ``--resume``): a second one fails at once with ``RunLockedError``
naming the holder's PID.

Crash safety: raw.csv is opened with O_APPEND, the header goes first, and each trial's
rows go out in one write() followed by fsync, with newlines inside fields escaped so one
row is always one line.  A SIGKILL therefore leaves at most a torn last line, which
``--resume`` truncates away before rerunning the trial that was in flight.
"""
from __future__ import annotations

import csv
import datetime as _dt
import errno
import fcntl
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import schema
from ringlab.errors import DataError, ParamError, RunLockedError, RunnerError

#: version of env.json's layout (see the module docstring)
ENV_VERSION = 2
#: a run in which more than this fraction of the trials failed (crash, error, timeout)
#: ends ``failed`` and ``ringlab run`` exits non-zero; so does a run with no ok trial
FAILED_MAX_FRACTION = 0.5
#: statuses a trial can end with (schema.TRIAL_COLUMNS "status")
TRIAL_STATUSES = ("ok", "crash", "timeout", "error", "skipped")
#: statuses of a run (env.json "status")
RUN_STATUSES = ("running", "complete", "failed", "interrupted", "skipped")
#: integer columns that every reader relies on
INT_COLUMNS = ("trial", "round", "iteration", "order")


# -- small helpers ---------------------------------------------------------------------------
def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def atomic_write_json(path: Path, doc: dict) -> None:
    """temp + fsync + rename: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


_SHA_CACHE: dict[tuple, str] = {}


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file, cached by (path, size, mtime) so per-trial hashing costs nothing."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


# -- raw.csv: writing ----------------------------------------------------------------------------
def _cell(v: Any) -> str:
    """One CSV cell.  str() for parameters (so TrialSpec.key() can be rebuilt from the
    file), repr precision for floats, and no raw newlines: one row is one line."""
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    s = str(v)
    if "\n" in s or "\r" in s:
        s = s.replace("\r", "").replace("\n", "\\n")
    return s


class CsvSink:
    """Append-only raw.csv: header first, then each trial's rows in one write + fsync."""

    def __init__(self, path: Path, columns: list[str]):
        self.path, self.columns = path, columns
        new = not path.exists() or path.stat().st_size == 0
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if new:
            self._write([columns])

    def _write(self, rows: list[list[str]]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        data = buf.getvalue().encode()
        while data:  # os.write may be partial in theory; loop until all is out
            n = os.write(self.fd, data)
            data = data[n:]
        os.fsync(self.fd)

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        self._write([[_cell(r.get(c)) for c in self.columns] for r in rows])

    def close(self) -> None:
        os.close(self.fd)


def repair_csv(path: Path) -> int:
    """Truncate a torn last line (a SIGKILL during a write); return bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        # Scan back to the last newline.
        pos, chunk = size, 4096
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            i = data.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return size - keep


# -- raw.csv: reading ----------------------------------------------------------------------------
def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}: line {line}, column {col}: byte 0x{data[e.start]:02x} is not UTF-8; "
                        "expected UTF-8 text as `ringlab run` writes it") from None


def _check_rows(path: Path, text: str, required: tuple[str, ...]) -> tuple[list[str], int]:
    """Validate the CSV structure; return the header and the number of a torn last line (0: none)."""
    lines = text.split("\n")
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        header = []
    except csv.Error as e:
        raise DataError(f"{path}: line 1: {e}; expected the raw.csv header") from None
    if not header or not any(h.strip() for h in header):
        raise DataError(f"{path}: line 1: empty file; expected a header naming the raw.csv columns "
                        f"({', '.join(schema.ID_COLUMNS)}, ...) and one row per trial")
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(f"{path}: line 1: the header has no column {', '.join(repr(m) for m in missing)}; "
                        f"expected a raw.csv written by `ringlab run` (got: {', '.join(header[:8])}"
                        f"{' ...' if len(header) > 8 else ''})")
    torn, n_rows = 0, 0
    idx = {c: header.index(c) for c in INT_COLUMNS if c in header}
    last_line = len(lines) - (1 if text.endswith("\n") else 0)
    try:
        for row in reader:
            lineno = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                if lineno == last_line and not text.endswith("\n"):
                    torn = lineno  # what a killed run leaves; --resume repairs it
                    break
                raise DataError(f"{path}: line {lineno}: {len(row)} fields; expected {len(header)} "
                                "(one per header column)")
            n_rows += 1
            for c, i in idx.items():
                v = row[i].strip()
                if c in ("iteration", "round") and v == "":
                    continue
                try:
                    int(v)
                except ValueError:
                    raise DataError(f"{path}: line {lineno}: column '{c}' is {row[i]!r}; expected an integer"
                                    ) from None
    except csv.Error as e:
        raise DataError(f"{path}: line {reader.line_num}: {e}; expected one CSV row per line") from None
    if n_rows == 0:
        raise DataError(f"{path}: line 1: a header and no rows; expected at least one trial row "
                        "(the run recorded no trial)")
    return header, torn


def read_raw(path: str | os.PathLike, required: tuple[str, ...] = ("variant",)) -> pd.DataFrame:
    """raw.csv as a DataFrame, or ``DataError`` naming the file, the line and what was expected.

    Checks: UTF-8, a header with the ``required`` columns, at least one row, the same
    number of fields in every row, integers in ``trial``/``round``/``iteration``/``order``.
    A torn last line (a killed run) is left out.  Files written before the ``round``
    column existed get ``round`` = ``trial``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "raw.csv"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; expected a raw.csv written by `ringlab run`") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror}); expected a readable raw.csv") from None
    text = _decode(path, data)
    _, torn = _check_rows(path, text, required)
    if torn:
        text = text[:text.rfind("\n") + 1]
    try:
        df = pd.read_csv(io.StringIO(text), low_memory=False)
    except (ValueError, pd.errors.ParserError) as e:
        raise DataError(f"{path}: {e}; expected a raw.csv written by `ringlab run`") from None
    if "round" not in df.columns and "trial" in df.columns:
        df.insert(df.columns.get_loc("trial") + 1, "round", df["trial"])
    return df


def _done_key(row: list[str], idx: dict[str, int], config_keys: list[str]) -> tuple:
    key = tuple(sorted((k, row[idx[k]]) for k in config_keys)) + (
        ("cpus", f"{row[idx['cpu_req_producer']]}:{row[idx['cpu_req_consumer']]}"),
        ("trial", int(row[idx["trial"]])))
    if "icount_source" in idx and row[idx["icount_source"]] == "callgrind":
        key += (("kind", "icount"),)
    return key


def read_done(path: Path, config_keys: list[str]) -> tuple[set, list[str] | None]:
    """Keys (as TrialSpec.key()) of the trials already in raw.csv, and its header."""
    done: set = set()
    if not path.exists() or path.stat().st_size == 0:
        return done, None
    text = _decode(path, path.read_bytes())
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return done, None
    idx = {c: i for i, c in enumerate(header)}
    missing = [c for c in config_keys + ["cpu_req_producer", "cpu_req_consumer", "trial"] if c not in idx]
    if missing:
        raise DataError(f"{path}: line 1: cannot resume, the header has no column {missing}; "
                        "expected the raw.csv of the interrupted run")
    torn_at = text.count("\n") + 1 if not text.endswith("\n") else None   # repair_csv removes it
    for row in reader:
        if len(row) != len(header):
            if reader.line_num == torn_at:
                break
            raise DataError(f"{path}: line {reader.line_num}: {len(row)} fields; expected {len(header)} "
                            "(one per header column)")
        try:
            done.add(_done_key(row, idx, config_keys))
        except ValueError:
            raise DataError(f"{path}: line {reader.line_num}: column 'trial' is {row[idx['trial']]!r}; "
                            "expected an integer") from None
    return done, header


# -- env.json: reading ----------------------------------------------------------------------------
@dataclass
class RunEnv:
    """env.json of a run folder in the current layout (older layouts converted)."""
    path: Path
    version: int
    kind: str
    doc: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    @property
    def status(self) -> str | None:
        return self.doc.get("status")

    @property
    def environment(self) -> dict[str, Any]:
        e = self.doc.get("environment")
        return e if isinstance(e, dict) else {}

    @property
    def parameters(self) -> dict[str, Any]:
        return self.doc.get("parameters") or {}


def _normalize(doc: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    if "env_version" in doc:
        return int(doc["env_version"]), str(doc.get("kind") or "run"), doc
    if "environment" not in doc and ("cpu" in doc or "topology" in doc):
        # the environment run before version 2: envinfo.collect() at the top
        env = dict(doc)
        git = env.pop("git", None)
        host = env.get("host") if isinstance(env.get("host"), dict) else {}
        return 1, "environment", {"env_version": 1, "kind": "environment", "host": host.get("host_id"),
                                  "status": "complete", "git": git, "environment": env}
    kind = "run" if "run_id" in doc or "experiment" in doc else "compare-runs" if "inputs" in doc else "run"
    return 1, kind, dict(doc, env_version=1, kind=kind)


def read_env(run_dir: str | os.PathLike) -> RunEnv:
    """The one reader of env.json; ``DataError`` naming the file and line when it is not one."""
    p = Path(run_dir)
    if p.is_dir() or not p.name.endswith(".json"):
        p = p / "env.json"
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; expected the env.json of a run folder written by "
                        "`ringlab run`") from None
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror})") from None
    try:
        doc = json.loads(_decode(p, text))
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: line {e.lineno}, column {e.colno}: {e.msg}; expected a JSON object") from None
    if not isinstance(doc, dict):
        raise DataError(f"{p}: line 1: a JSON {type(doc).__name__}; expected a JSON object")
    version, kind, doc = _normalize(doc)
    return RunEnv(p, version, kind, doc)


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


def count_trials(statuses) -> dict[str, int]:
    """{"ok", "failed", "timeout", "skipped"} from trial statuses (crash and error are failed)."""
    out = {"ok": 0, "failed": 0, "timeout": 0, "skipped": 0}
    for s in statuses:
        s = str(s)
        out["failed" if s in ("crash", "error") else s if s in out else "failed"] += 1
    return out


def judge(trials: dict[str, int]) -> tuple[str, str]:
    """(status, reason) of a run that went to its end, from its trial counts."""
    bad = trials.get("failed", 0) + trials.get("timeout", 0)
    ran = trials.get("ok", 0) + bad
    if ran == 0:
        return "complete", "no trial to run"
    if trials.get("ok", 0) == 0:
        return "failed", f"no trial succeeded ({trials.get('failed', 0)} failed, {trials.get('timeout', 0)} timed out)"
    if bad > FAILED_MAX_FRACTION * ran:
        return "failed", (f"{bad} of {ran} trials failed or timed out (more than "
                          f"{FAILED_MAX_FRACTION:.0%})")
    return "complete", ""


class RunFolder:
    """One run folder.  ``with RunFolder(path, mode="create") as f:`` creates and locks it;
    ``mode="resume"`` locks an existing one; ``mode="write"`` (the environment and
    compare-runs folders, which hold no raw.csv) locks a new or existing folder and starts
    a fresh env.json; ``RunFolder(path)`` only reads.

    While held: ``f.env`` (the env.json dict), ``f.write_env(**fields)``,
    ``f.open_csv(columns, config_keys)`` (repairs and returns the done keys),
    ``f.append(rows)``, ``f.trials``.  On exit the status is written: ``complete`` or
    ``failed`` (``judge``), ``interrupted`` on KeyboardInterrupt, ``failed`` with the
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

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "RunFolder":
        if self.mode == "read":
            return self
        if self.mode == "create":
            if self.path.exists():
                raise ParamError(f"parameter '--out': {self.path} already exists; allowed: a new folder "
                                 "(or pass --resume to continue the run in it)")
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

    def __exit__(self, et, ev, tb) -> bool:
        try:
            if self.mode != "read" and self.env:
                if et is None and self.final_status:
                    status, reason = self.final_status, self.env.get("status_reason") or ""
                elif et is None:
                    status, reason = judge(self.trials)
                elif issubclass(et, KeyboardInterrupt):
                    status, reason = "interrupted", str(ev) or "interrupted"
                else:
                    status, reason = "failed", f"{et.__name__}: {ev}"
                self.final_status = status
                self.env.update(status=status, status_reason=reason, ended_utc=utc_now(), trials=self.trials)
                self.env.pop("pid", None)
                try:
                    atomic_write_json(self.env_json, self.env)
                except OSError:
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

    # -- writing ---------------------------------------------------------------------------------------
    def write_env(self, **fields: Any) -> None:
        """Update env.json's fields and write it atomically (the only writer of env.json)."""
        if self._dirfd is None:
            raise RuntimeError(f"{self.path}: env.json is written only while the folder is held")
        self.env.update(fields)
        atomic_write_json(self.env_json, self.env)

    def open_csv(self, columns: list[str], config_keys: list[str], log=None) -> set:
        """Open raw.csv for appending (repairing a torn last line on resume); the keys already done."""
        if self.mode == "resume":
            removed = repair_csv(self.raw_csv)
            if removed and log:
                log(f"resume: removed a torn last line ({removed} bytes) from raw.csv")
        done, header = read_done(self.raw_csv, config_keys)
        if header is not None and header != columns:
            raise RunnerError(f"{self.raw_csv}: its columns differ from this ringlab's raw.csv layout "
                              f"(schema version {schema.SCHEMA_VERSION}); cannot resume into it")
        if header is not None:
            self.trials = _count_file(self.raw_csv)
        self._sink = CsvSink(self.raw_csv, columns)
        return done

    def append(self, rows: list[dict[str, Any]]) -> None:
        """One trial's rows, written and flushed at once; the first row's status is counted."""
        if self._sink is None:
            raise RuntimeError("open_csv() first")
        self._sink.write_rows(rows)
        if rows:
            for k, v in count_trials([rows[0].get("status")]).items():
                self.trials[k] += v

    def finish(self, status: str, reason: str = "") -> None:
        """Force the final status (``skipped``) instead of judging the trial counts."""
        self.final_status = status
        self.env["status_reason"] = reason

    # -- reading ---------------------------------------------------------------------------------------
    def read_raw(self) -> pd.DataFrame:
        return read_raw(self.raw_csv)

    def read_env(self) -> RunEnv:
        return read_env(self.path)

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
        trials = _count_file(self.raw_csv) if self.raw_csv.is_file() else dict(env.get("trials") or {})
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


def _count_file(raw_csv: Path) -> dict[str, int]:
    """Trial counts of a raw.csv (first row of each trial), tolerant of a torn last line."""
    try:
        text = _decode(raw_csv, raw_csv.read_bytes())
    except (OSError, DataError):
        return count_trials(())
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None) or []
    if "status" not in header:
        return count_trials(())
    si = header.index("status")
    ii = header.index("iteration") if "iteration" in header else None
    sts = [r[si] for r in reader if len(r) == len(header) and (ii is None or r[ii] in ("0", ""))]
    return count_trials(sts)


__all__ = ["RunFolder", "RunEnv", "RunStatus", "read_raw", "read_env", "CsvSink", "repair_csv", "read_done",
           "count_trials", "judge", "atomic_write_json", "sha256_file", "utc_now", "ENV_VERSION",
           "FAILED_MAX_FRACTION", "DataError"]
