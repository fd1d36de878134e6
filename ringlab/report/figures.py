"""Deterministic seaborn figures for a run (PNG + SVG, byte-identical on re-render).

Every figure is saved by :func:`ringlab.rundir.write_figure` (atomic, no symlink followed).
Determinism: Agg backend, fixed figsize and
dpi, no bbox_inches="tight" (its result depends on font metrics at render time only,
but a fixed canvas is simpler to diff), ``svg.hashsalt`` = the figure id, PNG
metadata ``{"Software": None}``, SVG metadata ``{"Date": None}``, and stripplot's
jitter (drawn from numpy's *global* RNG, seaborn has no seed argument) seeded per
figure with the global state saved and restored around it.

Figures (file stem = id):
  box       per-variant box plot per configuration, seeded strip, severe outliers (Tukey
            3 IQR, per variant and configuration) marked with a red x in every layout
  ecdf      ECDF per variant
  order     metric vs execution order, one panel per configuration, coloured by variant
            (drift, interleaving)
  cpu_pairs median metric per (producer CPU, consumer CPU) heatmap, when >= 4 pairs
  spsc      SPSC throughput (Mops/s = 1000 / ns_per_op) of two-thread trials on a CPU
            pair, against two references from the pair's one-way cache-line latency:
            1000 / (2 * c2c) if every item needed a round trip (the unbatched ping-pong),
            and 1000 * 8 / c2c if every line transfer moved a full line of 8 pointers.
            They are references, not ceilings: rings pipeline several lines at once.
  counters  median IPC / branch-miss rate / instructions per op per variant
  size_sweep median metric (95% CI) against ring size, one panel per mode and CPU pair,
            the mode named and the baseline / patched variants labelled
  forest    (compare-runs) per host and run, each configuration's delta with its CI
  round_ratio (notebook 95) candidate / baseline per round over time, per configuration
"""
from __future__ import annotations

import contextlib
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from ringlab import rundir  # noqa: E402
from ringlab.stats.outliers import flag_outliers  # noqa: E402
from ringlab.stats import compare, summarize  # noqa: E402

FIGSIZE = (7.0, 4.5)
#: 8-byte pointers per 64-byte cache line: a ring moving whole lines needs one transfer per 8 items
SLOTS_PER_LINE = 8


@contextlib.contextmanager
def _seeded(name: str):
    state = np.random.get_state()
    np.random.seed(zlib.crc32(name.encode()))
    try:
        yield
    finally:
        np.random.set_state(state)


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    """``out_dir/NAME.png`` and ``.svg``, written by :func:`ringlab.rundir.write_figure`
    (``out_dir`` is a run folder's ``figures/``: the run folder is its parent)."""
    out_dir = Path(out_dir)
    return rundir.write_figure(out_dir.parent, name, fig, folder=out_dir.name)


def _variant_order(df):
    return sorted(df["variant"].astype(str).unique())


def _config_label(df, params):
    """'mode=1 same-llc' for the configuration columns that vary (constant ones say nothing)."""
    vary = [p for p in params if p in df.columns and df[p].nunique(dropna=False) > 1]
    if not vary:
        return pd.Series("all", index=df.index)
    # the requested CPUs co-vary with the pair class; the class is the readable name
    named = [p for p in vary if p != "pair_class"
             and not (p.startswith("cpu_req_") and "pair_class" in vary)]
    parts = [df[p].astype(str).radd(f"{p}=") for p in named]
    if "pair_class" in vary:
        parts.append(df["pair_class"].astype(str))
    lab = parts[0]
    for x in parts[1:]:
        lab = lab + " " + x
    return lab


def _config_order(d, params) -> list[str]:
    """Configurations in the order of their parameter values (size 64 before 1000)."""
    keys = [p for p in params if p in d.columns]
    return list(dict.fromkeys(d.sort_values(keys, kind="stable")["config"])) if keys \
        else sorted(d["config"].unique())


