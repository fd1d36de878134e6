"""`ringlab calibrate`: measure this machine's layout spread and states, store them per host.

The measurement is an A/A run of the layout design: one kernel ``ptr_ring.h`` (the newest
found by ``ringlab env --headers``, or ``header``) built under two arm names, ``a`` and ``b``
(``kernel_headers=a=PATH,b=PATH``), each arm with its own ``LAYOUTS`` random layouts, mode 0,
``ROUNDS_PER_LAYOUT`` rounds per layout pair (with 3-4 rounds a pair, one disturbed trial moves
that pair's estimate by several points and shows up as layout spread).  The run goes through ``ringlab.run.run_experiment`` like any other, into
``<out>/runs/<UTC date>/``; ``ringlab.stats.calibration.calibrate_frame`` analyses it, and
``<out>/calibration.json`` (written atomically) records the result with the run id, the date,
the host and the ringlab commit.  ``<out>`` is ``results/calibration/<host>/`` unless given.

ptr_ring refuses a variant listed twice, so the builtin rings cannot serve as the A/A's two
arms: without a kernel header there is no calibration (a ParamError, exit 2).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from ringlab import paths
from ringlab.errors import ParamError, RunnerError
from ringlab.experiments.base import get as get_experiment
from ringlab.rundir import atomic_write_json, read_run, utc_now
from ringlab.run import run_experiment
from ringlab.run.prepare import new_run_id
from ringlab.sources import kernel_header
from ringlab.rundir import calibration as _cal_files
from ringlab.stats import calibration as _cal
from ringlab.stats.summary import StatsError
from ringlab.system.checkout import git_info
from ringlab.system.envinfo import host_id

LAYOUTS = 8
ROUNDS_PER_LAYOUT = 30
ARMS = ("a", "b")
#: parameters the calibration sets itself (``-p`` may not override them)
FIXED = ("variants", "kernel_headers", "layouts")


def layouts_supported() -> bool:
    """Whether ptr_ring has the ``layouts`` parameter in this checkout."""
    return "layouts" in get_experiment("ptr_ring").all_params()


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
    params: dict[str, Any] = {"modes": "0", "trials": str(LAYOUTS * ROUNDS_PER_LAYOUT), "profile": "quick"}
    params.update(extra)
    params.update(variants=",".join(ARMS), kernel_headers=",".join(f"{a}={header}" for a in ARMS),
                  layouts=str(LAYOUTS))
    return params


def _shown(run_dir: Path) -> str:
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
           "run_id": run_id, "ringlab_commit": commit, "run_dir": _shown(run_dir), **analysis}
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in doc.items()}


def store(out: Path, analysis: dict, run_id: str, run_dir: Path, host: str) -> Path:
    """Write ``out/calibration.json`` atomically; returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    doc = calibration_doc(analysis, run_id, run_dir, host, commit=git_info().get("commit"))
    doc["sigma_layout_ci"] = [None if v is None or not math.isfinite(v) else v for v in doc["sigma_layout_ci"]]
    path = out / _cal_files.FILE_NAME
    atomic_write_json(path, doc)
    return path


def analyse_run(run_dir: Path, metric: str = "ns_per_op") -> dict:
    """The calibration of an A/A run folder (DataError / ParamError when it cannot be read as one)."""
    df, env = read_run(run_dir)
    try:
        return _cal.calibrate_frame(df, metric, ARMS if set(ARMS) <= set(map(str, df["variant"])) else None)
    except StatsError as e:
        raise ParamError(f"{run_dir / 'raw.csv'}: {e}") from None


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
    res = run_experiment("ptr_ring", aa_params(src, params), run_dir, build=build, log=log)
    if res.exit_code:
        raise RunnerError(f"{res.raw_csv}: the A/A run ended {res.status} ({res.status_reason}); no calibration")
    analysis = analyse_run(res.out_dir)
    path = store(out, analysis, res.run_id, res.out_dir, host)
    return path, json.loads(path.read_text())


def calibrate_existing(run_dir: Path, out: Path | None = None) -> tuple[Path, dict]:
    """Store the calibration of an A/A run folder already measured (``ringlab calibrate --from``)."""
    run_dir = Path(run_dir)
    host = host_id()
    out = Path(out) if out is not None else _cal_files.calibration_dir(host)
    analysis = analyse_run(run_dir)
    _, env = read_run(run_dir)
    run_id = (env.get("run_id") if env is not None else None) or run_dir.name
    path = store(out, analysis, str(run_id), run_dir, host)
    return path, json.loads(path.read_text())
