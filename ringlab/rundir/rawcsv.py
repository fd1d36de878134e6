"""raw.csv on disk: the crash-safe appender, the repair after a kill, and the one reader.

Written only through ``ringlab.rundir.RunFolder.append`` (which uses ``CsvSink``); read
through ``read_raw`` (a DataFrame, or ``DataError`` naming the file, the line and what
was expected) and, on --resume, ``read_done``.

Crash safety: raw.csv is opened with O_APPEND, the header goes first, and each trial's
rows go out in one write() followed by fsync, with newlines inside fields escaped so one
row is always one line.  A SIGKILL therefore leaves at most a torn last line, which
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
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import schema
from ringlab.errors import DISK_FULL_ERRNOS, DataError, disk_full
from ringlab.names import check_data_name, name_problem

#: integer columns that every reader relies on
INT_COLUMNS = ("trial", "round", "iteration", "order")
#: metric columns whose values in an ok trial row must be finite numbers > 0 (an instruction-count
#: trial, icount_source "callgrind", measures no time and leaves them empty)
METRIC_COLUMNS = ("ns_per_op", "elapsed_ns", "elapsed_us")
#: raw.csv columns after ``trial`` that an earlier ringlab wrote (still read)
LEGACY_COLUMNS = ("elapsed_us",)


def known_columns() -> set[str]:
    """Every column a raw.csv may hold after the parameter columns: ``ringlab.schema``'s, with
    every experiment's own (``schema.EXPERIMENT_COLUMNS``)."""
    cols = set(schema.NON_PARAM_COLUMNS) | {"variant"} | set(LEGACY_COLUMNS)
    for extra in schema.EXPERIMENT_COLUMNS.values():
        cols |= set(extra)
    return cols


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
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if new:
            try:
                self._write([columns])
            except BaseException:
                os.close(self.fd)
                raise

    def _write(self, rows: list[list[str]]) -> None:
        """All ``rows`` in one os.write, then fsync.  A failed or short write (a full disk)
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
            os.fsync(self.fd)
        except OSError as e:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass   # the torn row stays; repair_csv removes it on --resume
            if e.errno in DISK_FULL_ERRNOS:
                raise disk_full(self.path, e) from None
            raise

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


def _bad_metric(v: str) -> str | None:
    """Why a metric cell of an ok trial is not a finite number > 0 (None: it is)."""
    t = v.strip()
    if t == "" or t.lower() == "nan":
        return "empty (NaN)"
    try:
        f = float(t)
    except ValueError:
        return "not a number"
    if not math.isfinite(f):
        return "not finite"
    if f <= 0:
        return "zero or negative"
    return None


def _check_header(path: Path, reader, required: tuple[str, ...], strict: bool) -> list[str]:
    """Read and validate the header line: not empty, has ``required``, (strict) no unknown column."""
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
    if strict and "trial" in header:
        known = known_columns()
        unknown = [c for c in header[header.index("trial"):] if c not in known]
        if unknown:
            raise DataError(f"{path}: line 1: unknown column {', '.join(repr(c) for c in unknown[:5])}; "
                            "expected the columns of ringlab.schema (schema version "
                            f"{schema.SCHEMA_VERSION}) and the experiment's own")
    return header


def _check_int_cells(path: Path, lineno: int, row: list[str], idx: dict[str, int]) -> None:
    """Refuse an integer column whose cell is not an integer (iteration/round may be empty)."""
    for c, i in idx.items():
        v = row[i].strip()
        if c in ("iteration", "round") and v == "":
            continue
        try:
            int(v)
        except ValueError:
            raise DataError(f"{path}: line {lineno}: column '{c}' is {row[i]!r}; expected an integer"
                            ) from None


def _check_metric_cells(path: Path, lineno: int, row: list[str], metrics: dict[str, int],
                        measured: set[str], first_nan: dict[str, tuple[int, str]]) -> None:
    """Refuse a metric cell of an ok trial that is not a finite number > 0; note empty ones."""
    for c, i in metrics.items():
        why = _bad_metric(row[i])
        if why is None:
            measured.add(c)
        elif why == "empty (NaN)":
            first_nan.setdefault(c, (lineno, row[i]))
        else:
            raise DataError(f"{path}: line {lineno}: column '{c}' is {row[i][:40]!r} ({why}); "
                            "expected a finite number > 0 in an ok trial")


def _check_rows(path: Path, text: str, required: tuple[str, ...], torn_ok: bool = False,
                strict: bool = True) -> tuple[list[str], int]:
    """Validate the CSV structure; return the header and the number of a torn last line (0: none).

    A torn last line is a DataError unless ``torn_ok``.  ``strict`` also refuses unknown columns
    after ``trial`` and metric cells of ok trials that are not finite numbers > 0."""
    lines = text.split("\n")
    reader = csv.reader(io.StringIO(text))
    header = _check_header(path, reader, required, strict)
    torn, n_rows = 0, 0
    idx = {c: header.index(c) for c in INT_COLUMNS if c in header}
    metrics = {c: header.index(c) for c in METRIC_COLUMNS if c in header} if strict else {}
    si = header.index("status") if "status" in header else None
    ic = header.index("icount_source") if "icount_source" in header else None
    measured: set[str] = set()                       # metric columns with a value in some ok trial
    first_nan: dict[str, tuple[int, str]] = {}       # ... and their first ok trial without one
    last_line = len(lines) - (1 if text.endswith("\n") else 0)
    try:
        for row in reader:
            lineno = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                if lineno == last_line and not text.endswith("\n"):
                    if not torn_ok:
                        raise DataError(f"{path}: line {lineno}: a torn last row ({len(row)} of {len(header)} "
                                        "fields, no newline), as a killed run leaves; expected complete rows "
                                        "(`ringlab run --resume` repairs it)")
                    torn = lineno  # what a killed run leaves; --resume repairs it
                    break
                raise DataError(f"{path}: line {lineno}: {len(row)} fields; expected {len(header)} "
                                "(one per header column)")
            n_rows += 1
            _check_int_cells(path, lineno, row, idx)
            if metrics and (si is None or row[si].strip() == "ok") and (ic is None or row[ic] != "callgrind"):
                _check_metric_cells(path, lineno, row, metrics, measured, first_nan)
    except csv.Error as e:
        raise DataError(f"{path}: line {reader.line_num}: {e}; expected one CSV row per line") from None
    if n_rows == 0:
        raise DataError(f"{path}: line 1: a header and no rows; expected at least one trial row "
                        "(the run recorded no trial)")
    for c in metrics:   # a column no ok trial fills is one this experiment does not measure
        if c in measured and c in first_nan:
            lineno, v = first_nan[c]
            raise DataError(f"{path}: line {lineno}: column '{c}' is {v[:40]!r} (empty (NaN)); "
                            "expected a finite number > 0 in an ok trial")
    return header, torn


#: raw.csv larger than this is refused (a million trial rows are about 1 GiB)
MAX_RAW_BYTES = 2 << 30


def read_raw(path: str | os.PathLike, required: tuple[str, ...] = ("variant",), torn_ok: bool = False,
             strict: bool = True) -> pd.DataFrame:
    """raw.csv as a DataFrame, or ``DataError`` naming the file, the line and what was expected.

    Checks: a regular file, UTF-8, a header with the ``required`` columns and no unknown
    column after ``trial``, at least one row, the same number of fields in every row,
    integers in ``trial``/``round``/``iteration``/``order``, finite metrics > 0 in ok trials
    (``METRIC_COLUMNS``).  A torn last line (a killed run) is a DataError naming the line,
    unless ``torn_ok`` (the run itself, --resume), which leaves it out; ``strict=False``
    (the run reading its own rows) skips the column and metric checks.  Files written before
    the ``round`` column existed get ``round`` = ``trial``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "raw.csv"
    try:
        if path.is_dir():
            raise DataError(f"{path}: a directory; expected a raw.csv file written by `ringlab run`")
        if path.exists() and not path.is_file():
            raise DataError(f"{path}: not a regular file; expected a raw.csv written by `ringlab run`")
        if path.stat().st_size > MAX_RAW_BYTES:
            raise DataError(f"{path}: larger than {MAX_RAW_BYTES >> 30} GiB; expected a raw.csv written by "
                            "`ringlab run`")
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file; expected a raw.csv written by `ringlab run`") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror}); expected a readable raw.csv") from None
    text = _decode(path, data)
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n") + 1
        raise DataError(f"{path}: line {line}: a NUL byte; expected CSV text as `ringlab run` writes it")
    _, torn = _check_rows(path, text, required, torn_ok, strict)
    if torn:
        text = text[:text.rfind("\n") + 1]
    try:
        df = pd.read_csv(io.StringIO(text), low_memory=False)
    except (ValueError, pd.errors.ParserError) as e:
        raise DataError(f"{path}: {e}; expected a raw.csv written by `ringlab run`") from None
    check_raw_names(path, df)
    if "round" not in df.columns and "trial" in df.columns:
        df.insert(df.columns.get_loc("trial") + 1, "round", df["trial"])
    return df


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
                        f"({', '.join(num) or 'none'})")
    rows = df[df["status"].astype(str) == "ok"] if "status" in df.columns else df
    vals = pd.to_numeric(rows[metric], errors="coerce")
    if not vals.map(lambda x: math.isfinite(x)).any():
        raise DataError(f"{path}: column '{metric}' has no finite value in an ok trial; expected the metric "
                        "measured by the run (pass another --metric)")


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
    if path.is_symlink() and not path.exists():
        raise DataError(f"{path}: a dangling or looping symlink; expected the raw.csv of the interrupted run")
    if not path.exists():
        return done, None
    if not path.is_file():
        raise DataError(f"{path}: not a regular file; expected the raw.csv of the interrupted run")
    if path.stat().st_size == 0:
        return done, None
    try:
        text = _decode(path, path.read_bytes())
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror}); expected the raw.csv of the interrupted run") from None
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


def count_trials(statuses) -> dict[str, int]:
    """{"ok", "failed", "timeout", "skipped"} from trial statuses (crash and error are failed)."""
    out = {"ok": 0, "failed": 0, "timeout": 0, "skipped": 0}
    for s in statuses:
        s = str(s)
        out["failed" if s in ("crash", "error") else s if s in out else "failed"] += 1
    return out


def count_file(raw_csv: Path) -> dict[str, int]:
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
