"""Two ringlab runs never measure on the same CPUs at once; other work on them is named.

The per-CPU locks live in $RINGLAB_LOCK_DIR (a tmp folder here); the busy-CPU check
reads a fake /proc ($RINGLAB_PROCFS) with a runnable task on CPU 1.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from fakes import write_procfs
from ringlab import paths, rundir
from ringlab.lab import cli
from ringlab.errors import CpuBusyError, UnsafeDirError
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
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert df["procs_running"].eq(2).all() and df["load1"].eq(0.5).all()


# -- the lock folder and files are never followed through links or shared ----------------------------
def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path, monkeypatch):
    d = tmp_path / "locks"
    d.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    (d / "cpu0.lock").symlink_to(target)
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(d))
    with pytest.raises(UnsafeDirError, match="cpu0.lock is a symbolic link"):
        with machine.cpu_lock([0], 0, print):
            pass
    assert target.read_text() == "keep me\n"


def test_the_cli_refuses_a_symlinked_lock_file_with_exit_2(fakebin, tmp_path, monkeypatch, capsys):
    d = tmp_path / "locks"
    d.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    (d / "cpu1.lock").symlink_to(target)
    rc = cli.main(["run", "ptr_ring", *PINNED, "--no-build", "--no-progress", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and "cpu1.lock is a symbolic link" in err and "Traceback" not in err
    assert target.read_text() == "keep me\n"


def test_an_existing_lock_file_is_not_truncated_before_the_lock_is_taken(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(tmp_path / "locks"))
    holder = _holder(tmp_path / "locks", [2], 30)
    try:
        with pytest.raises(CpuBusyError, match=f"PID {holder.pid}"):
            with machine.cpu_lock([2], 0, print):
                pass
        assert (tmp_path / "locks" / "cpu2.lock").read_text() == f"{holder.pid}\n"
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with machine.cpu_lock([2], 0, print):
        assert (tmp_path / "locks" / "cpu2.lock").read_text() == f"{os.getpid()}\n"


@pytest.mark.parametrize("bad", ["mode 0777", "symlink", "file"])
def test_an_unsafe_lock_folder_is_refused_with_the_reason(tmp_path, monkeypatch, bad):
    d = tmp_path / "locks"
    if bad == "mode 0777":
        d.mkdir()
        os.chmod(d, 0o777)
        reason = "writable by group or others (owner uid"
    elif bad == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        d.symlink_to(tmp_path / "elsewhere")
        reason = "is a symbolic link"
    else:
        d.write_text("")
        reason = "is not a directory"
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(d))
    with pytest.raises(UnsafeDirError) as e:
        machine.lock_dir()
    assert reason in str(e.value) and str(d) in str(e.value) and "RINGLAB_LOCK_DIR" in str(e.value)
    assert not list((tmp_path / "elsewhere").iterdir()) if bad == "symlink" else True


def test_a_new_lock_folder_is_created_0700(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(tmp_path / "a" / "locks"))
    d = machine.lock_dir()
    assert d == tmp_path / "a" / "locks" and stat.S_IMODE(os.lstat(d).st_mode) == 0o700


def test_the_fallback_lock_folder_is_per_user(tmp_path, monkeypatch):
    monkeypatch.delenv("RINGLAB_LOCK_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    cands = machine._candidates()
    assert cands[-1] == Path(f"/tmp/ringlab-locks-{os.geteuid()}")
    assert Path("/tmp/ringlab-locks") not in cands
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert tmp_path / "ringlab" in machine._candidates()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_lock_folder_of_another_user_is_refused(tmp_path, monkeypatch, capsys, fakebin):
    d = tmp_path / "locks"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(d))
    with pytest.raises(UnsafeDirError, match="owned by uid 65534"):
        machine.lock_dir()
    rc = cli.main(["run", "ptr_ring", *PINNED, "--no-build", "--no-progress", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and f"CPU lock folder {d} is owned by uid 65534" in err and "mode 0700" in err
    assert "RINGLAB_LOCK_DIR" in err and not list(d.iterdir())


SYS_PY = "/usr/bin/python3"   # a python uid 65534 can run (the venv may live under /root)
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _setpriv_works() -> bool:
    if os.geteuid() != 0 or not shutil.which("setpriv") or not os.access(SYS_PY, os.X_OK):
        return False
    return subprocess.run([*AS_NOBODY, SYS_PY, "-c", "pass"]).returncode == 0


@pytest.fixture
def shared_tmp():
    """A world-traversable folder with a sticky, world-writable 'shared' inside, as /tmp is."""
    base = Path(tempfile.mkdtemp(prefix="ringlab-test-"))
    os.chmod(base, 0o755)
    (base / "shared").mkdir()
    os.chmod(base / "shared", 0o1777)
    yield base
    shutil.rmtree(base)


@pytest.mark.skipif(not _setpriv_works(), reason="needs root, setpriv and /usr/bin/python3 to act as uid 65534")
def test_a_link_planted_by_another_user_cannot_make_root_write(shared_tmp):
    victim = shared_tmp / "root-owned"
    victim.write_text("root data\n")
    planted = shared_tmp / "shared" / "ringlab-locks"
    code = (f"import os; os.mkdir({str(planted)!r}); os.chmod({str(planted)!r}, 0o777); "
            f"os.symlink({str(victim)!r}, {str(planted / 'cpu0.lock')!r})")
    subprocess.run([*AS_NOBODY, SYS_PY, "-c", code], check=True)
    assert os.lstat(planted).st_uid == 65534
    code = "from ringlab.run import machine\nwith machine.cpu_lock([0], 0, print):\n    pass\n"
    env = dict(os.environ, RINGLAB_LOCK_DIR=str(planted), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "owned by uid 65534" in r.stderr and "mode 0777" in r.stderr
    assert victim.read_text() == "root data\n" and os.path.islink(planted / "cpu0.lock")


@pytest.mark.skipif(not _setpriv_works(), reason="needs root, setpriv and /usr/bin/python3 to act as uid 65534")
@pytest.mark.skipif(not paths.others_can_reach(ROOT), reason="uid 65534 imports ringlab from the checkout, which "
                    "lies in a folder other users cannot reach (a clone in /root)")
def test_a_non_root_user_refuses_a_lock_folder_root_planted(shared_tmp):
    planted = shared_tmp / "shared" / "locks"
    planted.mkdir(mode=0o755)
    mine = shared_tmp / "shared" / "mine"
    code = textwrap.dedent(f"""
        from ringlab import paths
        from ringlab.errors import UnsafeDirError
        d = paths.private_dir({str(mine)!r}, "CPU lock folder", "RINGLAB_LOCK_DIR")
        import os; print(oct(os.lstat(d).st_mode & 0o777), os.lstat(d).st_uid)
        try:
            paths.private_dir({str(planted)!r}, "CPU lock folder", "RINGLAB_LOCK_DIR")
        except UnsafeDirError as e:
            print(e)
    """)
    r = subprocess.run([*AS_NOBODY, SYS_PY, "-c", code], env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first == "0o700 65534"
    assert f"CPU lock folder {planted} is owned by uid 0" in second and "mode 0755" in second
