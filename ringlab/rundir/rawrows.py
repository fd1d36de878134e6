"""The header and the rows a raw.csv may hold, checked one row at a time by ``read_raw``
(``check_rows``).

* one run per file: ``run_id``, ``experiment`` and ``host`` are the same in every row;
* indexes (``trial``, ``round``, ``iteration``, ``order``) are integers in [0, ``MAX_INDEX``];
* integer parameter columns of an experiment (``INT_PARAM_COLUMNS``) hold integers in their bounds;
* metrics of an ok trial lie in ``METRIC_BOUNDS``: 10^-3 ns to 10^12 ns (16 minutes) per
  operation; a denormal such as 1e-320 ns is a corrupt file, not a speed-up;
* ``timestamp`` is empty or an ISO-8601 UTC time as ringlab writes it (``TIMESTAMP_RE``:
  ``2026-12-07T14:41:31.790851Z``; ``+00:00`` for ``Z`` and up to 6 decimals, or none, are read too)
  that names a real date and time.

Bounds are documented in docs/results.md ("What a raw.csv may hold").

Two ways to check, one verdict.  ``check_rows`` reads the file one row at a time through
``csv.reader`` and raises on the first bad line; it is the definition.  A file as ``ringlab run``
writes it is checked column-wise instead: ``scan_plain`` reads the bytes in blocks of
``SCAN_BYTES`` and confirms with numpy that the file is *plain* (UTF-8 without NUL, no quote
character, no carriage return, every line ending in a newline with exactly one field per header
column, no line longer than ``csv.field_size_limit()``), so that the fields of each line are
the text between its commas; ``frame_passes`` then checks the values of the frame pandas
parsed from it, with pandas and numpy.  Either answers "every row passes" only when
``check_rows`` would; whenever it is not sure (a file that is not plain, a column whose dtype
does not tell its cells' text, a value within 10^-9 of a bound, any failing value), the caller
runs ``check_rows``, so every refusal is ``check_rows``'s own, naming the same first bad line,
column and value.
"""
from __future__ import annotations

import csv
import datetime as _dt
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ringlab import catalog, schema
from ringlab.errors import DataError
from ringlab.rundir.inputs import clean, quote
from ringlab.rundir.rawconstants import has_column

#: integer columns that every reader relies on
INT_COLUMNS = ("trial", "round", "iteration", "order")
#: metric columns whose values in an ok trial row must be finite numbers > 0 (an instruction-count
#: trial, icount_source "callgrind", measures no time and leaves them empty)
METRIC_COLUMNS = ("ns_per_op", "elapsed_ns", "elapsed_us")
#: raw.csv columns after ``trial`` that an earlier ringlab wrote (still read)
LEGACY_COLUMNS = ("elapsed_us",)


def known_columns() -> set[str]:
    """Every column a raw.csv may hold after the parameter columns: ``ringlab.schema``'s, with
    every experiment's own (its ``extra_columns`` in ringlab.catalog)."""
    cols = set(schema.NON_PARAM_COLUMNS) | {"variant"} | set(LEGACY_COLUMNS)
    cols |= {c + schema.REF_SUFFIX for c in schema.REF_COLUMNS}
    return cols | set(catalog.all_extra_columns())

#: raw.csv with more trial rows than this is refused (docs/results.md)
MAX_RAW_ROWS = 4_000_000

#: trial, round, iteration and order are at most this (a run holds at most 10^6 planned trials)
MAX_INDEX = 10**9
#: columns that hold one value for the whole file
RUN_COLUMNS = ("run_id", "experiment", "host")
#: integer parameter columns and their inclusive bounds, by experiment (the catalog's bounds, which
#: the experiments' parameters take too)
INT_PARAM_COLUMNS: dict[str, dict[str, tuple[int, int]]] = {
    e.name: {b.column: (b.low, b.high) for b in e.bounds} for e in catalog.EXPERIMENTS if e.bounds}
#: plausible values of a metric in an ok trial (inclusive), in its unit
METRIC_BOUNDS: dict[str, tuple[float, float]] = {
    "ns_per_op": (1e-3, 1e12),
    "elapsed_ns": (1e-3, 1e16),
    "elapsed_us": (1e-6, 1e13),
}


