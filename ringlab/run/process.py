"""One trial: spawn the process (pinned by its own argv), time it out, parse it into rows.

``execute(exp, spec, order, ctx)`` returns the trial's raw.csv rows, whatever happened:
a crash, a timeout or unparsable output is a row with that status and the stderr tail.
Each trial runs in a fresh process in its own session; on timeout the whole process
group is killed, and PR_SET_PDEATHSIG kills the trial if ringlab itself is killed.

Each trial also gets a seeded data layout, drawn from the run's seed and the trial's place in
the plan (``order``), so a resumed run draws the same: a ring offset (``extra["ring_offset"]``,
a multiple of 64 in [0, 4032], which experiments that place a ring pass on, ptr_ring as
``--ring-offset``) and an environment of random size (``RINGLAB_ENV_PAD``, 0..4095 characters,
which moves the initial stack; Mytkowicz et al. 2009).  raw.csv records ``layout`` (the round's
layout pair), ``ring_offset`` (as the binary reports it; empty when it reports none) and ``env_pad``.
"""
from __future__ import annotations

import ctypes
import dataclasses
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ringlab.build import layouts as _layouts
from ringlab.run import launcher as _launcher
from ringlab.run.outcome import TrialOutcome
from ringlab.tools import icount
from ringlab.experiments.base import TrialSpec
from ringlab.digest import sha256_file
from ringlab.rundir import utc_now
from ringlab.system import privilege, procstat

#: bytes of stderr kept for a failed trial
STDERR_TAIL = 500
_PR_SET_PDEATHSIG = 1
#: util-linux's setpriv sets the parent-death signal, then execs the trial.  Without it the
#: runner must run Python between fork and exec (preexec_fn), which forces a full fork of the
#: runner: about 20 ms a trial on a 2-vCPU VM, against about 1 ms through setpriv.
_SETPRIV = shutil.which("setpriv")


def _child_setup() -> None:  # pragma: no cover - runs in the child between fork and exec
    # If the runner itself is SIGKILLed, the kernel kills the trial too: no orphan keeps
    # spinning on a CPU and disturbing the next run.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def run_process(argv: list[str], timeout: float, env: dict[str, str] | None = None,
                drop: bool = True) -> TrialOutcome:
    """Run argv (never a shell) in its own session; kill the whole group on timeout.

    Under root, ``drop`` runs it as the unprivileged user (ringlab.system.privilege);
    ``drop=False`` is for ringlab's own wrappers that need root and start the code under
    test unprivileged themselves.

    ``start_new_session`` puts the trial and anything it forks in a new process group,
    so ``killpg`` reaches grandchildren too; ``communicate`` after the kill reaps it.
    Exceptions (Ctrl-C, SIGTERM) also kill the group before propagating.
    """
    t0 = time.perf_counter()
    if drop and privilege.dropping():
        # one setpriv: the user's uid and gid, no groups or capabilities, and the death signal
        argv, env, extra = privilege.wrap(argv), privilege.env(env), {}
    elif _SETPRIV:
        argv, extra = [_SETPRIV, "--pdeathsig", "KILL", "--", *argv], {}
    else:
        extra = {"preexec_fn": _child_setup}
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, env=env, **extra)

    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    try:
        out, err = proc.communicate(timeout=timeout)
        status = "ok" if proc.returncode == 0 else "crash"
    except subprocess.TimeoutExpired:
        kill_group()
        out, err = proc.communicate()
        status = "timeout"
    except BaseException:
        kill_group()
        proc.communicate()
        raise
    # A trial that exits normally may still leave children behind in its group.
    if status != "timeout":
        kill_group()
    wall = time.perf_counter() - t0
    return TrialOutcome(status, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), wall)


# -- the machine around a trial --------------------------------------------------------------------
def _nan_if_none(v) -> float:
    return math.nan if v is None else float(v)


def system_before() -> dict[str, Any]:
    """What the machine looked like just before a trial: CPU times, runnable tasks, load."""
    load = procstat.loadavg()
    return {"times": procstat.read_cpu_times(), "procs_running": procstat.procs_running(),
            "load1": None if load is None else load["1min"]}


def system_columns(before: dict[str, Any], cpus: tuple[int, int]) -> dict[str, Any]:
    """steal_delta (over the trial), procs_running and load1 (before it); NaN / empty when unknown."""
    used = sorted({c for c in cpus if c is not None and c >= 0}) or None
    after = procstat.read_cpu_times()
    steal = procstat.steal_delta(before["times"], after, used) if before["times"] and after else math.nan
    pr = before["procs_running"]
    return {"steal_delta": _nan_if_none(steal), "procs_running": "" if pr is None else int(pr),
            "load1": _nan_if_none(before["load1"])}


