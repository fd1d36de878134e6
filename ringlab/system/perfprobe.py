"""Which perf counters really open on this machine, and whether tracepoints are usable.

A VM guest usually exposes no hardware PMU: cycles/instructions fail with
ENOENT while software events (task-clock, context-switches ...) work.  Rather
than guess from /proc/cpuinfo we call perf_event_open(2) for each of
``ringlab.schema.COUNTER_EVENTS`` through ctypes and report the errno with an
explanation.  The struct perf_event_attr is laid out by hand from the man page
(PERF_ATTR_SIZE_VER5, 112 bytes).
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import re
import shutil
import subprocess

from ringlab.schema import COUNTER_EVENTS
from ringlab.system import privilege, sysfs

#: perf_event_open syscall numbers (asm/unistd.h of each architecture).
SYSCALL_NR = {"x86_64": 298, "aarch64": 241, "arm64": 241, "i386": 336, "i686": 336, "ppc64le": 319,
              "riscv64": 241, "s390x": 331}

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
#: schema name -> (type, config, perf's name)
EVENTS = {
    "cycles": (PERF_TYPE_HARDWARE, 0, "cycles"),
    "instructions": (PERF_TYPE_HARDWARE, 1, "instructions"),
    "cache_misses": (PERF_TYPE_HARDWARE, 3, "cache-misses"),
    "branches": (PERF_TYPE_HARDWARE, 4, "branches"),
    "branch_misses": (PERF_TYPE_HARDWARE, 5, "branch-misses"),
    "task_clock": (PERF_TYPE_SOFTWARE, 1, "task-clock"),
    "page_faults": (PERF_TYPE_SOFTWARE, 2, "page-faults"),
    "context_switches": (PERF_TYPE_SOFTWARE, 3, "context-switches"),
    "cpu_migrations": (PERF_TYPE_SOFTWARE, 4, "cpu-migrations"),
}
assert set(EVENTS) == set(COUNTER_EVENTS)

# attr.flags bits (the bitfield after read_format)
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
_PERF_FLAG_FD_CLOEXEC = 1 << 3
_IOC_ENABLE, _IOC_DISABLE = 0x2400, 0x2401


class PerfEventAttr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
    ]


assert ctypes.sizeof(PerfEventAttr) == 112


def paranoid() -> int | None:
    """kernel.perf_event_paranoid, or None when the file is missing (no perf events in the kernel)."""
    v = sysfs.read(sysfs.procfs_root() / "sys" / "kernel" / "perf_event_paranoid")
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def has_hw_pmu() -> bool:
    """A core PMU is registered (x86 "cpu", hybrid "cpu_core", arm "armv8_*" ...)."""
    d = sysfs.sysfs_root() / "bus" / "event_source" / "devices"
    try:
        names = os.listdir(d)
    except OSError:
        return False
    return any(n in ("cpu", "cpu_core", "cpu_atom") or n.startswith(("armv8", "armv7", "arm_")) for n in names)


def _default_opener():
    nr = SYSCALL_NR.get(platform.machine())
    if nr is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def opener(ev_type: int, config: int, exclude_kernel: bool) -> int:
        attr = PerfEventAttr()
        attr.type, attr.size, attr.config = ev_type, ctypes.sizeof(PerfEventAttr), config
        attr.flags = _DISABLED | _EXCLUDE_HV | (_EXCLUDE_KERNEL if exclude_kernel else 0)
        fd = libc.syscall(ctypes.c_long(nr), ctypes.byref(attr), ctypes.c_int(0), ctypes.c_int(-1),
                          ctypes.c_int(-1), ctypes.c_ulong(_PERF_FLAG_FD_CLOEXEC))
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return fd
    return opener


def _reason(e: OSError, hw: bool, pmu: bool, par: int | None) -> str:
    name = errno.errorcode.get(e.errno, str(e.errno))
    if e.errno in (errno.ENOENT, errno.EOPNOTSUPP, errno.EINVAL) and hw:
        why = "no hardware PMU exposed (virtual machine?)" if not pmu else \
            "the PMU does not implement this generic event"
        return f"not supported ({name}) — {why}"
    if e.errno in (errno.EACCES, errno.EPERM):
        return (f"permission denied ({name}) — perf_event_paranoid={par}; run as root or "
                "`sysctl kernel.perf_event_paranoid=1`")
    if e.errno == errno.ENOSYS:
        return "perf_event_open not available (ENOSYS) — kernel without CONFIG_PERF_EVENTS or blocked by seccomp"
    if e.errno == errno.EMFILE:
        return "too many open files (EMFILE)"
    return f"not supported ({name}) — {e.strerror}"


def probe_counters(opener=None) -> dict:
    """{schema event: {"ok": bool|None, "reason": str|None, "scope": "user+kernel"|"user"}} for COUNTER_EVENTS.

    ``opener(type, config, exclude_kernel) -> fd`` (raising OSError) can be
    injected by tests to play a bare-metal machine or a locked-down one.
    """
    fake = opener is not None
    opener = opener or _default_opener()
    out = {}
    if opener is None:
        why = f"perf_event_open syscall number unknown for architecture {platform.machine()}"
        return {ev: {"ok": None, "reason": why, "scope": None} for ev in COUNTER_EVENTS}
    par, pmu = paranoid(), has_hw_pmu()
    for ev in COUNTER_EVENTS:
        typ, cfg, _ = EVENTS[ev]
        res = {"ok": False, "reason": None, "scope": None}
        for excl in (False, True):
            # Counting kernel work needs paranoid <= 1 (or root); user-only is
            # what the harness falls back to, so say which one works.
            try:
                fd = opener(typ, cfg, excl)
            except OSError as e:
                res["reason"] = _reason(e, typ == PERF_TYPE_HARDWARE, pmu, par)
                if e.errno in (errno.EACCES, errno.EPERM) and not excl:
                    continue
                break
            if not fake:
                os.close(fd)
            res.update(ok=True, reason=None, scope="user" if excl else "user+kernel")
            break
        out[ev] = res
    return out


def tracepoints() -> dict:
    """Can we use tracepoints (``perf record -e raw_syscalls:*``)?  Each item says why not."""
    root = sysfs.sysfs_root()
    out = {"tracefs": None, "raw_syscalls": False, "reason": None}
    for d in (root / "kernel" / "tracing", root / "kernel" / "debug" / "tracing"):
        try:
            found = (d / "events").is_dir()
        except PermissionError:   # tracefs is root-only by default: a capability this user lacks
            out["reason"] = f"tracepoints: not readable as this user ({d / 'events'}: permission denied)"
            out["perf"] = perf_tool()
            return out
        except OSError:
            continue
        if found:
            out["tracefs"] = str(d)
            break
    if out["tracefs"] is None:
        out["reason"] = "tracefs not mounted (mount -t tracefs nodev /sys/kernel/tracing) or not readable"
    else:
        ev = os.path.join(out["tracefs"], "events", "raw_syscalls")
        if os.path.isdir(ev) and os.access(ev, os.R_OK | os.X_OK):
            out["raw_syscalls"] = True
        else:
            out["reason"] = f"{ev} not readable (needs root, or kernel without syscall tracepoints)"
    out["perf"] = perf_tool()
    return out


def perf_tool() -> dict:
    """{"path", "version", "reason"} of the perf executable."""
    path = shutil.which("perf")
    if path is None:
        return {"path": None, "version": None, "reason": "perf not found in PATH (apt install linux-perf)"}
    unsafe = privilege.root_unsafe_reason(path) if os.geteuid() == 0 else None
    if unsafe:      # as root, a perf another user could change is never run
        return {"path": path, "version": None,
                "reason": f"{path} {unsafe}; perf runs as root, so {privilege.ROOT_SAFE}"}
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"path": path, "version": None, "reason": f"`perf --version` failed: {e}"}
    m = re.search(r"perf version\s+(\S+)", r.stdout)
    if r.returncode != 0 or not m:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return {"path": path, "version": None,
                "reason": f"`perf --version` exited {r.returncode}: {tail[0][:200]} (perf for this kernel missing?)"}
    return {"path": path, "version": m.group(1), "reason": None}


def probe(counters: bool = True) -> dict:
    """Everything about perf for env.json."""
    par = paranoid()
    return {"paranoid": par,
            "paranoid_reason": None if par is not None else "no /proc/sys/kernel/perf_event_paranoid "
                                                            "(kernel without perf events)",
            "hw_pmu": has_hw_pmu(),
            "counters": probe_counters() if counters else None,
            "tracepoints": tracepoints()}
