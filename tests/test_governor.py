"""Governor/boost set-and-restore on fake sysfs trees, on every exit path."""
from __future__ import annotations

import json
import os
import signal
import stat
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


def test_a_state_folder_others_can_write_means_no_tuning(tree, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with governor.tune([1], state_file=shared / "s.json") as t:
        assert gov(tree, 1) == "powersave"
    reason = t.report["governor"]["reason"]
    assert t.report["governor"]["status"] == "failed" and "writable by group or others" in reason
    assert "mode 0777" in reason and not list(shared.iterdir())


def test_real_machine_tune_is_safe(tmp_path):
    # On this VM there is no cpufreq: tune must go on and say why.  On bare metal as
    # root it really sets and restores; either way the original state must come back.
    before = governor.show()
    with governor.tune(None, state_file=tmp_path / "s.json") as t:
        pass
    assert t.report["governor"]["status"] in ("set", "already", "unavailable", "failed")
    assert governor.show() == before


# -- the state file is trusted only when it is ours and names only tuning knobs --------------
def _snapshot(*dirs):
    """Content of every regular file under dirs (symlinks followed to files only)."""
    out = {}
    for d in dirs:
        for p in sorted(Path(d).rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = p.read_bytes()
    return out


def _state(sf, writes, mode=0o600):
    sf.write_text(json.dumps({"version": 1, "pid": 999_999_999, "created": "2026-01-01T00:00:00+00:00",
                              "writes": writes}))
    os.chmod(sf, mode)
    return sf


def _gov_entry(tree, cpu=1, before="powersave", value="performance", path=None):
    return {"op": "governor", "key": str(cpu), "before": before, "value": value,
            "path": str(path or tree / f"devices/system/cpu/cpufreq/policy{cpu}/scaling_governor")}


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "outside" / "victim"
    v.parent.mkdir()
    v.write_text("original\n")
    return v


def _refused(tree, sf, victim, *words):
    """restore_saved_state, `ringlab env --restore` and a run's leftover check all refuse sf."""
    before = _snapshot(tree, victim.parent)
    res = governor.restore_saved_state(sf)
    assert res["status"] == "refused", res
    assert res["restored"] == []
    msg = " ".join(res["messages"])
    assert "refused" in msg and all(w in msg for w in words), msg
    env = dict(os.environ, RINGLAB_SYSFS=str(tree), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "ringlab", "env", "--restore", "--state-file", str(sf)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "refused" in r.stdout and all(w in r.stdout for w in words), r.stdout
    assert "Traceback" not in r.stderr
    with governor.tune([1, 2], disable_boost=True, state_file=sf) as t:
        assert gov(tree, 1) == "powersave"          # no tuning on top of an untrusted file
    assert t.report["governor"]["status"] == "failed" and "refused" in t.report["governor"]["reason"]
    assert any("tuning skipped" in m for m in t.messages)
    assert _snapshot(tree, victim.parent) == before   # nothing written anywhere
    assert sf.exists()                                # kept for the user to look at


def test_state_file_path_outside_sysfs_is_refused(tree, tmp_path, victim):
    sf = _state(tmp_path / "s.json", [_gov_entry(tree, 1),
                                      _gov_entry(tree, 2, before="pwned", path=victim)])
    _refused(tree, sf, victim, str(victim), "not under the sysfs root")


@pytest.mark.parametrize("rel", ["devices/system/cpu/online", "devices/system/cpu/cpufreq/policy1/scaling_driver",
                                 "devices/system/cpu/cpufreq/policy1/../../../../../outside/victim"])
def test_state_file_sysfs_path_that_is_not_a_knob_is_refused(tree, tmp_path, victim, rel):
    sf = _state(tmp_path / "s.json", [_gov_entry(tree, 1, path=tree / rel)])
    _refused(tree, sf, victim, rel.split("/")[-1])


def test_state_file_symlink_in_sysfs_leading_out_is_refused(tree, tmp_path, victim):
    pol = tree / "devices/system/cpu/cpufreq/policy9"
    pol.mkdir()
    (pol / "scaling_governor").symlink_to(victim)
    sf = _state(tmp_path / "s.json", [_gov_entry(tree, 9)])
    _refused(tree, sf, victim, "not under the sysfs root")


@pytest.mark.parametrize("entry, words", [
    ({"op": "boost", "key": "boost", "path": "devices/system/cpu/cpufreq/boost", "before": "2", "value": "0"},
     ["'2' is not a value boost knobs take"]),
    ({"op": "governor", "key": "1", "path": "devices/system/cpu/cpufreq/policy1/scaling_governor",
      "before": "performance\nx", "value": "powersave"}, ["not a value governor knobs take"]),
    ({"op": "governor", "key": "1", "path": "devices/system/cpu/cpufreq/policy1/scaling_governor",
      "before": 3, "value": "powersave"}, ["no string 'before'"]),
])
def test_state_file_bad_value_is_refused(tree, tmp_path, victim, entry, words):
    entry = dict(entry, path=str(tree / entry["path"]))
    _refused(tree, _state(tmp_path / "s.json", [entry]), victim, *words)


def test_state_file_of_another_user_is_refused(tree, tmp_path, victim):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file to another uid")
    sf = _state(tmp_path / "s.json", [_gov_entry(tree, 1)])
    os.chown(sf, 4242, 4242)
    _refused(tree, sf, victim, "owned by uid 4242", f"uid {os.geteuid()}")


@pytest.mark.parametrize("mode, who", [(0o666, "group and others"), (0o620, "group"), (0o602, "others")])
def test_state_file_writable_by_others_is_refused(tree, tmp_path, victim, mode, who):
    sf = _state(tmp_path / "s.json", [_gov_entry(tree, 1)], mode=mode)
    _refused(tree, sf, victim, f"mode {mode:04o}", f"writable by {who}")


def test_state_file_symlink_is_refused(tree, tmp_path, victim):
    real = _state(tmp_path / "real.json", [_gov_entry(tree, 1)])
    sf = tmp_path / "s.json"
    sf.symlink_to(real)
    _refused(tree, sf, victim, "symbolic link")


def test_valid_state_file_is_restored(tree, tmp_path):
    (tree / "devices/system/cpu/cpufreq/policy1/scaling_governor").write_text("performance\n")
    (tree / "devices/system/cpu/cpufreq/boost").write_text("0\n")
    # cpuN/cpufreq is a symlink into cpufreq/policyN: accepted, as the kernel lays it out
    sf = _state(tmp_path / "s.json", [
        _gov_entry(tree, 1, path=tree / "devices/system/cpu/cpu1/cpufreq/scaling_governor"),
        {"op": "boost", "key": "boost", "path": str(tree / "devices/system/cpu/cpufreq/boost"),
         "before": "1", "value": "0"}])
    res = governor.restore_saved_state(sf)
    assert res["status"] == "restored", res
    assert gov(tree, 1) == "powersave" and boost(tree) == "1" and not sf.exists()


def test_state_file_is_private_whatever_the_umask(tree, tmp_path):
    sf = tmp_path / "state" / "s.json"
    old = os.umask(0)
    try:
        with governor.tune([1], state_file=sf):
            assert stat.S_IMODE(sf.stat().st_mode) == 0o600
            assert governor.load_state(sf)["writes"][0].before == "powersave"
    finally:
        os.umask(old)


# -- a value changed by someone else after ringlab set it is left alone ----------------------
def test_value_changed_during_run_is_left_and_reported(tree, tmp_path):
    sf = tmp_path / "s.json"
    with governor.tune([1, 2], disable_boost=True, state_file=sf) as t:
        (tree / "devices/system/cpu/cpufreq/policy1/scaling_governor").write_text("schedutil\n")
    assert gov(tree, 1) == "schedutil"                 # the user's choice stays
    assert gov(tree, 2) == "powersave" and boost(tree) == "1"
    assert t.report["left_changed"] == [{"path": str(tree / "devices/system/cpu/cpufreq/policy1/scaling_governor"),
                                         "before": "powersave", "set": "performance", "now": "schedutil"}]
    assert t.report["restored"] is True and not sf.exists()
    assert any("left as is" in m and "'schedutil'" in m for m in t.messages), t.messages


def test_value_changed_after_sigkill_is_left_by_env_restore(tree, tmp_path):
    sf = tmp_path / "s.json"
    p = _child(tree, sf)
    p.kill()
    p.wait(timeout=30)
    (tree / "devices/system/cpu/cpufreq/boost").write_text("1\n")          # someone turned boost back on
    (tree / "devices/system/cpu/cpufreq/policy2/scaling_governor").write_text("ondemand\n")
    res = governor.restore_saved_state(sf)
    assert res["status"] == "restored"
    outcomes = {r["path"].split("/")[-2] + "/" + r["path"].split("/")[-1]: r["outcome"] for r in res["restored"]}
    assert outcomes == {"policy1/scaling_governor": "restored", "policy2/scaling_governor": "left",
                        "cpufreq/boost": "restored"}
    assert gov(tree, 1) == "powersave" and gov(tree, 2) == "ondemand" and boost(tree) == "1"
    assert any("left as is" in m and "'ondemand'" in m for m in res["messages"])


def test_tuning_loops_over_any_knob(tree, tmp_path, monkeypatch):
    """Tuning has no knob-specific code: a new Knob subclass is set, reported and restored."""
    knob_file = tree / "devices/system/cpu/cpufreq/policy1/energy_performance_preference"
    knob_file.write_text("balance_power\n")

    class Epp(governor.Knob):
        name, goal, done_words = "epp", "performance", "set performance"

        def available(self):
            return None

        def show(self):
            return {"epp": knob_file.read_text().strip()}

        def state(self):
            return self.show()

        def targets(self):
            return [("1", knob_file, "performance")]

    monkeypatch.setattr(governor, "KNOBS", (*governor.KNOBS, Epp))
    with governor.tune([1], state_file=tmp_path / "s.json") as t:
        assert knob_file.read_text().strip() == "performance" and gov(tree, 1) == "performance"
    assert t.report["epp"]["status"] == "set" and t.report["epp"]["before"] == {"epp": "balance_power"}
    assert t.report["epp"]["restored"] is True and knob_file.read_text().strip() == "balance_power"
    assert "epp: set performance on CPUs 1 (was balance_power)" in t.messages
