"""Holm's step-down correction and the CI levels that agree with it.

The family is the run: every candidate against the baseline in every configuration (the rows of
one ``compare()`` call).  The CI a
row's verdict rests on is at the Holm step's level, ``1 - alpha / (m - j + 1)``, where j is the
row's rank among the family's p-values, or, for rows Holm does not reject, the rank of the first
non-rejected row.  A row is then significant (``p_holm <= alpha``) exactly when that CI excludes
0.  Reports print every row's CI at 1 - alpha instead (``ringlab.stats.compare``).
"""
from __future__ import annotations

import numpy as np
from statsmodels.stats.multitest import multipletests


def _holm_order(p_values) -> tuple[np.ndarray, np.ndarray, int]:
    """(p as floats, the finite p's indices from smallest p up, how many there are): Holm's set-up."""
    p = np.asarray(p_values, dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    return p, ok[np.argsort(p[ok], kind="stable")], len(ok)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (statsmodels' ``multipletests(method="holm")``; NaN
    stays NaN and does not count)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.isfinite(p)
    if ok.sum() == 1:       # a family of one is its own adjustment (and multipletests runs gc.collect)
        out[ok] = p[ok]
    elif ok.any():
        out[ok] = multipletests(p[ok], method="holm")[1]
    return out


def holm_levels(p_values, alpha: float) -> np.ndarray:
    """The CI level that agrees with Holm for each p (NaN for NaN p), see the module doc."""
    p, order, m = _holm_order(p_values)
    out = np.full(len(p), np.nan)
    if m == 0:
        return out
    stop = m  # 0-based rank of the first row Holm does not reject (m: all rejected)
    for i, j in enumerate(order):
        if p[j] > alpha / (m - i):
            stop = i
            break
    for i, j in enumerate(order):
        out[j] = 1 - alpha / (m - min(i, stop))
    return out
