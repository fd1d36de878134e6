#!/usr/bin/env python3
"""Mock executor: a stand-in for build/bin/ptr_ring_test-<variant>.

It speaks the real binary's command line (``-s SIZE -m MODE -N COUNT [-p CPU] [-c CPU]
[-b BATCH] [-l] [-r REPEATS] [--counters LIST|none] [--ring-offset BYTES] [--copy K] [--json]``) and prints the JSON of
docs/architecture.md, with made-up but deterministic timings, so the runner's tests do not
depend on the C build, on timing noise or on perf.  The variant comes from the program
name (``ptr_ring_test-batch`` -> ``batch``, ``ptr_ring_test-batch@p12-a4`` -> ``batch``: a code
layout of it), as with the real binaries.

Behaviour knobs (environment variables, so a test can steer one variant):
  FAKE_CRASH=VARIANT[,VARIANT]   abort() those variants (SIGABRT) after writing to stderr
  FAKE_EXIT=VARIANT:CODE         exit with CODE after writing to stderr
  FAKE_HANG=VARIANT              sleep forever (the runner's timeout must kill us)
  FAKE_SLEEP=SECONDS             sleep this long before answering (kill-and-resume test)
  FAKE_GARBAGE=VARIANT           print something that is not JSON
  FAKE_CHILD_PIDFILE=PATH        fork a grandchild that sleeps; write its pid (orphan test)
  FAKE_NOISE=SD                  multiply ns_per_op by exp(SD * N(0,1)): a noisy machine.  With
  FAKE_NOISE_FILE=PATH           (a call counter) the noise is a seeded sequence: reproducible runs
Stdlib only: it may run under any python3.
"""
import fcntl
import json
import os
import random
import signal
import sys
import time

BASE_NS = {"prebatch": 12.0, "batch": 10.0, "reorder": 9.0, "spsc": 6.0}


