"""Outliers (Tukey fences) and multimodality (Hartigan's dip test + KDE modes).

Outliers are *flagged*, never dropped: ``summarize`` reports statistics with and
without the severe ones and says how many it removed.

Why two multimodality tools: Hartigan's dip test (the ``diptest`` package) is
the standard test, but it has almost no power against lopsided mixtures: for
the seed-004 story (90 runs at 2.25 s, 10 at 4.4 s, n = 100) its p-value is
about 1.  So we also locate modes on a Gaussian KDE (scipy, Scott bandwidth) and
call a sample multimodal when the dip test rejects *or* the KDE shows separated
modes (each holding >= 5% and >= 3 values, with a valley below half of the
smaller peak).  Both numbers are reported so a reader can judge.

Above ``KDE_EXACT_MAX_N`` values (a long run) the KDE is evaluated by statsmodels' binned FFT
estimate (``KDEUnivariate(fft=True)``, the same Gaussian kernel and Scott bandwidth), read off
at the same 1024 points by linear interpolation: within 10^-5 of the exact density's peak (its
valleys are compared at half a peak), in milliseconds rather than seconds (the exact sum costs
n x 1024 kernel terms).
"""
from __future__ import annotations

import math

import diptest
import numpy as np
from scipy import stats as sst
import pandas as pd

MILD, SEVERE = 1.5, 3.0
MIN_SHARE = 0.05
MIN_POINTS = 3
VALLEY_RATIO = 0.5
#: the KDE is scipy's exact sum up to this many values, statsmodels' FFT estimate above (the
#: runs under results/ have at most 9,290 rows in all)
KDE_EXACT_MAX_N = 20_000
#: grid points of the FFT estimate (a power of two)
KDE_FFT_GRID = 1 << 16


def tukey_fences(values) -> dict:
    v = np.asarray(values, dtype=float)
    q1, q3 = np.percentile(v, [25, 75]) if len(v) else (math.nan, math.nan)
    iqr = q3 - q1
    return {"q1": q1, "q3": q3, "iqr": iqr,
            "mild_low": q1 - MILD * iqr, "mild_high": q3 + MILD * iqr,
            "severe_low": q1 - SEVERE * iqr, "severe_high": q3 + SEVERE * iqr}


def tukey_flags(values) -> np.ndarray:
    """Array of "", "mild" or "severe" per value (Tukey: 1.5 / 3 IQR beyond the quartiles)."""
    v = np.asarray(values, dtype=float)
    out = np.full(len(v), "", dtype=object)
    if len(v) < 4:
        return out
    f = tukey_fences(v)
    out[(v < f["mild_low"]) | (v > f["mild_high"])] = "mild"
    out[(v < f["severe_low"]) | (v > f["severe_high"])] = "severe"
    return out


def flag_outliers(df, metric: str, group_cols) -> "np.ndarray":
    """Tukey flag of every row of ``df`` within its group (same index order)."""
    flags = pd.Series("", index=df.index, dtype=object)
    groups = df.groupby(list(group_cols), sort=False, dropna=False) if group_cols else [((), df)]
    for _, sub in groups:
        flags.loc[sub.index] = tukey_flags(sub[metric].to_numpy())
    return flags


