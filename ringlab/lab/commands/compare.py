"""A/B verdicts from a raw.csv: every variant against a baseline, per configuration."""
from __future__ import annotations

import json
import math
from pathlib import Path

import click

from ringlab.lab.commands import options
from ringlab.errors import ParamError
from ringlab.fmt import printable
from ringlab.report.analysis import Analysis
from ringlab.report.tables import comparison_rows, holm_footnote, interval_lines, md_table, sign_text
from ringlab.rundir import read_raw, require_metric
from ringlab.stats import to_records
from ringlab.stats.decide import EQUIVALENCE_MARGIN
from ringlab.report.method_text import method_text


@click.command(cls=options.Command)
@click.argument("raw", cls=options.Argument, metavar="RAW.csv", help="raw.csv written by `ringlab run`")
@click.option("--baseline", required=True, metavar="NAME", help="the variant the others are compared to")
@click.option("--metric", default="ns_per_op", metavar="METRIC", help="metric column (default ns_per_op)")
@click.option("--by", default=None, metavar="COLUMNS",
              help="comma-separated columns defining a configuration (default: every parameter)")
@click.option("--noise", type=float, default=EQUIVALENCE_MARGIN, metavar="MARGIN",
              help="the equivalence margin as a fraction: 'no significant difference' when the CI includes 0 "
                   "and lies within +-MARGIN, the note says which (default 0.01 = +-1%)")
@click.option("--alpha", type=float, default=0.05, metavar="ALPHA", help="significance level (default 0.05)")
@click.option("--json", is_flag=True, help="print a JSON list with exactly the documented fields")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:

    if not (math.isfinite(args.noise) and 0 <= args.noise < 1):
        raise ParamError(f"parameter '--noise': {args.noise!r}; allowed: a fraction in [0, 1) (0.01 = +-1%)")
    if not (math.isfinite(args.alpha) and 0 < args.alpha < 1):
        raise ParamError(f"parameter '--alpha': {args.alpha!r}; allowed: a number in (0, 1) (default 0.05)")
    df = read_raw(args.raw)   # DataError (exit 2) naming the file and line when it is corrupt
    require_metric(df, args.metric, args.raw)
    # the comparison as every report of a run makes it: compare() with the host's next-run interval
    res = Analysis(Path(args.raw).parent, frame=df).compare(args.baseline, args.metric, by=args.by,
                                                               noise=args.noise, alpha=args.alpha)
    if args.json:
        print(json.dumps(to_records(res), indent=2))
        return 0
    header, rows = comparison_rows(res)
    out = [md_table(header, rows)]
    if len(res):
        foot = holm_footnote(res)
        out += ["", sign_text(res)] + ([foot] if foot else []) + interval_lines(res) + [method_text(res)]
        welch = ", ".join(f"{r.candidate}@{r.group}: {r.p_welch:.3g}" for r in res.itertuples()
                          if isinstance(r.p_welch, float) and not math.isnan(r.p_welch))
        if welch:
            out.append(f"Welch t-test p (uncorrected, descriptive): {welch}")
    # text from raw.csv reaches the terminal without control characters or escapes
    print(printable("\n".join(out), multiline=True))
    return 0
