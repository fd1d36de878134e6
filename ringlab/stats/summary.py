"""Per-group summaries of one metric from a raw.csv frame.

A *group* is one configuration: ``variant`` x every parameter column
(``ringlab.schema.param_columns``), unless ``by`` says otherwise.  Only rows with
``status == "ok"`` and ``warmup == False`` are measurements; the others are
counted and reported (``measurements()``), never silently lost.

Bootstrap CIs are ``scipy.stats.bootstrap``'s (percentile method) of the sorted sample, the
mean and median from the same resamples, with a ``numpy.random.Generator`` seeded from
``seed`` and the group's data, so the same data gives the same CI every time.
The percentile method is used: BCa needs a jackknife (O(n^2) per group), too
slow for 10^5 rows, and for sample sizes >= 10 the two agree to well within
the CI's own uncertainty for benchmark-like distributions.

Above ``BOOTSTRAP_MAX_N`` values in a group (a long run: 500,000 rounds of one configuration)
the resamples' cost (resamples x n) is not paid: the mean's CI is Student's t interval
(``scipy.stats.ttest_1samp(...).confidence_interval``), the median's the distribution-free
interval between two order statistics whose binomial coverage is at least the level
(``scipy.stats.quantile_test(...).confidence_interval``), both O(n log n) at most and without
resampling.  At such sizes the percentile bootstrap of the mean is the t interval to within its
Monte Carlo error, and the order-statistic interval is the exact form of what the bootstrap of
the median estimates.  The frame ``summarize`` returns then has a ``ci_method`` column
(``CI_METHOD_BOOTSTRAP`` or ``CI_METHOD_LARGE_N`` per row); below the threshold it has none, so
the summaries of smaller runs are unchanged.
"""
from __future__ import annotations

import hashlib
import math
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.errors import ParamError
from ringlab.stats import outliers as _outliers

# 1000 resamples: the Monte Carlo error of a 95% percentile interval is then small against
# its width (Efron & Tibshirani recommend B >= 1000 for percentile CIs), at half the cost.
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 20160325  # any fixed value; results must repeat exactly

#: metrics recorded in a time unit, and that unit (for human-readable values)
_TIME_UNIT = {"ns_per_op": "ns", "elapsed_ns": "ns", "ns_producer": "ns", "ns_consumer": "ns",
              "c2c_latency_ns": "ns", "elapsed_us": "us", "wall_s": "s", "elapsed_ms": "ms"}
_SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class StatsError(ParamError):
    """Bad input to a statistics function; the message names the parameter and the allowed values."""


