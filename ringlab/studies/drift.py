"""`ringlab calibrate --between N`: how an A/B ratio drifts between runs on this host.

A run's CI holds its own noise.  Between runs the machine's state changes, and with it the
noise and the size of an effect.  This measures that level: ``N`` sessions (``ringlab.studies.
sessions``), ``gap`` seconds apart, each a full ptr_ring run of three arms built from one
``ptr_ring.h``:

* ``a`` and ``b``: the header under two names (an A/A: no effect, so every run-to-run move of
  its estimate is drift);
* ``d``: the header with ``builtin:flush-spin:N`` (N iterations of a loop after each batch flush,
  about +7.7% instructions per operation in mode 0: an effect of known sign whose size a run
  measures).

Per mode the sessions' estimates of a/b and of a/d are combined by random effects
(``ringlab.stats.replication.combine``).  The next-run intervals of the host's runs use the A/A
part only: its runs' log effects and variances are kept, and ``between_of_host_aa`` takes the
one-sided upper confidence bound of its tau^2 (Q-profile).  The A/B's combination is kept beside
it for reference (how far a known effect moved between runs); no interval scales with it.
``results/calibration/<host>/drift.json`` (atomic) records both with the sessions, their span in
minutes, the run folders, the host and the ringlab commit.  Each report of a run on this host
reads it for its next-run intervals.  Sessions of one invocation span minutes, not hours: the
file says so, and a longer ``--gap`` spreads them further.
"""
from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from ringlab.catalog import RING_EXPERIMENT
from ringlab.errors import ParamError
from ringlab.rundir import atomic_write_json, utc_now
from ringlab.rundir import calibration as _cal_files
from ringlab.run.prepare import new_run_id
from ringlab.sources import builtin_patches
from ringlab.stats.replication import RandomEffects, between_of_host_aa, combine
from ringlab.stats.summary import StatsError
from ringlab.studies import sessions as _sessions
from ringlab.system.checkout import git_info
from ringlab.system.envinfo import host_id

#: sessions of one calibration (the A/A's tau has N - 1 degrees of freedom)
SESSIONS = 5
#: the A/B arm's extra instructions per operation, in percent of a Debian 6.1 header's in mode 0
EFFECT_PCT = 7.7
#: instructions per operation of Debian 6.1's ptr_ring.h in mode 0 (docs/fidelity.md): sizes the spin
BASE_PER_OP = 43.5
ARMS = ("a", "b", "d")
#: each session: a fixed design (no staged stopping), so every session measures alike
SESSION_PARAMS = {"modes": "0,1", "trials": "64", "layouts": "8", "profile": "quick", "target_ci": "0",
                  "budget": "0", "warmup": "1"}
#: parameters the drift calibration sets itself
FIXED = ("variants", "kernel_headers", "baseline")


