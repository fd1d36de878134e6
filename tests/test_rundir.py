"""ringlab.rundir.RunFolder and the run's end states, with the mock executor.

A locked folder refuses a concurrent --resume (naming the PID, adding no row); a run in
which every trial crashed ends ``failed`` with a non-zero exit; a killed run reads as
``interrupted`` and ``summarize`` says so first; SIGTERM exits 143 and SIGHUP 129, with
the governor restored; rounds are blocks; old env.json layouts still read.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.committed import committed

from fakes import add_cpufreq, write_topology
from ringlab import rundir
from ringlab.lab import cli
from ringlab.errors import RunLockedError
from ringlab.experiments.base import TrialSpec
from ringlab.run import plan as run_plan
from ringlab.system.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

from fakes.cli_runs import KEY, N_TRIALS, PARAMS, raw_rows as _rows, start_run as _start  # noqa: E402








def _wait_rows(proc, raw: Path, n: int, limit: float = 60) -> None:
    deadline = time.time() + limit
    while _rows(raw) < n and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert _rows(raw) >= n, proc.stderr.read() if proc.poll() is not None else "no rows in time"


# -- locking ---------------------------------------------------------------------------------------
def test_concurrent_resume_fails_fast_naming_the_pid(fakebin, tmp_path, capsys):
    out = tmp_path / "run"
    proc = _start(out, {"FAKE_SLEEP": "0.3"})
    try:
        _wait_rows(proc, out / "raw.csv", 2)
        assert rundir.RunFolder(out).status().state == "running"
        t0 = time.monotonic()
        rc = cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"])
        took = time.monotonic() - t0
        err = capsys.readouterr().err
        assert rc == 2, err
        assert f"PID {proc.pid}" in err and "in use" in err and "Traceback" not in err
        assert took < 10
        with pytest.raises(RunLockedError) as e:
            with rundir.RunFolder(out, mode="resume"):
                pass
        assert e.value.pid == proc.pid
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    df = rundir.read_raw(out / "raw.csv", strict=False)
    assert len(df) == N_TRIALS and not df.duplicated(KEY).any()
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "complete" and env["env_version"] == rundir.ENV_VERSION
    assert env["trials"] == {"ok": N_TRIALS, "failed": 0, "timeout": 0, "skipped": 0}
    assert "pid" not in env and "resumed_utc" not in env


def test_lock_is_released_and_a_second_holder_is_refused(tmp_path):
    with rundir.RunFolder(tmp_path / "r", mode="create") as f:
        f.write_env(run_id="x")
        assert rundir.RunFolder(f.path).is_locked()
        with pytest.raises(RunLockedError, match=f"PID {os.getpid()}"):
            rundir.RunFolder(f.path, mode="resume").__enter__()
    assert not rundir.RunFolder(tmp_path / "r").is_locked()


# -- end states ------------------------------------------------------------------------------------
def test_all_crashed_run_fails_with_nonzero_exit(fakebin, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_CRASH", "batch,reorder,spsc")
    out = tmp_path / "r"
    rc = cli.main(["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress", "--out", str(out)])
    stdout = capsys.readouterr().out
    assert rc == 1
    assert "status:     failed" in stdout
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "failed" and "no trial succeeded" in env["status_reason"]
    assert env["trials"]["ok"] == 0 and env["trials"]["failed"] == N_TRIALS
    st = rundir.RunFolder(out).status()
    assert st.state == "failed" and st.exit_code == 1
    assert rundir.RunFolder(out).status_line().startswith("Run status: FAILED: 0 ok, 12 failed")


def test_more_failures_than_the_threshold_fail_the_run(fakebin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH", "reorder,spsc")   # 2 of 3 arms crash: 8 of 12 trials
    out = tmp_path / "r"
    assert cli.main(["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress", "--out", str(out)]) == 1
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "failed" and "8 of 12 trials failed" in env["status_reason"]
    monkeypatch.setenv("FAKE_CRASH", "spsc")            # 4 of 12: under the threshold, but an arm has no trial
    assert cli.main(["run", "ptr_ring", *PARAMS, "--no-build", "--no-progress", "--out", str(tmp_path / "s")]) == 1
    env = json.loads((tmp_path / "s" / "env.json").read_text())
    assert env["status"] == "failed"
    assert env["status_reason"] == "arm 'spsc' has no successful trial (3 failed, 0 timed out, 0 skipped)"


def test_judge():
    assert rundir.judge({"ok": 0, "failed": 3, "timeout": 0})[0] == "failed"
    assert rundir.judge({"ok": 1, "failed": 1, "timeout": 0})[0] == "complete"
    assert rundir.judge({"ok": 1, "failed": 1, "timeout": 1})[0] == "failed"
    # per arm: an arm with no successful trial fails the run, under the threshold too
    ok, bad = {"ok": 3, "failed": 0, "timeout": 0}, {"ok": 0, "failed": 2, "timeout": 1}
    assert rundir.judge({"ok": 3, "failed": 2, "timeout": 1}, {"batch": ok, "reorder": bad}) == (
        "failed", "arm 'reorder' has no successful trial (2 failed, 1 timed out, 0 skipped)")
    assert rundir.judge({"ok": 3, "failed": 1, "timeout": 0}, {"batch": ok, "reorder": dict(ok, ok=1)}) == (
        "complete", "")
    assert rundir.judge({"ok": 3, "failed": 0, "timeout": 0}, {"base": ok}, {"forward": "perf not found"}) == (
        "failed", "arm 'forward' could not run: perf not found")
    # nothing ran: skipped for a run; a folder with no arms (compare-runs) keeps complete
    assert rundir.judge({"ok": 0, "failed": 0, "timeout": 0}, {}) == ("skipped", "no trial to run")
    assert rundir.judge({"ok": 0, "failed": 0, "timeout": 0}) == ("complete", "no trial to run")


def test_killed_run_reads_as_interrupted_and_summarize_says_so(fakebin, tmp_path, capsys):
    out = tmp_path / "run"
    proc = _start(out, {"FAKE_SLEEP": "0.3"})
    _wait_rows(proc, out / "raw.csv", 3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()
    assert json.loads((out / "env.json").read_text())["status"] == "running"
    st = rundir.RunFolder(out).status()
    assert st.state == "interrupted" and st.trials["ok"] >= 3
    line = rundir.RunFolder(out).status_line()
    assert line.startswith("Run status: INTERRUPTED:") and "--resume" in line and "of 12 planned" in line
    rc = cli.main(["summarize", str(out), "--no-figures"])
    printed = capsys.readouterr().out
    assert rc == 0
    assert printed.splitlines()[0] == line
    # a complete run has no status line
    assert cli.main(["run", "ptr_ring", "--no-build", "--no-progress", "--out", str(out), "--resume"]) == 0
    assert rundir.RunFolder(out).status_line() == ""


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_exit_128_plus_signum_and_restore_the_governor(fakebin, tmp_path, sig, code):
    sysfs = tmp_path / "sys"
    write_topology(sysfs, Topology.fake(1, 4, 1, 1))
    add_cpufreq(sysfs, range(4), governor="powersave", boost="cpufreq", boost_enabled=True)
    out = tmp_path / "run"
    params = ["-p", "profile", "smoke", "-p", "cpus", "1:2", "-p", "governor", "true", "-p", "variants",
              "batch,reorder,spsc", "-p", "modes", "0", "-p", "trials", "3", "-p", "warmup", "1"]
    proc = _start(out, {"FAKE_SLEEP": "0.3", "RINGLAB_SYSFS": str(sysfs)}, params)
    gov = sysfs / "devices/system/cpu/cpufreq/policy1/scaling_governor"
    _wait_rows(proc, out / "raw.csv", 2)
    assert gov.read_text().strip() == "performance"
    proc.send_signal(sig)
    assert proc.wait(30) == code, proc.stderr.read()
    proc.stderr.close()
    assert gov.read_text().strip() == "powersave"
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "interrupted" and sig.name in env["status_reason"]
    assert env["governor"]["restored"] is True


# -- rounds ----------------------------------------------------------------------------------------
def test_order_plan_rounds_are_blocks():
    specs = [TrialSpec({"variant": v, "size": s}, t, t < 1, (-1, -1)) for v in "abc" for s in (1, 2, 3)
             for t in range(6)]
    order = run_plan.order_plan(list(specs), 7)
    assert [(s.config["variant"], s.config["size"], s.trial) for s in order] == \
           [(s.config["variant"], s.config["size"], s.trial) for s in run_plan.order_plan(list(specs), 7)]
    assert [s.trial for s in order] == sorted(s.trial for s in order)
    arm_orders, block_orders = set(), set()
    for r in range(6):
        rnd = order[r * 9:(r + 1) * 9]
        # each arm of each configuration exactly once in the round
        assert sorted((s.config["variant"], s.config["size"]) for s in rnd) == \
               sorted((v, s) for v in "abc" for s in (1, 2, 3))
        # the arms of a configuration run back to back
        for b in range(3):
            block = rnd[b * 3:(b + 1) * 3]
            assert len({s.config["size"] for s in block}) == 1
            arm_orders.add(tuple(s.config["variant"] for s in block))
        block_orders.add(tuple(rnd[b * 3].config["size"] for b in range(3)))
    assert len(arm_orders) > 1 and len(block_orders) > 1   # drawn anew, not fixed
    other = run_plan.order_plan(list(specs), 8)
    assert [(s.config["variant"], s.config["size"]) for s in other] != \
           [(s.config["variant"], s.config["size"]) for s in order]


def test_raw_csv_round_column_holds_blocks(fakebin, tmp_path):
    out = tmp_path / "r"
    params = [*PARAMS, "-p", "sizes", "16,1000"]
    assert cli.main(["run", "ptr_ring", *params, "--no-build", "--no-progress", "--out", str(out)]) == 0
    df = rundir.read_raw(out / "raw.csv", strict=False).sort_values("order")
    cols = list(df.columns)
    assert cols.index("round") == cols.index("trial") + 1
    assert (df["round"] == df["trial"]).all()
    assert df["procs_running"].ge(1).all() and df["load1"].notna().all()
    firsts = set()
    for r, g in df.groupby("round", sort=True):
        assert g.groupby("size")["variant"].apply(sorted).tolist() == [["batch", "reorder", "spsc"]] * 2
        sizes = g["size"].tolist()   # two blocks of three arms, one configuration each
        assert len(set(sizes[:3])) == 1 and len(set(sizes[3:])) == 1 and sizes[0] != sizes[3]
        firsts.add(g["variant"].iloc[0])
    assert len(firsts) > 1


# -- env.json layouts ------------------------------------------------------------------------------
def test_read_env_reads_every_committed_layout():
    envs = committed(sorted((ROOT / "results").glob("*/*/*/env.json")))
    assert envs, "no committed env.json under results/"
    kinds = set()
    for p in envs:
        e = rundir.read_env(p.parent)
        assert e.environment, p
        kinds.add(e.kind)
    assert {"run", "environment"} <= kinds


def test_environment_and_compare_runs_write_through_runfolder(tmp_path, monkeypatch):
    from ringlab.studies import compare_runs
    from ringlab.studies import envreport
    env = envreport.write_environment_run(tmp_path / "env", probe_counters=False)
    e = rundir.read_env(tmp_path / "env")
    assert e.version == rundir.ENV_VERSION and e.kind == "environment" and e.status == "complete"
    assert e.environment["host"] == env["host"] and e.get("host") == env["host"]["host_id"]
    compare_runs.write(tmp_path / "cmp", [])
    c = rundir.read_env(tmp_path / "cmp")
    assert c.kind == "compare-runs" and c.get("inputs") == [] and c.environment


def test_read_env_converts_older_layouts(tmp_path):
    flat = {"host": {"host_id": "h1", "machine": "x86_64"}, "cpu": {"model": "M"}, "topology": {"n_cpus": 2},
            "git": {"commit": "abc"}}
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "env.json").write_text(json.dumps(flat))
    e = rundir.read_env(tmp_path / "e")
    assert (e.version, e.kind, e.get("host"), e.status) == (1, "environment", "h1", "complete")
    assert e.environment["cpu"] == {"model": "M"} and e.get("git") == {"commit": "abc"}
    v1 = {"schema_version": 1, "run_id": "r", "experiment": "ptr_ring", "host": "h1",
          "status": "failed: RuntimeError: boom", "environment": {"cpu": {"model": "M"}}}
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "env.json").write_text(json.dumps(v1))
    e = rundir.read_env(tmp_path / "r")
    assert (e.version, e.kind, e.environment["cpu"]["model"]) == (1, "run", "M")
    st = rundir.RunFolder(tmp_path / "r").status()
    assert (st.state, st.reason) == ("failed", "RuntimeError: boom")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "env.json").write_text(json.dumps({"environment": {"cpu": {}}, "inputs": ["a/b/c"]}))
    assert rundir.read_env(tmp_path / "c").kind == "compare-runs"


def test_sigint_exits_130_and_says_interrupted(fakebin, tmp_path):
    out = tmp_path / "run"
    proc = _start(out, {"FAKE_SLEEP": "0.3"})
    _wait_rows(proc, out / "raw.csv", 2)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 130, proc.stderr.read()
    proc.stderr.close()
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "interrupted" and rundir.RunFolder(out).status().state == "interrupted"
    assert not rundir.RunFolder(out).is_locked()


def test_raw_rows_are_written_at_once_and_synced_at_most_once_a_second(tmp_path, monkeypatch):
    """Each trial's rows are in the file (the page cache) as soon as they are written; fsync runs
    at most every FSYNC_INTERVAL_S and at close, not once per trial."""
    import os as _os
    from ringlab.rundir import rawcsv
    calls = []
    real = _os.fsync
    monkeypatch.setattr(rawcsv.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    sink = rawcsv.CsvSink(tmp_path / "raw.csv", ["trial", "ns_per_op"])
    for i in range(50):
        sink.write_rows([{"trial": i, "ns_per_op": 1.5}])
        assert (tmp_path / "raw.csv").read_text().count("\n") == i + 2     # header + rows so far
    assert len(calls) <= 2                                                # the header, maybe one more
    sink.close()
    assert len(calls) <= 3
