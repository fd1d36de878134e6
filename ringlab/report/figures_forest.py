"""Forests: effect rows in one sign (+ = better) and the figures drawn from them.

  forest          the headline figure of an A/B run: a line per row (configuration x host), its
                  CI and, where the row has one, the interval the next run is expected in; the
                  host's A/A band shaded; the stated expectation; called rows filled and coloured
                  by direction, rows not called open and grey.  Effects that span more than
                  ``SPAN`` x in size are split into panels of their own x range.
  meta_forest     the random-effects forest of compare-runs, one figure per experiment (and per
                  ``MAX_FOREST_ROWS`` lines)
  paired_size_sweep  the paired effect against ring size, one line per host, each host's runs
                  named by commit and date
  cross_run_forest  compare-runs' forest.png of one patched/baseline pair across runs

Every figure is saved through ``ringlab.report.figures.save`` (looked up when called, so that a
test that replaces it sees these figures too).
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from ringlab import fmt
from ringlab.catalog import SEED000, is_call
from ringlab.report import tables
from ringlab.report.figures_base import mode_label
from ringlab.rundir.calibration import noise_floor, with_host_next_run
from ringlab.stats import compare

#: the columns of a forest row (``effect_rows`` makes them from a comparison)
FOREST_COLUMNS = ("host", "config", "effect_pct", "ci_low_pct", "ci_high_pct", "ci_level", "verdict")
#: the most lines one forest figure holds; more are split over several figures
MAX_FOREST_ROWS = 40
#: effects whose sizes span more than this factor are drawn in panels of their own x range
SPAN = 10.0
#: the smallest effect size (percent) the span is measured from: 0.1% and 0.01% are both "none"
SPAN_FLOOR_PCT = 1.0
#: colours of a called row by direction (colour-blind safe: blue / vermillion); not called: grey
BETTER, WORSE, NOT_CALLED = "#0072B2", "#D55E00", "#777777"


def _save(fig, out_dir, name):
    from ringlab.report import figures
    return figures.save(fig, Path(out_dir), name)


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
    """Forest rows (:data:`FOREST_COLUMNS`, plus ``candidate``, ``expected_pct``,
    ``next_low_pct`` / ``next_high_pct`` and the configuration columns) from the Comparison rows
    of one run: the paired effect in one sign, + = better (``gain_pct`` for a lower-is-better
    metric), with its CI and next-run interval turned the same way (NaN where the frame has no
    next-run interval).  ``expected``: a number, or a function of the row returning the
    published or expected effect *on the compared metric*, in the same sign (None: no marker)."""
    if candidate is not None:
        cmp = cmp[cmp["candidate"].astype(str) == str(candidate)]
    cols = label_columns if label_columns is not None else config_columns(cmp)
    several = cmp["candidate"].nunique() > 1 if "candidate" in cmp.columns else False
    has_next = tables.has_next(cmp)
    rows = []
    for _, r in cmp.iterrows():
        lo, hi = tables.gain_ci(r)
        nlo, nhi = tables.next_gain_ci(r) if has_next else (math.nan, math.nan)
        parts = ([f"{r['candidate']} vs {r['baseline']}"] if several else []) + \
            [f"{c}={r[c]}" for c in cols if c != "pair_class"] + \
            ([str(r["pair_class"])] if "pair_class" in cols else [])
        exp = expected(r) if callable(expected) else expected
        rows.append({"host": str(host), "config": " ".join(parts) or "all", "effect_pct": tables.gain(r),
                     "ci_low_pct": lo, "ci_high_pct": hi, "ci_level": r.get("ci_level", math.nan),
                     "next_low_pct": nlo, "next_high_pct": nhi,
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


def called(verdict) -> bool:
    """Whether a row's verdict is a call (``ringlab.catalog.Verdict.is_call``: faster, slower, ...)."""
    return is_call(verdict)


