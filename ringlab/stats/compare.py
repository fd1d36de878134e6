"""A/B verdicts: every variant against a baseline, within each configuration.

Effect size: ``delta_pct = (median_candidate / median_baseline - 1) * 100``, the
ratio of *medians* (robust to the occasional 2x-slow trial that benchmarks
produce), with a two-sample percentile bootstrap CI of that same statistic
(``scipy.stats.bootstrap``, arms resampled independently, seeded Generator).

Significance: Mann-Whitney U two-sided (``p_value``), Holm-corrected across all
comparisons of the call (``p_holm``).  Welch's t-test p is computed too
(``p_welch``, not part of the JSON).

Verdict (``LOWER_IS_BETTER`` decides the direction):
  faster / slower            p_holm < alpha and the CI excludes 0
  no significant difference  otherwise, if the CI lies within +-noise
  inconclusive               otherwise; ``trials_needed`` per arm would resolve an
                             effect of the observed size (or of 2% when the observed
                             one is below the noise threshold), see ringlab.stats.power.

Deterministic metrics (e.g. callgrind instruction counts): when each arm has a
single repeated value the comparison is exact: delta is the difference, no CI,
no p (NaN), and ``note`` says "exact (deterministic metric)".

The seeds' sign convention (mail tables): ``gain_pct = (base - cand) / base * 100``
for lower-is-better metrics, i.e. "+6.2%" = candidate faster.  Checked against
thread 000: 2562 -> 2401 ms gives 6.28 (mail: 6.2), 4648 -> 4464 gives 3.96 (3.9),
3624 -> 3462 gives 4.47 (4.4), 2758 -> 2547 gives 7.65 (7.6): the mail truncated
this formula to one decimal; (base - cand)/cand would give 6.7/4.1/4.7/8.3.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import power as _power
from ringlab.stats.summary import (DEFAULT_RESAMPLES, DEFAULT_SEED, StatsError, bootstrap_distribution,
                                   group_columns, measurements)

JSON_FIELDS = ["group", "baseline", "candidate", "n_baseline", "n_candidate", "median_baseline",
               "median_candidate", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
               "verdict", "trials_needed"]
VERDICTS = ("faster", "slower", "no significant difference", "inconclusive")
EXACT_NOTE = "exact (deterministic metric)"
TINY_EFFECT_PCT = 2.0


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and does not count)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate([(m - i) * p[j] for i, j in enumerate(order)])
    out[order] = np.minimum(adj, 1.0)
    return out


def _direction(delta: float, lower_is_better: bool) -> str:
    return "faster" if (delta < 0) == lower_is_better else "slower"


def compare_arrays(base, cand, metric: str = schema.PRIMARY_METRIC, noise: float = 0.01,
                   alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES, seed=DEFAULT_SEED) -> dict:
    """One comparison without multiple-testing correction (``p_holm`` = ``p_value``).

    ``compare()`` calls this per pair and then applies Holm across the file.
    """
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    lib = metric in schema.LOWER_IS_BETTER
    r = {"n_baseline": len(b), "n_candidate": len(c),
         "median_baseline": float(np.median(b)) if len(b) else math.nan,
         "median_candidate": float(np.median(c)) if len(c) else math.nan,
         "delta_pct": math.nan, "ci_low_pct": math.nan, "ci_high_pct": math.nan,
         "p_value": math.nan, "p_welch": math.nan, "verdict": "inconclusive",
         "trials_needed": math.nan, "note": "", "delta_abs": math.nan}
    if len(b) and len(c):
        r["delta_abs"] = r["median_candidate"] - r["median_baseline"]
        if r["median_baseline"] != 0:
            r["delta_pct"] = (r["median_candidate"] / r["median_baseline"] - 1) * 100
    if len(b) < 2 or len(c) < 2:
        r["note"] = f"too few measurements (baseline {len(b)}, candidate {len(c)}; need >= 2 each)"
        return r
    if np.all(b == b[0]) and np.all(c == c[0]):
        r["note"] = EXACT_NOTE
        if b[0] == c[0]:
            r["verdict"] = "no significant difference"
        else:
            r["verdict"] = _direction(r["delta_pct"], lib)
        return r
    r["p_value"] = float(sst.mannwhitneyu(b, c, alternative="two-sided").pvalue)
    r["p_welch"] = float(sst.ttest_ind(b, c, equal_var=False).pvalue)
    if r["median_baseline"] > 0:
        # two-sample bootstrap with the arms resampled independently: pairing the i-th
        # resample of each arm (scipy.stats.bootstrap, seeded per arm) gives the
        # bootstrap distribution of the ratio of medians; its percentiles are the CI.
        db = bootstrap_distribution(b, n_resamples, seed)[1]
        dc = bootstrap_distribution(c, n_resamples, seed)[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (dc / db - 1.0) * 100.0
        lo, hi = np.percentile(ratio, [2.5, 97.5])
        r["ci_low_pct"], r["ci_high_pct"] = float(lo), float(hi)
    r["sigma_log"] = _power.robust_log_sigma(b, c)
    return r


def _decide(r: dict, p_adj: float, metric: str, noise: float, alpha: float) -> None:
    if r["note"] == EXACT_NOTE or not math.isfinite(r["ci_low_pct"]):
        return
    lib = metric in schema.LOWER_IS_BETTER
    lo, hi, nz = r["ci_low_pct"], r["ci_high_pct"], noise * 100
    if p_adj < alpha and (lo > 0 or hi < 0):
        r["verdict"] = _direction(r["delta_pct"], lib)
        if -nz <= lo and hi <= nz:
            r["note"] = f"significant but within the +-{nz:g}% noise threshold"
    elif -nz <= lo and hi <= nz:
        r["verdict"] = "no significant difference"
    else:
        r["verdict"] = "inconclusive"
        effect = abs(r["delta_pct"])
        if not math.isfinite(effect) or effect < nz:
            effect = TINY_EFFECT_PCT
            r["note"] = f"trials_needed for a {TINY_EFFECT_PCT:g}% effect (observed effect is tiny)"
        else:
            r["note"] = f"trials_needed for the observed {effect:.2g}% effect"
        r["trials_needed"] = _power.trials_needed(effect, r.get("sigma_log", math.nan), 0.05, 0.8)


def verdict_one(base, cand, metric: str = schema.PRIMARY_METRIC, noise: float = 0.01, alpha: float = 0.05,
                n_resamples: int = DEFAULT_RESAMPLES, seed=DEFAULT_SEED) -> dict:
    """``compare_arrays`` plus its verdict, for a single comparison (no Holm)."""
    r = compare_arrays(base, cand, metric, noise, alpha, n_resamples, seed)
    r["p_holm"] = r["p_value"]
    _decide(r, r["p_value"], metric, noise, alpha)
    return r


def _check_args(noise, alpha):
    if not (isinstance(noise, (int, float)) and 0 <= noise < 1):
        raise StatsError(f"noise: {noise!r} not allowed; allowed: a fraction in [0, 1), e.g. 0.01 for 1%")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise StatsError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1), e.g. 0.05")


def compare(df: pd.DataFrame, baseline: str, metric: str = schema.PRIMARY_METRIC, by=None,
            noise: float = 0.01, alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES,
            seed=DEFAULT_SEED) -> pd.DataFrame:
    """Every other variant against ``baseline`` within each configuration.

    Returns a frame whose first 14 columns are ``JSON_FIELDS``, followed by the group's
    parameter columns and extras: p_welch, gain_pct (seed sign convention, NaN for
    higher-is-better metrics), delta_abs, note, lower_is_better, metric.
    """
    _check_args(noise, alpha)
    if "variant" not in df.columns:
        raise StatsError("raw.csv has no 'variant' column; compare needs one")
    meas, _ = measurements(df, metric)
    variants = sorted(map(str, df["variant"].dropna().unique()))
    if str(baseline) not in variants:
        raise StatsError(f"baseline: {baseline!r} is not a variant of this raw.csv; allowed: "
                         + ", ".join(variants))
    meas["variant"] = meas["variant"].astype(str)
    cols = group_columns(df, by, include_variant=False)
    rng = seed
    rows = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        base = sub.loc[sub["variant"] == str(baseline), metric].to_numpy()
        for cand in variants:
            if cand == str(baseline):
                continue
            cv = sub.loc[sub["variant"] == cand, metric].to_numpy()
            if len(cv) == 0 and len(base) == 0:
                continue
            r = compare_arrays(base, cv, metric, noise, alpha, n_resamples, rng)
            r.update(group=label, baseline=str(baseline), candidate=cand)
            r.update(dict(zip(cols, key)))
            rows.append(r)
    if not rows:
        return pd.DataFrame(columns=JSON_FIELDS)
    p_adj = holm([r["p_value"] for r in rows])
    lib = metric in schema.LOWER_IS_BETTER
    for r, pa in zip(rows, p_adj):
        r["p_holm"] = float(pa)
        _decide(r, pa, metric, noise, alpha)
        r["gain_pct"] = -r["delta_pct"] if lib else math.nan
        r["lower_is_better"] = lib
        r["metric"] = metric
        r.pop("sigma_log", None)
    out = pd.DataFrame(rows)
    extra = [c for c in out.columns if c not in JSON_FIELDS]
    out = out[JSON_FIELDS + [c for c in cols if c in extra] + [c for c in extra if c not in cols]]
    out.attrs["metric"] = metric
    out.attrs["group_columns"] = cols
    return out


def to_records(result: pd.DataFrame) -> list[dict]:
    """The JSON form: a list of objects with exactly ``JSON_FIELDS`` (NaN -> null)."""
    recs = []
    for row in result[JSON_FIELDS].itertuples(index=False):
        d = {}
        for k, v in zip(JSON_FIELDS, row):
            if isinstance(v, (float, np.floating)):
                v = None if math.isnan(v) else float(v)
            elif isinstance(v, np.integer):
                v = int(v)
            d[k] = v
        if d["trials_needed"] is not None:
            d["trials_needed"] = int(d["trials_needed"])
        recs.append(d)
    return recs
