"""Machine time to a decisive verdict: the staged run against a fixed design of the same machine
time, side by side, in one invocation of about 4 x the budget.  Prints figures and ratios.

For each question (batch vs reorder, size 1000; mode 0 to +-0.25% and mode 1 to +-0.75%, profile
full's targets, or ``--targets``):

1. **The staged run** of the product itself (``-p target_ci T -p budget S``), planned as a run on
   this host is: from its level calibration where it has one, else from a first stage that
   measures what the run needs (and says so).  Its machine time (builds included), the
   half-width reached, why it stopped, the design it ended with, this run's 95% CI and the
   interval another run on this host is expected in (from the host's drift.json, else the run's
   noise only, and it says so); where it stopped short of its target, summary.md's "Not
   reached" sentence: how far it got, which level's variance (the layouts fit's) stopped it, and
   the design and time that would reach the target.  Its wall time against its deadline: the budget plus one round
   (the round under way when the budget runs out finishes) plus ``DEADLINE_SLACK_S`` for what a
   run does besides its builds and rounds (start-up, environment probe, the reviews): pass or fail.
2. **A fixed design of the same machine time**, measured right after: profile full's shape
   (8 layout pairs, 2 warm-up rounds) with the staged run's trial length, and as many rounds as
   the staged run's own seconds per round and per build buy in its time; its time, its
   half-width, and the ratio of the two half-widths at equal time (the fixed one scaled by
   sqrt(its time / the staged run's time), which corrects the few seconds they differ by).
   A ratio above 1 is the staged run's gain.
3. With ``--header``: the newest kernel ptr_ring.h against its ``kernel-reorder`` form (derived
   as ``benchmarks/fidelity_headers.py`` does) to +-1% in mode 0, staged, within twice the budget.

The staged design's A/A rate, through the same stopping code, is ``ringlab bench stopping``'s.

    ringlab bench decide [--budget 45] [--targets 0.25,0.75] [--header]

Exit status 0 when every staged run's half-width was at most the fixed design's at equal time
and its wall time within its deadline (budget + one round + 5 s, builds included), else 1.
"""
from __future__ import annotations

import math
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.rundir import read_env, read_raw  # noqa: E402
from ringlab.rundir.calibration import with_host_next_run  # noqa: E402
from ringlab.report.stopping_sentences import stopping_text  # noqa: E402
from ringlab.run import run_experiment  # noqa: E402
from ringlab.sources import kernel_header  # noqa: E402
from ringlab.stats import compare  # noqa: E402
from ringlab.stats.sequential import measured_costs  # noqa: E402
from ringlab.stats.stopping_record import Stopping  # noqa: E402
from ringlab.system.envinfo import host_id  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

MODES = ("0", "1")
HEADER_TARGET = 1.0
#: profile full's fixed shape: layout pairs and warm-up rounds
FIXED_LAYOUTS, FIXED_WARMUP = 8, 2
#: what a fixed run costs besides its rounds and builds (start-up, environment probe), seconds
FIXED_OVERHEAD_S = 3.0
#: what a staged run may take past its budget and one round (start-up, environment probe, reviews)
DEADLINE_SLACK_S = 5.0


def _quiet(_msg: str) -> None:
    pass


def measure(work: Path, name: str, params: dict, baseline: str, mode: str) -> dict:
    """One ptr_ring run: its machine time (builds included), the compared row of ``mode`` (with
    its next-run interval), env.json's ``stopping`` and the trials' seconds."""
    t0 = time.monotonic()
    res = run_experiment("ptr_ring", params, work / name, progress=False, log=_quiet)
    took = time.monotonic() - t0
    df = read_raw(res.raw_csv)
    env = read_env(work / name).doc
    rows = with_host_next_run(compare(df, baseline), host_id())
    rows = rows[rows["mode"].astype(str) == mode] if "mode" in rows.columns else rows
    row = rows.iloc[0] if len(rows) else None
    stop = Stopping.from_json(env.get("stopping")) or Stopping()
    failed = int((df["status"].astype(str) != "ok").sum()) if "status" in df.columns else 0
    return {"took": took, "row": row, "stopping": stop, "failed": failed,
            "round_s": measured_costs(df, stop)[0] if stop.stages else math.nan,
            "half_width": (row["ci_high_pct"] - row["ci_low_pct"]) / 2 if row is not None else math.nan}


