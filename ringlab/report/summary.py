"""The report of one run folder: ``report`` / ``build`` compute its :class:`Analysis`, render
summary.md, summary.csv, summary.tex, compare.csv and figures/, have :mod:`ringlab.rundir` write
them, and return a :class:`Report` (the package docstring, ringlab/report/__init__.py, lists its
fields)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab import fmt, rundir, schema
from ringlab.report import figures as _fig
from ringlab.report import tables as _tab
from ringlab.report.analysis import Analysis
from ringlab.rundir.calibration import run_host
from ringlab.rundir.reader import raw_experiment
from ringlab.report.method_text import method_text
from ringlab.report.stopping_sentences import stopping_text
from ringlab.stats.summary import BOOTSTRAP_MAX_N, CI_METHOD_LARGE_N, group_columns

TABLES = ("ab", "summary", "variance", "counters")


@dataclass
class Report:
    run_dir: Path
    metric: str
    baseline: str | None
    status: str
    markdown: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: dict[str, Path] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    paths: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)   # {file name: rendered text}, as written
    #: the numbers the report was rendered from; the mail and the notebook tables read them too
    analysis: Analysis | None = field(default=None, repr=False, compare=False)

    def why_missing(self, name: str) -> str:
        """Why table or figure ``name`` is not in this report (a sentence; "" when it is)."""
        if name in self.missing:
            return self.missing[name]
        if name in self.tables or name in self.figures:
            return ""
        known = sorted(set(TABLES) | set(_fig.FIGURES) | {"size_sweep", "forest"})
        return f"'{name}' is not a table or figure of a run report; known: {', '.join(known)}"


def excluded_text(df: pd.DataFrame, meas: pd.DataFrame, excluded: dict, metric: str) -> str:
    """The sentence that says which rows the timing statistics leave out, and why.

    Rows "without a value" are mostly callgrind instruction-count trials: they run the
    measured region under valgrind, are not timed by design, and fill instructions/op."""
    missing = int(excluded.get("metric_missing", 0))
    parts = [f"{excluded.get('warmup', 0)} warm-up", f"{excluded.get('status_not_ok', 0)} not ok"]
    if missing:
        ok = df["status"].astype(str).eq("ok") if "status" in df.columns else pd.Series(True, index=df.index)
        no_val = pd.to_numeric(df[metric], errors="coerce").isna() & ok
        n_cg = int((no_val & _tab.is_callgrind(df)).sum())
        why = []
        if n_cg:
            why.append(f"{n_cg} callgrind instruction-count trials, untimed by design: they give "
                       "the instructions/op column")
        if missing - n_cg > 0:
            why.append(f"{missing - n_cg} trials that recorded no {metric}")
        parts.append(f"{missing} without a {metric} value ({'; '.join(why)})")
    return (f"{len(meas)} measurements; excluded {excluded['total']} rows from the {metric} "
            f"statistics: " + ", ".join(parts) + ".")


def _frame(header: list[str], rows: list[list[str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=header)


def _ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    return schema.measured(df)


def _why_no_figure(name: str, meas: pd.DataFrame, metric: str) -> str:
    if name == "spsc":
        if metric != "ns_per_op":
            return f"the SPSC throughput figure needs ns_per_op; this run's metric is {metric}"
        return ("no core-to-core latency was measured (c2c_latency_ns is empty: no two-thread "
                "trial ran on a CPU pair, e.g. mode 0 only, cpus=none, or a single-CPU machine)")
    if name == "cpu_pairs":
        return "fewer than 4 distinct (producer CPU, consumer CPU) pairs were measured (cpus=all gives more)"
    if name == "counters":
        return ("no IPC, branch-miss rate or instructions/op in the timed trials (no hardware PMU here: "
                "`perf stat` says 'not supported'); callgrind counts, if any, are in the Counters table")
    if name == "order":
        return "raw.csv has no execution-order column"
    if name in ("box", "ecdf"):
        return f"no {metric} measurement to draw"
    return "not applicable to this run"


def compute(run_dir, metric: str | None = None, baseline: str | None = None, labels: dict | None = None,
            patched: str | None = None) -> Analysis:
    """Read ``run_dir`` and compute every statistic of its report (nothing is written): its
    :class:`ringlab.report.analysis.Analysis`, which the mail and the notebook tables read too."""
    return Analysis(run_dir, metric, baseline, labels, patched).compute()


def _method(cmp: pd.DataFrame) -> str:
    """How the effect was estimated (``method_text``), worded for the + = better %change."""
    text = method_text(cmp)
    # the CI levels are stated once: in the table's heading and Holm's footnote
    return text.split("; p Holm-corrected over the run")[0].rstrip(".") + "."


def _head(c: Analysis) -> list[str]:
    """summary.md's title and the sentences above its tables."""
    run, df, env, metric, meas, excluded, params = c.run, c.df, c.env, c.metric, c.measurements, c.excluded, c.params
    title = df['experiment'].iloc[0] if 'experiment' in df.columns and len(df) else 'run'
    md = [f"# {title}: {metric}", ""]
    if run.status_line:
        md += [f"**{run.status_line}** The numbers below cover only the trials that were recorded.", ""]
    stopped = stopping_text(env.stopping_record)
    if stopped:
        md += [stopped, ""]
    md.append(excluded_text(df, meas, excluded, metric))
    if env.host or env.hostname:
        md.append(f"Host: {env.host or env.hostname}.")
    md.append(_tab.noise_floor_text(run_host(df, env), c.noise_floor))
    const = _tab.constant_settings(df, params)
    if const:
        md.append(f"Same in every trial (left out of the tables): {const}.")
    md.append("")
    return md


