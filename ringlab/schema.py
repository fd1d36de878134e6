"""The raw.csv contract: one row per trial (per in-process iteration), tidy.

Everything downstream (statistics, reports, notebooks, ``ringlab compare``) reads
raw.csv through the names defined here, so they are a public contract: users
script against them.  Add columns; never rename one.

Column groups, in the order they are written:

* ``ID_COLUMNS``       who/what/when of the trial (run_id ... timestamp)
* parameter columns    one per experiment parameter that varies per trial
                       (``variant``, ``mode``, ``size`` ...); ``param_columns()``
                       recovers them from any frame
* ``MEASURE_COLUMNS``  metric and timings (ns_per_op is the primary metric)
* ``PLACEMENT_COLUMNS`` requested and actual CPUs, pair class
* ``COUNTER_COLUMNS``  in-region hardware/software counters (NaN when not
                       supported, never 0) plus derived columns
* ``SYSTEM_COLUMNS``   steal / context-switch deltas, binary sha256 ...

History of SCHEMA_VERSION:
  1  first version (ringlab 0.1)
  2  ``round`` (after ``trial``), ``procs_running`` and ``load1`` (system block).
     Readers of version-1 files use the trial index as the round
     (``ringlab.rundir.read_raw`` fills it in).
  3  ``layout`` (after ``round``: the code layout pair of the trial's round, 0 with one
     fixed build), ``ring_offset`` and ``env_pad`` (placement block: the trial's seeded
     data layout).  Files of versions 1 and 2 have none of them: one fixed build, the ring
     where the harness put it and the environment as it was (readers treat ``layout`` as 0).
  4  run constants kept once in env.json instead of on every row.  ``run_id``, ``experiment``
     and ``host`` (``RUN_CONSTANT_COLUMNS``: one value per run by construction) are no longer
     written: env.json's ``run_constants`` holds {column: cell}.  ``counter_errors``,
     ``binary_sha256`` and ``source_sha256`` (``REF_COLUMNS``: long text with few values in a
     run, but not constant by construction: a failed or callgrind trial has no counter_errors, a
     counter can fail to open in one trial, a binary rebuilt before a --resume hashes anew) are
     written as ``<column>_ref``, in the column's place: the index of the row's cell in env.json's
     ``raw_values`` {column: [cell, ...]}.  The reader (``ringlab.rundir.read_raw``) fills both
     back, so every frame has the version-3 columns in the version-3 order; files of versions 1-3
     read unchanged, and a --resume keeps writing the layout its raw.csv's header has.
"""
from __future__ import annotations

SCHEMA_VERSION = 4

#: Identification columns, always first.
ID_COLUMNS = [
    "run_id",       # str: run folder id, e.g. 20261130T043821Z-1a2b3c
    "experiment",   # str: ptr_ring | page_frag | perf_rb | ...
    "host",         # str: short stable machine id (RINGLAB_HOST or hostname)
    "variant",      # str: the thing being compared (batch, reorder, before, base ...)
]

#: Bookkeeping of each trial.
TRIAL_COLUMNS = [
    "trial",        # int: trial index within its configuration (0-based, warm-ups included)
    "round",        # int: round (block) the trial ran in; every arm of a configuration runs
                    #      once per round, back to back (ringlab.run.plan)
    "layout",       # int: code layout pair of the round (ringlab.build.layouts): the baseline's
                    #      build k against the candidate's build k; 0 when layouts=1 (one build)
    "iteration",    # int: in-process repeat index (0 when repeats=1)
    "order",        # int: global execution sequence number in the run
    "warmup",       # bool: warm-up trials are kept but excluded from statistics
    "status",       # str: ok | crash | timeout | error | skipped
    "exit_code",    # int: process exit code (negative = signal)
    "stderr_tail",  # str: last ~500 bytes of stderr when status != ok
    "timestamp",    # str: ISO-8601 UTC time the trial ended
]

