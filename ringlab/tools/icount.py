"""Deterministic instruction counts with valgrind's callgrind.

Where ``perf stat`` prints ``<not supported>`` for instructions (VMs, CI runners),
callgrind still counts every executed instruction, and the count is exactly
repeatable for the same binary, inputs and environment.  ringlab counts only the
measured region: the C harnesses put each timed loop in a ``noinline`` function
named ``rl_measured_*`` and we pass ``--toggle-collect='rl_measured_*'``, so
process start-up, allocation and thread creation are excluded.

These counts are a separate kind of trial.  Timing trials are never taken under
valgrind (it slows code 20-100x and serialises threads); an icount trial's
``ns_per_op`` is left empty and its ``instructions_per_op`` is filled in, with
``icount_source = "callgrind"``.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ringlab.system import privilege

#: functions whose inclusive cost is collected (see csrc/harness/ring_api.h)
TOGGLE = "rl_measured_*"


@dataclass
class Availability:
    ok: bool
    reason: str            # "" when ok
    version: str           # "valgrind-3.19.0" or ""


def availability(valgrind: str = "valgrind") -> Availability:
    """Is callgrind usable here?  Never raises; says why not."""
    exe = shutil.which(valgrind)
    if exe is None:
        return Availability(False, f"valgrind not found on PATH ({valgrind!r}); "
                                   "install it (Debian: apt-get install valgrind)", "")
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, f"valgrind --version failed: {e}", "")
    if out.returncode != 0:
        return Availability(False, f"valgrind --version exited {out.returncode}: {out.stderr.strip()[-200:]}", "")
    return Availability(True, "", out.stdout.strip())


def callgrind_argv(argv: list[str], out_file: str | os.PathLike, valgrind: str = "valgrind",
                   toggle: str = TOGGLE) -> list[str]:
    """The command line that runs ``argv`` under callgrind, collecting only ``toggle``."""
    return [valgrind, "--tool=callgrind", f"--toggle-collect={toggle}",
            f"--callgrind-out-file={out_file}", "--dump-instr=no", "--compress-strings=no",
            "--quiet"] + [str(a) for a in argv]


_TOTALS = re.compile(r"^(?:totals|summary):\s+(\d+)", re.M)
_EVENTS = re.compile(r"^events:\s+(.+)$", re.M)


def parse_callgrind_out(text: str) -> int:
    """Instruction count (Ir) from a callgrind.out file's ``totals:``/``summary:`` line."""
    ev = _EVENTS.search(text)
    if ev and ev.group(1).split()[0] != "Ir":
        raise ValueError(f"callgrind output: first event is {ev.group(1).split()[0]!r}, expected 'Ir'")
    m = _TOTALS.search(text)
    if not m:
        raise ValueError("callgrind output has no 'totals:' or 'summary:' line")
    return int(m.group(1))


@dataclass
class ICount:
    instructions: int       # Ir inside the measured region(s)
    stdout: str             # the program's own output (its timings are meaningless here)
    stderr: str
    returncode: int
    version: str


def count(argv: list[str], timeout: float = 600.0, valgrind: str = "valgrind",
          toggle: str = TOGGLE) -> ICount:
    """Run ``argv`` once under callgrind and return the measured-region instruction count.

    Raises RuntimeError with valgrind's reason when it is unavailable or the run fails.
    """
    av = availability(valgrind)
    if not av.ok:
        raise RuntimeError(av.reason)
    with tempfile.TemporaryDirectory(prefix="ringlab-cg-") as tmp:
        out_file = Path(tmp) / "callgrind.out"
        if privilege.dropping():
            # under root the binary (code from a header, perhaps) runs as the unprivileged user,
            # and callgrind writes into a folder that user owns
            privilege.give(Path(tmp))
        proc = subprocess.run(privilege.wrap(callgrind_argv(argv, out_file, valgrind, toggle)),
                              capture_output=True, text=True, timeout=timeout, start_new_session=True,
                              env=privilege.env())
        if proc.returncode != 0:
            raise RuntimeError(f"callgrind run exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        if not out_file.exists():
            raise RuntimeError("callgrind wrote no output file")
        ir = parse_callgrind_out(privilege.read_bytes(out_file).decode(errors="replace"))
    if ir == 0:
        raise RuntimeError(f"callgrind counted 0 instructions in {toggle!r}: "
                           "the binary has no function of that name (inlined or stripped?)")
    return ICount(ir, proc.stdout, proc.stderr, proc.returncode, av.version)
