"""Does the next run land where this run said it would?  The same A/B run several times.

Prints figures and hit rates; asserts nothing.  In one invocation:

1. The arms of notebook 14 on the newest kernel header (``ringlab.studies.verdict_check.plan``:
   ``base`` and its ``d2`` / ``d8`` copies, whose flush-spin N is sized by callgrind to about
   +2.5% / +7.7% instructions per operation; ``--arms``), modes ``--modes``, ring of 1000,
   ``--layouts`` layouts per arm and 20 rounds a layout pair (profile full's design, fixed: no
   staged stopping).
2. ``--runs`` runs of it (``ringlab.studies.sessions``: each a run folder ``session-N``, ``--gap``
   seconds apart), each compared against base as every report does.  ``--from DIR`` runs nothing:
   it reads the ``session-N`` run folders of an existing series in DIR.
3. For each arm and mode and each run but the last: whether the run's 95% CI held the next run's
   estimate, and whether its next-run interval did.  Each run's interval is the one its own
   report prints (``ringlab.studies.sessions.hit_rates``): from the runs of the series up to it
   from its second run on (never a later one; their Q-profile bound before ``MIN_RUNS`` runs),
   else the host's A/A upper bound
   (``ringlab calibrate --between``), else none (the interval of a rerun if nothing drifted); the
   basis is printed on each line.  Every transition held is what is wanted.
4. Per arm and mode, the random-effects combination of all runs but the last (HKSJ CI and its
   prediction interval) and whether each holds the last run's estimate.

Every effect, CI and interval prints in the one sign of every ringlab report, stated in the
output's header: %change + = better (less time per op than base), past ±50% a factor (×2.1 slower).

    ringlab bench repro [--runs 5] [--gap 0] [--layouts 8] [--modes 0,1] [--arms d2,d8] [--out DIR]
    ringlab bench repro --from DIR [--modes 0,1] [--arms d2,d8]

Exit status 0 when every next-run interval held the following run's estimate, else 1.
"""
from __future__ import annotations

import math
import re
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.rundir import RunOutput  # noqa: E402
from ringlab.rundir.calibration import host_between  # noqa: E402
from ringlab.stats.replication import EARLY_RUNS_LEVEL, MIN_RUNS, combine, pct  # noqa: E402
from ringlab.stats.summary import StatsError  # noqa: E402
from ringlab.studies import sessions  # noqa: E402
from ringlab.studies import verdict_check as vc  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

ROUNDS_PER_LAYOUT = 20


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--runs", type=int, default=5, help="runs of the same A/B (default 5)")
@click.option("--gap", type=float, default=0.0, help="seconds between runs (default 0)")
@click.option("--layouts", type=int, default=8, help="layouts per arm (default 8, profile full's)")
@click.option("--modes", default="0,1", help="modes, comma-separated (default 0,1)")
@click.option("--arms", default="d2,d8", help="arms compared against base, comma-separated (default d2,d8)")
@click.option("--base", default="", help="header source (default: the newest kernel header tree)")
@click.option("--out", default="", help="folder of the runs (default: a temporary one)")
@click.option("--from", "from_dir", default="", help="analyse the session-N run folders in this folder; run nothing")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def _list(text: str, what: str) -> list[str]:
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if not items:
        raise click.BadParameter(f"{text!r}; allowed: a comma-separated list", param_hint=f"--{what}")
    return items


def params(check: vc.CheckPlan, layouts: int, arms: list[str], modes: list[str]) -> dict:
    return {"variants": check.variants(arms), "kernel_headers": check.kernel_headers(arms), "modes": ",".join(modes),
            "sizes": "1000", "layouts": str(layouts), "trials": str(layouts * ROUNDS_PER_LAYOUT),
            "profile": "full", "target_ci": "0", "budget": "0", "icount": "false"}


def series_dirs(folder: Path) -> list[Path]:
    """The completed ``session-N`` run folders in ``folder``, by N."""
    found = []
    for d in Path(folder).iterdir() if Path(folder).is_dir() else ():
        m = re.fullmatch(r"session-(\d+)", d.name)
        if m and d.is_dir() and (d / "raw.csv").is_file() and RunOutput(d).env_doc.status == "complete":
            found.append((int(m.group(1)), d))
    return [d for _, d in sorted(found)]


