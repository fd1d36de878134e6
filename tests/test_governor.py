"""Governor/boost set-and-restore on fake sysfs trees, on every exit path."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fakes import add_cpufreq, break_writes, write_topology
from ringlab.system import governor
from ringlab.system.topology import Topology

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    write_topology(root, Topology.fake(1, 4, 1, 1))
    add_cpufreq(root, range(4), governor="powersave", boost="cpufreq", boost_enabled=True)
    monkeypatch.setenv("RINGLAB_SYSFS", str(root))
    return root


def gov(root, cpu):
    return (root / f"devices/system/cpu/cpufreq/policy{cpu}/scaling_governor").read_text().strip()


def boost(root):
    return (root / "devices/system/cpu/cpufreq/boost").read_text().strip()


def test_set_and_restore(tree, tmp_path):
    sf = tmp_path / "state.json"
    with governor.tune([1, 2], disable_boost=True, state_file=sf) as t:
        assert gov(tree, 1) == gov(tree, 2) == "performance"
        assert gov(tree, 3) == "powersave"          # only the CPUs in use
        assert boost(tree) == "0"
        saved = json.loads(sf.read_text())
        assert {w["before"] for w in saved["writes"]} == {"powersave", "1"}
        assert t.report["governor"]["status"] == "set"
        assert t.report["governor"]["before"] == {"1": "powersave", "2": "powersave"}
        assert t.report["governor"]["after"] == {"1": "performance", "2": "performance"}
        assert t.report["boost"]["status"] == "set"
    assert gov(tree, 1) == gov(tree, 2) == "powersave" and boost(tree) == "1"
    assert t.report["restored"] is True and t.report["governor"]["restored"] is True
    assert not sf.exists()
    assert any("restored" in m for m in t.messages)


def test_boost_not_requested_and_already(tree, tmp_path):
    add_cpufreq(tree, range(4), governor="performance")
    with governor.tune([1], state_file=tmp_path / "s.json") as t:
        pass
    assert t.report["governor"]["status"] == "already"
    assert t.report["boost"]["status"] == "not requested"
    assert boost(tree) == "1"
    assert not (tmp_path / "s.json").exists()


def test_intel_pstate_no_turbo(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    write_topology(root, Topology.fake(1, 2, 1, 1))
    add_cpufreq(root, range(2), driver="intel_pstate", available="performance powersave", boost="intel_pstate")
    monkeypatch.setenv("RINGLAB_SYSFS", str(root))
    nt = root / "devices/system/cpu/intel_pstate/no_turbo"
    with governor.tune([1], disable_boost=True, state_file=tmp_path / "s.json") as t:
        assert nt.read_text().strip() == "1"
        assert t.report["boost"]["knob"] == "intel_pstate/no_turbo"
    assert nt.read_text().strip() == "0"


def test_restore_after_exception(tree, tmp_path):
    sf = tmp_path / "s.json"
    with pytest.raises(RuntimeError):
        with governor.tune([0, 1], state_file=sf):
            raise RuntimeError("trial crashed")
    assert gov(tree, 0) == gov(tree, 1) == "powersave" and not sf.exists()


def test_restore_on_sigint_raises_keyboardinterrupt(tree, tmp_path):
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        with governor.tune([1], state_file=tmp_path / "s.json"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
    assert gov(tree, 1) == "powersave"
    assert signal.getsignal(signal.SIGINT) is before


CHILD = textwrap.dedent("""
    import sys, time
    from ringlab.system import governor
    with governor.tune([1, 2], disable_boost=True, state_file=sys.argv[1]):
        print("tuned", flush=True)
        time.sleep(60)
