"""Common vs independent random layouts: the spread of per-pair log ratios, batch vs reorder.

With ``layouts`` K each arm is built K times (ringlab.build.layouts) and layout pair k
compares the baseline's build k with the candidate's build k.  Drawn independently (the
default) the two builds of a pair have different pads and alignments, so the pair's log
ratio carries both arms' layout effects; with common random layouts (``-p common_layouts``)
both get the same pad and alignments, and the pair's difference keeps only what the arms'
small code-size difference moves.  This benchmark measures both designs in one run, their
trials interleaved (rounds; in each round both designs' K pairs in a random order, the arms
of a pair back to back in a random order), on our own rings: batch vs reorder, size 1000,
mode 0, each trial a fresh process with the runner's per-trial ring offset and environment pad.

Printed: per design the SD (over the K pairs; robust, from the median absolute deviation) of the
per-pair log ratio (the median over the rounds of log(reorder / batch), in percent), the part
that the process noise explains (from the spread between the medians of the even and the odd
rounds), the layout part (the rest), the
median effect, and the ratio of the two SDs with a 95% bootstrap interval over the pairs.

    .venv/bin/python benchmarks/common_layouts.py [--layouts 16] [--rounds 8] [--count 2000000]
"""
from __future__ import annotations

import math
import os
import random
import secrets
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab import paths  # noqa: E402
from ringlab.build import driver  # noqa: E402
from ringlab.build import layouts as L  # noqa: E402
from ringlab.experiments.base import parse_harness_json  # noqa: E402
from ringlab.experiments.params import MAX_SEED  # noqa: E402
from ringlab.run.process import run_process, trial_env  # noqa: E402
from ringlab.system import topology  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

ARMS = ("batch", "reorder")
DESIGNS = ("independent", "common")


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--layouts", type=int, default=16, help="layout pairs per design (2..64)")
@click.option("--rounds", type=int, default=8, help="trials of each build (>= 2)")
@click.option("--count", type=int, default=2_000_000, help="operations per trial (-N)")
@click.option("--seed", type=int, default=None, help="layout seed (default: drawn)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def _builds(seed: int, k: int) -> dict[str, dict[str, list[L.Layout]]]:
    """{design: {arm: its K layouts}}."""
    return {d: {a: L.arm_layouts(seed, a, k, common=(d == "common")) for a in ARMS} for d in DESIGNS}


def _loads() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _robust_sd(xs: list[float]) -> float:
    """1.4826 x the median absolute deviation: the SD of normal data, robust to a few outliers."""
    m = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - m) for x in xs)


def _bootstrap_ratio(a: list[float], b: list[float], seed: int, reps: int = 2000) -> tuple[float, float]:
    """95% percentile interval of robust_sd(a) / robust_sd(b), pairs resampled in each design."""
    rng = random.Random(seed ^ 0x5EED)
    out = []
    for _ in range(reps):
        sb = _robust_sd(rng.choices(b, k=len(b)))
        if sb > 0:
            out.append(_robust_sd(rng.choices(a, k=len(a))) / sb)
    out.sort()
    return out[int(0.025 * len(out))], out[min(len(out) - 1, int(0.975 * len(out)))]