def magnitude_groups(effects) -> list[np.ndarray]:
    """Row positions split by the size of their effect: one group, unless the sizes (|effect|,
    at least ``SPAN_FLOOR_PCT``) span more than ``SPAN`` x and fall on both sides of a gap of
    3 x or more, when the rows up to the widest gap form the first group and the rest the
    second.  A ±1% row beside a 90% row is unreadable on one linear axis."""
    eff = np.abs(pd.to_numeric(pd.Series(effects), errors="coerce").to_numpy(dtype=float))
    size = np.where(np.isfinite(eff), np.maximum(eff, SPAN_FLOOR_PCT), SPAN_FLOOR_PCT)
    every = np.arange(len(size))
    if not len(size) or size.max() / size.min() <= SPAN:
        return [every]
    s = np.unique(size)
    gaps = s[1:] / s[:-1]
    k = int(np.argmax(gaps))
    if gaps[k] < 3:
        return [every]
    small = size <= s[k]
    return [every[small], every[~small]]


def _band(ax, hosts, y, noise, colour, shown):
    for h in dict.fromkeys(hosts):
        bound = noise.get(h)
        if bound is None or not math.isfinite(bound):
            continue
        ys = y[(hosts == h).to_numpy()]
        label = f"{h}: A/A band, \u00b1{bound:.2g}% (noise floor)" if h else f"A/A band, \u00b1{bound:.2g}% (noise floor)"
        ax.fill_between([-bound, bound], ys.min() - 0.45, ys.max() + 0.45, color=colour[h], alpha=0.15, lw=0,
                        label=None if label in shown else label)
        shown.add(label)


def _forest_panel(ax, d: pd.DataFrame, noise: dict, colour: dict, shown: set) -> None:
    """One panel of :func:`forest`: rows of ``d`` from the top down."""
    hosts = d["host"].astype(str) if "host" in d.columns else pd.Series("", index=d.index)
    y = np.arange(len(d))[::-1].astype(float)
    num = {c: pd.to_numeric(d[c], errors="coerce").to_numpy(dtype=float) if c in d.columns
           else np.full(len(d), math.nan)
           for c in ("effect_pct", "ci_low_pct", "ci_high_pct", "next_low_pct", "next_high_pct", "expected_pct",
                     "instructions_pct")}
    eff, lo, hi = num["effect_pct"], num["ci_low_pct"], num["ci_high_pct"]
    _band(ax, hosts, y, noise, colour, shown)
    nxt = np.isfinite(num["next_low_pct"]) & np.isfinite(num["next_high_pct"])
    if nxt.any():
        ax.hlines(y[nxt], num["next_low_pct"][nxt], num["next_high_pct"][nxt], color="#999999", lw=5, alpha=0.35,
                  label=None if "next" in shown else "next run here (95% prediction interval)", zorder=1)
        shown.add("next")
    has = np.isfinite(lo) & np.isfinite(hi)
    if has.any():
        ax.hlines(y[has], lo[has], hi[has], color="black", lw=1.3, zorder=2)
        for end in (lo, hi):
            ax.plot(end[has], y[has], "|", color="black", ms=7, zorder=2)
    verdicts = d["verdict"] if "verdict" in d.columns else pd.Series("", index=d.index)
    is_called = np.array([called(v) for v in verdicts], dtype=bool)
    for key, m, style in (
            ("better", has & is_called & (eff > 0), dict(mfc=BETTER, mec=BETTER, label="called, + (better)")),
            ("worse", has & is_called & (eff < 0), dict(mfc=WORSE, mec=WORSE, label="called, \u2212 (worse)")),
            ("open", has & ~is_called, dict(mfc="white", mec=NOT_CALLED, label="not called (open)"))):
        if m.any():
            lab = style.pop("label")
            ax.plot(eff[m], y[m], "o", ms=6, mew=1.4, ls="none", zorder=3, label=None if key in shown else lab,
                    **style)
            shown.add(key)
    if (~has).any():
        ax.plot(eff[~has], y[~has], "D", color="grey", ms=4, ls="none", zorder=3)
    ex = num["expected_pct"]
    if np.isfinite(ex).any():
        m = np.isfinite(ex)
        ax.plot(ex[m], y[m], "D", mfc="none", mec="crimson", ms=8, mew=1.5, ls="none", zorder=4,
                label=None if "expected" in shown else "published / expected effect")
        shown.add("expected")
    ins = num["instructions_pct"]
    if np.isfinite(ins).any():
        m = np.isfinite(ins)
        ax.plot(ins[m], y[m], "x", color="purple", ms=7, mew=1.5, ls="none", zorder=4,
                label=None if "instructions" in shown else
                "extra instructions/op stated before measuring, as \u2212% (a count, not a time prediction)")
        shown.add("instructions")
    labels = [(f"{h}  {c}" if h else str(c)) for h, c in zip(hosts, d["config"].astype(str))]
    if "expected_call" in d.columns:
        labels = [lab + (f"  (expected: {e})" if isinstance(e, str) and e else "")
                  for lab, e in zip(labels, d["expected_call"])]
    labels = [lab + ("" if h else "  (no CI)") for lab, h in zip(labels, has)]
    ax.set_xlim(*_panel_range(num, [noise.get(h) for h in dict.fromkeys(hosts)]))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(-0.8, len(d) - 0.2)
    ax.grid(axis="x", alpha=0.3)