# -- rows ------------------------------------------------------------------------------------------
def derive(row: dict[str, Any]) -> None:
    """Derived counter columns; NaN whenever an input is missing (never 0)."""
    def f(name):
        try:
            return float(row.get(name))
        except (TypeError, ValueError):
            return math.nan

    def ratio(a, b):
        return a / b if (math.isfinite(a) and math.isfinite(b) and b > 0) else math.nan

    cyc, ins, count = f("cycles"), f("instructions"), f("count")
    row.setdefault("ipc", ratio(ins, cyc))
    row.setdefault("branch_miss_rate", ratio(f("branch_misses"), f("branches")))
    row.setdefault("instructions_per_op", ratio(ins, count))
    row.setdefault("cycles_per_op", ratio(cyc, count))
    if "icount_source" not in row:
        row["icount_source"] = "perf" if math.isfinite(ins) else ""


def actual_class(ctx, row) -> str:
    """Class of the CPUs the threads really ran on; 'migrated' if a thread moved."""
    def cpu(k):
        try:
            return int(row.get(k))
        except (TypeError, ValueError):
            return -1

    ps, pe, cs, ce = (cpu(k) for k in ("cpu_producer_start", "cpu_producer_end",
                                         "cpu_consumer_start", "cpu_consumer_end"))
    if ps < 0:
        return ""
    if (pe >= 0 and pe != ps) or (cs >= 0 and ce >= 0 and ce != cs):
        return "migrated"
    if cs < 0:  # single-threaded workload
        return "same-cpu" if row.get("pair_class") == "same-cpu" else ""
    return ctx.pair_class(ps, cs)


#: the environment variable whose size each trial draws
ENV_PAD_VAR = "RINGLAB_ENV_PAD"
#: options whose value is drawn per trial: their value is not part of the measured command's shape
_PER_TRIAL_OPTIONS = ("--ring-offset", "--copy", "--with", "--with-copy")


_hashes: dict[tuple, str] = {}


def binary_sha256(path) -> str:
    """sha256 of the executable ``path`` ("" when it cannot be read), hashed again only when
    the file at the path is another or was changed (device, inode, size, mtime and ctime)."""
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return ""
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _hashes:
        try:
            _hashes[key] = sha256_file(path)
        except OSError:
            return ""
    return _hashes[key]


def trial_layout(spec: TrialSpec, order: int, seed: int) -> TrialSpec:
    """``spec`` with its data layout in ``extra``: ``ring_offset`` and ``env_pad`` drawn from
    (seed, order), so the same run and trial always get the same."""
    return dataclasses.replace(spec, extra={**spec.extra, "ring_offset": _layouts.ring_offset(seed, order),
                                            "env_pad": _layouts.env_pad(seed, order)})


def trial_env(pad: int) -> dict[str, str]:
    """The runner's environment with ``RINGLAB_ENV_PAD`` of ``pad`` characters."""
    return {**os.environ, ENV_PAD_VAR: "x" * int(pad)}


def _shape_argv(argv: list[str]) -> list[str]:
    """argv with the values of per-trial options as ``<ring-offset>``: one shape per configuration."""
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a in _PER_TRIAL_OPTIONS:
            out[i + 1] = f"<{a.lstrip('-')}>"
    return out


def execute(exp, spec: TrialSpec, order: int, ctx) -> list[dict[str, Any]]:
    """Run one trial and return its raw.csv rows (one per in-process iteration)."""
    spec = trial_layout(spec, order, int(ctx.values.get("seed", 0)))
    argv = [str(a) for a in exp.command(spec, ctx)]
    measured = exp.measured_binary(spec, argv, ctx)
    sha = binary_sha256(measured)
    if spec.kind == "timing":
        ctx.record_command(spec, _shape_argv(privilege.strip(argv)), measured)
    p, c = spec.cpus
    base_row: dict[str, Any] = {
        "run_id": ctx.run_id, "experiment": ctx.experiment, "host": ctx.host, **spec.config,
        "trial": spec.trial, "round": spec.trial, "iteration": 0, "order": order, "warmup": spec.warmup,
        "cpu_req_producer": p, "cpu_req_consumer": c, "pair_class": spec.pair_class,
        "binary_sha256": sha, "c2c_latency_ns": ctx.c2c_of(p, c),
        "layout": int(spec.extra.get("layout", 0)), "ring_offset": "", "env_pad": spec.extra["env_pad"],
    }
    drop = getattr(exp, "trial_privilege", "user") == "user"
    if privilege.dropping() and measured and os.path.exists(measured):
        privilege.check_readable([measured], f"{ctx.experiment}: trial binary")
    if spec.kind == "icount":
        return [_icount_row(exp, ctx, spec, argv, base_row)]
    # arms that take turns run in one trial: each gets the timeout
    timeout = ctx.timeout * (1 + len(spec.extra.get("partners") or ()))
    before = system_before()
    try:
        out = _spawn(ctx, argv, trial_env(spec.extra["env_pad"]), drop, timeout)
    except BaseException:       # Ctrl-C, SIGTERM: the group is killed; undo what the trial left
        _cleanup(exp, spec, ctx)
        raise
    if out.status == "timeout":
        _cleanup(exp, spec, ctx)
    base_row.update(system_columns(before, (p, c)), timestamp=utc_now(), wall_s=out.wall_s,
                    exit_code=out.exit_code)
    if out.status == "ok":
        try:
            parsed = exp.parse(spec, out.stdout, out.stderr, ctx)
            if not parsed:
                raise ValueError("parse() returned no rows")
            rows = []
            for r in parsed:
                row = dict(base_row)
                row.update({k: v for k, v in r.items() if k not in ("run_id", "experiment", "host")})
                row.update(status="ok", stderr_tail="")
                rows.append(row)
        except ValueError as e:
            rows = [dict(base_row, status="error",
                         stderr_tail=(f"parse error: {e} | stderr: " + out.stderr[-STDERR_TAIL:])[-STDERR_TAIL:])]
    else:
        why = "timeout after %gs; " % timeout if out.status == "timeout" else ""
        rows = [dict(base_row, status=out.status, stderr_tail=(why + out.stderr)[-STDERR_TAIL:])]
    for row in rows:
        row["actual_pair_class"] = actual_class(ctx, row)
        derive(row)
    return rows