def _render(c: Analysis) -> tuple[Report, list]:
    """The Report (tables, markdown, what is missing) and the sections of summary.tex."""
    df, metric, base, labels = c.df, c.metric, c.baseline, c.labels
    meas, summ, cmp, diags, ab = c.measurements, c.summary, c.comparison, c.diagnoses, c.instructions_vs_time
    rep = Report(c.run.path, metric, base, c.run.status, "")
    md = _head(c)
    sections = []
    if cmp is not None and len(cmp):
        h, r = _tab.comparison_rows(cmp, labels, c.noise_floor)
        rep.tables["ab"] = _frame(h, r)
        md += [f"## A/B verdicts (baseline {base})", "", _tab.sign_text(cmp), ""]
        if "note" in cmp.columns and (cmp["note"] == "exact (deterministic metric)").any():
            md += ["Rows marked 'exact (deterministic metric)' compare values that did not vary at all "
                   "between trials: the difference is exact, there is no CI or p-value.", ""]
        md += [fmt.md_table(h, r), ""]
        foot = _tab.holm_footnote(cmp)
        md += ([foot, ""] if foot else [])
        md += (_tab.interval_lines(cmp) + [""]) if _tab.has_next(cmp) else []
        md += [f"Method: {_method(cmp)}", ""]
        sections.append(("A/B verdicts", h, r))
    elif base is None:
        rep.missing["ab"] = "this run has a single variant: there is nothing to compare"
    else:
        rep.missing["ab"] = f"no configuration has measurements of both {base} and another variant"
    h, r = _tab.summary_rows(summ, metric)
    rep.tables["summary"] = _frame(h, r)
    md += ["## Summary", "", fmt.md_table(h, r), ""]
    md += _ci_method_lines(summ)
    sections.append(("summary", h, r))
    md += _variance(rep, df, summ)
    h, r = _tab.counter_rows(meas, group_columns(df), icount=_ok_rows(df))
    rep.tables["counters"] = _frame(h, r)
    md += ["## Counters (medians)", ""]
    if any(_tab.CALLGRIND_MARK in c for row in r for c in row):
        md += [f"instructions/op marked {_tab.CALLGRIND_MARK} was counted by callgrind in separate, untimed "
               "trials of the same configuration (exact and repeatable), because hardware counters gave "
               "no value here.", ""]
    md += [fmt.md_table(h, r), ""]
    sections.append(("counters", h, r))
    md += ["## Distributions, outliers and causes", ""]
    md += [f"- {d['text']}" for d in diags] + [""]
    if ab:
        md += ["## Instructions vs time", ""] + [f"- {a['text']}" for a in ab] + [""]
    rep.markdown = "\n".join(md)
    return rep, sections


def _ci_method_lines(summ: pd.DataFrame) -> list[str]:
    """The sentence under the Summary table that says how the CIs of groups above
    ``BOOTSTRAP_MAX_N`` values were computed (none when every group was resampled)."""
    if "ci_method" not in summ.columns or not (summ["ci_method"] == CI_METHOD_LARGE_N).any():
        return []
    return [f"CIs of groups with more than {BOOTSTRAP_MAX_N:,} measurements: Student's t interval of the mean and "
            "the distribution-free binomial order-statistic interval of the median, not resampled; the other "
            "groups' are percentile bootstraps.", ""]


def _variance(rep: Report, df: pd.DataFrame, summ: pd.DataFrame) -> list[str]:
    """The variance components table (rep.tables["variance"]) and its lines of summary.md."""
    if "var_process" in summ.columns:
        vc = summ[[c for c in summ.columns if c in group_columns(df) or c in
                   ("var_process", "var_iteration", "process_share")]]
        vrows = [[fmt.NA if isinstance(v, float) and math.isnan(v) else
                  (f"{v:.4g}" if isinstance(v, float) else str(v)) for v in row]
                 for row in vc.itertuples(index=False)]
        rep.tables["variance"] = _frame(list(vc.columns), vrows)
        return ["Variance components (Kalibera & Jones; process = one trial process, iteration = "
                "in-process repeat):", "", fmt.md_table(list(vc.columns), vrows), ""]
    rep.missing["variance"] = "one iteration per trial process: no within-process repeats to split variance"
    return []


