"""Boot Debian's kernel under QEMU (TCG) with a chosen CPU topology and run a plan of steps in it.

The guest (tests/guest/): an initramfs made by tests/guest/mkinitramfs.sh from busybox-static
and the kernel's own virtio/9p modules mounts this machine's root read-only over 9p, chroots
into it and runs tests/guest/inside.py with the checkout's .venv, so every path is the same as
here.  Results come back through a second, writable 9p export: the folder ``out``.

Only placement and topology mean anything in the guest: TCG emulates the CPUs one translated
block at a time, so its timings say nothing about a real machine's.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUEST = ROOT / "tests" / "guest"
PY = str(ROOT / ".venv" / "bin" / "python")
RINGLAB = str(ROOT / ".venv" / "bin" / "ringlab")


@dataclass(frozen=True)
class Shape:
    """A guest machine: QEMU's -smp value and the CPUs of each NUMA node (none: no NUMA)."""
    name: str
    smp: str
    numa: tuple = ()
    memory_mb: int = 2048

    def qemu_args(self) -> list[str]:
        args = ["-smp", self.smp, "-m", f"{self.memory_mb}M"]
        if self.numa:
            per = self.memory_mb // len(self.numa)
            for i, cpus in enumerate(self.numa):
                args += ["-object", f"memory-backend-ram,id=m{i},size={per}M",
                         "-numa", f"node,nodeid={i},cpus={cpus},memdev=m{i}"]
        return args


#: our users' servers: 2 sockets x 2 cores x 2 threads, one L3 per socket, one NUMA node per socket
TWO_SOCKETS = Shape("2s-2c-2t-numa", "8,sockets=2,cores=2,threads=2", ("0-3", "4-7"))
#: one socket whose L3 is split in two (QEMU shares the L3 per die), one NUMA node: cross-llc pairs
SPLIT_LLC = Shape("1s-2llc", "8,sockets=1,dies=2,cores=2,threads=2", (), 1024)


def kernel_release() -> str | None:
    """The newest kernel with both /boot/vmlinuz-R and /lib/modules/R, preferring Debian's amd64."""
    rels = [Path(p).name[len("vmlinuz-"):] for p in glob.glob("/boot/vmlinuz-*")]
    rels = [r for r in rels if (Path("/lib/modules") / r / "kernel").is_dir()]
    key = lambda r: [int(x) if x.isdigit() else 0 for x in re.split(r"[.-]", r)]
    rels.sort(key=lambda r: (r.endswith("-amd64"), key(r)))
    return rels[-1] if rels else None


def unavailable() -> str | None:
    """Why the guest cannot be booted here, or None."""
    if os.environ.get("RINGLAB_GUEST_TESTS") != "1":
        return ("the QEMU guest boots (TCG) take 10-15 minutes of a 2-CPU machine: "
                "set RINGLAB_GUEST_TESTS=1 to run them (CI does)")
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 not installed (Debian package qemu-system-x86)"
    if kernel_release() is None:
        return "no kernel image with modules (Debian package linux-image-amd64)"
    bb = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(bb):
        return "busybox not installed (Debian package busybox-static)"
    if not (ROOT / ".venv" / "bin" / "python").exists():
        return "no .venv in the checkout (make venv)"
    if os.geteuid() != 0:
        return "the guest exports / over 9p with security_model=none, which needs root"
    return None


