"""Robust location and spread: the Hodges-Lehmann estimate and the MAD-based standard deviation.

Every module that needs either uses these (the rank tests, the layout analysis, the planner).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as sst


def hodges_lehmann(d) -> float:
    """Median of the Walsh averages (d_i + d_j) / 2, i <= j, of ``d``: exactly the value
    ``np.median`` of all n(n+1)/2 of them gives, in O(n log n) time and O(n) memory.

    Up to ``HL_DIRECT_MAX`` values the averages are formed and ``np.median`` taken (faster
    there); above, the middle one or two are selected without forming them
    (``walsh_sum_select``).  Neither scipy nor statsmodels provides an O(n log n) Hodges-Lehmann
    estimate, hence our own selection.  (Only the sign of a zero may differ from np.median's
    pick among equal averages, as between two np.partition orders.)"""
    d = np.asarray(d, dtype=float).ravel()
    n = len(d)
    if n <= HL_DIRECT_MAX:
        i, j = np.triu_indices(n)
        return float(np.median((d[i] + d[j]) / 2))
    if np.isnan(d).any() or (np.isposinf(d).any() and np.isneginf(d).any()):
        return math.nan          # a NaN Walsh average (NaN, or inf + -inf): np.median gives NaN
    a = np.sort(d)
    m = n * (n + 1) // 2
    k = (m + 1) // 2             # 1-based rank of the (lower) middle average
    s1 = walsh_sum_select(a, k)
    if m % 2:
        mids = [s1 / 2]
    else:
        mids = [s1 / 2, _walsh_sum_next(a, s1, k) / 2]
    # the two middle averages combined as np.median combines them (their np.mean)
    return float(np.median(np.array(mids)))


#: at most this many values: the Walsh averages are formed (n(n+1)/2 of them, 32,896 at 256)
HL_DIRECT_MAX = 256
#: selection forms the remaining candidate sums once at most this many (times n) are left
_FORM_PER_ROW = 4
#: random candidate sums drawn per selection round to place the two pivots
_SAMPLE = 40_000


def _row_boundary(a, L, R, t, strict: bool):
    """For each row i of the sorted matrix s_ij = a_i + a_j (floating-point sums, non-decreasing
    in j): the first column j in [L_i, R_i] with s_ij > t (>= t when ``strict``), R_i if none.

    ``np.searchsorted`` on t - a_i guesses it; a guess rounding made wrong is found by checking
    the sums on both sides of it and corrected by bisection on that row, so the comparison is
    always of the same sums np.median would sort."""
    cmp = np.less if strict else np.less_equal
    g = np.searchsorted(a, t - a, side="left" if strict else "right")
    np.clip(g, L, R, out=g)
    rows = np.arange(len(a))
    bad = np.zeros(len(a), dtype=bool)
    has_left = g > L
    bad[has_left] = ~cmp(a[has_left] + a[g[has_left] - 1], t)
    has_right = g < R
    bad[has_right] |= cmp(a[has_right] + a[g[has_right]], t)
    if bad.any():
        r = rows[bad]
        lo, hi = L[r].copy(), R[r].copy()        # invariant: s < t (<= t) left of lo, not from hi
        while True:
            act = lo < hi
            if not act.any():
                break
            ra, la, ha = r[act], lo[act], hi[act]
            mid = (la + ha) // 2
            below = cmp(a[ra] + a[mid], t)
            lo[act] = np.where(below, mid + 1, la)
            hi[act] = np.where(below, ha, mid)
        g[r] = lo
    return g


def walsh_sum_select(a, k: int) -> float:
    """The k-th smallest (1-based) of the sums a_i + a_j, i <= j, of sorted ``a``, as computed in
    floating point (so k-th smallest Walsh average = this / 2, exactly).

    Selection in the implicit sorted matrix (Monahan 1984; Johnson & Mizoguchi 1978): each row
    keeps a window [L_i, R_i) of columns whose sums lie strictly between everything dropped on
    the left (all < the answer) and on the right (all > it).  Each round draws random sums from
    the windows, takes two of them bracketing rank k among the draws as pivots, counts each
    pivot's rank in O(n log n) (``_row_boundary``) and drops everything outside the pivots on
    the answer's side; a round keeps about 6/sqrt(draws) of the candidates, so a handful of
    rounds leaves O(n) candidates, which are formed and partitioned.  The random draws only
    decide how fast it goes, never the result."""
    n = len(a)
    rng = np.random.default_rng(0x484C)
    L = np.arange(n, dtype=np.int64)             # row i starts at column i (i <= j)
    R = np.full(n, n, dtype=np.int64)
    below = 0                                    # sums dropped on the left, all < the answer
    draws = min(_SAMPLE, max(1000, n // 8))      # a round's draws cost far less than its counts
    while True:
        w = R - L
        cw = np.cumsum(w)
        total = int(cw[-1])
        rank = k - below                         # the answer's rank among the window sums
        if total <= max(_FORM_PER_ROW * n, draws):
            rows = np.repeat(np.arange(n), w)
            cols = np.arange(total, dtype=np.int64) - np.repeat(cw - w - L, w)
            sums = a[rows] + a[cols]
            return float(np.partition(sums, rank - 1)[rank - 1])
        pos = rng.integers(0, total, draws)
        rows = np.searchsorted(cw, pos, side="right")
        sample = np.sort(a[rows] + a[L[rows] + pos - (cw[rows] - w[rows])])
        at = rank / total * draws
        spread = 3 * math.sqrt(draws)
        lo_pivot = sample[min(draws - 1, max(0, int(math.floor(at - spread))))]
        hi_pivot = sample[min(draws - 1, max(0, int(math.ceil(at + spread))))]
        b_le = _row_boundary(a, L, R, lo_pivot, strict=False)   # sums <= lo_pivot: columns < b_le
        b_lt = _row_boundary(a, L, R, hi_pivot, strict=True)    # sums < hi_pivot: columns < b_lt
        above_lo = below + int((b_le - L).sum()) < k            # answer > lo_pivot
        below_hi = below + int((b_lt - L).sum()) >= k           # answer < hi_pivot
        if not above_lo and not below_hi:
            return float(lo_pivot)               # lo_pivot >= answer >= hi_pivot >= lo_pivot
        # each branch drops at least the drawn pivot itself, so every round makes progress
        new_l = b_le if above_lo else L
        new_r = b_le if not above_lo else R
        if below_hi:
            new_r = np.minimum(new_r, b_lt)
        else:
            new_l = np.maximum(new_l, b_lt)
        below += int((new_l - L).sum())
        L, R = new_l, new_r


def _walsh_sum_next(a, s: float, k: int) -> float:
    """The (k+1)-th smallest sum a_i + a_j, i <= j, given that ``s`` is the k-th."""
    n = len(a)
    L = np.arange(n, dtype=np.int64)
    b = _row_boundary(a, L, np.full(n, n, dtype=np.int64), s, strict=False)
    if int((b - L).sum()) >= k + 1:
        return s                                 # a tie: the next one is equal
    r = np.nonzero(b < n)[0]                     # the first sum > s of each row; the least of them
    return float((a[r] + a[b[r]]).min())


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

