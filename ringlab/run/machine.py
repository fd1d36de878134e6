"""The machine during a run: CPU locks, quiet CPUs, signals, core-to-core latencies.

* ``cpu_lock(cpus, wait_s)``: two ringlab runs never measure on the same CPUs at once.
  Each CPU has a lock file ``cpuN.lock`` in ``lock_dir()`` (a folder of the current user,
  mode 0700, checked; the files are opened without following links); a run holds an exclusive
  ``flock`` on every CPU it uses (all online CPUs when its trials are unpinned) for its
  whole life, with its PID written inside.  A second run waits up to ``wait_s`` seconds,
  then refuses with ``CpuBusyError`` naming the PID that holds the CPUs.
* ``check_quiet(cpus, mode, timeout)``: other runnable tasks on the measured CPUs at the
  start are named in a warning (``quiet=warn``), waited out (``quiet=wait``, at most
  ``quiet_timeout`` seconds, then a warning), or not looked for (``quiet=off``).
* ``signals()``: SIGTERM and SIGHUP raise ``RunInterrupted`` (exit 143 and 129), SIGINT
  stays KeyboardInterrupt (exit 130); each unwinds through the governor's restore.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import signal
import stat
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from ringlab import paths
from ringlab.tools import latency
from ringlab.errors import CpuBusyError, RunInterrupted, UnsafeDirError
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


#: signals that end a run with RunInterrupted (exit 128 + the signal number)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals() -> Iterator[Stop]:
    """SIGTERM and SIGHUP become RunInterrupted while the run lasts (main thread only).  A
    SIGHUP that is ignored when the run starts (``nohup``) stays ignored."""
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum, frame):
        stop.signum = signum
        raise RunInterrupted(signum)
    old = {}
    for sig in STOP_SIGNALS:
        if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        old[sig] = signal.signal(sig, handler)
    try:
        yield stop
    finally:
        for sig, h in old.items():
            signal.signal(sig, h if h is not None else signal.SIG_DFL)


# -- CPU locks ---------------------------------------------------------------------------------------
def _candidates() -> list[Path]:
    uid = os.geteuid()
    out = [Path("/run/ringlab")] if uid == 0 else []
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        try:   # only a runtime folder of this user (sudo may keep another user's)
            if os.lstat(xdg).st_uid == uid:
                out.append(Path(xdg) / "ringlab")
        except OSError:
            pass
    out.append(Path(f"/tmp/ringlab-locks-{uid}"))
    return out


def lock_dir() -> Path:
    """The folder of the lock files, created with mode 0700 and checked (``paths.private_dir``).

    $RINGLAB_LOCK_DIR, else (root) /run/ringlab, else $XDG_RUNTIME_DIR/ringlab, else
    /tmp/ringlab-locks-<uid>; a candidate that cannot be created (read-only /run) is passed
    over.  A folder that exists but is a symbolic link, owned by another user or writable by
    group or others is refused (``UnsafeDirError``, exit 2).  Runs of different users that
    fall back to their own folders do not see each other's locks."""
    if os.environ.get(LOCK_DIR_ENV):
        return paths.private_dir(os.environ[LOCK_DIR_ENV], "CPU lock folder", LOCK_DIR_ENV)
    cands = _candidates()
    for d in cands:
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        except OSError:
            continue
        return paths.private_dir(d, "CPU lock folder", LOCK_DIR_ENV, parents=False)
    raise UnsafeDirError(f"no CPU lock folder can be created ({', '.join(map(str, cands))}); "
                         f"set {LOCK_DIR_ENV} to a folder of yours with mode 0700")


def online_cpus() -> list[int]:
    cpus = sysfs.parse_cpulist(sysfs.read(sysfs.sysfs_root() / "devices/system/cpu/online"))
    return cpus or list(range(os.cpu_count() or 1))


def measured_cpus(specs) -> list[int]:
    """The CPUs the trials are pinned to, or every online CPU when any trial is unpinned."""
    pinned = sorted({c for s in specs for c in s.cpus if c >= 0})
    unpinned = any(s.cpus[0] < 0 for s in specs)
    return online_cpus() if unpinned or not pinned else pinned


def _holder(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 64, 0).strip() or 0) or None
    except (OSError, ValueError):
        return None


def _open_lock(d: Path, dfd: int, name: str) -> int:
    """Open (or create) lock file ``name`` in the folder ``dfd``, never through a symbolic link
    and never truncating it; refuse anything but a regular file of the current user."""
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600,
                     dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeDirError(f"lock file {d / name} is a symbolic link; ringlab does not follow links "
                                 f"there: remove it, or set {LOCK_DIR_ENV} to a folder of yours") from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise UnsafeDirError(f"lock file {d / name} is not a regular file of the current user (owner uid "
                             f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): remove it, or set "
                             f"{LOCK_DIR_ENV} to a folder of yours")
    return fd


@contextlib.contextmanager
def cpu_lock(cpus: list[int], wait_s: float, log: Callable[[str], None]) -> Iterator[dict]:
    """Hold every CPU's lock file while the block runs; yields {"cpus", "dir", "waited_s"}."""
    d = lock_dir()
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    fds, t0, told = [], time.monotonic(), False
    try:
        # the folder checked again through the descriptor the files are opened in
        paths.check_private_dir(d, os.fstat(dfd), "CPU lock folder", LOCK_DIR_ENV)
        for cpu in sorted(set(cpus)):   # one global order: two runs never deadlock
            fd = _open_lock(d, dfd, f"cpu{cpu}.lock")
            fds.append(fd)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as e:
                    if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                pid = _holder(fd)
                who = f"PID {pid}" if pid else "another process"
                if time.monotonic() - t0 >= wait_s:
                    raise CpuBusyError(f"CPU {cpu} is measured by another ringlab run ({who}, lock "
                                       f"{d / f'cpu{cpu}.lock'}); waited {wait_s:g}s. Run again when it "
                                       "ends, or raise -p quiet_timeout", pid)
                if not told:
                    log(f"waiting up to {wait_s:g}s for CPU {cpu}: another ringlab run ({who}) measures on it")
                    told = True
                time.sleep(0.2)
            os.ftruncate(fd, 0)   # ours now: the PID replaces the last holder's
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield {"cpus": sysfs.format_cpulist(sorted(set(cpus))), "dir": str(d),
               "waited_s": round(time.monotonic() - t0, 3)}
    finally:
        for fd in fds:
            os.close(fd)   # releases the flock; the files stay (removing them would race)
        os.close(dfd)


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
