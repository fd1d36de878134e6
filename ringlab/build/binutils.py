"""The programs around a build: the compiler's version and ``size`` of a binary (the first error line of
a failed compile is ringlab.sources.kernel_header.first_error)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ringlab.build.cflags import BuildError


def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"C compiler {cc!r} not found or not runnable ({e}); set $CC") from None
    lines = (out.stdout or out.stderr).splitlines()
    return lines[0].strip() if lines else "unknown"


def parse_size_output(text: str) -> dict[str, int]:
    """Parse Berkeley-format ``size FILE`` output into text/data/bss/dec."""
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0][:3] != ["text", "data", "bss"]:
        raise ValueError(f"unexpected `size` output: {text.strip()[:200]!r}")
    vals = lines[1]
    try:
        return {"text": int(vals[0]), "data": int(vals[1]), "bss": int(vals[2]), "dec": int(vals[3])}
    except (IndexError, ValueError):
        raise ValueError(f"unexpected `size` output: {text.strip()[:200]!r}") from None


def binary_size(path: Path) -> tuple[dict | None, str | None]:
    exe = shutil.which("size")
    if exe is None:
        return None, "`size` (binutils) not found on PATH"
    try:
        out = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"`size` failed: {e}"
    if out.returncode != 0:
        return None, f"`size` failed: {out.stderr.strip()[:200]}"
    try:
        return parse_size_output(out.stdout), None
    except ValueError as e:
        return None, str(e)
