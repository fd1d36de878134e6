"""Rank tests with the estimate, the confidence interval and the p-value from one statistic.

Paired (one difference ``d_i`` per round): Wilcoxon signed-rank.  The Walsh averages
``(d_i + d_j) / 2, i <= j`` (M = n(n+1)/2 of them) carry everything:

* estimate: Hodges-Lehmann = median of the Walsh averages;
* statistic: T = #{Walsh averages > 0} (equal to the sum of the ranks of the positive
  d_i when no |d| ties), null distribution exact up to ``EXACT_SIGNED_RANK_MAX`` pairs,
  normal with continuity correction above;
* CI at level 1 - a: ``[W_(k), W_(M+1-k)]`` with k the largest integer such that
  P0(T <= k - 1) <= a/2 (W sorted, 1-based);
* p: the smallest a whose CI excludes 0, i.e. ``2 P0(T <= min(n_pos, n_neg) + n_zero)``
  (Walsh averages equal to 0 count against significance).

So for every level, ``p <= a`` exactly when the level-(1-a) CI excludes 0: the verdict
can never disagree with the printed interval.

Unpaired (two independent samples): Mann-Whitney, with the pairwise differences
``y_j - x_i`` (N = n_x n_y) in place of the Walsh averages; same construction.

Order statistics of up to ``DIRECT_MAX`` values are taken with ``np.partition``;
beyond that by bisection on the value with O(n log n) counting, so 10^4-round
comparisons stay cheap.

The Hodges-Lehmann estimate on its own (``hodges_lehmann``, by exact selection of the middle
Walsh sums, ``walsh_sum_select``) and the MAD-based standard deviation (``robust_sd``) are here
too: every module that needs a robust location or spread uses these (the layout analysis, the
planner).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats as sst

EXACT_SIGNED_RANK_MAX = 400   # pairs; M = 80,200 states, a few ms to build, cached
EXACT_MWU_MAX = 2500          # n_x * n_y
DIRECT_MAX = 3_000_000        # Walsh averages / differences materialised at most


# -- Hodges-Lehmann by exact selection, and the robust SD ------------------------------------------

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


# -- null distributions ---------------------------------------------------------------------

@lru_cache(maxsize=512)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P0(T <= t) for t = 0..M: signs of n distinct |d| fair coin flips."""
    p = np.zeros(n * (n + 1) // 2 + 1)
    p[0] = 1.0
    top = 0
    for i in range(1, n + 1):
        # T gains rank i with probability 1/2: p <- (p + shift(p, i)) / 2, only additions
        new = p.copy()
        new[i:top + i + 1] += p[:top + 1]
        new *= 0.5
        p, top = new, top + i
    c = np.cumsum(p)
    c[-1] = 1.0
    return np.minimum(c, 1.0)


@lru_cache(maxsize=256)
def _mwu_cdf(nx: int, ny: int) -> np.ndarray:
    """P0(U <= u) for u = 0..nx*ny, U = #{y_j > x_i}: every interleaving equally likely."""
    nx, ny = min(nx, ny), max(nx, ny)  # symmetric in the two sizes
    # q-binomial recurrence on probabilities over (N, k) with k <= nx:
    # P(N,k) = k/N P(N-1,k-1) + (N-k)/N shift_k P(N-1,k)
    rows = {0: np.array([1.0])}
    for n_tot in range(1, nx + ny + 1):
        new = {}
        for k in range(max(0, n_tot - ny), min(nx, n_tot) + 1):
            size = k * (n_tot - k) + 1
            acc = np.zeros(size)
            if k - 1 in rows:
                a = rows[k - 1]
                acc[:len(a)] += a * (k / n_tot)
            if k in rows and n_tot - 1 - k >= 0:
                b = rows[k]
                acc[k:k + len(b)] += b * ((n_tot - k) / n_tot)
            new[k] = acc
        rows = new
    c = np.cumsum(rows[nx])
    c[-1] = 1.0
    return np.minimum(c, 1.0)


class NullDist:
    """CDF of a rank statistic with values 0..M, symmetric about M/2."""

    def __init__(self, kind: str, *sizes: int):
        self.kind, self.sizes = kind, sizes
        if kind == "signed_rank":
            (n,) = sizes
            self.M = n * (n + 1) // 2
            self.mu, self.sd = self.M / 2, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
            self.table = _signed_rank_cdf(n) if n <= EXACT_SIGNED_RANK_MAX else None
        else:
            nx, ny = sizes
            self.M = nx * ny
            self.mu, self.sd = self.M / 2, math.sqrt(nx * ny * (nx + ny + 1) / 12)
            self.table = _mwu_cdf(nx, ny) if nx * ny <= EXACT_MWU_MAX else None
        self.exact = self.table is not None

    def cdf(self, t) -> np.ndarray:
        """P0(T <= t), t may be an array of integers; 0 below 0, 1 from M on."""
        t = np.floor(np.asarray(t, dtype=float))
        if self.table is not None:
            idx = np.clip(t, -1, self.M).astype(np.int64)
            out = np.where(idx < 0, 0.0, self.table[np.maximum(idx, 0)])
        else:
            out = sst.norm.cdf((t + 0.5 - self.mu) / self.sd) if self.sd > 0 else np.ones_like(t)
            out = np.where(t < 0, 0.0, np.where(t >= self.M, 1.0, out))
        return out

    def crit(self, a: float) -> int:
        """Largest k >= 0 with P0(T <= k - 1) <= a/2 (0: no CI at this level)."""
        if self.table is not None:
            # table[k-1] <= a/2  <=>  k - 1 < searchsorted(table, a/2, 'right')
            k = int(np.searchsorted(self.table, a / 2, side="right"))
        else:
            if self.sd == 0:
                return 0
            k = int(math.floor(self.mu + self.sd * sst.norm.ppf(a / 2) - 0.5)) + 1
            while k > 0 and self.cdf(k - 1) > a / 2:
                k -= 1
            while self.cdf(k) <= a / 2:
                k += 1
        return max(0, min(k, (self.M + 1) // 2))


# -- order statistics of implicit sets --------------------------------------------------------

def _walsh(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(d))
    return (d[i] + d[j]) / 2


def _diffs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (y[None, :] - x[:, None]).ravel()


def _count_le(kind: str, a: np.ndarray, b: np.ndarray | None, theta: float) -> int:
    """#{values <= theta} of the implicit set (a, b sorted)."""
    if kind == "walsh":
        # pairs i <= j with a_i + a_j <= 2 theta
        lim = np.searchsorted(a, 2 * theta - a, side="right")  # j < lim  <=> a_j <= 2theta - a_i
        idx = np.arange(len(a))
        return int(np.maximum(lim - idx, 0).sum())
    return int(np.searchsorted(b, a + theta, side="right").sum())  # y_j - x_i <= theta


def _walsh_bracket(a: np.ndarray, k: int, lo: float, hi: float) -> tuple[float, float]:
    """A few floats around the k-th Walsh average of sorted ``a`` that keep ``order_stats``'
    invariant (count(<= hi) >= k > count(<= lo)), else (lo, hi) unchanged.  The k-th Walsh sum
    by exact selection (``walsh_sum_select``, O(n log n)) halved lies within rounding of
    the bisection's answer, the least float with count(<= x) >= k; the bisection from this
    bracket ends at that same float after a few counts instead of about 55."""
    guess = walsh_sum_select(a, k) / 2
    pad = 4 * float(np.spacing(max(abs(a[0]), abs(a[-1]), abs(guess))))
    g_lo, g_hi = max(lo, guess - pad), min(hi, guess + pad)
    if _count_le("walsh", a, None, g_lo) < k <= _count_le("walsh", a, None, g_hi):
        return g_lo, g_hi
    return lo, hi


def order_stats(kind: str, a: np.ndarray, b: np.ndarray | None, ks) -> np.ndarray:
    """k-th smallest (1-based) Walsh averages of a / differences b - a, for each k."""
    ks = [int(k) for k in ks]
    a = np.sort(np.asarray(a, dtype=float))
    b = None if b is None else np.sort(np.asarray(b, dtype=float))
    size = len(a) * (len(a) + 1) // 2 if kind == "walsh" else len(a) * len(b)
    if size <= DIRECT_MAX:
        vals = _walsh(a) if kind == "walsh" else _diffs(a, b)
        part = np.partition(vals, [k - 1 for k in ks])
        return np.array([part[k - 1] for k in ks])
    out = []
    if kind == "walsh":
        lo0, hi0 = a[0], a[-1]
    else:
        lo0, hi0 = b[0] - a[-1], b[-1] - a[0]
    for k in ks:
        lo, hi = lo0, hi0  # invariant: count(<= hi) >= k, count(<= lo - eps) < k
        if _count_le(kind, a, b, lo) >= k:
            out.append(lo)
            continue
        if kind == "walsh":
            lo, hi = _walsh_bracket(a, k, lo, hi)
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid <= lo or mid >= hi:
                break
            if _count_le(kind, a, b, mid) >= k:
                hi = mid
            else:
                lo = mid
        out.append(hi)
    return np.array(out)


def _sign_counts(kind: str, a: np.ndarray, b: np.ndarray | None) -> tuple[int, int, int]:
    """(#>0, #==0, #<0) of the implicit set, without materialising it."""
    a = np.sort(np.asarray(a, dtype=float))
    b = None if b is None else np.sort(np.asarray(b, dtype=float))
    size = len(a) * (len(a) + 1) // 2 if kind == "walsh" else len(a) * len(b)
    if kind == "walsh":
        idx = np.arange(len(a))
        le0 = int(np.maximum(np.searchsorted(a, -a, side="right") - idx, 0).sum())
        lt0 = int(np.maximum(np.searchsorted(a, -a, side="left") - idx, 0).sum())
    else:
        le0 = int(np.searchsorted(b, a, side="right").sum())
        lt0 = int(np.searchsorted(b, a, side="left").sum())
    return size - le0, le0 - lt0, lt0


# -- the tests ------------------------------------------------------------------------------

def _p(n_pos: int, n_zero: int, n_neg: int, null: NullDist) -> float:
    """Two-sided p from the sign counts of the implicit set."""
    return float(min(1.0, 2 * null.cdf(min(n_pos, n_neg) + n_zero)))


def _result(kind, a, b, null: NullDist, level: float) -> dict:
    n_pos, n_zero, n_neg = _sign_counts(kind, a, b)
    p = _p(n_pos, n_zero, n_neg, null)
    M = null.M
    mid = [(M + 1) // 2, M // 2 + 1]  # median of M values (two middle ones when M is even)
    k = null.crit(1 - level)
    ks = mid + ([k, M + 1 - k] if k >= 1 else [])
    vals = order_stats(kind, a, b, ks)
    est = float((vals[0] + vals[1]) / 2)
    lo, hi = (float(vals[2]), float(vals[3])) if k >= 1 else (math.nan, math.nan)
    return {"estimate": est, "ci_low": lo, "ci_high": hi, "p": p, "level": level, "k": k,
            "n_pos": n_pos, "n_zero": n_zero, "n_neg": n_neg, "exact": null.exact}


def signed_rank(d, level: float = 0.95) -> dict:
    """Hodges-Lehmann estimate, Wilcoxon signed-rank CI (inverted) and p of paired differences."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 1:
        raise ValueError("signed_rank: no finite differences")
    return _result("walsh", d, None, NullDist("signed_rank", len(d)), level) | {"n": len(d)}


def signed_rank_p(d) -> float:
    """The p of ``signed_rank(d)`` alone (no CI: no order statistics to find)."""
    d = np.asarray(d, dtype=float)
    d = d[np.isfinite(d)]
    if len(d) < 1:
        raise ValueError("signed_rank: no finite differences")
    return _p(*_sign_counts("walsh", d, None), NullDist("signed_rank", len(d)))


def rank_sum_p(x, y) -> float:
    """The p of ``rank_sum(x, y)`` alone."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 1 or len(y) < 1:
        raise ValueError("rank_sum: an empty sample")
    return _p(*_sign_counts("diff", x, y), NullDist("mwu", len(x), len(y)))


def rank_sum(x, y, level: float = 0.95) -> dict:
    """Hodges-Lehmann shift y - x, Mann-Whitney CI (inverted) and p of two independent samples."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    x, y = x[np.isfinite(x)], y[np.isfinite(y)]
    if len(x) < 1 or len(y) < 1:
        raise ValueError("rank_sum: an empty sample")
    return _result("diff", x, y, NullDist("mwu", len(x), len(y)), level) | {"n": len(x) + len(y)}


# -- vectorised forms for simulations ----------------------------------------------------------

def signed_rank_ci_batch(D: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """CI bounds for each row of D (B x n): the same interval as ``signed_rank`` row by row."""
    B, n = D.shape
    null = NullDist("signed_rank", n)
    k = null.crit(1 - level)
    if k < 1:
        return np.full(B, -np.inf), np.full(B, np.inf)
    i, j = np.triu_indices(n)
    out_lo, out_hi = np.empty(B), np.empty(B)
    step = max(1, int(2_000_000 // len(i)))
    for s in range(0, B, step):
        W = (D[s:s + step, i] + D[s:s + step, j]) / 2
        W = np.partition(W, [k - 1, null.M - k], axis=1)
        out_lo[s:s + step], out_hi[s:s + step] = W[:, k - 1], W[:, null.M - k]
    return out_lo, out_hi


def rank_sum_ci_batch(X: np.ndarray, Y: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """CI bounds of the shift Y - X for each row (B x nx, B x ny), as ``rank_sum``."""
    B, nx = X.shape
    ny = Y.shape[1]
    null = NullDist("mwu", nx, ny)
    k = null.crit(1 - level)
    if k < 1:
        return np.full(B, -np.inf), np.full(B, np.inf)
    out_lo, out_hi = np.empty(B), np.empty(B)
    step = max(1, int(2_000_000 // (nx * ny)))
    for s in range(0, B, step):
        Dd = (Y[s:s + step, None, :] - X[s:s + step, :, None]).reshape(-1, nx * ny)
        Dd = np.partition(Dd, [k - 1, null.M - k], axis=1)
        out_lo[s:s + step], out_hi[s:s + step] = Dd[:, k - 1], Dd[:, null.M - k]
    return out_lo, out_hi