def render_files(rep: Report, c: Analysis, sections: list) -> dict[str, str]:
    """The text of every file of the report: summary.md, summary.csv, compare.csv (when there
    is a comparison) and summary.tex; {file name: text}."""
    csv = c.summary.copy()
    csv.insert(0, "metric", c.metric)
    files = {"summary.md": rep.markdown, "summary.csv": csv.to_csv(index=False)}
    if c.comparison is not None and len(c.comparison):
        files["compare.csv"] = c.comparison.to_csv(index=False)
    files["summary.tex"] = _tab.tex_text(sections)
    return files


def _draw(rep: Report, c: Analysis, out_dir: Path) -> None:
    """Render every applicable figure into out_dir/figures/ (through rundir.write_figure)."""
    meas, metric, base = c.measurements, c.metric, c.baseline
    figdir = Path(out_dir) / "figures"
    ring = c.env.experiment or raw_experiment(c.df)
    drawn = _fig.render_all(meas, metric, c.params, figdir, ring=ring)
    if _fig.wants_size_sweep(meas):
        drawn["size_sweep"] = _fig.size_sweep(meas, metric, figdir, baseline=base,
                                              patched=c.patched, labels=c.labels)
    if c.comparison is not None and len(c.comparison):
        # the headline figure of an A/B run: each row's CI, next-run interval and call
        bound = (c.noise_floor or {}).get("bound_pct")
        paths = _fig.forest(_fig.effect_rows(c.comparison, ""), figdir, "forest",
                            f"{ring or 'run'} on {c.host or 'this host'}: each arm against {base}, {metric}",
                            noise={"": bound} if bound is not None else None)
        if paths:
            drawn["forest"] = paths
    rep.paths["figures"] = drawn
    rep.figures = {k: next(p for p in v if p.suffix == ".png") for k, v in drawn.items()}
    for name in _fig.FIGURES:
        if name not in rep.figures:
            rep.missing[name] = _why_no_figure(name, meas, metric)
    if "size_sweep" not in rep.figures:
        rep.missing["size_sweep"] = "this run measured one ring size: there is no sweep to draw"
    if "forest" not in rep.figures:
        rep.missing["forest"] = "this run has one variant: no comparison to draw"


def build(run_dir, metric: str | None = None, baseline: str | None = None, labels: dict | None = None,
          figures: bool = True, patched: str | None = None, out_dir=None) -> Report:
    """Compute, render, write (through ``ringlab.rundir``) and return the report of ``run_dir``
    (see the module docstring).  ``run_dir`` may be an :class:`Analysis` already computed (its
    own metric, baseline, labels and patched arm then stand).  ``out_dir``: a folder the files
    and figures/ are written to instead of the run folder, which is then only read; the
    Report's ``files`` hold the texts all the same."""
    c = run_dir.compute() if isinstance(run_dir, Analysis) else compute(run_dir, metric, baseline, labels, patched)
    rep, sections = _render(c)
    rep.analysis = c
    rep.files = render_files(rep, c, sections)
    target = rep.run_dir if out_dir is None else Path(out_dir)
    for name, text in rep.files.items():
        rep.paths[name] = rundir.write_text(target, name, text)
    if figures and len(c.measurements):
        _draw(rep, c, target)
    else:
        why = "figures were not requested" if not figures else f"no {c.metric} measurement to draw"
        rep.missing.update({n: why for n in list(_fig.FIGURES) + ["size_sweep", "forest"]})
    return rep


def report(run, metric: str | None = None, baseline: str | None = None, labels: dict | None = None,
           figures: bool = True, patched: str | None = None, out_dir=None) -> Report:
    """The report of run folder ``run``: named tables and figures (files written as well, into
    ``out_dir`` when given).  ``Report.analysis`` holds the numbers: pass the Report to
    ``report.mail.mail_text`` and to the ``report.vs_published`` tables to render them from the
    same computation."""
    return build(run, metric=metric, baseline=baseline, labels=labels, figures=figures, patched=patched,
                 out_dir=out_dir)


def write_report(run_dir, metric: str | None = None, baseline: str | None = None,
                 labels: dict | None = None, figures: bool = True) -> dict:
    """Write summary.md/csv/tex (+ figures/) into ``run_dir``; returns {name: path or {id: [paths]}}."""
    return build(run_dir, metric=metric, baseline=baseline, labels=labels, figures=figures).paths