def run(args) -> int:
    k, rounds = int(args.layouts), int(args.rounds)
    if not 2 <= k <= L.MAX_LAYOUTS or rounds < 2 or args.count < 1:
        print(f"--layouts {k} --rounds {rounds} --count {args.count}: allowed: layouts 2..{L.MAX_LAYOUTS}, "
              "rounds >= 2, count >= 1", file=sys.stderr)
        return 2
    seed = secrets.randbelow(MAX_SEED + 1) if args.seed is None else int(args.seed)
    lays = _builds(seed, k)
    t0 = time.perf_counter()
    wanted = {f"ptr_ring_test-{a}": sorted({lay for d in DESIGNS for lay in lays[d][a]},
                                           key=lambda x: (x.pad, x.align, x.loops, x.seed))
              for a in ARMS}
    driver.build_all(only=list(wanted), layouts=wanted)
    build_s = time.perf_counter() - t0
    print(f"seed {seed}: {k} layout pairs per design, {rounds} rounds, -N {args.count}, "
          f"{sum(len(v) for v in wanted.values())} builds in {build_s:.0f} s")
    try:
        cpu = topology.pick_single_cpu(topology.Topology.read())
    except (OSError, ValueError, KeyError):
        cpu = -1
    load_start = _loads()
    rng = random.Random(seed)
    # t[design][arm][k] = ns_per_op of each round
    t = {d: {a: [[] for _ in range(k)] for a in ARMS} for d in DESIGNS}
    order, failed = 0, 0
    t1 = time.perf_counter()
    for _ in range(rounds):
        units = [(d, j) for d in DESIGNS for j in range(k)]
        rng.shuffle(units)
        for d, j in units:
            arms = list(ARMS)
            rng.shuffle(arms)
            got = {}
            for a in arms:
                binary = paths.bin_dir() / lays[d][a][j].binary_name(f"ptr_ring_test-{a}")
                argv = [str(binary), "-s", "1000", "-m", "0", "-N", str(args.count),
                        "--ring-offset", str(L.ring_offset(seed, order))]
                if cpu >= 0:
                    argv += ["-p", str(cpu)]
                out = run_process(argv + ["--json"], 120, trial_env(L.env_pad(seed, order)))
                order += 1
                if out.status != "ok":
                    failed += 1
                    break
                got[a] = parse_harness_json(out.stdout)[0]["ns_per_op"]
            if len(got) == len(ARMS):   # a round's pair counts only whole
                for a in ARMS:
                    t[d][a][j].append(got[a])
    trials_s = time.perf_counter() - t1
    print(f"{order} trials in {trials_s:.0f} s ({failed} failed), pinned to CPU {cpu}; load average "
          f"{load_start} at the start, {_loads()} at the end: other work shared this machine "
          f"({os.cpu_count()} CPUs), so the process noise is larger than on a quiet one")
    res = {}
    for d in DESIGNS:
        per_pair, halves = [], []
        for j in range(k):
            logs = [100 * math.log(r / b) for b, r in zip(t[d]["batch"][j], t[d]["reorder"][j])]
            if len(logs) >= 2:
                # the median over the rounds: a trial preempted by other work moves it little
                per_pair.append(statistics.median(logs))
                halves.append(statistics.median(logs[0::2]) - statistics.median(logs[1::2]))
        if len(per_pair) < 3:
            print(f"{d}: too few measured pairs", file=sys.stderr)
            return 1
        # split halves: the two halves' medians differ by process noise alone, with about four
        # times the variance of the whole median's noise (no assumption on the noise's shape)
        res[d] = {"pairs": per_pair, "sd": _robust_sd(per_pair), "noise": _robust_sd(halves) ** 2 / 4,
                  "plain_sd": statistics.stdev(per_pair), "mean": statistics.median(per_pair)}
        r = res[d]
        layout_part = max(0.0, r["sd"] ** 2 - r["noise"])
        print(f"{d:>11}: SD of per-pair log ratio {r['sd']:.3f} pts (robust, MAD; plain SD {r['plain_sd']:.3f}) "
              f"over {len(per_pair)} pairs; process noise explains {math.sqrt(r['noise']):.3f} pts of it, "
              f"layout part {math.sqrt(layout_part):.3f} pts; median reorder vs batch {r['mean']:+.3f}%")
    ratio = res["common"]["sd"] / res["independent"]["sd"]
    plain = res["common"]["plain_sd"] / res["independent"]["plain_sd"]
    if k < 8:
        print(f"SD common / SD independent: {ratio:.3f} (plain SDs: {plain:.3f}); an interval needs "
              "--layouts 8 or more")
        print("clear gain (CI below 1): undecided")
        return 0
    lo, hi = _bootstrap_ratio(res["common"]["pairs"], res["independent"]["pairs"], seed)
    print(f"SD common / SD independent: {ratio:.3f} (95% bootstrap CI over pairs {lo:.3f} .. {hi:.3f}); "
          f"plain SDs: {plain:.3f}")
    print("clear gain (CI below 1): " + ("yes" if hi < 1 else "no"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