def session_params(header: Path, patch: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    extra = dict(extra or {})
    fixed = sorted(set(extra) & set(FIXED))
    if fixed:
        raise ParamError(f"parameter '{fixed[0]}': set by the drift calibration itself; allowed: any other "
                         "ptr_ring parameter")
    p: dict[str, Any] = dict(SESSION_PARAMS)
    p.update(extra)
    p.update(variants=",".join(ARMS), baseline=ARMS[0],
             kernel_headers=f"a={header},b={header},d={header}+{patch}")
    return p


def _span_min(records: list[dict]) -> float:
    starts = []
    for r in records:
        try:
            from ringlab.rundir import RunOutput
            env = RunOutput(r["dir"]).env
            starts.append(datetime.fromisoformat(str(env.started_utc).replace("Z", "+00:00")))
            starts.append(datetime.fromisoformat(str(env.ended_utc).replace("Z", "+00:00")))
        except (KeyError, TypeError, ValueError, AttributeError, OSError):
            continue
    return (max(starts) - min(starts)).total_seconds() / 60 if len(starts) >= 2 else math.nan


def _re(rows, cand: str, mode: str) -> RandomEffects | None:
    sub = rows[(rows["candidate"] == cand) & (rows["config"].str.contains(f"mode={mode}(?:,|$)", regex=True))]
    sub = sub[sub["se"].notna() & (sub["se"] > 0)]
    try:
        return combine(sub["log_delta"], sub["se"] ** 2)
    except StatsError:
        return None


def _aa_block(re: RandomEffects) -> dict:
    """The A/A's combination with its runs' log effects and variances (what the upper bound of
    ``between_of_host_aa`` is computed from)."""
    return {**re.as_dict(), "effects_log": list(re.estimates), "variances_log": list(re.variances)}


def analyse(run_dirs: list[Path]) -> dict:
    """Per mode, the sessions in ``run_dirs``: the A/A's combination (its tau and the upper bound
    the next-run intervals use) and the A/B's for reference, or why there is none."""
    rows = _sessions.run_rows(run_dirs, ARMS[0])
    modes: dict[str, dict] = {}
    if not len(rows):
        return {"modes": {}, "error": "no session could be compared"}
    found = sorted({part.split("=", 1)[1] for c in rows["config"] for part in c.split(",") if part.startswith("mode=")})
    for mode in found or ["0"]:
        aa, ab = _re(rows, "b", mode), _re(rows, "d", mode)
        if aa is None:
            modes[mode] = {"mode": mode, "error": "fewer than two A/A runs with a CI"}
            continue
        upper = between_of_host_aa(aa.estimates, aa.variances)
        modes[mode] = {"mode": mode, "tau_pct": aa.tau * 100, "tau_upper_pct": upper.tau * 100,
                       "runs": aa.k, "aa": _aa_block(aa), "ab": ab.as_dict() if ab else None}
    return {"modes": modes}


def measure(out: Path | None = None, sessions: int = SESSIONS, gap_s: float = 0.0, header: str | None = None,
            params: dict[str, Any] | None = None, build: bool = True,
            log: Callable[[str], None] | None = None) -> tuple[Path, dict]:
    """Run the sessions and store drift.json; returns (its path, its contents)."""
    from ringlab.studies.calibration import pick_header
    _sessions.check_sessions(sessions, gap_s)
    host = host_id()
    out = Path(out) if out is not None else _cal_files.calibration_dir(host)
    src = pick_header(header)
    from ringlab.sources import patches
    base = patches.base_header_file(str(src))
    spins = builtin_patches.spins_for(BASE_PER_OP * EFFECT_PCT / 100, name="flush-spin")
    series = out / "between" / new_run_id()
    series.mkdir(parents=True, exist_ok=True)
    patch = series / f"flush-spin-{spins}.patch"
    builtin_patches.write_builtin(f"builtin:flush-spin:{spins}", base, patch)
    records = _sessions.run_sessions(RING_EXPERIMENT, session_params(src, patch, params), sessions, series, gap_s,
                                     build=build, log=log)
    done = [r["dir"] for r in records if r["status"] == "complete"]
    if len(done) < 2:
        raise ParamError(f"{series}: {len(done)} of {sessions} sessions completed; the drift needs 2 or more")
    doc = {"host": host, "date_utc": utc_now(), "ringlab_commit": git_info().get("commit"),
           "sessions": len(done), "gap_s": gap_s, "span_min": _span_min(records),
           "series_dir": shown_path(series), "arms": {"a": str(src), "b": str(src), "d": f"builtin:flush-spin:{spins}"},
           "note": ("sessions of one invocation: drift over their span; runs hours apart can drift more "
                    "(a longer --gap spreads them)"), **analyse(done)}
    path = out / _cal_files.DRIFT_FILE
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, _json_safe(doc))
    return path, json.loads(path.read_text())


def shown_path(p: Path) -> str:
    from ringlab.studies.calibration import shown_path as shown
    return shown(p)


def _json_safe(v):
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Path):
        return str(v)
    return v


def lines(doc: dict) -> list[str]:
    """One line per mode: the A/A's tau and the upper bound the next-run intervals use; the A/B's
    spread for reference."""
    from ringlab.rundir.calibration import aa_between
    out = [f"drift over {doc.get('sessions')} sessions ({doc.get('span_min') or float('nan'):.0f} min):"]
    for mode, d in sorted((doc.get("modes") or {}).items()):
        if "error" in d:
            out.append(f"  mode {mode}: no drift ({d['error']})")
            continue
        aa, ab = d.get("aa") or {}, d.get("ab") or {}
        b = aa_between(aa)
        bound = f"{b.tau * 100:.2f} points ({b.text})" if b is not None else "none"
        ab_txt = (f"; for reference, the known A/B {ab.get('estimate_pct', math.nan):+.2f}%: tau "
                  f"{ab.get('tau_pct', math.nan):.2f} points, I² {ab.get('i2', math.nan):.0%}") if ab else ""
        out.append(f"  mode {mode}: A/A tau {aa.get('tau_pct', math.nan):.2f} points (I² {aa.get('i2', math.nan):.0%}), "
                   f"the next-run intervals' upper bound {bound}{ab_txt}")
    return out