def box(df, metric, params, out_dir):
    d = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params))
    flags = flag_outliers(d, metric, ["variant", "config"])
    fig, ax = plt.subplots(figsize=FIGSIZE)
    order = _variant_order(d)
    by_config = d["config"].nunique() > 1
    x = "config" if by_config else "variant"
    xorder = _config_order(d, params) if by_config else order
    common = dict(data=None, x=x, y=metric, hue="variant", hue_order=order, order=xorder, ax=ax)
    sns.boxplot(**dict(common, data=d), showfliers=False, legend=by_config)
    with _seeded("box"):
        sns.stripplot(**dict(common, data=d[flags != "severe"]), dodge=by_config, size=2.5, alpha=0.5,
                      jitter=0.25, legend=False, palette="dark:black")
    sev = d[flags == "severe"]
    if len(sev):
        # the same dodge as the boxes, so each x sits over its own variant's box
        sns.stripplot(**dict(common, data=sev), dodge=by_config, jitter=0, marker="x", size=7,
                      linewidth=1.5, palette={v: "red" for v in order}, legend=False, zorder=5)
        ax.scatter([], [], marker="x", color="red", label="severe outlier (Tukey 3 IQR)")
        ax.legend(loc="best", fontsize=8)
    ax.set_title(f"{metric} per variant (box: quartiles; dots: trials; x: severe outliers)")
    if by_config:
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return _save(fig, out_dir, "box")


def ecdf(df, metric, params, out_dir):
    d = df.assign(variant=df["variant"].astype(str))
    fig, ax = plt.subplots(figsize=FIGSIZE)
    sns.ecdfplot(data=d, x=metric, hue="variant", hue_order=_variant_order(d), ax=ax)
    ax.set_title(f"ECDF of {metric}")
    fig.tight_layout()
    return _save(fig, out_dir, "ecdf")


def run_order(df, metric, params, out_dir):
    d = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params)).sort_values("order")
    order = _variant_order(d)
    configs = _config_order(d, params)
    ncol = min(len(configs), 3)
    nrow = -(-len(configs) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(FIGSIZE[0] if ncol == 1 else 3.6 * ncol, 3.2 * nrow + 0.8),
                             squeeze=False, sharex=True)
    for ax, cfg in zip(axes.flat, configs):
        sub = d[d["config"] == cfg]
        sns.scatterplot(data=sub, x="order", y=metric, hue="variant", hue_order=order, s=12, ax=ax,
                        legend=ax is axes.flat[0])
        ax.set_title(cfg if len(configs) > 1 else "", fontsize=8)
    for ax in list(axes.flat)[len(configs):]:
        ax.set_visible(False)
    fig.suptitle(f"{metric} in execution order, one panel per configuration (drift, interleaving)",
                 fontsize=10)
    fig.tight_layout()
    return _save(fig, out_dir, "order")


def _pairs(df):
    p = pd.to_numeric(df.get("cpu_req_producer"), errors="coerce")
    c = pd.to_numeric(df.get("cpu_req_consumer"), errors="coerce")
    if p is None or c is None or (p < 0).any() or (c < 0).any() or p.isna().any():
        p = pd.to_numeric(df.get("cpu_producer_start"), errors="coerce")
        c = pd.to_numeric(df.get("cpu_consumer_start"), errors="coerce")
    return p, c


def cpu_pairs(df, metric, params, out_dir):
    p, c = _pairs(df)
    d = pd.DataFrame({"producer CPU": p, "consumer CPU": c, metric: df[metric]}).dropna()
    if d.groupby(["producer CPU", "consumer CPU"]).ngroups < 4:
        return []
    piv = d.groupby(["producer CPU", "consumer CPU"])[metric].median().unstack()
    fig, ax = plt.subplots(figsize=(7.0, 6.0))
    sns.heatmap(piv, annot=piv.shape[0] <= 16, fmt=".3g", square=True, ax=ax,
                cbar_kws={"label": f"median {metric}"})
    ax.set_title(f"median {metric} per CPU pair")
    fig.tight_layout()
    return _save(fig, out_dir, "cpu_pairs")


def spsc(df, metric, params, out_dir):
    if "c2c_latency_ns" not in df.columns or metric != "ns_per_op":
        return []
    lat_all = pd.to_numeric(df["c2c_latency_ns"], errors="coerce")
    # only two-thread trials on a measured CPU pair are SPSC transfers between cores
    d = df[lat_all.notna()]
    if d.empty:
        return []
    lat = float(lat_all.dropna().median())
    d = d.assign(variant=d["variant"].astype(str), mops=1000.0 / d[metric], config=_config_label(d, params))
    order = _variant_order(d)
    per_item = 1000.0 / (2 * lat)
    per_line = 1000.0 * SLOTS_PER_LINE / lat
    fig, ax = plt.subplots(figsize=FIGSIZE)
    x = "config" if d["config"].nunique() > 1 else "variant"
    sns.barplot(data=d, x=x, y="mops", hue="variant", hue_order=order, estimator="median",
                order=order if x == "variant" else None, errorbar=None, legend=x == "config", ax=ax)
    ax.axhline(per_item, color="red", ls="--",
               label=f"1 item per round trip: 1/(2 x c2c) = {per_item:.3g} Mops/s")
    ax.axhline(per_line, color="purple", ls=":",
               label=f"{SLOTS_PER_LINE} slots per line transfer: {SLOTS_PER_LINE}/c2c = {per_line:.3g} Mops/s")
    ax.set_ylabel("throughput (Mops/s, median)")
    ax.legend(loc="best", fontsize=7)
    ax.set_title(f"SPSC throughput vs core-to-core latency (c2c one-way {lat:.3g} ns)")
    fig.tight_layout()
    return _save(fig, out_dir, "spsc")


