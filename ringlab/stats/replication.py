"""What another run on this host will show: the run-to-run level of an A/B ratio.

A run's CI answers "how sure are we about this run?".  A reviewer who re-runs the command asks
"what will I see?", and between two runs the machine's state changes (the guest's host, its
neighbours, its frequency): not only the noise but the size of an effect moves.  This module
models that level and the interval it gives, on the log scale of the ratio candidate/baseline:

* ``combine`` pools the estimates of several runs of one comparison with a random-effects model
  (statsmodels' ``combine_effects``, Paule-Mandel's iterated tau^2): the pooled estimate with its
  Hartung-Knapp-Sidik-Jonkman CI (the same result's WLS-scale variance, Student's t with k-1
  degrees of freedom: a normal quantile covers 84-93% at k = 3 to 5 runs), tau
  (the SD of the run effects), I^2, Cochran's Q p, and a prediction interval for the next run's
  estimate: mu +- t(k-2) * sqrt(tau^2 + se(mu)^2 + s^2), Higgins, Thompson & Spiegelhalter
  (2009), with s^2 the runs' median within-run variance (the next run is measured, not known);
  it needs k >= 3 runs (NaN with two);
* ``Between`` is the between-run variance tau^2 of one comparison's effect and its basis:
  ``between_of_runs`` (this comparison's own runs, this one included and none later:
  ``combine``'s tau^2 with k - 2 degrees of freedom from ``MIN_RUNS`` runs on, with 2 or 3 runs
  the Q-profile bound at ``EARLY_RUNS_LEVEL``),
  ``between_of_host_aa`` (the host's A/A drift calibration: the one-sided ``AA_UCB_LEVEL`` upper
  confidence bound of its tau^2 by the Q-profile method, taken as known) or ``NONE``;
* ``next_run_interval`` is where another run's estimate is expected, at ``level``, given this
  run's estimate d and standard error s: d +- t_nu * sqrt(2 s^2 + 2 tau^2), both runs' own noise
  and both runs' own shift, nu by Welch-Satterthwaite from the CI's and tau^2's degrees of
  freedom.  With ``NONE`` it is the interval of a rerun if nothing drifted, sqrt(2) times the
  CI's half-width (t at the CI's degrees of freedom), and says so.  No part of tau^2 scales with
  the effect, no mode or comparison lends its tau^2 to another, and a row of two machine states
  gets the same interval about its headline.

The simulation of tests/test_next_run_simulation.py chose ``MIN_RUNS``, ``EARLY_RUNS_LEVEL`` and ``AA_UCB_LEVEL``: with
them the interval held the next run 93-98% of the time at tau = 0, 0.5 and 1 point and within-run
SEs of 0.3-1 point, at most 1.5 times as wide as the interval with the true variances.

Pure: data in, data out.  The callers read calibration files and run folders (``ringlab.rundir``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from ringlab.stats.summary import StatsError

#: the method of tau^2 (statsmodels' ``method_re``): Paule-Mandel, iterated to its fixed point
TAU_METHOD = "iterated"


def pct(v: float) -> float:
    """A log ratio in percent."""
    return math.expm1(v) * 100 if math.isfinite(v) else math.nan


def log_ratio(p: float) -> float:
    """A percent change on the log scale (NaN for missing values or changes at or below -100%)."""
    return math.log1p(p / 100) if isinstance(p, (int, float)) and math.isfinite(p) and p > -100 else math.nan


@dataclass(frozen=True)
class RandomEffects:
    """The random-effects combination of k runs' estimates of one comparison (log scale)."""
    k: int
    estimate: float
    se: float
    ci_low: float
    ci_high: float
    tau2: float
    i2: float
    q_p: float
    pi_low: float
    pi_high: float
    level: float
    within_var: float                       # the runs' median within-run variance (the next run's)
    estimates: tuple[float, ...] = ()
    variances: tuple[float, ...] = ()

    @property
    def tau(self) -> float:
        return math.sqrt(self.tau2) if self.tau2 > 0 else 0.0

    def heterogeneous(self, alpha: float = 0.05) -> bool:
        """The runs' effects differ by more than their own noise allows (Cochran's Q, p < alpha)."""
        return math.isfinite(self.q_p) and self.q_p < alpha

    def covers(self, value: float) -> bool:
        """``value`` (log scale) lies in the prediction interval for the next run (False without one)."""
        return bool(self.pi_low <= value <= self.pi_high)

    def as_dict(self) -> dict:
        """The figures in percent (JSON-ready): estimate, CI, tau, I^2, Q's p, the prediction interval."""
        return {"k": self.k, "estimate_pct": pct(self.estimate), "ci_low_pct": pct(self.ci_low),
                "ci_high_pct": pct(self.ci_high), "tau_pct": self.tau * 100, "i2": self.i2, "q_p": self.q_p,
                "pi_low_pct": pct(self.pi_low), "pi_high_pct": pct(self.pi_high), "level": self.level,
                "heterogeneous": self.heterogeneous(1 - self.level)}