#: a raw.csv ``timestamp``: ISO-8601 in UTC, as ``ringlab.rundir.utc_now`` writes it
TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|\+00:00)")
TIMESTAMP_EXPECTED = "an ISO-8601 UTC time as `ringlab run` writes it (2026-12-07T14:41:31.790851Z) or empty"


def timestamp_problem(v: str) -> bool:
    """True when ``v`` is neither empty nor a real ISO-8601 UTC time (``TIMESTAMP_RE``)."""
    if v == "":
        return False
    if not TIMESTAMP_RE.fullmatch(v):
        return True
    try:
        _dt.datetime.fromisoformat(v[:-1] + "+00:00" if v.endswith("Z") else v)
    except ValueError:   # 2026-13-40T25:61:00Z
        return True
    return False


def _bound_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:g}"


class RowChecks:
    """Checks of one raw.csv's rows against the first row and the bounds above."""

    def __init__(self, path: Path, header: list[str], experiment: str | None = None):
        self.path = path
        self.run_idx = {c: header.index(c) for c in RUN_COLUMNS if c in header}
        self.first: dict[str, str] = {}
        self.index_idx = {c: header.index(c) for c in ("trial", "round", "iteration", "order") if c in header}
        self.metric_idx = {c: header.index(c) for c in METRIC_BOUNDS if c in header}
        self.ts_idx = header.index("timestamp") if "timestamp" in header else None
        self.param_idx: dict[str, tuple[int, tuple[int, int]]] = {}
        self.header = header
        if experiment is not None:   # a file that keeps its experiment in env.json (schema version 4)
            self._set_params(experiment)

    def _set_params(self, experiment: str) -> None:
        bounds = INT_PARAM_COLUMNS.get(experiment, {})
        self.param_idx = {p: (self.header.index(p), b) for p, b in bounds.items() if p in self.header}

    def _fail(self, lineno: int, col: str, value: str, expected: str) -> DataError:
        return DataError(f"{self.path}: line {lineno}: column '{col}' is {quote(value)}; expected {expected}",
                         input=self.path)

    def check(self, lineno: int, row: list[str], ok: bool) -> None:
        for c, i in self.run_idx.items():
            v = row[i]
            first = self.first.setdefault(c, v)
            if v != first:
                raise self._fail(lineno, c, v, f"{quote(first)} as in the first row (one run per raw.csv)")
            if c == "experiment" and not self.param_idx:
                self._set_params(v)
        if self.ts_idx is not None and timestamp_problem(row[self.ts_idx]):
            raise self._fail(lineno, "timestamp", row[self.ts_idx], TIMESTAMP_EXPECTED)
        for c, i in self.index_idx.items():
            v = row[i].strip()
            if v and not 0 <= int(v) <= MAX_INDEX:   # integerness is checked before
                raise self._fail(lineno, c, row[i], f"an integer in [0, {MAX_INDEX}]")
        for c, (i, (lo, hi)) in self.param_idx.items():
            v = row[i].strip()
            if v == "":
                continue
            try:
                n = int(v)
            except ValueError:
                raise self._fail(lineno, c, row[i], f"an integer in [{lo}, {_bound_text(hi)}]") from None
            if not lo <= n <= hi:
                raise self._fail(lineno, c, row[i], f"an integer in [{lo}, {_bound_text(hi)}]")
        if ok:
            for c, i in self.metric_idx.items():
                v = row[i].strip()
                if v == "" or v.lower() == "nan":
                    continue
                try:
                    f = float(v)
                except ValueError:
                    continue   # refused by the metric check with its own words
                lo, hi = METRIC_BOUNDS[c]
                if math.isfinite(f) and f > 0 and not lo <= f <= hi:
                    raise self._fail(lineno, c, row[i], f"a number in [{_bound_text(lo)}, {_bound_text(hi)}] "
                                                        "in an ok trial")


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
        raise DataError(f"{path}: line 1: {clean(e, 80)}; expected the raw.csv header", input=path) from None
    if not header or not any(h.strip() for h in header):
        raise DataError(f"{path}: line 1: empty file; expected a header naming the raw.csv columns "
                        f"({', '.join(schema.ID_COLUMNS)}, ...) and one row per trial", input=path)
    seen: set[str] = set()
    dup = sorted({c for c in header if c in seen or seen.add(c)})
    if dup:
        raise DataError(f"{path}: line 1: column {', '.join(quote(c) for c in dup[:5])} appears more than "
                        "once in the header; expected each raw.csv column once", input=path)
    missing = [c for c in required if not has_column(header, c)]
    if missing:
        raise DataError(f"{path}: line 1: the header has no column {', '.join(repr(m) for m in missing)}; "
                        f"expected a raw.csv written by `ringlab run` (got: {quote(', '.join(header))})", input=path)
    if strict and "trial" in header:
        known = known_columns()
        unknown = [c for c in header[header.index("trial"):] if c not in known]
        if unknown:
            raise DataError(f"{path}: line 1: unknown column {', '.join(quote(c) for c in unknown[:5])}; "
                            "expected the columns of ringlab.schema (schema version "
                            f"{schema.SCHEMA_VERSION}) and the experiment's own", input=path)
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
            raise DataError(f"{path}: line {lineno}: column '{c}' is {quote(row[i])}; expected an integer",
                            input=path) from None


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
            raise DataError(f"{path}: line {lineno}: column '{c}' is {quote(row[i])} ({why}); "
                            "expected a finite number > 0 in an ok trial", input=path)


