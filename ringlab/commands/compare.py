"""A/B verdicts from a raw.csv: every variant against a baseline, per configuration."""
from __future__ import annotations

import json
import math
import sys


def add_arguments(p) -> None:
    p.add_argument("raw", metavar="RAW.csv", help="raw.csv written by `ringlab run`")
    p.add_argument("--baseline", required=True, metavar="NAME", help="the variant the others are compared to")
    p.add_argument("--metric", default="ns_per_op", help="metric column (default ns_per_op)")
    p.add_argument("--by", default=None, metavar="COLUMNS",
                   help="comma-separated columns defining a configuration (default: every parameter)")
    p.add_argument("--noise", type=float, default=0.01,
                   help="noise threshold as a fraction (default 0.01 = +-1%%)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    p.add_argument("--json", action="store_true", help="print a JSON list with exactly the documented fields")


def describe_method(res, metric: str) -> str:
    """How the table's numbers were made, with the real family sizes and CI levels."""
    designs = sorted(set(res["design"].astype(str)))
    parts = [f"delta = estimated candidate/baseline ratio - 1 of {metric} (Hodges-Lehmann on the log scale)"]
    if "paired" in designs:
        parts.append("paired rows: per-round ln(candidate/baseline), CI and p from the Wilcoxon "
                     "signed-rank test")
    if "unpaired" in designs:
        parts.append("unpaired rows (incomplete rounds): CI and p from Mann-Whitney")
    if "exact" in designs:
        parts.append("exact rows: deterministic metric, no CI or p")
    fams = []
    for cand, sub in res.groupby("candidate", sort=True):
        m = int(sub["family_size"].max()) if len(sub) else 0
        if m:
            lv = sub["ci_level"].dropna()
            lvl = (f"{lv.min() * 100:.4g}%" if lv.min() == lv.max()
                   else f"{lv.min() * 100:.4g}-{lv.max() * 100:.4g}%")
            fams.append(f"{cand}: {m} comparison(s), CI level {lvl}")
    if fams:
        parts.append("p Holm-corrected per candidate over its configurations, CI level matched to it ("
                     + "; ".join(fams) + ")")
    return "; ".join(parts) + "."


def run(args) -> int:
    import pandas as pd

    from ringlab.report.tables import comparison_rows, md_table
    from ringlab.stats import StatsError, compare, to_records

    try:
        df = pd.read_csv(args.raw)
    except FileNotFoundError:
        print(f"ringlab compare: error: RAW.csv: no such file: {args.raw}", file=sys.stderr)
        return 2
    try:
        res = compare(df, args.baseline, metric=args.metric, by=args.by, noise=args.noise, alpha=args.alpha)
    except StatsError as e:
        print(f"ringlab compare: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_records(res), indent=2))
        return 0
    header, rows = comparison_rows(res)
    print(md_table(header, rows))
    if len(res):
        print()
        print(describe_method(res, args.metric))
        welch = ", ".join(f"{r.candidate}@{r.group}: {r.p_welch:.3g}" for r in res.itertuples()
                          if isinstance(r.p_welch, float) and not math.isnan(r.p_welch))
        if welch:
            print(f"Welch t-test p (uncorrected, descriptive): {welch}")
    return 0
