"""csrc/page_frag: the page_frag cache (before/after) and page_frag_test.

The binaries are compiled here with gcc into a tmp dir (same sources and
flags as ringlab/build.py uses), plus ASan+UBSan and TSan builds that run
the built-in selftest.  Nothing asserts on speed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
VARIANTS = ("before", "after")
CPUS = sorted(os.sched_getaffinity(0))
PUSH, POP = CPUS[0], CPUS[-1]

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


def sources(variant: str) -> list[str]:
    return [str(CSRC / "page_frag" / "page_frag_test.c"),
            str(CSRC / "page_frag" / f"page_frag_{variant}.c"),
            str(CSRC / "page_frag" / "page_pool.c"),
            str(CSRC / "harness" / "counters.c")]


def compile_(out: Path, variant: str, flags: list[str]) -> Path:
    cmd = ["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-pthread", "-I", str(CSRC),
           *flags, *sources(variant), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def sanitizer_works(tmp: Path, flag: str) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void){return 0;}\n")
    exe = tmp / f"probe-{flag.replace(',', '_')}"
    r = subprocess.run(["gcc", f"-fsanitize={flag}", str(src), "-o", str(exe)], capture_output=True)
    return r.returncode == 0 and subprocess.run([str(exe)], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def bins(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("page_frag")
    return {v: compile_(d / f"page_frag_test-{v}", v, ["-O2"]) for v in VARIANTS}


def run(exe: Path, *args: str, env: dict | None = None, timeout: float = 60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=e)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("align,word", [(0, "non-aligned"), (1, "aligned")])
def test_seed_line(bins, variant, align, word):
    r = run(bins[variant], f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "test_alloc_len=12",
            "nr_test=20000", f"test_align={align}")
    assert r.returncode == 0, r.stderr
    head, us = r.stdout.strip().rsplit(" ", 1)
    assert head == f"20000 of iterations for {word} testing took:"
    assert us.endswith("us") and int(us[:-2]) > 0


@pytest.mark.parametrize("variant", VARIANTS)
def test_json_shape(bins, variant):
    r = run(bins[variant], f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "test_alloc_len=64",
            "nr_test=30000", "test_align=1", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["binary"] == "page_frag_test" and d["variant"] == variant
    assert (d["count"], d["alloc_len"], d["align"], d["ring_size"]) == (30000, 64, 1, 512)
    assert d["pages_leaked"] == 0
    it = d["iterations"][0]
    assert it["elapsed_ns"] == max(it["ns_producer"], it["ns_consumer"]) > 0
    assert it["ns_per_op"] == pytest.approx(it["elapsed_ns"] / 30000)
    assert it["elapsed_us"] == pytest.approx(it["elapsed_ns"] / 1000)
    assert it["cpu_producer_start"] == PUSH and it["cpu_consumer_start"] == POP
    assert it["page_refills"] >= 1
    c = it["counters"]
    assert set(c) >= {"task_clock", "context_switches", "cycles"}
    # honest: unsupported counters are null with a reason, never 0
    for name, ev in c.items():
        assert (ev["value"] is None) == (ev["error"] is not None), name
    assert c["task_clock"]["value"] > 0


@pytest.mark.parametrize("offset", [0, 64, 4032])
def test_ring_offset_is_placed_and_reported(bins, offset):
    r = run(bins["before"], f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "nr_test=20000", "--json",
            "--counters", "none", "--ring-offset", str(offset))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["ring_offset"] == offset and d["pages_leaked"] == 0
    assert json.loads(run(bins["before"], "nr_test=1000", "--json", "--counters", "none").stdout)["ring_offset"] == 0


# -- code layouts: the pad moves the measured code, the build machinery names and records it --
@pytest.fixture(scope="module")
def two_layouts(tmp_path_factory):
    from ringlab.build import driver
    from ringlab.build.layouts import Layout
    a, b = Layout(0, 40, 1, 1), Layout(1, 2903, 64, 2)
    out = tmp_path_factory.mktemp("layouts")
    info = driver.build_all(only=["page_frag_test-after"], out_dir=out, jobs=2,
                            layouts={"page_frag_test-after": [a, b]})
    return [info.binaries[x.binary_name("page_frag_test-after")] for x in (a, b)], (a, b)


def _symbols(binary: str) -> dict[str, tuple[int, int]]:
    """{name: (address, size)} of the binary's defined symbols."""
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not on PATH")
    out = subprocess.run(["nm", "-S", binary], capture_output=True, text=True, check=True).stdout
    return {f[-1]: (int(f[0], 16), int(f[1], 16)) for f in map(str.split, out.splitlines()) if len(f) == 4}