class _Lines:
    """The lines of a raw.csv opened in binary, decoded one at a time (bounded memory): a
    ``DataError`` naming the line and column of a byte that is not UTF-8 or of a NUL byte.
    ``unterminated`` is the number of a last line without a newline (0: none)."""

    def __init__(self, path: Path, f):
        self.path, self.f, self.lineno, self.unterminated = path, f, 0, 0

    def __iter__(self):
        for raw in self.f:
            self.lineno += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{self.path}: line {self.lineno}, column {e.start + 1}: byte "
                                f"0x{raw[e.start]:02x} is not UTF-8; expected UTF-8 text as `ringlab run` "
                                "writes it", input=self.path) from None
            if "\x00" in line:
                raise DataError(f"{self.path}: line {self.lineno}: a NUL byte; expected CSV text as "
                                "`ringlab run` writes it", input=self.path)
            if not line.endswith("\n"):
                self.unterminated = self.lineno
            yield line


def check_rows(path: Path, f, required: tuple[str, ...], torn_ok: bool = False,
                strict: bool = True, experiment: str | None = None) -> tuple[list[str], int, int]:
    """Validate the CSV structure of the open binary file ``f``, one row at a time; return the
    header, the number of complete rows and the number of a torn last line (0: none).

    A torn last line is a DataError unless ``torn_ok``.  ``strict`` also refuses unknown columns
    after ``trial``, metric cells of ok trials that are not finite numbers > 0 and the
    values ``check_row`` refuses (``ringlab.rundir.rawrows``).  ``experiment`` names the experiment
    of a file without an ``experiment`` column (schema version 4: env.json holds it)."""
    lines = _Lines(path, f)
    reader = csv.reader(lines)
    header = _check_header(path, reader, required, strict)
    rows_check = RowChecks(path, header, experiment) if strict else None
    torn, n_rows = 0, 0
    idx = {c: header.index(c) for c in INT_COLUMNS if c in header}
    metrics = {c: header.index(c) for c in METRIC_COLUMNS if c in header} if strict else {}
    si = header.index("status") if "status" in header else None
    ic = header.index("icount_source") if "icount_source" in header else None
    measured: set[str] = set()                       # metric columns with a value in some ok trial
    first_nan: dict[str, tuple[int, str]] = {}       # ... and their first ok trial without one
    try:
        for row in reader:
            lineno = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                if lines.unterminated == lineno:
                    if not torn_ok:
                        raise DataError(f"{path}: line {lineno}: a torn last row ({len(row)} of {len(header)} "
                                        "fields, no newline), as a killed run leaves; expected complete rows "
                                        "(`ringlab run --resume` repairs it)", input=path)
                    torn = lineno  # what a killed run leaves; --resume repairs it
                    break
                raise DataError(f"{path}: line {lineno}: {len(row)} fields; expected {len(header)} "
                                "(one per header column)", input=path)
            n_rows += 1
            if n_rows > MAX_RAW_ROWS:
                raise DataError(f"{path}: line {lineno}: more than {MAX_RAW_ROWS} trial rows; expected at most "
                                f"{MAX_RAW_ROWS} rows in one raw.csv (split the run)", input=path)
            _check_int_cells(path, lineno, row, idx)
            ok = si is None or row[si].strip() == "ok"
            if metrics and ok and (ic is None or row[ic] != "callgrind"):
                _check_metric_cells(path, lineno, row, metrics, measured, first_nan)
            if rows_check is not None:
                rows_check.check(lineno, row, ok)
    except csv.Error as e:
        raise DataError(f"{path}: line {reader.line_num}: {clean(e, 80)}; expected one CSV row per line",
                        input=path) from None
    if n_rows == 0:
        raise DataError(f"{path}: line 1: a header and no rows; expected at least one trial row "
                        "(the run recorded no trial)", input=path)
    for c in metrics:   # a column no ok trial fills is one this experiment does not measure
        if c in measured and c in first_nan:
            lineno, v = first_nan[c]
            raise DataError(f"{path}: line {lineno}: column '{c}' is {quote(v)} (empty (NaN)); "
                            "expected a finite number > 0 in an ok trial", input=path)
    return header, n_rows, torn


