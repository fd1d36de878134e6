"""Tables in the seed threads' shapes, and published-vs-reproduced comparisons.

Everything here reads a run (a run folder, or the ``Report`` / ``Analysis`` of one: see
:mod:`ringlab.report.analysis`), takes its comparisons from the run's Analysis, where each is
computed once for summary.md, mail.txt and these tables together, and arranges them the way the
mailing-list threads did.  Each table is made once per Analysis and arguments.  The
published figures come from ``ringlab.published`` and are only ever set beside
ours as ratios: different machines, kernels and harnesses make absolute numbers
incomparable.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd

from ringlab import fmt
from ringlab.catalog import SEED000, SEED003, UNSETTLED
from ringlab.report import published
from ringlab.report import tables as _tab
from ringlab.report.analysis import Analysis
from ringlab.stats import measurements, summarize
from ringlab.rundir import RunEnv
from ringlab.report import provenance
from ringlab.report.figures import size_sweep
from ringlab.sources.builtin_patches import effective_batch
from ringlab.tools.perfstat import parse_perf_stat


def load(run_dir) -> tuple[pd.DataFrame, dict]:
    """raw.csv and env.json of a run (folder, Report or Analysis)."""
    a = Analysis.for_run(run_dir)
    return a.df, a.env


def _one_table(make):
    """``make(analysis, ...)`` as a table of a run: made once per Analysis and arguments (a copy
    is returned, so that a caller may change its own)."""
    @functools.wraps(make)
    def table(run_dir, *args, **kwargs) -> pd.DataFrame:
        a = Analysis.for_run(run_dir)
        key = ("table", make.__name__, repr(args), repr(sorted(kwargs.items())))
        return a.kept(key, lambda: make(a, *args, **kwargs)).copy()
    return table


def arch_label(env: RunEnv) -> str:
    """'x86_64 (vm)': the machine column of the mail tables."""
    env = RunEnv.of(env)
    host = (env.environment.get("host") if env.environment else env.host) or {}
    if isinstance(host, str):   # no machine recorded: the host's name
        return host
    return f"{host.get('machine', '?')} ({host.get('host_id') or env.host or '?'})"


_pct = fmt.pct
_ci = fmt.ci
_p = fmt.p


def _config_cols(cmp: pd.DataFrame) -> list[str]:
    cols = cmp.attrs.get("group_columns") or []
    keep = [c for c in cols if c not in ("count", "cpu_req_producer", "cpu_req_consumer")]
    return [c for c in keep if c in cmp.columns and cmp[c].nunique(dropna=False) > 1] or \
        [c for c in ("mode", "pair_class") if c in cmp.columns]


@_one_table
def mail_table(a: Analysis, baseline: str, patched: str, metric: str = "ns_per_op") -> pd.DataFrame:
    """Seed 000's table: arch | config | unpatched | patched | %change (+ CI, p, verdict).

    The arm columns are the centers the effect is computed from (their ratio is the %change);
    %change is + = better: (unpatched - patched) / unpatched for times, so "+6.2%" means the
    patched ring is faster, with its CI in the same sign under the report's one CI heading."""
    df, env = a.df, a.env
    cmp = a.compare(baseline, metric)
    cmp = cmp[cmp["candidate"] == patched]
    arch = arch_label(env)
    cfg = _config_cols(cmp)
    change, cih = _tab.change_header(cmp), _tab.ci_heading(cmp)
    rows = []
    for _, r in cmp.iterrows():
        row = {"arch": arch}
        row.update({c: r[c] for c in cfg})
        cb, cc = _tab.arm_centers(r)
        row[f"unpatched ({baseline}) {metric}"] = cb
        row[f"patched ({patched}) {metric}"] = cc
        row[change] = _tab.row_change_text(r)
        row[f"{cih} of {_tab.CHANGE}"] = _tab.row_change_ci_text(r)
        row["p (Holm)"] = _p(r["p_holm"])
        row["n"] = f"{int(r['n_baseline'])}/{int(r['n_candidate'])}"
        row["verdict"] = r["verdict"] + (f" (need ~{int(r['trials_needed'])} trials/arm)"
                                         if r["verdict"] in UNSETTLED and not math.isnan(r["trials_needed"])
                                         else "")
        rows.append(row)
    return pd.DataFrame(rows)


