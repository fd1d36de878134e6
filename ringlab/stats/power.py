"""How many trials per arm resolve an effect: normal approximation, checked by simulation.

Method (documented in README.md, "How to read a verdict", verified in tests/test_stats_truth.py):

* work on the log scale, where a relative effect d is a shift of ln(1 + d) and the
  noise of a benchmark is roughly symmetric;
* sigma = pooled robust scale of log(metric) over both arms: 1.4826 x MAD, the
  standard deviation for normal data but not blown up by a few outliers;
* a two-sample comparison of means would need
  n = 2 (z_{1-alpha/2} + z_power)^2 sigma^2 / ln(1 + d)^2 per arm;
* ringlab's verdict rests on the *median* (bootstrap CI of the ratio of medians)
  and on Mann-Whitney U.  The sample median has asymptotic efficiency 2/pi relative
  to the mean for normal data, so n is multiplied by pi/2 (Mann-Whitney's own
  efficiency, 3/pi, is higher, so the median CI is the binding one);
* rounded up, and never below 5 per arm (Mann-Whitney cannot reach p < 0.05 two-sided
  with fewer than 4 per arm).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as sst

MEDIAN_EFFICIENCY = 2 / math.pi
MIN_TRIALS = 5


def robust_log_sigma(*samples) -> float:
    """Pooled 1.4826*MAD of log values (NaN when no sample has 2 positive values)."""
    num, den = 0.0, 0
    for s in samples:
        v = np.asarray(s, dtype=float)
        v = v[np.isfinite(v) & (v > 0)]
        if len(v) < 2:
            continue
        mad = sst.median_abs_deviation(np.log(v), scale="normal")
        num += (len(v) - 1) * mad ** 2
        den += len(v) - 1
    return math.sqrt(num / den) if den else math.nan


def trials_needed(effect_pct: float, sigma_log: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Trials per arm to detect a relative effect of ``effect_pct`` percent (two-sided)."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1)")
    if not (0 < power < 1):
        raise ValueError(f"power: {power!r} not allowed; allowed: a number in (0, 1)")
    if not math.isfinite(sigma_log) or not math.isfinite(effect_pct) or effect_pct == 0 \
            or effect_pct <= -100:
        return math.nan
    if sigma_log == 0:
        return float(MIN_TRIALS)
    shift = abs(math.log1p(effect_pct / 100.0))
    z = sst.norm.ppf(1 - alpha / 2) + sst.norm.ppf(power)
    n = 2 * z * z * sigma_log ** 2 / shift ** 2 / MEDIAN_EFFICIENCY
    return float(max(MIN_TRIALS, math.ceil(n)))


def recommended_trials(effect_pct: float, cv: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Trials per arm for an effect at a given coefficient of variation (planning, no data)."""
    sigma = math.sqrt(math.log1p(cv * cv))  # sd of log for a lognormal with this CV
    return trials_needed(effect_pct, sigma, alpha, power)


def minimum_detectable_effect(n: int, sigma_log: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest relative effect (percent) the design detects with the given power."""
    if n < 2 or not math.isfinite(sigma_log):
        return math.nan
    z = sst.norm.ppf(1 - alpha / 2) + sst.norm.ppf(power)
    shift = z * sigma_log * math.sqrt(2 / n / MEDIAN_EFFICIENCY)
    return math.expm1(shift) * 100