def counters(df, metric, params, out_dir):
    cols = [c for c in ("ipc", "branch_miss_rate", "instructions_per_op")
            if c in df.columns and pd.to_numeric(df[c], errors="coerce").notna().any()]
    if not cols:
        return []
    d = df.assign(variant=df["variant"].astype(str))
    fig, axes = plt.subplots(1, len(cols), figsize=(3.2 * len(cols) + 0.6, 4.0), squeeze=False)
    for ax, col in zip(axes[0], cols):
        sns.barplot(data=d, x="variant", y=col, hue="variant", order=_variant_order(d), estimator="median",
                    errorbar=None, legend=False, ax=ax)
        ax.set_title(col)
    fig.tight_layout()
    return _save(fig, out_dir, "counters")


FIGURES = {"box": box, "ecdf": ecdf, "order": run_order, "cpu_pairs": cpu_pairs, "spsc": spsc,
           "counters": counters}


def render_all(meas: pd.DataFrame, metric: str, params: list[str], out_dir) -> dict[str, list[Path]]:
    """Render every applicable figure from measurement rows; returns {id: [png, svg]}."""
    out_dir = Path(out_dir)
    res = {}
    with sns.axes_style("whitegrid"):
        for name, fn in FIGURES.items():
            if name == "order" and "order" not in meas.columns:
                continue
            paths = fn(meas, metric, params, out_dir)
            if paths:
                res[name] = paths
    return res


#: ptr_ring modes as the figures name them
MODE_NAMES = {0: "one thread alternating", 1: "SPSC, free-running", 2: "SPSC, near-full"}


def _mode_label(mode) -> str:
    try:
        m = int(mode)
    except (TypeError, ValueError):
        return f"mode {mode}"
    return f"mode {m} ({MODE_NAMES[m]})" if m in MODE_NAMES else f"mode {m}"


def wants_size_sweep(meas: pd.DataFrame) -> bool:
    """A size sweep is drawn when ring size takes more than one value."""
    return "size" in meas.columns and meas["size"].nunique() > 1


def _arm_label(v: str, baseline, patched, labels) -> str:
    lab = (labels or {}).get(v)
    role = "baseline" if v == baseline else "patched" if v == patched else None
    text = f"{v}: {lab}" if lab and lab != v else v
    return f"{text} ({role})" if role else text