def analyse(run_dirs: list[Path], arms: list[str], modes: list[str], out=print) -> bool:
    """Print the runs' table, transitions held and the combination's check; True when every
    next-run interval held the following run's estimate.  Every effect and interval prints in the
    reports' one sign (``sessions.change_cells``: + = better, a factor past ±50%); whether an
    interval held a run is decided on the estimates themselves."""
    rows = sessions.run_rows(run_dirs, vc.BASELINE)
    if not len(rows):
        out("repro: no run could be compared against base")
        return False
    rows = rows[rows["candidate"].isin(arms) & rows["config"].map(lambda c: sessions.mode_of(c) in modes)]
    hosts = sorted({str(h) for h in rows["host"].dropna()})
    aa = host_between(hosts[0]) if len(hosts) == 1 else {}
    out(f"host {', '.join(hosts) or '?'}; host A/A drift calibration: "
        + (", ".join(f"mode {m} {b.text}" for m, b in sorted(aa.items())) if aa else "none")
        + f"; a run's own series is used from its run 2 on (its Q-profile {EARLY_RUNS_LEVEL:.0%} bound"
          f" before run {MIN_RUNS})")
    out("%change: + = better (less time per op than base), as in every ringlab report; past ±50% a factor "
        "(×2.1 slower); each CI and interval in the same sign")
    hits = sessions.hit_rates(rows, aa)
    ok = True
    for (cand, config), grp in rows.groupby(["candidate", "config"], sort=True):
        h = hits[(hits["candidate"] == cand) & (hits["config"] == config)]
        lib = bool(grp["lower_is_better"].iloc[0]) if "lower_is_better" in grp else True
        header = f"%change (+ = {'faster' if lib else 'better'})"
        out("")
        out(f"{cand} vs base, {config}")
        out(f"  {'run':<10} {header:>20} {'95% CI':>18}   {'next run here (95%)':>20}  held by the next run: CI / PI  basis")
        for _, r in grp.iterrows():
            t = h[h["run"] == r["run"]]
            est, ci = sessions.change_cells(r["delta_pct"], r["ci_low_pct"], r["ci_high_pct"], lib)
            nxt = "" if t.empty else sessions.change_cells(r["delta_pct"], t["next_low_pct"].iloc[0],
                                                           t["next_high_pct"].iloc[0], lib)[1]
            held = "" if t.empty else (f"{'yes' if t['ci_held'].iloc[0] else 'no':>3} / "
                                       f"{'yes' if t['pi_held'].iloc[0] else 'no':<3}")
            basis = "" if t.empty else t["next_source"].iloc[0]
            out(f"  {r['run']:<10} {est:>20} {ci:>18}   {nxt:>20}  {held:<30} {basis}".rstrip())
        n = len(h)
        out(f"  transitions held: 95% CI {int(h['ci_held'].sum())} of {n}; next-run interval "
            f"{int(h['pi_held'].sum())} of {n} ({n} of {n} wanted)")
        ok = ok and bool(h["pi_held"].all())
        g = grp[grp["se"].notna() & (grp["se"] > 0)]
        if len(g) >= 4:
            first, last = g.iloc[:-1], g.iloc[-1]
            try:
                re_ = combine(first["log_delta"], first["se"] ** 2)
            except StatsError as e:
                out(f"  combination of the first {len(first)} runs: none ({e})")
                continue
            ci_ok = pct(re_.ci_low) <= last["delta_pct"] <= pct(re_.ci_high)
            pi_ok = re_.covers(math.log1p(last["delta_pct"] / 100))
            est, ci = sessions.change_cells(pct(re_.estimate), pct(re_.ci_low), pct(re_.ci_high), lib)
            pi = sessions.change_cells(pct(re_.estimate), pct(re_.pi_low), pct(re_.pi_high), lib)[1]
            last_est = sessions.change_cells(last["delta_pct"], math.nan, math.nan, lib)[0]
            out(f"  the first {len(first)} runs combined (random effects, HKSJ): {est} {ci}, tau "
                f"{re_.tau * 100:.2f} points; its CI {'holds' if ci_ok else 'does not hold'} run {last['run']}'s "
                f"{last_est}; its prediction interval {pi} {'holds' if pi_ok else 'does not hold'} it")
        else:
            out(f"  combination of the runs before the last: needs 4 runs or more ({len(g)} here)")
    for line in sessions.moved_text(sessions.combined(rows), rows):
        out(line)
    return ok


def run(args) -> int:
    t0 = time.monotonic()
    arms, modes = _list(args.arms, "arms"), _list(args.modes, "modes")
    if args.from_dir:
        dirs = series_dirs(Path(args.from_dir))
        print(f"repro: {len(dirs)} completed run(s) in {args.from_dir} (session-N), base vs {', '.join(arms)}, "
              f"modes {', '.join(modes)}; nothing run")
        if len(dirs) < 2:
            print("repro: a series needs two runs or more")
            return 1
    else:
        check = vc.plan(args.base)
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ringlab-repro-"))
        print(f"repro: {args.runs} runs of base vs {', '.join(arms)} on {check.base} (modes {', '.join(modes)}, "
              f"size 1000, {args.layouts} layouts x {ROUNDS_PER_LAYOUT} rounds)")
        for _, r in check.expected().iterrows():
            if r["arm"] in arms:
                print(f"  {r['arm']}: {r['patch']}, expected +{r['expected extra %']:.2f}% instructions/op")
        recs = sessions.run_sessions("ptr_ring", params(check, args.layouts, arms, modes), args.runs, out,
                                     args.gap, log=lambda s: print("  " + s) if s.startswith("sessions:") else None)
        dirs = [r["dir"] for r in recs if r["status"] == "complete"]
        print(f"repro: runs in {out}")
    ok = analyse(dirs, arms, modes)
    print(f"repro: {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1


def main(argv=None) -> int:
    return options.run_alone(command, argv)


if __name__ == "__main__":
    sys.exit(main())
