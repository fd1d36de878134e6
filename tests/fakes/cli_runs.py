"""`ringlab run ptr_ring` over the mock binaries as a separate process, for kill/resume/lock tests."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ringlab.lab import cli
from tests.fakes import fake_ptr_ring_test as fake

ROOT = Path(__file__).resolve().parent.parent.parent

#: a small interleaved run: 3 variants, mode 0, 3 measured trials + 1 warm-up each
PARAMS = ["-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
          "-p", "variants", "batch,reorder,spsc", "-p", "modes", "0", "-p", "trials", "3", "-p", "warmup", "1",
          "-p", "seed", "11"]
N_TRIALS = 3 * 4
#: what identifies one trial in raw.csv
KEY = ["variant", "mode", "size", "count", "batch", "lock", "cpu_req_producer", "cpu_req_consumer", "trial"]


def raw_rows(path: Path) -> int:
    """Data rows in a raw.csv (0 when it does not exist yet)."""
    try:
        return max(0, len(path.read_bytes().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def start_run(out: Path, extra_env: dict, params=PARAMS) -> subprocess.Popen:
    """`ringlab run ptr_ring PARAMS --no-build --out OUT` in the background (stderr piped, text)."""
    env = dict(os.environ, **extra_env, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "ringlab", "run", "ptr_ring", *params, "--no-build",
                             "--no-progress", "--out", str(out)], env=env, cwd=str(ROOT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def in_process_run(tmp: Path, params: list[str]):
    """A generator for a module-scoped fixture: one ``ringlab run ptr_ring`` in this process over
    the mock binaries (installed under ``tmp``), with its own build, state and lock folders and no
    FAKE_* behaviour; yields the run folder, then puts the environment back."""
    mp = pytest.MonkeyPatch()
    build = tmp / "build"
    fake.install(str(build / "bin"), sys.executable)
    mp.setenv("RINGLAB_BUILD", str(build))
    mp.setenv("RINGLAB_STATE_DIR", str(tmp / "state"))
    mp.setenv("RINGLAB_LOCK_DIR", str(tmp / "locks"))
    for k in list(os.environ):
        if k.startswith("FAKE_"):
            mp.delenv(k)
    out = tmp / "good"
    assert cli.main(["run", "ptr_ring", *params, "--no-build", "--no-progress", "--out", str(out)]) == 0
    yield out
    mp.undo()
