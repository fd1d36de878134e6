"""Every read and write of /sys and /proc goes through here.

Tests and notebook demos point ``RINGLAB_SYSFS`` / ``RINGLAB_PROCFS`` at fake
trees (see tests/fakes/), so that governor set-and-restore, topologies with
NUMA and SMT, and odd machines can be exercised on a 2-CPU VM without root.
The roots are re-read from the environment on every call (not cached) so a
test can change them with monkeypatch.
"""
from __future__ import annotations

import os
from pathlib import Path


def sysfs_root() -> Path:
    """Root of the sysfs tree: ``$RINGLAB_SYSFS`` or ``/sys``."""
    return Path(os.environ.get("RINGLAB_SYSFS") or "/sys")


def procfs_root() -> Path:
    """Root of the procfs tree: ``$RINGLAB_PROCFS`` or ``/proc``."""
    return Path(os.environ.get("RINGLAB_PROCFS") or "/proc")


def _resolve(path: str | os.PathLike) -> Path:
    # Relative paths are relative to the sysfs root, so callers can write
    # read("devices/system/cpu/online") and get the fake tree in tests.
    p = Path(path)
    return p if p.is_absolute() else sysfs_root() / p


def read(path: str | os.PathLike, default: str | None = None) -> str | None:
    """The stripped text of a sysfs/procfs file, or ``default`` if it cannot be read.

    Missing files, permission errors and directories all give ``default``:
    a knob that is not there is a normal state of a machine, not an error.
    """
    try:
        with open(_resolve(path), encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return default


def write(path: str | os.PathLike, value: str | int) -> None:
    """Write ``value`` to a sysfs file.  Raises OSError (PermissionError ...) on failure.

    Sysfs files must be written in one write() without O_CREAT/O_TRUNC
    semantics mattering; we open for writing without creating, so a missing
    knob raises FileNotFoundError instead of silently creating a file in a
    fake tree.
    """
    p = _resolve(path)
    fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, (str(value) + "\n").encode())
    finally:
        os.close(fd)


def relative_to_root(path: str | os.PathLike) -> str | None:
    """``path`` relative to the sysfs root, both with symlinks resolved; None when outside it.

    cpuN/cpufreq is a symlink to cpufreq/policyN, so the answer for
    ``cpu1/cpufreq/scaling_governor`` is ``devices/system/cpu/cpufreq/policy1/scaling_governor``.
    A path with ``..`` components, or one that is not absolute, is never inside.
    """
    p = Path(path)
    if not p.is_absolute() or ".." in p.parts:
        return None
    root = sysfs_root().resolve()
    try:
        return p.resolve().relative_to(root).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None


def parse_cpulist(text: str | None) -> list[int]:
    """Parse a kernel CPU list such as ``0-3,8-11`` or ``0-15:2`` (stride) into sorted CPUs.

    Empty or missing text gives [].  Raises ValueError on malformed text.
    """
    out: set[int] = set()
    if not text:
        return []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        stride = 1
        if ":" in part:  # "0-15:2" (group syntax of isolcpus / cpulist)
            part, s = part.split(":", 1)
            stride = int(s.split("/")[0])
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.update(range(int(lo), int(hi) + 1, max(stride, 1)))
        else:
            out.add(int(part))
    return sorted(out)


def format_cpulist(cpus) -> str:
    """Inverse of parse_cpulist: ``[0, 1, 2, 5]`` -> ``0-2,5``."""
    cpus = sorted(set(int(c) for c in cpus))
    parts, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)
