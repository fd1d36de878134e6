"""Deterministic seaborn figures for a run (PNG + SVG, byte-identical on re-render).

Determinism (see notebook-conventions.md section 6.1): Agg backend, fixed figsize and
dpi, no bbox_inches="tight" (its result depends on font metrics at render time only,
but a fixed canvas is simpler to diff), ``svg.hashsalt`` = the figure id, PNG
metadata ``{"Software": None}``, SVG metadata ``{"Date": None}``, and stripplot's
jitter (drawn from numpy's *global* RNG, seaborn has no seed argument) seeded per
figure with the global state saved and restored around it.

Figures (file stem = id):
  box       per-variant box plot, seeded strip, severe outliers marked (red x)
  ecdf      ECDF per variant
  order     metric vs execution order, coloured by variant (drift, interleaving)
  cpu_pairs median metric per (producer CPU, consumer CPU) heatmap, when >= 4 pairs
  spsc      SPSC throughput (Mops/s = 1000 / ns_per_op) of two-thread trials on a CPU
            pair, against two references from the pair's one-way cache-line latency:
            1000 / (2 * c2c) if every item needed a round trip (the unbatched ping-pong),
            and 1000 * 8 / c2c if every line transfer moved a full line of 8 pointers.
            They are references, not ceilings: rings pipeline several lines at once.
  counters  median IPC / branch-miss rate / instructions per op per variant
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

from ringlab.stats.outliers import flag_outliers  # noqa: E402

FIGSIZE = (7.0, 4.5)
#: 8-byte pointers per 64-byte cache line: a ring moving whole lines needs one transfer per 8 items
SLOTS_PER_LINE = 8
DPI = 100


@contextlib.contextmanager
def _seeded(name: str):
    state = np.random.get_state()
    np.random.seed(zlib.crc32(name.encode()))
    try:
        yield
    finally:
        np.random.set_state(state)


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    with matplotlib.rc_context({"svg.hashsalt": f"ringlab-{name}", "svg.fonttype": "none"}):
        fig.savefig(png, dpi=DPI, metadata={"Software": None})
        fig.savefig(svg, metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return [png, svg]


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


def box(df, metric, params, out_dir):
    d = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params))
    flags = flag_outliers(d, metric, ["variant", "config"])
    fig, ax = plt.subplots(figsize=FIGSIZE)
    order = _variant_order(d)
    x = "config" if d["config"].nunique() > 1 else "variant"
    hue = "variant"
    sns.boxplot(data=d, x=x, y=metric, hue=hue, hue_order=order, showfliers=False, ax=ax,
                legend=x == "config")
    with _seeded("box"):
        sns.stripplot(data=d[flags != "severe"], x=x, y=metric, hue=hue, hue_order=order, dodge=x == "config",
                      size=2.5, alpha=0.5, jitter=0.25, ax=ax, legend=False, palette="dark:black")
    sev = d[flags == "severe"]
    if len(sev) and x == "variant":
        ax.scatter([order.index(v) for v in sev["variant"]], sev[metric], marker="x", color="red",
                   zorder=5, label="severe outlier (Tukey 3 IQR)")
        ax.legend(loc="best")
    ax.set_title(f"{metric} per variant (box: quartiles; dots: trials; x: severe outliers)")
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
    d = df.assign(variant=df["variant"].astype(str)).sort_values("order")
    fig, ax = plt.subplots(figsize=FIGSIZE)
    sns.scatterplot(data=d, x="order", y=metric, hue="variant", hue_order=_variant_order(d), s=12, ax=ax)
    ax.set_title(f"{metric} in execution order (drift, interleaving)")
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


#: Public name for other report modules (topology picture, size sweep): same deterministic save.
save_figure = _save
