"""Compatibility name for ``ringlab.run`` (the run package) and ``ringlab.rundir``.

Scripts and tests written against ``ringlab.runner`` keep working; new code imports
``ringlab.run`` and ``ringlab.rundir``.
"""
from ringlab.errors import RunnerError  # noqa: F401
from ringlab.run import (RunContext, RunInterrupted, RunResult, default_out_dir, host_id,  # noqa: F401
                         new_run_id, order_plan, run_experiment, run_process)
from ringlab.rundir import CsvSink, atomic_write_json, read_done, repair_csv, sha256_file, utc_now  # noqa: F401