def _kde_density(v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The Gaussian KDE of ``v`` (Scott's bandwidth) at ``grid``: scipy's exact sum, or above
    ``KDE_EXACT_MAX_N`` values statsmodels' binned FFT estimate interpolated to ``grid``."""
    if len(v) <= KDE_EXACT_MAX_N:
        return sst.gaussian_kde(v)(grid)
    from statsmodels.nonparametric.kde import KDEUnivariate
    bw = float(np.std(v, ddof=1)) * len(v) ** (-1 / 5)    # scipy's Scott factor times the SD
    kde = KDEUnivariate(v)
    kde.fit(kernel="gau", bw=bw, fft=True, gridsize=KDE_FFT_GRID, cut=3)
    return np.interp(grid, kde.support, kde.density)


def _kde_modes(v: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Label each value with its KDE mode (0 = lowest).  Returns (labels, split points)."""
    lo, hi = v.min(), v.max()
    span = hi - lo
    grid = np.linspace(lo - 0.05 * span, hi + 0.05 * span, 1024)
    dens = _kde_density(v, grid)
    peaks = np.flatnonzero((dens[1:-1] > dens[:-2]) & (dens[1:-1] >= dens[2:])) + 1
    if len(peaks) < 2:
        return np.zeros(len(v), dtype=int), []
    # merge neighbouring peaks whose valley is not deep enough, then check shares
    splits = []
    kept = [peaks[0]]
    for p in peaks[1:]:
        seg = slice(kept[-1], p + 1)
        valley_i = kept[-1] + int(np.argmin(dens[seg]))
        if dens[valley_i] < VALLEY_RATIO * min(dens[kept[-1]], dens[p]):
            splits.append(grid[valley_i])
            kept.append(p)
        elif dens[p] > dens[kept[-1]]:
            kept[-1] = p
    labels = np.searchsorted(np.asarray(splits), v) if splits else np.zeros(len(v), dtype=int)
    # drop splits that leave a mode too small to be more than a stray value
    while splits:
        counts = np.bincount(labels, minlength=len(splits) + 1)
        small = [i for i, c in enumerate(counts) if c < max(MIN_POINTS, MIN_SHARE * len(v))]
        if not small:
            break
        i = small[0]
        splits.pop(i if i < len(splits) else i - 1)
        labels = np.searchsorted(np.asarray(splits), v) if splits else np.zeros(len(v), dtype=int)
    return labels, splits


def modality(values) -> dict:
    """Dip test and modes of one sample.

    Returns ``{"n", "dip", "dip_p", "multimodal", "labels", "modes"}`` where modes is a
    list of ``{"share", "center", "low", "high", "n"}`` (center = median of the mode),
    lowest first, and labels gives each value's mode index.
    """
    v = np.asarray(values, dtype=float)
    out = {"n": len(v), "dip": math.nan, "dip_p": math.nan, "multimodal": False,
           "labels": np.zeros(len(v), dtype=int), "modes": []}
    if len(v) < 10 or np.all(v == v[0]):
        out["reason"] = "fewer than 10 values" if len(v) < 10 else "no spread (all values equal)"
        if len(v):
            out["modes"] = [{"share": 1.0, "center": float(np.median(v)), "low": float(v.min()),
                             "high": float(v.max()), "n": len(v)}]
        return out
    dip, p = diptest.diptest(v)
    out["dip"], out["dip_p"] = float(dip), float(p)
    labels, splits = _kde_modes(v)
    if p < 0.05 and not splits:
        # the dip test sees a dip the KDE smoothed away: split at the widest gap
        s = np.sort(v)
        cut = s[int(np.argmax(np.diff(s)))]
        labels = (v > cut).astype(int)
        counts = np.bincount(labels, minlength=2)
        if counts.min() < max(MIN_POINTS, MIN_SHARE * len(v)):
            labels = np.zeros(len(v), dtype=int)
    out["labels"] = labels
    out["multimodal"] = bool(labels.max() > 0)
    for m in range(labels.max() + 1):
        x = v[labels == m]
        out["modes"].append({"share": len(x) / len(v), "center": float(np.median(x)),
                             "low": float(x.min()), "high": float(x.max()), "n": int(len(x))})
    return out


def describe_modes(mod: dict, fmt) -> str:
    """"bimodal: 90% at 2.25 s, 10% at 4.4 s" (fmt formats a value with its unit)."""
    modes = mod["modes"]
    if not mod["multimodal"]:
        return "unimodal"
    kind = "bimodal" if len(modes) == 2 else f"{len(modes)} modes"
    parts = ", ".join(f"{m['share'] * 100:.0f}% at {fmt(m['center'])}"
                      for m in sorted(modes, key=lambda m: -m["share"]))
    p = mod["dip_p"]
    if p < 0.05:
        return f"{kind}: {parts} (dip test p={p:.2g})"
    # the KDE found the modes; the dip test alone would not have (see the module's docstring)
    return f"{kind}: {parts} (separated KDE modes; the dip test, weak against a lopsided mix, gives p={p:.2g})"
