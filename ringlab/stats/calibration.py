"""This machine's calibration: layout spread sigma_L, round noise and machine states from an A/A run.

The A/A run measures the same ring code under two arm names, each arm built K times with its
own random layout; raw.csv's ``layout`` column names the layout pair of each round.  Since the
code is the same, every difference between the arms is layout or noise:

* per layout pair, the Hodges-Lehmann estimate of the per-round log ratios
  (``ringlab.stats.layouts.per_layout``); the spread of those K estimates beyond the
  round noise is sigma_L (method of moments, ``layouts.layout_spread``); the A/A effect and its
  CI are the comparison's fit (``layouts.layout_verdict``);
* its 95% interval: var(e_k) ~ (sigma_L^2 + w) chi^2_{K-1} / (K-1), w the mean sampling variance
  of one estimate, so sigma_L^2 lies in [(K-1) v / chi^2_{.975} - w, (K-1) v / chi^2_{.025} - w]
  (clipped at 0), v the sample variance of the e_k;
* the round noise s: the root mean square over layout pairs of the robust SD of the per-round
  log ratios (what ``ringlab.stats.plan.layout_plan`` needs);
* the machine states: ``ringlab.stats.states.classify`` on the trial-ordered log times with each
  arm's level (and the median A/A ratio) taken out, through ``layouts.rounds_from_trials``;
* seconds per round: the median over rounds of the rounds' summed ``wall_s``.

calibration.json (``CALIBRATION_VERSION`` 1) lives in ``results/calibration/<host>/``; the
callers load it (``ringlab.rundir.calibration``).  This module only analyses a frame; it opens
no file.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import layouts as _layouts
from ringlab.stats.summary import StatsError, measurements

CALIBRATION_VERSION = 1
#: fields every calibration.json holds (tests check them; readers rely on them)
FIELDS = ("calibration_version", "host", "date_utc", "run_id", "ringlab_commit", "layouts", "rounds",
          "sigma_layout", "sigma_layout_ci", "layout_share", "round_sd", "seconds_per_round",
          "states", "run_dir", "metric")


def sigma_layout_interval(estimates, within: float, level: float = 0.95) -> tuple[float, float]:
    """(low, high) of sigma_L from the chi-square law of the sample variance of the K estimates."""
    e = np.asarray(estimates, dtype=float)
    k = len(e)
    if k < 2 or not math.isfinite(within):
        return math.nan, math.nan
    v = float(e.var(ddof=1))
    a = (1 - level) / 2
    lo = (k - 1) * v / sst.chi2.ppf(1 - a, k - 1) - within
    hi = (k - 1) * v / sst.chi2.ppf(a, k - 1) - within
    return math.sqrt(max(lo, 0.0)), math.sqrt(max(hi, 0.0))


def _seconds_per_round(meas: pd.DataFrame) -> float:
    if "wall_s" not in meas.columns or "round" not in meas.columns:
        return math.nan
    w = pd.to_numeric(meas["wall_s"], errors="coerce")
    if not w.notna().any():
        return math.nan
    return float(w.fillna(0.0).groupby(meas["round"]).sum().median())


def _arms(meas: pd.DataFrame, arms) -> tuple[str, str]:
    names = sorted(map(str, meas["variant"].dropna().unique()))
    if arms is None:
        if len(names) != 2:
            raise StatsError(f"variant: a calibration needs exactly two arms; this raw.csv has {', '.join(names)}")
        return names[0], names[1]
    missing = [a for a in arms if a not in names]
    if missing:
        raise StatsError(f"variant: {', '.join(missing)} not in this raw.csv; allowed: {', '.join(names)}")
    return str(arms[0]), str(arms[1])


def _trials(df: pd.DataFrame, metric: str, arms) -> tuple[pd.DataFrame, tuple[str, str]]:
    """The two arms' measured trials with ``round`` and ``layout`` (rounds holding both arms only)."""
    for col in ("variant", "layout"):
        if col not in df.columns:
            raise StatsError(f"raw.csv has no '{col}' column; a calibration needs an A/A run with -p layouts K")
    meas, _ = measurements(df, metric)
    meas["variant"] = meas["variant"].astype(str)
    base, cand = _arms(meas, arms)
    meas = meas[meas["variant"].isin([base, cand]) & (meas[metric] > 0)].copy()
    rcol = "round" if "round" in meas.columns else "trial"
    if rcol not in meas.columns:
        raise StatsError("raw.csv has neither a 'round' nor a 'trial' column; a calibration pairs by round")
    meas["round"] = pd.to_numeric(meas[rcol], errors="coerce")
    both = meas.groupby("round")["variant"].transform("nunique") == 2
    one = meas.groupby(["round", "variant"])["variant"].transform("size") == 1
    meas = meas[both & one]
    if "order" not in meas.columns:
        meas["order"] = np.arange(len(meas))
    return meas, (base, cand)


def calibrate_frame(df: pd.DataFrame, metric: str = schema.PRIMARY_METRIC, arms=None, level: float = 0.95) -> dict:
    """The calibration of one A/A run's raw.csv frame (see the module docstring).

    Returns the analysis fields of calibration.json: ``layouts``, ``rounds``, ``sigma_layout``,
    ``sigma_layout_ci`` [low, high], ``layout_share``, ``aa_estimate`` (the A/A effect across
    layouts, log scale, with ``aa_ci``), ``round_sd``, ``seconds_per_round``, ``states``
    (``StateFit.as_dict()``), ``metric``, ``arms``."""
    meas, (base, cand) = _trials(df, metric, arms)
    if meas["layout"].nunique() < 2:
        raise StatsError("layout: a calibration needs at least 2 layout pairs with both arms measured")
    r = _layouts.rounds_from_trials(meas["order"].to_numpy(), meas["round"].to_numpy(),
                                    meas["layout"].astype(str).to_numpy(),
                                    (meas["variant"] == cand).astype(int).to_numpy(),
                                    np.log(meas[metric].to_numpy(dtype=float)))
    verdict = _layouts.layout_verdict(r.d, r.layout, level=level)
    cells = _layouts.per_layout(r.d, r.layout)
    est = [v[0] for v in cells.values()]
    sds = np.array([v[1] for v in cells.values()])
    ns = np.array([v[2] for v in cells.values()])
    within = float(np.nanmean(math.pi / 3 * sds ** 2 / ns)) if len(ns) else math.nan
    sigma, share = _layouts.layout_spread(est, sds, ns)
    lo, hi = sigma_layout_interval(est, within, level)
    return {"metric": metric, "arms": [base, cand], "layouts": len(est), "rounds": int(len(r.d)),
            "sigma_layout": sigma, "sigma_layout_ci": [lo, hi], "layout_share": share,
            "aa_estimate": verdict["estimate"], "aa_ci": [verdict["ci_low"], verdict["ci_high"]],
            "round_sd": float(np.sqrt(np.nanmean(sds ** 2))) if len(sds) else math.nan,
            "seconds_per_round": _seconds_per_round(meas), "states": r.fit.as_dict()}
