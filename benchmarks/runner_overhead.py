"""The runner's own cost against its performance targets.  Prints figures; asserts nothing.

1. Per-trial fixed overhead: a ptr_ring run with ``count`` tiny (-N 2), so the measured
   region is ~nothing; the gap between consecutive trials' end timestamps in raw.csv is
   the whole per-trial cycle (spawn, pinning, counter setup, parse, steal reading, CSV
   write + fsync).  Target <= 20 ms.  Then the same for a layouts run (``--layouts`` K builds
   of batch and of reorder, a binary per layout; its builds are made on the first run and
   reused after): target <= 3 ms a trial outside the timed region.
2. Counter perturbation: the same binary and configuration with and without
   ``--counters``, run interleaved (ABBA) in one loop, median ns_per_op compared.
   Target <= 1 %.  On a VM without hardware counters only software events open, which
   says little about bare metal; the script prints what opened.

    .venv/bin/python benchmarks/runner_overhead.py [--trials 40] [--count 20000000]

The overhead is also split into the trial process's own wall time (fork/exec, the
binary's setup and teardown) and the runner's share (the rest of the cycle).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import click

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab import paths  # noqa: E402
from ringlab import run as runner  # noqa: E402
from ringlab.experiments.base import parse_harness_json  # noqa: E402
from ringlab.experiments.ptr_ring import PtrRing  # noqa: E402
from ringlab.run import launcher  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402


def _loads() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _ts(s: str) -> float:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


#: the layouts run's seed: its builds are made once and found again by later runs
LAYOUT_SEED = 29


def fixed_overhead(trials: int, layouts: int = 1) -> dict:
    """The per-trial cycle of a one-binary run (``layouts`` 1) or of a layouts run (batch vs
    reorder, ``layouts`` builds each, the layout builds made first when missing)."""
    params = {"profile": "smoke", "variants": "batch", "modes": "0", "count": 2, "trials": trials,
              "warmup": 0, "governor": "false", "layouts": 1, "quiet": "off"}
    if layouts > 1:
        params.update(variants="batch,reorder", layouts=layouts, seed=LAYOUT_SEED,
                      trials=max(2, trials // 2))
    with tempfile.TemporaryDirectory() as d:
        res = runner.run_experiment("ptr_ring", params, Path(d) / "run", build=layouts > 1, progress=False,
                                    log=lambda m: None)
        df = pd.read_csv(res.raw_csv).sort_values("order")
    ts = [_ts(t) for t in df["timestamp"]]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    region = df["elapsed_ns"].median() / 1e9
    return {"trials": len(df), "median_cycle_ms": 1e3 * statistics.median(gaps),
            "median_process_wall_ms": 1e3 * df["wall_s"].median(),
            "median_region_ms": 1e3 * region,
            "fixed_overhead_ms": 1e3 * (statistics.median(gaps) - region)}


def counter_cost(trials: int, count: int) -> dict:
    exp = PtrRing()
    values = PtrRing.resolve({"variants": "batch", "modes": "0", "count": count, "cpus": "auto", "layouts": 1})
    ctx = runner.RunContext("ptr_ring", values, "bench", Path("."), log=lambda m: None)
    spec = exp.plan(values, ctx)[0]
    with_c = exp.command(spec, ctx)
    without = with_c[:-1] + ["--counters", "none", "--json"]
    res = {"on": [], "off": []}
    opened = {}
    for i in range(trials):
        # ABBA: on, off, off, on, ... cancels linear drift
        order = [("on", with_c), ("off", without)] if i % 2 == 0 else [("off", without), ("on", with_c)]
        for name, argv in order:
            out = runner.run_process(argv, 120)
            if out.status != "ok":
                raise SystemExit(f"trial failed ({out.status}): {out.stderr[-300:]}")
            row = parse_harness_json(out.stdout)[0]
            res[name].append(row["ns_per_op"])
            if name == "on" and not opened:
                opened = {k: row[k] == row[k] for k in ("cycles", "instructions", "task_clock", "context_switches")}
    on, off = statistics.median(res["on"]), statistics.median(res["off"])
    return {"trials_each": trials, "count": count, "median_ns_per_op_with": on, "median_ns_per_op_without": off,
            "change_pct": 100.0 * (on - off) / off, "events_opened": opened}


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--trials", type=int, default=40)
@click.option("--count", type=int, default=20_000_000)
@click.option("--layouts", type=int, default=32,
              help="also measure a run of batch vs reorder with this many layouts each (1: skip)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def run(args) -> int:
    if not (paths.bin_dir() / "ptr_ring_test-batch").exists():
        print(f"{paths.bin_dir()}/ptr_ring_test-batch missing: run `ringlab build` first", file=sys.stderr)
        return 1
    fo = fixed_overhead(args.trials)
    print(f"per-trial fixed overhead: {fo['fixed_overhead_ms']:.2f} ms (target <= 20 ms) "
          f"[runner share {fo['median_cycle_ms'] - fo['median_process_wall_ms']:.2f} ms, "
          f"trial cycle {fo['median_cycle_ms']:.2f} ms, process wall {fo['median_process_wall_ms']:.2f} ms, "
          f"measured region {fo['median_region_ms']:.4f} ms, {fo['trials']} trials]")
    if args.layouts > 1:
        lo = fixed_overhead(args.trials, args.layouts)
        print(f"per-trial overhead of a layouts run: {lo['fixed_overhead_ms']:.2f} ms (target <= 3 ms) "
              f"[{args.layouts} layouts of batch and reorder; runner share "
              f"{lo['median_cycle_ms'] - lo['median_process_wall_ms']:.2f} ms, trial cycle {lo['median_cycle_ms']:.2f} ms, "
              f"process wall {lo['median_process_wall_ms']:.2f} ms, {lo['trials']} trials]")
    print(f"trial launcher: {'used' if (paths.bin_dir() / launcher.NAME).exists() else 'not built, trials spawned by the runner'}; "
          f"load average {_loads()} ({os.cpu_count()} CPUs): figures taken beside other work are larger")
    cc = counter_cost(max(4, args.trials // 4), args.count)
    print(f"counters on vs off: {cc['change_pct']:+.2f} % ns_per_op (target within 1 %) "
          f"[{cc['median_ns_per_op_with']:.3f} vs {cc['median_ns_per_op_without']:.3f} ns/op, "
          f"{cc['trials_each']} interleaved trials each, -N {cc['count']}; events opened: "
          f"{json.dumps(cc['events_opened'])}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
