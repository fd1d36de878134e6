"""The trial launcher (ringlab.run.launcher, csrc/harness/trial_launcher.c): outcomes as run_process
gives them, timeouts and leftover children killed, no trial outliving ringlab, least privilege."""
from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab import run as runner
from ringlab.build import driver
from ringlab.run import launcher as LA
from ringlab.system import privilege

process = importlib.import_module("ringlab.run.process")


@pytest.fixture(scope="module")
def launcher_exe(tmp_path_factory):
    if shutil.which(driver.compiler()) is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) on PATH")
    out = tmp_path_factory.mktemp("launcher")
    info = driver.build_all(only=[LA.NAME], out_dir=out, jobs=1)
    exe = Path(info.binaries[LA.NAME].path)
    for p in (exe.parent, *exe.parents):     # the unprivileged user must reach it under root
        if str(p).startswith(str(out.parent.parent)):
            os.chmod(p, 0o755)
    return exe


@pytest.fixture
def la(launcher_exe, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(launcher_exe.parent.parent))
    monkeypatch.setattr(LA.paths, "bin_dir", lambda: launcher_exe.parent)
    monkeypatch.setenv("RINGLAB_RUN_USER", "root")
    got = LA.start()
    assert got is not None and got.alive
    yield got
    got.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    st = Path(f"/proc/{pid}/stat")
    return st.exists() and st.read_text().split(")")[1].split()[0] == "Z"


def _gone_soon(pid: int, within: float = 2.0) -> bool:
    """``_gone`` within ``within`` seconds: a SIGKILL'ed process ends when it is next scheduled,
    which on a busy machine is a few milliseconds after the kill."""
    deadline = time.monotonic() + within
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_outcomes_match_run_process(la):
    sh = ["/bin/sh", "-c", 'echo "out $FOO"; echo err >&2; exit 3']
    env = {"FOO": "bar", "PATH": os.environ.get("PATH", "")}
    a, b = la.run(sh, 10, env), process.run_process(sh, 10, env)
    for o in (a, b):
        assert (o.status, o.exit_code, o.stdout, o.stderr) == ("crash", 3, "out bar\n", "err\n")
    ok = la.run(["/bin/sh", "-c", "head -c 300000 /dev/zero"], 10, env)
    assert ok.status == "ok" and ok.exit_code == 0 and len(ok.stdout) == 300000   # more than a pipe holds
    seg = la.run(["/bin/sh", "-c", "kill -SEGV $$"], 10, env)
    assert seg.status == "crash" and seg.exit_code == -signal.SIGSEGV
    missing = la.run(["/nonexistent/trial"], 10, env)
    assert missing.status == "crash" and missing.exit_code == 127 and "/nonexistent/trial" in missing.stderr
    assert la.alive   # one launcher for all of them


def test_timeout_kills_the_group_and_leftovers(la, tmp_path):
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    o = la.run(["/bin/sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait"], 0.5, dict(os.environ))
    assert o.status == "timeout" and o.exit_code == -signal.SIGKILL and time.monotonic() - t0 < 10
    assert _gone_soon(int(pidfile.read_text()))
    # a trial that ends leaving a child behind: the child is killed with its group
    o = la.run(["/bin/sh", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {pidfile}"], 10, dict(os.environ))
    assert o.status == "ok"
    assert _gone_soon(int(pidfile.read_text()))
    assert la.run(["/bin/true"], 10, dict(os.environ)).status == "ok"   # still in step


def test_no_trial_outlives_a_killed_runner(launcher_exe, tmp_path):
    pidfile = tmp_path / "trial.pid"
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        os.environ["RINGLAB_RUN_USER"] = "root"
        from ringlab.run import launcher as LA
        LA.paths.bin_dir = lambda: Path({str(launcher_exe.parent)!r})
        la = LA.start()
        print("started" if la else "none", flush=True)
        la.run(["/bin/sh", "-c", "echo $$ > {pidfile}; exec sleep 60"], 120, dict(os.environ))
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    deadline = time.time() + 20
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    deadline = time.time() + 10
    while not _gone(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_runs_go_through_the_launcher(fakebin, launcher_exe, monkeypatch, tmp_path):
    shutil.copy2(launcher_exe, fakebin / LA.NAME)
    calls = []
    run = LA.Launcher.run

    def counted(self, argv, timeout, env):
        calls.append(argv[0])
        return run(self, argv, timeout, env)

    monkeypatch.setattr(LA.Launcher, "run", counted)
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "modes": "0", "variants": "batch,reorder", "trials": 2,
                                             "quiet": "off"}, tmp_path / "r", build=False, progress=False,
                                log=lambda m: None)
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert res.exit_code == 0 and df["status"].eq("ok").all()
    assert len(calls) == len(df) and all("@c0-1-" in Path(c).name for c in calls)   # layout copies


def test_a_launcher_that_is_not_built_or_fails_leaves_the_runner_to_spawn(tmp_path, monkeypatch):
    monkeypatch.setattr(LA.paths, "bin_dir", lambda: tmp_path)
    assert LA.start() is None
    fake = tmp_path / LA.NAME
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    monkeypatch.setenv("RINGLAB_RUN_USER", "root")
    logged = []
    assert LA.start(logged.append) is None and "did not answer" in logged[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="the privilege drop happens under root only")
def test_trials_through_the_launcher_run_unprivileged(launcher_exe, monkeypatch):
    monkeypatch.delenv("RINGLAB_RUN_USER", raising=False)
    monkeypatch.setattr(LA.paths, "bin_dir", lambda: launcher_exe.parent)
    la = LA.start()
    assert la is not None
    try:
        o = la.run(["/bin/cat", "/proc/self/status"], 10, privilege.env(dict(os.environ)))
    finally:
        la.close()
    assert o.status == "ok"
    status = dict(line.split(":", 1) for line in o.stdout.splitlines() if ":" in line)
    acc = privilege.account()
    assert status["Uid"].split() == [str(acc.uid)] * 4 and status["Gid"].split() == [str(acc.gid)] * 4
    assert status["Groups"].strip() == "" and status["NoNewPrivs"].strip() == "1"
    assert int(status["CapEff"], 16) == int(status["CapPrm"], 16) == int(status["CapBnd"], 16) == 0
