"""How many trials per arm (rounds) resolve an effect.

``rounds_for_effect`` is what ``compare`` reports as ``trials_needed`` for inconclusive rows:

* paired design: the spread is that of the run's own per-round differences
  d = ln(candidate/baseline) (1.4826 x MAD about their median, the sd for normal data but
  not blown up by a few wild rounds); the signed-rank test then needs
  n = (z_{1-a/2} + z_power)^2 sigma_d^2 / ln(1 + effect)^2 x pi/3 rounds
  (pi/3: the Wilcoxon/Hodges-Lehmann efficiency relative to the t-test for normal data);
* unpaired design: the same with the pooled robust spread of each arm's log round values and
  a factor 2 (two independent samples);
* a is the family's Bonferroni level alpha/m (Holm is at least as powerful);
* the formula is then **checked by resampling the run's own rounds**: the centred differences
  (or each arm's centred values) are drawn with replacement, the effect is added, and the
  rank test is run ``n_resamples`` times; while the resampled power is below the target, n
  grows by 25% (up to ``RESAMPLE_MAX_ROUNDS``; beyond, the normal approximation is accurate
  and used as is).  Heavy-tailed round noise thus asks for more rounds than the formula;
* ``compare`` never reports fewer rounds than the inconclusive run already had (+1).

The older planning helpers below (``trials_needed``, ``recommended_trials``) assume two
independent samples compared on the median; they stay for planning without data.
Method of those (verified in tests/test_stats_truth.py):

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
from ringlab.stats import ranktests as _rt

MEDIAN_EFFICIENCY = 2 / math.pi
RANK_EFFICIENCY = 3 / math.pi
MIN_TRIALS = 5
RESAMPLE_MAX_ROUNDS = 2000


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


def _robust_sd(v: np.ndarray) -> float:
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return math.nan
    s = float(sst.median_abs_deviation(v, scale="normal"))
    return s if s > 0 else float(np.std(v, ddof=1))


def _min_rounds(alpha: float, paired: bool) -> int:
    """Fewest rounds with which the exact rank test can reach p <= alpha at all."""
    n = 1
    while (2.0 / 2 ** n if paired else 2.0 / math.comb(2 * n, n)) > alpha:
        n += 1
    return n


def rounds_for_effect(effect_pct: float, d=None, x=None, y=None, alpha: float = 0.05,
                      power: float = 0.8, log_scale: bool = True, ref: float = 1.0, seed=0,
                      n_resamples: int = 200) -> float:
    """Rounds (= trials per arm) for ``power`` against a relative effect of ``effect_pct``.

    ``d``: the run's paired differences (transformed scale); or ``x``/``y``: each arm's round
    values (unpaired).  ``log_scale`` False: values are raw and ``ref`` converts percent.
    See the module docstring; NaN when no spread can be estimated.
    """
    if not (0 < alpha < 1):
        raise ValueError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1)")
    if not (0 < power < 1):
        raise ValueError(f"power: {power!r} not allowed; allowed: a number in (0, 1)")
    if not math.isfinite(effect_pct) or effect_pct == 0 or effect_pct <= -100:
        return math.nan
    shift = abs(math.log1p(effect_pct / 100.0)) if log_scale else abs(effect_pct / 100.0 * ref)
    paired = d is not None
    if paired:
        d = np.asarray(d, dtype=float)
        sigma, factor = _robust_sd(d), 1.0
    else:
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        sigma = math.sqrt((_robust_sd(x) ** 2 + _robust_sd(y) ** 2) / 2)
        factor = 2.0
    if not math.isfinite(sigma) or shift == 0:
        return math.nan
    lo = _min_rounds(alpha, paired)
    z = sst.norm.ppf(1 - alpha / 2) + sst.norm.ppf(power)
    n = max(lo, math.ceil(factor * z * z * sigma ** 2 / shift ** 2 / RANK_EFFICIENCY))
    if n > RESAMPLE_MAX_ROUNDS:
        return float(n)
    data = d if paired else np.concatenate([x, y])
    digest = int(np.abs(np.nan_to_num(data)).sum() * 1e6) % (2 ** 32)
    rng = np.random.default_rng([int(seed) if not isinstance(seed, np.random.Generator) else 0, digest])
    step = shift if effect_pct > 0 else -shift
    # centre at the Hodges-Lehmann estimate: the resampled null then has no effect of its own
    if paired:
        resid = d - _rt.signed_rank(d, 0.5)["estimate"]
    else:
        rx, ry = x - np.median(x), y - np.median(y)
        ry = ry - _rt.rank_sum(rx, ry, 0.5)["estimate"]
    z_target = sst.norm.ppf(1 - alpha / 2) + sst.norm.ppf(power)
    for _ in range(12):
        if paired:
            D = rng.choice(resid, size=(n_resamples, n)) + step
            got = _rt.signed_rank_reject_batch(D, alpha).mean()
        else:
            X = rng.choice(rx, size=(n_resamples, n))
            Y = rng.choice(ry, size=(n_resamples, n)) + step
            got = _rt.rank_sum_reject_batch(X, Y, alpha).mean()
        if got >= power:
            return float(n)
        # normal extrapolation from the resampled power: z grows with sqrt(n)
        z_got = sst.norm.ppf(min(max(got, 1.0 / n_resamples), 1 - 1.0 / n_resamples)) + sst.norm.ppf(1 - alpha / 2)
        ratio = (z_target / z_got) ** 2 if z_got > 0 else 4.0
        nxt = math.ceil(n * min(max(ratio, 1.1), 4.0))
        if nxt > RESAMPLE_MAX_ROUNDS:
            return float(math.ceil(n * ratio)) if z_got > 0 else math.nan
        n = nxt
    return float(n)


#: rounds per layout pair the layout design plans with (doubling it hardly changes K)
ROUNDS_PER_LAYOUT = 20
MIN_LAYOUTS = 3
MAX_LAYOUTS = 1000


def layout_plan(effect_pct: float, sigma_layout: float, round_sd: float,
                rounds_per_layout: int = ROUNDS_PER_LAYOUT, alpha: float = 0.05, power: float = 0.8) -> dict:
    """Layouts K per arm and rounds R per layout pair for ``power`` against ``effect_pct`` percent.

    The layout design's estimate is the mean over K layout pairs of per-pair estimates whose
    variance is sigma_L^2 + s^2/R (``sigma_layout``, ``round_sd``: log scale, e.g. 0.02 = 2
    points), tested with a t interval on K - 1 df, so K is the smallest K >= 3 with
    K >= (t_{1-a/2,K-1} + t_{power,K-1})^2 (sigma_L^2 + s^2/R) / ln(1 + effect)^2.
    Returns ``{"layouts", "rounds_per_layout", "rounds", "effect_pct", "sigma_layout",
    "round_sd"}``; ``rounds`` = K x R (= trials per arm); layouts NaN when no K up to
    ``MAX_LAYOUTS`` suffices or the inputs are not finite."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1)")
    if not (0 < power < 1):
        raise ValueError(f"power: {power!r} not allowed; allowed: a number in (0, 1)")
    if not (isinstance(rounds_per_layout, int) and rounds_per_layout >= 1):
        raise ValueError(f"rounds_per_layout: {rounds_per_layout!r} not allowed; allowed: an integer >= 1")
    out = {"layouts": math.nan, "rounds_per_layout": rounds_per_layout, "rounds": math.nan,
           "effect_pct": effect_pct, "sigma_layout": sigma_layout, "round_sd": round_sd}
    ok = all(math.isfinite(v) for v in (effect_pct, sigma_layout, round_sd))
    if not ok or effect_pct == 0 or effect_pct <= -100 or sigma_layout < 0 or round_sd < 0:
        return out
    var = sigma_layout ** 2 + round_sd ** 2 / rounds_per_layout
    shift2 = math.log1p(effect_pct / 100.0) ** 2
    for k in range(MIN_LAYOUTS, MAX_LAYOUTS + 1):
        q = sst.t.ppf(1 - alpha / 2, k - 1) + sst.t.ppf(power, k - 1)
        if k >= q * q * var / shift2:
            out.update(layouts=k, rounds=k * rounds_per_layout)
            break
    return out


def trials_needed_calibrated(effect_pct: float, sigma_log: float, calibration: dict | None = None,
                             alpha: float = 0.05, power: float = 0.8) -> dict:
    """``trials_needed`` with this machine's calibration when there is one.

    With a calibration (``ringlab.stats.calibration.find_calibration``): the layout design's
    K x R (``layout_plan`` at the calibrated sigma_L and round noise).  Without: today's
    one-build number, ``trials_needed(effect_pct, sigma_log)``, and a ``basis`` that says so."""
    if calibration:
        plan = layout_plan(effect_pct, float(calibration["sigma_layout"]), float(calibration["round_sd"]),
                           alpha=alpha, power=power)
        return {**plan, "trials": plan["rounds"],
                "basis": f"calibration {calibration.get('path') or calibration.get('run_id') or ''}".strip()}
    return {"trials": trials_needed(effect_pct, sigma_log, alpha, power), "layouts": 1,
            "basis": "no calibration for this host: one build per arm, its layout spread not counted"}
