"""Every shell command of README.md and docs/*.md runs.

Commands come from ```sh / ```bash blocks (every line; a trailing backslash continues it) and
from the ``$ `` lines of ```console blocks (a following "(exit N)" line is the exit code the
transcript shows).  Each runs with bash in a copy of the working tree, with RINGLAB_RESULTS,
RINGLAB_SCRATCH and RINGLAB_STATE_DIR in a temporary folder (nothing is written into the
repository's results/), /tmp paths moved into the temporary folder and the C binaries' loop
counts cut to smoke size.  A command whose trailing comment says ``# needs: ...`` or
``# long run: ...``, or that SKIP names, is skipped with that reason.  Variable assignments
earlier in the same block (``H=$(...)``) are run before each command of the block.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT_S = 180

#: commands skipped whatever their comment says: (regex, reason)
SKIP = [
    (r"^perf stat ", "needs: perf_event_open for a process (a real perf PMU or perf_event_paranoid <= 2)"),
]

#: smoke sizes for the C binaries' transcripts: (regex, replacement)
SMOKE = [
    (r"-N 100000000\b", "-N 100000"),
    (r"-N 3000000\b", "-N 30000"),
    (r"nr_test=51200000\b", "nr_test=51200"),
]

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP_COMMENT = re.compile(r"#\s*((?:needs|long run):.*)$")
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S")


@dataclass
class Command:
    doc: str
    line: int
    text: str
    rc: int = 0
    setup: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _join(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Join backslash-continued lines: [(first line number, command)]."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for n, line in lines:
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def extract(path: Path) -> list[Command]:
    doc = str(path.relative_to(ROOT))
    cmds: list[Command] = []
    lang, block = None, []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if m and lang is None:
            lang, block = m.group(1), []
            continue
        if m and lang is not None:
            if lang in ("sh", "bash"):
                lines = [(k, s) for k, s in block if s.strip() and not s.lstrip().startswith("#")]
                setup: list[str] = []
                for k, s in _join(lines):
                    cmds.append(Command(doc, k, s.strip(), 0, tuple(setup)))
                    if ASSIGN.match(s.strip()):
                        setup.append(s.strip())
            elif lang == "console":
                for i, (k, s) in enumerate(block):
                    if not s.startswith("$ "):
                        continue
                    rc = 0
                    for _, after in block[i + 1:]:
                        if after.startswith("$ "):
                            break
                        e = re.fullmatch(r"\(exit (\d+)\)", after.strip())
                        if e:
                            rc = int(e.group(1))
                    cmds.append(Command(doc, k, s[2:].strip(), rc))
            lang = None
            continue
        if lang is not None:
            block.append((n, line))
    return cmds


COMMANDS = [c for p in DOCS for c in extract(p)]


def skip_reason(c: Command) -> str | None:
    m = SKIP_COMMENT.search(c.text)
    if m:
        return m.group(1).strip()
    for pat, why in SKIP:
        if re.search(pat, c.text):
            return why
    return None


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of the working tree (tracked and untracked, not ignored files) plus build/."""
    base = tmp_path_factory.mktemp("readme")
    dst = base / "tree"
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
    if (ROOT / "build").is_dir():
        shutil.copytree(ROOT / "build", dst / "build", symlinks=True)
    return dst


def _env(tree: Path) -> dict[str, str]:
    tmp = tree.parent
    env = dict(os.environ)
    env.update(PYTHONPATH=str(tree), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               RINGLAB_RESULTS=str(tree / "results"), RINGLAB_SCRATCH=str(tmp / "scratch"),
               RINGLAB_STATE_DIR=str(tmp / "state"), RINGLAB_BUILD=str(tree / "build"))
    return env


def _prepare(c: Command, tmp: Path) -> str:
    script = "\n".join([*c.setup, c.text])
    script = re.sub(r"(?<![\w./])/tmp/", f"{tmp}/", script)
    for pat, new in SMOKE:
        script = re.sub(pat, new, script)
    return script


def test_commands_were_found():
    docs = {c.doc for c in COMMANDS}
    assert "README.md" in docs and len(docs) >= 6, docs
    assert any(c.text.startswith("ringlab run ") and skip_reason(c) is None for c in COMMANDS)


def test_no_hard_coded_kernel_header_path():
    for p in DOCS:
        for c in extract(p):
            assert "/usr/src/linux-headers-" not in c.text, \
                f"{c.id}: use $(ringlab env --headers | head -1), not a header path"


@pytest.mark.parametrize("c", COMMANDS, ids=lambda c: c.id)
def test_command_runs(c: Command, tree: Path):
    why = skip_reason(c)
    if why:
        pytest.skip(why)
    if "ringlab env --headers" in "\n".join([*c.setup, c.text]):
        from ringlab.sources.kernel_header import header_trees
        if not header_trees():
            pytest.skip("needs: a kernel header tree under /usr/src")
    results = tree / "results"
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    out = subprocess.run(["bash", "-c", _prepare(c, tree.parent)], cwd=tree, env=_env(tree),
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert out.returncode == c.rc, (f"{c.id}: `{c.text}` exited {out.returncode}, expected {c.rc}\n"
                                    f"stdout: {out.stdout[-2000:]}\nstderr: {out.stderr[-2000:]}")
    if out.returncode:
        assert "Traceback" not in out.stderr, f"{c.id}: a traceback for a user error"
    if "reproduce" not in c.text:
        after = sorted(p.relative_to(results) for p in results.rglob("*"))
        assert after == before, f"{c.id}: wrote into results/"