""")


def _child(tree, sf):
    env = dict(os.environ, RINGLAB_SYSFS=str(tree), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(sf)], stdout=subprocess.PIPE, text=True,
                         env=env, cwd=ROOT)
    assert p.stdout.readline().strip() == "tuned"
    assert gov(tree, 1) == "performance" and boost(tree) == "0"
    return p


def test_restore_on_sigterm_in_child(tree, tmp_path):
    sf = tmp_path / "s.json"
    p = _child(tree, sf)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == -signal.SIGTERM      # conventional exit: killed by SIGTERM
    assert gov(tree, 1) == gov(tree, 2) == "powersave" and boost(tree) == "1"
    assert not sf.exists()


def test_sigkill_then_env_restore(tree, tmp_path):
    sf = tmp_path / "s.json"
    p = _child(tree, sf)
    p.kill()
    p.wait(timeout=30)
    assert gov(tree, 1) == "performance" and sf.exists()   # SIGKILL cannot be caught
    env = dict(os.environ, RINGLAB_SYSFS=str(tree), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "ringlab", "env", "--restore", "--state-file", str(sf)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "restored" in r.stdout
    assert gov(tree, 1) == gov(tree, 2) == "powersave" and boost(tree) == "1"
    assert not sf.exists()
    # second call: nothing left
    assert governor.restore_saved_state(sf)["status"] == "nothing to restore"


def test_leftover_state_is_restored_before_tuning(tree, tmp_path):
    sf = tmp_path / "s.json"
    p = _child(tree, sf)
    p.kill()
    p.wait(timeout=30)
    with governor.tune([1], state_file=sf) as t:
        # the real original (powersave), not the leftover performance, is what we saved
        assert t.report["governor"]["before"] == {"1": "powersave"}
    assert gov(tree, 1) == gov(tree, 2) == "powersave" and boost(tree) == "1"
    assert not sf.exists()


def test_write_failure_is_reported_not_raised(tree, tmp_path):
    break_writes(tree / "devices/system/cpu/cpufreq/policy2/scaling_governor")
    with governor.tune([1, 2], state_file=tmp_path / "s.json") as t:
        pass
    # policy2's governor file is unreadable now, so CPU 2 looks like it has no policy
    assert t.report["governor"]["status"] == "unavailable"
    assert "CPUs 2" in t.report["governor"]["reason"]
    assert gov(tree, 1) == "powersave"


def test_write_error_mid_tuning(tree, tmp_path, monkeypatch):
    real = governor.sysfs.write

    def failing(path, value):
        if "policy2" in str(path) and value == "performance":
            raise PermissionError(13, "Permission denied")
        return real(path, value)
    monkeypatch.setattr(governor.sysfs, "write", failing)
    with governor.tune([1, 2], state_file=tmp_path / "s.json") as t:
        assert gov(tree, 1) == "performance"
    g = t.report["governor"]
    assert g["status"] == "failed" and "permission denied" in g["reason"] and "root" in g["reason"]
    assert any("not set" in m for m in t.messages)
    assert gov(tree, 1) == gov(tree, 2) == "powersave"
    assert t.report["restored"] is True


def test_no_cpufreq(tmp_path, monkeypatch):
    root = tmp_path / "sys"
    write_topology(root, Topology.fake(1, 2, 1, 1))
    monkeypatch.setenv("RINGLAB_SYSFS", str(root))
    with governor.tune([0, 1], disable_boost=True, state_file=tmp_path / "s.json") as t:
        pass
    assert t.report["governor"] == {"status": "unavailable", "reason": "no cpufreq driver (virtual machine?)",
                                    "driver": {}, "before": {}}
    assert t.report["boost"]["status"] == "unavailable"
    assert "governor: not available — no cpufreq driver (virtual machine?)" in t.messages
    assert not (tmp_path / "s.json").exists()


def test_performance_not_offered(tree, tmp_path):
    add_cpufreq(tree, range(4), available="schedutil powersave")
    with governor.tune([1], state_file=tmp_path / "s.json") as t:
        pass
    assert t.report["governor"]["status"] == "unavailable"
    assert "does not offer 'performance'" in t.report["governor"]["reason"]


def test_state_file_unwritable_means_no_tuning(tree, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with governor.tune([1], state_file=blocker / "sub" / "s.json") as t:
        assert gov(tree, 1) == "powersave"
    assert t.report["governor"]["status"] == "failed" and "state file" in t.report["governor"]["reason"]


def test_real_machine_tune_is_safe(tmp_path):
    # On this VM there is no cpufreq: tune must go on and say why.  On bare metal as
    # root it really sets and restores; either way the original state must come back.
    before = governor.show()
    with governor.tune(None, state_file=tmp_path / "s.json") as t:
        pass
    assert t.report["governor"]["status"] in ("set", "already", "unavailable", "failed")
    assert governor.show() == before
