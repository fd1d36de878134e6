"""What the builds of a layout design cost, and what each way of making them cheaper saves.

A run with ``layouts`` K needs K code layouts of each arm (ringlab.build.layouts).  Measured here,
for one arm (ptr_ring_test-batch) and K layouts drawn from a fresh seed, each in a fresh folder:

* ``separate``: K binaries, one full build each (every source compiled K times, K links);
* ``copies``: the same K layouts as layout copies (ringlab.build.layouts.LayoutCopies: at most
  32 a binary; the measured object compiled once per function alignment, linked once per layout);
* ``cache hit``: the K separate builds asked for again in the same folder: what a cache across
  runs gives when a run asks for binaries that exist.  A run draws a fresh seed (``-p seed``
  repeats one), and a drawn layout recurs with probability 1 / (4096 pads x 7 alignments) per
  layout, so a cache across runs hits only on reruns of a seed;
* ``build beside measuring``: a mode-0 trial of the standalone binary (2M ops, a fresh process
  each) alone, and while the separate builds run on the same machine: what overlapping the builds
  with the measurement does to the numbers;
* ``--copy start``: a trial's process start (``-N 1``) of a binary of one layout and of a binary of
  K copies (up to 32) (a larger binary to map).

Printed: seconds and ratios, with the load average before and after: the development machine is
shared with other work, and a loaded machine makes every build slower (the ratios hold better than
the seconds).

    .venv/bin/python benchmarks/layout_builds.py [--layouts 16] [--trials 10]
"""
from __future__ import annotations

import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.build import driver  # noqa: E402
from ringlab.build import layouts as L  # noqa: E402
from ringlab.experiments.base import parse_harness_json  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

ARM = "ptr_ring_test-batch"


@click.command(cls=options.Command, help=__doc__.strip().splitlines()[0])
@click.option("--layouts", type=int, default=16, help=f"layouts of the arm (2..{L.MAX_LAYOUTS})")
@click.option("--trials", type=int, default=10, help="mode-0 trials alone and beside the builds (>= 3)")
@click.option("--count", type=int, default=2_000_000, help="ops per mode-0 trial")
@click.option("--seed", type=int, default=0, help="layout seed (0: drawn)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def _build(layouts, out: Path) -> float:
    t0 = time.perf_counter()
    driver.build_all(only=[ARM], out_dir=out, layouts={ARM: layouts})
    return time.perf_counter() - t0


def _trial(exe: str, count: int, extra=()) -> float:
    proc = subprocess.run([exe, *extra, "-m", "0", "-s", "1000", "-N", str(count), "--counters", "none",
                           "--json"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"{exe}: exit {proc.returncode}: {proc.stderr.strip()[:200]}")
    return float(parse_harness_json(proc.stdout)[0]["ns_per_op"])


def _start_s(argv: list[str], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([*argv, "-m", "0", "-N", "1", "--counters", "none"], capture_output=True, timeout=60,
                       check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _load() -> str:
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "load average n/a"


def run(args) -> int:
    k = int(args.layouts)
    if not 2 <= k <= L.MAX_LAYOUTS:
        print(f"--layouts {k}: allowed: 2..{L.MAX_LAYOUTS}", file=sys.stderr)
        return 2
    if args.trials < 3:
        print(f"--trials {args.trials}: allowed: 3 or more", file=sys.stderr)
        return 2
    if shutil.which(driver.compiler()) is None:
        print(f"no C compiler ({driver.compiler()}) on PATH", file=sys.stderr)
        return 2
    seed = args.seed or secrets.randbelow(2 ** 31) + 1
    lays = L.arm_layouts(seed, "batch", k)
    groups = L.copy_groups(lays)
    aligns = len({lay.align for lay in lays})
    print(f"layout builds of {ARM}: {k} layouts (seed {seed}, {aligns} distinct function alignments), "
          f"{os.cpu_count()} CPUs; {_load()}")
    print("  (the machine may be shared with other work: seconds move with its load, ratios less)")
    with tempfile.TemporaryDirectory(prefix="ringlab-bench-builds-") as tmp:
        tmp = Path(tmp)
        sep_s = _build(lays, tmp / "separate")
        hit_s = _build(lays, tmp / "separate")
        cop_s = _build(groups, tmp / "copies")
        print(f"  separate builds:   {sep_s:7.1f} s  ({sep_s / k:.2f} s a layout)")
        print(f"  layout copies:     {cop_s:7.1f} s  ({cop_s / k:.2f} s a layout, {len(groups)} binaries); "
              f"separate / copies = {sep_s / cop_s:.1f}x")
        print(f"  cache hit:         {hit_s:7.2f} s  (only when a run's seed repeats; "
              f"p(a drawn layout recurs) = 1/{L.PAD_RANGE * len(L.ALIGNS)})")

        exe = str(tmp / "separate" / lays[0].binary_name(ARM))
        alone = [_trial(exe, args.count) for _ in range(args.trials)]
        done = threading.Event()

        def rebuild():
            try:
                while not done.is_set():
                    shutil.rmtree(tmp / "beside", ignore_errors=True)
                    _build(lays[: min(k, 8)], tmp / "beside")
            except Exception as e:   # the measurement still ends; say why the builds stopped
                print(f"  (the builds beside the trials stopped: {e})")
        th = threading.Thread(target=rebuild, daemon=True)
        th.start()
        time.sleep(1.0)
        beside = [_trial(exe, args.count) for _ in range(args.trials)]
        done.set()
        th.join()

        def cv(xs):
            return statistics.pstdev(xs) / statistics.mean(xs) * 100
        ma, mb = statistics.median(alone), statistics.median(beside)
        print(f"  mode-0 trial alone:          median {ma:.3f} ns/op, CV {cv(alone):.1f}% ({args.trials} trials)")
        print(f"  mode-0 trial beside builds:  median {mb:.3f} ns/op, CV {cv(beside):.1f}%; "
              f"beside / alone = {mb / ma:.3f}")

        big = groups[0]
        copies_exe = str(tmp / "copies" / big.binary_name(ARM))
        one = _start_s([exe], 20)
        many = _start_s([copies_exe, "--copy", str(len(big.layouts) - 1)], 20)
        print(f"  process start, 1 layout:     {one * 1000:.2f} ms; {len(big.layouts)} copies: {many * 1000:.2f} ms "
              f"(ratio {many / one:.2f})")
    print(f"  {_load()}")
    return 0


def main(argv=None) -> int:
    return options.run_alone(command, argv)


if __name__ == "__main__":
    sys.exit(main())
