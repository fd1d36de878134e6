"""`ringlab calibrate`: measure this machine's layout spread and states, store them per host.

The measurement is an A/A run of the layout design: one kernel ``ptr_ring.h`` (the newest
found by ``ringlab env --headers``, or ``header``) built under two arm names, ``a`` and ``b``
(``kernel_headers=a=PATH,b=PATH``), each arm with its own ``LAYOUTS`` random layouts, mode 0,
``ROUNDS_PER_LAYOUT`` rounds per layout pair (with 3-4 rounds a pair, one disturbed trial moves
that pair's estimate by several points and shows up as layout spread), in each of ``MODES`` with
``REPEATS`` timed iterations per process.  The layout spread and states are those of mode 0 (one
value per process: the median of its iterations); ``levels`` holds, per mode, the variance of the
A/A log ratio at each level (layout, process, iteration) with its upper bound and the seconds
each level costs (``ringlab.stats.calibration``).  A layout's cost is measured as the run's time
outside its trials divided by the binaries it built.  The run goes through ``ringlab.run.run_experiment`` like any other, into
``<out>/runs/<UTC date>/``; ``ringlab.stats.calibration.calibrate_frame`` analyses it, and
``<out>/calibration.json`` (written atomically) records the result with the run id, the date,
the host and the ringlab commit.  ``<out>`` is ``results/calibration/<host>/`` unless given.

ptr_ring refuses a variant listed twice, so the builtin rings cannot serve as the A/A's two
arms: without a kernel header there is no calibration (a ParamError, exit 2).
"""
from __future__ import annotations

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from ringlab import paths
from ringlab.catalog import RING_EXPERIMENT
from ringlab.errors import DataError, ParamError, RunnerError
from ringlab.experiments.base import get as get_experiment
from ringlab.rundir import RunEnv, RunOutput, atomic_write_json, utc_now
from ringlab.run import run_experiment
from ringlab.run.prepare import new_run_id
from ringlab.sources import kernel_header
from ringlab.rundir import calibration as _cal_files
from ringlab.stats import calibration as _cal
from ringlab.stats.calibration import CAUTIOUS, calibrate_levels, shortest_unbiased, trial_lengths
from ringlab.stats.summary import measurements
from ringlab.stats.summary import StatsError
from ringlab.system.checkout import git_info
from ringlab.system.envinfo import host_id

LAYOUTS = 8
ROUNDS_PER_LAYOUT = 16
MODES = "0,1,2"
REPEATS = 3
ARMS = ("a", "b")
#: the trial-length probe: fresh processes of one build of arm ``a`` at the A/A's count divided by
#: each of these, LENGTH_TRIALS each (a run per count, longest first)
LENGTH_DIVISORS = (1, 4, 16, 64)
LENGTH_TRIALS = 16
#: parameters the calibration sets itself (``-p`` may not override them)
FIXED = ("variants", "kernel_headers", "layouts")


def layouts_supported() -> bool:
    """Whether ptr_ring has the ``layouts`` parameter in this checkout."""
    return "layouts" in get_experiment(RING_EXPERIMENT).all_params()


def pick_header(header: str | None = None) -> Path:
    """The ptr_ring.h source of the A/A: ``header``, else the newest tree ``ringlab env --headers`` finds."""
    if header:
        return Path(header)
    trees = kernel_header.header_trees()
    if not trees:
        raise ParamError("header: no kernel ptr_ring.h found by `ringlab env --headers` (install a "
                         "linux-headers package) and ptr_ring allows no second name for a builtin ring; "
                         "allowed: --header PATH (a ptr_ring.h, kernel tree or headers package)")
    return trees[0]