def _spawn(ctx, argv: list[str], env: dict[str, str], drop: bool, timeout: float) -> TrialOutcome:
    """The trial through the run's launcher (ringlab.run.launcher) when it has one and the trial
    runs as the user; else spawned here.  A launcher that breaks is dropped for the rest of the
    run, and the trial is spawned here (nothing of it was recorded)."""
    la = getattr(ctx, "launcher", None)
    if drop and la is not None and la.alive:
        try:
            return la.run(argv, timeout, privilege.env(env))
        except _launcher.LauncherError as e:
            ctx.warn(f"trial launcher: {e}; the runner spawns the remaining trials itself")
            ctx.launcher = None
    return run_process(argv, timeout, env, drop=drop)


def _cleanup(exp, spec: TrialSpec, ctx) -> None:
    """``Experiment.cleanup`` after a timed-out or interrupted trial; its errors become warnings."""
    try:
        exp.cleanup(spec, ctx)
    except Exception as e:   # a failed cleanup must not hide the trial's own outcome
        ctx.warn(f"{exp.name}: cleanup after trial {spec.trial} of {spec.config.get('variant')} failed: "
                 f"{type(e).__name__}: {e}")


def _icount_row(exp, ctx, spec: TrialSpec, argv: list[str], row: dict) -> dict:
    """One callgrind trial: instructions in the measured region per operation.

    Timing columns stay empty (valgrind's times mean nothing); ``instructions_per_op``
    comes from callgrind's count of the ``rl_measured_*`` functions.
    """
    av = icount.availability()
    row.update(icount_source="callgrind", icount_ops=spec.extra["ops"], valgrind_version=av.version,
               timestamp=utc_now(), ns_per_op=math.nan)
    if not av.ok:
        row.update(status="skipped", exit_code=-1, stderr_tail=f"icount: {av.reason}")
        return row
    with tempfile.TemporaryDirectory(prefix="ringlab-cg-") as tmp:
        out_file = Path(tmp) / "callgrind.out"
        # callgrind is 50-100x slower than native: scale the trial timeout
        if privilege.dropping():
            # callgrind runs as the unprivileged user and writes its count into a folder it owns
            privilege.give(Path(tmp))
        out = run_process(icount.callgrind_argv(argv, out_file), max(600.0, 100 * ctx.timeout),
                          trial_env(spec.extra["env_pad"]))
        row.update(wall_s=out.wall_s, exit_code=out.exit_code)
        if out.status != "ok":
            row.update(status=out.status, stderr_tail=out.stderr[-STDERR_TAIL:])
            return row
        try:
            ir = icount.parse_callgrind_out(privilege.read_bytes(out_file).decode(errors="replace"))
            parsed = exp.parse(spec, out.stdout, out.stderr, ctx)[0]
        except (OSError, ValueError) as e:
            row.update(status="error", stderr_tail=f"icount: {e}")
            return row
    if ir == 0:
        row.update(status="error", stderr_tail="icount: callgrind counted 0 instructions in rl_measured_*")
        return row
    # placement of the counted run; its timings and counters are not kept
    for k in ("cpu_producer_start", "cpu_producer_end", "cpu_consumer_start", "cpu_consumer_end", "ring_offset"):
        if k in parsed:
            row[k] = parsed[k]
    row.update(status="ok", stderr_tail="", instructions=float(ir),
               instructions_per_op=ir / float(spec.extra["ops"]))
    row["actual_pair_class"] = actual_class(ctx, row)
    return row
