"""The kmod experiment on a real kernel: our own test module loaded in the QEMU guest.

csrc/kmod/ringlab_frag_test.c (Dual MIT/GPL) is a page_frag-style push/pop timing loop taking the
kmod experiment's parameters (test_push_cpu, test_pop_cpu, test_alloc_len, nr_test, test_align)
and logging seed 002's result line; test_fail=1 makes its init fail, test_hang_s=N makes it hang.
It is built here against the guest kernel's own headers (linux-headers-<release>, its kbuild),
then, in one boot of a 2-socket, 2-thread guest (tests/guestvm.py), ``ringlab run kmod`` loads it
per trial, parses the result, unloads it; the failing and the hanging module are run too, and
/proc/modules must be free of it afterwards.  The times it logs are TCG's and mean nothing.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests import guestvm

KMOD_SRC = guestvm.ROOT / "csrc" / "kmod"
SHAPE = guestvm.Shape("kmod-2s-1c-2t", "4,sockets=2,cores=1,threads=2", ("0-1", "2-3"), 1024)


def _why_not() -> str | None:
    why = guestvm.unavailable()
    if why:
        return why
    rel = guestvm.kernel_release()
    if not (Path("/lib/modules") / rel / "build" / "Makefile").exists():
        return f"no kbuild for {rel} (Debian package linux-headers-{rel})"
    if not shutil.which("make"):
        return "make not installed"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))

RUN = ["-p", "profile", "smoke", "-p", "counters", "false", "-p", "governor", "false", "-p", "quiet", "off",
       "-p", "trials", "1", "--no-progress", "--no-build"]


def _run(out, name, module, args, extra):
    return {"name": name, "timeout": 1500,
            "argv": [guestvm.RINGLAB, "run", "kmod", *RUN, "-p", "module", str(module), "-p", "args", args,
                     *extra, "--out", str(out / name)]}


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    work = tmp_path_factory.mktemp("guest-kmod")
    src = work / "kmod"
    shutil.copytree(KMOD_SRC, src)
    rel = guestvm.kernel_release()
    p = subprocess.run(["make", "-s", "-C", f"/lib/modules/{rel}/build", f"M={src}", "modules"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "warning:" not in p.stderr, p.stderr
    ko = src / "ringlab_frag_test.ko"
    out = work / "out"
    out.mkdir()
    steps = [
        _run(out, "run_ok", ko, "nr_test=2000 test_alloc_len=64", ["-p", "cpus", "auto", "-p", "timeout", "400"]),
        {"name": "modules_ok", "argv": ["cat", "/proc/modules"]},
        _run(out, "run_fail", ko, "test_fail=1", ["-p", "cpus", "none", "-p", "timeout", "400"]),
        # init sleeps 50 s; the trial (its process starts in seconds, even under TCG) is killed at 30 s
        _run(out, "run_hang", ko, "test_hang_s=50 nr_test=1000", ["-p", "cpus", "none", "-p", "timeout", "30"]),
        # the hanging module is gone once its init returns (the kernel frees a module whose init
        # failed; the guardian unloads one that loaded): wait for that, at most 200 s
        {"name": "modules_hang", "timeout": 260,
         "argv": ["sh", "-c", "for i in $(seq 200); do grep -q '^ringlab_frag_test ' /proc/modules || break; "
                  "sleep 1; done; cat /proc/modules"]},
        {"name": "dmesg", "argv": ["dmesg"]},
    ]
    return guestvm.boot(SHAPE, out, steps, work, timeout=1800), ko


def _raw(run, name):
    p = run.out / name / "raw.csv"
    assert p.exists(), f"{name}: no raw.csv\n{run.text(name, 'err')[-3000:]}\n{run.console[-2000:]}"
    return pd.read_csv(p)


def test_module_builds_with_the_guests_license(guest):
    _, ko = guest
    info = subprocess.run(["modinfo", "-F", "license", str(ko)], capture_output=True, text=True)
    if info.returncode == 0:
        assert info.stdout.strip() == "Dual MIT/GPL"


def test_kmod_run_loads_parses_and_unloads(guest):
    run, _ = guest
    assert run.step("run_ok")["rc"] == 0, run.text("run_ok", "err")[-3000:]
    d = _raw(run, "run_ok")
    assert (d["status"] == "ok").all(), d.to_string()
    assert {"same-cpu", "smt-sibling", "cross-numa"} <= set(d["pair_class"])
    assert (d["ns_per_op"] > 0).all()
    assert "2000 of iterations for non-aligned testing took" in run.text("dmesg")
    assert "ringlab_frag_test" not in run.text("modules_ok")


def test_failing_and_hanging_module(guest):
    run, _ = guest
    f = _raw(run, "run_fail")
    assert (f["status"] != "ok").all(), f.to_string()
    h = _raw(run, "run_hang")
    assert (h["status"] == "timeout").all(), h[["status", "stderr_tail"]].to_string()
    # the hanging module was loaded and its init ended: it ran its test, or (the loading process was
    # killed while init slept) a thread of its test was not started; either way init logged its
    # end and the module is gone
    dmesg = run.text("dmesg")
    assert ("1000 of iterations for non-aligned testing took" in dmesg
            or re.search(r"ringlab_frag_test: (pop|push) thread not started", dmesg)), dmesg[-2000:]
    assert "ringlab_frag_test" not in run.text("modules_hang"), run.text("modules_hang")
