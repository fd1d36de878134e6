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
from ringlab.stats.calibration import CAUTIOUS, LevelCalibration

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


#: a host's between-run drift, per mode (``ringlab calibrate --between``): its A/A part is read
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


def aa_between(aa: dict, source: str = ""):
    """The host A/A ``Between`` (``ringlab.stats.replication.between_of_host_aa``) of drift.json's
    A/A block of one mode: from its runs' log effects and variances (``effects_log``,
    ``variances_log``) where the file keeps them; else from its summary (k, Cochran's Q from
    ``q_p``, and the runs' median within-run variance, which the combination's prediction
    interval, mu +- t(k-2) sqrt(tau^2 + se^2 + v), and its HKSJ CI, mu +- t(k-1) se, give back).
    None when neither can be read."""
    from scipy import stats as sps
    from ringlab.stats.replication import between_of_host_aa, log_ratio
    from ringlab.stats.summary import StatsError
    if not isinstance(aa, dict):
        return None
    try:
        if isinstance(aa.get("effects_log"), list) and isinstance(aa.get("variances_log"), list):
            return between_of_host_aa(aa["effects_log"], aa["variances_log"], source=source)
        k = int(aa["k"])
        q = float(sps.chi2.isf(float(aa["q_p"]), k - 1))
        level, tau = float(aa.get("level") or 0.95), float(aa["tau_pct"]) / 100
        se = (log_ratio(aa["ci_high_pct"]) - log_ratio(aa["ci_low_pct"])) / (2 * sps.t.ppf(0.5 + level / 2, k - 1))
        half = (log_ratio(aa["pi_high_pct"]) - log_ratio(aa["pi_low_pct"])) / 2
        within = (half / sps.t.ppf(0.5 + level / 2, k - 2)) ** 2 - tau ** 2 - se ** 2
        return between_of_host_aa(q=q, k=k, within_var=within, source=source)
    except (KeyError, TypeError, ValueError, StatsError):
        return None


def host_between(host: str | None, root: str | Path | None = None) -> dict:
    """Per mode ("0", "1", ...), the host's A/A between-run variance (``aa_between``) from
    drift.json (``ringlab calibrate --between``), its text naming the calibration; {} when the
    host has none.  Only the A/A part is read: a mode the file has no A/A for has none."""
    doc = find_drift(host, root)
    if doc is None:
        return {}
    out = {}
    for mode, d in doc["modes"].items():
        if not isinstance(d, dict) or "error" in d:
            continue
        b = aa_between(d.get("aa"), source=f"ringlab calibrate --between, {str(doc.get('date_utc', '?'))[:10]}")
        if b is not None:
            out[str(mode)] = b
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


def with_host_next_run(cmp, host: str | None, root: str | Path | None = None, run_dir=None,
                       metric: str | None = None, by=None):
    """A compare() frame with each row's next-run interval (``ringlab.stats.replication.
    with_next_run``), its between-run variance from, in this order: this comparison's own runs
    (``run_dir``'s earlier runs, ``ringlab.rundir.earlier``, and this one) when there are two or
    more (``between_of_runs``); the host's A/A upper bound in the row's mode (drift.json of ``root``,
    else of the checkout's results/); else none, which the row says."""
    from ringlab.rundir import earlier
    from ringlab.stats.replication import NONE, between_of_runs, log_ratio, row_se, with_next_run
    if cmp is None or not len(cmp):
        return cmp
    aa = host_between(host, root)
    if not aa and root is not None:
        aa = host_between(host)
    runs = earlier.earlier_runs(run_dir) if run_dir is not None else []
    past: dict = {}
    if runs and "baseline" in cmp.columns:
        base = str(cmp["baseline"].iloc[0])
        met = metric or (str(cmp["metric"].iloc[0]) if "metric" in cmp.columns else "ns_per_op")
        past = earlier.earlier_effects(runs, base, met, by)
    cols = earlier.config_columns(cmp)

    def between(r):
        own = past.get(earlier.comparison_key(r, cols), [])
        effects = [e for e, _ in own] + [log_ratio(r.get("delta_pct"))]
        ses = [s for _, s in own] + [row_se(r)]
        b = between_of_runs(effects, [s * s for s in ses]) if own else None
        if b is not None:
            return b
        return aa.get(str(r["mode"])) if "mode" in cmp.columns and str(r.get("mode")) in aa else NONE

    return with_next_run(cmp, between)
