"""Runs started from a checkout's parent folder: a folder named ``ringlab`` in the working
directory (what ``git clone`` makes) never shadows the installed package, neither in ringlab's
own process nor in the Python tool processes of its trials (the ringtest timing wrapper)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.tools.argv import python_module
from tests.fakes import fake_ptr_ring_test as fake
from tests.fakes.cli_runs import N_TRIALS, PARAMS
from tests.fakes.ringtest_tree import write_fake_ringtest_tree

RINGLAB = str(Path(sys.executable).with_name("ringlab"))
needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a C compiler and make")


def _checkout_parent(tmp_path: Path) -> Path:
    """A folder holding a decoy checkout ``ringlab/``: the top-level folders of a clone, and a
    ``build/`` and ``tools/`` that a namespace package ``ringlab`` would resolve to."""
    parent = tmp_path / "parent"
    for sub in ("ringlab/build/bin", "ringlab/tools", "ringlab/ringlab", "ringlab/csrc", "ringlab/notebooks"):
        (parent / sub).mkdir(parents=True)
    return parent


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_") and k != "PYTHONPATH"}
    env.update(RINGLAB_BUILD=str(tmp_path / "build"), RINGLAB_STATE_DIR=str(tmp_path / "state"),
               RINGLAB_LOCK_DIR=str(tmp_path / "locks"))
    return env


def test_tool_processes_ignore_the_working_directory(tmp_path):
    parent = _checkout_parent(tmp_path)
    argv = python_module("ringlab.tools.argv")
    assert argv[1] in ("-P", "-I") and argv[0] == sys.executable
    probe = [argv[0], argv[1], "-c", "import ringlab, sys; print(ringlab.__file__); print(sys.path[0])"]
    out = subprocess.run(probe, capture_output=True, text=True, cwd=parent, env=_env(tmp_path), timeout=60)
    assert out.returncode == 0, out.stderr
    where, first = out.stdout.splitlines()
    assert not Path(where).resolve().is_relative_to(parent.resolve())
    assert Path(first or ".").resolve() != parent.resolve()


@needs_cc
def test_ringtest_trials_run_from_the_checkouts_parent_folder(tmp_path):
    parent = _checkout_parent(tmp_path)
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    out = subprocess.run([RINGLAB, "run", "ringtest", "-p", "tree", f"mine={tree}", "-p", "rings", "ptr_ring",
                          "-p", "ring_sizes", "64", "-p", "run_cycles", "1000", "-p", "cpus", "none",
                          "-p", "trials", "2", "-p", "warmup", "0", "-p", "profile", "smoke", "-p", "layouts", "1",
                          "--no-progress", "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=parent, env=_env(tmp_path), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    df = rundir.read_raw(tmp_path / "run" / "raw.csv", strict=False)
    assert len(df) == 2 and (df["status"] == "ok").all(), df.get("stderr_tail")
    assert not df["stderr_tail"].astype(str).str.contains("ModuleNotFoundError").any()


def test_ptr_ring_trials_run_from_the_checkouts_parent_folder(tmp_path):
    parent = _checkout_parent(tmp_path)
    fake.install(str(tmp_path / "build" / "bin"), sys.executable)
    out = subprocess.run([RINGLAB, "run", "ptr_ring", *PARAMS, "--no-build", "--no-progress",
                          "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=parent, env=_env(tmp_path), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    df = rundir.read_raw(tmp_path / "run" / "raw.csv", strict=False)
    assert len(df) == N_TRIALS and (df["status"] == "ok").all()


def test_ci_runs_make_test_in_a_clone_named_ringlab():
    text = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    lines = [ln.strip() for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    clone = [ln for ln in lines if ln.startswith("git clone")]
    assert len(clone) == 1 and clone[0].endswith('/ringlab"')
    i = lines.index(next(ln for ln in lines if ln.startswith("make test ")))
    assert lines.index(clone[0]) < i and lines[i].endswith("|| status=$?") and lines[-1] == 'exit "$status"'
