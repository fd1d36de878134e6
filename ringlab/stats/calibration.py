"""A host's noise from an A/A run: the analyses ``ringlab calibrate`` writes into calibration.json.

An A/A run measures the same ring code under two arm names, each arm built K times with its own
random layout; raw.csv's ``layout`` column names the layout pair of each round.  Since the code
is the same, every difference between the arms is layout or noise.  Two analyses read it:

1. **Layout spread, round noise and machine states** (``calibrate_frame``):

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

2. **Noise by level and cost** (``calibrate_levels`` -> ``LevelCalibration``, calibration.json's
   ``levels``): the A/A run's per-iteration log ratio ``d = ln(b / a)``, paired by (layout,
   round, iteration), carries exactly the noise an A/B of the same shape sees.  Its variance
   components (``nested_components``) are the three levels' variances; the run's own timings give
   the costs: an iteration (the timed region of both arms), a process (both arms' wall time
   outside the timed region) and a layout pair (two builds, measured by the caller).
   ``LevelCalibration.plan`` turns them, at their upper confidence bounds, into layouts x
   processes x iterations (``ringlab.stats.plan.allocate``).  A mode without a calibration is
   planned with ``CAUTIOUS``, and says so.

   The components: for each level from the innermost out, ``S2`` is the pooled variance of that
   level's unit means around the means of the unit above (iterations around their process's
   mean; process means around their layout's mean; layout means around the grand mean).  Each
   ``S2`` holds its own level's variance plus the levels below divided by their repetitions, so
   the component of a level is

       T2_i = S2_i - S2_(i-1) / n_(i-1)

   with ``n_(i-1)`` the mean number of units of the level below per unit (the estimators of
   Kalibera and Jones, ISMM 2013), clamped at 0.  The upper confidence bound of a component takes
   the chi-square upper bound of its ``S2`` and the lower bound of the one below, so it bounds the
   component from above at the stated confidence whatever the level below does.  statsmodels'
   ``MixedLM`` fits the same components by REML, but it needs seconds to minutes on
   calibration-sized frames and gives no per-level degrees of freedom to bound them with; these
   moment estimators are exact for balanced designs and what ``allocate`` is derived for.

calibration.json (``CALIBRATION_VERSION`` 1) lives in ``results/calibration/<host>/``; the
callers load it (``ringlab.rundir.calibration``).  This module only analyses a frame; it opens
no file.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.errors import DataError
from ringlab.stats import layouts as _layouts
from ringlab.stats import ranktests
from ringlab.stats.plan import MAX_LAYOUTS, Level, Plan, allocate
from ringlab.stats.summary import StatsError, measurements

CALIBRATION_VERSION = 1

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


# --- the variance components of a nested measurement -----------------------------------------

@dataclass(frozen=True)
class Component:
    """One level's variance component: the estimate, its degrees of freedom, the upper bound at
    ``confidence``, and the mean number of units of this level per unit of the level above."""
    level: str
    variance: float
    df: int
    upper: float
    units_per_parent: float
    confidence: float


def _chi2_bounds(s2: float, df: int, confidence: float) -> tuple[float, float]:
    if df < 1 or not math.isfinite(s2):
        return 0.0, math.inf
    return df * s2 / sst.chi2.ppf(confidence, df), df * s2 / sst.chi2.ppf(1 - confidence, df)


def nested_components(frame: pd.DataFrame, value: str, levels: list[str], confidence: float = 0.9) -> list[Component]:
    """The variance components of ``value`` for the nested ``levels`` (outermost first, e.g.
    ``["layout", "trial"]``; the rows themselves are the innermost level, named
    ``"iteration"``).  Returns the components outermost first, ending with the rows' own; with one
    row per innermost group the rows' own component is NaN and stays in the level above."""
    cols = list(levels)
    missing = [c for c in cols + [value] if c not in frame.columns]
    if missing:
        raise DataError(f"nested_components: no column {', '.join(missing)}; allowed: the columns "
                        + ", ".join(map(str, frame.columns)))
    df = frame[cols + [value]].dropna()
    names = cols + ["iteration"]
    s2, dfs, per = [], [], []
    # innermost first: rows around the mean of their innermost group, then each group's mean
    # around the mean of the group above
    cur = df.rename(columns={value: "unit_mean"}) if value != "unit_mean" else df
    keys = cols
    while True:
        if keys:
            g = cur.groupby(keys, sort=False)["unit_mean"]
            means = g.transform("mean")
            sizes = g.size()
            resid = cur["unit_mean"] - means
            dof = int(len(cur) - len(sizes))
            s2.append(float((resid ** 2).sum() / dof) if dof > 0 else math.nan)
            dfs.append(dof)
            per.append(float(sizes.mean()))
            cur = g.mean().reset_index()
            keys = keys[:-1]
        else:
            v = cur["unit_mean"].to_numpy(float)
            dof = len(v) - 1
            s2.append(float(v.var(ddof=1)) if dof > 0 else math.nan)
            dfs.append(dof)
            per.append(float(len(v)))
            break
    out = []
    for i, name in enumerate(reversed(names)):      # innermost first, as computed
        lo_own, hi_own = _chi2_bounds(s2[i], dfs[i], confidence)
        if i == 0:
            t2, up = s2[i], hi_own
        else:
            # a level below without repetitions (one iteration a process) cannot be told apart
            # from this one: its variance stays in this level's component
            n_below = per[i - 1]
            below = s2[i - 1] if math.isfinite(s2[i - 1]) else 0.0
            lo_below = _chi2_bounds(s2[i - 1], dfs[i - 1], confidence)[0] if math.isfinite(s2[i - 1]) else 0.0
            t2 = s2[i] - below / n_below if math.isfinite(s2[i]) else math.nan
            up = hi_own - lo_below / n_below
        out.append(Component(level=name, variance=max(0.0, t2) if math.isfinite(t2) else math.nan,
                             df=dfs[i], upper=max(0.0, up), units_per_parent=per[i], confidence=confidence))
    return list(reversed(out))


