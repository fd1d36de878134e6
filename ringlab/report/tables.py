"""summary.md / summary.csv / summary.tex from the statistics (no statistics here).

The markdown comparison table reads like the mails' tables::

    | mode | size | unpatched (batch) | patched (reorder) | delta | 95% CI | p | verdict |

``delta`` is (candidate - baseline) / baseline on the medians; for lower-is-better
metrics a labelled extra column gives the mails' sign ("+6.2%" = candidate faster).
"""
from __future__ import annotations

import math

import pandas as pd

from ringlab.stats.summary import format_value

NA_COUNTERS = "n/a (not supported here)"
COUNTER_TABLE = [("ipc", "IPC", "{:.3g}"), ("branch_miss_rate", "branch-miss rate", "{:.3%}"),
                 ("instructions_per_op", "instructions/op", "{:.4g}")]


def _pct(x, signed=True) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return f"{x:+.1f}%" if signed else f"{x:.1f}%"


def _p(x) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    return "< 0.001" if x < 0.001 else f"{x:.3g}"


def _label(name: str, labels: dict | None) -> str:
    lab = (labels or {}).get(name)
    return f"{lab} ({name})" if lab else name


def _varying(frame: pd.DataFrame, cols: list[str]) -> list[str]:
    """Columns that take more than one value (constant ones, e.g. a single requested CPU
    pair, would only widen the table); keep at least ``variant`` when present."""
    keep = [c for c in cols if c in frame.columns and frame[c].astype(str).nunique() > 1]
    return keep or [c for c in cols if c == "variant"]


def constant_settings(frame: pd.DataFrame, cols: list[str]) -> str:
    """"pair_class=same-llc, cpu_req_producer=1" for the columns left out of a table."""
    return ", ".join(f"{c}={frame[c].iloc[0]}" for c in cols
                     if c in frame.columns and len(frame) and frame[c].astype(str).nunique() == 1
                     and c != "variant")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def comparison_rows(cmp: pd.DataFrame, labels: dict | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the mail-style comparison table."""
    metric = cmp.attrs.get("metric", "ns_per_op")
    gcols = _varying(cmp, list(cmp.attrs.get("group_columns", [])))
    lib = bool(cmp["lower_is_better"].iloc[0]) if len(cmp) and "lower_is_better" in cmp else False
    single = cmp["candidate"].nunique() == 1 and cmp["baseline"].nunique() == 1
    if single:  # the mails' layout: one column per arm, labelled
        arms = [_label(cmp["baseline"].iloc[0], labels), _label(cmp["candidate"].iloc[0], labels)]
    else:
        arms = ["baseline", "candidate"]
    header = gcols + arms + ["delta", "95% CI", "p", "verdict"]
    if lib:
        header.insert(len(gcols) + 3, "gain (mail sign: + = candidate faster)")
    rows = []
    for _, r in cmp.iterrows():
        row = [str(r[c]) for c in gcols]
        mb, mc = format_value(r["median_baseline"], metric), format_value(r["median_candidate"], metric)
        if single:
            row += [mb, mc]
        else:
            row += [f"{_label(r['baseline'], labels)}: {mb}", f"{_label(r['candidate'], labels)}: {mc}"]
        row.append(_pct(r["delta_pct"]))
        if lib:
            row.append(_pct(r["gain_pct"]))
        ci = "n/a" if not math.isfinite(r["ci_low_pct"]) else f"[{r['ci_low_pct']:+.1f}%, {r['ci_high_pct']:+.1f}%]"
        verdict = r["verdict"]
        if isinstance(r.get("note"), str) and r["note"]:
            verdict += f" ({r['note']})"
        if math.isfinite(r["trials_needed"]) if isinstance(r["trials_needed"], float) else False:
            verdict += f"; ~{int(r['trials_needed'])} trials/arm needed"
        row += [ci, _p(r["p_holm"]), verdict]
        rows.append(row)
    return header, rows


def summary_rows(summ: pd.DataFrame, metric: str) -> tuple[list[str], list[list[str]]]:
    gcols = _varying(summ, [c for c in summ.columns if c not in SUMMARY_STAT_COLS and not c.startswith("clean_")
                            and c not in ("var_process", "var_iteration", "process_share")])
    header = gcols + ["n", "median [95% CI]", "mean [95% CI]", "CV", "p5-p95",
                      "outliers (mild/severe)", "median w/o severe"]
    rows = []
    f = lambda x: format_value(x, metric)  # noqa: E731
    for _, r in summ.iterrows():
        rows.append([str(r[c]) for c in gcols] + [
            f"{int(r['n'])} (+{int(r['n_excluded'])} excluded)" if r["n_excluded"] else str(int(r["n"])),
            f"{f(r['median'])} [{f(r['median_ci_low'])}, {f(r['median_ci_high'])}]",
            f"{f(r['mean'])} [{f(r['mean_ci_low'])}, {f(r['mean_ci_high'])}]",
            "n/a" if not math.isfinite(r["cv"]) else f"{r['cv'] * 100:.2f}%",
            f"{f(r['p5'])} - {f(r['p95'])}",
            f"{int(r['n_mild'])}/{int(r['n_severe'])}",
            f"{f(r['clean_median'])} ({int(r['clean_n_removed'])} removed)"])
    return header, rows


SUMMARY_STAT_COLS = {"n_excluded", "n", "mean", "median", "std", "cv", "min", "max", "p5", "p95", "mad",
                     "mean_ci_low", "mean_ci_high", "median_ci_low", "median_ci_high", "n_mild",
                     "n_severe", "clean_n_removed"}


def counter_rows(df: pd.DataFrame, group_cols: list[str]) -> tuple[list[str], list[list[str]]]:
    """Median IPC / branch-miss rate / instructions per op per group, n/a where all NaN."""
    group_cols = _varying(df, group_cols)
    header = group_cols + [name for _, name, _ in COUNTER_TABLE]
    rows = []
    groups = df.groupby(group_cols, sort=True, dropna=False) if group_cols else [((), df)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = [str(k) for k in key]
        for col, _, fmt in COUNTER_TABLE:
            v = pd.to_numeric(sub[col], errors="coerce").dropna() if col in sub.columns else pd.Series([], dtype=float)
            row.append(fmt.format(float(v.median())) if len(v) else NA_COUNTERS)
        rows.append(row)
    return header, rows


def write_tex(path, sections: list[tuple[str, list[str], list[list[str]]]]) -> None:
    """Plain LaTeX tabulars (booktabs), one per section; no jinja2 needed."""
    def esc(s: str) -> str:
        for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                     ("#", r"\#"), ("$", r"\$"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}")):
            s = s.replace(a, b) if a != "\\" else s.replace(a, "\x00")
        return s.replace("\x00", r"\textbackslash{}")
    out = ["% generated by ringlab; requires \\usepackage{booktabs}"]
    for title, header, rows in sections:
        out += [f"% {title}", "\\begin{tabular}{" + "l" * len(header) + "}", "\\toprule",
                " & ".join(esc(h) for h in header) + " \\\\", "\\midrule"]
        out += [" & ".join(esc(str(c)) for c in r) + " \\\\" for r in rows]
        out += ["\\bottomrule", "\\end{tabular}", ""]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(out))
