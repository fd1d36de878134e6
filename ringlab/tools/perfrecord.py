"""Running ``perf record`` around a workload: argv, availability, output parsing, clean kill.

Seed 004 (Wang Nan, 2016) measured perf's kernel ring buffer by timing a syscall
loop alone and under ``perf record -o /dev/null -e raw_syscalls:*``, with and
without ``--overwrite`` (backward writing).  This module owns everything about
the ``perf`` process; ``ringlab.experiments.perf_rb`` only plans trials.

* ``record_argv()`` builds the argv (never a shell string).  When perf must be
  pinned, the argv starts with ``python -m ringlab.perfrecord --cpu N --`` (see
  ``main``): this process pins itself with ``os.sched_setaffinity`` and then
  ``exec``s perf, so perf keeps the PID the runner waits for and stays in the
  runner's process group; no ``preexec_fn`` and no ``taskset`` dependency.
* ``parse_stderr()`` reads perf's two summary lines::

      [ perf record: Woken up 165 times to write data ]
      [ perf record: Captured and wrote 0.000 MB /dev/null ]

  (``( N samples )`` is appended when perf knows the count).  With ``-o
  /dev/null`` perf reports 0.000 MB because it measures the output file; we
  record what perf says, it is not a measurement of ours.
* ``unavailable_reason()`` says why tracepoint recording cannot work here
  (perf missing, not privileged, no tracefs / raw_syscalls events, perf itself
  refusing), or None.  It never guesses numbers.
* ``check_perf()``: perf runs as root, so when ringlab is root a perf that another
  user could change (not a root-owned regular executable, writable by group or
  others, or in a folder such a user can write) is refused: ParamError naming
  the parameter 'perf' (``root_unsafe_reason`` walks the path).
* ``run_group()`` runs a command in its own session and kills and reaps the
  whole process group on timeout and on KeyboardInterrupt, so no perf (or
  perf's workload child) is ever left behind.

Command line: ``python -m ringlab.perfrecord --check [--perf PATH]`` prints the
availability verdict; ``python -m ringlab.perfrecord [--cpu N] -- CMD ...`` is
the pinning wrapper.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from ringlab.errors import ParamError
from ringlab.system.privilege import ROOT_SAFE, root_unsafe_reason
from ringlab.system.sysfs import procfs_root, sysfs_root
from ringlab.tools.argv import python_module, run_command

#: The tracepoints seed 004 records: sys_enter and sys_exit, two records per syscall.
EVENTS = "raw_syscalls:*"
#: Seconds the availability probe may take (perf start-up reads kallsyms etc.).
PROBE_TIMEOUT_S = 30.0
#: Grace period between SIGTERM and SIGKILL when stopping a process group.  perf
#: handles SIGTERM by stopping its workload and flushing, which is quick.
KILL_GRACE_S = 2.0

# Linux capability bits (include/uapi/linux/capability.h numbering).
_CAP_SYS_ADMIN = 21
_CAP_PERFMON = 38

_WOKEN_RE = re.compile(r"\[\s*perf record:\s*Woken up\s+(\d+)\s+times? to write data\s*\]")
_CAPTURED_RE = re.compile(
    r"\[\s*perf record:\s*Captured and wrote\s+([0-9.]+)\s*MB\s+(.*?)"
    r"(?:\s*\(\s*~?(\d+)\s+samples?\s*\))?\s*\]")


# -- parsing --------------------------------------------------------------------------
@dataclass
class RecordSummary:
    """What ``perf record`` said about itself on stderr (None: line absent)."""
    wakeups: int | None = None        # "Woken up N times to write data"
    captured_mb: float | None = None  # "Captured and wrote X MB ..." (perf's own figure)
    output: str | None = None         # the output file named on that line
    samples: int | None = None        # "( N samples )" when perf prints it
    lost: int | None = None           # "lost N chunks" / "N lost samples" warnings, if any
    errors: list[str] = field(default_factory=list)  # perf error lines, for reasons

    @property
    def complete(self) -> bool:
        """Both summary lines seen: perf really recorded until the workload ended."""
        return self.wakeups is not None and self.captured_mb is not None


_LOST_RES = [re.compile(r"lost\s+(\d+)\s+chunks", re.I), re.compile(r"(\d+)\s+lost samples", re.I)]
_ERROR_HINTS = ("error", "permission", "not supported", "unknown tracepoint", "no such", "failed",
                "cannot", "access to performance monitoring")


def parse_stderr(text: str) -> RecordSummary:
    """Parse perf record's stderr (other lines, e.g. the workload's, are ignored)."""
    s = RecordSummary()
    for line in (text or "").splitlines():
        m = _WOKEN_RE.search(line)
        if m:
            s.wakeups = int(m.group(1))
            continue
        m = _CAPTURED_RE.search(line)
        if m:
            s.captured_mb = float(m.group(1))
            s.output = m.group(2).strip() or None
            s.samples = int(m.group(3)) if m.group(3) else None
            continue
        for rx in _LOST_RES:
            m = rx.search(line)
            if m:
                s.lost = (s.lost or 0) + int(m.group(1))
        low = line.strip().lower()
        # perf prints a bare "Error:" header before the real message; skip it.
        if low and low.rstrip(":") != "error" and any(h in low for h in _ERROR_HINTS):
            s.errors.append(line.strip())
    return s


# -- argv -----------------------------------------------------------------------------
def perf_root_refusal(perf: str = "perf") -> str | None:
    """When this process is root: why the perf executable ``perf`` (a name on PATH or a path)
    may not run, naming the parameter 'perf', the path, why and what is allowed; else None.
    None too when no such executable exists (``unavailable_reason`` says so)."""
    if os.geteuid() != 0:
        return None
    path = perf if os.sep in perf else shutil.which(perf)
    if path is None or not os.path.lexists(path):
        return None
    why = root_unsafe_reason(path)
    if why is None:
        return None
    shown = repr(perf) if path == perf else f"{perf!r} ({path})"
    return f"parameter 'perf': {shown} {why}; perf runs as root, so {ROOT_SAFE}"


def check_perf(perf: str = "perf") -> None:
    """ParamError (exit 2) when running as root and ``perf`` is unsafe to run as root."""
    why = perf_root_refusal(perf)
    if why:
        raise ParamError(why, input="perf")


def find_perf(perf: str = "perf") -> str | None:
    """Absolute path of the perf executable, or None.  ``perf`` may be a name or a path."""
    if os.sep in perf:
        p = Path(perf)
        return str(p.resolve()) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(perf)


def pin_prefix(cpu: int | None) -> list[str]:
    """argv prefix that runs the rest of the argv pinned to ``cpu`` (empty when None/-1)."""
    if cpu is None or cpu < 0:
        return []
    return [*python_module("ringlab.tools.perfrecord"), "--cpu", str(int(cpu)), "--"]


def record_argv(perf: str, workload: list[str], *, overwrite: bool = False, cpu: int | None = None,
                output: str = "/dev/null", events: str = EVENTS) -> list[str]:
    """argv of ``perf record -o OUTPUT -e EVENTS [--overwrite] -- WORKLOAD``, perf pinned to ``cpu``.

    ``--no-buildid-cache`` as in the seed's final runs: perf would otherwise
    copy binaries into ~/.debug after the workload, which is not what we time
    but does slow every trial down.  The workload inherits perf's affinity and
    re-pins itself (syscall_loop -c).
    """
    argv = pin_prefix(cpu) + [perf, "record", "-o", output, "--no-buildid-cache", "-e", events]
    if overwrite:
        argv.append("--overwrite")
    return argv + ["--"] + list(workload)


# -- running --------------------------------------------------------------------------
@dataclass
class GroupResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    wall_s: float = 0.0


def kill_group(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it, then reap the leader.

    The group is signalled even when the leader has already exited: perf's
    workload child can outlive perf.  Orphans that die are reaped by init.
    """
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        if wait is None:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if proc.poll() is not None and not _group_alive(pgid):
                return
            time.sleep(0.02)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable (D state)
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def run_group(argv: list[str], timeout: float, env: dict | None = None) -> GroupResult:
    """Run argv in a new session; on timeout or Ctrl-C kill and reap the whole group."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
        # perf's workload child may still hold nothing but be alive (it should
        # not, perf waits for it); make sure the group is empty anyway.
        if _group_alive(proc.pid):
            kill_group(proc)
        return GroupResult(proc.returncode, out, err, False, time.monotonic() - t0)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = _drain(proc)
        return GroupResult(proc.returncode, out, err, True, time.monotonic() - t0)
    except BaseException:  # KeyboardInterrupt, SystemExit: never leave perf behind
        kill_group(proc)
        _drain(proc)
        raise


def _drain(proc: subprocess.Popen) -> tuple[str, str]:
    # A grandchild that escaped the group could hold the pipes open: bounded wait.
    try:
        return proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError):
        return "", ""


# -- availability ---------------------------------------------------------------------
def _sysfs_root() -> Path:
    return Path(sysfs_root())


def _procfs_root() -> Path:
    return Path(procfs_root())


def paranoid_level() -> int | None:
    try:
        return int((_procfs_root() / "sys/kernel/perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def _has_cap(bit: int) -> bool:
    try:
        for line in (Path("/proc/self/status")).read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def privilege_reason() -> str | None:
    """Why this user may not record tracepoints, or None.

    Tracepoint sampling with raw data needs root / CAP_PERFMON / CAP_SYS_ADMIN or
    kernel.perf_event_paranoid = -1; tracefs is also root-only by default.
    """
    if os.geteuid() == 0 or _has_cap(_CAP_PERFMON) or _has_cap(_CAP_SYS_ADMIN):
        return None
    level = paranoid_level()
    if level is not None and level <= -1:
        return None
    shown = "unknown" if level is None else str(level)
    return (f"not root and kernel.perf_event_paranoid={shown} (> -1): tracepoint recording needs root, "
            "CAP_PERFMON, or `sysctl kernel.perf_event_paranoid=-1`")


def tracefs_reason() -> str | None:
    """Why raw_syscalls tracepoints cannot be found, or None."""
    sys_root = _sysfs_root()
    mounts = [sys_root / "kernel/tracing", sys_root / "kernel/debug/tracing"]
    for m in mounts:
        try:
            found = (m / "events").is_dir() and (m / "events/raw_syscalls").is_dir()
            events = found or (m / "events").is_dir()
        except PermissionError:   # tracefs is root-only by default
            return f"tracepoints: not readable as this user ({m}/events: permission denied)"
        except OSError:
            continue
        if events:
            if found:
                return None
            return (f"tracefs at {m} has no raw_syscalls events "
                    "(kernel built without CONFIG_FTRACE_SYSCALLS?)")
    # Not mounted.  perf (as root) mounts tracefs itself on its usual mount
    # point when the kernel supports it, so an empty mount point is fine.
    try:
        mounted = mounts[0].is_dir()
    except OSError:
        mounted = False
    if mounted and _kernel_has_tracefs() and privilege_reason() is None:
        return None
    return (f"no tracefs: {mounts[0]}/events and {mounts[1]}/events not found "
            "(mount it: mount -t tracefs nodev /sys/kernel/tracing)")


def _kernel_has_tracefs() -> bool:
    try:
        return "tracefs" in (_procfs_root() / "filesystems").read_text()
    except OSError:
        return False


_CACHE: dict[tuple, str | None] = {}


def unavailable_reason(perf: str = "perf", probe: bool = True, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``perf record -e raw_syscalls:*`` cannot run here, or None when it can.

    Static checks first (they give the clearest reasons), then, with
    ``probe``, one real ``perf record`` of a trivial command, which catches the
    rest (SELinux, lockdown, a perf built without tracepoint support ...).
    Results are cached per perf path and sysfs/procfs roots.
    """
    path = find_perf(perf)
    key = (perf, path, str(_sysfs_root()), str(_procfs_root()), os.geteuid(), probe)
    if key in _CACHE:
        return _CACHE[key]
    reason = None
    if path is None:
        reason = (f"perf executable '{perf}' not found (install linux-perf, "
                  "or pass -p perf /path/to/perf)")
    if reason is None:
        reason = perf_root_refusal(perf)       # never probed: the probe would run it as root
    if reason is None:
        reason = privilege_reason()
    if reason is None:
        reason = tracefs_reason()
    if reason is None and probe:
        reason = _probe(path, timeout)
    _CACHE[key] = reason
    return reason