@_one_table
def published_vs_reproduced_reorder(a: Analysis, baseline: str = SEED000.baseline,
                                    patched: str = SEED000.patched) -> pd.DataFrame:
    """patched/unpatched time ratios: the mail's (arm64, x86) beside ours, per mode."""
    df, env = a.df, a.env
    pub = published.ptr_ring_reorder_table()
    cmp = a.compare(baseline, "ns_per_op")
    cmp = cmp[cmp["candidate"] == patched]
    cih = f"{_tab.ci_heading(cmp)} of ratio"
    rows = [{"source": f"published ({r.arch}, seed 000)", "mode": r.mode,
             "pair_class": "taskset -c 1" if r.mode == 0 else "taskset -c 1-2",
             "unpatched": f"{r.unpatched_ms} ms", "patched": f"{r.patched_ms} ms",
             "patched / unpatched": round(r.ratio_patched_over_unpatched, 4), cih: "not published",
             "%change (+ = faster)": r.delta_published} for r in pub.itertuples()]
    for _, r in cmp.iterrows():
        rows.append({"source": f"reproduced ({arch_label(env)})", "mode": r.get("mode"),
                     "pair_class": r.get("pair_class", ""),
                     "unpatched": f"{_tab.arm_centers(r)[0]:.3f} ns/op",
                     "patched": f"{_tab.arm_centers(r)[1]:.3f} ns/op",
                     "patched / unpatched": round(1 + r["delta_pct"] / 100, 4),
                     cih: (f"[{1 + r['ci_low_pct'] / 100:.4f}, {1 + r['ci_high_pct'] / 100:.4f}]"
                                         if not math.isnan(r["ci_low_pct"]) else "n/a"),
                     "%change (+ = faster)": _tab.row_change_text(r)})
    return pd.DataFrame(rows)


@_one_table
def instructions_vs_published(a: Analysis) -> pd.DataFrame:
    """Instructions per op (mode 0) per variant: callgrind/perf here, perf stat in the mail."""
    df, env = a.df, a.env
    rows = []
    pub, how, ref = SEED000.counts.counts(), dict(SEED000.counts.how), SEED000.baseline
    for v, ipo in pub.items():
        rows.append({"source": "published (x86 perf stat, seed 000)", "variant": v, "instructions_per_op": round(ipo, 2),
                     "how": how[v], "ratio to batch": round(ipo / pub[ref], 4)})
    if "instructions_per_op" in df.columns:
        meas, _ = measurements(df, "instructions_per_op")
        if "mode" in meas.columns:
            meas = meas[meas["mode"].astype(str) == "0"]
        src_col = meas["icount_source"].fillna("perf") if "icount_source" in meas.columns else "perf"
        meas = meas.assign(_src=src_col)
        med = meas.groupby(["_src", "variant"])["instructions_per_op"].agg(["median", "min", "max", "count"])
        for (src, v), r in med.iterrows():
            base = med.loc[(src, ref), "median"] if (src, ref) in med.index else float("nan")
            exact = r["min"] == r["max"]
            rows.append({"source": f"reproduced ({src}, {arch_label(env)})", "variant": v,
                         "instructions_per_op": round(float(r["median"]), 2),
                         "how": f"{int(r['count'])} runs, " + ("identical counts" if exact
                                                                  else f"range {r['min']:.2f}-{r['max']:.2f}"),
                         "ratio to batch": round(float(r["median"]) / base, 4) if base == base else float("nan")})
    if len(rows) == len(pub):
        rows.append({"source": "reproduced", "variant": "-", "instructions_per_op": float("nan"),
                     "how": "no instruction counts in this run (no hardware counters and icount=false "
                            "or valgrind unavailable)", "ratio to batch": float("nan")})
    return pd.DataFrame(rows)


