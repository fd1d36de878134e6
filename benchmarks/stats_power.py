"""A/A false positives, power and CI width of the verdict, on the committed runs' own rounds.

Usage: ringlab bench power [--reps 200] [--seed 0] [--results DIR]
       (or python benchmarks/stats_power.py ...)

Reads every results/<study>/<host>/<run>/raw.csv, resamples each configuration's rounds with
the two arms swapped at random inside each round (the null is then exact), injects a 2% and a
5% effect, and prints, for 30/60/100 rounds, paired and unpaired side by side: the A/A
false-positive rate, the power, and the mean 95% CI width (and, for reference, those of the
ratio-of-medians verdict: a bootstrap CI of the ratio of medians).  Method: ringlab.stats.powersim.
Then prints whether each target is met (A/A <= 5%; power >= 80% for 5% at <= 60 rounds;
paired CI <= half that of the ratio-of-medians verdict, which treats the arms as independent
samples; the unpaired rank analysis of the same rounds is printed beside it); exits 1 when one
is not.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--reps", type=int, default=200, help="simulated runs per configuration and size (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--results", default=None, metavar="DIR",
                    help="folder holding the runs (default: the checkout's results/)")
    ap.add_argument("--metric", default="ns_per_op", help="metric column (default ns_per_op)")
    ap.add_argument("--boot", type=int, default=200,
                    help="bootstrap resamples for the previous verdict's CI, shown for reference (0: skip)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run(a) -> int:
    import numpy as np
    import pandas as pd

    from ringlab import paths
    from ringlab.stats.powersim import EFFECTS, power_table, targets, units_from_frame

    if a.reps < 20:
        print(f"ringlab bench power: error: --reps: {a.reps} not allowed; allowed: >= 20", file=sys.stderr)
        return 2
    root = Path(a.results) if a.results else paths.ROOT / "results"
    files = sorted(root.glob("*/*/*/raw.csv"))
    if not files:
        print(f"ringlab bench power: error: --results: no */*/*/raw.csv under {root}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    units = []
    for f in files:
        df = pd.read_csv(f)
        if a.metric not in df.columns:
            continue
        got = units_from_frame(df, a.metric, source=str(f.relative_to(root).parent))
        units += got
        if got:
            print(f"{f.relative_to(root).parent}: {len(got)} arm pair(s), "
                  f"{min(u['n_rounds'] for u in got)}-{max(u['n_rounds'] for u in got)} rounds each")
    if not units:
        print("ringlab bench power: no configuration with two arms measured in >= 8 common rounds")
        return 1
    tab = power_table(units, reps=a.reps, seed=a.seed, boot=max(0, a.boot))
    print()
    print(f"{len(units)} units (arm pairs x configurations), {a.reps} simulated runs each per size; "
          "95% CI, single comparison")
    head = ["rounds", "design", "A/A rate"] + [f"power {e:.0%}" for e in EFFECTS] + ["mean CI width"]
    print(" | ".join(f"{h:>13}" for h in head))
    for r in tab.itertuples(index=False):
        d = r._asdict()
        cells = [str(r.rounds), r.design, f"{r.aa_rate:.1%}"]
        cells += [f"{d[f'power_{e * 100:g}pct']:.1%}" for e in EFFECTS]
        cells.append(f"{r.ci_width_pct:.2f} pts")
        print(" | ".join(f"{c:>13}" for c in cells))
    print()
    print("mean CI width / paired mean CI width, per run (how much pairing by round narrows the CI):")
    for src, per in tab.attrs["width_ratio_by_source"].items():
        for other in ("unpaired", "bootstrap"):
            if other in next(iter(per.values())):
                print(f"  {src}, {other}: " + ", ".join(
                    f"{n} rounds {np.mean(w[other]) / np.mean(w['paired']):.2f}x" for n, w in sorted(per.items())))
    med = tab.groupby("rounds")["width_ratio_median"].first()
    print("  unpaired, median over units: " + ", ".join(f"{n} rounds {r:.2f}x" for n, r in med.items()))
    if "bootstrap" in set(tab["design"]):
        p = tab[tab["design"] == "paired"].set_index("rounds")["ci_width_pct"]
        b = tab[tab["design"] == "bootstrap"].set_index("rounds")["ci_width_pct"]
        print("  previous bootstrap CI / paired, all units: "
              + ", ".join(f"{n} rounds {b[n] / p[n]:.2f}x" for n in p.index))
    print()
    ok = True
    for name, met, fig in targets(tab):
        if met is None:
            print(f"INFO    {name}: {fig}")
            continue
        ok &= met
        print(f"{'MET    ' if met else 'NOT MET'} {name}: {fig}")
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
