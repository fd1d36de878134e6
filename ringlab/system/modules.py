"""Loadable kernel modules on this machine: can they be loaded, which are loaded, which a
ringlab kmod trial left loaded.

* ``machine_reasons()`` / ``refusal_reasons()`` say, before any trial, why modules cannot be
  loaded here: not root, insmod/rmmod/modinfo missing, a kernel without module support,
  ``/proc/sys/kernel/modules_disabled`` = 1, a missing module file, or a module built for
  another kernel (``modinfo -F vermagic`` against ``uname -r``).
* ``module_state(name)`` reads ``/proc/modules`` (``RINGLAB_PROC_MODULES`` overrides it in tests).
* ``leftovers()``: each kmod trial (``ringlab.tools.kmod``) records itself in
  ``$RINGLAB_STATE_DIR/kmod/`` (default ``~/.cache/ringlab/kmod/``) before loading and removes
  the record once the module is unloaded; a record whose module is still loaded is a leftover,
  which ``ringlab env`` reports.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from ringlab.system.sysfs import procfs_root

TOOLS = ("insmod", "rmmod", "modinfo")


# -- where things are ----------------------------------------------------------------------
def _procfs() -> Path:
    return Path(procfs_root())


def modules_path() -> Path:
    return Path(os.environ.get("RINGLAB_PROC_MODULES") or _procfs() / "modules")


def state_dir() -> Path:
    d = os.environ.get("RINGLAB_STATE_DIR")
    return (Path(d) if d else Path.home() / ".cache" / "ringlab") / "kmod"


# -- checks -----------------------------------------------------------------------------------
def modinfo(path, field: str) -> str | None:
    exe = shutil.which("modinfo")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, "-F", field, str(path)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def machine_reasons(euid: int | None = None) -> list[str]:
    """Why no module can be loaded on this machine (empty when modules can be)."""
    out = []
    if (os.geteuid() if euid is None else euid) != 0:
        out.append("not root: loading a kernel module needs root (CAP_SYS_MODULE); run with sudo")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        out.append(f"{', '.join(missing)} not found on PATH (install kmod)")
    disabled = _procfs() / "sys" / "kernel" / "modules_disabled"
    try:
        if disabled.read_text().strip() == "1":
            out.append(f"module loading is disabled ({disabled} = 1; only a reboot re-enables it)")
    except OSError:
        if not modules_path().exists():
            out.append(f"this kernel has no loadable-module support (no {disabled}, no {modules_path()})")
    return out


def module_reasons(path, release: str | None = None) -> list[str]:
    """Why this module file cannot be loaded into the running kernel (empty when it can)."""
    p = Path(path)
    if not p.is_file():
        return [f"module file {p} does not exist"]
    release = release or os.uname().release
    vermagic = modinfo(p, "vermagic")
    if vermagic is None:
        return [f"modinfo could not read {p} (not a kernel module?)"]
    built_for = vermagic.split()[0] if vermagic.split() else ""
    if built_for != release:
        return [f"{p.name} was built for kernel {built_for or '(no vermagic)'} but this kernel is {release} "
                f"(vermagic {vermagic!r}); rebuild it against this kernel's tree"]
    return []


def refusal_reasons(paths, euid: int | None = None, release: str | None = None) -> list[str]:
    """Every reason not to start (machine first, then each module)."""
    out = machine_reasons(euid)
    for p in paths:
        out += module_reasons(p, release)
    return out


def cannot_run_reasons(module: str = "") -> list[str]:
    """Why a kmod run of ``module`` (a .ko path; empty: none chosen yet) cannot happen here."""
    if not str(module or "").strip():
        return ["no module given: set it to a page_frag_test.ko built for this kernel"] + machine_reasons()
    return refusal_reasons([module])


# -- loaded modules ---------------------------------------------------------------------------
def module_state(name: str) -> str | None:
    """``Live`` / ``Loading`` / ``Unloading`` from /proc/modules, or None when not loaded."""
    try:
        text = modules_path().read_text()
    except OSError:
        return None
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == name:
            return f[4] if len(f) > 4 else "Live"
    return None


# -- state records (for `ringlab env`) ----------------------------------------------------------
def record_path(name: str, pid: int) -> Path:
    return state_dir() / f"{name}.{pid}.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def leftovers() -> list[dict]:
    """Modules a ringlab kmod trial loaded and nobody unloaded: record + still in /proc/modules.

    Each: {"module", "path", "pid", "started_utc", "trial_alive", "state"}.  A record whose
    trial process is still running is an ongoing trial, reported with trial_alive true."""
    out = []
    d = state_dir()
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            rec = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        st = module_state(rec.get("module", ""))
        if st is None:
            continue
        out.append({"module": rec.get("module"), "path": rec.get("path"), "pid": rec.get("pid"),
                    "started_utc": rec.get("started_utc"), "trial_alive": _pid_alive(int(rec.get("pid", 0) or 0)),
                    "state": st, "record": str(f)})
    return out


def leftover_text(items: list[dict]) -> list[str]:
    return [f"{i['module']} left loaded ({i['state']}) by ringlab kmod trial pid {i['pid']} started "
            f"{i['started_utc']}" + (" (still running)" if i["trial_alive"] else f": rmmod {i['module']}")
            for i in items]


# -- the trial process --------------------------------------------------------------------------
