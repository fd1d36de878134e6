"""A run folder: the only code that creates, locks, appends to, resumes and reads one.

A run folder holds

* ``raw.csv``: one row per trial (``ringlab.schema`` is the column contract), written
  by ``RunFolder.append`` and read by ``read_raw``;
* ``env.json``: what ran, where and how it ended, written by ``RunFolder.write_env``
  and read by ``read_env``;
* ``summary.md``, ``summary.csv``, ``summary.tex``, ``compare.csv``, ``mail.txt``, logs,
  the patch under test and ``figures/``: rendered by the report and the studies, written
  by ``files.py`` (``write_text``, ``write_csv``, ``write_figure``, ``append_line``).

No other module writes into a run folder (tests/test_run_folder_owner.py checks it).

env.json (``ENV_VERSION`` 2) is nested: run metadata at the top, the machine
(``ringlab.system.envinfo.collect()``) under ``"environment"``::

    {"env_version": 2, "kind": "run" | "environment" | "compare-runs",
     "schema_version": 4, "ringlab_version", "run_id", "experiment", "host", "pid",
     "started_utc", "ended_utc", "resumed_utc": [...],
     "status": "running" | "complete" | "failed" | "interrupted" | "skipped",
     "status_reason", "trials": {"planned", "ok", "failed", "timeout", "skipped"},
     "parameters", "command", "git", "build", "binaries_used", "plan", "governor",
     "cpu_lock", "quiet", "c2c_latency_ns", "warnings", "skipped_reason",
     "run_constants": {column: text}, "raw_values": {column: [text, ...]},
     "environment": {...}}

``schema_version`` is the layout of the folder's raw.csv; from version 4 raw.csv keeps its run
constants in ``run_constants`` and ``raw_values`` (``rawconstants.py``), written before the
first row that needs them, and ``read_raw`` fills them back.

Older files are read as well: version-1 run folders (the same nesting, no
``env_version``), flat environment runs (``envinfo.collect()`` at the top) and
compare-runs files; ``read_env`` returns them in the shape above.

Status.  A run ends ``complete``; ``failed`` when no trial succeeded or more than
``FAILED_MAX_FRACTION`` of its trials crashed, failed to parse or timed out (its
exit code is then non-zero); ``interrupted`` after SIGINT/SIGTERM/SIGHUP or a full disk; ``skipped`` when
the experiment cannot run on this machine (env.json says why).  A run killed
outright leaves ``running`` in env.json: ``RunFolder.status()`` reports it as
``interrupted`` when no process holds the folder's lock.

Locking.  The folder itself is locked (``flock`` on the directory, exclusive, for the
life of a run or a ``--resume``): a second one fails at once with ``RunLockedError``
naming the holder's PID.

Reading.  :class:`RunOutput` (``reader.py``) is the one read model of a run folder: raw.csv, env.json,
the summary files and the executed notebook; every reader outside this package goes through it
(tests/test_one_read_model.py checks it), and ``RunOutput.baseline`` applies the one baseline rule
(``baseline.py``).

Files: ``folder.py`` (``RunFolder``: the folder, its lock and the writing of raw.csv and env.json;
``annotate``), ``status.py`` (the statuses and ``judge``, the rule that ends a run ``complete`` or
``failed``), ``rawcsv.py`` (the crash-safe appender, ``repair_csv``, ``read_raw``, ``read_done``,
``resume_keys``: the one header check of a resume), ``rawrows.py`` (the checks of raw.csv's header
and rows), ``rawconstants.py`` (the run constants version 4 keeps in env.json), ``envjson.py``
(atomic write, ``read_env``), ``reader.py`` (``RunOutput``, ``read_run``), ``baseline.py``
(``pick_baseline``), ``files.py`` (the other files of a run folder).  This module only re-exports.
"""
from ringlab.errors import DataError
from ringlab.rundir.baseline import pick_baseline, run_variants
from ringlab.rundir.envjson import ENV_VERSION, BuildRecord, GitRecord, RunEnv, atomic_write_json, read_env
from ringlab.rundir.files import (LOG_FILES, TEXT_FILES, append_line, write_bytes, write_csv, write_figure,
                                  write_text)
from ringlab.rundir.folder import RunFolder, annotate, utc_now
from ringlab.rundir.rawcsv import (CsvSink, count_trials, read_done, read_raw, repair_csv, require_metric,
                                   resume_keys)
from ringlab.rundir.reader import (COMPARE_CSV, ENV_JSON, RAW_CSV, SUMMARY_CSV, SUMMARY_MD, RunOutput,
                                   raw_experiment, read_run)
from ringlab.rundir.status import FAILED_MAX_FRACTION, RUN_STATUSES, RunStatus, judge

__all__ = ["RunOutput", "RAW_CSV", "ENV_JSON", "SUMMARY_MD", "SUMMARY_CSV", "COMPARE_CSV", "pick_baseline", "run_variants", "resume_keys", "RunFolder", "RunEnv", "GitRecord", "BuildRecord", "RunStatus", "read_raw", "read_env", "read_run", "raw_experiment", "require_metric", "CsvSink", "repair_csv", "read_done",
           "count_trials", "judge", "annotate", "RUN_STATUSES", "atomic_write_json", "utc_now", "ENV_VERSION",
           "FAILED_MAX_FRACTION", "DataError", "TEXT_FILES", "LOG_FILES", "write_text", "write_bytes",
           "write_csv", "write_figure", "append_line"]
