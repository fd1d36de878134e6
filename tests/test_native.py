"""ringlab.native: cffi API-mode module per variant, content-hash cache, lock,
no stale reloads, GIL released during runs, same JSON as the binary."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path


import pytest

from ringlab import paths
from ringlab.build import native

ROOT = Path(__file__).resolve().parent.parent
HARNESS = [ROOT / "csrc" / rel for rel in native.HARNESS_SOURCES]
needs_harness = pytest.mark.skipif(
    not all(p.is_file() for p in HARNESS) or shutil.which("gcc") is None,
    reason="harness sources (csrc/harness/ptr_ring_bench.c, counters.c) or gcc not available yet")
DEBIAN = sorted(Path("/usr/src").glob("linux-headers-*-common/include/linux/ptr_ring.h"))
TEAM_MAIN = ROOT / "tests/data/kernel_headers/team_mainline"


@pytest.fixture
def fake_csrc(tmp_path, monkeypatch):
    """A private copy of csrc/ so tests can edit sources without touching the repo."""
    dst = tmp_path / "csrc"
    shutil.copytree(ROOT / "csrc", dst)
    monkeypatch.setattr(paths, "CSRC", dst)
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    return dst


def test_module_name_is_content_hash(fake_csrc):
    a = native.module_name("batch")
    assert a.startswith("_ringlab_batch_") and len(a) == len("_ringlab_batch_") + 12
    assert native.module_name("batch") == a                      # stable
    assert native.module_name("prebatch") != a                   # per variant
    hdr = fake_csrc / "rings" / "ptr_ring_batch.h"
    if not hdr.exists():
        hdr.parent.mkdir(parents=True, exist_ok=True)
        hdr.write_text("/* placeholder */\n")
    hdr.write_text(hdr.read_text() + "\n/* edited */\n")
    assert native.module_name("batch") != a                      # any source edit -> new name


def test_module_name_kernel_variant_is_identifier(fake_csrc):
    name = native.module_name("v6.1-rc2", kernel_header=TEAM_MAIN)
    assert name.startswith("_ringlab_v6_1_rc2_") and name.isidentifier()


def test_unknown_variant_error():
    with pytest.raises(native.NativeError, match="unknown; allowed: batch"):
        native.module_name("nope")


def test_describe(monkeypatch, tmp_path):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "b"))
    d = native.describe()
    assert d["cache_dir"] == str(tmp_path / "b" / "cffi")
    assert d["compiler"] and "-fno-wrapv" in d["flags"] and d["gil_released"] is True


def test_bad_parameters_named():
    with pytest.raises(ValueError, match="parameter 'size'"):
        native.run("batch", 0, "1000", 10)
    with pytest.raises(ValueError, match="parameter 'repeats'"):
        native.run("batch", 0, 1000, 10, repeats=0)


def test_lock_serialises(tmp_path):
    """The fcntl build lock excludes a second process while held."""
    lock = tmp_path / ".x.lock"
    code = ("import fcntl,sys; f=open(sys.argv[1],'a+'); "
            "fcntl.flock(f, fcntl.LOCK_EX|fcntl.LOCK_NB)")
    with native._file_lock(lock):
        r = subprocess.run([sys.executable, "-c", code, str(lock)], capture_output=True)
        assert r.returncode != 0                                  # would block
    assert subprocess.run([sys.executable, "-c", code, str(lock)]).returncode == 0


# ------------------------------------------------------------------ needs the harness

@needs_harness
def test_run_matches_binary_json_fields(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    out = native.run("batch", mode=0, size=1000, count=200_000, repeats=2)
    assert out["variant"] == "batch" and out["mode"] == 0 and out["size"] == 1000
    assert out["count"] == 200_000 and out["batch"] == 16 and len(out["iterations"]) == 2
    it = out["iterations"][0]
    assert it["ns_per_op"] > 0 and it["elapsed_ns"] > 0
    assert out["native_module"].startswith("_ringlab_batch_")
    assert (tmp_path / "build" / "cffi").is_dir()
    with pytest.raises(ValueError, match="size"):
        native.run("batch", mode=0, size=1, count=10)


@needs_harness
def test_count_bound_is_checked_before_running(tmp_path, monkeypatch):
    """count (-N) is at most 10^12, the bound of ringlab's `count` parameter; the C check
    refuses more before any thread starts."""
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    with pytest.raises(ValueError, match=r"-N \(count\) 1000000000001: allowed: an integer in "
                                         r"\[1, 1000000000000\]"):
        native.run("batch", mode=0, size=1000, count=10**12 + 1)


@needs_harness
def test_spsc_and_kernel_header_variant(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    out = native.run("batch", mode=1, size=17, count=200_000)
    assert out["batch"] == 1 and out["iterations"][0]["ns_consumer"] > 0
    if os.geteuid() == 0:
        # under root a kernel header is never loaded in process: its code would run as root
        with pytest.raises(native.NativeError, match="not built into an in-process module while ringlab runs as root"):
            native.run("kteam", mode=1, size=1000, count=200_000, kernel_header=TEAM_MAIN)
        return
    out = native.run("kteam", mode=1, size=1000, count=200_000, kernel_header=TEAM_MAIN)
    assert out["variant"] == "kteam" and out["batch"] == 16
    native.selftest("kteam")


@needs_harness
def test_changed_source_gives_new_module_in_live_process(fake_csrc):
    m1 = native.load("prebatch")
    ring = fake_csrc / "rings" / "ptr_ring_prebatch.h"
    ring.write_text(ring.read_text() + "\n/* edited in a live process */\n")
    m2 = native.load("prebatch")
    assert m1.__name__ != m2.__name__ and m1 is not m2
    assert native.load("prebatch") is m2                          # cached in process


@needs_harness
def test_gil_released_during_run(tmp_path, monkeypatch):
    """A Python thread keeps running while C runs a long loop (progress, not speed)."""
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    native.load("batch")                                          # build outside the window
    ticks = 0
    running = threading.Event()
    done = threading.Event()

    def ticker():
        nonlocal ticks
        running.set()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    running.wait()
    count = 30_000_000
    for _ in range(4):                   # a call long enough for the ticker, on a fast machine too
        start = ticks
        t0 = time.monotonic()
        native.run("batch", mode=0, size=1000, count=count)
        dt = time.monotonic() - t0
        during = ticks - start
        if dt > 0.1:
            break
        count *= 4
    done.set()
    t.join()
    # With the GIL held the ticker could not run at all during the call.
    assert dt > 0.05 and during >= 5, (dt, during, count)


@needs_harness
@pytest.mark.skipif(not DEBIAN, reason="Debian linux-headers-*-common not installed")
def test_debian_kernel_header_module(monkeypatch):
    if os.geteuid() == 0:
        # the distribution's own headers package: trusted explicitly, as a user of root would
        monkeypatch.setenv("RINGLAB_RUN_USER", "root")
    out = native.run("kdebian", mode=0, size=1000, count=100_000, kernel_header=DEBIAN[-1])
    assert out["variant"] == "kdebian" and out["batch"] == 16


def test_bench_fidelity_cli_bad_args(capsys):
    """`ringlab bench fidelity` is registered and rejects bad options by name (no build, no run)."""
    from ringlab.lab import cli
    assert cli.main(["bench", "fidelity", "--trials", "0"]) == 2
    assert "--trials 0" in capsys.readouterr().err
    assert cli.main(["bench", "fidelity", "--modes", "7"]) == 2
    assert "--modes" in capsys.readouterr().err
    assert cli.main(["bench", "fidelity", "--icount-ops", "10"]) == 2
    assert "--icount-ops 10: allowed" in capsys.readouterr().err
