"""Peak memory and wall time of compare, summarize and mail on a long run's 10^6-row raw.csv
(limits: 2 GB and 60 s each).

Usage: python benchmarks/compare_size.py [--rows 1000000] [--configs 1] [--keep DIR]

Writes a run folder whose raw.csv has the shape of a long run: two arms (batch, reorder) in one
configuration (``--configs 2``: two), measured round after round, so 10^6 rows are 500,000
rounds of each arm in one configuration (250,000 with two).  Every column `ringlab run` writes
for ptr_ring is there (the rows of tests/synth.py's ``make_raw`` repeated with fresh trial
numbers, orders and lognormal ns_per_op values, reorder 3% faster); no env.json.  Then it runs,
each in its own child process:

    ringlab compare RUN/raw.csv --baseline batch
    ringlab summarize RUN --baseline batch
    ringlab mail RUN --baseline batch

and prints each child's peak RSS (``os.wait4``'s rusage ru_maxrss of that child alone) and wall
time against the limits, pass or FAIL.  Exits 0 when every command exits 0 within both limits,
1 otherwise.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click

from ringlab.lab.commands import options

#: what each command may use on a 10^6-row run
LIMIT_RSS_BYTES = 2_000_000_000
LIMIT_WALL_S = 60.0
#: the arms and the configurations' sizes of the synthetic run
ARMS = ("batch", "reorder")
SIZES = (1024, 64)


def _write(path: Path, template, rows: int, rng) -> int:
    """Write ``rows`` rows: round after round of every row of ``template`` (one per arm and
    configuration), in chunks of whole rounds so the writer itself stays small."""
    import numpy as np
    per = len(template)
    n_rounds = -(-rows // per)
    chunk_rounds = max(1, 100_000 // per)
    written = 0
    with open(path, "w") as f:
        for start in range(0, n_rounds, chunk_rounds):
            stop = min(n_rounds, start + chunk_rounds)
            part = template.iloc[np.tile(np.arange(per), stop - start)].reset_index(drop=True)
            part = part.iloc[:rows - written].copy()
            if part.empty:
                break
            rnd = np.repeat(np.arange(start, stop), per)[:len(part)]
            part["trial"] = rnd
            part["round"] = rnd
            # the order of the arms within a round is shuffled, as the runner does
            part["order"] = rnd * per + rng.permuted(np.tile(np.arange(per), stop - start).reshape(-1, per),
                                                     axis=1).ravel()[:len(part)]
            effect = np.where(part["variant"].to_numpy() == "reorder", 0.97, 1.0)
            ns = 10.0 * effect * rng.lognormal(0, 0.05, len(part))
            part["ns_per_op"] = ns
            for c in ("elapsed_ns", "ns_producer", "ns_consumer", "task_clock"):
                part[c] = ns * 1e8
            part["wall_s"] = ns * 0.1
            part.to_csv(f, header=written == 0, index=False, lineterminator="\n")
            written += len(part)
    return path.stat().st_size


def _write_file(path: Path, rows: int, configs: int) -> int:
    import numpy as np

    from ringlab import paths
    if str(paths.ROOT) not in sys.path:
        sys.path.insert(0, str(paths.ROOT))
    from tests.synth import make_raw
    template = make_raw(variants=ARMS, params={"mode": [1], "size": list(SIZES[:configs])}, trials=1, warmup=0,
                        rounds_col=True, seed=0)
    return _write(path, template, rows, np.random.default_rng(0))


def _measure(argv: list[str], log: Path) -> tuple[int, int, float]:
    """Run ``argv`` as a child with its output in ``log``: (exit code, peak RSS in bytes, wall s).
    The RSS is that child's alone: ``os.wait4`` returns the rusage of the one child it reaped."""
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here; Popen must not wait again
    return proc.returncode, usage.ru_maxrss * 1024, wall  # Linux: ru_maxrss in kilobytes


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--rows", type=int, default=1_000_000, help="trial rows in the raw.csv (default 10^6)")
@click.option("--configs", type=click.IntRange(1, 2), default=1,
              help="configurations the rounds are spread over (1 or 2, default 1)")
@click.option("--keep", type=Path, default=None, metavar="DIR",
              help="write the run folder as DIR and leave it there (default: a temporary folder)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def run(a) -> int:
    if a.rows < 1:
        print(f"compare_size: error: parameter '--rows': {a.rows}; allowed: an integer >= 1", file=sys.stderr)
        return 2
    ok = True
    with tempfile.TemporaryDirectory(prefix="ringlab-size-") as tmp:
        folder = a.keep or Path(tmp) / "run"
        folder.mkdir(parents=True, exist_ok=True)
        raw = folder / "raw.csv"
        t0 = time.perf_counter()
        size = _write_file(raw, a.rows, a.configs)
        rounds = -(-a.rows // (len(ARMS) * a.configs))
        print(f"raw.csv: {a.rows} rows = {len(ARMS)} arms x {a.configs} configuration(s) x {rounds} rounds, "
              f"{size / 2**20:.0f} MiB (written in {time.perf_counter() - t0:.1f} s)")
        print(f"limits per command: peak RSS <= {LIMIT_RSS_BYTES / 1e9:g} GB, wall <= {LIMIT_WALL_S:g} s")
        ringlab = [sys.executable, "-m", "ringlab"]
        for name, argv in (("compare", ringlab + ["compare", str(raw), "--baseline", "batch"]),
                           ("summarize", ringlab + ["summarize", str(folder), "--baseline", "batch"]),
                           ("mail", ringlab + ["mail", str(folder), "--baseline", "batch"])):
            log = Path(tmp) / f"{name}.log"
            rc, rss, wall = _measure(argv, log)
            passed = rc == 0 and rss <= LIMIT_RSS_BYTES and wall <= LIMIT_WALL_S
            ok &= passed
            print(f"ringlab {name:<9}  exit {rc}  peak RSS {rss / 1e9:5.2f} GB  wall {wall:5.1f} s  -> "
                  f"{'pass' if passed else 'FAIL'}")
            if rc != 0:
                print(log.read_text(errors="replace").strip()[-2000:])
    print("all pass" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
