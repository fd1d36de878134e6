"""ringlab env: procstat on a fake /proc, perf probe with a fake opener, collect/format, CLI."""
from __future__ import annotations

import errno
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import add_cpufreq, write_procfs, write_topology
from ringlab.schema import COUNTER_EVENTS
from ringlab.system import envinfo, perfprobe, procstat
from ringlab.system.topology import Topology

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_machine(tmp_path, monkeypatch):
    sysr, procr = tmp_path / "sys", tmp_path / "proc"
    write_topology(sysr, Topology.fake(2, 4, 2, 2))
    add_cpufreq(sysr, range(16), driver="intel_pstate", governor="powersave",
                available="performance powersave", boost="intel_pstate")
    write_procfs(procr, ncpus=16, steal=(0, 7), cmdline="ro isolcpus=2-5 nohz_full=2-5 rcu_nocbs -- init-arg",
                 processes={4242: ("busy (worker)", 100, 50)})
    monkeypatch.setenv("RINGLAB_SYSFS", str(sysr))
    monkeypatch.setenv("RINGLAB_PROCFS", str(procr))
    return sysr, procr


def test_procstat(fake_machine):
    _, procr = fake_machine
    t = procstat.read_cpu_times()
    assert t[1]["steal"] == 7 and t["all"]["steal"] == 7
    assert set(procstat.read_cpu_times([0, 1])) == {0, 1}
    after = {c: dict(v, steal=v["steal"] + 3) for c, v in procstat.read_cpu_times([0, 1]).items()}
    assert procstat.steal_delta(procstat.read_cpu_times([0, 1]), after, [0, 1]) == 6.0
    assert math.isnan(procstat.steal_delta({}, after, [0]))
    assert procstat.loadavg() == {"1min": 0.5, "5min": 0.4, "15min": 0.3, "runnable": 2, "threads": 345}
    assert procstat.kernel_cmdline_flags() == {"isolcpus": "2-5", "nohz_full": "2-5", "rcu_nocbs": ""}
    top = procstat.busiest_processes(interval=0)
    assert top[0]["comm"] == "busy (worker)" and top[0]["pid"] == 4242


def test_probe_counters_fake_opener():
    def baremetal(typ, cfg, excl):
        return 99

    def vm(typ, cfg, excl):
        if typ == perfprobe.PERF_TYPE_HARDWARE:
            raise OSError(errno.ENOENT, "No such file or directory")
        return 99

    def locked(typ, cfg, excl):
        if not excl:
            raise OSError(errno.EACCES, "Permission denied")
        return 99
    assert all(r["ok"] and r["scope"] == "user+kernel" for r in perfprobe.probe_counters(baremetal).values())
    r = perfprobe.probe_counters(vm)
    assert set(r) == set(COUNTER_EVENTS)
    assert r["cycles"]["ok"] is False and "ENOENT" in r["cycles"]["reason"]
    assert r["task_clock"]["ok"] is True
    assert all(v["scope"] == "user" for v in perfprobe.probe_counters(locked).values())


def test_probe_counters_real():
    r = perfprobe.probe_counters()
    assert set(r) == set(COUNTER_EVENTS)
    # Software counters open on any Linux with perf events (we are root here).
    if perfprobe.paranoid() is not None and os.geteuid() == 0:
        assert r["task_clock"]["ok"] is True
    for v in r.values():
        assert v["ok"] or v["reason"]


def test_collect_on_fake_machine(fake_machine):
    info = envinfo.collect(probe_counters=False, interval=0.01)
    assert info["topology"]["classes_present"] == ["same-cpu", "smt-sibling", "same-llc", "cross-llc", "cross-numa"]
    assert info["governor"]["available"] and info["governor"]["per_cpu"]["3"]["governor"] == "powersave"
    assert info["boost"] == {"available": True, "reason": None, "knob": "intel_pstate/no_turbo", "enabled": True}
    assert info["isolation"]["cmdline"]["isolcpus"] == "2-5"
    assert info["load"]["steal"]["ticks_since_boot"]["1"] == 7
    text = envinfo.format_text(info)
    for needle in ("Frequency", "intel_pstate", "not tuned", "boost", "isolcpus", "2-5", "cross-numa",
                   "not probed"):
        assert needle in text, needle
    json.dumps(info)


def test_collect_without_cpufreq(tmp_path, monkeypatch):
    write_topology(tmp_path, Topology.fake(1, 2, 1, 1))
    monkeypatch.setenv("RINGLAB_SYSFS", str(tmp_path))
    info = envinfo.collect(probe_counters=False, interval=0.01)
    assert info["governor"] == {"available": False, "reason": "no cpufreq driver (virtual machine?)", "per_cpu": {}}
    assert "governor               not available — no cpufreq driver (virtual machine?)" in envinfo.format_text(info)


def test_host_id(monkeypatch):
    monkeypatch.setenv("RINGLAB_HOST", "My_Box.lab")
    assert envinfo.host_id() == "my-box-lab"
    monkeypatch.delenv("RINGLAB_HOST")
    assert envinfo.host_id() and all(ch.isalnum() or ch == "-" for ch in envinfo.host_id())


def test_env_cli_real_machine():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RINGLAB_SYSFS", None)
    r = subprocess.run([sys.executable, "-m", "ringlab", "env"], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    for sec in ("Machine", "CPU", "Frequency", "Isolation", "Perf", "Load", "Software"):
        assert sec in r.stdout
    assert "task_clock" in r.stdout
    r = subprocess.run([sys.executable, "-m", "ringlab", "env", "--json"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    info = json.loads(r.stdout)
    assert set(info["perf"]["counters"]) == set(COUNTER_EVENTS)
    assert info["software"]["packages"]["numpy"]
