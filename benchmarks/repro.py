"""Does the next run land where this run said it would?  The same A/B run several times.

Prints figures and hit rates; asserts nothing.  In one invocation:

1. The arms of notebook 14 on the newest kernel header (``ringlab.studies.verdict_check.plan``:
   ``base`` and its ``d2`` / ``d8`` copies, whose flush-spin N is sized by callgrind to about
   +2.5% / +7.7% instructions per operation), mode 0, ring of 1000, ``--layouts`` layouts per
   arm and 20 rounds a layout pair (profile full's design, fixed: no staged stopping).
2. ``--runs`` runs of it (``ringlab.studies.sessions``: each a run folder, ``--gap`` seconds
   apart), each compared against base as every report does.
3. For each arm and each run after the first: whether the previous run's 95% CI held this run's
   estimate, and whether its next-run interval did (``ringlab.stats.replication.next_run`` with
   this host's drift.json, ``ringlab calibrate --between``; without one the two runs' noise only,
   and it says so).  The hit rates of both, side by side.
4. The runs combined by random effects: estimate, tau, I², Cochran's Q and the interval the next
   run is expected in.

    ringlab bench repro [--runs 5] [--gap 0] [--layouts 8] [--out DIR]

Exit status 0 when every next-run interval held the following run's estimate, else 1.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.rundir.calibration import host_drifts  # noqa: E402
from ringlab.studies import sessions  # noqa: E402
from ringlab.studies import verdict_check as vc  # noqa: E402
from ringlab.system.envinfo import host_id  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

ARMS = ["d2", "d8"]
ROUNDS_PER_LAYOUT = 20


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--runs", type=int, default=5, help="runs of the same A/B (default 5)")
@click.option("--gap", type=float, default=0.0, help="seconds between runs (default 0)")
@click.option("--layouts", type=int, default=8, help="layouts per arm (default 8, profile full's)")
@click.option("--base", default="", help="header source (default: the newest kernel header tree)")
@click.option("--out", default="", help="folder of the runs (default: a temporary one)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def params(check: vc.CheckPlan, layouts: int) -> dict:
    return {"variants": check.variants(ARMS), "kernel_headers": check.kernel_headers(ARMS), "modes": "0",
            "sizes": "1000", "layouts": str(layouts), "trials": str(layouts * ROUNDS_PER_LAYOUT),
            "profile": "full", "target_ci": "0", "budget": "0", "icount": "false"}


def run(args) -> int:
    t0 = time.monotonic()
    check = vc.plan(args.base)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ringlab-repro-"))
    print(f"repro: {args.runs} runs of base vs {', '.join(ARMS)} on {check.base} (mode 0, size 1000, "
          f"{args.layouts} layouts x {ROUNDS_PER_LAYOUT} rounds), host {host_id()}")
    for _, r in check.expected().iterrows():
        if r["arm"] in ARMS:
            print(f"  {r['arm']}: {r['patch']}, expected +{r['expected extra %']:.2f}% instructions/op")
    recs = sessions.run_sessions("ptr_ring", params(check, args.layouts), args.runs, out, args.gap,
                                 log=lambda s: print("  " + s) if s.startswith("sessions:") else None)
    done = [r["dir"] for r in recs if r["status"] == "complete"]
    rows = sessions.run_rows(done, vc.BASELINE)
    drift = host_drifts(host_id()).get("0")
    print(f"drift (mode 0): {drift.source + f', tau {drift.tau * 100:.2f} points, rel {drift.rel:.2f}' if drift else 'none measured on this host: the next-run interval holds the two runs own noise only'}")
    print()
    print(f"{'arm':<5} {'run':<10} {'%change':>8} {'95% CI':>18}   {'next run (95%)':>18}  held by the next run: CI / PI")
    hits = sessions.hit_rates(rows, drift)
    for _, r in rows.iterrows():
        h = hits[(hits["candidate"] == r["candidate"]) & (hits["run"] == r["run"])]
        nxt = "" if h.empty else f"[{h['next_low_pct'].iloc[0]:+.2f}, {h['next_high_pct'].iloc[0]:+.2f}]"
        held = "" if h.empty else f"{'yes' if h['ci_held'].iloc[0] else 'no'} / {'yes' if h['pi_held'].iloc[0] else 'no'}"
        print(f"{r['candidate']:<5} {r['run']:<10} {r['delta_pct']:>+7.2f}% "
              f"[{r['ci_low_pct']:+.2f}, {r['ci_high_pct']:+.2f}]".ljust(38) + f"   {nxt:>18}  {held}")
    print()
    ok = True
    for cand, h in hits.groupby("candidate", sort=False):
        n = len(h)
        print(f"{cand}: the 95% CI held the next run's estimate in {int(h['ci_held'].sum())} of {n} transitions; "
              f"the next-run interval in {int(h['pi_held'].sum())} of {n}")
        ok = ok and bool(h["pi_held"].all())
    comb = sessions.combined(rows)
    for _, c in comb.iterrows():
        print(f"{c['candidate']} combined over {c['k']} runs (random effects): {c['estimate_pct']:+.2f}% "
              f"[{c['ci_low_pct']:+.2f}, {c['ci_high_pct']:+.2f}], tau {c['tau_pct']:.2f} points, I² {c['i2']:.0%}, "
              f"Q p={c['q_p']:.2g}; next run expected in [{c['pi_low_pct']:+.2f}, {c['pi_high_pct']:+.2f}]")
    for line in sessions.moved_text(comb, rows):
        print(line)
    print(f"repro: {time.monotonic() - t0:.0f} s, runs in {out}")
    return 0 if ok else 1


def main(argv=None) -> int:
    return options.run_alone(command, argv)


if __name__ == "__main__":
    sys.exit(main())
