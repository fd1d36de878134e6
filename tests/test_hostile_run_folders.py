"""Hostile run folders: what a careless or hostile user can put in a run folder, and the one
error line each must give.

* a file of the folder that is a symbolic link (raw.csv -> a root-only file) is refused, never
  followed, by every command that reads it, and nothing of the target is printed;
* an error quotes at most 40 characters of what it could not parse, without control characters
  or escape sequences;
* ``--resume`` keeps only rows of its own plan, each trial once;
* ``ringlab run --out`` inside results/ (directly or through a link) is refused;
* ``ringlab summarize`` on an unchanged run leaves compare.csv as it is when only the last bits
  of its floats would differ (as another CPU's numpy gives them);
* a ``timestamp`` that is not an ISO-8601 UTC time is refused.

The good run is made once (a mock-executor ``ringlab run ptr_ring``); each test copies it.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from ringlab import paths, rundir
from ringlab.errors import DataError, ParamError
from ringlab.lab import cli

from tests.fakes.cli_runs import in_process_run

PARAMS = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false", "-p", "variants",
          "batch,reorder", "-p", "modes", "0", "-p", "trials", "2", "-p", "warmup", "0"]
#: the first line of a root-only file the links point at
SECRET = "root:*:20228:0:99999:7:::SECRET-HASH"
LINK = ("a symbolic link; ringlab reads a run folder's files only from the folder itself, never through "
        "a link; expected ")
RAW = "a raw.csv written by `ringlab run`"
ENV = "the env.json of a run folder written by `ringlab run`"
RESUME = ["run", "ptr_ring", "--no-build", "--no-progress", "--resume", "--out"]


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    yield from in_process_run(tmp_path_factory.mktemp("hostile"), PARAMS)


@pytest.fixture
def run(good_run, tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(good_run, d)
    return d


@pytest.fixture
def secret(tmp_path) -> Path:
    p = tmp_path / "shadow"
    p.write_text(SECRET + "\nroot2:x:1:\n")
    p.chmod(0o600)
    return p


def one_error(capsys, argv: list[str]) -> str:
    """The one line ``ringlab ARGV`` prints on stderr, having exited 2."""
    rc = cli.main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _lines(run: Path) -> list[str]:
    return (run / "raw.csv").read_text().splitlines()


def _set_cell(run: Path, col: str, value: str, row: int = 1) -> None:
    lines = _lines(run)
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(col)] = value
    lines[row] = ",".join(cells)
    (run / "raw.csv").write_text("\n".join(lines) + "\n")


# -- links out of the run folder ----------------------------------------------------------------------
def _readers(run: Path, good: Path) -> dict[str, list[str]]:
    return {"summarize": ["summarize", str(run), "--no-figures"], "mail": ["mail", str(run)],
            "provenance": ["provenance", str(run)],
            "provenance-against": ["provenance", str(good), "--against", str(run)],
            "compare": ["compare", str(run / "raw.csv"), "--baseline", "batch"]}


@pytest.mark.parametrize("cmd", ["summarize", "mail", "provenance", "provenance-against", "compare"])
def test_raw_csv_linked_to_a_root_only_file_is_refused_unread(run, good_run, secret, capsys, cmd):
    (run / "raw.csv").unlink()
    (run / "raw.csv").symlink_to(secret)
    line = one_error(capsys, _readers(run, good_run)[cmd])
    assert line == f"ringlab {cmd.split('-')[0]}: error: {run / 'raw.csv'}: {LINK}{RAW}"
    assert "root:" not in line


@pytest.mark.parametrize("cmd", ["summarize", "mail", "provenance", "provenance-against"])
def test_env_json_linked_to_a_root_only_file_is_refused_unread(run, good_run, secret, capsys, cmd):
    (run / "env.json").unlink()
    (run / "env.json").symlink_to(secret)
    line = one_error(capsys, _readers(run, good_run)[cmd])
    assert line == f"ringlab {cmd.split('-')[0]}: error: {run / 'env.json'}: {LINK}{ENV}"


def test_files_linked_to_another_folder_are_refused(run, good_run, tmp_path, capsys):
    """raw.csv and env.json as links to a folder that holds a raw.csv and an env.json."""
    outside = tmp_path / "outside"
    shutil.copytree(good_run, outside)
    for name in ("raw.csv", "env.json"):
        (run / name).unlink()
        (run / name).symlink_to(outside)
    line = one_error(capsys, ["compare", str(run / "raw.csv"), "--baseline", "batch"])
    assert line == f"ringlab compare: error: {run / 'raw.csv'}: {LINK}{RAW}"
    with pytest.raises(DataError, match=r"env.json: a symbolic link; ringlab reads"):
        rundir.read_env(run)


def test_resume_into_a_linked_raw_csv_is_refused_and_the_target_left_alone(run, secret, capsys):
    (run / "raw.csv").unlink()
    (run / "raw.csv").symlink_to(secret)
    before = secret.read_bytes()
    line = one_error(capsys, RESUME + [str(run)])
    assert line == f"ringlab run: error: {run / 'raw.csv'}: {LINK}the raw.csv of the interrupted run"
    assert secret.read_bytes() == before


def test_summary_files_linked_out_of_the_folder_are_refused(run, secret):
    (run / "summary.md").symlink_to(secret)
    with pytest.raises(DataError, match=r"summary.md: a symbolic link; ringlab reads"):
        rundir.RunOutput(run).summary_md
    (run / "compare.csv").symlink_to(secret)
    with pytest.raises(DataError, match=r"compare.csv: a symbolic link; ringlab reads"):
        rundir.RunOutput(run).compare_csv


def test_a_fifo_as_raw_csv_is_refused_without_blocking(run, capsys):
    (run / "raw.csv").unlink()
    os.mkfifo(run / "raw.csv")
    line = one_error(capsys, ["summarize", str(run), "--no-figures"])
    assert line == f"ringlab summarize: error: {run / 'raw.csv'}: a FIFO, not a regular file; expected {RAW}"


# -- what an error quotes ----------------------------------------------------------------------------------
def test_a_header_error_quotes_40_sanitised_characters(run, capsys):
    body = "\n".join(_lines(run)[1:])
    (run / "raw.csv").write_text("\x1b]0;owned\x07" + "A" * 200 + ",x\n" + body + "\n")
    line = one_error(capsys, ["compare", str(run / "raw.csv"), "--baseline", "batch"])
    assert line == (f"ringlab compare: error: {run / 'raw.csv'}: line 1: the header has no column 'variant'; "
                    f"expected {RAW} (got: '?]0;owned?{'A' * 30}'...)")


def test_a_cell_error_quotes_40_sanitised_characters(run, capsys):
    _set_cell(run, "trial", "\x1b[31m" + "9" * 100)
    line = one_error(capsys, ["compare", str(run / "raw.csv"), "--baseline", "batch"])
    assert line == (f"ringlab compare: error: {run / 'raw.csv'}: line 2: column 'trial' is "
                    f"'?[31m{'9' * 35}'...; expected an integer")


# -- --resume keeps only rows of its own plan ------------------------------------------------------------------
def test_resume_refuses_a_duplicated_trial_row(run, capsys):
    lines = _lines(run)
    (run / "raw.csv").write_text("\n".join(lines + [lines[1]]) + "\n")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    variant = lines[1].split(",")[0]
    line = one_error(capsys, RESUME + [str(run)])
    assert line == (f"ringlab run: error: {run / 'raw.csv'}: line {len(lines) + 1}: column 'trial' is '0' of "
                    f"variant '{variant}', iteration '0': the same trial as line 2; expected each trial once "
                    "(--resume keeps only the rows it wrote)")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.parametrize("column, value, expected", [
    ("variant", "spsc", "expected one of batch, reorder"),
    ("trial", "7", "expected a trial index from 0 to 1"),
])
def test_resume_refuses_a_row_the_plan_does_not_hold(run, capsys, column, value, expected):
    lines = _lines(run)
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index(column)] = value
    (run / "raw.csv").write_text("\n".join(lines + [",".join(cells)]) + "\n")
    line = one_error(capsys, RESUME + [str(run)])
    assert line == (f"ringlab run: error: {run / 'raw.csv'}: line {len(lines) + 1}: column '{column}' is '{value}'; "
                    f"{expected}: a trial of this run's plan (--resume keeps only rows of the trials it runs)")


def test_resume_of_its_own_rows_goes_on(run, capsys):
    """The run's own rows (a complete run) pass the check: nothing left to run."""
    assert cli.main(RESUME + [str(run)]) == 0, capsys.readouterr().err
    assert len(_lines(run)) == 5


