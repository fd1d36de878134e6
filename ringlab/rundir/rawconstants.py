"""raw.csv's run constants (schema version 4): the text raw.csv keeps once in env.json.

* ``schema.RUN_CONSTANT_COLUMNS`` (``run_id``, ``experiment``, ``host``) hold one value per run
  by construction (``rawrows`` refuses a file in which they differ): raw.csv leaves them out and
  env.json's ``run_constants`` holds {column: cell}.
* ``schema.REF_COLUMNS`` (``counter_errors``, ``binary_sha256``, ``source_sha256``) are long text
  with few values in a run, but not one value by construction: raw.csv holds ``<column>_ref`` in
  the column's place, the index of the row's cell in env.json's ``raw_values`` {column: [cell, ...]}.

Cells are kept as raw.csv would hold them (``rawcsv``'s cell text), and read back by pandas with
raw.csv's own options, so a frame read from a version-4 file equals the one its version-3 twin
gives.  Writing: ``RawConstants.encode`` turns a trial's rows (cells in the full layout) into the
stored layout and says when env.json must be written first (a cell not seen before, or the run
constants at the first row): env.json never lacks a cell a written row refers to.  Reading:
``fill_constants`` puts the columns back in their version-3 places.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ringlab import schema
from ringlab.errors import DataError
from ringlab.rundir.inputs import quote

#: env.json's fields that hold the constants
CONSTANTS_FIELD, VALUES_FIELD = "run_constants", "raw_values"


def ref_name(column: str) -> str:
    return column + schema.REF_SUFFIX


def stored_columns(columns: list[str]) -> list[str]:
    """The version-4 header of a raw.csv whose full (version-3) layout is ``columns``."""
    return [ref_name(c) if c in schema.REF_COLUMNS else c for c in columns
            if c not in schema.RUN_CONSTANT_COLUMNS]


def is_stored_layout(header: list[str]) -> bool:
    """Whether a raw.csv header is the version-4 layout (it holds a ``<column>_ref`` column)."""
    return any(ref_name(c) in header for c in schema.REF_COLUMNS)


def has_column(header: list[str], column: str) -> bool:
    """Whether a frame read from a raw.csv with this header has ``column``."""
    if column in header:
        return True
    return is_stored_layout(header) and (column in schema.RUN_CONSTANT_COLUMNS or ref_name(column) in header)


class RawConstants:
    """The writer's side: the version-4 cells of rows given in the full layout ``columns``; the
    constants and value lists so far come from (and go back to) env.json's fields."""

    def __init__(self, columns: list[str], env: dict[str, Any]):
        self.columns = list(columns)
        self.constants: dict[str, str] = dict(env.get(CONSTANTS_FIELD) or {})
        self.values: dict[str, list[str]] = {c: list(v) for c, v in (env.get(VALUES_FIELD) or {}).items()}
        self._index = {c: {v: i for i, v in enumerate(vals)} for c, vals in self.values.items()}
        self._const_at = [(i, c) for i, c in enumerate(self.columns) if c in schema.RUN_CONSTANT_COLUMNS]
        self._ref_at = {i: c for i, c in enumerate(self.columns) if c in schema.REF_COLUMNS}
        self._keep = [i for i, c in enumerate(self.columns) if c not in schema.RUN_CONSTANT_COLUMNS]

    def env_fields(self) -> dict[str, Any]:
        """env.json's fields for the constants and value lists so far."""
        return {CONSTANTS_FIELD: dict(self.constants), VALUES_FIELD: {c: list(v) for c, v in self.values.items()}}

    def encode(self, rows: list[list[str]]) -> tuple[list[list[str]], bool]:
        """(the rows' cells in the stored layout, whether env.json must be written before them).
        ValueError when a row's run constant differs from the run's."""
        changed = False
        out = []
        for cells in rows:
            for i, c in self._const_at:
                if c not in self.constants:
                    self.constants[c] = cells[i]
                    changed = True
                elif cells[i] != self.constants[c]:
                    raise ValueError(f"raw.csv: column '{c}' is {quote(cells[i])}; expected "
                                     f"{quote(self.constants[c])}, the run's (one run per raw.csv)")
            stored = list(cells)
            for i, c in self._ref_at.items():
                index = self._index.setdefault(c, {})
                k = index.get(cells[i])
                if k is None:
                    k = index[cells[i]] = len(index)
                    self.values.setdefault(c, []).append(cells[i])
                    changed = True
                stored[i] = str(k)
            out.append([stored[i] for i in self._keep])
        return out, changed