def combine(effects, variances, level: float = 0.95) -> RandomEffects:
    """Random-effects combination of ``effects`` (log ratios of k >= 2 runs) with their within-run
    ``variances``.  StatsError with fewer than 2 finite runs or a variance that is not positive."""
    eff, var = np.asarray(effects, float), np.asarray(variances, float)
    if eff.shape != var.shape:
        raise StatsError(f"combine: {eff.size} estimates but {var.size} variances")
    keep = np.isfinite(eff) & np.isfinite(var)
    eff, var = eff[keep], var[keep]
    if eff.size < 2:
        raise StatsError(f"combine: {eff.size} run(s) with an estimate and a variance; allowed: 2 or more")
    if (var <= 0).any():
        raise StatsError("combine: a run's variance is not positive; allowed: runs with a CI")
    if not 0 < level < 1:
        raise StatsError(f"combine: level {level}; allowed: between 0 and 1")
    from statsmodels.stats.meta_analysis import combine_effects
    res = combine_effects(eff, var, method_re=TAU_METHOD, alpha=1 - level)
    k = int(eff.size)
    mu, se, tau2 = float(res.mean_effect_re), float(res.sd_eff_w_re), max(0.0, float(res.tau2))
    ci_low, ci_high = (float(v) for v in res.conf_int(alpha=1 - level, use_t=True)[3])   # HKSJ
    within = float(np.median(var))
    # k - 2 degrees of freedom: with two runs there is none left for the spread of a third
    half = sps.t.ppf(0.5 + level / 2, k - 2) * math.sqrt(tau2 + se ** 2 + within) if k >= 3 else math.nan
    q_p = float(sps.chi2.sf(float(res.q), k - 1))
    return RandomEffects(k=k, estimate=mu, se=se, ci_low=ci_low, ci_high=ci_high, tau2=tau2,
                         i2=max(0.0, float(res.i2)), q_p=q_p, pi_low=mu - half, pi_high=mu + half, level=level,
                         within_var=within, estimates=tuple(map(float, eff)), variances=tuple(map(float, var)))


#: the level of the one-sided upper confidence bound on a host A/A's between-run variance
#: (``between_of_host_aa``); chosen by the simulation of tests/test_next_run_simulation.py
AA_UCB_LEVEL = 0.70
#: the fewest runs of this comparison (this one included) whose own between-run variance is used
#: as estimated, with k - 2 degrees of freedom (``between_of_runs``; the same simulation)
MIN_RUNS = 4
#: with 2 to ``MIN_RUNS`` - 1 runs of this comparison, their tau^2 is the Q-profile bound at this
#: one-sided level, taken as known: the t quantile at 1 or 2 degrees of freedom would make the
#: interval several times too wide, and so would a higher level.  In the same simulation, at
#: tau = 0, 0.5 and 1 point: 97.6%, 94.7% and 89.5% coverage at 2 runs (1.36, 1.21, 1.07 times the
#: true width), 98.1%, 95.3% and 91.2% at 3, against 95.3%, 88.4% and 73.6% with no between-run
#: information; a level of 0.5 widens it past the 98% the kit allows at tau = 0
EARLY_RUNS_LEVEL = 0.40


