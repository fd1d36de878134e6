"""A machine's noise by level and cost, from one A/A run of the layout design, and the plan it implies.

The A/A run measures two names of the same code (arms ``a`` and ``b``) over layout pairs, in
rounds (one fresh process of each arm per round) with ``repeats`` timed iterations per process.
Its per-iteration log ratio ``d = ln(b / a)``, paired by (layout, round, iteration), carries
exactly the noise an A/B of the same shape sees.  Its variance components
(``ringlab.stats.components``) are the three levels' variances; the run's own timings give the
costs: an iteration (the timed region of both arms), a process (both arms' wall time outside
the timed region) and a layout pair (two builds, measured by the caller).

``LevelCalibration.plan`` turns them, at their upper confidence bounds, into layouts x processes
x iterations (``ringlab.stats.allocation``).  A mode without a calibration is planned with
``CAUTIOUS``: the components of the noisiest host measured so far, rounded up, and said so.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ringlab.errors import DataError
from ringlab.stats.allocation import MAX_LAYOUTS, Level, allocate
from ringlab.stats.power import Plan
from ringlab.stats.components import Component, nested_components

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
        return asdict(self) | {"notes": list(self.notes)}

    @classmethod
    def from_dict(cls, doc: dict) -> LevelCalibration:
        try:
            return cls(mode=str(doc["mode"]), variance=dict(doc["variance"]), upper=dict(doc["upper"]),
                       df={k: int(v) for k, v in doc["df"].items()}, cost_s=dict(doc["cost_s"]),
                       count=int(doc["count"]), source=str(doc.get("source", "measured")),
                       notes=tuple(doc.get("notes", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataError(f"calibration levels: {e!r} in {doc!r:.200}; expected the fields of "
                            "LevelCalibration.as_dict()") from e


def _finite_or(v, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else default


#: the plan of a mode no calibration covers: per-level SDs of the log ratio of 6% (layout),
#: 6% (process) and 2% (iteration), a little above the noisiest A/A measured (a 2-vCPU Xeon
#: guest, process SD about 14% per arm, so about 5% for a round-paired ratio after its pairing),
#: and costs of 1 s a build pair, 20 ms a process pair, 40 ms an iteration pair
CAUTIOUS = LevelCalibration(
    mode="any", variance={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    upper={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    df={n: 0 for n in LEVELS}, cost_s={"layout": 1.0, "process": 0.02, "iteration": 0.04}, count=10_000_000,
    source="no calibration of this mode on this host: cautious defaults")


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


__all__ = ["CAUTIOUS", "LEVELS", "LevelCalibration", "calibrate_levels", "pair_differences"]