def _panel_range(num: dict, bounds) -> tuple[float, float]:
    """A forest panel's x range: every interval and marker it draws, with 0 and the A/A bands
    when 0 lies within half the data's width of it (a panel of effects near +90% does not
    stretch to 0)."""
    v = np.concatenate([a[np.isfinite(a)] for a in num.values()] + [np.zeros(0)])
    if not len(v):
        return -1.0, 1.0
    a, b = float(v.min()), float(v.max())
    if a <= 0 <= b or min(abs(a), abs(b)) <= 0.5 * max(b - a, 1e-9):
        band = max([x for x in bounds if x is not None and math.isfinite(x)] + [0.0])
        a, b = min(a, 0.0, -band), max(b, 0.0, band)
    pad = 0.05 * (b - a) if b > a else 1.0
    return a - pad, b + pad


def _legend(fig, axes, height: float, ncol: int = 3) -> float:
    """One legend below the panels (each label once); returns the inches it takes."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if not labels:
        return 0.2
    fig.legend(handles, labels, loc="lower center", fontsize=7, ncol=ncol, frameon=False)
    return 0.25 + 0.2 * math.ceil(len(labels) / ncol)


def forest(rows: pd.DataFrame, out_dir, name: str = "forest", title: str | None = None,
           noise: dict | None = None, effect: str = "effect") -> list[Path]:
    """One forest: a line per row (configuration x host), the paired effect in one sign
    (+ = better) with its CI (black) and, where the row has ``next_low_pct`` / ``next_high_pct``,
    the interval the next run is expected in (a wide pale bar); each host's A/A band (its noise
    floor, ``noise`` {host: bound %}) shaded behind its rows; the published or expected effect on
    the same metric (``expected_pct``) as an open diamond; ``instructions_pct`` (an expected
    instruction count as -%) as an x; ``expected_call`` (an expected verdict) in the row's label.
    A called row (``verdict`` a call) is a filled dot coloured by its direction, a row not called
    an open grey one.  Rows whose effects span more than ``SPAN`` x in size are drawn in two
    panels, each with its own x range.  The x label states the CI level once.  Rows without a CI
    are drawn as a point only ("no CI")."""
    d = rows.reset_index(drop=True)
    if d.empty:
        return []
    noise = noise or {}
    hosts = d["host"].astype(str) if "host" in d.columns else pd.Series("", index=d.index)
    palette = sns.color_palette("colorblind", max(1, hosts.nunique()))
    colour = {h: palette[i] for i, h in enumerate(dict.fromkeys(hosts))}
    groups = magnitude_groups(d["effect_pct"])
    height = 2.3 + 0.32 * len(d) + 0.7 * (len(groups) - 1)
    fig, axes = plt.subplots(len(groups), 1, figsize=(10.0, height), squeeze=False,
                             gridspec_kw={"height_ratios": [len(g) + 1 for g in groups]})
    axes = list(axes[:, 0])
    shown: set = set()
    lv = level_text(d["ci_level"]) if "ci_level" in d.columns else "CI"
    for i, (ax, g) in enumerate(zip(axes, groups)):
        _forest_panel(ax, d.iloc[g].reset_index(drop=True), noise, colour, shown)
        if len(groups) > 1:
            size = np.abs(pd.to_numeric(d["effect_pct"].iloc[g], errors="coerce"))
            ax.set_title(("smaller" if i == 0 else "larger") + f" effects (|effect| {size.min():.2g}-"
                         f"{size.max():.3g}%): each panel has its own x range", fontsize=8)
    axes[-1].set_xlabel(f"{effect}, % (+ = better: faster or more ops/s), {lv}")
    fig.suptitle(title or f"{effect} per configuration and host", fontsize=10)
    bottom = _legend(fig, axes, height)
    fig.tight_layout(rect=(0, bottom / height, 1, 1))
    return _save(fig, Path(out_dir), name)


def _better(v, lower_is_better: bool):
    return -v if lower_is_better else v


def _meta_lines(rows: pd.DataFrame, comb: pd.DataFrame, key) -> list[list[tuple]]:
    """Per comparison of ``comb``: its lines (label, kind, est, lo, hi, host, pi_lo, pi_hi)."""
    blocks = []
    for _, c in comb.iterrows():
        lib = bool(c.get("lower_is_better", True))
        sub = rows[np.logical_and.reduce([rows[k] == c[k] for k in key])]
        head = " ".join(str(c[k]) for k in key if k not in ("baseline", "experiment")) + f" vs {c['baseline']}"
        lines = []
        for _, r in sub.iterrows():
            lo, hi = sorted((_better(r["ci_low_pct"], lib), _better(r["ci_high_pct"], lib)))
            lines.append((f"  {r['run']}", "run", _better(r["delta_pct"], lib), lo, hi, str(r["host"]), None, None))
        lo, hi = sorted((_better(c["ci_low_pct"], lib), _better(c["ci_high_pct"], lib)))
        plo, phi = sorted((_better(c["pi_low_pct"], lib), _better(c["pi_high_pct"], lib)))
        het = f", heterogeneous (I² {c['i2']:.0%})" if c["heterogeneous"] else f" (I² {c['i2']:.0%})"
        lines.append((f"{head}: pooled, k={int(c['k'])}{het}", "pooled", _better(c["estimate_pct"], lib), lo, hi,
                      "", plo, phi))
        blocks.append(lines)
    return blocks


def _chunks(blocks: list[list[tuple]], limit: int) -> list[list[tuple]]:
    """Whole comparisons packed in order into figures of at most ``limit`` lines (a comparison
    longer than ``limit`` is a figure of its own)."""
    out, cur = [], []
    for b in blocks:
        if cur and len(cur) + len(b) > limit:
            out.append(cur)
            cur = []
        cur = cur + b
    return out + ([cur] if cur else [])


def _meta_figure(lines, colour, out_dir, name, title) -> list[Path]:
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
    fig.suptitle(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    bottom = _legend(fig, [ax], height)
    fig.tight_layout(rect=(0, bottom / height, 1, 1))
    return _save(fig, Path(out_dir), name)


def meta_forest(rows: pd.DataFrame, comb: pd.DataFrame, out_dir, name: str = "forest-random-effects",
                key=("baseline", "candidate", "config"), title: str | None = None) -> list[Path]:
    """The random-effects forest: per comparison in ``comb`` (``ringlab.studies.sessions.combined``),
    a line per run of ``rows`` (its estimate and 95% CI, coloured by host), then the pooled
    estimate as a diamond with its 95% CI and, as a dashed bar, the interval the next run is
    expected in; heterogeneous comparisons are labelled so.  + = better in every row.  One
    figure per experiment (``NAME-EXPERIMENT``) when ``comb`` has an ``experiment`` column, and
    one per ``MAX_FOREST_ROWS`` lines within it (``NAME-EXPERIMENT-2``, ...), so that each is
    readable at its size; a single figure ``NAME`` when everything fits in one."""
    if comb is None or not len(comb):
        return []
    hosts = list(dict.fromkeys(rows["host"].astype(str)))
    palette = sns.color_palette("colorblind", max(1, len(hosts)))
    colour = {h: palette[i] for i, h in enumerate(hosts)}
    head = title or "every comparison measured in two or more runs, combined by random effects"
    parts = [("", comb)] if "experiment" not in comb.columns else \
        [(str(e), g) for e, g in comb.groupby(comb["experiment"].astype(str), sort=True)]
    blocks = {e: _meta_lines(rows, g, key) for e, g in parts}
    if sum(len(ln) for b in blocks.values() for ln in b) <= MAX_FOREST_ROWS and len(parts) == 1:
        e, b = next(iter(blocks.items()))
        return _meta_figure([ln for blk in b for ln in blk], colour, out_dir, name,
                            head + (f"\n{e}" if e else ""))
    out = []
    for e, b in blocks.items():
        chunks = _chunks(b, MAX_FOREST_ROWS)
        for i, lines in enumerate(chunks):
            part = f" (part {i + 1} of {len(chunks)})" if len(chunks) > 1 else ""
            out += _meta_figure(lines, colour, out_dir, f"{name}-{e}" + (f"-{i + 1}" if i else ""),
                                f"{head}\n{e}{part}")
    return out


def _runs_text(g: pd.DataFrame) -> str:
    """The commits and dates of a host's rows ("commit 1a2b3c4, 2026-12-06"), "" without them."""
    bits = []
    for col, word, n in (("commit", "commit", 7), ("date", "", 10)):
        if col in g.columns:
            vals = [str(v)[:n] for v in dict.fromkeys(g[col].dropna()) if str(v)]
            if vals:
                bits.append((word + " " if word else "") + "/".join(vals))
    return ", ".join(bits)