@dataclass(frozen=True)
class Between:
    """The between-run variance of a comparison's effect, on the log scale, and where it comes from."""
    tau2: float     # the variance the interval uses
    df: float       # its degrees of freedom (math.inf when none is estimated)
    basis: str      # "runs" (this comparison's own runs) | "host A/A" | "none"
    runs: int       # runs it rests on (0 for "none")
    text: str       # one sentence for tables and mails

    @property
    def tau(self) -> float:
        return math.sqrt(self.tau2) if self.tau2 > 0 else 0.0

    @property
    def sd_pct(self) -> float:
        """tau in log points x 100 (NaN for "none")."""
        return math.nan if self.basis == "none" else self.tau * 100


#: the bases of a ``Between``
BASES = ("runs", "host A/A", "none")
#: no between-run information: the interval is a rerun's if nothing drifted, and says so
NO_BETWEEN_TEXT = "no between-run information: the interval of a rerun if nothing drifted"
NONE = Between(tau2=0.0, df=math.inf, basis="none", runs=0, text=NO_BETWEEN_TEXT)


def between_of_runs(effects, variances, level: float = 0.95, min_runs: int = MIN_RUNS) -> Between | None:
    """The between-run variance from this comparison's own ``effects`` (log ratios of k runs, this
    one included, never later ones) with their within-run ``variances``: from ``min_runs`` runs on,
    ``combine``'s tau^2 (Paule-Mandel) with k - 2 degrees of freedom, as ``combine``'s prediction
    interval takes it (Higgins, Thompson & Spiegelhalter: one for the runs' mean, one for tau^2;
    with k - 1 the interval held the next run 93.3% of the time in ``ringlab bench stopping``'s
    drift of 1 point, where runs that stop early on a decision spread the estimates, with k - 2
    93.9%, at 97.3-97.6% without drift either way); with 2 to ``min_runs`` - 1,
    the Q-profile bound at ``EARLY_RUNS_LEVEL`` taken as known (at so few degrees of freedom the
    estimate is too often 0 and its t quantile too wide).  None with fewer than 2 runs with a CI
    (the caller falls back to the host's A/A, else ``NONE``)."""
    eff, var = np.asarray(effects, float), np.asarray(variances, float)
    keep = np.isfinite(eff) & np.isfinite(var) & (var > 0)
    k = int(keep.sum())
    if k < 2:
        return None
    if k < min_runs:
        return Between(tau2=q_profile_upper(eff[keep], var[keep], EARLY_RUNS_LEVEL), df=math.inf,
                       basis="runs", runs=k,
                       text=f"from {k} runs of this comparison (Q-profile {EARLY_RUNS_LEVEL:.0%} bound)")
    re = combine(eff[keep], var[keep], level)
    return Between(tau2=re.tau2, df=float(k - 2), basis="runs", runs=k,
                   text=f"from {k} runs of this comparison")


def q_profile_upper(effects, variances, level: float = AA_UCB_LEVEL) -> float:
    """The one-sided ``level`` upper confidence bound of tau^2 by the Q-profile method
    (Viechtbauer 2007): the tau^2 at which the generalised Q statistic, sum w_i (y_i - mu_w)^2
    with w_i = 1 / (v_i + tau^2), equals chi2's 1 - ``level`` quantile with k - 1 degrees of
    freedom (0 when Q at tau^2 = 0 is already below it).  Written here: neither statsmodels nor
    scipy gives a confidence bound of tau^2; the root is scipy's brentq."""
    from scipy.optimize import brentq
    y, v = np.asarray(effects, float), np.asarray(variances, float)
    k = y.size
    if k < 2 or not 0 < level < 1:
        raise StatsError(f"q_profile_upper: {k} runs at level {level}; allowed: 2 or more runs, level in (0, 1)")
    target = float(sps.chi2.ppf(1 - level, k - 1))

    def q_gen(t2: float) -> float:
        w = 1 / (v + t2)
        mu = float(np.sum(w * y) / np.sum(w))
        return float(np.sum(w * (y - mu) ** 2)) - target

    if q_gen(0.0) <= 0:
        return 0.0
    hi = max(float(np.var(y, ddof=1)), float(np.max(v)), 1e-12)
    while q_gen(hi) > 0:
        hi *= 4
    return float(brentq(q_gen, 0.0, hi, xtol=1e-14, rtol=1e-10))