# -- --out never inside results/ -------------------------------------------------------------------------------------
def _results_refusal(out: Path, results: Path) -> str:
    return (f"ringlab run: error: parameter '--out': {out} is inside {results}, the results/ folder, which only "
            "`ringlab reproduce` writes (the committed runs); allowed: a folder outside results/, such as "
            "scratch/EXPERIMENT/NAME (--out left out writes under scratch/) or any other folder")


def test_run_out_inside_results_is_refused(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    (results / "ptr-ring").mkdir(parents=True)
    monkeypatch.setenv("RINGLAB_RESULTS", str(results))
    out = results / "ptr-ring" / "mine"
    line = one_error(capsys, ["run", "ptr_ring", *PARAMS, "--no-build", "--out", str(out)])
    assert line == _results_refusal(out, results.resolve())
    assert not out.exists()


def test_run_out_into_results_through_a_link_is_refused(tmp_path, monkeypatch, capsys):
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setenv("RINGLAB_RESULTS", str(results))
    (tmp_path / "elsewhere").symlink_to(results)
    out = tmp_path / "elsewhere" / "mine"
    line = one_error(capsys, ["run", "ptr_ring", *PARAMS, "--no-build", "--out", str(out)])
    assert line == _results_refusal(out, results.resolve())
    assert not (results / "mine").exists()


@pytest.mark.parametrize("argv", [["sessions", "ptr_ring", "-n", "2", "-p", "profile", "smoke"],
                                  ["bisect", "ptr_ring", "-p", "tree", "/nonexistent", "-p", "good", "a", "-p", "bad", "b"]],
                         ids=["sessions", "bisect"])
def test_sessions_and_bisect_out_inside_results_are_refused(tmp_path, monkeypatch, capsys, argv):
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setenv("RINGLAB_RESULTS", str(results))
    out = results / "mine"
    line = one_error(capsys, [*argv, "--out", str(out)])
    assert f"parameter '--out': {out} is inside {results.resolve()}, the results/ folder" in line
    assert not out.exists()


def test_the_checkouts_results_folder_is_refused_too(tmp_path, monkeypatch):
    from ringlab.rundir.outputs import check_run_out
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    with pytest.raises(ParamError, match=r"parameter '--out': .* is inside .*results, the results/ folder"):
        check_run_out(paths.ROOT / "results" / "ptr-ring" / "mine")
    check_run_out(tmp_path / "scratch" / "mine")   # anywhere else is fine


def test_a_fleet_jobs_own_run_folder_is_allowed(tmp_path, monkeypatch):
    from ringlab.rundir.outputs import check_run_out
    results = tmp_path / "results"
    out = results / "ptr-ring" / "node-a" / "20260101T000000Z-abc123"
    record = results / "fleet" / "20260101T000000Z-1a2b3c" / "fleet.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"nodes": {"node-a": {"run_dir": str(out)}}}))
    monkeypatch.setenv("RINGLAB_RESULTS", str(results))
    check_run_out(out)
    with pytest.raises(ParamError, match="results/ folder"):
        check_run_out(out.parent / "20260101T000000Z-other0")


# -- compare.csv: not rewritten for rounding noise ----------------------------------------------------------------------
def _bump_last_digit(cell: str) -> str:
    return cell[:-1] + ("1" if cell[-1] != "1" else "2")


def _csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def test_summarize_leaves_compare_csv_whose_floats_differ_in_the_last_digits(run, capsys):
    assert cli.main(["summarize", str(run), "--no-figures"]) == 0
    written = (run / "compare.csv").read_text()
    rows = list(csv.reader(io.StringIO(written)))
    assert _csv_text(rows) == written
    i = rows[0].index("delta_pct")
    assert "." in rows[1][i] and len(rows[1][i]) > 12, rows[1][i]
    rows[1][i] = _bump_last_digit(rows[1][i])       # as numpy on another CPU gives it
    noisy = _csv_text(rows)
    (run / "compare.csv").write_text(noisy)
    assert cli.main(["summarize", str(run), "--no-figures"]) == 0
    assert (run / "compare.csv").read_text() == noisy
    rows[1][i] = "-5.0"                              # a real change is written
    (run / "compare.csv").write_text(_csv_text(rows))
    assert cli.main(["summarize", str(run), "--no-figures"]) == 0
    assert (run / "compare.csv").read_text() == written
    capsys.readouterr()


def test_same_table_compares_numbers_within_rounding_noise():
    from ringlab.rundir.files import same_table
    assert same_table(b"a,b\n1.0000000000000002,x\n", b"a,b\n1.0,x\n")
    assert same_table(b"a,b\nnan,x\n", b"a,b\nnan,x\n")
    assert not same_table(b"a,b\n1.00001,x\n", b"a,b\n1.0,x\n")
    assert not same_table(b"a,b\n1.0,x\n", b"a,b\n1.0,y\n")
    assert not same_table(b"a,b\n1.0,x\n", b"a,b\n1.0,x\n2,y\n")


# -- timestamp ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["yesterday", "2026-13-40T25:61:00Z", "2026-12-07 14:41:31Z",
                                   "2026-12-07T14:41:31.790851+02:00"])
def test_a_garbage_timestamp_is_refused(run, capsys, value):
    _set_cell(run, "timestamp", value, row=2)
    line = one_error(capsys, ["summarize", str(run), "--no-figures"])
    assert line == (f"ringlab summarize: error: {run / 'raw.csv'}: line 3: column 'timestamp' is {value!r}; "
                    "expected an ISO-8601 UTC time as `ringlab run` writes it (2026-12-07T14:41:31.790851Z) or empty")


def test_a_timestamp_with_escapes_is_quoted_sanitised(run, capsys):
    _set_cell(run, "timestamp", "\x1b]8;;http://x\x07" + "Z" * 60)
    line = one_error(capsys, ["compare", str(run / "raw.csv"), "--baseline", "batch"])
    assert "\x1b" not in line and "\x07" not in line
    assert line.endswith(f"line 2: column 'timestamp' is '?]8;;http://x?{'Z' * 26}'...; expected an ISO-8601 UTC "
                         "time as `ringlab run` writes it (2026-12-07T14:41:31.790851Z) or empty")
