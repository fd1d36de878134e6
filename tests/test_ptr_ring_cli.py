"""The seed-compatible command line of build/bin/ptr_ring_test-<variant>."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from ringlab.build.driver import build_all
from ringlab.build.targets import RING_HEADERS
from ringlab.schema import COUNTER_EVENTS


@pytest.fixture(scope="session")
def bins():
    info = build_all(only=[f"ptr_ring_test-{v}" for v in RING_HEADERS])
    return {b.removeprefix("ptr_ring_test-"): b_info.path for b, b_info in info.binaries.items()}


def run(path, *args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=120, env=e)


@pytest.mark.parametrize("variant", list(RING_HEADERS))
def test_seed_lines(bins, variant):
    p = run(bins[variant], "-s", "1000", "-m", "0", "-N", "100000")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"ptr_ring\(size:1000\) perf simple test for 100000 times, took \d+ us\n", p.stdout)
    p = run(bins[variant], "-s", "1000", "-m", "1", "-N", "100000")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"ptr_ring\(size:1000\) perf spsc test for 100000 times, took \d+ us \+ \d+ us\n", p.stdout)
    p = run(bins[variant], "-s", "1000", "-m", "2", "-N", "100000")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"ptr_ring\(size:1000\) perf near-full test for 100000 times, took \d+ us \+ \d+ us\n", p.stdout)


def test_seed_pinned_command(bins):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs for -p/-c")
    p = run(bins["batch"], "-s", "1000", "-m", "1", "-N", "100000", "-p", str(cpus[0]), "-c", str(cpus[1]))
    assert p.returncode == 0, p.stderr
    assert "perf spsc test for 100000 times" in p.stdout


def test_repeats_print_one_line_each(bins):
    p = run(bins["batch"], "-m", "0", "-N", "1000", "-r", "3")
    assert p.returncode == 0
    assert len(p.stdout.splitlines()) == 3


@pytest.mark.parametrize("args, named", [
    (["-s", "1"], "-s"),
    (["-s", "10000001"], "-s"),
    (["-s", "abc"], "-s"),
    (["-s", "12x"], "-s"),
    (["-N", "0"], "-N"),
    (["-N", "-5"], "-N"),
    (["-m", "7"], "-m"),
    (["-m", "1", "-p", "999"], "-p"),
    (["-m", "1", "-c", "999"], "-c"),
    (["-m", "0", "-c", "0"], "-c"),
    (["-p", "x"], "-p"),
    (["-r", "0"], "-r"),
    (["-b", "0"], "-b"),
    (["-s", "16", "-b", "17"], "-b"),
    (["--counters", "cycles,bogus"], "--counters"),
    (["garbage"], "garbage"),
    (["-z"], "-z"),
    (["--nope"], "--nope"),
    (["-s"], "-s"),
])
def test_bad_arguments(bins, args, named):
    p = run(bins["batch"], *args)
    assert p.returncode == 2, (args, p.stdout, p.stderr)
    assert named in p.stderr, p.stderr
    assert "error" in p.stderr
    assert p.stdout == ""


def test_bad_cpu_lists_allowed(bins):
    p = run(bins["batch"], "-m", "1", "-p", "999")
    assert "allowed:" in p.stderr


def test_json_fields(bins):
    p = run(bins["batch"], "-s", "1000", "-m", "1", "-N", "20000", "-r", "2", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    for k in ("schema", "binary", "variant", "mode", "size", "batch", "count", "lock",
              "ctx_voluntary", "ctx_involuntary", "iterations"):
        assert k in d, k
    assert d["variant"] == "batch" and d["mode"] == 1 and d["size"] == 1000 and d["batch"] == 16
    assert d["count"] == 20000 and d["lock"] is False
    assert len(d["iterations"]) == 2
    cpus = os.sched_getaffinity(0)
    for it in d["iterations"]:
        assert it["elapsed_ns"] == max(it["ns_producer"], it["ns_consumer"])
        assert it["ns_per_op"] == pytest.approx(it["elapsed_ns"] / 20000)
        for k in ("cpu_producer_start", "cpu_producer_end", "cpu_consumer_start", "cpu_consumer_end"):
            assert it[k] in cpus
        assert set(it["counters"]) == set(COUNTER_EVENTS)
        for name, c in it["counters"].items():
            # honest: either a value or a reason, never a silent 0
            assert (c["value"] is None) == (c["error"] is not None), (name, c)


def test_json_mode0_has_no_consumer(bins):
    d = json.loads(run(bins["batch"], "-m", "0", "-N", "1000", "--json").stdout)
    it = d["iterations"][0]
    assert it["ns_consumer"] is None and it["cpu_consumer_start"] is None
    assert it["elapsed_ns"] == it["ns_producer"]


def test_spsc_batch_is_null(bins):
    d = json.loads(run(bins["spsc"], "-m", "0", "-N", "1000", "--json").stdout)
    assert d["batch"] is None


def test_software_counters_really_count(bins):
    """We are root here: task_clock must open and count (skip if perf is unavailable)."""
    d = json.loads(run(bins["batch"], "-m", "0", "-N", "200000", "--json", "--counters", "task_clock").stdout)
    c = d["iterations"][0]["counters"]["task_clock"]
    if c["value"] is None:
        pytest.skip(f"perf_event_open unusable here: {c['error']}")
    assert c["value"] > 0 and c["error"] is None and c["scope"] in ("user", "user+kernel")


def test_counter_errors_are_null_with_reason(bins):
    env = {"RINGLAB_COUNTERS_FAIL": "cycles:EACCES,task_clock:ENOENT,page_faults:EOPNOTSUPP"}
    d = json.loads(run(bins["batch"], "-m", "1", "-N", "1000", "--json", env=env).stdout)
    c = d["iterations"][0]["counters"]
    assert c["cycles"]["value"] is None and c["cycles"]["error"].startswith("permission denied (EACCES")
    assert "perf_event_paranoid=" in c["cycles"]["error"]
    assert c["task_clock"] == {"value": None, "raw": None, "enabled": 0, "running": 0,
                               "multiplexed": False, "error": "not supported (ENOENT)", "scope": None}
    assert c["page_faults"]["error"] == "not supported (EOPNOTSUPP)"


def test_counters_none(bins):
    d = json.loads(run(bins["batch"], "-m", "0", "-N", "1000", "--json", "--counters", "none").stdout)
    assert d["iterations"][0]["counters"] == {}


def test_help(bins):
    p = run(bins["batch"], "--help")
    assert p.returncode == 0 and "usage:" in p.stdout