def q_profile_upper_equal(q: float, k: int, within_var: float, level: float = AA_UCB_LEVEL) -> float:
    """``q_profile_upper`` for k runs of one within-run variance ``within_var`` whose Cochran's Q
    is ``q``: then Q(tau^2) = q * v / (v + tau^2), and the bound is v * (q / chi2_(1-level) - 1)."""
    target = float(sps.chi2.ppf(1 - level, k - 1))
    return float(max(0.0, within_var * (q / target - 1)))


def between_of_host_aa(effects=None, variances=None, *, q: float | None = None, k: int | None = None,
                       within_var: float | None = None, level: float = AA_UCB_LEVEL,
                       source: str = "") -> Between:
    """The host's A/A between-run variance (``ringlab calibrate --between``: two arms built alike,
    so every run-to-run move of their estimate is the host's): the one-sided ``level`` upper
    confidence bound of tau^2 (``q_profile_upper``), so the interval keeps its level with few
    calibration runs.  From the A/A runs' ``effects`` and ``variances``, or, for a calibration that
    kept only its summary, their Cochran's ``q``, ``k`` and median ``within_var``
    (``q_profile_upper_equal``).  The bound stands in for tau^2 as known (df inf): its own
    uncertainty is paid by its level.  StatsError without two runs."""
    if effects is not None:
        y, v = np.asarray(effects, float), np.asarray(variances, float)
        keep = np.isfinite(y) & np.isfinite(v) & (v > 0)
        y, v = y[keep], v[keep]
        n = int(y.size)
        if n < 2:
            raise StatsError(f"host A/A: {n} run(s) with a CI; allowed: 2 or more")
        tau2 = q_profile_upper(y, v, level)
    else:
        if not (isinstance(k, int) and k >= 2 and q is not None and math.isfinite(q) and q >= 0
                and within_var is not None and math.isfinite(within_var) and within_var > 0):
            raise StatsError(f"host A/A: k {k}, Q {q}, within-run variance {within_var}; allowed: k >= 2, "
                             "Q >= 0 and a positive variance")
        n, tau2 = k, q_profile_upper_equal(q, k, within_var, level)
    where = f" ({source})" if source else ""
    return Between(tau2=tau2, df=math.inf, basis="host A/A", runs=n,
                   text=f"host A/A upper bound from {n} runs{where}, {level:.0%} one-sided")


def quantile(level: float, df: float = math.inf) -> float:
    """The two-sided ``level`` quantile: Student's t at ``df`` degrees of freedom (inf: normal)."""
    return float(sps.norm.ppf(0.5 + level / 2) if math.isinf(df) else sps.t.ppf(0.5 + level / 2, df))


def se_of_ci(lo: float, hi: float, level: float, df: float = math.inf) -> float:
    """The standard error a CI [lo, hi] (log scale) at ``level`` implies: a t interval with ``df``
    degrees of freedom (inf: a normal one)."""
    q = quantile(level, df)
    return (hi - lo) / (2 * q) if all(map(math.isfinite, (lo, hi))) and hi >= lo else math.nan


def row_df(r) -> float:
    """Degrees of freedom of a compare() row's CI: layout pairs - 1 for the layouts design (a t
    interval across them), else inf (rank intervals of many rounds, read as normal)."""
    k = r.get("layouts")
    if str(r.get("design")) == "layouts" and isinstance(k, (int, float)) and math.isfinite(k) and k >= 2:
        return float(k) - 1
    return math.inf


def row_se(r) -> float:
    """The standard error (log scale) of a compare() row's printed estimate, from its CI."""
    lvl = r.get("ci_level")
    if str(r.get("design")) == "exact" or not isinstance(lvl, (int, float)) or not math.isfinite(lvl):
        return math.nan
    return se_of_ci(log_ratio(r.get("ci_low_pct")), log_ratio(r.get("ci_high_pct")), float(lvl), row_df(r))


