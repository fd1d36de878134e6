"""Peak memory and wall time of `ringlab compare` on a 10^6-row raw.csv (targets: 4 GiB, 60 s).

Usage: python benchmarks/compare_size.py [--rows 1000000] [--keep DIR]

Writes a synthetic raw.csv with every column `ringlab run` writes for ptr_ring (the rows of
tests/synth.py's ``make_raw`` repeated, with fresh trial numbers, orders and lognormal
ns_per_op values) in a temporary folder, runs `ringlab compare RAW.csv --baseline batch` on it
in a child process, and prints the child's peak RSS (getrusage RUSAGE_CHILDREN ru_maxrss) and
wall time against the targets.  Exits 0 when both are met, 1 otherwise.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click

from ringlab.lab.commands import options

#: what `ringlab compare` of 10^6 rows may use
TARGET_RSS_BYTES = 4 << 30
TARGET_WALL_S = 60.0


def _write(path: Path, template, rows: int, n_rounds: int, rng) -> int:
    """Write in chunks of whole rounds so the writer itself stays small."""
    import numpy as np
    per = len(template)
    order = rng.permutation(rows)
    chunk_rounds = max(1, 50_000 // per)
    written = 0
    with open(path, "w") as f:
        for start in range(0, n_rounds, chunk_rounds):
            stop = min(n_rounds, start + chunk_rounds)
            idx = np.tile(np.arange(per), stop - start)
            part = template.iloc[idx].reset_index(drop=True)
            part = part.iloc[:max(0, min(len(part), rows - written))].copy()
            if part.empty:
                break
            rnd = np.repeat(np.arange(start, stop), per)[:len(part)]
            part["trial"] = rnd
            part["round"] = rnd
            part["order"] = order[written:written + len(part)]
            effect = np.where(part["variant"].to_numpy() == "reorder", 0.97, 1.0)
            ns = 10.0 * effect * rng.lognormal(0, 0.05, len(part))
            part["ns_per_op"] = ns
            for c in ("elapsed_ns", "ns_producer", "ns_consumer", "task_clock"):
                part[c] = ns * 1e8
            part["wall_s"] = ns * 0.1
            part.to_csv(f, header=written == 0, index=False, lineterminator="\n")
            written += len(part)
    return path.stat().st_size


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--rows", type=int, default=1_000_000, help="trial rows in the raw.csv (default 10^6)")
@click.option("--keep", type=Path, default=None, metavar="DIR",
              help="write the raw.csv into DIR and leave it there (default: a temporary folder)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def run(a) -> int:
    if a.rows < 1:
        print(f"compare_size: error: parameter '--rows': {a.rows}; allowed: an integer >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ringlab-size-") as tmp:
        folder = a.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        raw = folder / "raw.csv"
        t0 = time.perf_counter()
        size = _write_file(raw, a.rows)
        print(f"raw.csv: {a.rows} rows, {size / 2**20:.0f} MiB (written in {time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(raw), "--baseline", "batch"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024   # Linux: kilobytes
    ok_rss, ok_wall = rss <= TARGET_RSS_BYTES, wall <= TARGET_WALL_S
    print(f"ringlab compare: exit {proc.returncode}, {len(proc.stdout.splitlines())} lines of output")
    if proc.returncode != 0:
        print(proc.stderr.strip()[-2000:])
    print(f"peak RSS: {rss / 2**30:.2f} GiB (target <= {TARGET_RSS_BYTES / 2**30:g} GiB) -> "
          f"{'ok' if ok_rss else 'OVER'}")
    print(f"wall:     {wall:.1f} s (target <= {TARGET_WALL_S:g} s) -> {'ok' if ok_wall else 'OVER'}")
    return 0 if proc.returncode == 0 and ok_rss and ok_wall else 1


def _write_file(path: Path, rows: int) -> int:
    import numpy as np

    from ringlab import paths
    if str(paths.ROOT) not in sys.path:
        sys.path.insert(0, str(paths.ROOT))
    from tests.synth import make_raw
    template = make_raw(params={"mode": [0, 1], "size": [64, 256, 1024, 4096]}, trials=1, warmup=0,
                        rounds_col=True, seed=0)
    per = len(template)
    return _write(path, template, rows, -(-rows // per), np.random.default_rng(0))


if __name__ == "__main__":
    sys.exit(main())
