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
  order     metric vs execution order, one panel per configuration, coloured by variant
            (drift, interleaving)
            (above ``MAX_DRAWN`` trials both draw a seeded random subsample of the dots and say
            so in the title; the boxes and fences are still those of every trial)
  cpu_pairs median metric per (producer CPU, consumer CPU) heatmap, when >= 4 pairs
  spsc      SPSC throughput (Mops/s = 1000 / ns_per_op) of two-thread trials on a CPU
            pair, against two references from the pair's one-way cache-line latency:
            1000 / (2 * c2c) if every item needed a round trip (the unbatched ping-pong),
            and 1000 * 8 / c2c if every line transfer moved a full line of 8 pointers.
            They are references, not ceilings: rings pipeline several lines at once.
  counters  median IPC / branch-miss rate / instructions per op per variant
  size_sweep median metric (95% CI) against ring size, one panel per mode and CPU pair,
            the mode named and the baseline / patched variants labelled
  forest    one per experiment: rows = configuration x host, the paired effect in one sign
            (+ = better) with its CI, the host's A/A band shaded, the published / expected
            effect as a marker (compare-runs, notebooks 11 and 14)
  size_sweep_hosts (notebook 11) the paired effect against ring size, one line per host
  round_ratio (notebook 95) candidate / baseline per round over time, per configuration
"""
from __future__ import annotations

import contextlib
import math
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from scipy import stats as sst  # noqa: E402

from ringlab import fmt, rundir  # noqa: E402
from ringlab.report import tables  # noqa: E402
from ringlab.rundir.calibration import find_calibration, noise_floor  # noqa: E402
from ringlab.stats.outliers import flag_outliers  # noqa: E402
from ringlab.stats import compare, summarize  # noqa: E402

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


def _save(fig, out_dir: Path, name: str) -> list[Path]:
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


def box(df, metric, params, out_dir):
    d = df.assign(variant=df["variant"].astype(str), config=_config_label(df, params))
    flags = flag_outliers(d, metric, ["variant", "config"])
    by_config = d["config"].nunique() > 1
    fig, ax = plt.subplots(figsize=_config_figsize(d["config"].nunique() if by_config else 1))
    order = _variant_order(d)
    x = "config" if by_config else "variant"
    xorder = _config_order(d, params) if by_config else order
    common = dict(data=None, x=x, y=metric, hue="variant", hue_order=order, order=xorder, ax=ax)
    sns.boxplot(**dict(common, data=d), showfliers=False, legend=by_config)
    dots, sampled = _drawn(d[flags != "severe"], "box")
    with _seeded("box"):
        # the trials' dots are drawn as an image inside the SVG: thousands of vector dots made a
        # full run's SVG megabytes long; boxes, axes and text stay vector
        sns.stripplot(**dict(common, data=dots), dodge=by_config, size=2.5, alpha=0.5,
                      jitter=0.25, legend=False, palette="dark:black", rasterized=True)
    sev, sev_sampled = _drawn(d[flags == "severe"], "box-severe")
    if sev_sampled:
        sampled += f"; x: a seeded random {len(sev):,} of {int((flags == 'severe').sum()):,} severe outliers"
    if len(sev):
        # the same dodge as the boxes, so each x sits over its own variant's box
        sns.stripplot(**dict(common, data=sev), dodge=by_config, jitter=0, marker="x", size=7,
                      linewidth=1.5, palette={v: "red" for v in order}, legend=False, zorder=5)
        ax.scatter([], [], marker="x", color="red", label="severe outlier (Tukey 3 IQR)")
        ax.legend(loc="best", fontsize=8)
    ax.set_title(f"{metric} per variant (box: quartiles; dots: trials; x: severe outliers)" if not sampled else
                 f"{metric} per variant (box: quartiles of all trials{sampled})", fontsize=9)
    if by_config:
        _config_ticks(ax, xorder)
    fig.tight_layout()
    return _save(fig, out_dir, "box")


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
    by_config = d["config"].nunique() > 1
    x = "config" if by_config else "variant"
    xorder = _config_order(d, params) if by_config else order
    fig, ax = plt.subplots(figsize=_config_figsize(len(xorder) if by_config else 1))
    # bars: medians; whiskers: 95% bootstrap CI of the median (seeded, so the figure is reproducible)
    # above MAX_DRAWN trials the median's CI is the binomial order-statistic interval (no resampling)
    errorbar = ("ci", 95) if len(d) <= MAX_DRAWN else _median_ci
    sns.barplot(data=d, x=x, y="mops", hue="variant", hue_order=order, estimator="median", order=xorder,
                errorbar=errorbar, n_boot=1000, seed=zlib.crc32(b"spsc"), capsize=0.1,
                err_kws={"linewidth": 1}, legend=by_config, ax=ax)
    ax.axhline(per_item, color="red", ls="--",
               label=f"reference: 1 item per round trip, 1/(2 x c2c) = {per_item:.3g} Mops/s")
    ax.axhline(per_line, color="purple", ls=":",
               label=f"reference: {SLOTS_PER_LINE} slots per line transfer, {SLOTS_PER_LINE}/c2c = "
                     f"{per_line:.3g} Mops/s")
    ax.set_ylabel("throughput (Mops/s): median, 95% CI" + ("" if len(d) <= MAX_DRAWN else " (order statistics)"))
    if by_config:
        _config_ticks(ax, xorder)
    # the legend sits below the axes, never over a bar
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3 if by_config else -0.12), fontsize=7, ncol=2,
              frameon=False)
    ax.set_title(f"SPSC throughput and two references from the core-to-core latency (one-way {lat:.3g} ns)\n"
                 "(references, not ceilings: a ring pipelines several lines)", fontsize=9)
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


FIGURES = {"box": box, "order": run_order, "cpu_pairs": cpu_pairs, "spsc": spsc,
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


#: the columns of a forest row (``effect_rows`` makes them from a comparison)
FOREST_COLUMNS = ("host", "config", "effect_pct", "ci_low_pct", "ci_high_pct", "ci_level", "verdict")


def host_noise_floor(host: str | None, root=None) -> float | None:
    """The host's A/A bound in percent (``rundir.calibration.noise_floor``); None without one."""
    floor = noise_floor(host, root)
    return floor["bound_pct"] if floor else None


