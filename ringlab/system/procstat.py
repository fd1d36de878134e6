"""Numbers from procfs: per-CPU times (steal), load average, busiest processes, kernel cmdline.

Steal time matters because ringlab is often run in a VM guest: ticks in which
the hypervisor ran something else on our vCPU show up as inflated ns/op.
All reads go through ``sysfs.procfs_root()`` so tests use a fake /proc.
"""
from __future__ import annotations

import math
import os
import time

from ringlab.system import sysfs

#: Field names of the cpuN lines of /proc/stat, in order (proc(5)).
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")

#: Kernel command-line flags that decide how quiet a CPU can be.
ISOLATION_FLAGS = ("isolcpus", "nohz_full", "rcu_nocbs")


def _proc(name: str):
    return sysfs.procfs_root() / name


def read_cpu_times(cpus=None) -> dict:
    """{cpu: {user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice}} in USER_HZ ticks.

    ``cpus`` None gives every CPU listed; the aggregate line is under key "all".
    """
    text = sysfs.read(_proc("stat"), "") or ""
    want = None if cpus is None else {int(c) for c in cpus}
    out: dict = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        name, *vals = line.split()
        nums = [int(v) for v in vals[:len(CPU_FIELDS)]]
        nums += [0] * (len(CPU_FIELDS) - len(nums))  # old kernels lack steal/guest
        if name == "cpu":
            if want is None:
                out["all"] = dict(zip(CPU_FIELDS, nums))
            continue
        c = int(name[3:])
        if want is None or c in want:
            out[c] = dict(zip(CPU_FIELDS, nums))
    return out


def steal_delta(before: dict, after: dict, cpus=None) -> float:
    """Steal ticks accumulated on ``cpus`` between two read_cpu_times() snapshots.

    NaN when a CPU is missing from either snapshot (we cannot know, so we do not say 0).
    """
    keys = [k for k in before if k != "all"] if cpus is None else [int(c) for c in cpus if int(c) >= 0]
    if not keys:
        return math.nan
    total = 0
    for c in keys:
        if c not in before or c not in after:
            return math.nan
        total += after[c]["steal"] - before[c]["steal"]
    return float(total)


def loadavg() -> dict | None:
    """{"1min", "5min", "15min", "runnable", "threads"} from /proc/loadavg, or None if unreadable."""
    text = sysfs.read(_proc("loadavg"))
    if not text:
        return None
    parts = text.split()
    try:
        run, threads = parts[3].split("/")
        return {"1min": float(parts[0]), "5min": float(parts[1]), "15min": float(parts[2]),
                "runnable": int(run), "threads": int(threads)}
    except (IndexError, ValueError):
        return None


def _proc_times() -> dict:
    out = {}
    root = sysfs.procfs_root()
    try:
        entries = os.listdir(root)
    except OSError:
        return out
    for e in entries:
        if not e.isdigit():
            continue
        text = sysfs.read(root / e / "stat")
        if not text or ")" not in text:
            continue
        # comm is in parentheses and may itself contain spaces or ')'.
        comm = text[text.index("(") + 1:text.rindex(")")]
        rest = text[text.rindex(")") + 2:].split()
        try:
            out[int(e)] = (comm, int(rest[11]) + int(rest[12]))   # utime + stime
        except (IndexError, ValueError):
            continue
    return out


def busiest_processes(n: int = 5, interval: float = 0.2, exclude=None) -> list[dict]:
    """The ``n`` processes (other than ours) using the most CPU over ``interval`` seconds.

    [{"pid", "comm", "cpu_pct"}], busiest first, only processes that used CPU.
    With interval=0 the ranking is by total CPU time since start ("cpu_s").
    """
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    skip = {os.getpid()} | set(exclude or ())
    first = _proc_times()
    if interval <= 0:
        rows = [{"pid": p, "comm": c, "cpu_s": t / hz} for p, (c, t) in first.items() if p not in skip and t > 0]
        return sorted(rows, key=lambda r: -r["cpu_s"])[:n]
    time.sleep(interval)
    second = _proc_times()
    rows = []
    for p, (comm, t) in second.items():
        if p in skip or p not in first:
            continue
        d = t - first[p][1]
        if d > 0:
            rows.append({"pid": p, "comm": comm, "cpu_pct": round(100.0 * d / hz / interval, 1)})
    return sorted(rows, key=lambda r: -r["cpu_pct"])[:n]


def kernel_cmdline() -> str | None:
    text = sysfs.read(_proc("cmdline"))
    return text.replace("\0", " ").strip() if text is not None else None


def kernel_cmdline_flags() -> dict:
    """{"isolcpus": value|None, "nohz_full": ..., "rcu_nocbs": ...} from /proc/cmdline.

    A flag given without a value (``rcu_nocbs``) is "" (present, no list).
    Only the kernel's part (before a lone ``--``) is considered.
    """
    out = {k: None for k in ISOLATION_FLAGS}
    text = kernel_cmdline() or ""
    for tok in text.split():
        if tok == "--":
            break   # the rest belongs to init
        key, _, val = tok.partition("=")
        if key in out:
            out[key] = val
    return out


def procs_running() -> int | None:
    """Runnable tasks system-wide (the ``procs_running`` line of /proc/stat, ours included)."""
    for line in (sysfs.read(_proc("stat"), "") or "").splitlines():
        if line.startswith("procs_running "):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def runnable_on(cpus=None, exclude=None) -> list[dict]:
    """Tasks in state R whose last CPU is in ``cpus`` (None: any CPU), other than ``exclude`` PIDs.

    [{"pid", "tid", "comm", "cpu"}] from /proc/PID/task/TID/stat (field 39 is the CPU a
    task last ran on).  Our own process is always left out.
    """
    want = None if cpus is None else {int(c) for c in cpus if int(c) >= 0} or None
    skip = {os.getpid()} | set(exclude or ())
    root = sysfs.procfs_root()
    out = []
    try:
        pids = [e for e in os.listdir(root) if e.isdigit() and int(e) not in skip]
    except OSError:
        return out
    for pid in pids:
        try:
            tids = [t for t in os.listdir(root / pid / "task") if t.isdigit()]
        except OSError:
            tids = [pid]
        for tid in tids:
            text = sysfs.read(root / pid / "task" / tid / "stat") or (sysfs.read(root / pid / "stat") if tid == pid else None)
            if not text or ")" not in text:
                continue
            comm = text[text.index("(") + 1:text.rindex(")")]
            rest = text[text.rindex(")") + 2:].split()
            try:
                state, cpu = rest[0], int(rest[36])
            except (IndexError, ValueError):
                continue
            if state == "R" and (want is None or cpu in want):
                out.append({"pid": int(pid), "tid": int(tid), "comm": comm, "cpu": cpu})
    return out