def size_sweep(meas, metric, out_dir, baseline=None, patched=None, labels=None) -> list[Path]:
    """Median ``metric`` (95% CI) against ring size per variant (log x), one panel per
    (mode, CPU pair); panel titles name the mode, the legend names baseline and patched."""
    summ = summarize(meas, metric)
    if patched is None and baseline is not None:
        others = sorted(set(summ["variant"].astype(str)) - {str(baseline)})
        patched = others[0] if len(others) == 1 else None
    keys = [c for c in ("mode", "pair_class") if c in summ.columns]
    panels = sorted(summ.groupby(keys).groups) if keys else [()]
    panels = [k if isinstance(k, tuple) else (k,) for k in panels]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1, 4.2), squeeze=False, sharey=True)
    for ax, key in zip(axes[0], panels):
        sub = summ
        for c, k in zip(keys, key):
            sub = sub[sub[c] == k]
        for v, g in sub.groupby(sub["variant"].astype(str), sort=True):
            g = g.sort_values("size")
            ax.errorbar(g["size"], g["median"], yerr=[g["median"] - g["median_ci_low"],
                                                      g["median_ci_high"] - g["median"]],
                        marker="o", capsize=3, label=_arm_label(v, baseline, patched, labels))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("ring size (slots)")
        named = dict(zip(keys, key))
        parts = ([_mode_label(named["mode"])] if "mode" in named else []) + \
                ([str(named["pair_class"])] if "pair_class" in named else [])
        ax.set_title(", ".join(parts) or "all", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(f"median {metric} (95% CI)")
    sns.despine(fig)
    who = f"{patched} (patched) vs {baseline} (baseline)" if patched and baseline else "variants"
    fig.suptitle(f"{metric} against ring size: {who}", fontsize=10)
    fig.tight_layout()
    return _save(fig, Path(out_dir), "size_sweep")


def forest(rows: pd.DataFrame, out_dir, name: str = "forest", title: str | None = None) -> list[Path]:
    """Forest plot: one line per row of ``rows`` (columns ``label``, ``delta_pct``,
    ``ci_low_pct``, ``ci_high_pct``, and optional ``group`` = host/run, used for the
    y-axis blocks), the point at delta and the bar over its CI, a line at 0.
    Rows without a CI are drawn as a point only ("no CI" in the label)."""
    d = rows.reset_index(drop=True)
    if d.empty:
        return []
    groups = d["group"].astype(str) if "group" in d.columns else pd.Series("", index=d.index)
    labels = [(f"{g}  {l}" if g else str(l)) for g, l in zip(groups, d["label"].astype(str))]
    y = np.arange(len(d))[::-1]
    fig, ax = plt.subplots(figsize=(10.0, 1.4 + 0.32 * len(d)))
    lo = pd.to_numeric(d["ci_low_pct"], errors="coerce")
    hi = pd.to_numeric(d["ci_high_pct"], errors="coerce")
    dl = pd.to_numeric(d["delta_pct"], errors="coerce")
    has = lo.notna() & hi.notna()
    ax.errorbar(dl[has], y[has.to_numpy()], xerr=[dl[has] - lo[has], hi[has] - dl[has]], fmt="o",
                color="black", capsize=3, ms=4)
    ax.plot(dl[~has], y[(~has).to_numpy()], "D", color="grey", ms=4)
    labels = [lab + ("" if h else "  (no CI)") for lab, h in zip(labels, has)]
    ax.axvline(0, color="red", lw=1, ls="--")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("delta = (candidate - baseline) / baseline, % (95% CI)")
    fig.suptitle(title or "delta per host and run, with its 95% CI", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _save(fig, Path(out_dir), name)


def cross_run_forest(runs, out_dir, baseline: str = "batch", patched: str = "reorder",
                     metric: str = "ns_per_op") -> list[Path]:
    """figures/forest.png of the compare-runs folder: for every run (objects with ``raw``,
    ``host``, ``experiment``, ``run_id``) holding both variants, each configuration's delta of
    ``patched`` against ``baseline`` with its CI, grouped by host and run; [] when no run
    holds both."""
    rows = []
    for r in runs:
        raw = r.raw
        if "variant" not in raw.columns or metric not in raw.columns:
            continue
        if not {baseline, patched} <= set(raw["variant"].astype(str)):
            continue
        cmp = compare(raw, baseline, metric)
        cmp = cmp[cmp["candidate"] == patched]
        cfg = [c for c in ("mode", "size", "pair_class") if c in cmp.columns and cmp[c].nunique() > 1] \
            or [c for c in ("mode",) if c in cmp.columns]
        for _, c in cmp.iterrows():
            rows.append({"group": f"{r.host} {r.experiment}/{r.run_id}",
                         "label": " ".join(f"{k}={c[k]}" for k in cfg) or "all",
                         "delta_pct": c["delta_pct"], "ci_low_pct": c["ci_low_pct"],
                         "ci_high_pct": c["ci_high_pct"]})
    if not rows:
        return []
    title = (f"{patched} (patched) vs {baseline} (baseline): delta of median {metric} per host and run\n"
             "(95% CI; left of 0: patched faster)")
    with sns.axes_style("whitegrid"):
        return forest(pd.DataFrame(rows), Path(out_dir), "forest", title)


def round_ratio(ratios: pd.DataFrame, candidate: str, baseline: str, metric: str, title: str = ""):
    """Per configuration, ``candidate / baseline`` of each round's medians against the time the
    round started (``t_s``; the round number when a row has no time), a dashed line at 1:
    drift or a slow phase of the machine shows as a trend.  ``ratios`` is
    ``ringlab.open(...).round_ratios(...)``.  Returns the Figure (rundir.write_figure saves it)."""
    x = "t_s" if ratios["t_s"].notna().all() else "round"
    fig, ax = plt.subplots(figsize=(7.0, 4.0))
    for cfg, d in ratios.groupby("config", sort=True):
        ax.plot(d[x], d["ratio"], marker="o", ms=3, lw=1, label=cfg)
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xlabel("seconds since the run's first trial" if x == "t_s" else "round")
    ax.set_ylabel(f"{candidate} / {baseline}, {metric}")
    ax.set_title(f"{title}: per-round ratio" if title else "per-round ratio", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