# -- the column-wise check of a plain file ---------------------------------------------------------
#: bytes of raw.csv ``scan_plain`` reads at a time (then on to the end of the line)
SCAN_BYTES = 16 << 20
#: a value this close to a bound (relative) is left to ``check_rows`` (pandas' and Python's float
#: parsing may differ in the last bit)
_BOUND_MARGIN = 1e-9
_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


@dataclass
class PlainScan:
    """What ``scan_plain`` saw of a plain raw.csv: the header, the number of rows, and per
    checked column whether each row's cell is empty (``empty``) or "nan" in any case
    (``nan_text``, metric columns)."""
    header: list[str]
    n_rows: int
    empty: dict[str, np.ndarray] = field(default_factory=dict)
    nan_text: dict[str, np.ndarray] = field(default_factory=dict)


def _checked_columns(header: list[str]) -> list[str]:
    """The columns whose empty cells ``frame_passes`` must tell from other missing values."""
    params = {p for b in INT_PARAM_COLUMNS.values() for p in b}
    return [c for c in header if c in INT_COLUMNS or c in METRIC_COLUMNS or c in params or c == "timestamp"]


def scan_plain(path: Path, f, required: tuple[str, ...], strict: bool = True) -> PlainScan | None:
    """The header (checked as ``check_rows`` checks it: its errors are raised) and the layout of
    the open binary file ``f`` when it is plain (module docstring); None when it is not, or has
    no row or more than ``MAX_RAW_ROWS``: ``check_rows`` then reads it row by row."""
    first = f.readline()
    if not first.endswith(b"\n") or b'"' in first or b"\r" in first or b"\x00" in first:
        return None
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError:
        return None
    header = _check_header(path, csv.reader([text]), required, strict)
    k = len(header) - 1
    if k < 1:
        return None
    checked = {c: header.index(c) for c in _checked_columns(header)}
    metrics = [c for c in METRIC_COLUMNS if c in checked]
    limit = csv.field_size_limit()
    empty: dict[str, list] = {c: [] for c in checked}
    nan_text: dict[str, list] = {c: [] for c in metrics}
    n_rows = 0
    while True:
        block = f.read(SCAN_BYTES)
        if not block:
            break
        if not block.endswith(b"\n"):
            block += f.readline()
            if not block.endswith(b"\n"):   # a last line without a newline (torn)
                return None
        if b'"' in block or b"\r" in block or b"\x00" in block:
            return None
        if not block.isascii():
            try:
                block.decode("utf-8")
            except UnicodeDecodeError:
                return None
        a = np.frombuffer(block, dtype=np.uint8)
        nl = np.flatnonzero(a == 10)
        commas = np.flatnonzero(a == 44)
        n = len(nl)
        if len(commas) != n * k:
            return None
        starts = np.empty(n, dtype=nl.dtype)
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
        cm = commas.reshape(n, k)
        # sorted commas, n x k of them: each line holds exactly k when each row of cm lies in its line
        if not ((cm[:, 0] >= starts).all() and (cm[:, -1] < nl).all()):
            return None
        if int((nl - starts).max()) > limit:
            return None
        n_rows += n
        if n_rows > MAX_RAW_ROWS:
            return None
        for c, j in checked.items():
            lo = starts if j == 0 else cm[:, j - 1] + 1
            hi = cm[:, j] if j < k else nl
            empty[c].append(lo == hi)
            if c in nan_text:
                three = (hi - lo) == 3
                at = np.where(three, lo, 0)
                word = np.ones(n, dtype=bool)
                for off, ch in enumerate(b"nan"):
                    word &= (a[np.minimum(at + off, len(a) - 1)] | 0x20) == ch
                nan_text[c].append(three & word)
    if n_rows == 0:
        return None
    return PlainScan(header, n_rows, {c: np.concatenate(v) for c, v in empty.items()},
                     {c: np.concatenate(v) for c, v in nan_text.items()})


