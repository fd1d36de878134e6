"""Arms in separate processes vs arms that take turns: the spread of per-round log ratios,
batch vs reorder, both designs interleaved in one run.

Today a round runs each arm in its own process, one after the other.  With ``-p interleave
true`` the arms of a round take turns loop by loop (csrc/harness/turns.h): loop k of batch is
timed next to loop k of reorder, so a fast or slow spell of the machine hits both.  This
benchmark builds K layouts of each arm (layout copies, as a run does), and in every round
measures each layout pair in both designs, in a random order: "separate" (two processes, in a
random order, ``-r`` loops each) and "turns" (one process of a random arm, the other arm with
``--with``, ``-r`` loops each).  Both use the same binaries, the same pinned CPU, the runner's
per-trial ring offset and environment pad.

Printed per design: the SD of the per-round log ratio (the ratio of the arms' median loops, in
percent) around its layout pair's median (robust: MAD; that is the process level the verdict's
CI sees through the rounds), the SD of the per-pair medians (the layout level plus what the
rounds leave), the median effect and the seconds a round took; then the ratio of the round-level
SDs (turns / separate) with a 95% bootstrap interval over the rounds, and, from each design's
own figures, the machine time a ±``--target``% 95% half-width would take with K pairs.

    .venv/bin/python benchmarks/turns.py [--layouts 8] [--rounds 12] [--count 200000] [--repeats 10]
"""
from __future__ import annotations

import json
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

from scipy import stats as sst  # noqa: E402

from benchmarks.common_layouts import _loads, _robust_sd  # noqa: E402
from ringlab import paths  # noqa: E402
from ringlab.build import driver  # noqa: E402
from ringlab.build import layouts as L  # noqa: E402
from ringlab.experiments.params import MAX_SEED  # noqa: E402
from ringlab.run.process import run_process, trial_env  # noqa: E402
from ringlab.system import topology  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

