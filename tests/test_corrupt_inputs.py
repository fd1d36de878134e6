"""Corrupt run folders give one clear error (file, line, what was expected) and exit 2.

The corpus is made from a real (mock-executor) run: its raw.csv with non-UTF-8 bytes,
a non-integer trial, a short row, no rows, nothing at all; its env.json cut short.
Every command that reads them is tried: compare, summarize, provenance, run --resume.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ringlab import rundir
from ringlab.lab import cli
from ringlab.errors import DataError

from tests.fakes.cli_runs import in_process_run

PARAMS = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false", "-p", "variants",
          "batch,reorder", "-p", "modes", "0", "-p", "trials", "2", "-p", "warmup", "0"]


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    yield from in_process_run(tmp_path_factory.mktemp("corrupt"), PARAMS)


def _lines(run: Path) -> list[bytes]:
    return (run / "raw.csv").read_bytes().splitlines(keepends=True)


def _corpus(good: Path) -> dict[str, tuple[str, bytes, str]]:
    """name -> (file, content, the words the error must contain)."""
    lines = _lines(good)
    header = lines[0].decode().rstrip("\n").split(",")
    ti = header.index("trial")
    row = lines[2].decode().rstrip("\n").split(",")
    row[ti] = "two"
    bad_trial = b"".join(lines[:2]) + (",".join(row) + "\n").encode() + b"".join(lines[3:])
    return {
        "non_utf8": ("raw.csv", b"".join(lines[:2]) + lines[2][:2] + b"\xff" + lines[2][2:] + b"".join(lines[3:]),
                     "line 3"),
        "bad_trial": ("raw.csv", bad_trial, "line 3: column 'trial' is 'two'; expected an integer"),
        "short_row": ("raw.csv", b"".join(lines[:2]) + b"x,y,z\n" + b"".join(lines[2:]), "line 3: 3 fields"),
        "header_only": ("raw.csv", lines[0], "line 1: a header and no rows"),
        "empty": ("raw.csv", b"", "line 1: empty file"),
        "bad_env": ("env.json", b'{"run_id": "x",\n "experiment": ', "line 2"),
    }


CASES = ["non_utf8", "bad_trial", "short_row", "header_only", "empty", "bad_env"]
ENTRIES = ["compare", "summarize", "provenance", "resume"]
#: an empty or header-only raw.csv is what a run killed before its first trial leaves: --resume goes on
RESUMABLE = {"header_only", "empty"}


def _argv(entry: str, run: Path) -> list[str]:
    return {"compare": ["compare", str(run / "raw.csv"), "--baseline", "batch"],
            "summarize": ["summarize", str(run), "--no-figures"],
            "provenance": ["provenance", str(run)],
            "resume": ["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(run), "--resume"]}[entry]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("case", CASES)
def test_corrupt_file_gives_one_clear_error(good_run, tmp_path, capsys, case, entry):
    if entry == "compare" and case == "bad_env":
        pytest.skip("compare reads raw.csv only")
    name, content, words = _corpus(good_run)[case]
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    (run / name).write_bytes(content)
    rc = cli.main(_argv(entry, run))
    err = capsys.readouterr().err
    if entry == "resume" and case in RESUMABLE:
        assert rc == 0, err
        return
    assert rc == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert str(run / name) in lines[0] and words in lines[0], lines[0]
    assert "expected" in lines[0]


def test_torn_last_line_is_an_error_for_readers_and_left_out_for_the_run(good_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    with open(run / "raw.csv", "ab") as f:
        f.write(b"20261130T000000Z-abc,ptr_ring,host,batch,0,10")
    n = len(_lines(good_run))
    with pytest.raises(DataError, match=rf"raw.csv: line {n + 1}: a torn last row"):
        rundir.read_raw(run / "raw.csv")
    df = rundir.read_raw(run / "raw.csv", torn_ok=True)
    assert len(df) == n - 1


def test_old_files_get_round_from_trial(good_run, tmp_path):
    import pandas as pd
    df = rundir.read_raw(good_run / "raw.csv", strict=False).drop(columns=["round"])
    df.to_csv(tmp_path / "raw.csv", index=False)
    old = rundir.read_raw(tmp_path / "raw.csv")
    assert (old["round"] == old["trial"]).all()
    assert list(old.columns).index("round") == list(old.columns).index("trial") + 1


def test_read_raw_missing_file_and_bad_json_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        rundir.read_raw(tmp_path / "raw.csv")
    (tmp_path / "env.json").write_text("[1, 2]")
    with pytest.raises(DataError, match="line 1: a JSON list; expected a JSON object"):
        rundir.read_env(tmp_path)