@_one_table
def size_sweep_table(a: Analysis, baseline: str = SEED003.baseline, metric: str = "ns_per_op") -> pd.DataFrame:
    """Per ring size: the batch the ring used (``effective batch``: the configuration's ``batch`` 0
    is the ring's default), the arms' centers the effect is computed from, %change (+ = better)
    with its CI in the same sign under the one CI heading (``tables.ci_heading``), p (Holm), verdict."""
    df = a.df
    cmp = a.compare(baseline, metric)
    change, cih = _tab.change_header(cmp), f"{_tab.ci_heading(cmp)} of {_tab.CHANGE}"
    rows = []
    for _, r in cmp.sort_values([c for c in ("mode", "pair_class", "size") if c in cmp.columns]).iterrows():
        size = int(r["size"])
        cb, cc = _tab.arm_centers(r)
        rows.append({"mode": r.get("mode"), "pair_class": r.get("pair_class"), "size": size,
                     "effective batch": effective_batch(size, int(r.get("batch", 0) or 0)),
                     f"{baseline} ns/op": cb, f"{r['candidate']} ns/op": cc,
                     change: _tab.row_change_text(r), cih: _tab.row_change_ci_text(r),
                     "p (Holm)": _p(r["p_holm"]), "verdict": r["verdict"]})
    return pd.DataFrame(rows)


@_one_table
def by_placement_table(a: Analysis, baseline: str, metric: str = "ns_per_op") -> pd.DataFrame:
    """The A/B verdict per placement (same CPU vs pairs), the seed-002 question, in the tables'
    one sign (+ = better) beside the arms' centers the effect is computed from."""
    df = a.df
    cmp = a.compare(baseline, metric)
    change, cih = _tab.change_header(cmp), f"{_tab.ci_heading(cmp)} of {_tab.CHANGE}"
    cols = [c for c in ("pair_class", "cpu_req_producer", "cpu_req_consumer", "align", "alloc_len") if c in cmp.columns]
    rows = []
    for _, r in cmp.sort_values(cols).iterrows():
        row = {c: r[c] for c in cols}
        cb, cc = _tab.arm_centers(r)
        row.update({"candidate": r["candidate"], f"{baseline} {metric}": cb,
                    f"candidate {metric}": cc, change: _tab.row_change_text(r),
                    cih: _tab.row_change_ci_text(r),
                    "p (Holm)": _p(r["p_holm"]), "verdict": r["verdict"]})
        rows.append(row)
    return pd.DataFrame(rows)


def provenance_text(run_dir) -> str:
    rep = provenance.check(run_dir)
    lines = [f"Run `{rep.get('run_id')}` on host `{rep.get('host')}`, git "
             f"`{(rep.get('git') or {}).get('commit', '?')}`"
             + (" (dirty tree)" if (rep.get("git") or {}).get("dirty") else "") + ".", ""]
    lines.append(fmt.md_table(["variant", "binary sha256", "first measured", "last measured"],
                              [[v, ", ".join(h[:12] for h in info["sha256"]) or "n/a", info["first"], info["last"]]
                               for v, info in sorted(rep["variants"].items())]))
    lines += ["", fmt.md_table(["A", "B", "verdict", "differing sources"],
                               [[p["a"], p["b"], p["verdict"],
                                 ", ".join(Path(s).name for s in p["differing_sources"]) or "-"]
                                for p in rep["pairs"]])]
    lines += [""] + ([f"- **problem:** {x}" for x in rep["problems"]] or ["No provenance problems found."])
    return "\n".join(lines)


