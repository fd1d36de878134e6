"""raw.csv on disk: the crash-safe appender, the repair after a kill, and the one reader.

Written only through ``ringlab.rundir.RunFolder.append`` (which uses ``CsvSink``); read
through ``read_raw`` (a DataFrame, or ``DataError`` naming the file, the line and what
was expected) and, on --resume, ``read_done``.

Crash safety: raw.csv is opened with O_APPEND, the header goes first, and each trial's
rows go out in one write() as soon as the trial ends, with newlines inside fields escaped so
one row is always one line.  A written row is in the kernel's page cache at once, so a killed
or crashed ringlab loses no row; fsync, which only a power cut or a kernel crash needs, runs at
most every ``FSYNC_INTERVAL_S`` seconds between trials and when the file is closed (a power cut
loses at most that much of the run, which ``--resume`` measures again), so that the disk's
latency stays out of the per-trial cycle.  A SIGKILL leaves at most a torn last line, which
``repair_csv`` truncates away before --resume reruns the trial that was in flight.  A full
disk (a failed or short write) truncates the file back to its last complete row at once
and raises ``DiskFullError``.
"""
from __future__ import annotations

import csv
import errno
import io
import math
import os
import stat
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ringlab import schema
from ringlab.errors import DISK_FULL_ERRNOS, DataError, RunnerError, disk_full
from ringlab.rundir.rawrows import (INT_COLUMNS, LEGACY_COLUMNS, METRIC_COLUMNS, MAX_RAW_ROWS,  # noqa: F401
                                   check_rows, frame_passes, known_columns, scan_plain)
from ringlab.rundir.rawconstants import fill_constants, is_stored_layout, stored_columns, stored_constants
from ringlab.names import check_data_name, name_problem
from ringlab.rundir.inputs import clean, open_input, quote, read_input
from ringlab.rundir.planrows import PlanRows, duplicate

RAW_CSV_NAME = "raw.csv"
#: what a raw.csv must be (the end of every refusal of one)
RAW_EXPECTED = "a raw.csv written by `ringlab run`"
#: what the raw.csv a --resume continues must be
RESUME_EXPECTED = "the raw.csv of the interrupted run"

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


def cells(rows: list[dict[str, Any]], columns: list[str]) -> list[list[str]]:
    """``rows`` as raw.csv cells, one per column of ``columns``."""
    return [[_cell(r.get(c)) for c in columns] for r in rows]


