"""Measure this machine's layout spread and states (an A/A of the layout design); planning uses it.

    ringlab calibrate                      # into results/calibration/<host>/
    ringlab calibrate --out DIR -p count 5000000
    ringlab calibrate --from RUN_DIR       # analyse an A/A run folder already measured
    ringlab calibrate --between-only --between 5 --gap 600   # only the drift between runs

After the A/A, ``--between N`` sessions (default 5; 0: none) measure how an A/B ratio drifts
between runs into drift.json beside calibration.json (``ringlab.studies.drift``).
"""
from __future__ import annotations

import math
from pathlib import Path

import click

from ringlab.lab.commands import options
from ringlab.errors import ParamError
from ringlab.rundir.outputs import check_output
from ringlab.studies import calibration as cal
from ringlab.studies import drift


@click.command(cls=options.Command)
@click.option("--out", metavar="DIR", help="where calibration.json and the A/A run folder go "
              "(default results/calibration/<host>/)")
@options.parameter("a ptr_ring parameter of the A/A run (not variants, kernel_headers or layouts)")
@click.option("--header", metavar="PATH", help="the ptr_ring.h source measured against itself "
              "(default: the newest found by `ringlab env --headers`)")
@click.option("--from", "from_run", metavar="RUN_DIR", help="analyse this A/A run folder instead of running one")
@click.option("--no-build", is_flag=True, help="use the binaries already in build/bin")
@click.option("--between", "between", type=int, default=drift.SESSIONS, show_default=True, metavar="N",
              help="sessions of the drift between runs (A/A and a known A/B, each a full run); 0: none")
@click.option("--gap", "gap", type=float, default=0.0, show_default=True, metavar="SECONDS",
              help="seconds between the end of one drift session and the start of the next")
@click.option("--between-only", is_flag=True, help="measure only the drift between runs (keep calibration.json)")
def command(**params) -> int:
    return run(options.Args(params))


def _pct(v) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v * 100:.2f} pts"


def show(path: Path, doc: dict) -> None:
    lo, hi = (doc.get("sigma_layout_ci") or [None, None])[:2]
    st = doc.get("states") or {}
    print(f"calibration: {path}")
    print(f"  A/A run:      {doc.get('run_id')} ({doc.get('layouts')} layout pairs, {doc.get('rounds')} rounds)")
    print(f"  sigma_L:      {_pct(doc.get('sigma_layout'))} (95% interval {_pct(lo)} to {_pct(hi)})")
    print(f"  round noise:  {_pct(doc.get('round_sd'))} per round (robust SD of the log ratios)")
    if st.get("n_states") == 2:
        lv, dur = st.get("levels") or [math.nan, math.nan], st.get("mean_duration") or [math.nan, math.nan]
        print(f"  states:       2; slow level +{(math.exp(lv[1] - lv[0]) - 1) * 100:.1f}% over fast, "
              f"slow share {st.get('slow_share', math.nan):.0%}, mean durations {dur[0]:.0f} / {dur[1]:.0f} trials")
    else:
        print(f"  states:       1 ({st.get('reason') or 'one state'})")
    for line in cal.levels_lines(doc):
        print(line)


def run(args) -> int:

    params: dict[str, str] = {}
    for name, value in args.parameter:
        if name in params:
            raise ParamError(f"parameter '{name}' given twice; allowed: each parameter once")
        params[name] = value
    if args.out:
        check_output(args.out, "--out", folder=True)
    between = args.between
    if not isinstance(between, int) or not (between == 0 or 2 <= between <= 100):
        raise ParamError(f"--between: {between!r}; allowed: 0 (no drift sessions) or an integer in [2, 100]")
    if args.between_only:
        if args.from_run or not between:
            raise ParamError("--between-only: measures the drift sessions; allowed without --from and with --between N >= 2")
        dpath, ddoc = drift.measure(Path(args.out) if args.out else None, between, args.gap, args.header, params,
                                    build=not args.no_build)
        print(f"drift: {dpath}")
        for line in drift.lines(ddoc):
            print(line)
        return 0
    if args.from_run:
        if params or args.header:
            raise ParamError("--from: analyses a run already measured; allowed without -p and --header")
        path, doc = cal.calibrate_existing(Path(args.from_run), Path(args.out) if args.out else None)
    else:
        path, doc = cal.calibrate(Path(args.out) if args.out else None, params, args.header,
                                  build=not args.no_build)
    show(path, doc)
    if between and not args.from_run:
        dpath, ddoc = drift.measure(Path(args.out) if args.out else None, between, args.gap, args.header, params,
                                    build=not args.no_build)
        print(f"drift: {dpath}")
        for line in drift.lines(ddoc):
            print(line)
    return 0
