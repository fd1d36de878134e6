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

* a run folder (it holds raw.csv and env.json): that run, a :class:`OpenedRun`;
* ``results/<experiment>``: its **latest complete run**, any host and any profile: of the
  runs whose status is ``complete``, the one whose run id (it begins with the UTC time the
  run started) sorts last, ties broken by host name; a :class:`OpenedRun`;
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

Nothing here parses a file: runs are read through :class:`ringlab.rundir.RunOutput`, the read model
of a run folder; tables and figures are the :class:`ringlab.report.Report`
object's, numbers come from :mod:`ringlab.stats`.  The report writes files (summary.md,
figures/), so it is built on a copy of raw.csv and env.json in a scratch folder
(``$RINGLAB_SCRATCH/open/...``, or a temporary folder where that cannot be written):
opening a run and drawing its figures never writes into the run folder, committed or not.

Files: ``opener.py`` (``open``, ``open_all``: what PATH names), ``opened_run.py`` (:class:`OpenedRun`, one
opened run folder, and :class:`FigureFile`), ``runs.py`` (:class:`Runs`, finding run folders),
``record.py`` (the 95-explore notebook's own run folder); this module only re-exports.
"""
from ringlab.studies.explore.opened_run import FigureFile, OpenedRun
from ringlab.studies.explore.opener import ALLOWED, open, open_all
from ringlab.studies.explore.record import record
from ringlab.studies.explore.runs import KEY_COLUMNS, Runs

__all__ = ["ALLOWED", "KEY_COLUMNS", "FigureFile", "OpenedRun", "Runs", "open", "open_all", "record"]