def _open_own(path: Path, flags: int) -> int:
    """A descriptor of raw.csv for writing (``flags``), never through a symbolic link and only a
    regular file: DataError otherwise (a link planted in a run folder redirects no write)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DataError(f"{path}: a symbolic link; ringlab writes no file through a link; expected "
                            f"{RAW_EXPECTED}", input=path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DataError(f"{path}: not a regular file; expected {RAW_EXPECTED}", input=path)
    return fd


#: the longest a written row waits for fsync (seconds); close() syncs the rest
FSYNC_INTERVAL_S = 1.0


class CsvSink:
    """Append-only raw.csv: header first, then each trial's rows in one write; fsync at most every
    ``FSYNC_INTERVAL_S`` and at close."""

    def __init__(self, path: Path, columns: list[str]):
        self.path, self.columns = path, columns
        self._synced = -math.inf       # time.monotonic() of the last fsync
        self.fd = _open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        new = os.fstat(self.fd).st_size == 0
        if new:
            try:
                self._write([columns])
            except BaseException:
                os.close(self.fd)
                raise

    def _write(self, rows: list[list[str]]) -> None:
        """All ``rows`` in one os.write, fsync'd when the last fsync is ``FSYNC_INTERVAL_S`` old
        (the header always).  A failed or short write (a full disk)
        truncates the file back to its last complete row and raises ``DiskFullError``
        (ENOSPC, EDQUOT, or a short write) or the OSError."""
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        data = buf.getvalue().encode()
        start = os.fstat(self.fd).st_size   # the folder's lock makes this the only writer
        try:
            n = os.write(self.fd, data)
            if n != len(data):   # a regular file writes short only when the disk is full
                raise OSError(errno.ENOSPC, f"only {n} of {len(data)} bytes written")
            now = time.monotonic()
            if now - self._synced >= FSYNC_INTERVAL_S:
                os.fsync(self.fd)
                self._synced = now
        except OSError as e:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass   # the torn row stays; repair_csv removes it on --resume
            if e.errno in DISK_FULL_ERRNOS:
                raise disk_full(self.path, e) from None
            raise

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        self._write(cells(rows, self.columns))

    def write_cells(self, rows: list[list[str]]) -> None:
        """Rows already as cells, one per header column (``cells``), in one write."""
        self._write(rows)

    def sync(self) -> None:
        """fsync what was written since the last one (a failure here is the disk's: the write
        that filled it raised already)."""
        try:
            os.fsync(self.fd)
            self._synced = time.monotonic()
        except OSError:
            pass

    def close(self) -> None:
        """sync, then close."""
        try:
            self.sync()
        finally:
            os.close(self.fd)


def repair_csv(path: Path) -> int:
    """Truncate a torn last line (a SIGKILL during a write); return bytes removed.  raw.csv is
    opened without following a link (``DataError`` for a link or a file that is not regular)."""
    try:
        fd = _open_own(path, os.O_RDWR)
    except FileNotFoundError:
        return 0
    with os.fdopen(fd, "rb+") as f:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
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
def decode_utf8(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise DataError(f"{path}: line {line}, column {col}: byte 0x{data[e.start]:02x} is not UTF-8; "
                        "expected UTF-8 text as `ringlab run` writes it", input=path) from None


#: raw.csv larger than this is refused before it is read (10^6 trial rows of ptr_ring are
#: 400-550 MiB; docs/results.md)
MAX_RAW_BYTES = 2 << 30


def read_raw(path: str | os.PathLike, required: tuple[str, ...] = ("variant",), torn_ok: bool = False,
             strict: bool = True) -> pd.DataFrame:
    """raw.csv as a DataFrame, or ``DataError`` naming the file, the line and what was expected.

    Checks: a regular file of at most ``MAX_RAW_BYTES``, UTF-8, a header with the ``required``
    columns, each column once, and no unknown column after ``trial``, at least one row and at
    most ``MAX_RAW_ROWS``, the same number of fields in every row, integers in
    ``trial``/``round``/``iteration``/``order``, finite metrics > 0 in ok trials
    (``METRIC_COLUMNS``) and the bounds of ``ringlab.rundir.rawrows``.  A torn last line (a
    killed run) is a DataError naming the line, unless ``torn_ok`` (the run itself, --resume),
    which leaves it out; ``strict=False`` (the run reading its own rows) skips the column and
    value checks.  Files written before the ``round`` column existed get ``round`` = ``trial``;
    files of schema version 4 get the columns env.json keeps (``rawconstants``) back, from the
    env.json beside them, so every frame has the version-3 columns.

    How: a file as ``ringlab run`` writes it (plain: ``rawrows.scan_plain``) is scanned in
    blocks with numpy, parsed by pandas and its values checked column-wise
    (``rawrows.frame_passes``); any other file, or one whose columns may hold a bad value, is
    checked by ``check_rows`` one row at a time, which gives every refusal its words.

    Memory: the file is scanned in blocks and parsed by pandas straight from the file, so a read
    holds the frame and the parser's buffers, never a copy of the text; the cells of a text
    column with few distinct values share one string object per value (``_share_strings``).
    """
    path = Path(path)
    if path.is_dir() and path.name != RAW_CSV_NAME:   # a run folder; a raw.csv that is a folder is refused
        path = path / RAW_CSV_NAME
    try:
        f = open_input(path, RAW_EXPECTED)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; expected {RAW_EXPECTED}", input=path) from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror}); expected a readable raw.csv", input=path) from None
    with f:
        try:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_RAW_BYTES:
                raise DataError(f"{path}: {size / 2**30:.1f} GiB, larger than the {MAX_RAW_BYTES >> 30} GiB a "
                                "raw.csv may hold; expected a raw.csv written by `ringlab run` (split the run)",
                                input=path)
            stored = is_stored_layout(next(csv.reader([decode_utf8(path, f.readline())]), []))
            consts, values = stored_constants(path) if stored else ({}, {})
            f.seek(0)
            scan = scan_plain(path, f, required, strict)
            f.seek(0)
            if scan is None:
                _, n_rows, _ = check_rows(path, f, required, torn_ok, strict, consts.get("experiment"))
                f.seek(0)
                df = _parse(path, f, n_rows)
            else:
                try:
                    df = _parse(path, f, scan.n_rows)
                except DataError:   # check_rows's refusal of the file comes first, as it did
                    f.seek(0)
                    check_rows(path, f, required, torn_ok, strict, consts.get("experiment"))
                    raise
                if not frame_passes(scan, df, strict, consts.get("experiment")):
                    f.seek(0)   # names the first bad line, or finds none
                    check_rows(path, f, required, torn_ok, strict, consts.get("experiment"))
        except OSError as e:
            raise DataError(f"{path}: cannot read ({e.strerror}); expected a readable raw.csv", input=path) from None
    if stored:
        df = fill_constants(path, df, consts, values)
    check_raw_names(path, df)
    if "round" not in df.columns and "trial" in df.columns:
        df.insert(df.columns.get_loc("trial") + 1, "round", df["trial"])
    return df


#: above this many rows pandas parses raw.csv in chunks of this many (``_parse_chunks``): its
#: tokenizer then holds one chunk's text, not the whole file's (the runs under results/ have at
#: most 9,290 rows and are parsed whole)
PARSE_CHUNK_ROWS = 100_000
#: integers below this magnitude are exact as float64 (a column pandas reads as float64 in one
#: chunk and int64 in another)
_EXACT_INT = 2**53


def _parse(path: Path, f, n_rows: int) -> pd.DataFrame:
    """The first ``n_rows`` rows of the open raw.csv ``f`` as pandas reads them, the cells of a
    text column with few distinct values sharing one string object per value."""
    try:   # parsed from the file checked, not from the path again
        if n_rows > PARSE_CHUNK_ROWS:
            start = f.tell()
            df = _parse_chunks(f, n_rows)
            if df is not None:
                return df
            f.seek(start)
        return _share_strings(pd.read_csv(f, low_memory=False, nrows=n_rows, encoding="utf-8",
                                          keep_default_na=True))
    except (ValueError, pd.errors.ParserError, OSError) as e:
        raise DataError(f"{path}: {clean(e, 120)}; expected a raw.csv written by `ringlab run`",
                        input=path) from None


class _Column:
    """One column filled chunk by chunk into an array of all ``n`` rows, its dtype the one
    pandas infers for the whole file: int64 chunks with float64 ones make float64 (while every
    integer is exact as a float), text chunks with all-empty (float64 NaN) ones make text, and
    True/False chunks with chunks of True/False and empty cells (object) or all-empty ones make
    object (Python bools and NaN)."""

    def __init__(self, n: int):
        self.n, self.values, self.dtype, self.filled, self.all_nan = n, None, None, 0, True
        self.canon: dict[str, str] | None = {}     # one object per distinct text (few of them)

    def _as_float(self) -> bool:
        v = self.values[:self.filled]
        if self.dtype == np.int64 and len(v) and int(np.abs(v).max()) >= _EXACT_INT:
            return False
        self.values, self.dtype = self.values.astype(np.float64), np.dtype(np.float64)
        return True

    def add(self, s: pd.Series) -> bool:
        """Append chunk column ``s``; False when its dtype cannot join the earlier chunks'."""
        text = isinstance(s.dtype, pd.StringDtype)
        num = s.dtype in (np.int64, np.float64)
        nan_chunk = s.dtype == np.float64 and bool(s.isna().all())
        flags = s.dtype == np.bool_ or (s.dtype == object and _bools_or_nan(s))
        if flags or (nan_chunk and self.dtype in (np.bool_, object)):
            return self._add_flags(s, nan_chunk)
        if self.values is None:
            if not (text or num):
                return False
            self.dtype = s.dtype
            self.values = np.empty(self.n, dtype=object if text else s.dtype)
        elif text and not isinstance(self.dtype, pd.StringDtype):
            if not (self.dtype == np.float64 and self.all_nan):
                return False
            self.dtype, self.values = s.dtype, np.full(self.n, s.dtype.na_value, dtype=object)
        elif isinstance(self.dtype, pd.StringDtype):
            if not (text and s.dtype == self.dtype) and not nan_chunk:
                return False
        elif num and self.dtype in (np.int64, np.float64):
            if s.dtype != self.dtype:
                if s.dtype == np.int64 and len(s) and int(s.abs().max()) >= _EXACT_INT:
                    return False
                if self.dtype == np.int64 and not self._as_float():
                    return False
        elif s.dtype != self.dtype:
            return False
        i, j = self.filled, self.filled + len(s)
        if isinstance(self.dtype, pd.StringDtype):
            self.values[i:j] = self._shared(s) if text else self.dtype.na_value
        else:
            self.values[i:j] = s.to_numpy(dtype=self.dtype)
        self.all_nan &= nan_chunk
        self.filled = j
        return True

    def _add_flags(self, s: pd.Series, nan_chunk: bool) -> bool:
        """A chunk of True/False (bool), of True/False and empty cells (object) or all empty."""
        if self.values is None:
            if nan_chunk:
                return False
            self.dtype, self.values = s.dtype, np.empty(self.n, dtype=s.dtype)
        elif self.dtype == np.float64 and self.all_nan:   # empty so far: object, NaN until here
            self.dtype, self.values = np.dtype(object), np.full(self.n, np.nan, dtype=object)
        elif self.dtype not in (np.bool_, object):
            return False
        if self.dtype == np.bool_ and s.dtype != np.bool_:
            self.dtype, self.values = np.dtype(object), self.values.astype(object)
            self.values[:self.filled] = [bool(x) for x in self.values[:self.filled]]
        i, j = self.filled, self.filled + len(s)
        if self.dtype == np.bool_:
            self.values[i:j] = s.to_numpy(dtype=bool)
        else:
            self.values[i:j] = [np.nan if x is None or x != x else bool(x) for x in s.to_numpy(dtype=object)] \
                if s.dtype != object else s.to_numpy(dtype=object)
        self.all_nan &= nan_chunk
        self.filled = j
        return True

    def _shared(self, s: pd.Series) -> np.ndarray:
        """The chunk's texts, equal ones one object (kept across chunks while they are few)."""
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        if self.canon is None or 2 * len(uniques) > len(s):
            self.canon = None
            return s.to_numpy(dtype=object)
        cells = np.array([self.canon.setdefault(u, u) for u in uniques] + [s.dtype.na_value], dtype=object)
        return cells[codes]

    def series(self, name: str) -> pd.Series:
        if isinstance(self.dtype, pd.StringDtype):
            return pd.Series(pd.array(self.values, dtype=self.dtype), name=name)
        return pd.Series(self.values, name=name, copy=False)