def row_se_sides(r) -> tuple[float, float]:
    """(below, above): the standard errors each side of a row's estimate implies (a rank CI need
    not be symmetric about its estimate; the next-run interval keeps its shape)."""
    lvl = r.get("ci_level")
    if str(r.get("design")) == "exact" or not isinstance(lvl, (int, float)) or not math.isfinite(lvl):
        return math.nan, math.nan
    d, lo, hi = log_ratio(r.get("delta_pct")), log_ratio(r.get("ci_low_pct")), log_ratio(r.get("ci_high_pct"))
    df = row_df(r)
    q = quantile(float(lvl), df)
    if not all(map(math.isfinite, (d, lo, hi))) or not lo <= d <= hi:
        return math.nan, math.nan
    return (d - lo) / q, (hi - d) / q


def welch_df(a: float, df_a: float, b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of the sum of two variance estimates ``a`` and ``b``
    with ``df_a`` and ``df_b`` (inf: known)."""
    den = (a * a / df_a if math.isfinite(df_a) else 0.0) + (b * b / df_b if math.isfinite(df_b) else 0.0)
    return (a + b) ** 2 / den if den > 0 else math.inf


def next_run_interval(estimate: float, se: float, df_within: float, between: Between | None,
                      level: float = 0.95, se_high: float | None = None) -> tuple[float, float]:
    """(low, high), log scale: where another run of this comparison on this host puts its estimate,
    at ``level``: estimate +- t_nu * sqrt(2 se^2 + 2 tau^2) (both runs' own noise, both runs' own
    shift), nu by Welch-Satterthwaite from ``df_within`` and ``between.df``.  ``between`` None or
    ``NONE``: tau^2 = 0 and t at ``df_within``, the interval of a rerun if nothing drifted.
    ``se_high``: the standard error above the estimate where it differs from the one below."""
    b = NONE if between is None else between
    se_high = se if se_high is None else se_high
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (estimate, se, se_high)):
        return math.nan, math.nan
    tau2 = b.tau2 if b.basis != "none" else 0.0
    out = []
    for s in (se, se_high):
        nu = welch_df(2 * s * s, df_within, 2 * tau2, b.df)
        out.append(quantile(level, nu) * math.sqrt(2 * s * s + 2 * tau2))
    return estimate - out[0], estimate + out[1]


def with_next_run(cmp, between=None, level: float = 0.95):
    """``cmp`` (a compare() frame) with each row's interval for another run on this host filled in:
    ``next_low_pct``, ``next_high_pct`` (in delta's sign), ``next_level``, ``next_basis``,
    ``next_between_sd_pct`` (tau in log points x 100; NaN for "none"), ``next_source`` (the
    basis in words) and ``sign_reproducible`` (a called row whose next-run interval lies on the
    same side of 0).  ``between``: a ``Between`` for every row, or a function of the row giving
    its ``Between`` (None: ``NONE``).  Exact rows have none.  A new frame; ``cmp`` is not changed."""
    from ringlab.stats.contract import NEXT_FIELDS, SIGNIFICANT, ci_side
    out = cmp.copy()
    out.attrs.update(cmp.attrs)
    vals = {f: [] for f in NEXT_FIELDS}
    for _, r in cmp.iterrows():
        b = between(r) if callable(between) else between
        b = NONE if b is None else b
        d = log_ratio(r.get("delta_pct"))
        exact = str(r.get("design")) == "exact"
        se_lo, se_hi = row_se_sides(r)
        lo, hi = next_run_interval(d, se_lo, row_df(r), b, level, se_high=se_hi)
        ok = math.isfinite(lo)
        vals["next_low_pct"].append(pct(lo))
        vals["next_high_pct"].append(pct(hi))
        vals["next_level"].append(level if ok else math.nan)
        vals["next_basis"].append(b.basis if ok else "")
        vals["next_between_sd_pct"].append(b.sd_pct if ok else math.nan)
        vals["next_source"].append(b.text if ok else "")
        called = str(r.get("verdict")) in SIGNIFICANT and not exact
        side = ci_side(pct(lo), pct(hi))
        vals["sign_reproducible"].append(None if not called or not ok
                                         else bool(side != 0 and side == ci_side(r.get("ci_low_pct"),
                                                                                 r.get("ci_high_pct"))))
    for f in NEXT_FIELDS:
        out[f] = pd.Series(vals[f], index=out.index,
                           dtype=object if f in ("next_basis", "next_source", "sign_reproducible") else float)
    return out
