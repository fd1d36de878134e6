"""``open`` and ``open_all``: what a PATH names (a run folder, an experiment folder, a results
folder) and the opened run or runs (the package docstring, ringlab/studies/explore/__init__.py,
says what each PATH gives)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ringlab.paths import expand_user
from ringlab import paths
from ringlab.errors import DataError, ParamError
from ringlab.studies.explore.opened_run import OpenedRun, user_error
from ringlab.studies.explore.runs import Runs, newest, run_dirs
from ringlab import rundir

#: what open() accepts, for error messages
ALLOWED = ("a run folder (holding raw.csv and env.json), results/<experiment> (its latest complete "
           "run, any host) or results/ (every run)")


def _resolve(path) -> Path:
    if path is None or (isinstance(path, str) and not path.strip()):
        return paths.results_dir()
    p = expand_user(path)
    if not p.is_absolute() and not p.exists() and (paths.ROOT / p).exists():
        p = paths.ROOT / p
    if p.is_file() and p.name in ("raw.csv", "env.json"):
        p = p.parent
    return p


#: files that make a folder one of ringlab's own in a results tree, though it holds no run at the
#: usual depth: a bisection (its steps are run folders), a calibration (its A/A run under runs/),
#: a fleet's job records
RINGLAB_FOLDER_FILES = ("bisect.json", "calibration.json", "fleet.json")


def _laid_out(p: Path, depth: int) -> bool:
    """True when every folder ``depth`` levels under ``p`` (hidden ones aside) is a run folder
    (raw.csv or env.json) or another folder ringlab writes (``RINGLAB_FOLDER_FILES``), and there is
    one: an experiment folder (2) or a results folder (3)."""
    if any((p / f).is_file() for f in RINGLAB_FOLDER_FILES):
        return True
    if depth == 0:
        return (p / "raw.csv").is_file() or (p / "env.json").is_file()
    found = False
    try:
        for s in p.iterdir():
            if s.name.startswith(".") or not s.is_dir():
                continue
            if not _laid_out(s, depth - 1):
                return False
            found = True
    except OSError:
        return False
    return found


def _under_results(p: Path) -> bool:
    try:
        p.absolute().relative_to(paths.results_dir().absolute())
        return True
    except ValueError:
        return False


def _classify(p: Path) -> str:
    """"run", "experiment" or "root"; a ringlab error naming ``p`` and what is allowed otherwise."""
    if (p / "raw.csv").is_file():
        return "run"
    if p.is_dir() and p.absolute() != paths.results_dir().absolute() and not _under_results(p) \
            and not (p / "env.json").is_file() and any(p.iterdir()):
        # outside the results folder only a run folder or a folder laid out as one is opened:
        # never a search through an unrelated tree (/, a home folder)
        if not (_laid_out(p, 2) or _laid_out(p, 3)):
            raise user_error(ParamError, f"parameter 'path': {p} is not a run folder, an experiment folder or "
                                         f"a results folder; allowed: {ALLOWED}")
    if p.is_dir() and run_dirs(p, 2):
        return "experiment"
    if p.is_dir() and run_dirs(p, 3):
        return "root"
    configured = p.absolute() == paths.results_dir().absolute()
    if configured or (p.is_dir() and not any(p.iterdir())):
        return "root"   # the results folder, or an empty one: no runs yet
    if not p.exists():
        raise user_error(ParamError, f"parameter 'path': {p} does not exist; allowed: {ALLOWED}")
    if (p / "env.json").is_file():
        try:
            kind = rundir.RunOutput(p).env_file.kind
        except DataError:
            kind = "run"
        raise user_error(DataError, f"{p}: env.json but no raw.csv (a '{kind}' folder holds no trials to "
                                    f"open); allowed: {ALLOWED}")
    raise user_error(ParamError, f"parameter 'path': {p} holds no run folder (raw.csv at <host>/<run-id>/ or "
                                 f"<experiment>/<host>/<run-id>/ under it); allowed: {ALLOWED}")


def open(path=None):  # noqa: A001 (ringlab.open is the public name)
    """A :class:`OpenedRun` (run folder, or an experiment folder's latest complete run) or a
    :class:`Runs` (a results folder); ``path`` default: the results folder
    (``$RINGLAB_RESULTS``, else the repository's results/).  See the module docstring."""
    p = _resolve(path)
    kind = _classify(p)
    if kind == "run":
        return OpenedRun(p)
    if kind == "root":
        return Runs.under(p)
    runs = [OpenedRun(d, (p.name, d.parent.name, d.name)) for d in run_dirs(p, 2)]
    pick = newest([r for r in runs if r.status == "complete"])
    if pick is None:
        states = ", ".join(f"{r.host}/{r.run_id}: {r.status}" for r in runs)
        raise user_error(DataError, f"{p}: no complete run to open ({states}); open one of them by its folder")
    return pick


def open_all(path=None, warmup: bool = False, failed: bool = False) -> pd.DataFrame:
    """One tidy frame of the trials of every run under ``path`` (a results folder, an
    experiment folder: all its runs, or one run folder): ``KEY_COLUMNS`` then every raw.csv
    column; warm-ups and trials that are not ok only when asked."""
    p = _resolve(path)
    kind = _classify(p)
    if kind == "run":
        runs = Runs(p.parent, [OpenedRun(p)])
    elif kind == "experiment":
        runs = Runs.measured(p, [OpenedRun(d, (p.name, d.parent.name, d.name)) for d in run_dirs(p, 2)])
    else:
        runs = Runs.under(p)
    return runs.trials(warmup=warmup, failed=failed)

