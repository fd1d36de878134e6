"""Deterministic seaborn figures for a run (PNG + SVG, byte-identical on re-render).

Every figure is saved by :func:`ringlab.rundir.write_figure` (atomic, no symlink followed).
Determinism: Agg backend, fixed figsize and
dpi, no bbox_inches="tight" (its result depends on font metrics at render time only,
but a fixed canvas is simpler to diff), ``svg.hashsalt`` = the figure id, PNG
metadata ``{"Software": None}``, SVG metadata ``{"Date": None}``, and stripplot's
jitter (drawn from numpy's *global* RNG, seaborn has no seed argument) seeded per
figure with the global state saved and restored around it.

Figures (file stem = id):
  box       trials per variant and configuration: quartile boxes with a seeded strip of the
            trials where every group has ``MIN_BOX_TRIALS`` (20) or more, the trials alone
            below; the y range from the trials inside the severe-outlier fences, each severe
            outlier (Tukey 3 IQR, per variant and configuration) a red x, at the axis edge when
            it lies beyond it
  order     metric vs execution order, one panel per configuration, coloured by variant
            (drift, interleaving)
            (above ``MAX_DRAWN`` trials both draw a seeded random subsample of the dots and say
            so in the title; the boxes and fences are still those of every trial)
  cpu_pairs median metric per (producer CPU, consumer CPU) heatmap, when >= 4 pairs
  spsc      SPSC throughput (Mops/s = 1000 / ns_per_op) of two-thread trials on a CPU
            pair: medians with 95% CIs as points on an axis that shows their differences, the
            placement / pair class shown named in the title; for a pointer ring
            (``REFERENCE_RINGS``) two references from the pair's one-way cache-line latency,
            each drawn only within ``REFERENCE_FACTOR`` of the data (else named off-scale):
            1000 / (2 * c2c) if every item needed a round trip (the unbatched ping-pong),
            and 1000 * 8 / c2c if every line transfer moved a full line of 8 pointers.
            They are references, not ceilings: rings pipeline several lines at once.
  counters  median IPC / branch-miss rate / instructions per op per variant
  size_sweep median metric (95% CI) against ring size, one panel per mode and CPU pair,
            the mode named and the baseline / patched variants labelled
  round_ratio (notebook 95) candidate / baseline per round over time, per configuration
The forests (``forest``: the headline figure of every A/B run, ``meta_forest``,
``paired_size_sweep``, ``cross_run_forest``) and their rows (``effect_rows``) are in
:mod:`ringlab.report.figures_forest` and importable from here.
"""
from __future__ import annotations

import contextlib
import math
import textwrap
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from scipy import stats as sst  # noqa: E402

from ringlab import catalog, fmt, rundir  # noqa: E402
from ringlab.stats.outliers import flag_outliers  # noqa: E402
from ringlab.stats import summarize  # noqa: E402
from ringlab.report.figures_base import MODE_NAMES, mode_label  # noqa: E402,F401

FIGSIZE = (7.0, 4.5)
#: the most trials a figure draws one dot each for: above it (a long run) the box and order
#: figures draw a seeded random subsample of this many trials (``_drawn``) and say so in their
#: title, and the SPSC bars' median CI is the binomial order-statistic interval instead of
#: seaborn's bootstrap.  Boxes, medians and outlier fences are computed from every trial.  The
#: runs under results/ have at most 9,290 rows, so their figures draw every trial.
MAX_DRAWN = 20_000
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


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """``out_dir/NAME.png`` and ``.svg``, written by :func:`ringlab.rundir.write_figure`
    (``out_dir`` is a run folder's ``figures/``: the run folder is its parent)."""
    out_dir = Path(out_dir)
    return rundir.write_figure(out_dir.parent, name, fig, folder=out_dir.name)


def _drawn(d: pd.DataFrame, name: str) -> tuple[pd.DataFrame, str]:
    """``d`` itself when it has at most ``MAX_DRAWN`` rows, else a random ``MAX_DRAWN`` of them
    (seeded by the figure's id, in their original order), with the words the title adds for it."""
    limit = MAX_DRAWN
    if len(d) <= limit:
        return d, ""
    keep = np.sort(np.random.default_rng(zlib.crc32(name.encode())).choice(len(d), limit, replace=False))
    return d.iloc[keep], f"; dots: a seeded random {limit:,} of {len(d):,} trials"


def _median_ci(v) -> tuple[float, float]:
    """The 95% binomial order-statistic interval of the median (seaborn's errorbar callable)."""
    v = np.asarray(v, dtype=float)
    if len(v) < 2:
        return math.nan, math.nan
    ci = sst.quantile_test(v, q=float(np.median(v)), p=0.5).confidence_interval(0.95)
    return float(ci.low), float(ci.high)


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


