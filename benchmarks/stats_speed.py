"""How long do summaries and comparisons of 10^5 raw rows take?  (target: <= 5 s)

Usage: python benchmarks/stats_speed.py [--rows 100000] [--groups 40]

Builds a synthetic raw.csv frame (two variants x configurations, lognormal CV 5%,
10% slow trials) and times summarize() and compare() with the production defaults
(2000 bootstrap resamples, vectorised).  Prints the timings; exits 1 when over budget.
"""
from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import click
import numpy as np
import pandas as pd

from ringlab.lab.commands import options


def synthetic(rows: int, configs: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    per = rows // (2 * configs)
    variant = np.repeat(["batch", "reorder"], per * configs)
    size = np.tile(np.repeat(np.arange(configs), per), 2)
    val = 10.0 * rng.lognormal(0, 0.05, len(variant)) * np.where(variant == "reorder", 0.97, 1.0)
    val *= np.where(rng.random(len(val)) < 0.1, 2.0, 1.0)
    return pd.DataFrame({"run_id": "bench", "experiment": "ptr_ring", "host": "bench", "variant": variant,
                         "size": size, "trial": np.arange(len(val)) % per, "iteration": 0,
                         "order": rng.permutation(len(val)), "warmup": False, "status": "ok",
                         "ns_per_op": val})


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--rows", type=int, default=100_000)
@click.option("--groups", type=int, default=40, help="configurations (x2 variants)")
@click.option("--budget", type=float, default=5.0, help="seconds allowed for summarize+compare")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def run(a) -> int:
    from ringlab.stats import compare, summarize
    df = synthetic(a.rows, a.groups)
    t0 = time.perf_counter()
    s = summarize(df)
    t1 = time.perf_counter()
    c = compare(df, "batch")
    t2 = time.perf_counter()
    total = t2 - t0
    print(f"rows={len(df)} groups={len(s)} comparisons={len(c)}")
    print(f"summarize: {t1 - t0:.2f} s")
    print(f"compare:   {t2 - t1:.2f} s")
    print(f"total:     {total:.2f} s (budget {a.budget:g} s) -> {'ok' if total <= a.budget else 'OVER BUDGET'}")
    return 0 if total <= a.budget else 1


if __name__ == "__main__":
    sys.exit(main())
