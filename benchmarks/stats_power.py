"""A/A false positives, power and CI width of the verdict, on the committed runs' own rounds.

Usage: ringlab bench power [--reps 200] [--seed 0] [--results DIR]
       (or python benchmarks/stats_power.py ...)

Reads every results/<study>/<host>/<run>/raw.csv, resamples each configuration's rounds with
the two arms swapped at random inside each round (the null is then exact), injects a 2% and a
5% effect, and prints, for 30/60/100 rounds, paired and unpaired side by side: the A/A
false-positive rate, the power, and the mean 95% CI width (and, for reference, those of the
ratio-of-medians verdict: a bootstrap CI of the ratio of medians).  Method: ringlab.simulate.powersim.
Then prints whether each target is met (A/A <= 5%; power >= 80% for 5% at <= 60 rounds) and,
for reference, how much narrower the paired CI is than the ratio-of-medians bootstrap and the
unpaired rank analysis of the same rounds; exits 1 when a target is not met.

The A/A above swaps the two arms at random inside each resampled round of one build pair: its
null is exactly true for that pair, so it cannot fail, whatever the layout does.  A second
section therefore measures A/A across independent layouts (ringlab.simulate.layoutsim): runs of
the machine simulated with ringlab.simulate.noise at this host's calibrated sigma_L (`ringlab
calibrate`; default 2 points without one) and states, analysed with ringlab.stats.layouts (K
layout pairs x R rounds, t interval across the pairs), beside the one-build design of the same
machine time and the K layouts pooled into one signed-rank test.  It prints the K and R that
80% power needs for a 5% and a 2% effect (ringlab.stats.plan.layout_plan) and what they cost in
machine time (K x R rounds x seconds per round, from the calibration run or the committed
ptr_ring runs' trials), and checks that the layout design's A/A is consistent with <= 5%
(one-sided binomial test at 1%).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import click

from ringlab.lab.commands import options


#: effect (percent) -> the most seconds of trials that 80% power for it may cost on this machine
MACHINE_TIME_TARGETS_S = {5.0: 60.0, 2.0: 180.0}


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--reps", type=int, default=200, help="simulated runs per configuration and size (default 200)")
@click.option("--seed", type=int, default=0, help="random seed (default 0)")
@click.option("--results", default=None, metavar="DIR",
              help="folder holding the runs (default: the checkout's results/)")
@click.option("--metric", default="ns_per_op", help="metric column (default ns_per_op)")
@click.option("--layout-reps", type=int, default=200,
              help="simulated runs of the layout design per check (default 200; 0: skip the section)")
@click.option("--sigma-layout", type=float, default=None, metavar="PTS",
              help="layout spread in log points (default: this host's calibration, else 2)")
@click.option("--boot", type=int, default=200,
              help="bootstrap resamples for the previous verdict's CI, shown for reference (0: skip)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def run(a) -> int:
    import numpy as np
    import pandas as pd

    from ringlab import paths
    from ringlab.simulate.powersim import EFFECTS, power_table, targets, units_from_frame

    if a.reps < 20:
        print(f"ringlab bench power: error: --reps: {a.reps} not allowed; allowed: >= 20", file=sys.stderr)
        return 2
    if a.layout_reps < 0 or 0 < a.layout_reps < 20:
        print(f"ringlab bench power: error: --layout-reps: {a.layout_reps} not allowed; allowed: 0 or >= 20",
              file=sys.stderr)
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
    _print_width_ratios(tab)
    print()
    ok = True
    for name, met, fig in targets(tab):
        if met is None:
            print(f"INFO    {name}: {fig}")
            continue
        ok &= met
        print(f"{'MET    ' if met else 'NOT MET'} {name}: {fig}")
    print("INFO    the A/A above swaps the arms inside the rounds of one build pair, so it cannot fail: "
          "it does not see the layout spread")
    if a.layout_reps:
        print()
        ok &= layout_section(a, files)
    print(f"\n({time.perf_counter() - t0:.1f} s)")
    return 0 if ok else 1


def _print_width_ratios(tab) -> None:
    import numpy as np
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


def _seconds_per_round(cal, files) -> tuple[float, str]:
    import numpy as np
    import pandas as pd

    from ringlab.simulate.layoutsim import seconds_per_round_of
    if cal and isinstance(cal.get("seconds_per_round"), (int, float)) and cal["seconds_per_round"] > 0:
        return float(cal["seconds_per_round"]), "the calibration run"
    got = []
    for f in files:
        df = pd.read_csv(f)
        if "experiment" in df.columns and set(df["experiment"].astype(str)) == {"ptr_ring"}:
            got.append(seconds_per_round_of(df))
    got = [g for g in got if np.isfinite(g)]
    return (float(np.median(got)), f"the committed ptr_ring runs' trials ({len(got)} runs)") if got else \
        (float("nan"), "no run with wall_s")


def layout_section(a, files) -> bool:
    """The layout design's A/A and power beside the one-build design's; True when its A/A passes."""
    from ringlab.simulate import layoutsim
    from ringlab.stats.plan import layout_plan
    from ringlab.rundir.calibration import find_calibration
    from ringlab.system.envinfo import host_id

    cal = find_calibration(host_id())
    sigma = a.sigma_layout / 100 if a.sigma_layout is not None else \
        float(cal["sigma_layout"]) if cal else 0.02
    s = float(cal["round_sd"]) if cal else 0.03
    st = (cal or {}).get("states") or {}
    kw = {}
    if st.get("n_states") == 2 and len(st.get("mean_duration") or []) == 2 and len(st.get("levels") or []) == 2:
        kw = {"durations": tuple(st["mean_duration"]), "state_gap": st["levels"][1] - st["levels"][0]}
    src = f"calibration {cal['path']}" if cal else "no calibration for this host (`ringlab calibrate`): defaults"
    spr, spr_src = _seconds_per_round(cal, files)
    print(f"layout design ({src}): sigma_L {sigma * 100:.2f} pts, round noise {s * 100:.2f} pts"
          + (f", states {kw['durations'][0]:.0f}/{kw['durations'][1]:.0f} trials" if kw else ""))
    plan = layout_plan(5.0, sigma, s)
    K, R = plan.layouts, plan.rounds_per_layout
    if not isinstance(K, int):
        print("  no layout count up to 1000 reaches 80% power for 5%; section skipped")
        print("NOT MET machine time for 80% power at 5% <= 60 s: no design reaches 80% power")
        return False
    rates = layoutsim.layout_rates(K, R, sigma, reps=a.layout_reps, seed=a.seed, **kw)
    print(f"  {a.layout_reps} simulated runs of K={K} layout pairs x R={R} rounds, new layouts each run; 95% CI")
    print(" | ".join(f"{h:>13}" for h in ["design", "A/A rate", "power 2%", "power 5%"]))
    for d, v in rates.items():
        print(" | ".join(f"{c:>13}" for c in [d, *(f"{v['rate'][e]:.1%}" for e in (0.0, 0.02, 0.05))]))
    print(f"  seconds per round (two trials): {spr:.3g} s, from {spr_src}")
    times = {}
    for e in (5.0, 2.0):
        p = layout_plan(e, sigma, s)
        t = times[e] = layoutsim.machine_time_s(p.layouts, p.rounds_per_layout, spr)
        print(f"  80% power for a {e:g}% effect: K={p.layouts} layouts x R={p.rounds_per_layout} rounds "
              f"= {p.trials} rounds, {t:.0f} s ({t / 60:.1f} min) of trials (builds not counted)")
    for e, budget in MACHINE_TIME_TARGETS_S.items():
        t = times[e]
        print(f"{'MET    ' if t <= budget else 'NOT MET'} machine time for 80% power at {e:g}% <= {budget:.0f} s: "
              f"{t:.0f} s")
    met, pv = layoutsim.aa_check(rates["layouts"]["calls"][0.0], a.layout_reps)
    print(f"{'MET    ' if met else 'NOT MET'} layout design A/A false positives consistent with <= 5% "
          f"(binomial test): {rates['layouts']['rate'][0.0]:.1%}, p = {pv:.3g}")
    one, pone = layoutsim.aa_check(rates["one-build"]["calls"][0.0], a.layout_reps)
    print(f"INFO    one-build design, A/A across independent builds: {rates['one-build']['rate'][0.0]:.1%} "
          f"({'consistent with' if one else 'above'} 5%, p = {pone:.3g})")
    return met and all(times[e] <= b for e, b in MACHINE_TIME_TARGETS_S.items())


if __name__ == "__main__":
    sys.exit(main())