def build_initramfs(dest: Path, release: str) -> Path:
    out = dest / f"initramfs-{release}.cpio.gz"
    p = subprocess.run(["sh", str(GUEST / "mkinitramfs.sh"), release, str(out)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip() or f"mkinitramfs.sh exited {p.returncode}")
    return out


def prepare_matplotlib(out: Path) -> dict:
    """Build matplotlib's font cache here, into OUT/mplconfig, for the guest to use (writable there)."""
    d = out / "mplconfig"
    d.mkdir(parents=True, exist_ok=True)
    subprocess.run([PY, "-c", "import matplotlib.font_manager"], env=dict(os.environ, MPLCONFIGDIR=str(d)),
                   check=True, capture_output=True)
    return {"MPLCONFIGDIR": str(d)}


#: how long a boot may take to reach the plan (tests/guest/inside.py writes OUT/started): a good
#: boot gets there in 15-30 s under TCG, even on a busy 2-CPU host
BOOT_DEADLINE_S = 240
#: boots tried before the tests fail: QEMU 7.2's TCG now and then dies (SIGSEGV) or stalls before
#: the guest's init has run anything of ours; what happened to each attempt is kept
BOOT_ATTEMPTS = 3


@dataclass
class GuestRun:
    out: Path
    console: str
    wall_s: float
    rc: int
    #: one line per boot that never reached the plan and was tried again
    retried: tuple = ()

    def step(self, name: str) -> dict:
        p = self.out / f"{name}.json"
        if not p.exists():
            raise AssertionError(f"guest step {name} did not run; {self.history()}console tail:\n"
                                 f"{self.console[-3000:]}")
        return json.loads(p.read_text())

    def text(self, name: str, ext: str = "out") -> str:
        p = self.out / f"{name}.{ext}"
        return p.read_text() if p.exists() else ""

    def history(self) -> str:
        return "".join(f"boot tried again: {r}\n" for r in self.retried)


def _run_qemu(argv: list[str], started: Path, timeout: float) -> tuple[int, str | None]:
    """Run QEMU; (exit code, why the boot never reached the plan or None).  -1: killed here.
    QEMU's stderr goes to a file beside ``started`` (a pipe left unread could fill and stall it)."""
    t0 = time.monotonic()
    err_file = started.parent / "qemu.stderr"
    with open(err_file, "w") as err:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        while True:
            try:
                p.wait(timeout=1)
                break
            except subprocess.TimeoutExpired:
                pass
            waited = time.monotonic() - t0
            if waited > timeout:
                p.kill()
                p.wait()
                return -1, None if started.exists() else f"no plan step began in {timeout:.0f} s"
            if waited > BOOT_DEADLINE_S and not started.exists():
                p.kill()
                p.wait()
                return -1, f"the guest had not reached the plan after {BOOT_DEADLINE_S} s"
    if started.exists():
        return p.returncode, None
    text = err_file.read_text(errors="replace").strip()
    why = (f"QEMU died of signal {-p.returncode}" if p.returncode < 0 else f"QEMU exited {p.returncode}")
    return p.returncode, f"{why} before the plan began{': ' + text[-300:] if text else ''}"


def boot(shape: Shape, out: Path, steps: list[dict], work: Path, timeout: float = 900) -> GuestRun:
    """Boot the guest with ``shape``, run ``steps`` (see tests/guest/inside.py) and power off.

    A boot that dies or stalls before the plan begins (OUT/started) is QEMU's or the kernel's, not
    the code under test: it is tried again, up to BOOT_ATTEMPTS boots, and GuestRun.retried says so.
    Once the plan has begun nothing is retried.
    """
    release = kernel_release()
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps({"steps": steps}, indent=1))
    prepare_matplotlib(out)
    initrd = build_initramfs(work, release)
    argv = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "Skylake-Server", *shape.qemu_args(),
            "-kernel", f"/boot/vmlinuz-{release}", "-initrd", str(initrd),
            "-append", f"console=ttyS0 quiet panic=-1 ringlab.script={GUEST / 'run-plan.sh'} ringlab.out={out}",
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", f"local,path={out},mount_tag=out,security_model=none,multidevs=remap",
            "-nographic", "-no-reboot", "-nodefaults", "-serial", f"file:{out / 'console.log'}",
            "-display", "none"]
    return run_until_plan(argv, out, timeout)


def run_until_plan(argv: list[str], out: Path, timeout: float) -> GuestRun:
    """Run ``argv`` (a guest boot) until one attempt reaches the plan, at most BOOT_ATTEMPTS times."""
    started, log = out / "started", out / "console.log"
    retried: list[str] = []
    t0 = time.monotonic()
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        started.unlink(missing_ok=True)
        rc, why = _run_qemu(argv, started, timeout)
        console = log.read_text(errors="replace") if log.exists() else ""
        if why is None or attempt == BOOT_ATTEMPTS:
            if why is not None:
                retried.append(f"attempt {attempt}: {why}")
            if retried:
                # in the test report's warnings even when the tests then pass
                warnings.warn("guest boot tried again: " + " | ".join(retried), stacklevel=2)
            return GuestRun(out, console, time.monotonic() - t0, rc, tuple(retried))
        tail = console.strip().splitlines()[-1:] or ["(empty console)"]
        retried.append(f"attempt {attempt}: {why}; console's last line: {tail[0][-200:]}")
        if log.exists():
            log.replace(out / f"console.attempt{attempt}.log")
    raise AssertionError("unreachable")
