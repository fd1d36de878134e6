"""The sizes of the simulated noise, read from the committed runs' own fitted components.

``committed_levels`` reads, and says where each figure came from (``Levels.sources``):

* **layout level**: the median ``sigma_layout_pct`` (SD of a layout pair's log ratio) over the
  layouts-design rows of every committed compare.csv (results/**/compare.csv);
* **process (round) and iteration levels, costs**: the ``levels`` of the host's committed
  calibration.json (``ringlab calibrate``: the variance components it fitted from its own raw.csv,
  and the seconds a layout's builds, a process and a timed iteration cost), in the mode asked;
* **machine states**: the two-state fit of the same calibration.json (``states``: the gap between
  the two levels, the mean duration of each state in trials);
* **state-dependent effect**: the median |delta_fast_pct - delta_slow_pct| over the committed
  compare.csv rows that found two states.

Nothing here is a measured number of its own: a figure that cannot be read is NaN and its source
says why, and the caller refuses to simulate from it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Levels:
    """Sizes of the simulated noise, log scale (SDs of a pair's log ratio), and their sources."""
    sigma_layout: float
    sigma_process: float
    sigma_iteration: float
    state_gap: float
    durations: tuple[float, float]
    state_effect_diff: float
    cost_s: dict
    host: str
    mode: str
    sources: dict = field(default_factory=dict)

    def lines(self) -> list[str]:
        """One line per figure: its value and where it came from."""
        pct = lambda v: f"{v * 100:.2f}%"
        return [f"layout SD {pct(self.sigma_layout)}: {self.sources.get('layout')}",
                f"process (round) SD {pct(self.sigma_process)}, iteration SD {pct(self.sigma_iteration)}: "
                f"{self.sources.get('process')}",
                f"states: gap {pct(self.state_gap)}, mean durations {self.durations[0]:.1f} / "
                f"{self.durations[1]:.1f} trials (fast / slow): {self.sources.get('states')}",
                f"state-dependent effect: fast - slow {self.state_effect_diff * 100:.2f} points: "
                f"{self.sources.get('state_effect')}",
                f"costs: layout {self.cost_s.get('layout', math.nan):.3f} s, process "
                f"{self.cost_s.get('process', math.nan):.4f} s, iteration {self.cost_s.get('iteration', math.nan):.4f} s: "
                f"{self.sources.get('process')}"]

    def missing(self) -> list[str]:
        """The figures that could not be read (NaN)."""
        vals = {"layout SD": self.sigma_layout, "process SD": self.sigma_process,
                "iteration SD": self.sigma_iteration, "state gap": self.state_gap,
                "state durations": min(self.durations), "state-dependent effect": self.state_effect_diff}
        return [k for k, v in vals.items() if not (isinstance(v, float) and math.isfinite(v))]


def _compare_rows(results: Path) -> tuple[pd.DataFrame, int]:
    frames = []
    files = sorted(results.glob("**/compare.csv"))
    for f in files:
        try:
            d = pd.read_csv(f)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        d["source"] = str(f.relative_to(results))
        frames.append(d)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), len(files)


def calibration_hosts(results: Path) -> list[str]:
    """Hosts with a committed calibration.json, sorted."""
    return sorted(p.parent.name for p in (results / "calibration").glob("*/calibration.json"))


def _complete(results: Path, host: str, mode: str) -> bool:
    try:
        doc = json.loads((results / "calibration" / host / "calibration.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(((doc.get("levels") or {}).get(str(mode)) or {}).get("variance")) and \
        (doc.get("states") or {}).get("n_states") == 2


def committed_levels(results: str | Path, host: str | None = None, mode: str = "0") -> Levels:
    """The noise sizes of the committed runs under ``results`` (see the module doc); ``host``: whose
    calibration.json gives the process, iteration, state and cost figures (default: the first
    host, sorted, whose calibration has the mode's levels and found two states)."""
    results = Path(results)
    src: dict[str, str] = {}
    rows, nfiles = _compare_rows(results)
    lay = pd.to_numeric(rows.get("sigma_layout_pct", pd.Series(dtype=float)), errors="coerce")
    if len(rows) and "design" in rows.columns:
        lay = lay[rows["design"].astype(str) == "layouts"]
    lay = lay[np.isfinite(lay)]
    s_l = float(np.median(lay)) / 100 if len(lay) else math.nan
    src["layout"] = (f"median sigma_layout_pct of {len(lay)} layouts-design rows in {nfiles} committed "
                     f"compare.csv files under {results.name}/" if len(lay) else "no committed layouts-design row")
    two = rows[pd.to_numeric(rows.get("states", pd.Series(dtype=float)), errors="coerce") == 2] if len(rows) else rows
    diff = (pd.to_numeric(two.get("delta_fast_pct"), errors="coerce")
            - pd.to_numeric(two.get("delta_slow_pct"), errors="coerce")).abs().dropna() if len(two) else pd.Series([], dtype=float)
    d_eff = float(np.median(diff)) / 100 if len(diff) else math.nan
    src["state_effect"] = (f"median |delta_fast_pct - delta_slow_pct| of {len(diff)} committed compare.csv rows "
                           f"with two states" if len(diff) else "no committed row found two states")
    hosts = calibration_hosts(results)
    if host not in hosts:
        host = next((h for h in hosts if _complete(results, h, mode)), hosts[0] if hosts else None)
    s_p = s_i = gap = math.nan
    dur = (math.nan, math.nan)
    cost: dict = {}
    if host is None:
        src["process"] = src["states"] = "no committed calibration.json"
    else:
        path = results / "calibration" / host / "calibration.json"
        doc = json.loads(path.read_text())
        rel = path.relative_to(results)
        lv = (doc.get("levels") or {}).get(str(mode)) or {}
        var = lv.get("variance") or {}
        s_p = math.sqrt(float(var["process"])) if "process" in var else math.nan
        s_i = math.sqrt(float(var["iteration"])) if "iteration" in var else math.nan
        cost = {k: float(v) for k, v in (lv.get("cost_s") or {}).items()}
        src["process"] = (f"{rel} levels[{mode}] (fitted variance components of calibration run "
                          f"{doc.get('run_id')})" if var else f"{rel} has no levels for mode {mode}")
        st = doc.get("states") or {}
        if st.get("n_states") == 2:
            gap = float(st["levels"][1]) - float(st["levels"][0])
            dur = (float(st["mean_duration"][0]), float(st["mean_duration"][1]))
            src["states"] = f"{rel} states (two-state fit of run {doc.get('run_id')})"
        else:
            src["states"] = f"{rel}: its fit found no two states"
    return Levels(sigma_layout=s_l, sigma_process=s_p, sigma_iteration=s_i, state_gap=gap, durations=dur,
                  state_effect_diff=d_eff, cost_s=cost, host=str(host), mode=str(mode), sources=src)
