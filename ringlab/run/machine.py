"""The machine during a run: CPU locks, quiet CPUs, signals, core-to-core latencies.

* ``cpu_lock(cpus, wait_s)``: two ringlab runs never measure on the same CPUs at once.
  Each CPU has a lock file ``cpuN.lock`` in ``lock_dir()``; a run holds an exclusive
  ``flock`` on every CPU it uses (all online CPUs when its trials are unpinned) for its
  whole life, with its PID written inside.  A second run waits up to ``wait_s`` seconds,
  then refuses with ``CpuBusyError`` naming the PID that holds the CPUs.
* ``check_quiet(cpus, mode, timeout)``: other runnable tasks on the measured CPUs at the
  start are named in a warning (``quiet=warn``), waited out (``quiet=wait``, at most
  ``quiet_timeout`` seconds, then a warning), or not looked for (``quiet=off``).
* ``signals()``: SIGTERM raises ``RunInterrupted`` (exit 143), SIGINT stays
  KeyboardInterrupt (exit 130); either unwinds through the governor's restore.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from ringlab.tools import latency
from ringlab.errors import CpuBusyError, RunInterrupted
from ringlab.system import procstat, sysfs

#: environment variable naming the folder of the per-CPU lock files
LOCK_DIR_ENV = "RINGLAB_LOCK_DIR"


class Stop:
    """The signal that asked the run to stop, if any; ``check()`` raises RunInterrupted for it.

    The handler raises at once, which ends a trial in flight; Python drops an exception
    raised while it runs certain callbacks (a fork handler, a finalizer), so the loop also
    calls ``check()`` after every trial."""

    def __init__(self):
        self.signum: int | None = None

    def check(self) -> None:
        if self.signum is not None:
            raise RunInterrupted(self.signum)


@contextlib.contextmanager
def signals() -> Iterator[Stop]:
    """SIGTERM becomes RunInterrupted while the run lasts (main thread only)."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        stop.signum = signum
        raise RunInterrupted(signum)
    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, old)


# -- CPU locks ---------------------------------------------------------------------------------------
def lock_dir() -> Path:
    """$RINGLAB_LOCK_DIR, else /run/ringlab, else $XDG_RUNTIME_DIR/ringlab, else /tmp/ringlab-locks."""
    if os.environ.get(LOCK_DIR_ENV):
        return Path(os.environ[LOCK_DIR_ENV])
    candidates = [Path("/run/ringlab")]
    if os.environ.get("XDG_RUNTIME_DIR"):
        candidates.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "ringlab")
    for d in candidates:
        try:
            d.mkdir(mode=0o755, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return Path("/tmp/ringlab-locks")


def online_cpus() -> list[int]:
    cpus = sysfs.parse_cpulist(sysfs.read(sysfs.sysfs_root() / "devices/system/cpu/online"))
    return cpus or list(range(os.cpu_count() or 1))


def measured_cpus(specs) -> list[int]:
    """The CPUs the trials are pinned to, or every online CPU when any trial is unpinned."""
    pinned = sorted({c for s in specs for c in s.cpus if c >= 0})
    unpinned = any(s.cpus[0] < 0 for s in specs)
    return online_cpus() if unpinned or not pinned else pinned


def _holder(f) -> int | None:
    try:
        f.seek(0)
        return int(f.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def cpu_lock(cpus: list[int], wait_s: float, log: Callable[[str], None]) -> Iterator[dict]:
    """Hold every CPU's lock file while the block runs; yields {"cpus", "dir", "waited_s"}."""
    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    files, t0, told = [], time.monotonic(), False
    try:
        for cpu in sorted(set(cpus)):   # one global order: two runs never deadlock
            f = open(d / f"cpu{cpu}.lock", "a+")
            files.append(f)
            while True:
                try:
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                pid = _holder(f)
                who = f"PID {pid}" if pid else "another process"
                if time.monotonic() - t0 >= wait_s:
                    raise CpuBusyError(f"CPU {cpu} is measured by another ringlab run ({who}, lock "
                                       f"{d / f'cpu{cpu}.lock'}); waited {wait_s:g}s. Run again when it "
                                       "ends, or raise -p quiet_timeout", pid)
                if not told:
                    log(f"waiting up to {wait_s:g}s for CPU {cpu}: another ringlab run ({who}) measures on it")
                    told = True
                time.sleep(0.2)
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
        yield {"cpus": sysfs.format_cpulist(sorted(set(cpus))), "dir": str(d),
               "waited_s": round(time.monotonic() - t0, 3)}
    finally:
        for f in files:
            f.close()   # releases the flock; the files stay (removing them would race)


# -- quiet CPUs -------------------------------------------------------------------------------------
def _describe(tasks: list[dict]) -> str:
    return ", ".join(f"{t['comm']} (PID {t['pid']}, CPU {t['cpu']})" for t in tasks[:5]) + (
        f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")


def check_quiet(cpus: list[int], mode: str, timeout: float, log: Callable[[str], None],
                poll_s: float = 0.5) -> dict:
    """Look for other work on ``cpus`` before measuring (see the module docstring); env.json's "quiet"."""
    if mode == "off":
        return {"mode": "off"}
    t0 = time.monotonic()
    busy = procstat.runnable_on(cpus)
    rep = {"mode": mode, "procs_running": procstat.procs_running(), "other_runnable": len(busy),
           "tasks": [f"{t['comm']}:{t['pid']}@{t['cpu']}" for t in busy[:10]]}
    if busy and mode == "wait":
        log(f"waiting up to {timeout:g}s for quiet CPUs: other work running: {_describe(busy)}")
        while busy and time.monotonic() - t0 < timeout:
            time.sleep(poll_s)
            busy = procstat.runnable_on(cpus)
        rep["waited_s"] = round(time.monotonic() - t0, 3)
    if busy:
        rep["warning"] = (f"other work is running on the measured CPUs ({_describe(busy)})"
                          + (f" after waiting {timeout:g}s" if mode == "wait" else "")
                          + "; its interference shows in procs_running/load1/ctx_involuntary per trial")
    rep["quiet"] = not busy
    return rep


# -- core-to-core latency ----------------------------------------------------------------------------
def measure_pairs(specs, known: dict, log: Callable[[str], None]) -> dict[str, float]:
    """One-way core-to-core latency of every distinct CPU pair used, once per run."""
    probe = latency.Probe()
    out = dict(known)
    pairs = sorted({s.cpus for s in specs if s.cpus[0] >= 0 and s.cpus[1] >= 0 and s.cpus[0] != s.cpus[1]})
    for a, b in pairs:
        k = f"{a}:{b}"
        if k in out and out[k] is not None and not (isinstance(out[k], float) and math.isnan(out[k])):
            continue
        out[k] = probe.measure(a, b)
        if out[k] is None:
            log(f"c2c latency {k}: not measured ({probe.reasons.get((a, b))})")
    return {k: (math.nan if v is None else v) for k, v in out.items()}