def deadline_text(took: float, budget: float, round_s: float) -> tuple[bool, str]:
    """(within, the line): the staged run's wall time against budget + one round + the slack."""
    one = round_s if math.isfinite(round_s) else 0.0
    limit = budget + one + DEADLINE_SLACK_S
    ok = took <= limit
    return ok, (f"wall time {took:.1f} s against its budget {budget:g} s + one round {one:.2f} s + "
                f"{DEADLINE_SLACK_S:g} s = {limit:.1f} s: {'pass' if ok else 'FAIL'}")


def intervals_text(row) -> str:
    """``+x% [lo, hi] this run; next run here [lo, hi] (source)``, as % change in ns/op."""
    if row is None:
        return "no compared row"
    nxt = (f"[{row['next_low_pct']:+.2f}, {row['next_high_pct']:+.2f}]"
           if math.isfinite(float(row.get("next_low_pct", math.nan))) else "not available")
    src = str(row.get("next_source") or "").strip()
    return (f"{row['delta_pct']:+.2f}% [{row['ci_low_pct']:+.2f}, {row['ci_high_pct']:+.2f}] this run (95% CI); "
            f"next run here {nxt}" + (f" ({src})" if src else "") + f"; {row['verdict']}")


def staged_params(base: dict, mode: str, target: float, budget: float) -> dict:
    """The staged run of one question: the product's own stop-when-answered design."""
    return base | {"modes": mode, "sizes": "1000", "target_ci": str(target), "budget": str(budget), "stop": "target"}


def fixed_params(base: dict, mode: str, stop: Stopping, seconds: float) -> dict:
    """Profile full's fixed shape at the staged run's trial length, with the rounds the staged
    run's own costs buy in ``seconds``."""
    stages = stop.stages or ()
    rounds = max(1, int(stop.rounds_run or stop.rounds_planned or 1))
    spr = sum(float(s.measure_s or 0) for s in stages) / rounds
    layouts = max(1, int(stop.layouts or 1))
    per_layout = sum(float(s.build_s or 0) for s in stages) / layouts
    left = seconds - FIXED_OVERHEAD_S - FIXED_LAYOUTS * per_layout - FIXED_WARMUP * spr
    trials = max(2 * FIXED_LAYOUTS, int(left / spr)) if spr > 0 else 2 * FIXED_LAYOUTS
    count = (stop.count_by_mode or {}).get(mode) or stop.count
    out = base | {"profile": "full", "target_ci": "0", "budget": "0", "modes": mode, "sizes": "1000", "layouts": str(FIXED_LAYOUTS),
                  "trials": str(trials), "warmup": str(FIXED_WARMUP)}
    return out | ({"count": str(int(count))} if count else {})


def short_text(stop: Stopping) -> str:
    """summary.md's "Not reached: ..." of a staged run that stopped short of its target: how far
    it got, which level's variance (from the layouts fit) stopped it, and the design and time
    that would reach the target; "" when it reached it."""
    text = stopping_text(stop)
    at = text.find(" Not reached:")
    return text[at + 1:] if at >= 0 else ""


