"""Variance components of a nested measurement: layouts, processes inside a layout, iterations
inside a process.

For each level from the innermost out, ``S2`` is the pooled variance of that level's unit means
around the means of the unit above (iterations around their process's mean; process means around
their layout's mean; layout means around the grand mean).  Each ``S2`` holds its own level's
variance plus the levels below divided by their repetitions, so the component of a level is

    T2_i = S2_i - S2_(i-1) / n_(i-1)

with ``n_(i-1)`` the mean number of units of the level below per unit (the estimators of
Kalibera and Jones, ISMM 2013), clamped at 0.  The upper confidence bound of a component takes
the chi-square upper bound of its ``S2`` and the lower bound of the one below, so it bounds the
component from above at the stated confidence whatever the level below does.

statsmodels' ``MixedLM`` fits the same components by REML, but it needs seconds to minutes on
calibration-sized frames and gives no per-level degrees of freedom to bound them with; these
moment estimators are exact for balanced designs and what the allocation in
``ringlab.stats.plan.allocate`` is derived for.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.errors import DataError


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


def log_values(x) -> np.ndarray:
    """Natural logs of positive values (the scale the components of a ratio are taken on)."""
    v = np.asarray(x, dtype=float)
    return np.where(v > 0, np.log(np.where(v > 0, v, 1.0)), np.nan)


__all__ = ["Component", "log_values", "nested_components"]