def _bools_or_nan(s: pd.Series) -> bool:
    """Whether every cell of an object column is a Python bool or NaN (pandas' True/False
    column with empty cells)."""
    return all(isinstance(x, bool) or (isinstance(x, float) and x != x) for x in s.to_numpy(dtype=object))


def _parse_chunks(f, n_rows: int) -> pd.DataFrame | None:
    """The first ``n_rows`` rows of ``f`` parsed ``PARSE_CHUNK_ROWS`` at a time into one array
    per column, the same frame as one ``pd.read_csv`` of the whole file: None (the caller parses
    it whole) when a column's chunks have dtypes whose whole-file dtype is not certain."""
    cols: dict[str, _Column] = {}
    names: list[str] | None = None
    with pd.read_csv(f, low_memory=False, nrows=n_rows, encoding="utf-8", keep_default_na=True,
                     chunksize=PARSE_CHUNK_ROWS) as reader:
        for chunk in reader:
            if names is None:
                names = list(chunk.columns)
                cols = {c: _Column(n_rows) for c in names}
            if list(chunk.columns) != names:
                return None
            for c in names:
                if not cols[c].add(chunk[c]):
                    return None
    if names is None or any(col.filled != n_rows for col in cols.values()):
        return None
    return pd.DataFrame({c: cols[c].series(c) for c in names}, copy=False)