def _stop_text(stop: Stopping) -> str:
    return (f"ended at {stop.layouts} layouts x {stop.rounds_per_layout} rounds in "
            f"{len(stop.stages or ())} stages, stopped: {stop.stop_reason}; planned from: "
            f"{stop.calibration}")


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--budget", type=float, default=45.0, help="seconds each staged run may take, builds included")
@click.option("--targets", default="0.25,0.75", help="target half-widths of modes 0 and 1, percent")
@click.option("--header", is_flag=True, help="also the kernel header vs its reorder form (adds up to twice the budget)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def _targets(text: str) -> tuple[float, float]:
    try:
        out = tuple(float(x) for x in text.split(","))
    except ValueError:
        out = ()
    if len(out) != 2 or not all(0 < x < 99 for x in out):
        raise SystemExit(f"--targets: {text!r} is not two percentages (mode 0, mode 1), e.g. 0.25,0.75")
    return out


def run(args) -> int:
    targets = dict(zip(MODES, _targets(args.targets)))
    t_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ringlab-decide-") as d:
        ok = questions(args, Path(d), targets)
    print(f"bench decide: {time.monotonic() - t_all:.0f} s in all")
    return 0 if ok else 1


def questions(args, work: Path, targets: dict[str, float]) -> bool:
    """Each question's staged run and the fixed design of its time; True when every staged run
    was at least as narrow as the fixed design at equal time, within its budget."""
    ok = True
    deadlines = []
    base = {"variants": "batch,reorder", "baseline": "batch", "counters": "false", "quiet": "warn"}
    for mode in MODES:
        target = targets[mode]
        s = measure(work, f"staged-{mode}", staged_params(base, mode, target, args.budget), "batch", mode)
        stop = s["stopping"]
        within, deadline = deadline_text(s["took"], args.budget, s["round_s"])
        reached = math.isfinite(s["half_width"]) and s["half_width"] <= target
        print(f"mode {mode} batch vs reorder to +-{target}% within {args.budget:g} s: staged run {_stop_text(stop)}")
        print(f"  staged: +-{s['half_width']:.2f}% in {s['took']:.1f} s, builds included "
              f"({'target reached' if reached else 'target NOT reached'}; "
              f"{stop.rounds_run} of {stop.rounds_planned} planned rounds run; the record's builds and "
              f"rounds {float(stop.spent_s or 0):.1f} s; {s['failed']} trials failed)")
        print(f"  deadline: {deadline}")
        print(f"    {intervals_text(s['row'])}")
        short = short_text(stop)
        if short:
            print(f"  {short}")
        deadlines.append(f"mode {mode} {'pass' if within else 'FAIL'} ({s['took']:.0f} s, budget {args.budget:g} s)")
        f = measure(work, f"fixed-{mode}", fixed_params(base, mode, stop, s["took"]), "batch", mode)
        print(f"  fixed design of the same time ({FIXED_LAYOUTS} layouts x "
              f"{fixed_params(base, mode, stop, s['took'])['trials']} rounds): +-{f['half_width']:.2f}% in "
              f"{f['took']:.1f} s ({f['failed']} trials failed)")
        print(f"    {intervals_text(f['row'])}")
        if math.isfinite(f["half_width"]) and math.isfinite(s["half_width"]) and s["half_width"] > 0:
            eq = f["half_width"] * math.sqrt(f["took"] / s["took"])
            better = s["half_width"] <= eq
            print(f"  at the staged run's machine time the fixed design gives +-{eq:.2f}%: ratio {eq / s['half_width']:.2f}x "
                  f"the staged run's half-width ({'staged at least as narrow' if better else 'staged WIDER'})")
        else:
            better = False
            print("  ratio: not computed (a run gave no half-width)")
        ok &= better and within
    print(f"staged runs against their deadlines: {'; '.join(deadlines)}")
    if args.header:
        ok &= header_question(args, work)
    return ok


def header_question(args, work: Path) -> bool:
    hdr = kernel_header.debian_header()
    if hdr is None:
        print("kernel header vs kernel-reorder: not measured: no kernel ptr_ring.h found (`ringlab env --headers`)")
        return True
    from benchmarks.fidelity_headers import KERNEL_NAME, KERNEL_REORDER, write_derived
    hdr = kernel_header.resolve_header(hdr)
    derived = write_derived(hdr, KERNEL_REORDER, work / "derived")
    params = staged_params({"counters": "false", "variants": f"{KERNEL_NAME},{KERNEL_REORDER}",
                            "baseline": KERNEL_NAME, "quiet": "warn",
                            "kernel_headers": f"{KERNEL_NAME}={hdr},{KERNEL_REORDER}={derived}"},
                           "0", HEADER_TARGET, 2 * args.budget)
    h = measure(work, "header", params, KERNEL_NAME, "0")
    reached = math.isfinite(h["half_width"]) and h["half_width"] <= HEADER_TARGET
    within, deadline = deadline_text(h["took"], 2 * args.budget, h["round_s"])
    print(f"mode 0 {hdr} vs its {KERNEL_REORDER} form to +-{HEADER_TARGET}% within {2 * args.budget:g} s: "
          f"staged run {_stop_text(h['stopping'])}; +-{h['half_width']:.2f}% in {h['took']:.1f} s: "
          f"{'reached' if reached else 'NOT reached'}")
    print(f"  deadline: {deadline}")
    print(f"    {intervals_text(h['row'])}")
    return within


if __name__ == "__main__":
    sys.exit(main())