def config_columns(cmp: pd.DataFrame) -> list[str]:
    """The configuration columns of a comparison that vary (the constant ones name nothing)."""
    cols = cmp.attrs.get("group_columns") or [c for c in ("mode", "size", "batch", "lock", "pair_class",
                                                          "align", "alloc_len", "placement") if c in cmp.columns]
    cols = [c for c in cols if c in cmp.columns and c not in ("count", "cpu_req_producer", "cpu_req_consumer")]
    return [c for c in cols if cmp[c].nunique(dropna=False) > 1]


def effect_rows(cmp: pd.DataFrame, host: str, candidate: str | None = None, expected=None,
                label_columns: list[str] | None = None) -> pd.DataFrame:
    """Forest rows (:data:`FOREST_COLUMNS`, plus ``candidate``, ``expected_pct`` and the
    configuration columns) from the Comparison rows of one run: the paired effect in one sign,
    + = better (``gain_pct`` for a lower-is-better metric), with its CI turned the same way.
    ``expected``: a number, or a function of the row returning the published or expected
    effect in the same sign (None: no marker)."""
    if candidate is not None:
        cmp = cmp[cmp["candidate"].astype(str) == str(candidate)]
    cols = label_columns if label_columns is not None else config_columns(cmp)
    several = cmp["candidate"].nunique() > 1 if "candidate" in cmp.columns else False
    rows = []
    for _, r in cmp.iterrows():
        lo, hi = tables.gain_ci(r)
        parts = ([f"{r['candidate']} vs {r['baseline']}"] if several else []) + \
            [f"{c}={r[c]}" for c in cols if c != "pair_class"] + \
            ([str(r["pair_class"])] if "pair_class" in cols else [])
        exp = expected(r) if callable(expected) else expected
        rows.append({"host": str(host), "config": " ".join(parts) or "all", "effect_pct": tables.gain(r),
                     "ci_low_pct": lo, "ci_high_pct": hi, "ci_level": r.get("ci_level", math.nan),
                     "verdict": r.get("verdict", ""), "candidate": str(r.get("candidate", "")),
                     "expected_pct": math.nan if exp is None else float(exp),
                     **{c: r[c] for c in cols}})
    return pd.DataFrame(rows)


