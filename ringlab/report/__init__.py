"""Reports of a run folder: a :class:`Report` object with named tables and figures, and
the files summary.md / summary.csv / summary.tex / compare.csv and figures/.

``report(run_dir)`` reads the run through :class:`ringlab.rundir.RunOutput`, asks
``ringlab.stats`` for every number (``compute``), renders tables, text and figures
(``render_files``, :mod:`ringlab.report.figures`), has :mod:`ringlab.rundir` write them and
returns a :class:`Report` (all of it in ``summary.py``):

* ``r.tables``   {name: DataFrame}: "ab" (A/B verdicts), "summary", "variance", "counters"
* ``r.figures``  {name: PNG path}: "box", "order", "cpu_pairs", "spsc", "counters",
  "size_sweep", "forest" (ids as in :mod:`ringlab.report.figures`)
* ``r.missing``  {name: reason} for every known table or figure this run cannot have,
  so a notebook says "not available here because ..." instead of showing nothing
* ``r.markdown`` the text of summary.md; ``r.status`` the run's status
* ``r.files``    {file name: text} of summary.md/csv/tex and compare.csv, as written
* ``r.analysis`` the :class:`ringlab.report.analysis.Analysis` every number came from: mail.txt
  and the notebook tables render from it too (compute once, then render)

``write_report()`` is the same, returning the paths (``ringlab summarize`` uses it).

The other modules: ``analysis`` (the computation), ``tables`` and ``figures`` (rendering), ``mail``
(mail.txt), ``verify``, ``provenance``, ``vs_published``.  This module only re-exports.
"""
from ringlab.report.analysis import Analysis, pick_metric
from ringlab.report.summary import TABLES, Report, build, compute, excluded_text, report, write_report
from ringlab.rundir import pick_baseline

__all__ = ["Analysis", "Report", "report", "write_report", "pick_metric", "pick_baseline", "excluded_text", "TABLES"]
