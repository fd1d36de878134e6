"""The values a raw.csv row may hold, checked one row at a time by ``read_raw``.

* one run per file: ``run_id``, ``experiment`` and ``host`` are the same in every row;
* indexes (``trial``, ``round``, ``iteration``, ``order``) are integers in [0, ``MAX_INDEX``];
* integer parameter columns of an experiment (``INT_PARAM_COLUMNS``) hold integers in their bounds;
* metrics of an ok trial lie in ``METRIC_BOUNDS``: 10^-3 ns to 10^12 ns (16 minutes) per
  operation; a denormal such as 1e-320 ns is a corrupt file, not a speed-up.

Bounds are documented in docs/results.md ("What a raw.csv may hold").
"""
from __future__ import annotations

import math
from pathlib import Path

from ringlab.errors import DataError

#: trial, round, iteration and order are at most this (a run holds at most 10^6 planned trials)
MAX_INDEX = 10**9
#: columns that hold one value for the whole file
RUN_COLUMNS = ("run_id", "experiment", "host")
#: integer parameter columns and their inclusive bounds (the experiments' own parameter bounds)
INT_PARAM_COLUMNS: dict[str, dict[str, tuple[int, int]]] = {
    "ptr_ring": {"mode": (0, 2), "size": (2, 10_000_000), "count": (1, 10**12), "batch": (0, 1_000_000)},
    "page_frag": {"align": (0, 1), "alloc_len": (1, 4096), "nr_test": (1, 10**12)},
    "perf_rb": {"count": (1, 10**12)},
    "ringtest": {"ring_size": (1, 1 << 30), "run_cycles": (1, 2**31 - 2), "batch": (1, 2**31 - 2),
                 "outstanding": (0, 2**31 - 2), "param": (0, 2**31 - 2)},
}
#: plausible values of a metric in an ok trial (inclusive), in its unit
METRIC_BOUNDS: dict[str, tuple[float, float]] = {
    "ns_per_op": (1e-3, 1e12),
    "elapsed_ns": (1e-3, 1e16),
    "elapsed_us": (1e-6, 1e13),
}


def _bound_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:g}"


class RowChecks:
    """Checks of one raw.csv's rows against the first row and the bounds above."""

    def __init__(self, path: Path, header: list[str]):
        self.path = path
        self.run_idx = {c: header.index(c) for c in RUN_COLUMNS if c in header}
        self.first: dict[str, str] = {}
        self.index_idx = {c: header.index(c) for c in ("trial", "round", "iteration", "order") if c in header}
        self.metric_idx = {c: header.index(c) for c in METRIC_BOUNDS if c in header}
        self.param_idx: dict[str, tuple[int, tuple[int, int]]] = {}
        self.header = header

    def _fail(self, lineno: int, col: str, value: str, expected: str) -> DataError:
        return DataError(f"{self.path}: line {lineno}: column '{col}' is {value[:40]!r}; expected {expected}")

    def check(self, lineno: int, row: list[str], ok: bool) -> None:
        for c, i in self.run_idx.items():
            v = row[i]
            first = self.first.setdefault(c, v)
            if v != first:
                raise self._fail(lineno, c, v, f"{first[:40]!r} as in the first row (one run per raw.csv)")
            if c == "experiment" and not self.param_idx:
                bounds = INT_PARAM_COLUMNS.get(v, {})
                self.param_idx = {p: (self.header.index(p), b) for p, b in bounds.items() if p in self.header}
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
