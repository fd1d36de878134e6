"""A machine's noise by level and cost, from one A/A run of the layout design, and the plan it implies.

The A/A run measures two names of the same code (arms ``a`` and ``b``) over layout pairs, in
rounds (one fresh process of each arm per round) with ``repeats`` timed iterations per process.
Its per-iteration log ratio ``d = ln(b / a)``, paired by (layout, round, iteration), carries
exactly the noise an A/B of the same shape sees.  Its variance components
(``ringlab.stats.components``) are the three levels' variances; the run's own timings give the
costs: an iteration (the timed region of both arms), a process (both arms' wall time outside
the timed region) and a layout pair (two builds, measured by the caller).

``LevelCalibration.plan`` turns them, at their upper confidence bounds, into layouts x processes
x iterations (``ringlab.stats.plan.allocate``).  A mode without a calibration is planned with
``CAUTIOUS``: the components of the noisiest host measured so far, rounded up, and said so.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ringlab.errors import DataError
from ringlab.stats.plan import MAX_LAYOUTS, Level, Plan, allocate
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
#: and costs of 1 s a build pair, 20 ms a process pair, 40 ms an iteration pair
CAUTIOUS = LevelCalibration(
    mode="any", variance={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    upper={"layout": 0.06 ** 2, "process": 0.06 ** 2, "iteration": 0.02 ** 2},
    df={n: 0 for n in LEVELS}, cost_s={"layout": 1.0, "process": 0.02, "iteration": 0.04}, count=10_000_000,
    source=("no calibration of this mode on this host: a wide pilot from cautious defaults, then stages "
            "planned from the noise this run measured"))


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
    from ringlab.stats import ranktests
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


__all__ = ["CAUTIOUS", "LENGTH_TOLERANCE", "LEVELS", "LevelCalibration", "calibrate_levels", "pair_differences",
           "shortest_unbiased", "trial_lengths"]