def paired_size_sweep(rows: pd.DataFrame, out_dir, name: str = "size_sweep_hosts", title: str | None = None,
                      noise: dict | None = None) -> list[Path]:
    """The paired effect (+ = better, with its CI) against ring size, one line per host, each
    host's A/A band shaded in its colour; one panel per mode (and batch / lock when they vary).
    ``rows``: :func:`effect_rows` with a ``size`` column, from the runs of several hosts; with
    ``commit`` and ``date`` columns each host's legend entry names its run's commit and date,
    and the title says when the hosts' runs come from different commits or dates."""
    d = rows.reset_index(drop=True)
    if d.empty or "size" not in d.columns:
        return []
    noise = noise or {}
    keys = [c for c in ("mode", "batch", "lock", "pair_class") if c in d.columns and d[c].nunique() > 1]
    panels = sorted(d.groupby(keys).groups) if keys else [()]
    panels = [k if isinstance(k, tuple) else (k,) for k in panels]
    hosts = list(dict.fromkeys(sorted(d["host"].astype(str))))
    runs = {h: _runs_text(d[d["host"].astype(str) == h]) for h in hosts}
    palette = sns.color_palette("colorblind", max(1, len(hosts)))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.5, 4.6), squeeze=False, sharey=True)
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
                        marker="o", capsize=3, color=palette[i], label=f"{h} ({runs[h]})" if runs[h] else h)
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
        parts = ([mode_label(named["mode"])] if "mode" in named else []) + \
            [f"{c}={named[c]}" for c in ("batch", "lock", "pair_class") if c in named]
        ax.set_title(", ".join(parts) or (mode_label(d["mode"].iloc[0]) if "mode" in d.columns else ""),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    lv = level_text(d["ci_level"]) if "ci_level" in d.columns else "CI"
    axes[0][0].set_ylabel("paired effect, % (+ = better)")
    mixed = [c for c in ("commit", "date") if c in d.columns and d[c].dropna().astype(str).str[:10].nunique() > 1]
    sub = ("\nruns of different " + " and ".join(f"{c}s" for c in mixed) + ": "
           + "; ".join(f"{h}: {runs[h]}" for h in hosts)) if mixed else ""
    fig.suptitle((title or "paired effect against ring size, per host") + f" ({lv})" + sub, fontsize=10)
    fig.tight_layout()
    return _save(fig, Path(out_dir), name)


def cross_run_forest(runs, out_dir, baseline: str = SEED000.baseline, patched: str = SEED000.patched,
                     metric: str = "ns_per_op", root=None) -> list[Path]:
    """figures/forest.png of the compare-runs folder: for every run (objects with ``raw``,
    ``host``, ``experiment``, ``run_id``) holding both variants, each configuration's effect of
    ``patched`` against ``baseline`` (+ = patched better) with its CI and next-run interval, rows =
    configuration x host, each host's A/A band shaded; [] when no run holds both."""
    parts, noise = [], {}
    for r in runs:
        raw = r.raw
        if "variant" not in raw.columns or metric not in raw.columns:
            continue
        if not {baseline, patched} <= set(raw["variant"].astype(str)):
            continue
        cmp = with_host_next_run(compare(raw, baseline, metric), r.host, root, run_dir=getattr(r, "path", None),
                                 metric=metric)
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


__all__ = ["FOREST_COLUMNS", "MAX_FOREST_ROWS", "SPAN", "called", "config_columns", "cross_run_forest",
           "effect_rows", "forest", "host_noise_floor", "level_text", "magnitude_groups", "meta_forest",
           "paired_size_sweep"]
