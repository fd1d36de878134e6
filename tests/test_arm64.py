"""arm64: every C binary cross-built with CC=aarch64-linux-gnu-gcc and run under qemu-user.

Our ring variants and Debian's real ``ptr_ring.h`` (``ringlab env --headers``) are built by
``ringlab build`` with ``-Werror`` (a warning fails the build, so the test), then each ring's
``--selftest``, a short trial per mode and the page_frag binaries run under qemu-aarch64-static.

Functional only: qemu-user translates arm64 code to x86 code, which keeps x86's strong memory
ordering, so a missing barrier that arm64 hardware would expose cannot show here; and the timings
are the emulator's.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RINGLAB = str(ROOT / ".venv" / "bin" / "ringlab")
CC = "aarch64-linux-gnu-gcc"
SYSROOT = Path("/usr/aarch64-linux-gnu")
QEMU = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
RINGS = ("prebatch", "batch", "reorder", "spsc", "debian")


def _why_not() -> str | None:
    if not shutil.which(CC):
        return f"{CC} not installed (Debian package gcc-aarch64-linux-gnu)"
    if not (SYSROOT / "include" / "stdio.h").exists():
        return "no arm64 C library headers (Debian package libc6-dev-arm64-cross)"
    if not QEMU:
        return "qemu-aarch64-static not installed (Debian package qemu-user-static)"
    if not (ROOT / ".venv" / "bin" / "ringlab").exists():
        return "no .venv in the checkout (make venv)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


@pytest.fixture(scope="module")
def arm_build(tmp_path_factory):
    headers = subprocess.run([RINGLAB, "env", "--headers"], capture_output=True, text=True)
    if headers.returncode != 0 or not headers.stdout.strip():
        pytest.skip("no kernel header tree (Debian package linux-headers-*-common): " + headers.stderr.strip())
    build = tmp_path_factory.mktemp("arm64")
    env = dict(os.environ, CC=CC, RINGLAB_BUILD=str(build))
    p = subprocess.run([RINGLAB, "build", "--kernel-header", f"debian={headers.stdout.split()[0]}",
                        "--cflags", "-Werror", "--json"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "warning" not in p.stderr, p.stderr[-3000:]
    return json.loads(p.stdout)


def _run(exe, *args, timeout=300):
    return subprocess.run([QEMU, "-L", str(SYSROOT), str(exe), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


def _bin(info, name) -> Path:
    return Path(info["binaries"][name]["path"])


def test_every_binary_is_built_for_arm64(arm_build):
    assert arm_build["target"] == "aarch64-linux-gnu"
    assert not arm_build["skipped"], arm_build["skipped"]
    names = set(arm_build["binaries"])
    assert {f"ptr_ring_test-{r}" for r in RINGS} | {"page_frag_test-before", "page_frag_test-after",
                                                     "c2c_latency", "syscall_loop"} <= names
    for name in names:
        head = _bin(arm_build, name).read_bytes()[:20]
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183, name   # EM_AARCH64


@pytest.mark.parametrize("ring", RINGS)
def test_selftest_under_qemu_user(arm_build, ring):
    p = _run(_bin(arm_build, f"ptr_ring_test-{ring}"), "--selftest")
    assert p.returncode == 0 and f"selftest ok ({ring})" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("ring", RINGS)
@pytest.mark.parametrize("mode", [0, 1, 2])
def test_smoke_trial_per_mode(arm_build, ring, mode):
    p = _run(_bin(arm_build, f"ptr_ring_test-{ring}"), "-m", mode, "-s", 64, "-N", 20000, "--json",
             "--counters", "none")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["mode"] == mode and doc["count"] == 20000
    assert all(it["ns_per_op"] > 0 for it in doc["iterations"])


@pytest.mark.parametrize("which", ["before", "after"])
def test_page_frag_under_qemu_user(arm_build, which):
    exe = _bin(arm_build, f"page_frag_test-{which}")
    p = _run(exe, "--selftest")
    assert p.returncode == 0, p.stdout + p.stderr
    p = _run(exe, "test_push_cpu=-1", "test_pop_cpu=-1", "nr_test=20000", "--json", "--counters", "none")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["count"] == 20000 and doc["pages_leaked"] == 0


def test_c2c_and_syscall_loop_run(arm_build):
    p = _run(_bin(arm_build, "c2c_latency"), "-a", -1, "-b", -1, "-n", 200, "-k", 1, "--json")
    q = _run(_bin(arm_build, "syscall_loop"), "--help")
    assert p.returncode in (0, 2) and q.returncode in (0, 2), (p.stderr, q.stderr)