# --- noise by level and cost, and the plan it implies ------------------------------------------

LEVELS = ("layout", "process", "iteration")


@dataclass(frozen=True)
class LevelCalibration:
    """One mode's noise and costs: per level the variance of the log ratio (estimate and upper
    bound) and the seconds one unit costs a pair of arms; ``count`` the ops per iteration
    measured; ``source`` where the figures come from ("measured" or why a default is used)."""
    mode: str
    variance: dict[str, float]
    upper: dict[str, float]
    df: dict[str, int]
    cost_s: dict[str, float]
    count: int
    source: str = "measured"
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: the shortest ops per iteration whose median agrees with the longest trials' (None: not measured)
    min_count: int | None = None
    #: the trial-length probe it comes from: per count its median, robust SD (% of the median), trials
    lengths: tuple[dict, ...] = field(default_factory=tuple)

    def at_count(self, count: int) -> LevelCalibration:
        """This calibration for iterations of ``count`` ops: an iteration costs in proportion to
        its ops, and the process level gains what the trial-length probe's per-trial variance has
        at that count beyond its variance at the calibration's own count (for the two arms of a
        pair: twice the difference of the squared robust SDs; nothing where the probe has
        neither count)."""
        if not count or count == self.count:
            return self
        cost = dict(self.cost_s, iteration=float(self.cost_s.get("iteration") or 0) * count / self.count)
        sd = {int(r["count"]): float(r["sd_pct"]) / 100 for r in self.lengths
              if r.get("sd_pct") is not None and math.isfinite(float(r["sd_pct"]))}
        extra = 2 * max(0.0, sd[count] ** 2 - sd[self.count] ** 2) if count in sd and self.count in sd else 0.0

        def more(v: dict) -> dict:
            return {n: (x + extra if n == "process" and isinstance(x, (int, float)) else x) for n, x in v.items()}
        return LevelCalibration(self.mode, more(self.variance), more(self.upper), dict(self.df), cost,
                                int(count), self.source, self.notes, self.min_count, self.lengths)

    def unbiased_counts(self) -> list[int]:
        """The probe's counts, longest first, down to the shortest unbiased one (``min_count``);
        the calibration's own count without a probe."""
        if not self.min_count:
            return [int(self.count)]
        out = sorted({int(r["count"]) for r in self.lengths if int(r["count"]) >= self.min_count}, reverse=True)
        return out or [int(self.min_count)]

    def levels(self, use_upper: bool = True) -> tuple[Level, Level, Level]:
        v = self.upper if use_upper else self.variance
        return tuple(Level(n, _finite_or(v.get(n), 0.0), _finite_or(self.cost_s.get(n), 0.0)) for n in LEVELS)

    def plan(self, target_half_width_pct: float | None = None, budget_s: float | None = None,
             level: float = 0.95, max_layouts: int = MAX_LAYOUTS) -> Plan:
        """Layouts, processes and iterations for a t half-width of ``target_half_width_pct``
        (percent) within ``budget_s`` seconds, from the upper bounds."""
        target = math.log1p(target_half_width_pct / 100) if target_half_width_pct else None
        return allocate(*self.levels(), target_half_width=target, budget_s=budget_s, level=level,
                        max_layouts=max_layouts)

    def as_dict(self) -> dict:
        return asdict(self) | {"notes": list(self.notes), "lengths": [dict(r) for r in self.lengths]}

    @classmethod
    def from_dict(cls, doc: dict) -> LevelCalibration:
        try:
            return cls(mode=str(doc["mode"]), variance=dict(doc["variance"]), upper=dict(doc["upper"]),
                       df={k: int(v) for k, v in doc["df"].items()}, cost_s=dict(doc["cost_s"]),
                       count=int(doc["count"]), source=str(doc.get("source", "measured")),
                       notes=tuple(doc.get("notes", ())),
                       min_count=int(doc["min_count"]) if doc.get("min_count") else None,
                       lengths=tuple(dict(r) for r in doc.get("lengths") or ()))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataError(f"calibration levels: {e!r} in {doc!r:.200}; expected the fields of "
                            "LevelCalibration.as_dict()") from e


