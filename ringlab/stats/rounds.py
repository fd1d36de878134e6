"""Which rows of a raw.csv frame are compared with which: configurations, rounds, and the
rounds of two arms paired once (``Rounds``).

The unit of analysis is the round: the rows of one arm in one round are reduced to their
median (``round_values``), and two arms are paired on the rounds both measured.  ``Rounds``
also fixes the design of the comparison (paired when the common rounds are at least
``PAIRED_MIN_SHARE`` of either arm's rounds, and at least 2) and the scale it is analysed on
(``Scale``: log for positive values, else differences relative to the baseline median).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ringlab import schema
from ringlab.stats.summary import group_columns


#: column a comparison adds to a measurement frame: the round key of each row (``round_key``)
ROUND_COLUMN = "_round"
#: paired when the common rounds are at least this share of either arm's rounds
PAIRED_MIN_SHARE = 0.5


def round_values(frame: pd.DataFrame, metric: str) -> pd.Series:
    """One value per round: the median of the arm's rows in that round."""
    if ROUND_COLUMN not in frame.columns:
        return pd.Series(frame[metric].to_numpy(), index=pd.RangeIndex(len(frame)), dtype=float)
    return frame.groupby(ROUND_COLUMN, sort=True)[metric].median()


def round_key(frame: pd.DataFrame) -> pd.Series | None:
    """The round of each row: ``round`` (or ``trial`` in older files), per ``run_id``."""
    col = next((c for c in ("round", "trial") if c in frame.columns
                and pd.to_numeric(frame[c], errors="coerce").notna().any()), None)
    if col is None:
        return None
    key = pd.to_numeric(frame[col], errors="coerce")
    if "run_id" in frame.columns and frame["run_id"].nunique(dropna=False) > 1:
        return frame["run_id"].astype(str) + "/" + key.astype("Int64").astype(str)
    return key


def comparison_columns(meas: pd.DataFrame, by=None) -> list[str]:
    """Configuration key of a comparison: the parameters and requested placement, except
    placement columns on which the arms disagree while each arm's value follows from the
    other columns (a single-threaded arm records no consumer CPU, -1 or NaN: its ``base``
    must still meet the two-thread arms of the same placement)."""
    cols = group_columns(meas, by, include_variant=False)
    if by is not None or "variant" not in meas.columns or not len(meas):
        return cols
    place = [c for c in cols if c in schema.CONFIG_PLACEMENT_COLUMNS]
    other = [c for c in cols if c not in place]
    drop = []
    for c in place:
        determined, per_variant = True, {}
        for v, sub in meas.groupby("variant", sort=True):
            if other:
                g = sub.groupby(other, dropna=False, sort=True)[c]
                if (g.nunique(dropna=False) > 1).any():
                    determined = False
                    break
                per_variant[v] = g.first().astype(str).to_dict()
            else:
                if sub[c].nunique(dropna=False) > 1:
                    determined = False
                    break
                per_variant[v] = {(): str(sub[c].iloc[0])}
        if not determined:
            continue
        maps = list(per_variant.values())
        disagree = any(m.get(k) != maps[0].get(k) for m in maps[1:] for k in set(m) & set(maps[0]))
        if disagree:
            drop.append(c)
    return [c for c in cols if c not in drop]


@dataclass(frozen=True)
class Scale:
    """The scale a comparison is analysed on: log for positive data (percent = exp - 1), else
    differences relative to the baseline median ``ref``."""
    log: bool
    ref: float

    @classmethod
    def of(cls, b, c, median_baseline: float) -> "Scale":
        allv = np.concatenate([np.asarray(b, float), np.asarray(c, float)])
        return cls(bool(len(allv) and np.all(allv > 0)), median_baseline)

    def fwd(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return np.log(x) if self.log else x

    def pct(self, v: float) -> float:
        if not math.isfinite(v):
            return math.nan
        if self.log:
            return math.expm1(v) * 100
        return v / abs(self.ref) * 100 if self.ref else math.nan


@dataclass(frozen=True)
class Rounds:
    """Two arms' per-round values (Series indexed by round), paired once.

    ``common``: the rounds both arms measured; ``paired``: whether the comparison is paired on
    them.  ``d`` (paired) or ``x``/``y`` (unpaired) are the values on ``scale``."""
    baseline: pd.Series
    candidate: pd.Series
    common: pd.Index
    paired: bool

    @classmethod
    def pair(cls, baseline: pd.Series, candidate: pd.Series, paired: bool | None = None) -> "Rounds":
        """Pair two arms' round values (NaN rounds dropped); ``paired`` None: paired when the
        common rounds are at least 2 and ``PAIRED_MIN_SHARE`` of either arm's rounds."""
        b, c = baseline.dropna(), candidate.dropna()
        common = b.index.intersection(c.index)
        if paired is None:
            paired = len(common) >= 2 and len(common) >= PAIRED_MIN_SHARE * max(len(b), len(c))
        return cls(b, c, common, bool(paired))

    @classmethod
    def of_frames(cls, bsub: pd.DataFrame, csub: pd.DataFrame, metric: str, paired: bool | None = None) -> "Rounds":
        """``pair`` of two arms' measurement rows (each round reduced to its median)."""
        return cls.pair(round_values(bsub, metric), round_values(csub, metric), paired)

    @property
    def n_common(self) -> int:
        return int(len(self.common))

    def positive(self) -> bool:
        """Whether every common round of both arms is > 0 (the log scale applies)."""
        return bool((self.baseline.loc[self.common] > 0).all() and (self.candidate.loc[self.common] > 0).all())

    def scale(self, median_baseline: float) -> Scale:
        return Scale.of(self.baseline.to_numpy(), self.candidate.to_numpy(), median_baseline)

    def differences(self, scale: Scale) -> np.ndarray:
        """candidate - baseline per common round on ``scale``."""
        return scale.fwd(self.candidate.loc[self.common].to_numpy()) - scale.fwd(self.baseline.loc[self.common].to_numpy())