def level_text(levels) -> str:
    """The CI level of a figure, stated once: "95% CI", or "97.5-98.8% CI (Holm-adjusted per
    family)" when the rows' levels differ."""
    lv = sorted({round(float(v), 6) for v in levels if v is not None and v == v})
    if not lv:
        return "CI"
    if len(lv) == 1:
        return fmt.ci_header(lv[0])
    lo, hi = fmt.ci_header(lv[0]).split("%")[0], fmt.ci_header(lv[-1]).split("%")[0]
    return f"{lo}-{hi}% CI (Holm-adjusted per family)"


def forest(rows: pd.DataFrame, out_dir, name: str = "forest", title: str | None = None,
           noise: dict | None = None, effect: str = "effect") -> list[Path]:
    """One forest: a line per row (configuration x host), the paired effect in one sign
    (+ = better) with its CI, each host's A/A band (its noise floor, ``noise`` {host: bound %})
    shaded behind its rows, and the published or expected effect (``expected_pct``) as an open
    diamond.  ``rows``: :func:`effect_rows`' columns (``host``, ``config``, ``effect_pct``,
    ``ci_low_pct``, ``ci_high_pct``, optional ``ci_level``, ``expected_pct``).  The x label
    states the CI level once.  Rows without a CI are drawn as a point only ("no CI")."""
    d = rows.reset_index(drop=True)
    if d.empty:
        return []
    noise = noise or {}
    hosts = d["host"].astype(str) if "host" in d.columns else pd.Series("", index=d.index)
    labels = [(f"{h}  {c}" if h else str(c)) for h, c in zip(hosts, d["config"].astype(str))]
    y = np.arange(len(d))[::-1].astype(float)
    fig, ax = plt.subplots(figsize=(10.0, 2.3 + 0.32 * len(d)))
    lo = pd.to_numeric(d["ci_low_pct"], errors="coerce")
    hi = pd.to_numeric(d["ci_high_pct"], errors="coerce")
    dl = pd.to_numeric(d["effect_pct"], errors="coerce")
    has = (lo.notna() & hi.notna()).to_numpy()
    palette = sns.color_palette("colorblind", max(1, hosts.nunique()))
    colour = {h: palette[i] for i, h in enumerate(dict.fromkeys(hosts))}
    banded = set()
    for h in dict.fromkeys(hosts):
        bound = noise.get(h)
        if bound is None or not math.isfinite(bound):
            continue
        ys = y[(hosts == h).to_numpy()]
        ax.fill_between([-bound, bound], ys.min() - 0.45, ys.max() + 0.45, color=colour[h], alpha=0.15, lw=0,
                        label=f"{h}: A/A band, \u00b1{bound:.2g}% (noise floor)" if h else
                        f"A/A band, \u00b1{bound:.2g}% (noise floor)")
        banded.add(h)
    for h in dict.fromkeys(hosts):
        m = (hosts == h).to_numpy()
        mc = m & has
        ax.errorbar(dl[mc], y[mc], xerr=[dl[mc] - lo[mc], hi[mc] - dl[mc]], fmt="o", color=colour[h],
                    ecolor="black", capsize=3, ms=5, label=f"{h}: measured" if h else "measured")
        mn = m & ~has
        if mn.any():
            ax.plot(dl[mn], y[mn], "D", color="grey", ms=4)
    if "expected_pct" in d.columns:
        ex = pd.to_numeric(d["expected_pct"], errors="coerce")
        me = ex.notna().to_numpy()
        if me.any():
            ax.plot(ex[me], y[me], "D", mfc="none", mec="crimson", ms=8, mew=1.5, ls="none",
                    label="published / expected effect")
    labels = [lab + ("" if h else "  (no CI)") for lab, h in zip(labels, has)]
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-0.8, len(d) - 0.2)
    lv = level_text(d["ci_level"]) if "ci_level" in d.columns else "CI"
    ax.set_xlabel(f"{effect}, % (+ = better: faster or more ops/s), {lv}")
    fig.suptitle(title or f"{effect} per configuration and host", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    height = 2.3 + 0.32 * len(d)
    fig.set_size_inches(10.0, height)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", fontsize=7, ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.75 / height, 1, 1))
    return _save(fig, Path(out_dir), name)


def _better(v, lower_is_better: bool):
    return -v if lower_is_better else v


def meta_forest(rows: pd.DataFrame, comb: pd.DataFrame, out_dir, name: str = "forest-random-effects",
                key=("baseline", "candidate", "config"), title: str | None = None) -> list[Path]:
    """The random-effects forest: per comparison in ``comb`` (``ringlab.studies.sessions.combined``),
    a line per run of ``rows`` (its estimate and 95% CI, coloured by host), then the pooled
    estimate as a diamond with its 95% CI and, as a dashed bar, the interval the next run is
    expected in; heterogeneous comparisons are labelled so.  + = better in every row."""
    if comb is None or not len(comb):
        return []
    hosts = list(dict.fromkeys(rows["host"].astype(str)))
    palette = sns.color_palette("colorblind", max(1, len(hosts)))
    colour = {h: palette[i] for i, h in enumerate(hosts)}
    lines = []   # (label, kind, est, lo, hi, host, pi_lo, pi_hi)
    for _, c in comb.iterrows():
        lib = bool(c.get("lower_is_better", True))
        sub = rows[np.logical_and.reduce([rows[k] == c[k] for k in key])]
        head = " ".join(str(c[k]) for k in key if k != "baseline") + f" vs {c['baseline']}"
        for _, r in sub.iterrows():
            lo, hi = sorted((_better(r["ci_low_pct"], lib), _better(r["ci_high_pct"], lib)))
            lines.append((f"  {r['run']}", "run", _better(r["delta_pct"], lib), lo, hi, str(r["host"]), None, None))
        lo, hi = sorted((_better(c["ci_low_pct"], lib), _better(c["ci_high_pct"], lib)))
        plo, phi = sorted((_better(c["pi_low_pct"], lib), _better(c["pi_high_pct"], lib)))
        het = f", heterogeneous (I² {c['i2']:.0%})" if c["heterogeneous"] else f" (I² {c['i2']:.0%})"
        lines.append((f"{head}: pooled, k={int(c['k'])}{het}", "pooled", _better(c["estimate_pct"], lib), lo, hi,
                      "", plo, phi))
    y = np.arange(len(lines))[::-1].astype(float)
    height = 2.0 + 0.3 * len(lines)
    fig, ax = plt.subplots(figsize=(10.0, height))
    shown = set()
    for yi, (lab, kind, est, lo, hi, host, plo, phi) in zip(y, lines):
        if kind == "run":
            ax.errorbar([est], [yi], xerr=[[est - lo], [hi - est]], fmt="o", color=colour.get(host, "grey"),
                        ecolor="black", capsize=2, ms=4, label=None if host in shown else f"{host}: a run, 95% CI")
            shown.add(host)
        else:
            if math.isfinite(plo) and math.isfinite(phi):
                ax.plot([plo, phi], [yi, yi], ls="--", color="crimson", lw=1.2,
                        label=None if "pi" in shown else "next run expected (95% prediction interval; 3+ runs)")
                shown.add("pi")
            ax.fill([lo, est, hi, est], [yi, yi + 0.3, yi, yi - 0.3], color="black",
                    label=None if "pooled" in shown else "pooled (random effects), 95% CI")
            shown.add("pooled")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels([ln[0] for ln in lines], fontsize=7)
    ax.set_ylim(-0.8, len(lines) - 0.2)
    ax.set_xlabel("effect, % (+ = better: faster or more ops/s), 95% intervals")
    fig.suptitle(title or "every comparison measured in two or more runs, combined by random effects", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", fontsize=7, ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.75 / height, 1, 1))
    return _save(fig, Path(out_dir), name)


def paired_size_sweep(rows: pd.DataFrame, out_dir, name: str = "size_sweep_hosts", title: str | None = None,
                      noise: dict | None = None) -> list[Path]:
    """The paired effect (+ = better, with its CI) against ring size, one line per host, each
    host's A/A band shaded in its colour; one panel per mode (and batch / lock when they vary).
    ``rows``: :func:`effect_rows` with a ``size`` column, from the runs of several hosts."""
    d = rows.reset_index(drop=True)
    if d.empty or "size" not in d.columns:
        return []
    noise = noise or {}
    keys = [c for c in ("mode", "batch", "lock", "pair_class") if c in d.columns and d[c].nunique() > 1]
    panels = sorted(d.groupby(keys).groups) if keys else [()]
    panels = [k if isinstance(k, tuple) else (k,) for k in panels]
    hosts = list(dict.fromkeys(sorted(d["host"].astype(str))))
    palette = sns.color_palette("colorblind", max(1, len(hosts)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.5, 4.4), squeeze=False, sharey=True)
    sizes = sorted(pd.to_numeric(d["size"]).unique())
    for ax, key in zip(axes[0], panels):
        sub = d
        for c, k in zip(keys, key):
            sub = sub[sub[c] == k]
        for i, h in enumerate(hosts):
            g = sub[sub["host"].astype(str) == h].assign(size=lambda x: pd.to_numeric(x["size"]))
            g = g.sort_values("size")
            bound = noise.get(h)
            if bound is not None and math.isfinite(bound):
                ax.axhspan(-bound, bound, color=palette[i], alpha=0.12, lw=0,
                           label=f"{h}: A/A band \u00b1{bound:.2g}%")
            if g.empty:
                continue
            off = 1 + 0.04 * (i - (len(hosts) - 1) / 2)   # hosts side by side at each size
            ax.errorbar(g["size"] * off, g["effect_pct"],
                        yerr=[g["effect_pct"] - g["ci_low_pct"], g["ci_high_pct"] - g["effect_pct"]],
                        marker="o", capsize=3, color=palette[i], label=h)
            if "expected_pct" in g.columns and g["expected_pct"].notna().any():
                ax.plot(g["size"], g["expected_pct"], "D", mfc="none", mec="crimson", ms=7, ls="none",
                        label="published / expected" if i == 0 else None)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(int(s)) for s in sizes], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("ring size (slots)")
        named = dict(zip(keys, key))
        parts = ([_mode_label(named["mode"])] if "mode" in named else []) + \
            [f"{c}={named[c]}" for c in ("batch", "lock", "pair_class") if c in named]
        ax.set_title(", ".join(parts) or (_mode_label(d["mode"].iloc[0]) if "mode" in d.columns else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    lv = level_text(d["ci_level"]) if "ci_level" in d.columns else "CI"
    axes[0][0].set_ylabel("paired effect, % (+ = better)")
    fig.suptitle((title or "paired effect against ring size, per host") + f" ({lv})", fontsize=10)
    fig.tight_layout()
    return _save(fig, Path(out_dir), name)


def cross_run_forest(runs, out_dir, baseline: str = "batch", patched: str = "reorder",
                     metric: str = "ns_per_op", root=None) -> list[Path]:
    """figures/forest.png of the compare-runs folder: for every run (objects with ``raw``,
    ``host``, ``experiment``, ``run_id``) holding both variants, each configuration's effect of
    ``patched`` against ``baseline`` (+ = patched better) with its CI, rows = configuration x
    host, each host's A/A band shaded; [] when no run holds both."""
    parts, noise = [], {}
    for r in runs:
        raw = r.raw
        if "variant" not in raw.columns or metric not in raw.columns:
            continue
        if not {baseline, patched} <= set(raw["variant"].astype(str)):
            continue
        cmp = compare(raw, baseline, metric)
        rows = effect_rows(cmp, r.host, candidate=patched)
        if len(rows):
            rows["config"] = rows["config"] + f"  ({r.experiment}/{r.run_id})"
            parts.append(rows)
            noise.setdefault(r.host, host_noise_floor(r.host, root))
    if not parts:
        return []
    title = f"{patched} (patched) vs {baseline} (baseline), {metric}: paired effect per configuration and host"
    with sns.axes_style("whitegrid"):
        return forest(pd.concat(parts, ignore_index=True), Path(out_dir), "forest", title, noise=noise)


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


