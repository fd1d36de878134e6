"""Summary tables (summary.md/csv/tex) and figures for a run folder."""
from __future__ import annotations

import sys

import click

from ringlab.errors import DataError
from ringlab.lab.commands import options
from ringlab.report import Analysis, pick_metric, write_report
from ringlab.rundir import RunFolder, RunOutput, require_metric
from ringlab.stats import StatsError
from ringlab.errors import ParamError
from ringlab.fmt import printable
from ringlab.names import check_name


@click.command(cls=options.Command)
@click.argument("dir", cls=options.Argument, metavar="DIR", help="run folder containing raw.csv")
@click.option("--baseline", default=None, metavar="NAME",
              help="variant to compare against (default: the one the run's notebook reported against, else "
                   "env.json's baseline, else the first variant)")
@click.option("--metric", default=None, metavar="METRIC", help="metric column (default ns_per_op, else elapsed_us)")
@click.option("--label", multiple=True, metavar="VARIANT=LABEL",
              help="table label of a variant, e.g. --label batch=unpatched (repeatable)")
@click.option("--no-figures", is_flag=True, help="tables only")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:
    labels = {}
    for item in args.label:
        if "=" not in item:
            print(f"ringlab summarize: error: --label {item!r}: expected VARIANT=LABEL", file=sys.stderr)
            return 2
        k, v = item.split("=", 1)
        check_name(k, "--label VARIANT")
        if not v or printable(v, html=True) != v or len(v) > 80:
            raise ParamError(f"--label {item!r}: LABEL {v!r} is not a plain label; allowed: 1 to 80 printable "
                             "characters without control characters, '<', '>' or '&'")
        labels[k] = v
    folder = RunFolder(args.dir)
    # corrupt files: DataError (exit 2) naming the file and line; the report reads this RunOutput's frame
    run = RunOutput(folder.path)
    df, env = run.read()
    try:
        metric = pick_metric(df, args.metric)
    except StatsError as e:
        raise DataError(f"{folder.raw_csv}: {e}") from None
    require_metric(df, metric, folder.raw_csv)
    status = ""
    if env is not None:
        status = folder.status_line()
    if status:
        print(status)
    try:
        paths = write_report(Analysis(args.dir, args.metric, args.baseline, labels or None, run=run),
                             figures=not args.no_figures)
    except FileNotFoundError as e:
        print(f"ringlab summarize: error: {e}", file=sys.stderr)
        return 2
    for name, p in paths.items():
        if name == "figures":
            for fig, files in p.items():
                print(f"figures/{fig}: " + ", ".join(str(f) for f in files))
        else:
            print(f"{name}: {p}")
    return 0
