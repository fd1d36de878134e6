"""Run an experiment's trials into DIR/raw.csv.

``run_experiment(name, params, out_dir)`` is the one entry point (``ringlab run`` and the
notebooks call it):

1. ``prepare``: resolve and check everything (parameters, folder, plan, binaries)
   before anything is created, so bad input leaves nothing behind;
2. ``RunFolder``: create (or resume) and lock the run folder, write env.json;
3. lock the measured CPUs against other ringlab runs, look for other work on them,
   set the governor (restored on every exit path), measure core-to-core latencies;
4. ``execute`` each trial still to do, in the block order of ``plan``, appending its
   rows to raw.csv as soon as it ends.

Modules: ``runner`` (``run_experiment``, ``RunResult``: the steps above), ``plan`` (order, rounds, seeds), ``process`` (spawn, time out, parse),
``context`` (RunContext), ``machine`` (CPU locks, quiet, signals, latencies),
``prepare`` (validation and env.json's opening fields), ``stopping`` (a staged run's stages),
``launcher`` (the trial launcher).  This module only re-exports.
"""
from ringlab.errors import RunInterrupted
from ringlab.run.context import RunContext
from ringlab.run.plan import order_plan
from ringlab.run.prepare import default_out_dir, host_id, new_run_id
from ringlab.run.process import run_process
from ringlab.run.runner import RunResult, run_experiment

__all__ = ["run_experiment", "RunResult", "RunContext", "RunInterrupted", "order_plan", "run_process",
           "default_out_dir", "host_id", "new_run_id"]