def _config_figsize(n_configs: int) -> tuple[float, float]:
    """Wider than FIGSIZE when many configurations share the x axis (about 1.1 in each)."""
    return (max(FIGSIZE[0], 1.1 * n_configs + 1.5), FIGSIZE[1] + (0.6 if n_configs > 1 else 0))


def _config_ticks(ax, labels) -> None:
    """Configuration tick labels one parameter per line, so that neighbours never overlap."""
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels([str(lab).replace(" ", "\n") for lab in labels], fontsize=7)


#: below this many trials in a group the box figure draws the trials only: the quartiles of ten
#: trials say little that the ten dots do not
MIN_BOX_TRIALS = 20
#: the severe-outlier fence (Tukey, in IQRs) the box figure's y range ends at
FENCE_IQR = 3.0


def central_range(values, flags) -> tuple[float, float]:
    """The y range of the box figure: from the lowest to the highest trial that is not a severe
    outlier (every trial inside its group's 3-IQR fences), padded by 5%.  Severe outliers never
    set it: those beyond it are drawn at its edge."""
    v = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    keep = v[(np.asarray(flags) != "severe") & np.isfinite(v)]
    if not len(keep):
        keep = v[np.isfinite(v)]
    lo, hi = float(keep.min()), float(keep.max())
    pad = 0.05 * (hi - lo) if hi > lo else 0.05 * abs(hi) or 1.0
    return lo - pad, hi + pad


def box(df, metric, params, out_dir):
    """Trials per variant (and configuration): quartile boxes with the trials as dots where every
    group has ``MIN_BOX_TRIALS`` trials or more, the dots alone below; the y range from the trials
    inside the severe-outlier fences (:func:`central_range`), each severe outlier a red x, at the
    axis edge when it lies beyond it."""
    d = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params))
    flags = flag_outliers(d, metric, ["variant", "config"])
    by_config = d["config"].nunique() > 1
    n_min = int(d.groupby(["variant", "config"]).size().min())
    boxes = n_min >= MIN_BOX_TRIALS
    fig, ax = plt.subplots(figsize=_config_figsize(d["config"].nunique() if by_config else 1))
    order = _variant_order(d)
    x = "config" if by_config else "variant"
    xorder = _config_order(d, params) if by_config else order
    common = dict(data=None, x=x, y=metric, hue="variant", hue_order=order, order=xorder, ax=ax)
    if boxes:
        sns.boxplot(**dict(common, data=d), showfliers=False, legend=by_config)
    lo, hi = central_range(d[metric], flags)
    dots, sampled = _drawn(d[flags != "severe"], "box")
    with _seeded("box"):
        # the trials' dots are drawn as an image inside the SVG: thousands of vector dots made a
        # full run's SVG megabytes long; boxes, axes and text stay vector
        strip = dict(size=2.5, alpha=0.5, palette="dark:black") if boxes else \
            dict(size=4, alpha=0.8, palette=None if by_config else "dark:black")
        sns.stripplot(**dict(common, data=dots), dodge=by_config, jitter=0.25, legend=not boxes and by_config,
                      rasterized=True, **strip)
    sev, sev_sampled = _drawn(d[flags == "severe"], "box-severe")
    if sev_sampled:
        sampled += f"; x: a seeded random {len(sev):,} of {int((flags == 'severe').sum()):,} severe outliers"
    beyond = 0
    if len(sev):
        inset = 0.015 * (hi - lo)
        vals = pd.to_numeric(sev[metric], errors="coerce")
        beyond = int(((vals > hi) | (vals < lo)).sum())
        sev = sev.assign(**{metric: vals.clip(lo + inset, hi - inset)})
        # the same dodge as the boxes, so each x sits over its own variant's group
        sns.stripplot(**dict(common, data=sev), dodge=by_config, jitter=0, marker="x", size=7,
                      linewidth=1.5, palette={v: "red" for v in order}, legend=False, zorder=5)
        ax.scatter([], [], marker="x", color="red", label="severe outlier (Tukey 3 IQR)"
                   + (f"; {beyond} beyond the axis, drawn at its edge" if beyond else ""))
        ax.legend(loc="best", fontsize=8)
    ax.set_ylim(lo, hi)
    what = "box: quartiles; dots: trials" if boxes else \
        f"dots: trials (n = {n_min} in the smallest group: too few for quartile boxes)"
    ax.set_title(_title([f"{metric} per variant ({what}; x: severe outliers)"], 95 if not by_config else 120)
                 if not sampled else f"{metric} per variant ({what}, quartiles of all trials{sampled})", fontsize=9)
    if by_config:
        _config_ticks(ax, xorder)
    fig.tight_layout()
    return save(fig, out_dir, "box")


