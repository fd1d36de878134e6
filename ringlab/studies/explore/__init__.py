"""Interactive analysis: open a run, an experiment's latest run, or every run, in a notebook.

::

    import ringlab
    run = ringlab.open("results/ptr-ring-reorder")  # its latest complete run, any host
    run                                             # a card: experiment, host, profile, status, verdicts
    run.raw.query("mode == 1")                      # measured trials: no warm-ups, no failures
    run.compare(baseline="prebatch")                # the paired analysis against another baseline
    run.figure("box")                               # a report figure, drawn in a scratch folder
    trials = ringlab.open_all("results/")           # one tidy frame: every run, every host

``open(PATH)`` takes

* a run folder (it holds raw.csv and env.json): that run, a :class:`Run`;
* ``results/<experiment>``: its **latest complete run**, any host and any profile: of the
  runs whose status is ``complete``, the one whose run id (it begins with the UTC time the
  run started) sorts last, ties broken by host name; a :class:`Run`;
* ``results/`` (a folder of ``<experiment>/<host>/<run-id>/`` run folders; the configured
  results folder or an empty folder count too, even without runs): every run, a :class:`Runs`.

A relative PATH that does not exist from the working directory is looked up from the
repository root, so ``open("results/...")`` works from notebooks/ too.

``open_all(PATH)`` is one tidy frame of the measured trials of every run under PATH (every
run of an experiment folder, not only the latest): ``run`` (``<experiment>/<host>/<run-id>``,
the folder), ``results_experiment`` (the results folder's experiment, as ``open`` takes it),
``profile``, ``run_status``, then every raw.csv column as written (its ``run_id``,
``experiment`` -- ringlab run's name, e.g. ptr_ring -- and ``host``; filled from env.json and
the folder where an older raw.csv lacks them).

Nothing here parses a file: runs are read through :class:`ringlab.rundir.Run`, the read model
of a run folder; tables and figures are the :class:`ringlab.report.Report`
object's, numbers come from :mod:`ringlab.stats`.  The report writes files (summary.md,
figures/), so it is built on a copy of raw.csv and env.json in a scratch folder
(``$RINGLAB_SCRATCH/open/...``, or a temporary folder where that cannot be written):
opening a run and drawing its figures never writes into the run folder, committed or not.

Files: ``run.py`` (:class:`Run`, :class:`FigureFile`), ``runs.py`` (:class:`Runs`, finding run
folders), ``record.py`` (the 95-explore notebook's own run folder); this module resolves PATH.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ringlab.paths import expand_user
from ringlab import paths
from ringlab.errors import DataError, ParamError
from ringlab.studies.explore.record import record
from ringlab.studies.explore.run import FigureFile, Run, user_error
from ringlab.studies.explore.runs import KEY_COLUMNS, Runs, newest, run_dirs
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
            kind = rundir.Run(p).env_file.kind
        except DataError:
            kind = "run"
        raise user_error(DataError, f"{p}: env.json but no raw.csv (a '{kind}' folder holds no trials to "
                                    f"open); allowed: {ALLOWED}")
    raise user_error(ParamError, f"parameter 'path': {p} holds no run folder (raw.csv at <host>/<run-id>/ or "
                                 f"<experiment>/<host>/<run-id>/ under it); allowed: {ALLOWED}")


def open(path=None):  # noqa: A001 (ringlab.open is the public name)
    """A :class:`Run` (run folder, or an experiment folder's latest complete run) or a
    :class:`Runs` (a results folder); ``path`` default: the results folder
    (``$RINGLAB_RESULTS``, else the repository's results/).  See the module docstring."""
    p = _resolve(path)
    kind = _classify(p)
    if kind == "run":
        return Run(p)
    if kind == "root":
        return Runs.under(p)
    runs = [Run(d, (p.name, d.parent.name, d.name)) for d in run_dirs(p, 2)]
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
        runs = Runs(p.parent, [Run(p)])
    elif kind == "experiment":
        runs = Runs.measured(p, [Run(d, (p.name, d.parent.name, d.name)) for d in run_dirs(p, 2)])
    else:
        runs = Runs.under(p)
    return runs.trials(warmup=warmup, failed=failed)


__all__ = ["ALLOWED", "KEY_COLUMNS", "FigureFile", "Run", "Runs", "open", "open_all", "record"]