def format_value(value: float, metric: str) -> str:
    """``value`` of ``metric`` with a sensible unit: ns_per_op stays in ns, other
    times scale to ns/us/ms/s ("2.25 s"), everything else is plain."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    unit = _TIME_UNIT.get(metric)
    if unit is None:
        return f"{value:.4g}"
    if metric == "ns_per_op":  # per-op costs are read in ns, whatever their size
        return f"{value:.4g} ns"
    seconds = value * _SCALE[unit]
    for u in ("s", "ms", "us", "ns"):
        if abs(seconds) >= _SCALE[u] or u == "ns":
            return f"{seconds / _SCALE[u]:.3g} {u}"
    return f"{value:.4g} {unit}"  # pragma: no cover


def check_metric(df: pd.DataFrame, metric: str) -> None:
    if metric not in df.columns:
        numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c])
                   and c not in ("trial", "iteration", "order", "exit_code")]
        raise StatsError(f"metric '{metric}' is not a column of this raw.csv; allowed: "
                         + ", ".join(numeric))


def group_columns(df: pd.DataFrame, by: Sequence[str] | str | None = None,
                  include_variant: bool = True) -> list[str]:
    """The columns that define a group: variant + parameters, or ``by``."""
    if by is None:
        cols = schema.param_columns(df.columns)
    else:
        cols = [c.strip() for c in by.split(",")] if isinstance(by, str) else list(by)
        cols = [c for c in cols if c]
        bad = [c for c in cols if c not in df.columns]
        if bad:
            raise StatsError(f"by: unknown column(s) {', '.join(bad)}; allowed: "
                             + ", ".join(schema.param_columns(df.columns)
                                         + [c for c in df.columns if c not in schema.NON_PARAM_COLUMNS
                                            and c not in schema.param_columns(df.columns)]))
        cols = [c for c in cols if c != "variant"]
    if include_variant and "variant" in df.columns:
        cols = ["variant"] + cols
    return cols


def measurements(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC) -> tuple[pd.DataFrame, dict]:
    """Rows that are measurements (status ok, not warm-up, metric present).

    Returns ``(frame, excluded)`` where ``excluded`` counts what was left out and why.
    """
    check_metric(df, metric)
    keep = pd.Series(True, index=df.index)
    excluded = {}
    if "status" in df.columns:
        bad = schema.failed_mask(df)
        excluded["status_not_ok"] = int(bad.sum())
        keep &= ~bad
    if "warmup" in df.columns:
        w = schema.warmup_mask(df)
        excluded["warmup"] = int((w & keep).sum())
        keep &= ~w
    vals = pd.to_numeric(df[metric], errors="coerce")
    excluded["metric_missing"] = int((vals.isna() & keep).sum())
    keep &= vals.notna()
    # pandas' copy-on-write: the rows kept are a new frame and the metric a new column, so the
    # caller's frame never changes; every row kept shares its columns instead of copying them
    out = df.copy(deep=False) if keep.all() else df.loc[keep]
    out[metric] = vals[keep].astype(float)
    excluded["total"] = int(len(df) - len(out))
    return out, excluded


#: values per batch of resamples (b x n) handed to scipy.stats.bootstrap
BATCH_VALUES = 4_000_000
#: above this many values in a group the CIs are computed without resampling (module docstring);
#: the runs under results/ have at most 9,290 rows in all
BOOTSTRAP_MAX_N = 20_000
#: ``ci_method`` of a row: resampled, or the t / order-statistic intervals of a large group
CI_METHOD_BOOTSTRAP = "percentile bootstrap"
CI_METHOD_LARGE_N = "t interval (mean), binomial order statistics (median)"


_CACHE: dict = {}
_CACHE_MAX = 4096


def _data_seed(v: np.ndarray, seed) -> np.random.Generator:
    """A Generator seeded from the data itself and ``seed``: a group's CI does not depend on
    which other groups are in the frame."""
    if isinstance(seed, np.random.Generator):
        return seed
    digest = hashlib.blake2b(np.ascontiguousarray(v, dtype=np.float64).tobytes(), digest_size=8).digest()
    return np.random.default_rng([int(seed), int.from_bytes(digest, "little")])


def _mean_median(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.stack([np.mean(x, axis=axis), np.median(x, axis=axis)])


def ci_method(n: int) -> str:
    """How the CIs of a group of ``n`` values are computed (``CI_METHOD_*``)."""
    return CI_METHOD_LARGE_N if n > BOOTSTRAP_MAX_N else CI_METHOD_BOOTSTRAP


def large_n_mean_median(v: np.ndarray, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """(mean_low, mean_high, median_low, median_high) without resampling: Student's t interval
    of the mean and the distribution-free binomial order-statistic interval of the median."""
    mean = sst.ttest_1samp(v, 0.0).confidence_interval(confidence)
    median = sst.quantile_test(v, q=float(np.median(v)), p=0.5).confidence_interval(confidence)
    return float(mean.low), float(mean.high), float(median.low), float(median.high)


def bootstrap_mean_median(values: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES,
                          seed=DEFAULT_SEED, confidence: float = 0.95) -> tuple[float, float, float, float]:
    """(mean_low, mean_high, median_low, median_high): percentile-bootstrap CI
    (``scipy.stats.bootstrap`` of the sorted sample, mean and median from the same resamples).

    NaN when there are fewer than 2 values; a sample without spread gets the value itself.
    Above ``BOOTSTRAP_MAX_N`` values: ``large_n_mean_median`` (no resampling).
    Results are cached by (data, n_resamples, seed, confidence)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return (math.nan,) * 4
    if np.all(v == v[0]):
        return (v[0], v[0], v[0], v[0])
    if len(v) > BOOTSTRAP_MAX_N:
        return large_n_mean_median(v, confidence)
    key = None
    if not isinstance(seed, np.random.Generator):
        key = (hashlib.blake2b(v.tobytes(), digest_size=16).digest(), int(n_resamples), int(seed), float(confidence))
        hit = _CACHE.get(key)
        if hit is not None:
            return hit
    batch = min(max(1, int(BATCH_VALUES // len(v))), n_resamples)
    res = sst.bootstrap((np.sort(v),), _mean_median, n_resamples=n_resamples, batch=batch, vectorized=True,
                        confidence_level=confidence, method="percentile", random_state=_data_seed(v, seed))
    lo, hi = res.confidence_interval
    out = (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))
    if key is not None:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = out
    return out


def describe(values: np.ndarray) -> dict:
    """n, mean, median, std, cv, min, max, p5, p95, mad of one sample (no resampling)."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n == 0:
        return dict(n=0, mean=math.nan, median=math.nan, std=math.nan, cv=math.nan, min=math.nan,
                    max=math.nan, p5=math.nan, p95=math.nan, mad=math.nan)
    mean = float(np.mean(v))
    std = float(np.std(v, ddof=1)) if n > 1 else math.nan
    p5, med, p95 = np.percentile(v, [5, 50, 95])
    return dict(n=n, mean=mean, median=float(med), std=std,
                cv=std / mean if n > 1 and mean != 0 else math.nan,
                min=float(v.min()), max=float(v.max()), p5=float(p5), p95=float(p95),
                # raw MAD (not scaled by 1.4826): median |x - median|
                mad=float(sst.median_abs_deviation(v, scale=1.0)))


def variance_components(frame: pd.DataFrame, metric: str, process_cols: Sequence[str]) -> dict:
    """Kalibera & Jones two-level variance components (process x iteration).

    ``process_cols`` identify one process (the group's columns + ``trial``).
    S1^2 = mean within-process variance of iterations; S2^2 = variance of process means.
    Unbiased components: T1^2 = S1^2 (iteration level), T2^2 = S2^2 - S1^2/n_iter
    (process level; clipped at 0 and flagged when negative, which means the
    process level adds nothing measurable).  Needs a balanced design: processes
    with a different iteration count are used with the mean count.
    """
    g = frame.groupby(list(process_cols), sort=False, dropna=False)[metric]
    counts = g.size()
    if len(counts) < 2 or counts.max() < 2:
        return {}
    within = g.var(ddof=1).dropna()
    s1 = float(within.mean()) if len(within) else math.nan
    s2 = float(g.mean().var(ddof=1))
    n_iter = float(counts.mean())
    t2 = s2 - s1 / n_iter
    return {"n_processes": int(len(counts)), "iterations_per_process": n_iter,
            "var_iteration": s1, "var_process": max(t2, 0.0), "var_process_raw": t2,
            "process_share": max(t2, 0.0) / (max(t2, 0.0) + s1) if (max(t2, 0) + s1) > 0 else math.nan}


def summarize(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC, by=None,
              n_resamples: int = DEFAULT_RESAMPLES, seed=DEFAULT_SEED) -> pd.DataFrame:
    """One row per group: descriptive statistics and bootstrap 95% CIs of mean and median,
    for all measurements and without severe (3 IQR) outliers.

    Columns: group columns, ``n_excluded`` (status/warm-up rows of the group left out),
    n, mean, median, std, cv, min, max, p5, p95, mad, mean_ci_low/high, median_ci_low/high,
    n_mild, n_severe, then the same statistics with a ``clean_`` prefix (severe outliers
    removed; ``clean_n_removed`` says how many) and, when ``iteration`` has more than one
    value, the variance components ``var_process``, ``var_iteration``, ``process_share``; last,
    when a group holds more than ``BOOTSTRAP_MAX_N`` values, ``ci_method`` (how each row's CIs
    were computed, see the module docstring).
    """
    meas, _ = measurements(df, metric)
    cols = group_columns(df, by)
    rng = seed  # per-group generators are derived from the data (see _data_seed)
    # how many rows of each group were not measurements
    all_rows = df.groupby(cols, sort=True, dropna=False).size() if cols else pd.Series([len(df)])
    has_iter = "iteration" in meas.columns and meas["iteration"].nunique() > 1
    rows = []
    large = False
    grouped = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in grouped:
        key = key if isinstance(key, tuple) else (key,)
        v = sub[metric].to_numpy()
        flags = _outliers.tukey_flags(v)
        row = dict(zip(cols, key))
        total = int(all_rows.get(key if len(key) > 1 else key[0], len(sub))) if cols else len(df)
        row["n_excluded"] = total - len(sub)
        row.update(describe(v))
        ml, mh, dl, dh = bootstrap_mean_median(v, n_resamples, rng)
        row.update(mean_ci_low=ml, mean_ci_high=mh, median_ci_low=dl, median_ci_high=dh)
        row["n_mild"] = int((flags == "mild").sum())
        row["n_severe"] = int((flags == "severe").sum())
        clean = v[flags != "severe"]
        row["clean_n_removed"] = int(len(v) - len(clean))
        if row["clean_n_removed"]:
            cd = describe(clean)
            ci = bootstrap_mean_median(clean, n_resamples, rng)
        else:  # identical sample: reuse, do not resample again
            cd, ci = describe(v), (ml, mh, dl, dh)
        for k, val in cd.items():
            row["clean_" + k] = val
        row.update(clean_mean_ci_low=ci[0], clean_mean_ci_high=ci[1],
                   clean_median_ci_low=ci[2], clean_median_ci_high=ci[3])
        if has_iter and "trial" in sub.columns:
            vc = variance_components(sub, metric, ["trial"])
            row["var_process"] = vc.get("var_process", math.nan)
            row["var_iteration"] = vc.get("var_iteration", math.nan)
            row["process_share"] = vc.get("process_share", math.nan)
        large |= len(v) > BOOTSTRAP_MAX_N
        row["ci_method"] = ci_method(len(v))
        rows.append(row)
    out = pd.DataFrame(rows)
    if not large and "ci_method" in out.columns:   # every group resampled: the frame as before
        out = out.drop(columns="ci_method")
    out.attrs["metric"] = metric
    return out
