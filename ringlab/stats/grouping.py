"""Which rows of a raw.csv frame are compared with which: configurations and rounds."""
from __future__ import annotations

import pandas as pd

from ringlab import schema
from ringlab.stats.summary import group_columns


def _round_values(frame: pd.DataFrame, metric: str) -> pd.Series:
    """One value per round: the median of the arm's rows in that round."""
    if "_round" not in frame.columns:
        return pd.Series(frame[metric].to_numpy(), index=pd.RangeIndex(len(frame)), dtype=float)
    return frame.groupby("_round", sort=True)[metric].median()


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