def run_order(df, metric, params, out_dir):
    full = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params))
    order = _variant_order(full)
    configs = _config_order(full, params)
    d, sampled = _drawn(full, "order")
    d = d.sort_values("order")
    ncol = min(len(configs), 3)
    nrow = -(-len(configs) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(FIGSIZE[0] if ncol == 1 else 3.6 * ncol, 3.2 * nrow + 0.8),
                             squeeze=False, sharex=True)
    for ax, cfg in zip(axes.flat, configs):
        sub = d[d["config"] == cfg]
        sns.scatterplot(data=sub, x="order", y=metric, hue="variant", hue_order=order, s=12, ax=ax,
                        legend=ax is axes.flat[0], rasterized=True)   # one dot per trial: an image in the SVG
        ax.set_title(cfg if len(configs) > 1 else "", fontsize=8)
    for ax in list(axes.flat)[len(configs):]:
        ax.set_visible(False)
    fig.suptitle(f"{metric} in execution order, one panel per configuration (drift, interleaving)"
                 + (f"\n({sampled[2:]})" if sampled else ""), fontsize=10)
    fig.tight_layout()
    return save(fig, out_dir, "order")


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
    return save(fig, out_dir, "cpu_pairs")


#: the experiments whose ring the two SPSC references describe: slots of one 8-byte pointer, one
#: item per slot (ringlab.catalog's ``slot_bytes``; a byte ring or a page allocator moves other
#: units: no reference is drawn)
REFERENCE_RINGS = tuple(e.name for e in catalog.EXPERIMENTS if e.slot_bytes == 8)
#: a reference is drawn only within this factor of the data's range; further off, the title
#: names it and its value instead (a line at 232 over dots at 0.5 leaves an empty plot)
REFERENCE_FACTOR = 3.0


def _shown_subset(df, d) -> str:
    """Which placement / CPU-pair class the SPSC figure draws, and which it leaves out."""
    shown, left = [], []
    for c in ("placement", "pair_class"):
        if c not in df.columns:
            continue
        here = list(dict.fromkeys(sorted(d[c].astype(str))))
        rest = sorted(set(df[c].astype(str)) - set(here))
        if rest or len(here) == 1:
            shown.append(f"{c} {'/'.join(here)}")
        if rest:
            left.append(f"{c} {'/'.join(rest)}")
    return ("shown: " + ", ".join(shown) if shown else "") + \
        (f"; not drawn (no core-to-core transfer): {', '.join(left)}" if left else "")


def _title(lines, width: int) -> str:
    """Title lines wrapped to ``width`` characters (a fixed canvas never grows to fit them)."""
    return "\n".join(textwrap.fill(line, width, break_on_hyphens=False, break_long_words=False)
                     for line in lines if line)


