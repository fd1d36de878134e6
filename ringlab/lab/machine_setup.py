"""The system packages the notebooks use, installed where the machine allows it.

``make reproduce`` and ``make test`` run this step first, with plain ``python3`` before the venv
exists (``python3 -m ringlab.lab.machine_setup``; it imports nothing outside the standard
library).  Each :class:`Need` says what it is for, how to see that the machine has it, and the
Debian package that provides it:

* python3's ``venv`` module and ``Python.h`` (a distribution's python3 splits them out): the venv
  and ringlab's cffi module;
* the kernel headers package (the real ``include/linux/ptr_ring.h``): notebooks 12, 13, 14;
* the kernel source package and ``xz`` (the kernel's own ``tools/virtio/ringtest``): notebook 21;
* valgrind (instructions per operation under callgrind): notebooks 10 to 14;
* perf (``perf stat``, tracepoints): notebooks 20, 21, 30.

Where the machine allows it (root, ``apt-get``, installing not turned off) what is missing is
installed, each package with the reason printed.  ``RINGLAB_INSTALL=0`` (a make variable or an
environment variable) turns installing off; so does not being root or a system without
``apt-get``.  Then the step only says what is missing, what it is for and how to get it, and
exits 0: every notebook still runs, and the part that needs a missing input is skipped with the
reason (in the notebook, summary.md and env.json).  Only a python3 without ``venv`` stops here
(exit 1): nothing of ringlab can be installed without it.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from typing import Callable

#: environment (or make) variable: "0" turns installing off
INSTALL_VAR = "RINGLAB_INSTALL"
_OFF = ("0", "no", "off", "false")
_APT_TIMEOUT_S = 1800


@dataclass(frozen=True)
class Need:
    """One thing the notebooks use: ``present()`` says whether the machine has it; ``package()``
    the Debian package that provides it (None: apt has none here)."""
    name: str
    purpose: str
    present: Callable[[], bool]
    package: Callable[["Apt"], str | None]
    #: True: ringlab cannot be installed without it (the step exits 1)
    required: bool = False


def _distro_python() -> bool:
    """Whether this python3 is the distribution's (apt's packages complete it)."""
    return os.path.realpath(sys.executable).startswith("/usr/bin/")


def _has_venv() -> bool:
    return importlib.util.find_spec("ensurepip") is not None and importlib.util.find_spec("venv") is not None


def _has_python_h() -> bool:
    inc = sysconfig.get_paths().get("include") or ""
    return os.path.isfile(os.path.join(inc, "Python.h"))


def _python_pkg(suffix: str) -> Callable[["Apt"], str | None]:
    def pick(apt: "Apt") -> str | None:
        if not _distro_python():
            return None
        minor = f"python{sys.version_info.major}.{sys.version_info.minor}-{suffix}"
        return apt.first([minor, f"python3-{suffix}"])
    return pick


def _has_kernel_headers() -> bool:
    return bool(glob.glob("/usr/src/*/include/linux/ptr_ring.h"))


def _has_kernel_source() -> bool:
    return bool(glob.glob("/usr/src/linux-source-*.tar.*"))


def _on_path(prog: str) -> Callable[[], bool]:
    return lambda: shutil.which(prog) is not None


def _perf_works() -> bool:
    """Debian's /usr/bin/perf is a wrapper that fails without the linux-perf package."""
    exe = shutil.which("perf")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "--version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


NEEDS: tuple[Need, ...] = (
    Need("python3 venv", "the venv ringlab is installed into", _has_venv, _python_pkg("venv"), required=True),
    Need("Python.h", "ringlab's cffi module of the C rings", _has_python_h, _python_pkg("dev")),
    Need("kernel headers", "the real include/linux/ptr_ring.h, for notebooks 12, 13, 14", _has_kernel_headers,
         lambda apt: apt.newest(r"linux-headers-[0-9.]+-[0-9]+-common")),
    Need("kernel source", "the kernel's tools/virtio/ringtest, for notebook 21", _has_kernel_source,
         lambda apt: apt.newest(r"linux-source-[0-9.]+")),
    Need("xz", "unpacking the kernel source, for notebook 21", _on_path("xz"),
         lambda apt: apt.first(["xz-utils"])),
    Need("valgrind", "instructions per operation under callgrind, for notebooks 10 to 14", _on_path("valgrind"),
         lambda apt: apt.first(["valgrind"])),
    Need("perf", "perf stat and tracepoints, for notebooks 20, 21, 30", _perf_works,
         lambda apt: apt.first(["linux-perf"])),
)


