"""Reports of a run folder: summary.md / summary.csv / summary.tex and figures/.

``write_report(run_dir)`` reads ``run_dir/raw.csv`` (and ``env.json`` when present),
asks ``ringlab.stats`` for every number and only formats and draws them.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ringlab import schema
from ringlab.provenance import read_env
from ringlab.report import figures as _fig
from ringlab.report import tables as _tab
from ringlab.stats import compare, diagnose, diagnose_ab, measurements, summarize
from ringlab.stats.summary import StatsError, group_columns


def pick_metric(df: pd.DataFrame, metric: str | None = None) -> str:
    """``metric`` if given, else ns_per_op when it has values, else elapsed_us / elapsed_ns."""
    if metric:
        return metric
    for m in (schema.PRIMARY_METRIC, "elapsed_us", "elapsed_ns"):
        if m in df.columns and pd.to_numeric(df[m], errors="coerce").notna().any():
            return m
    raise StatsError("metric: raw.csv has no values in ns_per_op, elapsed_us or elapsed_ns; "
                     "pass metric=<column>")


def pick_baseline(df: pd.DataFrame, env: dict, baseline: str | None) -> str | None:
    """``baseline`` if given, else env.json's ``baseline``, else the first variant in raw.csv."""
    if baseline:
        return str(baseline)
    if isinstance(env.get("baseline"), str):
        return env["baseline"]
    vs = list(dict.fromkeys(df["variant"].astype(str))) if "variant" in df.columns else []
    return vs[0] if len(vs) > 1 else None


def write_report(run_dir, metric: str | None = None, baseline: str | None = None,
                 labels: dict | None = None, figures: bool = True) -> dict:
    """Write summary.md/csv/tex (+ figures/) into ``run_dir``; returns {name: path or [paths]}."""
    run_dir = Path(run_dir)
    raw = run_dir / "raw.csv"
    if not raw.is_file():
        raise FileNotFoundError(f"run_dir: no raw.csv in {run_dir}")
    df = pd.read_csv(raw)
    env = read_env(run_dir)
    metric = pick_metric(df, metric)
    base = pick_baseline(df, env, baseline)
    meas, excluded = measurements(df, metric)
    params = group_columns(df, include_variant=False)
    summ = summarize(df, metric)
    cmp = compare(df, base, metric) if base else None
    diags = diagnose(df, metric)
    ab = []
    if base and "instructions_per_op" in df.columns:
        for cand in sorted(set(df["variant"].astype(str)) - {base}):
            ab += diagnose_ab(df, base, cand, time_metric=metric)

    md = [f"# {df['experiment'].iloc[0] if 'experiment' in df.columns and len(df) else 'run'}: "
          f"{metric}", ""]
    md.append(f"{len(meas)} measurements; excluded {excluded['total']} rows "
              f"(warm-up {excluded.get('warmup', 0)}, status not ok {excluded.get('status_not_ok', 0)}, "
              f"no value {excluded.get('metric_missing', 0)}).")
    if env.get("host") or env.get("hostname"):
        md.append(f"Host: {env.get('host') or env.get('hostname')}.")
    const = _tab.constant_settings(df, params)
    if const:
        md.append(f"Same in every trial (left out of the tables): {const}.")
    md.append("")
    sections = []
    if cmp is not None and len(cmp):
        h, r = _tab.comparison_rows(cmp, labels)
        md += [f"## A/B verdicts (baseline {base})", "",
               "delta = (candidate - baseline) / baseline on the medians; 95% CI: bootstrap of that "
               "ratio; p: Mann-Whitney U, Holm-corrected over the file; medians shown per arm.", ""]
        if bool(cmp["lower_is_better"].iloc[0]):
            md += ["gain (mail sign) = (baseline - candidate) / baseline: '+6.2%' means the candidate "
                   "is faster, as in the mailing-list tables.", ""]
        if (cmp["note"] == "exact (deterministic metric)").any():
            md += ["Rows marked 'exact (deterministic metric)' compare values that did not vary at all "
                   "between trials: the difference is exact, there is no CI or p-value.", ""]
        md += [_tab.md_table(h, r), ""]
        sections.append(("A/B verdicts", h, r))
    h, r = _tab.summary_rows(summ, metric)
    md += ["## Summary", "", _tab.md_table(h, r), ""]
    sections.append(("summary", h, r))
    if "var_process" in summ.columns:
        vc = summ[[c for c in summ.columns if c in group_columns(df) or c in
                   ("var_process", "var_iteration", "process_share")]]
        md += ["Variance components (Kalibera & Jones; process = one trial process, iteration = "
               "in-process repeat):", "",
               _tab.md_table(list(vc.columns), [[("n/a" if isinstance(v, float) and math.isnan(v) else
                                                 (f"{v:.4g}" if isinstance(v, float) else str(v)))
                                                for v in row] for row in vc.itertuples(index=False)]), ""]
    h, r = _tab.counter_rows(meas, group_columns(df))
    md += ["## Counters (medians)", "", _tab.md_table(h, r), ""]
    sections.append(("counters", h, r))
    md += ["## Distributions, outliers and causes", ""]
    md += [f"- {d['text']}" for d in diags] + [""]
    if ab:
        md += ["## Instructions vs time", ""] + [f"- {a['text']}" for a in ab] + [""]
    paths = {}
    (run_dir / "summary.md").write_text("\n".join(md), encoding="utf-8")
    paths["summary.md"] = run_dir / "summary.md"
    csv = summ.copy()
    csv.insert(0, "metric", metric)
    csv.to_csv(run_dir / "summary.csv", index=False)
    paths["summary.csv"] = run_dir / "summary.csv"
    if cmp is not None and len(cmp):
        cmp.to_csv(run_dir / "compare.csv", index=False)
        paths["compare.csv"] = run_dir / "compare.csv"
    _tab.write_tex(run_dir / "summary.tex", sections)
    paths["summary.tex"] = run_dir / "summary.tex"
    if figures and len(meas):
        paths["figures"] = _fig.render_all(meas, metric, params, run_dir / "figures")
    return paths


__all__ = ["write_report", "pick_metric", "pick_baseline"]
