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
* ``Drift`` is a host's between-run model in one mode, var(run effect) = tau^2 + (rel * delta)^2:
  an absolute part from A/A runs (identical arms) and a part proportional to the effect, from
  runs of a known A/B (``drift_of``);
* ``next_run`` is the interval another run's estimate is expected in, given this run's
  estimate d and standard error s: d +- q * sqrt(2 s^2 + 2 var(run effect)), q Student's t at
  the fewer of the CI's and the drift's degrees of freedom.  Both runs carry their own run effect
  and their own noise; with no drift at all it is sqrt(2) times the CI's half-width, never
  narrower than the CI;
* ``next_run_of_states`` widens that interval for a row measured in two machine states: the
  headline weighs the states equally, but another run may find one state only, and then lands
  near that state's effect.  The interval is the hull of the headline's and each state's own
  next-run interval (the state's effect with its standard error, the next run's noise and the
  drift), so a run in either state, or in any mix of them, is inside.

Pure: data in, data out.  The callers read calibration files and run folders (``ringlab.rundir``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sps

from ringlab.stats.summary import StatsError

#: the method of tau^2 (statsmodels' ``method_re``): Paule-Mandel, iterated to its fixed point
TAU_METHOD = "iterated"
#: no drift measured: the interval holds the two runs' own noise only, and says so
NO_DRIFT = "no between-run drift measured for this host and mode: the interval holds the two runs' own noise only"


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


@dataclass(frozen=True)
class Drift:
    """A host's between-run model in one mode: var(run effect) = tau^2 + (rel * delta)^2."""
    tau: float                              # SD of an A/A's run effect (log scale)
    rel: float = 0.0                        # SD of an effect's run-to-run change, per unit of effect
    df: float = math.inf                    # degrees of freedom of the estimate (runs - 1)
    source: str = ""
    runs: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def variance(self, delta: float) -> float:
        """The run effect's variance for an effect ``delta`` (log scale)."""
        d = delta if math.isfinite(delta) else 0.0
        return self.tau ** 2 + (self.rel * d) ** 2

    def sd_pct(self, delta: float) -> float:
        """The run effect's SD at ``delta``, in percent points."""
        return math.sqrt(self.variance(delta)) * 100

    def as_dict(self) -> dict:
        return {"tau_pct": self.tau * 100, "rel": self.rel, "df": None if math.isinf(self.df) else self.df,
                "source": self.source, "runs": self.runs, "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict, source: str | None = None) -> "Drift":
        try:
            tau, rel = float(d["tau_pct"]) / 100, float(d.get("rel") or 0.0)
            df = math.inf if d.get("df") is None else float(d["df"])
        except (KeyError, TypeError, ValueError):
            raise StatsError(f"drift: not a between-run model: {d!r}") from None
        if not (math.isfinite(tau) and tau >= 0 and math.isfinite(rel) and rel >= 0 and df > 0):
            raise StatsError(f"drift: tau {tau}, rel {rel}, df {df}; allowed: tau, rel >= 0 and df > 0")
        return cls(tau=tau, rel=rel, df=df, source=source or str(d.get("source") or ""), runs=int(d.get("runs") or 0),
                   notes=tuple(d.get("notes") or ()))


#: the source of a mode's drift taken from the host's other modes (``widest_drift``)
WIDEST = "not calibrated for this row: the widest drift of this host's calibrated modes"


def widest_drift(drifts: dict) -> Drift | None:
    """For a mode the host's drift calibration did not measure: the largest absolute and
    proportional parts of the modes it did, at their fewest degrees of freedom.  The drift is the
    host's own (its state over hours moves every mode), and the two runs' noise alone misses a
    drifting host; the widest measured part errs on the side of a wider interval, and its source
    says so.  None without a calibrated mode."""
    ds = {m: d for m, d in drifts.items() if m != "*" and isinstance(d, Drift)}
    if not ds:
        return None
    modes = sorted(ds)
    srcs = "; ".join(dict.fromkeys(d.source for d in ds.values() if d.source))
    source = f"{WIDEST} {', '.join(modes)}" + (f" ({srcs})" if srcs else "")
    return Drift(tau=max(d.tau for d in ds.values()), rel=max(d.rel for d in ds.values()),
                 df=min(d.df for d in ds.values()), source=source, runs=min(d.runs for d in ds.values()))


def drift_of(aa: RandomEffects | None, ab: RandomEffects | None, source: str) -> Drift:
    """The between-run model from the runs of an A/A (``aa``: tau) and of a known A/B (``ab``: the
    part of its tau^2 above the A/A's, per unit of its effect squared, is rel^2).  Either may be
    None; with neither, StatsError."""
    if aa is None and ab is None:
        raise StatsError("drift: neither A/A nor A/B runs to measure it from")
    notes = []
    tau2 = aa.tau2 if aa is not None else 0.0
    if aa is None:
        notes.append("no A/A runs: the absolute part is taken as 0")
    rel = 0.0
    if ab is not None:
        extra = max(0.0, ab.tau2 - tau2)
        if abs(ab.estimate) > 0:
            rel = math.sqrt(extra) / abs(ab.estimate)
        if aa is None:
            tau2, rel = ab.tau2, 0.0   # no way to split it: all of it absolute, the wider choice for small effects
            notes[-1] = "no A/A runs: the A/B's run spread is taken as absolute"
    ks = [r.k for r in (aa, ab) if r is not None]
    return Drift(tau=math.sqrt(tau2), rel=rel, df=max(1.0, float(min(ks) - 1)), source=source, runs=max(ks),
                 notes=tuple(notes))


def drift_of_runs(re: RandomEffects, source: str) -> Drift:
    """The between-run model from earlier runs of the same comparison: their tau, all of it."""
    return Drift(tau=re.tau, rel=0.0, df=max(1.0, float(re.k - 1)), source=source, runs=re.k)


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


def next_run(delta: float, se: float, drift: Drift | None, level: float = 0.95,
             df_within: float = math.inf, se_high: float | None = None) -> tuple[float, float]:
    """(low, high), log scale: where another run's estimate of this comparison on this host is
    expected, at ``level``, given this run's ``delta`` and ``se`` (with ``df_within`` degrees of
    freedom) and the host's ``drift`` (None: no drift, the two runs' noise only).  The quantile
    is Student's t at the fewer of the two degrees of freedom (the drift's: its runs - 1): a
    drift estimated from few runs is often estimated as none, and only the wider quantile keeps
    the interval at its level then (the simulations of the tests show both).  ``se_high``: the
    standard error above the estimate where it differs from the one below (``se``)."""
    se_high = se if se_high is None else se_high
    if not (math.isfinite(delta) and math.isfinite(se) and math.isfinite(se_high)):
        return math.nan, math.nan
    var_run = drift.variance(delta) if drift is not None else 0.0
    df = min(df_within, drift.df if drift is not None else math.inf)
    q = quantile(level, df)
    return (delta - q * math.sqrt(2 * se ** 2 + 2 * var_run), delta + q * math.sqrt(2 * se_high ** 2 + 2 * var_run))


#: the per-state columns of a compare() row (``ringlab.stats.contract``): effect and CI
STATE_COLUMNS = {"fast": ("delta_fast_pct", "ci_fast_low_pct", "ci_fast_high_pct"),
                 "slow": ("delta_slow_pct", "ci_slow_low_pct", "ci_slow_high_pct")}


def state_effects(r) -> list[tuple[float, float, float]]:
    """(effect, se below, se above), log scale, of each machine state of a compare() row that
    found two; [] for a row with one state, an exact row, or per-state values missing."""
    lvl, n_states = r.get("ci_level"), r.get("states")
    if (str(r.get("design")) == "exact" or not isinstance(lvl, (int, float)) or not math.isfinite(lvl)
            or not isinstance(n_states, (int, float)) or n_states != 2):
        return []
    df = row_df(r)
    q = quantile(float(lvl), df)
    out = []
    for cols in STATE_COLUMNS.values():
        e, lo, hi = (log_ratio(r.get(c)) for c in cols)
        if not all(map(math.isfinite, (e, lo, hi))) or not lo <= e <= hi:
            return []
        out.append((e, (e - lo) / q, (hi - e) / q))
    return out


def next_run_of_states(delta: float, se: float, drift: Drift | None, level: float = 0.95,
                       df_within: float = math.inf, se_high: float | None = None,
                       states: list[tuple[float, float, float]] = ()) -> tuple[float, float]:
    """``next_run``'s interval, widened to hold a next run that finds one machine state only:
    for each of ``states`` (``state_effects``), the state's effect e_s +- q * sqrt(se_s^2 + se^2
    + 2 var(run effect at e_s)): what this run knows of that state, the next run's own noise (as
    this run's) and both runs' drift.  The hull of these and the headline's interval."""
    lo, hi = next_run(delta, se, drift, level, df_within, se_high)
    if not states or not (math.isfinite(lo) and math.isfinite(hi)):
        return lo, hi
    se_high = se if se_high is None else se_high
    df = min(df_within, drift.df if drift is not None else math.inf)
    q = quantile(level, df)
    for e, s_lo, s_hi in states:
        var_run = drift.variance(e) if drift is not None else 0.0
        lo = min(lo, e - q * math.sqrt(s_lo ** 2 + se ** 2 + 2 * var_run))
        hi = max(hi, e + q * math.sqrt(s_hi ** 2 + se_high ** 2 + 2 * var_run))
    return lo, hi


def with_next_run(cmp, drifts: dict, level: float = 0.95):
    """``cmp`` (a compare() frame) with each row's interval for another run on this host filled in:
    ``next_low_pct``, ``next_high_pct`` (in delta's sign), ``next_level``, ``drift_pct`` (the run
    effect's SD at this effect), ``next_source`` and ``sign_reproducible`` (a called row whose
    next-run interval lies on the same side of 0).  A row measured in two machine states gets
    ``next_run_of_states``' interval: it also holds a next run that finds one state only.
    ``drifts`` maps a mode ("0", "1", ...; "*": any other) to its ``Drift``; a mode without one
    gets the two runs' noise only and says so.  Exact rows have none.  A new frame; ``cmp`` is
    not changed."""
    from ringlab.stats.contract import NEXT_FIELDS, SIGNIFICANT, ci_side
    out = cmp.copy()
    out.attrs.update(cmp.attrs)
    vals = {f: [] for f in NEXT_FIELDS}
    for _, r in cmp.iterrows():
        mode = str(r["mode"]) if "mode" in cmp.columns else "*"
        drift = drifts.get(mode, drifts.get("*"))
        d = log_ratio(r.get("delta_pct"))
        exact = str(r.get("design")) == "exact"
        se_lo, se_hi = row_se_sides(r)
        lo, hi = next_run_of_states(d, se_lo, drift, level, row_df(r), se_high=se_hi, states=state_effects(r))
        vals["next_low_pct"].append(pct(lo))
        vals["next_high_pct"].append(pct(hi))
        vals["next_level"].append(level if math.isfinite(lo) else math.nan)
        vals["drift_pct"].append(drift.sd_pct(d) if drift is not None and math.isfinite(lo) else math.nan)
        vals["next_source"].append((drift.source if drift is not None else NO_DRIFT) if math.isfinite(lo) else "")
        called = str(r.get("verdict")) in SIGNIFICANT and not exact
        side = ci_side(pct(lo), pct(hi))
        vals["sign_reproducible"].append(None if not called or not math.isfinite(lo)
                                         else bool(side != 0 and side == ci_side(r.get("ci_low_pct"),
                                                                                 r.get("ci_high_pct"))))
    for f in NEXT_FIELDS:
        out[f] = pd.Series(vals[f], index=out.index, dtype=object if f in ("next_source", "sign_reproducible")
                           else float)
    return out