def _share_strings(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text column of few distinct values (at most half its rows) rebuilt so
    that equal cells are one string object: pandas' parser makes a new object per cell (about
    60 bytes each, 60 MB per column of 10^6 rows), the values and dtypes stay the same."""
    out = {}
    for c in df.columns:
        s = df[c]
        if not isinstance(s.dtype, pd.StringDtype) or s.dtype.storage != "python" or len(s) < 2:
            continue
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        if 2 * len(uniques) > len(s):
            continue
        cells = np.asarray(uniques, dtype=object).take(np.maximum(codes, 0))
        cells[codes < 0] = s.dtype.na_value
        out[c] = pd.Series(pd.array(cells, dtype=s.dtype), index=s.index, name=c)
    if not out:
        return df
    shared = df.copy(deep=False)
    for c, col in out.items():
        shared[c] = col
    return shared


#: raw.csv columns that hold a name (ringlab.names): they become paths, mail lines and table cells
NAME_COLUMNS = ("run_id", "experiment", "host", "variant")


def check_raw_names(path: Path, df: pd.DataFrame) -> None:
    """``BadDataNameError`` (a DataError) naming the file, the column and the first row whose
    cell of a name column (:data:`NAME_COLUMNS`) is not a name; empty cells are left to the
    readers that need them."""
    for col in NAME_COLUMNS:
        if col not in df.columns:
            continue
        s = df[col]
        for v in s.dropna().unique():
            text = v if isinstance(v, str) else str(v)
            if name_problem(text) is not None:
                row = int((s == v).to_numpy().argmax()) + 1
                check_data_name(text, path, f"column '{col}' (row {row}):")


def require_metric(df: pd.DataFrame, metric: str, path: str | os.PathLike) -> None:
    """DataError unless raw.csv (``df``, read from ``path``) has ``metric`` with a finite value
    in at least one ok trial: a report never shows an empty table for a metric without data."""
    if metric not in df.columns:
        num = [c for c in df.columns if c in METRIC_COLUMNS]
        raise DataError(f"{path}: no column '{metric}'; expected a metric column of this raw.csv "
                        f"({', '.join(num) or 'none'})", input=path)
    col = df.loc[df["status"].astype(str) == "ok", metric] if "status" in df.columns else df[metric]
    vals = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)   # the one column, not the rows
    if not np.isfinite(vals).any():
        raise DataError(f"{path}: column '{metric}' has no finite value in an ok trial; expected the metric "
                        "measured by the run (pass another --metric)", input=path)


def _done_key(row: list[str], idx: dict[str, int], config_keys: list[str]) -> tuple:
    key = tuple(sorted((k, row[idx[k]]) for k in config_keys)) + (
        ("cpus", f"{row[idx['cpu_req_producer']]}:{row[idx['cpu_req_consumer']]}"),
        ("trial", int(row[idx["trial"]])))
    if "icount_source" in idx and row[idx["icount_source"]] == "callgrind":
        key += (("kind", "icount"),)
    return key


def read_done(path: Path, config_keys: list[str], plan=None) -> tuple[set, list[str] | None]:
    """Keys (as TrialSpec.key()) of the trials already in raw.csv, and its header.

    raw.csv is opened without following a link (``open_input``).  Each row is one trial once:
    a second row of the same key and ``iteration`` is refused (``planrows.duplicate``); with
    ``plan`` (the run's ``TrialSpec``s) a row whose key the plan does not hold is refused too,
    naming the line and the column (``planrows.PlanRows``)."""
    done: set = set()
    try:
        data = read_input(path, RESUME_EXPECTED)
    except FileNotFoundError:
        return done, None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror}); expected {RESUME_EXPECTED}", input=path) from None
    if not data:
        return done, None
    text = decode_utf8(path, data)
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return done, None
    idx = {c: i for i, c in enumerate(header)}
    missing = [c for c in config_keys + ["cpu_req_producer", "cpu_req_consumer", "trial"] if c not in idx]
    if missing:
        raise DataError(f"{path}: line 1: cannot resume, the header has no column "
                        f"{', '.join(quote(m) for m in missing[:5])}; expected {RESUME_EXPECTED}", input=path)
    check = PlanRows(plan) if plan is not None else None
    it = idx.get("iteration")
    seen: dict[tuple, int] = {}
    torn_at = text.count("\n") + 1 if not text.endswith("\n") else None   # repair_csv removes it
    for row in reader:
        lineno = reader.line_num
        if len(row) != len(header):
            if lineno == torn_at:
                break
            raise DataError(f"{path}: line {lineno}: {len(row)} fields; expected {len(header)} "
                            "(one per header column)", input=path)
        try:
            key = _done_key(row, idx, config_keys)
        except ValueError:
            raise DataError(f"{path}: line {lineno}: column 'trial' is {quote(row[idx['trial']])}; "
                            "expected an integer", input=path) from None
        if check is not None:
            check.refuse(path, lineno, row, idx, key)
        one = (key, (row[it].strip() or "0") if it is not None else "")
        if one in seen:
            raise duplicate(path, lineno, seen[one], row, idx, config_keys)
        seen[one] = lineno
        done.add(key)
    return done, header


def resume_keys(path: Path, config_keys: list[str], columns: list[str], plan=None) -> tuple[set, list[str] | None]:
    """``read_done`` of the raw.csv a run resumes into (its rows checked against ``plan``, the
    run's ``TrialSpec``s, when given), refused (``RunnerError``) when its header is
    neither ``columns`` (the full layout, schema version 3) nor their version-4 layout
    (``rawconstants.stored_columns``): the one header check of a resume.  A resumed run keeps
    writing the layout its header has."""
    done, header = read_done(path, config_keys, plan)
    if header is not None and header not in (columns, stored_columns(columns)):
        raise RunnerError(f"{path}: its columns differ from this ringlab's raw.csv layout "
                          f"(schema version {schema.SCHEMA_VERSION}, or 3); cannot resume into it",
                          input=path)
    return done, header


def count_trials(statuses) -> dict[str, int]:
    """{"ok", "failed", "timeout", "skipped"} from trial statuses (crash and error are failed)."""
    out = {"ok": 0, "failed": 0, "timeout": 0, "skipped": 0}
    for s in statuses:
        s = str(s)
        out["failed" if s in ("crash", "error") else s if s in out else "failed"] += 1
    return out


def count_file(raw_csv: Path) -> dict[str, int]:
    """Trial counts of a raw.csv (first row of each trial), tolerant of a torn last line; none when
    it cannot be read (a link or not a regular file included: ``open_input``)."""
    try:
        text = decode_utf8(raw_csv, read_input(raw_csv, RAW_EXPECTED))
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