def spsc(df, metric, params, out_dir, ring=None):
    """SPSC throughput (Mops/s) of the two-thread trials on a measured CPU pair: per variant (and
    configuration) the median with its 95% binomial order-statistic CI as a point, on an axis
    that shows their differences (no bars from zero).  The title says which placement / pair
    class the points are.  The two references from the pair's core-to-core latency are drawn
    for the rings they describe (``REFERENCE_RINGS``; ``ring`` is the run's experiment) and
    within ``REFERENCE_FACTOR`` of the data; otherwise the title says why there is none."""
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
    by_config = d["config"].nunique() > 1
    xorder = _config_order(d, params) if by_config else ["all"]
    fig, ax = plt.subplots(figsize=_config_figsize(len(xorder) if by_config else 1))
    palette = dict(zip(order, sns.color_palette(n_colors=len(order))))
    width = 0.7 / max(1, len(order))
    lows, highs = [], []
    for k, v in enumerate(order):
        xs, med, lo, hi = [], [], [], []
        for i, cfg in enumerate(xorder):
            vals = d.loc[(d["variant"] == v) & ((d["config"] == cfg) | (not by_config)), "mops"].to_numpy(dtype=float)
            if not len(vals):
                continue
            m = float(np.median(vals))
            l, h = _median_ci(vals)
            xs.append(i + (k - (len(order) - 1) / 2) * width)
            med.append(m)
            lo.append(m if math.isnan(l) else l)
            hi.append(m if math.isnan(h) else h)
        ax.errorbar(xs, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)], fmt="o", ms=6, capsize=4,
                    color=palette[v], label=v)
        lows += lo
        highs += hi
    refs = [(1000.0 / (2 * lat), "--", "red", "1 item per round trip, 1/(2 x c2c)"),
            (1000.0 * SLOTS_PER_LINE / lat, ":", "purple", f"{SLOTS_PER_LINE} slots per line transfer, "
                                                          f"{SLOTS_PER_LINE}/c2c")]
    notes = []
    if ring not in REFERENCE_RINGS:
        notes.append(f"no reference: the core-to-core references describe {'/'.join(REFERENCE_RINGS)}'s "
                     f"8-byte slots, not {ring or 'this ring'}")
    else:
        lo_d, hi_d = min(lows), max(highs)
        for val, ls, colour, what in refs:
            if lo_d / REFERENCE_FACTOR <= val <= hi_d * REFERENCE_FACTOR:
                ax.axhline(val, color=colour, ls=ls, label=f"reference: {what} = {val:.3g} Mops/s")
            else:
                notes.append(f"reference {what} = {val:.3g} Mops/s is off-scale (data {lo_d:.3g}-{hi_d:.3g})")
    ax.set_xticks(range(len(xorder)))
    if by_config:
        _config_ticks(ax, xorder)
        ax.set_xlabel("config")
    else:
        ax.set_xticklabels([""])
    ax.set_xlim(-0.6, len(xorder) - 0.4)
    ax.set_ylabel("throughput (Mops/s): median, 95% CI (order statistics)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3 if by_config else -0.08), fontsize=7, ncol=3,
              frameon=False)
    lines = ["SPSC throughput of the two-thread trials on a CPU pair "
             f"(one-way core-to-core latency {lat:.3g} ns)", _shown_subset(df, d), *notes,
             "(references, not ceilings: a ring pipelines several lines)" if ring in REFERENCE_RINGS
             and len(notes) < 2 else ""]
    ax.set_title(_title(lines, 110 if by_config else 95), fontsize=8)
    fig.tight_layout()
    return save(fig, out_dir, "spsc")


def counters(df, metric, params, out_dir):
    """Median IPC / branch-miss rate / instructions per op per variant, as points with their 95%
    order-statistic CI on an axis that shows the variants' differences (no bars from zero)."""
    cols = [c for c in ("ipc", "branch_miss_rate", "instructions_per_op")
            if c in df.columns and pd.to_numeric(df[c], errors="coerce").notna().any()]
    if not cols:
        return []
    d = df.assign(variant=df["variant"].astype(str))
    order = _variant_order(d)
    palette = dict(zip(order, sns.color_palette(n_colors=len(order))))
    fig, axes = plt.subplots(1, len(cols), figsize=(3.2 * len(cols) + 0.6, 4.0), squeeze=False)
    for ax, col in zip(axes[0], cols):
        for i, v in enumerate(order):
            vals = pd.to_numeric(d.loc[d["variant"] == v, col], errors="coerce").dropna().to_numpy(dtype=float)
            if not len(vals):
                continue
            m = float(np.median(vals))
            lo, hi = _median_ci(vals)
            err = [[m - lo], [hi - m]] if math.isfinite(lo) and math.isfinite(hi) else None
            ax.errorbar([i], [m], yerr=err, fmt="o", ms=6, capsize=4, color=palette[v])
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order)
        ax.set_xlim(-0.6, len(order) - 0.4)
        ax.set_title(f"{col} (median, 95% CI)", fontsize=9)
    fig.tight_layout()
    return save(fig, out_dir, "counters")


FIGURES = {"box": box, "order": run_order, "cpu_pairs": cpu_pairs, "spsc": spsc,
           "counters": counters}


def render_all(meas: pd.DataFrame, metric: str, params: list[str], out_dir, ring: str | None = None
               ) -> dict[str, list[Path]]:
    """Render every applicable figure from measurement rows; returns {id: [png, svg]}.  ``ring``:
    the run's experiment (``spsc`` draws its references only for the ring they describe)."""
    out_dir = Path(out_dir)
    res = {}
    with sns.axes_style("whitegrid"):
        for name, fn in FIGURES.items():
            if name == "order" and "order" not in meas.columns:
                continue
            paths = fn(meas, metric, params, out_dir, ring=ring) if name == "spsc" else \
                fn(meas, metric, params, out_dir)
            if paths:
                res[name] = paths
    return res


_mode_label = mode_label


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
    return save(fig, Path(out_dir), "size_sweep")


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




# the forests live in figures_forest; their names stay importable from here
from ringlab.report.figures_forest import (  # noqa: E402,F401
    FOREST_COLUMNS, MAX_FOREST_ROWS, config_columns, cross_run_forest, effect_rows, forest, host_noise_floor,
    level_text, meta_forest, paired_size_sweep)