#: Measurements.  ns_per_op is the primary metric for every experiment.
MEASURE_COLUMNS = [
    "ns_per_op",        # float: nanoseconds per operation (lower is better)
    "elapsed_ns",       # float: wall time of the measured region (max over threads)
    "ns_producer",      # float: producer (or only) thread's measured time
    "ns_consumer",      # float: consumer thread's measured time (NaN for 1 thread)
    "count",            # int: operations in the measured region
]

PLACEMENT_COLUMNS = [
    "cpu_req_producer",    # int: CPU requested for the producer (-1 = not pinned)
    "cpu_req_consumer",    # int: CPU requested for the consumer (-1 = not pinned)
    "cpu_producer_start",  # int: sched_getcpu() at start of the measured region
    "cpu_producer_end",    # int: ... at the end
    "cpu_consumer_start",
    "cpu_consumer_end",
    "pair_class",          # str: same-cpu | smt-sibling | same-llc | cross-llc | cross-numa | unpinned
    "actual_pair_class",   # str: class of the CPUs the threads really ran on
    "ring_offset",         # int: bytes from the ring's page start (--ring-offset, seeded per trial;
                           #      empty when the binary places no ring)
    "env_pad",             # int: length of RINGLAB_ENV_PAD in the trial's environment (seeded per trial)
]

#: perf_event_open counters read around the measured region, summed over threads.
COUNTER_EVENTS = [
    "cycles", "instructions", "branches", "branch_misses", "cache_misses",
    "task_clock", "context_switches", "cpu_migrations", "page_faults",
]
#: Derived from the counters.
DERIVED_COLUMNS = [
    "ipc",                  # instructions / cycles
    "branch_miss_rate",     # branch_misses / branches
    "instructions_per_op",  # instructions / count (perf or callgrind)
    "cycles_per_op",
    "icount_source",        # perf | callgrind | "" (none)
]
COUNTER_META_COLUMNS = [
    "counters_multiplexed",  # bool: any counter scaled by time_enabled/time_running
    "counter_errors",        # str: "event[, event]: reason; ..." for events that did not open
    "icount_ops",            # int: operations counted by callgrind (icount trials only)
    "valgrind_version",      # str: valgrind that counted them
]
COUNTER_COLUMNS = COUNTER_EVENTS + COUNTER_META_COLUMNS + DERIVED_COLUMNS

SYSTEM_COLUMNS = [
    "ctx_voluntary",     # int: getrusage voluntary context switches in the process
    "ctx_involuntary",   # int: getrusage involuntary context switches
    "steal_delta",       # float: steal ticks (USER_HZ) on the used CPUs during the trial
    "procs_running",     # int: runnable tasks system-wide just before the trial (/proc/stat, ours included)
    "load1",             # float: 1-minute load average just before the trial (/proc/loadavg)
    "c2c_latency_ns",    # float: one-way core-to-core latency of the pair (NaN if not probed)
    "binary_sha256",     # str: sha256 of the executable that ran the trial
    "wall_s",            # float: wall time of the whole trial process, seconds
]

#: Columns raw.csv (version 4) leaves out: one value per run by construction, kept in env.json's
#: ``run_constants`` {column: cell} (``ringlab.rundir.read_raw`` fills them back in).
RUN_CONSTANT_COLUMNS = ("run_id", "experiment", "host")
#: Text columns raw.csv (version 4) writes as ``<column>_ref``: the index of the row's cell in
#: env.json's ``raw_values`` {column: [cell, ...]} (``ringlab.rundir.read_raw`` fills them back in).
REF_COLUMNS = ("counter_errors", "binary_sha256", "source_sha256")
REF_SUFFIX = "_ref"

#: Columns that are never parameters.
NON_PARAM_COLUMNS = set(
    ID_COLUMNS + TRIAL_COLUMNS + MEASURE_COLUMNS + PLACEMENT_COLUMNS
    + COUNTER_COLUMNS + SYSTEM_COLUMNS
) - {"variant"}

