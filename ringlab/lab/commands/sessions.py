"""Run one comparison in several sessions spread over time, then combine them by random effects.

    ringlab sessions ptr_ring -n 5 --gap 3600 -p variants batch,reorder -p profile quick --out DIR
    ringlab sessions --combine RUN_DIR RUN_DIR ...     # combine run folders already measured

Each session is a full run folder DIR/session-<i>/ with its summary.md; DIR/combined.csv holds
each comparison's random-effects estimate, tau, I², Q and the interval the next run is expected
in, DIR/runs.csv each session's estimate.  An interrupted series resumes where it stopped.
"""
from __future__ import annotations

from pathlib import Path

import click

from ringlab.errors import ParamError
from ringlab.lab.commands import options
from ringlab.rundir.outputs import check_run_out
from ringlab.studies import sessions as study


@click.command(cls=options.Command)
@click.argument("experiment", cls=options.Argument, metavar="experiment", required=False,
                help="experiment name (ptr_ring, page_frag, perf_rb, ringtest, kmod)")
@click.argument("runs", nargs=-1, metavar="[RUN_DIR]...")
@click.option("-n", "--sessions", "n", type=int, default=3, show_default=True, metavar="N",
              help="sessions (runs) of the experiment, each a run folder")
@click.option("--gap", type=float, default=0.0, show_default=True, metavar="SECONDS",
              help="seconds between the end of one session and the start of the next")
@options.parameter("a parameter of every session's run, as `ringlab run -p`")
@click.option("--out", metavar="DIR", help="the series folder (required with an experiment)")
@click.option("--baseline", metavar="VARIANT", help="the arm the others are compared with (default: the run's)")
@click.option("--metric", default="ns_per_op", show_default=True, help="the metric compared")
@click.option("--combine", "combine_only", is_flag=True, help="combine the run folders given; run nothing")
@click.option("--no-build", is_flag=True, help="use the binaries already in build/bin")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:
    if args.combine_only:
        dirs = [Path(p) for p in ([args.experiment] if args.experiment else []) + list(args.runs)]
        if len(dirs) < 2:
            raise ParamError("--combine: give two or more run folders; allowed: RUN_DIR RUN_DIR ...")
        missing = [str(d) for d in dirs if not (d / "raw.csv").is_file()]
        if missing:
            raise ParamError(f"--combine: {missing[0]}: no raw.csv; allowed: run folders written by `ringlab run`")
        labels = None
    else:
        if not args.experiment or args.runs:
            raise ParamError("experiment: one experiment name (ptr_ring, page_frag, perf_rb, ringtest, kmod), "
                             "or --combine RUN_DIR RUN_DIR ...")
        if not args.out:
            raise ParamError("--out: required: the series folder that holds session-1 .. session-N")
        check_run_out(args.out, "--out")
        params: dict[str, str] = {}
        for name, value in args.parameter:
            if name in params:
                raise ParamError(f"parameter '{name}' given twice; allowed: each parameter once")
            params[name] = value
        recs = study.run_sessions(args.experiment, params, args.n, Path(args.out), args.gap,
                                  build=not args.no_build, log=print)
        dirs = [r["dir"] for r in recs if r["status"] == "complete"]
        labels = [d.name for d in dirs]
        from ringlab.report import write_report
        for d in dirs:
            write_report(d, figures=False)
    rows = study.run_rows(dirs, args.baseline, args.metric, labels)
    comb = study.combined(rows)
    for line in study.table_lines(comb):
        print(line)
    for line in study.moved_text(comb, rows):
        print(line)
    if not args.combine_only:
        for f in study.write_combined(Path(args.out), comb, rows):
            print(f"  {f}")
    return 0
