"""Robust location and spread: the Hodges-Lehmann estimate and the MAD-based standard deviation.

Every module that needs either uses these (the rank tests, the layout analysis, the planner).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as sst


def hodges_lehmann(d) -> float:
    """Median of the Walsh averages (d_i + d_j) / 2, i <= j, of ``d``."""
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2))


#: the MAD of a normal sample is its SD times norm.ppf(0.75); this is the factor back
_NORMAL_MAD = 1.0 / float(sst.norm.ppf(0.75))


def robust_sd(v, zero_fallback: bool = True) -> float:
    """1.4826 x MAD of the finite values of ``v`` (the SD for normal data, not blown up by a few
    wild values); NaN with fewer than 2.  ``zero_fallback``: a MAD of 0 (more than half the
    values equal) gives the sample SD instead."""
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return math.nan
    # scipy.stats.median_abs_deviation(v, scale="normal") in numpy: the layout analysis calls this
    # once per layout pair and state, where scipy's per-call argument handling cost 1 ms a call
    s = float(np.median(np.abs(v - np.median(v)))) * _NORMAL_MAD
    return s if s > 0 or not zero_fallback else float(np.std(v, ddof=1))

