"""Where a machine's calibration.json lives and how planning loads it.

``ringlab calibrate`` writes ``results/calibration/<host>/calibration.json``
(``ringlab.studies.calibration``); the planners in ``ringlab.stats`` take it as data and open
no file, so the callers load it here.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ringlab import paths
from ringlab.errors import DataError
from ringlab.stats.levels import CAUTIOUS, LevelCalibration

FILE_NAME = "calibration.json"


def calibration_dir(host: str, root: str | Path | None = None) -> Path:
    """``results/calibration/<host>/`` (``root`` replaces results/)."""
    return Path(root if root is not None else paths.results_dir()) / "calibration" / host


def find_calibration(host: str | None, root: str | Path | None = None) -> dict | None:
    """This host's calibration.json as a dict (with its ``path``), or None when there is none (or
    it cannot be read as one: planning then falls back to its behaviour without a calibration)."""
    if not host:
        return None
    f = calibration_dir(str(host), root) / FILE_NAME
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not _finite(doc.get("sigma_layout")) or not _finite(doc.get("round_sd")):
        return None
    doc["path"] = str(f)
    return doc


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def level_calibration(host: str | None, mode, root: str | Path | None = None) -> LevelCalibration:
    """The host's noise by level and cost in ``mode`` (calibration.json ``levels``), or
    ``CAUTIOUS`` (whose ``source`` says why) when the host has none for that mode."""
    return _level_of(find_calibration(host, root), mode)


def level_calibrations(host: str | None, modes, root: str | Path | None = None) -> dict[str, LevelCalibration]:
    """{mode as text: ``level_calibration``} of each of ``modes``, calibration.json read once."""
    doc = find_calibration(host, root)
    return {str(m): _level_of(doc, m) for m in modes}


def _level_of(doc: dict | None, mode) -> LevelCalibration:
    lv = ((doc or {}).get("levels") or {}).get(str(mode))
    if not isinstance(lv, dict) or "error" in lv:
        return CAUTIOUS
    try:
        return LevelCalibration.from_dict(lv)
    except DataError:
        return CAUTIOUS


def noise_floor(host: str | None, root: str | Path | None = None) -> dict | None:
    """The host's A/A bound from results/calibration/<host>/calibration.json: ``bound_pct`` (the
    largest |effect| the A/A's CI allows, in percent), ``sigma_layout_pct``, ``layouts``,
    ``run_id``, ``path``; None without a readable calibration."""
    doc = find_calibration(host, root)
    try:
        lo, hi = (float(v) for v in doc["aa_ci"][:2])
    except (ValueError, KeyError, TypeError):
        return None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return {"bound_pct": max(abs(math.expm1(lo)), abs(math.expm1(hi))) * 100,
            "sigma_layout_pct": float(doc.get("sigma_layout", math.nan)) * 100, "layouts": doc.get("layouts"),
            "run_id": str(doc.get("run_id") or "?"), "path": doc.get("path")}


#: a host's between-run drift, per mode (``ringlab calibrate --between``)
DRIFT_FILE = "drift.json"


def find_drift(host: str | None, root: str | Path | None = None) -> dict | None:
    """This host's drift.json as a dict (with its ``path``), or None when there is none readable."""
    if not host:
        return None
    f = calibration_dir(str(host), root) / DRIFT_FILE
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("modes"), dict):
        return None
    doc["path"] = str(f)
    return doc


def host_drifts(host: str | None, root: str | Path | None = None) -> dict:
    """Per mode ("0", "1", ...), the host's between-run model (``ringlab.stats.replication.Drift``)
    from drift.json, its source naming the measurement, and under "*" the widest of them for the
    modes it did not measure (``widest_drift``); {} when the host has none."""
    from ringlab.stats.replication import Drift, widest_drift
    from ringlab.stats.summary import StatsError
    doc = find_drift(host, root)
    if doc is None:
        return {}
    out = {}
    for mode, d in doc["modes"].items():
        if not isinstance(d, dict) or "error" in d:
            continue
        src = (f"drift calibrated on this host {doc.get('date_utc', '?')[:10]}: {d.get('runs', '?')} runs, "
               f"{float(doc.get('span_min') or math.nan):.0f} min")
        try:
            out[str(mode)] = Drift.from_dict(d, source=src)
        except StatsError:
            continue
    if out and "*" not in out:
        out["*"] = widest_drift(out)
    return out


def results_root_of(run_dir) -> Path | None:
    """results/ of a run folder results/<experiment>/<host>/<run-id> when it holds calibrations
    (None: the checkout's results/ is the one to read)."""
    p = Path(run_dir).resolve()
    root = p.parents[2] if len(p.parents) > 2 else None
    return root if root is not None and (root / "calibration").is_dir() else None


def frame_host(df: pd.DataFrame) -> str | None:
    """The one host a raw.csv frame was measured on (None with several or none)."""
    hosts = df["host"].dropna().astype(str).unique() if "host" in df.columns else []
    return str(hosts[0]) if len(hosts) == 1 else None


def run_host(df: pd.DataFrame, env: dict) -> str | None:
    """The host a run was measured on: env.json's ``host`` (older files: ``hostname``), else
    raw.csv's one ``host``.  Every report of a run (summary.md, mail.txt, the notebooks) names
    the host by this rule."""
    h = env.get("host") or env.get("hostname")
    return str(h) if h else frame_host(df)


def run_noise_floor(host: str | None, run_dir=None) -> dict | None:
    """The noise floor every report of a run quotes: the host's calibration in the results folder
    the run lies in (results/<experiment>/<host>/<run-id>), else the checkout's."""
    root = results_root_of(run_dir) if run_dir is not None else None
    return (noise_floor(host, root) if root is not None else None) or noise_floor(host)


def with_host_drift(cmp, host: str | None, root: str | Path | None = None):
    """A compare() frame with its next-run intervals from the host's drift (``with_next_run``)."""
    from ringlab.stats.replication import with_next_run
    if cmp is None or not len(cmp):
        return cmp
    drifts = host_drifts(host, root)
    if not drifts and root is not None:
        drifts = host_drifts(host)
    return with_next_run(cmp, drifts)
