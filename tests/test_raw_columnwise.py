"""raw.csv's column-wise check and chunked parse give what the row-by-row check and one parse of
the whole file give: the same frame, or the same refusal naming the same line, column and value.

Each case edits one cell (or one line) of a plain raw.csv; ``read_raw`` must answer exactly as it
does with the column-wise path switched off (``scan_plain`` answering "not plain", so
``check_rows`` reads every row)."""
from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab.errors import DataError
from ringlab.rundir import rawcsv, rawrows, read_raw
from tests.synth import make_raw

ROOT = Path(__file__).resolve().parent.parent


def _good(tmp_path: Path, **kw) -> Path:
    df = make_raw(trials=6, warmup=1, rounds_col=True, seed=3, **kw)
    path = tmp_path / "raw.csv"
    df.to_csv(path, index=False, lineterminator="\n")
    return path


def _outcome(path: Path, monkeypatch, rowwise: bool):
    with monkeypatch.context() as m:
        if rowwise:
            m.setattr(rawcsv, "scan_plain", lambda *a, **k: None)
        try:
            return read_raw(path)
        except DataError as e:
            return str(e)


def _same(path: Path, monkeypatch) -> None:
    fast, slow = _outcome(path, monkeypatch, False), _outcome(path, monkeypatch, True)
    if isinstance(slow, str) or isinstance(fast, str):
        assert fast == slow
    else:
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)


#: (column, cell text) edits of one ok trial row
CELLS = [(c, v) for c in ("trial", "round", "iteration", "order")
         for v in ("", "-1", "1000000001", "1e3", "1.0", " 7", "+7", "1_0", "NA", "nan", "9" * 30, "\u0663")]
CELLS += [(c, v) for c in ("ns_per_op", "elapsed_ns")
          for v in ("", "nan", "NaN", "NAN", " nan", "NA", "null", "None", "-nan", "inf", "-Infinity", "1e309",
                    "1e-320", "0", "-1", "1e17", "0x10", " 10.5 ", "10.5e", "1_0", "abc", "0.001", "1e12")]
CELLS += [("timestamp", v) for v in ("", "NA", "2026-01-01T00:00:00Z", "2026-02-29T00:00:00Z",
                                     "2024-02-29T00:00:00.5+00:00", "2026-01-01T00:00:00.1234567Z",
                                     "2026-01-01 00:00:00Z", "2026-13-01T00:00:00Z", "0000-01-01T00:00:00Z",
                                     "2026-01-01T23:59:60Z", "\u0662026-01-01T00:00:00Z", "x")]
CELLS += [("status", v) for v in ("ok ", " ok", "OK", "failed", "", "NA")]
CELLS += [("icount_source", v) for v in ("callgrind", "perf", "")]
CELLS += [(c, v) for c in ("mode", "size", "count") for v in ("", "NA", "1.0", "3", "-1", "0", "2", "x", "1e3")]
CELLS += [(c, v) for c in ("run_id", "experiment", "host") for v in ("", "NA", "other", "page_frag")]
CELLS += [("variant", v) for v in ("", "NA", "new-arm")]


@pytest.mark.parametrize("col, value", CELLS)
def test_one_cell_gives_the_row_checks_answer(tmp_path, monkeypatch, col, value):
    path = _good(tmp_path)
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[4, col] = value
    df.to_csv(path, index=False, lineterminator="\n")
    _same(path, monkeypatch)


@pytest.mark.parametrize("col, value", [("ns_per_op", ""), ("ns_per_op", "1.5"), ("round", ""), ("size", ""),
                                        ("timestamp", ""), ("ns_per_op", "NA"), ("mode", "NA")])
def test_a_whole_column_gives_the_row_checks_answer(tmp_path, monkeypatch, col, value):
    path = _good(tmp_path)
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df[col] = value
    df.to_csv(path, index=False, lineterminator="\n")
    _same(path, monkeypatch)