PRIMARY_METRIC = "ns_per_op"

#: Metrics where lower is better (the mails' sign convention flips these).
LOWER_IS_BETTER = {
    "ns_per_op", "elapsed_ns", "ns_producer", "ns_consumer", "wall_s",
    "instructions_per_op", "cycles_per_op", "cycles", "instructions",
    "branch_misses", "cache_misses", "elapsed_us",
}


def ordered_columns(param_names: list[str], extra: list[str] | None = None) -> list[str]:
    """The column order for a raw.csv with these parameter columns.

    ``variant`` stays in the id block; other parameters follow it; experiment
    specific extra measurement columns (``extra``) go before the system block.
    """
    params = [p for p in param_names if p not in NON_PARAM_COLUMNS and p != "variant"]
    cols = ID_COLUMNS + params + TRIAL_COLUMNS + MEASURE_COLUMNS + PLACEMENT_COLUMNS
    cols += COUNTER_COLUMNS
    for c in extra or []:
        if c not in cols and c not in SYSTEM_COLUMNS:
            cols.append(c)
    cols += SYSTEM_COLUMNS
    return cols


#: The *requested* placement is part of a trial's configuration (a trial on a
#: cross-LLC pair is not comparable with one on a same-LLC pair); the *actual*
#: CPUs are measurements, used to explain outliers.
CONFIG_PLACEMENT_COLUMNS = ["pair_class", "cpu_req_producer", "cpu_req_consumer"]


def param_columns(columns) -> list[str]:
    """Configuration columns of a raw.csv (everything that identifies a configuration).

    ``variant`` is excluded: it is the thing compared.  These are the documented
    layout's columns between ``variant`` and ``trial`` (the experiment's
    parameters), followed by the requested placement columns that are present.
    """
    cols = list(columns)
    if "variant" in cols and "trial" in cols and cols.index("variant") < cols.index("trial"):
        i, j = cols.index("variant"), cols.index("trial")
        params = [c for c in cols[i + 1:j] if c not in NON_PARAM_COLUMNS]
    else:
        params = [c for c in cols if c not in NON_PARAM_COLUMNS and c != "variant"]
    return params + [c for c in CONFIG_PLACEMENT_COLUMNS if c in cols and c not in params]


#: How a true ``warmup`` reads back from a CSV cell (pandas writes ``True``; older files ``1``).
TRUE_TEXT = ("true", "1", "yes")


def is_true(col):
    """A boolean raw.csv column as a bool Series, whether read back as text or kept as bool."""
    if col.dtype == bool:
        return col
    return col.astype(str).str.strip().str.lower().isin(TRUE_TEXT)


def warmup_mask(df):
    """True on the warm-up rows: kept in raw.csv, excluded from every statistic."""
    import pandas as pd
    if "warmup" not in df.columns:
        return pd.Series(False, index=df.index)
    return is_true(df["warmup"])


def failed_mask(df):
    """True on the trials whose ``status`` is not ``ok`` (crash, timeout, error, skipped)."""
    import pandas as pd
    if "status" not in df.columns:
        return pd.Series(False, index=df.index)
    return df["status"].astype(str) != "ok"


def measured_mask(df, warmup: bool = False, failed: bool = False):
    """True on the rows a statistic reads: not warm-ups (unless ``warmup``) and status ok (unless
    ``failed``).  The one warm-up/ok filter of every raw.csv reader."""
    import pandas as pd
    keep = pd.Series(True, index=df.index)
    if not warmup:
        keep &= ~warmup_mask(df)
    if not failed:
        keep &= ~failed_mask(df)
    return keep


def measured(df, warmup: bool = False, failed: bool = False):
    """The rows of ``measured_mask`` (a view selection; copy before assigning)."""
    return df[measured_mask(df, warmup=warmup, failed=failed)]
