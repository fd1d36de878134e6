"""--resume: SIGKILL at any point leaves a valid raw.csv; resuming neither duplicates nor loses a trial."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from ringlab import rundir
from ringlab.lab import cli
from ringlab import run as runner

ROOT = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

from fakes.cli_runs import KEY, N_TRIALS, PARAMS, raw_rows as _rows, start_run as _start  # noqa: E402


def _command_lines() -> list[str]:
    """Every process's command line, read from /proc (no ps needed)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass        # the process ended meanwhile
    return out









def test_kill_and_resume(fakebin, tmp_path):
    out = tmp_path / "run"
    raw = out / "raw.csv"
    # Slow trials, so the SIGKILL lands mid-run (with a trial in flight), and an orphaned trial
    # would outlive the check below by far.
    proc = _start(out, {"FAKE_SLEEP": "1.0"})
    deadline = time.time() + 60
    while _rows(raw) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    partial = rundir.read_raw(raw, strict=False, torn_ok=True)                 # valid CSV after SIGKILL
    n_partial = len(partial)
    assert 3 <= n_partial < N_TRIALS
    assert not partial.duplicated(KEY).any()
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "running"          # killed: never reached the end
    # A torn last line, as a SIGKILL in the middle of a write would leave.
    with open(raw, "a") as f:
        f.write(partial.iloc[0]["run_id"] + ",ptr_ring,host,batch,0,10")
    # No orphaned trial process of the killed run keeps running (PDEATHSIG): the kernel kills it
    # within moments of the runner's death, long before its 1 s trial would end on its own.
    gone = time.time() + 0.6
    while any(str(fakebin) in args for args in _command_lines()) and time.time() < gone:
        time.sleep(0.05)
    assert not any(str(fakebin) in args for args in _command_lines())

    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    df = rundir.read_raw(raw, strict=False)
    assert len(df) == N_TRIALS and df["status"].eq("ok").all()
    assert not df.duplicated(KEY).any()
    assert df.iloc[:n_partial].equals(partial)     # what was there is kept as it was
    assert sorted(df["order"]) == list(range(N_TRIALS))
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "complete" and len(env["resumed_utc"]) == 1

    # Same plan order on resume: identical to an uninterrupted run with the same seed.
    fresh = tmp_path / "fresh"
    assert cli.main(["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress", "--out", str(fresh)]) == 0
    f = rundir.read_raw(fresh / "raw.csv", strict=False)
    assert df.sort_values("order")[KEY].values.tolist() == f.sort_values("order")[KEY].values.tolist()

    # Resuming a complete run runs nothing and adds nothing.
    res = runner.run_experiment("ptr_ring", {}, out, resume=True, build=False, progress=False, log=lambda m: None)
    assert res.counts == {} and res.already_done == N_TRIALS
    assert len(rundir.read_raw(raw, strict=False)) == N_TRIALS


def test_resume_refuses_different_parameters(fakebin, tmp_path, capsys):
    out = tmp_path / "run"
    params = list(PARAMS)
    params[params.index("trials") + 1] = "1"
    assert cli.main(["run", "ptr_ring", *params, "--no-build", "--no-progress", "--out", str(out)]) == 0
    before = (out / "raw.csv").read_bytes()
    rc = cli.main(["run", "ptr_ring", "-p", "trials", "5", "--no-build", "--out", str(out), "--resume"])
    err = capsys.readouterr().err
    assert rc == 2 and "parameter 'trials'" in err and "--resume" in err
    assert (out / "raw.csv").read_bytes() == before
    # the same value is fine
    assert cli.main(["run", "ptr_ring", "-p", "trials", "1", "--no-build", "--no-progress", "--out", str(out),
                     "--resume"]) == 0


def test_resume_needs_a_run_folder(fakebin, tmp_path, capsys):
    assert cli.main(["run", "ptr_ring", "--no-build", "--out", str(tmp_path / "nothing"), "--resume"]) == 2
    assert "'--resume'" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


def test_repair_csv(tmp_path):
    p = tmp_path / "raw.csv"
    p.write_text("a,b\n1,2\n3,")
    assert rundir.repair_csv(p) == 2
    assert p.read_text() == "a,b\n1,2\n"
    assert rundir.repair_csv(p) == 0
    p.write_text("a,b")  # torn header: nothing complete survives
    rundir.repair_csv(p)
    assert p.read_text() == ""


def test_newlines_in_fields_stay_on_one_line(tmp_path):
    p = tmp_path / "raw.csv"
    sink = rundir.CsvSink(p, ["a", "stderr_tail"])
    sink.write_rows([{"a": 1, "stderr_tail": "line1\nline2\r\n"}])
    sink.close()
    assert p.read_text().splitlines() == ["a,stderr_tail", "1,line1\\nline2\\n"]