def _probe(path: str, timeout: float) -> str | None:
    argv = record_argv(path, [sys.executable, "-c", "pass"], events="raw_syscalls:sys_enter")
    try:
        r = run_group(argv, timeout)
    except OSError as e:
        return f"perf '{path}' cannot be started: {e}"
    if r.timed_out:
        return f"perf record probe did not finish within {timeout:g} s"
    if r.returncode != 0:
        s = parse_stderr(r.stderr)
        first = s.errors[0] if s.errors else (r.stderr.strip().splitlines() or ["no output"])[-1]
        return f"perf record probe failed (exit {r.returncode}): {first}"
    if not parse_stderr(r.stderr).complete:
        return "perf record probe printed no 'Woken up'/'Captured and wrote' summary"
    return None


def clear_cache() -> None:
    _CACHE.clear()


# -- command line ---------------------------------------------------------------------
@click.command(help="pin-and-exec wrapper for perf; --check says if perf tracepoints work",
               options_metavar="[OPTIONS] [-- CMD ...]",
               context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--cpu", type=int, default=None, help="pin to this CPU, then exec the command after --")
@click.option("--check", is_flag=True, help="print why perf record -e raw_syscalls:* cannot run")
@click.option("--perf", default="perf", help="perf executable for --check (default: perf)")
@click.pass_obj
def command(cmd: list[str], cpu: int | None, check: bool, perf: str) -> int:
    if check:
        reason = unavailable_reason(perf)
        print(f"perf tracepoint recording: {'unavailable: ' + reason if reason else 'available'}")
        return 1 if reason else 0
    if not cmd:
        raise click.UsageError("a command after -- is required (or --check)")
    if cpu is not None:
        try:
            os.sched_setaffinity(0, {cpu})
        except (OSError, ValueError) as e:
            print(f"ringlab.perfrecord: --cpu {cpu}: cannot pin: {e}", file=sys.stderr)
            return 2
    try:
        os.execvp(cmd[0], cmd)  # replaces this process: same pid, same process group
    except OSError as e:
        print(f"ringlab.perfrecord: cannot run '{cmd[0]}': {e}", file=sys.stderr)
        return 127


def main(argv: list[str] | None = None) -> int:
    """``python -m ringlab.tools.perfrecord [--cpu N] -- CMD ...`` or ``--check [--perf PATH]``."""
    return run_command(command, argv, "python -m ringlab.perfrecord")


if __name__ == "__main__":
    sys.exit(main())