@_one_table
def published_vs_reproduced_page_frag(a: Analysis, baseline: str = "before") -> pd.DataFrame:
    """after/before elapsed-time ratios: the thread's perf stat -r 200 blocks beside ours."""
    blocks = parse_perf_stat(published.page_frag_perfstat_text())
    rows = []
    label = None
    for b in blocks:
        cmd = b.command or ""
        label = ("after" if "after" in (b.label or "").lower() else
                 "before" if "before" in (b.label or "").lower() else label)
        aligned = "test_align=1" in cmd
        same_cpu = "test_push_cpu=0 test_pop_cpu=0" in cmd
        rows.append({"label": label, "aligned": aligned, "same_cpu": same_cpu, "elapsed_s": b.elapsed_s,
                     "runs": b.runs})
    pub = pd.DataFrame(rows)
    out = []
    for (aligned, same), g in pub.groupby(["aligned", "same_cpu"]):
        bef = g.loc[g["label"] == "before", "elapsed_s"]
        aft = g.loc[g["label"] == "after", "elapsed_s"]
        if len(bef) and len(aft):
            out.append({"source": "published (kernel module, seed 002)", "align": int(aligned),
                        "placement": "same CPU (0/0)" if same else "CPUs 16/17",
                        "before": f"{bef.iloc[0]:.3f} s", "after": f"{aft.iloc[0]:.3f} s",
                        "after / before": round(aft.iloc[0] / bef.iloc[0], 4), "95% CI of ratio": "not published",
                        "verdict": "-"})
    df, env = a.df, a.env
    cmp = a.compare(baseline, "ns_per_op")
    if "alloc_len" in cmp.columns:
        cmp = cmp[cmp["alloc_len"].astype(int) == 12] if (cmp["alloc_len"].astype(int) == 12).any() else cmp
    for _, r in cmp.iterrows():
        out.append({"source": f"reproduced ({arch_label(env)})", "align": r.get("align"),
                    "placement": r.get("pair_class"),
                    "before": f"{r['median_baseline']:.2f} ns/op", "after": f"{r['median_candidate']:.2f} ns/op",
                    "after / before": round(1 + r["delta_pct"] / 100, 4),
                    "95% CI of ratio": (f"[{1 + r['ci_low_pct'] / 100:.3f}, {1 + r['ci_high_pct'] / 100:.3f}]"
                               if not math.isnan(r["ci_low_pct"]) else "n/a"),
                    "verdict": r["verdict"]})
    return pd.DataFrame(out)


def _batch_rows(run_dir, baseline: str) -> list[dict]:
    a = Analysis.for_run(run_dir)
    env = a.env
    cmp = a.compare(baseline, "ns_per_op")
    sort = [c for c in ("mode", "pair_class", "lock", "batch", "size") if c in cmp.columns]
    rows = []
    for _, r in cmp.sort_values(sort).iterrows():
        # throughput ratio = baseline time / candidate time
        ratio = 1 / (1 + r["delta_pct"] / 100)
        ci = ("n/a" if math.isnan(r["ci_low_pct"]) else
              f"[{1 / (1 + r['ci_high_pct'] / 100):.3f}, {1 / (1 + r['ci_low_pct'] / 100):.3f}]")
        size = int(r["size"]) if "size" in r and r["size"] == r["size"] else None
        given = int(r.get("batch", 0) or 0)
        parts = [str(r["candidate"])] + ([f"size {size}", f"batch {effective_batch(size, given)}"]
                                         if size is not None else []) + \
            ([f"lock {'on' if str(r['lock']).lower() in ('true', '1') else 'off'}"] if "lock" in r else []) + \
            [f"mode {r.get('mode')}", str(r.get("pair_class"))]
        rows.append({"source": f"reproduced ({arch_label(env)})", "config": ", ".join(parts),
                     "throughput ratio to prebatch": round(ratio, 4), "CI of ratio": ci,
                     "CI level": fmt.ci_header(r.get("ci_level")).split(" ")[0], "verdict": r["verdict"]})
    return rows


@_one_table
def published_vs_reproduced_batch(a: Analysis, baseline: str = SEED003.baseline, more=()) -> pd.DataFrame:
    """Seed 003's vhost Mpps ratios beside our throughput ratios: every ring size (with its
    effective batch), lock arm and pair of the run, and of the runs in ``more`` (other hosts'
    runs, side by side: one block per run).  ``CI level`` gives each row's printed level (95%;
    the verdicts are Holm-adjusted per family)."""
    pub = published.batch_zeroing_mpps()
    rows = [{"source": "published (vhost, seed 003)", "config": r.config, "throughput ratio to prebatch":
             round(r.ratio_to_before, 4), "CI of ratio": "not published", "CI level": "-", "verdict": "-"}
            for r in pub.itertuples()]
    for d in [a, *more]:
        rows += _batch_rows(d, baseline)
    return pd.DataFrame(rows)