def _finite_or(v, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else default


#: the plan of a mode no calibration covers: per-level SDs of the log ratio of 6% (layout),
#: 6% (process) and 2% (iteration), a little above the noisiest A/A measured (a 2-vCPU Xeon
#: guest, process SD about 14% per arm, so about 5% for a round-paired ratio after its pairing),
#: and costs of 1 s a build pair, 20 ms a process pair, 40 ms an iteration pair.  With a budget the
#: pilot's shape and size come from the run's own timed builds and warm-up round instead
#: (``ringlab.stats.sequential.pilot_for_measured_costs``)
CAUTIOUS = LevelCalibration(
    mode="any", variance={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    upper={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    df={n: 0 for n in LEVELS}, cost_s={"layout": 1.0, "process": 0.02, "iteration": 0.04}, count=10_000_000,
    source=("no calibration of this mode on this host: a pilot sized from this run's own timed builds and "
            "warm-up round (from cautious defaults without a budget), then stages planned from the noise this "
            "run measured"))


#: how far (relative) a short trial's median may lie from the longest trials' and still count as
#: unbiased: a start-up cost shared by both arms dilutes an effect by at most this share of it
LENGTH_TOLERANCE = 0.02


def trial_lengths(frame: pd.DataFrame, metric: str, level: float = 0.95) -> list[dict]:
    """Per ops count of a trial-length probe (``frame``: one mode's measured rows of one build at
    several ``count`` values, fresh processes each), longest first: the median of ``metric``,
    its robust SD in % of the median (1.4826 x MAD), the trials, the shift against the longest
    count (Hodges-Lehmann of the log values, % and its Mann-Whitney CI: ``shift_pct``,
    ``shift_low_pct``, ``shift_high_pct``) and ``agrees``: the shift is within
    ``LENGTH_TOLERANCE`` and its CI reaches within it, so the data do not show a bias larger
    than it.  A start-up
    cost shows as a shift that grows as the trials shorten."""
    f = frame[pd.to_numeric(frame[metric], errors="coerce") > 0]
    groups = sorted(f.groupby(pd.to_numeric(f["count"], errors="coerce")), key=lambda kv: -kv[0])
    rows = []
    ref = np.log(groups[0][1][metric].astype(float).to_numpy()) if groups else None
    tol = math.log1p(LENGTH_TOLERANCE)
    for c, sub in groups:
        y = sub[metric].astype(float).to_numpy()
        med = float(np.median(y))
        mad = float(np.median(np.abs(y - med))) * 1.4826
        row = {"count": int(c), "median": med, "sd_pct": 100 * mad / med if med > 0 else math.nan,
               "n": int(len(y))}
        if len(y) >= 2 and len(ref) >= 2:
            sh = ranktests.rank_sum(ref, np.log(y), level)
            lo, hi = float(sh["ci_low"]), float(sh["ci_high"])
            est = float(sh["estimate"])
            row.update(shift_pct=100 * math.expm1(est), shift_low_pct=100 * math.expm1(lo),
                       shift_high_pct=100 * math.expm1(hi),
                       agrees=bool(abs(est) <= tol and lo <= tol and hi >= -tol))
        else:
            row["agrees"] = bool(abs(med / float(np.exp(np.median(ref))) - 1) <= LENGTH_TOLERANCE)
        rows.append(row)
    return rows


def shortest_unbiased(rows: list[dict]) -> int | None:
    """The shortest count of ``trial_lengths`` rows whose median, and every longer count's, agrees
    with the longest's; None without rows."""
    best = None
    for r in rows:            # longest first
        if not r.get("agrees"):
            break
        best = int(r["count"])
    return best


def pair_differences(frame: pd.DataFrame, base: str, cand: str, metric: str) -> pd.DataFrame:
    """``d = ln(cand / base)`` per (layout, round, iteration) measured in both arms."""
    need = ["variant", "layout", "round", metric]
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise DataError(f"raw.csv: no column {', '.join(missing)}; a level calibration needs "
                        + ", ".join(need) + " (an A/A run with -p layouts K)")
    f = frame[frame["variant"].astype(str).isin([base, cand])].copy()
    f["iteration"] = pd.to_numeric(f["iteration"], errors="coerce").fillna(0) if "iteration" in f else 0
    f = f[pd.to_numeric(f[metric], errors="coerce") > 0]
    f["y"] = np.log(f[metric].astype(float))
    w = f.pivot_table(index=["layout", "round", "iteration"], columns="variant", values="y", aggfunc="first")
    if base not in w.columns or cand not in w.columns:
        raise DataError(f"variant: the A/A needs both {base} and {cand} measured in the same rounds")
    d = (w[cand] - w[base]).dropna().rename("d").reset_index()
    return d


def _costs(frame: pd.DataFrame, base: str, cand: str, build_s: float) -> dict[str, float]:
    f = frame[frame["variant"].astype(str).isin([base, cand])]
    per = f.groupby(["variant", "layout", "round"])
    timed = per["elapsed_ns"].sum() / 1e9 if "elapsed_ns" in f else pd.Series(dtype=float)
    wall = per["wall_s"].max() if "wall_s" in f else pd.Series(dtype=float)
    outside = (wall - timed).clip(lower=0).median() if len(wall) and len(timed) else math.nan
    one = (f["elapsed_ns"].median() / 1e9) if "elapsed_ns" in f else math.nan
    return {"layout": 2 * build_s, "process": 2 * float(outside), "iteration": 2 * float(one)}


def calibrate_levels(frame: pd.DataFrame, base: str, cand: str, metric: str, mode, build_s: float,
                     confidence: float = 0.9) -> LevelCalibration:
    """The level calibration of one mode's A/A rows (``frame``: that mode's measured rows)."""
    d = pair_differences(frame, base, cand, metric)
    if d["layout"].nunique() < 2:
        raise DataError("layout: a level calibration needs at least 2 layout pairs measured in both arms")
    comps: list[Component] = nested_components(d, "d", ["layout", "round"], confidence)
    by = dict(zip(LEVELS, comps))
    notes = []
    if not math.isfinite(by["iteration"].variance):
        notes.append("one iteration a process: the iteration level is not separated from the process level")
    count = int(pd.to_numeric(frame.get("count", pd.Series([0])), errors="coerce").median())
    return LevelCalibration(mode=str(mode), variance={n: c.variance for n, c in by.items()},
                            upper={n: c.upper for n, c in by.items()}, df={n: c.df for n, c in by.items()},
                            cost_s=_costs(frame, base, cand, build_s), count=count, notes=tuple(notes))