# -- reading --------------------------------------------------------------------------------------
def parse_cells(cells: list[str]) -> pd.Series:
    """``cells`` as pandas reads one raw.csv column holding them (the same types and NaN)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["v"])
    w.writerows([c] for c in cells)
    buf.seek(0)
    return pd.read_csv(buf, low_memory=False, keep_default_na=True, skip_blank_lines=False)["v"]


def stored_constants(path: Path) -> tuple[dict, dict]:
    """env.json's (``run_constants``, ``raw_values``) beside the version-4 raw.csv ``path``;
    DataError naming the file when either is missing."""
    from ringlab.rundir.envjson import read_env   # envjson reads its text through rawcsv
    env = path.parent / "env.json"
    if not env.is_file():
        raise DataError(f"{path}: a raw.csv of schema version 4 without its env.json ({env}); expected "
                        "the run folder's env.json, which holds the run constants", input=path)
    doc = read_env(path.parent).doc
    consts, values = doc.get(CONSTANTS_FIELD), doc.get(VALUES_FIELD)
    if not isinstance(consts, dict) or not isinstance(values, dict):
        raise DataError(f"{env}: no '{CONSTANTS_FIELD}' and '{VALUES_FIELD}' objects; expected the run "
                        f"constants of {path.name} (schema version 4)", input=env)
    return consts, values


def _decoded(path: Path, df: pd.DataFrame, column: str, table: Any) -> pd.Series:
    """The ``<column>_ref`` column of ``df`` as the cells env.json's value list names."""
    ref = ref_name(column)
    where = f"env.json's '{VALUES_FIELD}'"
    if not isinstance(table, list) or not all(isinstance(v, str) for v in table):
        raise DataError(f"{path.parent / 'env.json'}: '{VALUES_FIELD}' has no list of texts for '{column}'; "
                        f"expected the cells {path.name}'s column '{ref}' refers to", input=path)
    codes = pd.to_numeric(df[ref], errors="coerce")
    bad = ~codes.isin(np.arange(len(table)))
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise DataError(f"{path}: line {row + 2}: column '{ref}' is {quote(df[ref].iloc[row])}; expected "
                        f"an index into {where}['{column}'] (0 to {len(table) - 1})", input=path)
    codes = codes.astype(np.int64).to_numpy()
    used = np.unique(codes)
    parsed = parse_cells([table[k] for k in used])
    return pd.Series(parsed.to_numpy()[np.searchsorted(used, codes)], index=df.index, name=column,
                     dtype=parsed.dtype)


def fill_constants(path: Path, df: pd.DataFrame, consts: dict, values: dict) -> pd.DataFrame:
    """The frame of a version-4 raw.csv (``df``, read from ``path``) with the columns env.json
    keeps (``stored_constants``) put back in their version-3 places; DataError naming the file
    when env.json lacks one."""
    names = {}
    for column in schema.REF_COLUMNS:
        ref = ref_name(column)
        if ref in df.columns:
            df[ref] = _decoded(path, df, column, values.get(column))
            names[ref] = column
    df.columns = [names.get(c, c) for c in df.columns]
    for at, column in enumerate(schema.RUN_CONSTANT_COLUMNS):
        if column in df.columns:
            continue
        if not isinstance(consts.get(column), str):
            raise DataError(f"{path.parent / 'env.json'}: '{CONSTANTS_FIELD}' has no text for '{column}'; "
                            f"expected the run constants of {path.name} (schema version 4)", input=path)
        one = parse_cells([consts[column]])
        df.insert(at, column, pd.Series(np.repeat(one.to_numpy(), len(df)), index=df.index, dtype=one.dtype))
    return df