# -- seed 004 -------------------------------------------------------------------------------

def _elapsed_metric(df: pd.DataFrame) -> str:
    return "elapsed_us" if "elapsed_us" in df.columns else "elapsed_ns"


@_one_table
def perf_rb_table(a: Analysis) -> pd.DataFrame:
    """MEAN, STDVAR (standard deviation, as the thread used it) and median per config and placement."""
    df = a.df
    metric = _elapsed_metric(df)
    summ = summarize(df, metric, by=["placement"] if "placement" in df.columns else None)
    rows = []
    base = summ[summ["variant"] == "base"].set_index("placement")["median"] if "placement" in summ.columns else None
    count = int(pd.to_numeric(df["count"], errors="coerce").dropna().iloc[0]) if "count" in df.columns else None
    for _, r in summ.sort_values(["placement", "variant"]).iterrows():
        per_record = float("nan")
        if base is not None and r["variant"] != "base" and r["placement"] in base.index and count:
            per_record = (r["median"] - base[r["placement"]]) * (1000.0 if metric == "elapsed_us" else 1.0) / count
        rows.append({"config": r["variant"], "placement": r.get("placement"), "n": int(r["n"]),
                     f"MEAN ({metric})": r["mean"], "mean 95% CI": f"[{r['mean_ci_low']:.6g}, {r['mean_ci_high']:.6g}]",
                     "STDVAR (std dev)": r["std"], "median": r["median"],
                     "median 95% CI": f"[{r['median_ci_low']:.6g}, {r['median_ci_high']:.6g}]",
                     "cost per record (ns, medians)": per_record})
    return pd.DataFrame(rows)


@_one_table
def perf_rb_verdicts(a: Analysis) -> pd.DataFrame:
    """backward against forward (and each against base), per placement; the %change in the one sign
    of every ringlab table (``tables.gain``: + = better, a factor past ±50%)."""
    df = a.df
    metric = _elapsed_metric(df)
    out = []
    for base in ("forward", "base"):
        if base not in set(df["variant"].astype(str)):
            continue
        cmp = a.compare(base, metric, by=["placement"] if "placement" in df.columns else None)
        if base == "base":
            cmp = cmp[cmp["candidate"] == "forward"]
        for _, r in cmp.iterrows():
            out.append({"placement": r.get("placement"), "baseline": base, "candidate": r["candidate"],
                        "median baseline": r["median_baseline"], "median candidate": r["median_candidate"],
                        _tab.change_header(cmp): _tab.row_change_text(r),
                        f"95% CI of {_tab.CHANGE}": _tab.row_change_ci_text(r),
                        "p (Holm)": _p(r["p_holm"]), "verdict": r["verdict"]})
    return pd.DataFrame(out)


@_one_table
def published_vs_reproduced_perf_rb(a: Analysis) -> pd.DataFrame:
    pub = published.perf_rb_means()
    rows = [{"source": "published (seed 004, pinned + performance governor)", "config": r.config,
             "placement": "workload CPU 6, perf CPU 7", "mean": r.mean_published, "ratio to BASE": round(r.ratio_to_base, 3)}
            for r in pub.itertuples()]
    df, env = a.df, a.env
    metric = _elapsed_metric(df)
    meas, _ = measurements(df, metric)
    if "placement" in meas.columns:
        means = meas.groupby(["placement", "variant"])[metric].mean()
        for pl in sorted(meas["placement"].astype(str).unique()):
            if (pl, "base") not in means.index:
                continue
            b = means[(pl, "base")]
            for v in ("base", "forward", "backward"):
                if (pl, v) in means.index:
                    rows.append({"source": f"reproduced ({arch_label(env)})", "config": v, "placement": pl,
                                 "mean": round(float(means[(pl, v)]), 1),
                                 "ratio to BASE": round(float(means[(pl, v)] / b), 3)})
    return pd.DataFrame(rows)


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("annotations", "functools", "json", "math", "np",
                                                                     "pd", "Path", "published", "Analysis", "of")]
