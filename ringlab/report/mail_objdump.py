"""The measured loop of a ptr_ring binary as ``objdump -d`` shows it, for the mail and notebook 10.

Callgrind counts the instructions that ran inside ``rl_measured_*``; the published ``perf stat``
counts of seed 000 cover the whole process.  The disassembly of the measured function is the
evidence of what one operation executes here: its instruction count and, trimmed, its text.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ringlab.report.patch_ab import nm_sizes

#: the function mode 0 (one thread alternates produce and consume) measures
SIMPLE_LOOP = "rl_measured_simple"
_LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S.*)$")


def disassemble(binary: str | Path, function: str = SIMPLE_LOOP) -> list[str] | None:
    """The instructions of ``function`` in ``binary`` (``objdump -d --no-show-raw-insn``), one
    ``address: instruction`` string each; None when objdump is missing, the binary is gone or
    the function is not in it."""
    exe = shutil.which("objdump")
    if exe is None or not Path(binary).is_file():
        return None
    try:
        out = subprocess.run([exe, "-d", "--no-show-raw-insn", f"--disassemble={function}", str(binary)],
                             capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines, inside = [], False
    for ln in out.splitlines():
        if ln.rstrip().endswith(f"<{function}>:"):
            inside = True
            continue
        if inside:
            if not ln.strip():
                if lines:
                    break
                continue
            m = _LINE.match(ln)
            if m:
                lines.append(f"{m.group(1)}: {' '.join(m.group(2).split())}")
    return lines or None


_JUMP = re.compile(r"^([0-9a-f]+): (j\S*)\s+([0-9a-f]+) <")


def hot_loop(text: list[str]) -> list[str]:
    """The function's loop over the operations, with the inlined produce and consume: from the
    loop head (the lowest target of a backward conditional jump: the ``for``'s test jumps back
    to it) to the first such jump; the cold paths gcc placed after the loop are not in it.  The
    whole text when there is no backward conditional jump."""
    addrs = [int(ln.split(":", 1)[0], 16) for ln in text]
    best = None
    for i, ln in enumerate(text):
        m = _JUMP.match(ln)
        if not m or m.group(2) == "jmp":
            continue
        target = int(m.group(3), 16)
        if target < addrs[i] and target in addrs:
            j = addrs.index(target)
            if best is None or j < best[0]:
                best = (j, i)
    return text[best[0]:best[1] + 1] if best else list(text)


def loop_summary(binaries: dict[str, str | Path], function: str = SIMPLE_LOOP) -> dict[str, dict]:
    """{arm: {"instructions": static count, "loop_instructions", "bytes": size from nm, "text": the
    disassembly, "loop": its widest loop}} for each arm whose binary could be read."""
    out = {}
    for arm, path in binaries.items():
        text = disassemble(path, function)
        if text is None:
            continue
        size = (nm_sizes(path) or {}).get(function)
        loop = hot_loop(text)
        out[arm] = {"instructions": len(text), "loop_instructions": len(loop), "bytes": size, "text": text,
                    "loop": loop}
    return out


def trimmed(text: list[str], head: int = 12, tail: int = 4) -> list[str]:
    """The first ``head`` and last ``tail`` lines of a disassembly, with a line saying how many
    were left out."""
    if len(text) <= head + tail + 1:
        return list(text)
    return text[:head] + [f"... {len(text) - head - tail} instructions left out ..."] + text[-tail:]


__all__ = ["SIMPLE_LOOP", "disassemble", "hot_loop", "loop_summary", "trimmed"]