@pytest.mark.parametrize("edit", [
    lambda b: b.replace(b"\n", b",x\n", 3),                       # an extra field in the header and two rows
    lambda b: b[:b.index(b"\n", 200)] + b",extra" + b[b.index(b"\n", 200):],
    lambda b: b.replace(b",ok,", b",,", 1).replace(b"batch", b"batch,", 1),
    lambda b: b.replace(b",ok,", b',"ok",', 1),                   # a quoted cell: read row by row
    lambda b: b.replace(b",ok,", b',"o\nk",', 1),
    lambda b: b.replace(b"\n", b"\r\n"),
    lambda b: b.replace(b"\n", b"\n\n", 4),                        # blank lines
    lambda b: b.replace(b"reorder", b"re\x00order", 1),
    lambda b: b.replace(b"reorder", b"re\xed\xb3\xbforder", 1),
    lambda b: b.replace(b"reorder", "r\u00e9order".encode(), 1),
    lambda b: b[:-1],                                              # a torn last line
    lambda b: b[:b.index(b"\n") + 1],                              # a header and no rows
    lambda b: b"",
    lambda b: b.replace(b"trial,", b"trial,trial,", 1),
])
def test_one_line_gives_the_row_checks_answer(tmp_path, monkeypatch, edit):
    path = _good(tmp_path)
    path.write_bytes(edit(path.read_bytes()))
    _same(path, monkeypatch)


def test_a_plain_file_is_checked_column_wise_without_the_row_check(tmp_path, monkeypatch):
    path = _good(tmp_path, counters=True, c2c=40.0)

    def no_rows(*a, **k):   # pragma: no cover - the point is that it is not called
        raise AssertionError("a plain raw.csv was checked row by row")
    monkeypatch.setattr(rawcsv, "check_rows", no_rows)
    assert len(read_raw(path)) == len(pd.read_csv(path))


def test_scan_blocks_end_on_lines(tmp_path, monkeypatch):
    path = _good(tmp_path)
    monkeypatch.setattr(rawrows, "SCAN_BYTES", 97)                 # blocks far shorter than the file
    _same(path, monkeypatch)
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[9, "trial"] = "x"
    df.to_csv(path, index=False, lineterminator="\n")
    assert "line 11: column 'trial' is 'x'" in _outcome(path, monkeypatch, False)


def _committed() -> list[str]:
    return sorted(glob.glob(str(ROOT / "results" / "**" / "raw.csv"), recursive=True))


@pytest.mark.parametrize("rows", [3, 50])
def test_a_chunked_parse_is_the_whole_files_parse(rows, monkeypatch, tmp_path):
    """Every committed raw.csv parsed in chunks of ``rows`` is pandas' frame of the whole file
    (or is parsed whole when its chunks' dtypes leave the whole file's dtype uncertain)."""
    mixed = {"flags": "a,b\n" + "True,1\nFalse,2\n" * 4 + ",3\n" * 5 + "True,4\n" * 5,
             "text": "a,b\n" + ",1\n" * 6 + "x,2\n" * 6 + ",3\n" * 6,
             "numbers": "a,b\n" + "1,1\n" * 6 + "1.5,2\n" * 6 + ",3\n" * 6,
             "numbers-text": "a,b\n" + "1,1\n" * 6 + "x,2\n" * 6}
    files = _committed()
    for name, text in mixed.items():
        (tmp_path / f"{name}.csv").write_text(text)
        files.append(str(tmp_path / f"{name}.csv"))
    monkeypatch.setattr(rawcsv, "PARSE_CHUNK_ROWS", rows)
    for fn in files:
        whole = pd.read_csv(fn, low_memory=False, encoding="utf-8", keep_default_na=True)
        with open(fn, "rb") as f:
            got = rawcsv._parse(Path(fn), f, len(whole))
        pd.testing.assert_frame_equal(got, whole, check_exact=True)
        for c in whole.columns:
            if whole[c].dtype == object:
                assert [type(x) for x in got[c]] == [type(x) for x in whole[c]], (fn, c)


def test_equal_texts_share_one_object(tmp_path, monkeypatch):
    path = _good(tmp_path)
    monkeypatch.setattr(rawcsv, "PARSE_CHUNK_ROWS", 5)
    df = read_raw(path)
    assert len({id(x) for x in df["variant"]}) == 2
    assert np.array_equal(df["variant"].to_numpy(dtype=object), pd.read_csv(path)["variant"].to_numpy(dtype=object))