def test_layouts_move_the_measured_code(two_layouts):
    (ia, ib), (a, b) = two_layouts
    sa, sb = _symbols(ia.path), _symbols(ib.path)
    assert sa["rl_layout_pad"][1] >= a.pad and sb["rl_layout_pad"][1] >= b.pad   # the pad is there
    for fn in ("rl_measured_push", "rl_measured_pop"):
        assert sa[fn][0] != sb[fn][0]                                             # and moved them
        assert sb[fn][0] % 64 == 0                                                # -falign-functions=64
    assert ia.layout["pad"] == a.pad and ib.layout["flags"] == b.flags()
    assert ia.source_sha256 == ib.source_sha256                                   # one source set
    for info in (ia, ib):
        r = run(Path(info.path), f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "nr_test=20000", "--json",
                "--counters", "none")
        assert r.returncode == 0 and json.loads(r.stdout)["variant"] == "after", r.stderr


def test_counters_none_and_unknown(bins):
    r = run(bins["after"], "nr_test=1000", f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}",
            "--json", "--counters", "none")
    assert r.returncode == 0, r.stderr
    assert all(ev["value"] is None for ev in json.loads(r.stdout)["iterations"][0]["counters"].values())
    r = run(bins["after"], "nr_test=1000", "--counters", "bogus")
    assert r.returncode == 2 and "bogus" in r.stderr


def test_forced_order0_fallback(bins):
    r = run(bins["before"], "nr_test=20000", f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "--json",
            "test_alloc_len=4096", env={"RINGLAB_PAGE_FRAG_ORDER0": "1"})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    it = d["iterations"][0]
    assert d["force_order0"] is True
    assert it["page_refills"] > 0 and it["page_refills_order0"] == it["page_refills"]


@pytest.mark.parametrize("args,needle", [
    (["test_alloc_len=0"], "test_alloc_len"),
    (["test_alloc_len=4097"], "test_alloc_len"),
    (["nr_test=0"], "nr_test"),
    (["nr_test=-5"], "nr_test"),
    (["nr_test=12x"], "nr_test"),
    (["nr_test=1000000000001"], "allowed: an integer in [1, 1000000000000]"),
    (["test_align=2"], "test_align"),
    (["test_push_cpu=100000"], "test_push_cpu"),
    ([f"test_pop_cpu={max(CPUS) + 1}"], "test_pop_cpu"),
    (["test_cpu=1"], "test_cpu"),
    (["--frobnicate"], "--frobnicate"),
    (["--stall-timeout", "-1"], "--stall-timeout"),
    (["--ring-offset", "100"], "--ring-offset"),
    (["--ring-offset=4096"], "--ring-offset"),
    (["--ring-offset", "-64"], "--ring-offset"),
    (["--ring-offset"], "--ring-offset"),
])
def test_validation(bins, args, needle):
    r = run(bins["after"], *args)
    assert r.returncode == 2
    assert needle in r.stderr.splitlines()[0]
    assert "allowed" in r.stderr or "usage" in r.stderr


@pytest.mark.parametrize("side,blamed", [("pop", "pop side"), ("push", "push side")])
def test_stall_aborts(bins, side, blamed):
    r = run(bins["before"], "nr_test=100000000", f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}",
            "--stall-timeout", "0.5", "--inject-stall", side, timeout=30)
    assert r.returncode == 3
    assert "stalled" in r.stderr and blamed in r.stderr


def test_exact_page_size_fragment_runs(bins):
    for v in VARIANTS:
        r = run(bins[v], "nr_test=5000", "test_alloc_len=4096", f"test_push_cpu={PUSH}",
                f"test_pop_cpu={POP}")
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("variant", VARIANTS)
def test_selftest_asan_ubsan(tmp_path, variant):
    if not sanitizer_works(tmp_path, "address,undefined"):
        pytest.skip("gcc cannot build/run -fsanitize=address,undefined here")
    exe = compile_(tmp_path / f"asan-{variant}", variant,
                   ["-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"])
    for align in (0, 1):
        # the largest ring offset too: the ring struct still lies inside its allocation
        r = run(exe, "--selftest", f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}", "nr_test=50000",
                "test_alloc_len=12", f"test_align={align}", "--ring-offset", str(4032 * align),
                env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"},
                timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"selftest OK [{variant}]" in r.stdout and "all back in the pool" in r.stdout


@pytest.mark.parametrize("variant", VARIANTS)
def test_selftest_tsan_two_threads(tmp_path, variant):
    if not sanitizer_works(tmp_path, "thread"):
        pytest.skip("gcc cannot build/run -fsanitize=thread here")
    exe = compile_(tmp_path / f"tsan-{variant}", variant, ["-O1", "-g", "-fsanitize=thread"])
    for align, length in ((0, 12), (1, 2048)):
        r = run(exe, "--selftest-threads", f"test_push_cpu={PUSH}", f"test_pop_cpu={POP}",
                "nr_test=20000", f"test_alloc_len={length}", f"test_align={align}",
                env={"TSAN_OPTIONS": "halt_on_error=1"}, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "ThreadSanitizer" not in r.stderr
        assert "selftest OK" in r.stdout