def aa_params(header: Path, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The A/A's ptr_ring parameters: ``extra`` (``-p``) over the calibration's defaults."""
    extra = dict(extra or {})
    fixed = sorted(set(extra) & set(FIXED))
    if fixed:
        raise ParamError(f"parameter '{fixed[0]}': set by the calibration itself; allowed: any other "
                         "ptr_ring parameter")
    params: dict[str, Any] = {"modes": MODES, "repeats": str(REPEATS), "trials": str(LAYOUTS * ROUNDS_PER_LAYOUT),
                              "profile": "quick"}
    params.update(extra)
    params.update(variants=",".join(ARMS), kernel_headers=",".join(f"{a}={header}" for a in ARMS),
                  layouts=str(LAYOUTS))
    return params


def shown_path(run_dir: Path) -> str:
    """The run folder relative to the results folder when it is inside it (committed files name no
    absolute path of the machine that made them), else as given."""
    try:
        return str(Path(run_dir).resolve().relative_to(paths.results_dir().resolve()))
    except ValueError:
        return str(run_dir)


def calibration_doc(analysis: dict, run_id: str, run_dir: Path, host: str, date_utc: str | None = None,
                    commit: str | None = None) -> dict:
    """calibration.json: the analysis plus where and when it was measured."""
    doc = {"calibration_version": _cal.CALIBRATION_VERSION, "host": host, "date_utc": date_utc or utc_now(),
           "run_id": run_id, "ringlab_commit": commit, "run_dir": shown_path(run_dir), **analysis}
    return _json_safe(doc)


def _json_safe(v):
    """NaN and infinities as null (JSON has neither), through nested fields."""
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def levels_lines(doc: dict) -> list[str]:
    """One line per mode of the calibration's levels: the SD of the A/A log ratio at each level
    (upper bound) and what one unit of it costs."""
    out = []
    for mode, lv in sorted((doc.get("levels") or {}).items()):
        if "error" in lv:
            out.append(f"  mode {mode}:       no levels ({lv['error']})")
            continue
        parts = []
        for name in ("layout", "process", "iteration"):
            up, cost = (lv.get("upper") or {}).get(name), (lv.get("cost_s") or {}).get(name)
            sd = "n/a" if up is None else f"<{math.sqrt(up) * 100:.2f}%"
            parts.append(f"{name} {sd} {'' if cost is None else f'{cost * 1000:.1f} ms'}".rstrip())
        if lv.get("min_count"):
            parts.append(f"shortest unbiased trial {lv['min_count']:,} ops")
        out.append(f"  mode {mode}:       " + "; ".join(parts))
    return out


def store(out: Path, analysis: dict, run_id: str, run_dir: Path, host: str) -> Path:
    """Write ``out/calibration.json`` atomically; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    doc = calibration_doc(analysis, run_id, run_dir, host, commit=git_info().get("commit"))
    doc["sigma_layout_ci"] = [None if v is None or not math.isfinite(v) else v for v in doc["sigma_layout_ci"]]
    path = out / _cal_files.FILE_NAME
    atomic_write_json(path, doc)
    return path


def _per_process(meas, metric: str):
    """Mode 0's rows, one per process (the median of its iterations): the layout-spread analysis."""
    if "mode" in meas.columns:
        modes = sorted(meas["mode"].dropna().unique(), key=str)
        meas = meas[meas["mode"] == modes[0]] if modes else meas
    keys = [c for c in ("run_id", "variant", "layout", "round", "trial") if c in meas.columns]
    if "iteration" not in meas.columns or meas.groupby(keys).size().max() <= 1:
        return meas
    first = meas.groupby(keys, sort=False, as_index=False).first()
    first[metric] = meas.groupby(keys, sort=False)[metric].median().to_numpy()
    return first


def levels_of(meas, metric: str, build_s: float) -> dict[str, dict]:
    """Per mode, the level calibration of the A/A's measured rows (or why there is none)."""
    out: dict[str, dict] = {}
    note = None
    if not (isinstance(build_s, float) and math.isfinite(build_s)):
        build_s, note = CAUTIOUS.cost_s["layout"] / 2, "build cost not measured: the cautious default"
    groups = meas.groupby("mode", sort=True) if "mode" in meas.columns else [("0", meas)]
    for mode, sub in groups:
        try:
            lc = calibrate_levels(sub, ARMS[0], ARMS[1], metric, mode, build_s)
        except DataError as e:
            out[str(mode)] = {"mode": str(mode), "error": str(e)}
            continue
        doc = lc.as_dict()
        if note:
            doc["notes"].append(note)
        out[str(mode)] = doc
    return out


def probe_lengths(header: Path, params: dict[str, Any], out: Path, log: Callable[[str], None] | None = None,
                  build: bool = True) -> dict[str, list[dict]]:
    """The trial-length probe: per mode, ``ringlab.stats.calibration.trial_lengths`` of fresh processes
    of arm ``a`` (one build, layouts 1) at the A/A's count divided by each of ``LENGTH_DIVISORS``;
    each count is a run folder ``out/count-N``.  A count that fails to run is left out, and says so."""
    import pandas as pd
    count = int(params.get("count") or 0) or int(CAUTIOUS.count)
    frames = []
    for div in LENGTH_DIVISORS:
        c = max(1, count // div)
        p = {k: v for k, v in params.items() if k not in ("repeats", "trials", "warmup")}
        p.update(variants=ARMS[0], kernel_headers=f"{ARMS[0]}={header}", layouts="1", count=str(c),
                 trials=str(LENGTH_TRIALS), warmup="1", repeats="1", counters="false")
        res = run_experiment(RING_EXPERIMENT, p, out / f"count-{c}", build=build, log=log)
        if res.exit_code:
            if log:
                log(f"calibrate: the {c}-op trials ended {res.status} ({res.status_reason}); left out")
            continue
        meas, _ = measurements(RunOutput(res.out_dir).read()[0], "ns_per_op")
        frames.append(meas)
    if not frames:
        return {}
    allm = pd.concat(frames, ignore_index=True)
    groups = allm.groupby("mode", sort=True) if "mode" in allm.columns else [("0", allm)]
    return {str(m): trial_lengths(sub, "ns_per_op") for m, sub in groups}


def add_lengths(analysis: dict, lengths: dict[str, list[dict]]) -> dict:
    """``analysis`` with each mode's levels holding its probe (``lengths``) and ``min_count``."""
    for mode, rows in lengths.items():
        lv = (analysis.get("levels") or {}).get(mode)
        if isinstance(lv, dict) and "error" not in lv:
            lv["lengths"] = rows
            lv["min_count"] = shortest_unbiased(rows)
    return analysis


def build_seconds(total_s: float, env: RunEnv | None) -> float:
    """Seconds per layout build the run spent outside its trials (building), from the run's wall
    time and env.json's start and end of the trials.  A binary of layout copies
    (ringlab.build.layouts.LayoutCopies) counts as its number of copies."""
    try:
        env = RunEnv.of(env) if isinstance(env, dict) else env
        start = datetime.fromisoformat(str(env.started_utc).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(env.ended_utc).replace("Z", "+00:00"))
        built = env.build.binaries
        n = 0
        for name in env.binaries_used:
            lay = (built.get(name) or {}).get("layout") if isinstance(built, dict) else None
            n += len(lay["copies"]) if isinstance(lay, dict) and isinstance(lay.get("copies"), list) else 1
    except (KeyError, TypeError, ValueError, AttributeError):
        return math.nan
    if n < 1:
        return math.nan
    return max(0.0, total_s - (end - start).total_seconds()) / n


def analyse_run(run_dir: Path, metric: str = "ns_per_op", build_s: float = math.nan) -> dict:
    """The calibration of an A/A run folder (DataError / ParamError when it cannot be read as one)."""
    df, env = RunOutput(run_dir).read()
    arms = ARMS if set(ARMS) <= set(map(str, df["variant"])) else None
    try:
        meas, _ = measurements(df, metric)
        analysis = _cal.calibrate_frame(_per_process(meas, metric), metric, arms)
    except StatsError as e:
        raise ParamError(f"{run_dir / 'raw.csv'}: {e}") from None
    if arms is not None:
        analysis["levels"] = levels_of(meas, metric, build_s)
    return analysis


def calibrate(out: Path | None = None, params: dict[str, Any] | None = None, header: str | None = None,
              build: bool = True, log: Callable[[str], None] | None = None) -> tuple[Path, dict]:
    """Run the A/A and store its calibration; returns (calibration.json path, its contents)."""
    if not layouts_supported():
        raise ParamError("layouts: ptr_ring has no 'layouts' parameter in this checkout; the calibration "
                         "needs ptr_ring's layout design (-p layouts K)")
    host = host_id()
    out = Path(out) if out is not None else _cal_files.calibration_dir(host)
    src = pick_header(header)
    run_dir = out / "runs" / new_run_id()     # the folder is named by its run id
    t0 = time.monotonic()
    res = run_experiment(RING_EXPERIMENT, aa_params(src, params), run_dir, build=build, log=log)
    total_s = time.monotonic() - t0
    if res.exit_code:
        raise RunnerError(f"{res.raw_csv}: the A/A run ended {res.status} ({res.status_reason}); no calibration")
    build_s = build_seconds(total_s, RunOutput(res.out_dir).env) if build else math.nan
    analysis = analyse_run(res.out_dir, build_s=build_s)
    aa = dict(aa_params(src, params), count=str(RunOutput(res.out_dir).env.parameters.get("count") or ""))
    analysis = add_lengths(analysis, probe_lengths(src, aa, out / "runs" / f"{res.run_id}-lengths", log, build))
    path = store(out, analysis, res.run_id, res.out_dir, host)
    return path, json.loads(path.read_text())


def calibrate_existing(run_dir: Path, out: Path | None = None) -> tuple[Path, dict]:
    """Store the calibration of an A/A run folder already measured (``ringlab calibrate --from``)."""
    run_dir = Path(run_dir)
    host = host_id()
    out = Path(out) if out is not None else _cal_files.calibration_dir(host)
    analysis = analyse_run(run_dir)
    _, env = RunOutput(run_dir).read()
    run_id = (env.run_id if env is not None else None) or run_dir.name
    path = store(out, analysis, str(run_id), run_dir, host)
    return path, json.loads(path.read_text())
