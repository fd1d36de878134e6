"""The timing part of ``ringlab bench fidelity`` (benchmarks/harness_fidelity.py): every
(trial, mode, variant) in one interleaved run with fresh processes in a seeded random order,
the medians per variant and mode, the ratios of medians with a bootstrap 95% interval, and
the code size of each binary's measured functions (``nm -S``).
"""
from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np

from benchmarks.fidelity_headers import KERNEL_NAME

#: ours / real: the ratio of medians that counts as "runs like the kernel's ring"
TARGET = (0.97, 1.03)


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


def median(xs) -> float:
    return float(np.median(xs)) if len(xs) else float("nan")


def ratio_ci(a, b, seed: int, n: int = 2000) -> tuple[float, float]:
    """Percentile-bootstrap 95% interval of median(a)/median(b)."""
    if len(a) < 2 or len(b) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    a, b = np.asarray(a), np.asarray(b)
    ra = np.median(rng.choice(a, (n, len(a))), axis=1)
    rb = np.median(rng.choice(b, (n, len(b))), axis=1)
    lo, hi = np.percentile(ra / rb, [2.5, 97.5])
    return float(lo), float(hi)


def plan(warmup: int, trials: int, modes: list[int], variants: list[str], seed: int) -> list[tuple]:
    """Every (trial, mode, variant), warm-ups first, then the measured trials shuffled, so
    drift (thermal, neighbours) hits all variants alike."""
    rng = random.Random(seed)
    out = [(t, mo, v) for t in range(warmup) for mo in modes for v in variants]
    measured = [(warmup + t, mo, v) for t in range(trials) for mo in modes for v in variants]
    rng.shuffle(measured)
    return out + measured


def measure(args, exes: dict[str, str], steps: list[tuple], cpus: tuple[int, int]) -> tuple[str, list[dict]]:
    """Run each step once: (the error, or ""; one row per step)."""
    p_cpu, c_cpu = cpus
    rows = []
    for i, (t, mode, v) in enumerate(steps):
        argv = [exes[v], "-s", str(args.size), "-m", str(mode), "-N", str(args.count), "--json",
                "--counters", "none"]
        argv += ["-p", str(c_cpu)] if mode == 0 else ["-p", str(p_cpu), "-c", str(c_cpu)]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[-500:]}", rows
        it = json.loads(r.stdout)["iterations"][0]
        rows.append({"variant": v, "mode": mode, "trial": t, "warmup": t < args.warmup,
                     "ns_per_op": it["ns_per_op"], "order": i,
                     "cpus": [it.get("cpu_producer_start"), it.get("cpu_consumer_start")]})
    return "", rows


def _values(rows: list[dict], mode: int, variant: str) -> list[float]:
    return [r["ns_per_op"] for r in rows if r["mode"] == mode and r["variant"] == variant and not r["warmup"]]


def one_build_ratio(rows: list[dict], mode: int, a: str, b: str) -> float:
    """The ratio of the medians of ``a`` and ``b`` in ``mode`` (one build each)."""
    return median(_values(rows, mode, a)) / median(_values(rows, mode, b))


def print_tables(rows: list[dict], variants: list[str], pairs: list[tuple], modes: list[int], seed: int) -> None:
    """The medians per mode and variant, then the ratio of each pair with its interval and verdict."""
    print()
    print(f"{'mode':>4}  {'variant':<9} {'median ns/op':>12} {'min':>8} {'max':>8}  n")
    for mode in modes:
        for v in variants:
            xs = _values(rows, mode, v)
            print(f"{mode:>4}  {v:<9} {median(xs):>12.3f} {min(xs):>8.3f} {max(xs):>8.3f}  {len(xs)}")
    print()
    print(f"{'mode':>4}  {'ratio':<15} {'median':>7}  {'95% CI':<15} verdict")
    for mode in modes:
        for a, b, label in pairs:
            xa, xb = _values(rows, mode, a), _values(rows, mode, b)
            ratio = median(xa) / median(xb)
            lo, hi = ratio_ci(xa, xb, seed + mode)
            if b == KERNEL_NAME:
                ok = TARGET[0] <= ratio <= TARGET[1]
                verdict = "within 1.00 +- 0.03" if ok else "MISSES 1.00 +- 0.03"
            else:
                verdict = "prebatch slower" if lo > 1 else ("prebatch faster" if hi < 1 else "no clear difference")
            print(f"{mode:>4}  {label:<15} {ratio:>7.3f}  [{lo:.3f}, {hi:.3f}]  {verdict}")


def run_timing(args, exes: dict[str, str], variants: list[str], pairs: list[tuple], modes: list[int],
               cpus: tuple[int, int], no_header: str) -> tuple[str, list[dict]]:
    """The whole timing part, printed: (the error, or ""; every trial's row).  ``no_header`` is
    the reason there is no real header ("" when there is one)."""
    p_cpu, c_cpu = cpus
    print()
    print(f"timing: size {args.size}, N {args.count}, {args.trials} trials (+{args.warmup} warm-up) per "
          f"variant and mode, interleaved (seed {args.seed}); mode 0 on CPU {c_cpu}, "
          f"mode 1 producer CPU {p_cpu} consumer CPU {c_cpu}")
    sys.stdout.flush()
    why, rows = measure(args, exes, plan(args.warmup, args.trials, modes, variants, args.seed), cpus)
    if why:
        return why, rows
    print_tables(rows, variants, pairs, modes, args.seed)
    if no_header:
        print(f"     ours/real       skipped: {no_header}")
    print()
    print("code size of the measured functions (bytes, nm -S):")
    for v in variants:
        sizes = measured_sizes(exes[v])
        print(f"  {v:<9} " + (", ".join(f"{k.removeprefix('rl_measured_')}={n}" for k, n in sorted(sizes.items()))
                               or "n/a"))
    return "", rows
