#!/usr/bin/env python3
"""Harness fidelity: is ringlab's own `batch` ring as fast as the kernel's real ptr_ring.h?

Also run as ``ringlab bench fidelity``.  In ONE interleaved run, on the same
CPU (mode 0) and the same CPU pair (mode 1), with fresh processes per trial in
a seeded random order, it times:

* ours ``batch``  vs the real Debian ``include/linux/ptr_ring.h`` built through
  the compat shim (kernel-header variant ``kernel``): target ratio 1.00 +- 0.03;
* ours ``prebatch`` vs ours ``batch``: the effect of batch zeroing.

It prints the machine, the medians (ns/op) per variant and mode, the ratios of
medians with a bootstrap 95% interval, and the code size of each binary's
measured functions (``nm -S``): a ratio that misses usually shows up there
first (inlining, barriers) before it is worth reading objdump.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:           # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

KERNEL_NAME = "kernel"                  # the variant name of the real header
VARIANTS = ("batch", KERNEL_NAME, "prebatch")
PAIRS = (("batch", KERNEL_NAME, "ours/real"), ("prebatch", "batch", "prebatch/batch"))
TARGET = (0.97, 1.03)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trials", type=int, default=30, help="measured trials per variant and mode (default 30)")
    p.add_argument("--warmup", type=int, default=1, help="discarded warm-up trials per variant and mode (default 1)")
    p.add_argument("--count", type=int, default=20_000_000, help="items per trial, -N (default 2e7)")
    p.add_argument("--size", type=int, default=1000, help="ring size, -s (default 1000, as in the mails)")
    p.add_argument("--kernel-header", default=None, metavar="PATH",
                   help="real ptr_ring.h, kernel tree or headers package (default: newest "
                        "/usr/src/linux-headers-*-common)")
    p.add_argument("--cpus", default=None, metavar="P,C",
                   help="CPU for mode 0 is P; mode 1 pins producer P and consumer C "
                        "(default: the last two allowed CPUs)")
    p.add_argument("--modes", default="0,1", help="comma list of modes (default 0,1)")
    p.add_argument("--seed", type=int, default=1, help="seed of the interleaved order (default 1)")
    p.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="also write every trial to FILE")


def _fail(msg: str) -> int:
    print(f"ringlab bench fidelity: error: {msg}", file=sys.stderr)
    return 2


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "nproc": os.cpu_count(), "allowed_cpus": sorted(os.sched_getaffinity(0)),
            "kernel": platform.release(), "machine": platform.machine()}


def measured_sizes(exe: str) -> dict[str, int]:
    """Bytes of each rl_measured_* function (nm -S), or {} when nm is unavailable."""
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", exe], capture_output=True, text=True).stdout
    except OSError:
        return {}
    sizes = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith("rl_measured_"):
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def _median(xs):
    import numpy as np
    return float(np.median(xs)) if len(xs) else float("nan")


def ratio_ci(a, b, seed: int, n: int = 2000) -> tuple[float, float]:
    """Percentile-bootstrap 95% interval of median(a)/median(b)."""
    import numpy as np
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a), np.asarray(b)
    ra = np.median(rng.choice(a, (n, len(a))), axis=1)
    rb = np.median(rng.choice(b, (n, len(b))), axis=1)
    lo, hi = np.percentile(ra / rb, [2.5, 97.5])
    return float(lo), float(hi)


def run(args) -> int:
    from ringlab import build, kernel_header as kh

    if args.trials < 1:
        return _fail(f"--trials {args.trials}: allowed: an integer >= 1")
    if args.warmup < 0:
        return _fail(f"--warmup {args.warmup}: allowed: an integer >= 0")
    if args.count < 1:
        return _fail(f"--count {args.count}: allowed: an integer > 0")
    if not 2 <= args.size <= 10_000_000:
        return _fail(f"--size {args.size}: allowed: 2..10000000")
    try:
        modes = sorted({int(m) for m in str(args.modes).split(",") if m.strip()})
    except ValueError:
        modes = []
    if not modes or any(m not in (0, 1, 2) for m in modes):
        return _fail(f"--modes {args.modes!r}: allowed: a comma list of 0, 1, 2")
    allowed = sorted(os.sched_getaffinity(0))
    if args.cpus:
        try:
            p_cpu, c_cpu = (int(x) for x in args.cpus.split(","))
        except ValueError:
            return _fail(f"--cpus {args.cpus!r}: allowed: P,C with two CPU numbers")
        for c in (p_cpu, c_cpu):
            if c not in allowed:
                return _fail(f"--cpus: CPU {c} is not online/allowed; allowed: {allowed}")
    else:
        p_cpu, c_cpu = (allowed[-2], allowed[-1]) if len(allowed) >= 2 else (allowed[0], allowed[0])
    header = args.kernel_header or kh.debian_header()
    if header is None:
        return _fail("no kernel header: install linux-headers-*-common or pass --kernel-header PATH")
    try:
        header = kh.resolve_header(header)
        info = build.build_all(kernel_headers={KERNEL_NAME: header},
                               only=[f"ptr_ring_test-{v}" for v in VARIANTS])
    except (kh.KernelHeaderError, build.BuildError) as e:
        return _fail(str(e))
    exes = {v: info.binaries[f"ptr_ring_test-{v}"].path for v in VARIANTS}

    m = machine()
    print(f"machine: {m['cpu_model']}, nproc {m['nproc']} (allowed {len(allowed)}), "
          f"{m['machine']}, kernel {m['kernel']}")
    print(f"compiler: {info.compiler_version}; flags: {' '.join(info.cflags)}")
    print(f"real header: {header} ({kh.detect_generation(header)} generation)")
    print(f"run: size {args.size}, N {args.count}, {args.trials} trials (+{args.warmup} warm-up) per "
          f"variant and mode, interleaved (seed {args.seed}); mode 0 on CPU {c_cpu}, "
          f"mode 1 producer CPU {p_cpu} consumer CPU {c_cpu}")
    sys.stdout.flush()

    # The plan: every (trial, mode, variant), warm-ups first, then shuffled
    # measured trials, so drift (thermal, neighbours) hits all variants alike.
    rng = random.Random(args.seed)
    plan = [(t, mo, v) for t in range(args.warmup) for mo in modes for v in VARIANTS]
    measured = [(args.warmup + t, mo, v) for t in range(args.trials) for mo in modes for v in VARIANTS]
    rng.shuffle(measured)
    plan += measured

    rows = []
    for i, (t, mode, v) in enumerate(plan):
        argv = [exes[v], "-s", str(args.size), "-m", str(mode), "-N", str(args.count), "--json",
                "--counters", "none"]
        argv += ["-p", str(c_cpu)] if mode == 0 else ["-p", str(p_cpu), "-c", str(c_cpu)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return _fail(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
        out = json.loads(r.stdout)
        it = out["iterations"][0]
        rows.append({"variant": v, "mode": mode, "trial": t, "warmup": t < args.warmup,
                     "ns_per_op": it["ns_per_op"], "order": i,
                     "cpus": [it.get("cpu_producer_start"), it.get("cpu_consumer_start")]})

    print()
    print(f"{'mode':>4}  {'variant':<9} {'median ns/op':>12} {'min':>8} {'max':>8}  n")
    for mode in modes:
        for v in VARIANTS:
            xs = [r["ns_per_op"] for r in rows if r["mode"] == mode and r["variant"] == v and not r["warmup"]]
            print(f"{mode:>4}  {v:<9} {_median(xs):>12.3f} {min(xs):>8.3f} {max(xs):>8.3f}  {len(xs)}")
    print()
    print(f"{'mode':>4}  {'ratio':<15} {'median':>7}  {'95% CI':<15} verdict")
    verdicts = []
    for mode in modes:
        for a, b, label in PAIRS:
            xa = [r["ns_per_op"] for r in rows if r["mode"] == mode and r["variant"] == a and not r["warmup"]]
            xb = [r["ns_per_op"] for r in rows if r["mode"] == mode and r["variant"] == b and not r["warmup"]]
            ratio = _median(xa) / _median(xb)
            lo, hi = ratio_ci(xa, xb, args.seed + mode)
            if b == KERNEL_NAME:
                ok = TARGET[0] <= ratio <= TARGET[1]
                verdict = "within 1.00 +- 0.03" if ok else "MISSES 1.00 +- 0.03"
                verdicts.append(ok)
            else:
                verdict = "prebatch slower" if lo > 1 else ("prebatch faster" if hi < 1 else "no clear difference")
            print(f"{mode:>4}  {label:<15} {ratio:>7.3f}  [{lo:.3f}, {hi:.3f}]  {verdict}")
    print()
    print("code size of the measured functions (bytes, nm -S):")
    for v in VARIANTS:
        sizes = measured_sizes(exes[v])
        print(f"  {v:<9} " + (", ".join(f"{k.removeprefix('rl_measured_')}={n}" for k, n in sorted(sizes.items()))
                               or "n/a"))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"machine": m, "rows": rows, "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, type(None)))}}, indent=1))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="harness_fidelity.py", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