ARMS = ("batch", "reorder")
DESIGNS = ("separate", "turns")


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--layouts", type=int, default=8, help="layout pairs (2..64)")
@click.option("--rounds", type=int, default=12, help="rounds of every pair in each design (>= 2)")
@click.option("--count", type=int, default=200_000, help="operations per timed loop (-N)")
@click.option("--repeats", type=int, default=10, help="timed loops of each arm per round (-r)")
@click.option("--target", type=float, default=0.5, help="half-width (percent) the machine time is given for")
@click.option("--seed", type=int, default=None, help="layout seed (default: drawn)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def _median_loop(doc: dict) -> float:
    return statistics.median(it["ns_per_op"] for it in doc["iterations"])


def _bootstrap_ratio(a: list[float], b: list[float], seed: int, reps: int = 2000) -> tuple[float, float]:
    """95% percentile interval of robust_sd(a) / robust_sd(b), each resampled."""
    rng = random.Random(seed ^ 0x7E57)
    out = sorted(_robust_sd(rng.choices(a, k=len(a))) / sb for _ in range(reps)
                 if (sb := _robust_sd(rng.choices(b, k=len(b)))) > 0)
    return out[int(0.025 * len(out))], out[min(len(out) - 1, int(0.975 * len(out)))]


def _machine_s(round_sd: float, pair_sd: float, k: int, rounds: int, s_per_round: float, target: float) -> float:
    """Seconds of rounds for a t half-width of ``target`` percent across ``k`` layout pairs: the
    variance of a pair's mean is the layout part plus the round part over its rounds."""
    layout_var = max(0.0, pair_sd ** 2 - round_sd ** 2 / rounds)
    q = sst.t.ppf(0.975, k - 1)
    room = (target / q) ** 2 * k - layout_var     # what the rounds may leave per pair
    if room <= 0:
        return math.inf
    return k * math.ceil(round_sd ** 2 / room) * s_per_round


def run(args) -> int:
    k, rounds = int(args.layouts), int(args.rounds)
    if not 2 <= k <= L.MAX_LAYOUTS or rounds < 2 or args.count < 1 or args.repeats < 1 or args.target <= 0:
        print(f"--layouts {k} --rounds {rounds} --count {args.count} --repeats {args.repeats} --target "
              f"{args.target}: allowed: layouts 2..{L.MAX_LAYOUTS}, rounds >= 2, count >= 1, repeats >= 1, "
              "target > 0", file=sys.stderr)
        return 2
    seed = secrets.randbelow(MAX_SEED + 1) if args.seed is None else int(args.seed)
    groups = {a: L.copy_groups(L.arm_layouts(seed, a, k)) for a in ARMS}
    t0 = time.perf_counter()
    driver.build_all(only=[f"ptr_ring_test-{a}" for a in ARMS],
                     layouts={f"ptr_ring_test-{a}": groups[a] for a in ARMS})
    print(f"seed {seed}: {k} layout pairs, {rounds} rounds per design, -N {args.count} -r {args.repeats}, "
          f"builds in {time.perf_counter() - t0:.0f} s")

    def where(a: str, j: int) -> tuple[str, str]:
        g = next(g for g in groups[a] if any(lay.index == j for lay in g.layouts))
        return str(paths.bin_dir() / g.binary_name(f"ptr_ring_test-{a}")), str(g.position(j))
    try:
        cpu = topology.pick_single_cpu(topology.Topology.read())
    except (OSError, ValueError, KeyError):
        cpu = -1
    common = ["-s", "1000", "-m", "0", "-N", str(args.count), "-r", str(args.repeats), "--counters", "none"]
    common += ["-p", str(cpu)] if cpu >= 0 else []
    load_start = _loads()
    rng = random.Random(seed)
    logs = {d: [[] for _ in range(k)] for d in DESIGNS}    # per pair: per-round log ratio, percent
    secs = {d: 0.0 for d in DESIGNS}
    order = failed = 0
    for _ in range(rounds):
        units = [(d, j) for d in DESIGNS for j in range(k)]
        rng.shuffle(units)
        for d, j in units:
            arms = rng.sample(ARMS, 2)
            off = ["--ring-offset", str(L.ring_offset(seed, order))]
            env = trial_env(L.env_pad(seed, order))
            order += 1
            got, started = {}, time.perf_counter()
            if d == "separate":
                for a in arms:
                    path, copy = where(a, j)
                    out = run_process([path, "--copy", copy, *common, *off, "--json"], 120, env)
                    if out.status == "ok":
                        doc = json.loads(out.stdout)
                        got[doc["variant"]] = _median_loop(doc)
            else:
                (lead, lcopy), (other, ocopy) = where(arms[0], j), where(arms[1], j)
                out = run_process([lead, "--copy", lcopy, *common, *off, "--with", other, "--with-copy", ocopy,
                                   "--json"], 240, env)
                if out.status == "ok":
                    doc = json.loads(out.stdout)
                    for x in (doc, *doc["interleaved"]):
                        got[x["variant"]] = _median_loop(x)
            secs[d] += time.perf_counter() - started
            if len(got) == 2:
                logs[d][j].append(100 * math.log(got["reorder"] / got["batch"]))
            else:
                failed += 1
    print(f"{order} rounds ({failed} failed), pinned to CPU {cpu}; load average {load_start} at the start, "
          f"{_loads()} at the end ({os.cpu_count()} CPUs)")
    res = {}
    for d in DESIGNS:
        pairs = [xs for xs in logs[d] if len(xs) >= 2]
        if len(pairs) < 2:
            print(f"{d}: too few measured pairs", file=sys.stderr)
            return 1
        meds = [statistics.median(xs) for xs in pairs]
        resid = [x - m for xs, m in zip(pairs, meds) for x in xs]
        n = sum(len(xs) for xs in pairs)
        res[d] = {"resid": resid, "round_sd": _robust_sd(resid), "pair_sd": _robust_sd(meds),
                  "effect": statistics.median(meds), "s_round": secs[d] / n}
        r = res[d]
        print(f"{d:>9}: per-round log ratio SD {r['round_sd']:.3f} pts around its pair (robust); per-pair "
              f"medians SD {r['pair_sd']:.3f} pts over {len(pairs)} pairs; reorder vs batch "
              f"{r['effect']:+.3f}%; {r['s_round'] * 1000:.1f} ms a round")
    ratio = res["turns"]["round_sd"] / res["separate"]["round_sd"]
    lo, hi = _bootstrap_ratio(res["turns"]["resid"], res["separate"]["resid"], seed)
    print(f"round-level SD turns / separate: {ratio:.3f} (95% bootstrap CI {lo:.3f} .. {hi:.3f}); "
          f"clear gain (CI below 1): {'yes' if hi < 1 else 'no'}")
    for d in DESIGNS:
        r = res[d]
        need = _machine_s(r["round_sd"], r["pair_sd"], k, rounds, r["s_round"], args.target)
        print(f"{d:>9}: about {need:.0f} s of rounds for +-{args.target:g}% with {k} layout pairs"
              if math.isfinite(need) else
              f"{d:>9}: +-{args.target:g}% is out of reach with {k} layout pairs (their layout spread alone is wider)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