def main(argv):
    variant = os.path.basename(argv[0]).split("-", 1)[-1].split("@", 1)[0]
    opts = {"-s": "1000", "-m": "0", "-N": "1000", "-p": None, "-c": None, "-b": "0",
            "-r": "1", "--counters": "cycles,instructions", "--ring-offset": "0", "--copy": "0"}
    flags = set()
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-l", "--json"):
            flags.add(a)
            i += 1
        elif a in opts:
            opts[a] = argv[i + 1]
            i += 2
        else:
            sys.stderr.write(f"unknown option {a!r}\n")
            return 64
    size, mode, count = int(opts["-s"]), int(opts["-m"]), int(opts["-N"])
    repeats = int(opts["-r"])

    def listed(name):
        return variant in os.environ.get(name, "").split(",")

    if os.environ.get("FAKE_CHILD_PIDFILE"):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        with open(os.environ["FAKE_CHILD_PIDFILE"], "w") as f:
            f.write(str(pid))
    if os.environ.get("FAKE_SLEEP"):
        time.sleep(float(os.environ["FAKE_SLEEP"]))
    if listed("FAKE_HANG"):
        sys.stderr.write("fake: hanging\n")
        sys.stderr.flush()
        time.sleep(3600)
    if listed("FAKE_CRASH"):
        sys.stderr.write("fake: ring corrupted, expected 7 got 9\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGABRT)
    ex = os.environ.get("FAKE_EXIT", "")
    if ex.split(":")[0] == variant:
        sys.stderr.write("fake: exiting with error\n")
        return int(ex.split(":")[1])
    if listed("FAKE_GARBAGE"):
        print("this is not json")
        return 0

    wanted = [] if opts["--counters"] == "none" else opts["--counters"].split(",")
    p = int(opts["-p"]) if opts["-p"] is not None else 0
    c = int(opts["-c"]) if opts["-c"] is not None else (None if mode == 0 else 1)
    iterations = []
    noise = _noise(variant)
    for k in range(repeats):
        ns = BASE_NS.get(variant, 11.0) + 0.01 * k + (0.5 if mode else 0.0) + size * 1e-6
        ns *= noise.__next__()
        elapsed = ns * count
        counters = {}
        for ev in wanted:
            if ev in ("cycles", "instructions", "branches", "branch_misses"):
                # A VM guest: hardware events do not open.
                counters[ev] = {"value": None, "raw": None, "enabled": 0, "running": 0,
                                "multiplexed": False, "error": "not supported (ENOENT)"}
            else:
                counters[ev] = {"value": elapsed, "raw": elapsed, "enabled": 1, "running": 1,
                                "multiplexed": False, "error": None}
        if os.environ.get("FAKE_HW_COUNTERS"):
            counters["cycles"] = {"value": 3.0 * elapsed, "raw": 1.5 * elapsed, "enabled": 2,
                                  "running": 1, "multiplexed": True, "error": None}
            counters["instructions"] = {"value": 6.0 * elapsed, "raw": 6.0 * elapsed, "enabled": 1,
                                        "running": 1, "multiplexed": False, "error": None}
        iterations.append({
            "ns_producer": elapsed, "ns_consumer": None if mode == 0 else elapsed,
            "elapsed_ns": elapsed, "ns_per_op": ns,
            "cpu_producer_start": p, "cpu_producer_end": p,
            "cpu_consumer_start": c, "cpu_consumer_end": c,
            "counters": counters})
    doc = {"schema": 1, "binary": "ptr_ring_test", "variant": variant, "mode": mode, "size": size,
           "batch": int(opts["-b"]) or 16, "count": count, "lock": "-l" in flags,
           "ring_offset": int(opts["--ring-offset"]),
           "ctx_voluntary": 1, "ctx_involuntary": 0, "iterations": iterations}
    print(json.dumps(doc))
    return 0


def _noise(variant):
    """Factors exp(SD * N(0,1)), one per iteration (all 1 without FAKE_NOISE)."""
    sd = float(os.environ.get("FAKE_NOISE") or 0)
    path = os.environ.get("FAKE_NOISE_FILE")
    seed = None
    if path:
        with open(path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            n = int(f.read() or 0)
            f.seek(0)
            f.truncate()
            f.write(str(n + 1))
        seed = f"{variant}:{n}"
    rng = random.Random(seed)
    while True:
        yield 2.718281828459045 ** (sd * rng.gauss(0, 1)) if sd else 1.0


def install(bin_dir, python, variants=tuple(BASE_NS), kernel_headers=None, cflags="", seeds=(1, 11), layouts=4):
    """Write build/bin/ptr_ring_test-<variant> mock executables into bin_dir, and the first
    ``layouts`` code layouts of each variant for each run seed in ``seeds`` (the default seed, and
    the one of tests/fakes/cli_runs.py)
    (``ptr_ring_test-<variant>@p<pad>-a<align>``, ringlab.build.layouts), so that runs with
    those seeds and up to ``layouts`` layouts find their binaries.

    Each copy gets its own trailing comment, so the variants and layouts are different files
    with different sha256 (as real builds are).  Their source records are declared
    (``ringlab.binaries.declare_built``) for ``kernel_headers`` and ``cflags``, so a run
    without a build accepts them as built from the source set it asks for."""
    from pathlib import Path
    from ringlab.build import binaries, layouts as L   # here: the mock itself runs on the stdlib alone
    src = open(os.path.abspath(__file__)).read()
    os.makedirs(bin_dir, exist_ok=True)
    out = []
    # one binary per layout, and the binaries of layout copies a run of 2..layouts layouts asks for
    lays = {f"ptr_ring_test-{v}": [L.PLAIN] + [L.layout_spec(s, v, k) for s in seeds for k in range(layouts)]
            + [g for s in seeds for n in range(2, layouts + 1) for common in (False, True)
               for g in L.copy_groups(L.arm_layouts(s, v, n, cflags, common=common))]
            for v in variants}
    for base, arm in lays.items():
        for lay in arm:
            path = os.path.join(bin_dir, lay.binary_name(base))
            with open(path, "w") as f:
                f.write(f"#!{python}\n{src}\n# variant {base} {lay.suffix()}\n")
            os.chmod(path, 0o755)
            out.append(path)
    names = [os.path.basename(p) for p in out]
    headers = {k: v for k, v in dict(kernel_headers or {}).items() if f"ptr_ring_test-{k}" in names}
    binaries.declare_built(names, kernel_headers=headers or None, cflags=cflags, out_dir=Path(bin_dir),
                           layouts=lays)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv))