class Apt:
    """Debian's package tools, asked once each: which packages exist, and installing them."""

    def __init__(self, run=subprocess.run, log=print):
        self._run, self._log = run, log
        self._updated = False

    @staticmethod
    def available() -> bool:
        return shutil.which("apt-get") is not None and shutil.which("apt-cache") is not None

    def _search(self, pattern: str) -> list[str]:
        p = self._run(["apt-cache", "search", "--names-only", f"^{pattern}$"], capture_output=True,
                      text=True, timeout=120)
        return [ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()] if p.returncode == 0 else []

    def _with_lists(self, ask: Callable[[], list[str]]) -> list[str]:
        """``ask()``, after one ``apt-get update`` if the package lists know nothing yet."""
        found = ask()
        if not found and not self._updated:
            self._updated = True
            self._log("ringlab setup: apt-get update (the package lists are empty or old)")
            self._run(["apt-get", "update", "-qq"], capture_output=True, text=True, timeout=600,
                      env=_apt_env())
            found = ask()
        return found

    def newest(self, pattern: str) -> str | None:
        found = self._with_lists(lambda: [n for n in self._search(pattern) if re.fullmatch(pattern, n)])
        return sorted(found, key=_version_key)[-1] if found else None

    def first(self, names: list[str]) -> str | None:
        def ask() -> list[str]:
            return [n for n in names if self._search(re.escape(n))]
        found = self._with_lists(ask)
        return found[0] if found else None

    def install(self, pkgs: list[str]) -> list[str]:
        """Install ``pkgs`` (all at once, then one at a time after a failure); the ones that failed."""
        def one_go(names: list[str]) -> bool:
            p = self._run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *names],
                          capture_output=True, text=True, timeout=_APT_TIMEOUT_S, env=_apt_env())
            if p.returncode != 0:
                tail = (p.stderr or p.stdout).strip().splitlines()
                self._log(f"ringlab setup: apt-get install {' '.join(names)} failed: "
                          f"{tail[-1] if tail else 'exit ' + str(p.returncode)}")
            return p.returncode == 0
        if one_go(pkgs):
            return []
        return [p for p in pkgs if len(pkgs) == 1 or not one_go([p])]


def _apt_env() -> dict[str, str]:
    return dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def _version_key(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def installing() -> tuple[bool, str]:
    """(whether this step may install, why not)."""
    if os.environ.get(INSTALL_VAR, "1").strip().lower() in _OFF:
        return False, f"installing is turned off ({INSTALL_VAR}=0)"
    if os.geteuid() != 0:
        return False, "installing needs root"
    if not Apt.available():
        return False, "no apt-get here: install it with this system's package manager"
    return True, ""


def setup(needs: tuple[Need, ...] | None = None, apt: Apt | None = None, log=print) -> list[Need]:
    """Install what is missing of ``needs`` (default: :data:`NEEDS`) where allowed; the needs
    still missing afterwards (each said)."""
    missing = [n for n in (NEEDS if needs is None else needs) if not n.present()]
    if not missing:
        log("ringlab setup: every system package the notebooks use is here")
        return []
    allowed, why_not = installing()
    apt = apt or (Apt(log=log) if Apt.available() else None)
    pkgs = {n.name: (n.package(apt) if apt is not None else None) for n in missing}
    if allowed:
        todo = sorted({p for p in pkgs.values() if p})
        for n in missing:
            if pkgs[n.name]:
                log(f"ringlab setup: installing {pkgs[n.name]} ({n.name}: {n.purpose})")
        if todo:
            apt.install(todo)
    still = [n for n in missing if not n.present()]
    for n in still:
        how = f"apt-get install {pkgs[n.name]}" if pkgs[n.name] else "not in this system's package lists"
        because = f"; {why_not}" if not allowed else ""
        log(f"ringlab setup: missing {n.name} ({n.purpose}): {how}{because}")
    if still and not any(n.required for n in still):
        log("ringlab setup: the notebooks that need what is missing skip that part and say why")
    return still


def main() -> int:
    still = setup()
    required = [n for n in still if n.required]
    if required:
        print(f"ringlab setup: cannot go on without {', '.join(n.name for n in required)}; "
              f"as root, {INSTALL_VAR}=1 installs it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