def _is_str(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.StringDtype)


def _ints_pass(s: pd.Series, empty: np.ndarray, lo: int, hi: int, empty_ok: bool) -> bool:
    """An integer column of a plain file: every cell an integer in [lo, hi] (or empty, when
    ``empty_ok``).  int64 cells are the integers Python's int() reads from their text; a column
    of another dtype passes only when every cell is empty."""
    if s.dtype == np.int64:
        v = s.to_numpy()
        return bool(len(v) == 0 or (v.min() >= lo and v.max() <= hi))
    return empty_ok and bool(s.isna().all()) and bool(empty.all())


def _metric_values(s: pd.Series) -> np.ndarray | None:
    if s.dtype == np.int64 or s.dtype == np.float64:
        return s.to_numpy(dtype=float)
    return None


#: the longest timestamp ``TIMESTAMP_RE`` takes: 19 + 7 (".ffffff") + 6 ("+00:00") characters
_TS_MAX = 32


def _timestamp_shape(m: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Per row of ``m`` (ASCII bytes, zero-padded, ``length`` of them): whether it is
    ``TIMESTAMP_RE`` with ASCII digits: YYYY-MM-DDTHH:MM:SS, then ".f" with 1 to 6 digits or
    nothing, then "Z" or "+00:00"."""
    digit = (m >= ord("0")) & (m <= ord("9"))
    ok = (length >= 20) & (length <= _TS_MAX)
    for i in (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18):
        ok &= digit[:, i]
    for i, ch in ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":")):
        ok &= m[:, i] == ord(ch)
    last = np.maximum(length - 1, 0)
    rows = np.arange(len(m))
    zulu = m[rows, last] == ord("Z")
    end = np.where(zulu, length - 1, length - 6)           # where the offset begins
    offset = np.ones(len(m), dtype=bool)
    for j, ch in enumerate(b"+00:00"):
        offset &= m[rows, np.clip(end + j, 0, _TS_MAX)] == ch
    ok &= zulu | offset
    frac = end - 19                                        # "" or "." and 1 to 6 digits
    ok &= (frac == 0) | ((frac >= 2) & (frac <= 7) & (m[:, 19] == ord(".")))
    pos = np.arange(m.shape[1])
    inside = (pos >= 20) & (pos < end[:, None])
    ok &= ~(inside & ~digit).any(axis=1)
    return ok


def _timestamps_pass(s: pd.Series, empty: np.ndarray) -> bool:
    """Every cell empty or accepted by ``timestamp_problem``: ``TIMESTAMP_RE`` on ASCII digits
    (``_timestamp_shape``: stricter than the row check, never looser), then the date and time by
    number (fromisoformat's ranges: year >= 1, the month's days, 23:59:59)."""
    na = s.isna().to_numpy()
    if (na & ~empty).any():
        return False
    if na.all():
        return True
    if not _is_str(s):
        return False
    try:
        b = s[~na].to_numpy(dtype=object).astype(f"S{_TS_MAX + 1}")
    except UnicodeEncodeError:
        return False
    m = np.frombuffer(b.tobytes(), dtype=np.uint8).reshape(-1, _TS_MAX + 1)
    if not _timestamp_shape(m, (m != 0).sum(axis=1)).all():   # NUL is never in a plain file
        return False
    d = m[:, :19].astype(np.int64) - ord("0")

    def num(i, j):
        out = np.zeros(len(d), dtype=np.int64)
        for c in range(i, j):
            out = out * 10 + d[:, c]
        return out
    year, month, day = num(0, 4), num(5, 7), num(8, 10)
    hour, minute, second = num(11, 13), num(14, 16), num(17, 19)
    if not ((year >= 1).all() and ((month >= 1) & (month <= 12)).all()):
        return False
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = _DAYS[month - 1] + ((month == 2) & leap)
    return bool(((day >= 1) & (day <= days)).all() and (hour <= 23).all() and (minute <= 59).all()
                and (second <= 59).all())


def frame_passes(scan: PlainScan, df: pd.DataFrame, strict: bool = True, experiment: str | None = None) -> bool:
    """True when every row of ``df`` (parsed by pandas from the plain file ``scan`` describes)
    passes the value checks of ``check_rows``; False when one may not (``check_rows`` then
    reads the file and names the first bad line, or finds none)."""
    if list(df.columns) != scan.header or len(df) != scan.n_rows:
        return False
    for c in INT_COLUMNS:
        if c in df.columns:
            hi = MAX_INDEX if strict else np.iinfo(np.int64).max
            lo = 0 if strict else np.iinfo(np.int64).min
            if not _ints_pass(df[c], scan.empty[c], lo, hi, empty_ok=c in ("iteration", "round")):
                return False
    if not strict:
        return True
    for c in RUN_COLUMNS:
        if c in df.columns:
            s = df[c]
            if not _is_str(s) or s.isna().any() or not (s == s.iloc[0]).all():
                return False
    if "timestamp" in df.columns and not _timestamps_pass(df["timestamp"], scan.empty["timestamp"]):
        return False
    bounds = INT_PARAM_COLUMNS.get(experiment, {}) if experiment is not None else {}
    if not any(p in df.columns for p in bounds) and "experiment" in df.columns:
        bounds = INT_PARAM_COLUMNS.get(str(df["experiment"].iloc[0]), {})
    for p, (lo, hi) in bounds.items():
        if p in df.columns and not _ints_pass(df[p], scan.empty[p], lo, hi, empty_ok=True):
            return False
    if "status" not in df.columns:
        ok = np.ones(len(df), dtype=bool)
    elif _is_str(df["status"]):   # each distinct value stripped once
        codes, uniques = pd.factorize(df["status"], use_na_sentinel=True)
        ok_value = np.array([str(u).strip() == "ok" for u in uniques] + [False])
        ok = ok_value[codes]
    elif df["status"].dtype == object:
        return False
    else:   # numbers or booleans: no cell reads "ok"
        ok = np.zeros(len(df), dtype=bool)
    timed = ok.copy()
    if "icount_source" in df.columns:
        timed &= ~df["icount_source"].eq("callgrind").fillna(False).to_numpy(dtype=bool)
    for c in METRIC_COLUMNS:
        if c not in df.columns or not ok.any():
            continue
        v = _metric_values(df[c])
        if v is None:
            return False
        # the metric check of an ok, timed trial: a finite number > 0, or empty / "nan" while no
        # trial of the column has a value
        m = v[timed]
        na = np.isnan(m)
        good = ~na & np.isfinite(m) & (m > 0)
        if (~na & ~good).any() or (good.any() and na.any()):
            return False
        if na.any() and not (scan.empty[c][timed][na] | scan.nan_text[c][timed][na]).all():
            return False
        # RowChecks' bounds, in every ok trial (callgrind's included)
        lo, hi = METRIC_BOUNDS[c]
        m = v[ok]
        m = m[np.isfinite(m) & (m > 0)]
        if len(m) and not (m.min() > lo * (1 + _BOUND_MARGIN) and m.max() < hi * (1 - _BOUND_MARGIN)):
            return False
    return True
