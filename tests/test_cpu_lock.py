"""Two ringlab runs never measure on the same CPUs at once; other work on them is named.

The per-CPU locks live in $RINGLAB_LOCK_DIR (a tmp folder here); the busy-CPU check
reads a fake /proc ($RINGLAB_PROCFS) with a runnable task on CPU 1.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fakes import write_procfs
from ringlab.lab import cli
from ringlab.errors import CpuBusyError
from ringlab.run import machine
from ringlab.system import procstat

ROOT = Path(__file__).resolve().parent.parent
FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))

PINNED = ["-p", "profile", "smoke", "-p", "cpus", "0:1", "-p", "governor", "false", "-p", "variants", "batch",
          "-p", "modes", "1", "-p", "trials", "1", "-p", "warmup", "0"]




def _holder(lock_dir: Path, cpus: list[int], seconds: float) -> subprocess.Popen:
    """Another process holding the CPU locks, as a concurrent ringlab run would."""
    code = textwrap.dedent(f"""
        import sys, time
        from ringlab.run import machine
        with machine.cpu_lock({cpus!r}, 0, print):
            print("locked", flush=True)
            time.sleep({seconds})
    """)
    env = dict(os.environ, RINGLAB_LOCK_DIR=str(lock_dir), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_second_run_on_the_same_cpus_refuses_naming_the_pid(fakebin, tmp_path, capsys):
    holder = _holder(tmp_path / "locks", [1], 30)
    try:
        out = tmp_path / "r"
        t0 = time.monotonic()
        rc = cli.main(["run", "ptr_ring", *PINNED, "-p", "quiet_timeout", "0.5", "--no-build", "--no-progress",
                       "--out", str(out)])
        err = capsys.readouterr().err
        assert rc == 2, err
        assert f"CPU 1 is measured by another ringlab run (PID {holder.pid}" in err
        assert time.monotonic() - t0 < 20
        assert not (out / "raw.csv").exists() or pd.read_csv(out / "raw.csv").empty
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_second_run_waits_for_the_cpus(fakebin, tmp_path, capsys):
    holder = _holder(tmp_path / "locks", [0, 1], 4)
    try:
        out = tmp_path / "r"
        t0 = time.monotonic()
        rc = cli.main(["run", "ptr_ring", *PINNED, "-p", "quiet_timeout", "30", "--no-build", "--no-progress",
                       "--out", str(out)])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        assert f"another ringlab run (PID {holder.pid}) measures on it" in captured.err
        assert time.monotonic() - t0 >= 4
        env = json.loads((out / "env.json").read_text())
        assert env["cpu_lock"]["cpus"] == "0-1" and env["cpu_lock"]["waited_s"] > 0.2
    finally:
        holder.wait()
        holder.stdout.close()


def test_cpu_lock_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(tmp_path))
    with machine.cpu_lock([3], 0, print):
        with pytest.raises(CpuBusyError, match=f"PID {os.getpid()}"):
            with machine.cpu_lock([3], 0.3, lambda m: None):
                pass
    with machine.cpu_lock([3], 0, print):   # released
        pass


def _fake_proc(tmp_path, running_on: int | None) -> Path:
    root = write_procfs(tmp_path / "proc", ncpus=2)
    if running_on is not None:
        fields = ["4242", "(hog)", "R", "1", "4242", "4242", "0", "-1", "0"] + ["0"] * 29 + [str(running_on)] + ["0"] * 13
        d = root / "4242" / "task" / "4242"
        d.mkdir(parents=True)
        (d / "stat").write_text(" ".join(fields))
    return root


def test_runnable_on_reads_the_task_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_PROCFS", str(_fake_proc(tmp_path, 1)))
    assert procstat.procs_running() == 2
    assert [(t["pid"], t["comm"], t["cpu"]) for t in procstat.runnable_on([1])] == [(4242, "hog", 1)]
    assert procstat.runnable_on([0]) == []


def test_quiet_warn_wait_off(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_PROCFS", str(_fake_proc(tmp_path, 1)))
    logs: list[str] = []
    rep = machine.check_quiet([1], "warn", 5, logs.append)
    assert not rep["quiet"] and "hog (PID 4242, CPU 1)" in rep["warning"]
    assert machine.check_quiet([0], "warn", 5, logs.append)["quiet"]
    assert machine.check_quiet([1], "off", 5, logs.append) == {"mode": "off"}
    # wait: the hog goes to sleep after a while, and the run then starts
    stat = tmp_path / "proc" / "4242" / "task" / "4242" / "stat"
    threading.Timer(0.6, lambda: stat.write_text(stat.read_text().replace(" R ", " S "))).start()
    t0 = time.monotonic()
    rep = machine.check_quiet([1], "wait", 10, logs.append, poll_s=0.1)
    assert rep["quiet"] and 0.5 <= time.monotonic() - t0 < 5 and rep["waited_s"] >= 0.5
    assert any("waiting up to 10s for quiet CPUs" in m for m in logs)
    # wait with a timeout that runs out: a warning, and the run goes on
    stat.write_text(stat.read_text().replace(" S ", " R "))
    rep = machine.check_quiet([1], "wait", 0.3, logs.append, poll_s=0.1)
    assert not rep["quiet"] and "after waiting 0.3s" in rep["warning"]


def test_run_warns_about_other_work_and_records_it(fakebin, tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_PROCFS", str(_fake_proc(tmp_path, 1)))
    logs: list[str] = []
    from ringlab.run import run_experiment
    res = run_experiment("ptr_ring", {"profile": "smoke", "cpus": "0:1", "governor": False, "variants": "batch",
                                      "modes": "1", "trials": 1, "warmup": 0}, tmp_path / "r", build=False,
                         progress=False, log=logs.append)
    assert any("other work is running on the measured CPUs (hog (PID 4242, CPU 1))" in m for m in logs)
    env = json.loads(res.env_json.read_text())
    assert env["quiet"]["other_runnable"] == 1 and any("hog" in w for w in env["warnings"])
    df = pd.read_csv(res.raw_csv)
    assert df["procs_running"].eq(2).all() and df["load1"].eq(0.5).all()
