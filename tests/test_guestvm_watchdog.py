"""The guest boot's watchdog (tests/guestvm.py), with stand-in commands for QEMU: a boot that dies
or stalls before the plan begins is tried again and said; one that reached the plan is not."""
from __future__ import annotations

import sys

import pytest

from tests import guestvm

#: a stand-in for QEMU: each call appends a line to OUT/calls and acts on the Nth call
FAKE = r'''
import os, signal, sys, time
out, acts = sys.argv[1], sys.argv[2].split(",")
with open(os.path.join(out, "calls"), "a+") as f:
    f.seek(0); n = len(f.read().splitlines()); f.write("x\n")
act = acts[min(n, len(acts) - 1)]
open(os.path.join(out, "console.log"), "w").write(f"boot {n}: {act}\n")
if act == "segv":
    os.kill(os.getpid(), signal.SIGSEGV)
if act == "stall":
    time.sleep(60)
if act == "plan":
    open(os.path.join(out, "started"), "w").write("ok\n")
if act == "plan-then-fail":
    open(os.path.join(out, "started"), "w").write("ok\n")
    sys.exit(3)
'''


def _argv(out, acts):
    return [sys.executable, "-c", FAKE, str(out), ",".join(acts)]


def test_a_boot_that_reaches_the_plan_is_run_once(tmp_path):
    run = guestvm.run_until_plan(_argv(tmp_path, ["plan"]), tmp_path, timeout=60)
    assert run.rc == 0 and run.retried == ()
    assert (tmp_path / "calls").read_text().count("x") == 1


def test_a_qemu_crash_before_the_plan_is_tried_again_and_said(tmp_path):
    with pytest.warns(UserWarning, match="guest boot tried again: attempt 1: QEMU died of signal 11"):
        run = guestvm.run_until_plan(_argv(tmp_path, ["segv", "plan"]), tmp_path, timeout=60)
    assert run.rc == 0
    assert len(run.retried) == 1 and "signal 11" in run.retried[0] and "boot 0: segv" in run.retried[0]
    assert (tmp_path / "console.attempt1.log").read_text() == "boot 0: segv\n"
    assert run.console == "boot 1: plan\n"


def test_a_stall_before_the_plan_is_killed_at_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(guestvm, "BOOT_DEADLINE_S", 2)
    with pytest.warns(UserWarning):
        run = guestvm.run_until_plan(_argv(tmp_path, ["stall", "plan"]), tmp_path, timeout=60)
    assert run.rc == 0 and run.wall_s < 30
    assert len(run.retried) == 1 and "not reached the plan after 2 s" in run.retried[0]


def test_a_failure_after_the_plan_began_is_not_retried(tmp_path):
    run = guestvm.run_until_plan(_argv(tmp_path, ["plan-then-fail", "plan"]), tmp_path, timeout=60)
    assert run.rc == 3 and run.retried == ()
    assert (tmp_path / "calls").read_text().count("x") == 1


def test_every_attempt_failing_is_reported_with_each_reason(tmp_path):
    with pytest.warns(UserWarning):
        run = guestvm.run_until_plan(_argv(tmp_path, ["segv"]), tmp_path, timeout=60)
    assert run.rc == -11
    assert len(run.retried) == guestvm.BOOT_ATTEMPTS
    with pytest.raises(AssertionError, match="boot tried again: attempt 1: QEMU died of signal 11"):
        run.step("sysfs")
