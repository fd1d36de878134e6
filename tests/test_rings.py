"""Correctness of the four rings under ThreadSanitizer and ASan+UBSan.

Every variant is built twice into a temporary folder (never build/bin), then
the SPSC stress (mode 1) runs for ring sizes 2, 3, 16, 17, 1000 and 1024.  The
binary itself checks FIFO order of 1..N (so nothing is lost or duplicated)
and that the ring is empty at the end; we check the exit code and the JSON.

Every run moves 10^6 items (about 20 s for the whole matrix on a quiet
2-vCPU machine; TSan slows the tiny rings most).  RINGLAB_STRESS_N changes
every count.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from ringlab.build.driver import BuildError, build_all
from ringlab.build.targets import RING_HEADERS
from ringlab.catalog import variant as ring_variant

VARIANTS = list(RING_HEADERS)


def _batch_kind(variant: str) -> str:
    """What a ring's JSON says of its consumer batch, from its catalog layout: "field" (a
    ``struct ptr_ring`` with a batch field: the size's batch, -b sets it), "one" (a ptr_ring
    without one: 1) or "none" (no ptr_ring layout: null)."""
    layout = ring_variant(variant).layout
    return "none" if layout is None else "field" if "batch" in layout.ranges() else "one"


#: the rings whose consumer batch -b sets
BATCHED = [v for v in VARIANTS if _batch_kind(v) == "field"]
SIZES = [2, 3, 16, 17, 1000, 1024]
SANITIZERS = {"tsan": "thread", "asan": "address,undefined"}
EXPECTED_BATCH = {2: 1, 3: 1, 16: 1, 17: 1, 1000: 16, 1024: 16}
STRESS_N = int(os.environ.get("RINGLAB_STRESS_N", "0"))


def _stress_count(san: str, size: int) -> int:
    return STRESS_N or 1_000_000


@pytest.fixture(scope="session")
def san_bins(tmp_path_factory):
    """{"tsan": dir, "asan": dir} with ptr_ring_test-<variant> built under each sanitizer."""
    out = {}
    for key, san in SANITIZERS.items():
        d = tmp_path_factory.mktemp(f"bin-{key}")
        try:
            build_all(sanitize=san, out_dir=d, only=[f"ptr_ring_test-{v}" for v in VARIANTS])
        except BuildError as e:
            pytest.fail(f"sanitizer build {san} failed: {e}")
        out[key] = d
    return out


def _run(binary: Path, *args: str, timeout: int = 120, env=None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    # halt on the first report, and make it fail the process
    e.setdefault("TSAN_OPTIONS", "halt_on_error=1 exitcode=66")
    e.setdefault("ASAN_OPTIONS", "detect_leaks=1 abort_on_error=0")
    e.setdefault("UBSAN_OPTIONS", "halt_on_error=1 print_stacktrace=1")
    e.update(env or {})
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout, env=e)


def _cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("san", list(SANITIZERS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_selftest_full_empty(san_bins, san, variant):
    """The C unit test: full/empty, -ENOSPC, FIFO across wraps, batch fallback,
    locked wrappers and consume_batched, on sizes 2..1024."""
    p = _run(san_bins[san] / f"ptr_ring_test-{variant}", "--selftest")
    assert p.returncode == 0, p.stderr
    assert f"selftest ok ({variant})" in p.stdout


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("san", list(SANITIZERS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_spsc_stress(san_bins, san, variant, size):
    n = _stress_count(san, size)
    args = ["-m", "1", "-s", str(size), "-N", str(n), "--json", "--counters", "none"]
    cpus = _cpus()
    if len(cpus) >= 2:       # two CPUs: real concurrency, as in the mails
        args += ["-p", str(cpus[0]), "-c", str(cpus[1])]
    p = _run(san_bins[san] / f"ptr_ring_test-{variant}", *args, timeout=300)
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stderr[-3000:]}"
    d = json.loads(p.stdout)
    assert d["variant"] == variant and d["size"] == size and d["count"] == n and d["mode"] == 1
    kind = _batch_kind(variant)
    assert d["batch"] == {"field": EXPECTED_BATCH[size], "one": 1, "none": None}[kind]
    it = d["iterations"][0]
    assert it["ns_producer"] > 0 and it["ns_consumer"] > 0
    assert it["elapsed_ns"] == max(it["ns_producer"], it["ns_consumer"])


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", [0, 2])
def test_modes_0_and_2_tsan(san_bins, variant, mode):
    p = _run(san_bins["tsan"] / f"ptr_ring_test-{variant}", "-m", str(mode), "-s", "17",
             "-N", "100000", "-r", "2", "--json", "--counters", "none")
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout)
    assert len(d["iterations"]) == 2
    if mode == 0:
        assert d["iterations"][0]["ns_consumer"] is None


@pytest.mark.parametrize("san", list(SANITIZERS))
@pytest.mark.parametrize("variant", VARIANTS)
def test_locked_wrappers(san_bins, san, variant):
    for mode in (0, 1, 2):
        p = _run(san_bins[san] / f"ptr_ring_test-{variant}", "-l", "-m", str(mode), "-s", "16",
                 "-N", "50000", "--json", "--counters", "none")
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["lock"] is True


@pytest.mark.parametrize("variant", BATCHED)
def test_batch_override(san_bins, variant):
    """-b (ringtest's --param) sets batch, including batch > size/2 and = size."""
    for b in (1, 7, 1000):
        p = _run(san_bins["tsan"] / f"ptr_ring_test-{variant}", "-m", "1", "-s", "1000", "-b", str(b),
                 "-N", "200000", "--json", "--counters", "none")
        assert p.returncode == 0, p.stderr[-3000:]
        assert json.loads(p.stdout)["batch"] == b


def test_batch_override_refused_without_batch(san_bins):
    p = _run(san_bins["asan"] / "ptr_ring_test-spsc", "-b", "4", "-N", "10")
    assert p.returncode == 2
    assert "-b" in p.stderr and "no batch" in p.stderr


# --------------------------------------------------------------------------- harness limits


@pytest.mark.parametrize("san", list(SANITIZERS))
@pytest.mark.parametrize("stall", ["producer", "consumer"])
def test_barrier_timeout_aborts_when_a_thread_never_arrives(san_bins, san, stall):
    """RINGLAB_STALL_THREAD makes one worker never reach its first barrier and never
    return: the peer gives up after --barrier-timeout, the run fails naming the missing
    thread, the stuck thread is abandoned, and the process ends (exit 1) instead of hanging."""
    t0 = time.monotonic()
    p = _run(san_bins[san] / "ptr_ring_test-batch", "-m", "1", "-s", "64", "-N", "1000",
             "--barrier-timeout", "1", "--counters", "none", timeout=60,
             env={"RINGLAB_STALL_THREAD": stall})
    assert p.returncode == 1, p.stderr
    assert (f"barrier before the measured loop (iteration 0): the {stall} thread did not arrive "
            "within 1 s") in p.stderr
    assert f"the {stall} thread did not stop within 1 s and was abandoned" in p.stderr
    assert time.monotonic() - t0 < 30


def test_count_and_barrier_timeout_bounds(san_bins):
    exe = san_bins["asan"] / "ptr_ring_test-batch"
    for args, needle in ((["-N", "1000000000001"],
                          "-N: invalid value '1000000000001'; allowed: an integer in [1, 1000000000000]"),
                         (["-N", "0"], "-N: invalid value '0'"),
                         (["--barrier-timeout", "0"], "--barrier-timeout: invalid value '0'"),
                         (["--barrier-timeout", "86401"], "allowed: an integer in [1, 86400]")):
        p = _run(exe, *args)
        assert p.returncode == 2 and needle in p.stderr.splitlines()[0], p.stderr
    # the bound itself is accepted (checked with a run that fails fast on a bad CPU instead)
    p = _run(exe, "-N", "1000000000000", "-p", "100000")
    assert p.returncode == 2 and "-p" in p.stderr and "-N" not in p.stderr
