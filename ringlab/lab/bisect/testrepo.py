"""A test repository for ``ringlab bisect``: a git tree whose ``include/linux/ptr_ring.h`` goes
through a known series of commits, exactly one of which adds a cost.

The first commit holds the real header of the newest kernel header tree on this machine
(``ringlab.sources.kernel_header.header_trees()``); each later commit is made here, at run time
(no kernel code is stored in ringlab):

* **comment**: one comment line added before a function definition (no code changes);
* **layout**: an unused function ahead of the ring code, ``static void __attribute__((used))
  ringlab_unused(void)`` holding 48 bytes of ``.skip``: it moves the code after it and runs
  nothing;
* **reorder**: the definitions of two independent functions swapped (``ptr_ring_full_irq`` and
  ``ptr_ring_full_any``): no cost;
* **cost**: ringlab's ``builtin:flush-delay:N`` patch (``ringlab.sources.patches``), a spin loop
  after the batch flush in ``__ptr_ring_discard_one``: the first bad commit;
* **unrelated**: a file outside the header: not a candidate (the bisect skips it).

Author, committer and dates are fixed, so the same header and ``spins`` give the same commit
ids; the repository is kept under ``build/bisect-testrepo/<key>/`` and reused.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ringlab import paths
from ringlab.errors import DataError
from ringlab.sources import kernel_header as kh
from ringlab.sources import patches
from ringlab.sources import builtin_patches
from ringlab.system import git as hgit

HEADER = kh.IN_TREE
SERIES_VERSION = 1
DEFAULT_SPINS = 24
MARKER = "ringlab-series.json"
_IDENTITY = {"GIT_AUTHOR_NAME": "ringlab", "GIT_AUTHOR_EMAIL": "ringlab@ringlab.invalid",
             "GIT_COMMITTER_NAME": "ringlab", "GIT_COMMITTER_EMAIL": "ringlab@ringlab.invalid"}
UNUSED_FUNCTION = 'static void __attribute__((used)) ringlab_unused(void) { __asm__ __volatile__(".skip 48"); }'
SWAPPED = ("ptr_ring_full_irq", "ptr_ring_full_any")

#: (kind, subject, argument) in commit order; the argument is the function a comment goes before
SERIES: tuple[tuple[str, str, str], ...] = (
    ("comment", "ptr_ring: say what the full test reads", "__ptr_ring_full"),
    ("comment", "ptr_ring: note on the produce path", "__ptr_ring_produce"),
    ("comment", "ptr_ring: note on peeking", "__ptr_ring_peek"),
    ("comment", "ptr_ring: note on the empty test", "__ptr_ring_empty"),
    ("comment", "ptr_ring: note on consuming", "__ptr_ring_consume"),
    ("layout", "ptr_ring: add an unused function ahead of the ring code", ""),
    ("unrelated", "docs: describe the test series", ""),
    ("reorder", "ptr_ring: define ptr_ring_full_any before ptr_ring_full_irq", ""),
    ("cost", "ptr_ring: spin after the batch flush", ""),
    ("comment", "ptr_ring: note on batched consuming", "ptr_ring_consume_batched"),
    ("comment", "ptr_ring: note on init", "ptr_ring_init"),
    ("comment", "ptr_ring: note on resize", "ptr_ring_resize"),
    ("comment", "ptr_ring: note on cleanup", "ptr_ring_cleanup"),
)

WHAT = {
    "base": "the real header of {source}",
    "comment": "adds a comment line before {arg}(): no code change",
    "layout": "adds an unused function (48 bytes of .text) ahead of the ring code: moves code, runs nothing",
    "unrelated": "changes another file: not a candidate (skipped)",
    "reorder": "swaps the definitions of ptr_ring_full_irq and ptr_ring_full_any: no cost",
    "cost": "spins {spins} iterations after each batch flush in __ptr_ring_discard_one: "
            "at least {extra:+.2f} instructions/op (mode 0, ring of 1000, batch 16)",
}


class TestRepoError(DataError):
    """The header does not have what the series edits (a function, the flush anchor)."""


@dataclass(frozen=True)
class Commit:
    sha: str
    kind: str
    subject: str
    what: str
    has_cost: bool


@dataclass(frozen=True)
class TestRepo:
    tree: Path
    source: Path          # the header the series starts from
    spins: int
    commits: tuple[Commit, ...]   # base first

    @property
    def good(self) -> str:
        return self.commits[0].sha

    @property
    def bad(self) -> str:
        return self.commits[-1].sha

    @property
    def planted(self) -> Commit:
        return next(c for c in self.commits if c.kind == "cost")

    def by_sha(self) -> dict[str, Commit]:
        return {c.sha: c for c in self.commits}


def source_header() -> Path | None:
    """``include/linux/ptr_ring.h`` of the newest kernel header tree here, or None."""
    trees = kh.header_trees()
    return trees[0] / HEADER if trees else None


# -- the edits --------------------------------------------------------------------------------
def _def_line(lines: list[str], name: str) -> int | None:
    pat = re.compile(rf"^static\s+inline\s+[^(;]*\b{re.escape(name)}\s*\(")
    return next((i for i, ln in enumerate(lines) if pat.match(ln)), None)


def _function_span(lines: list[str], name: str, where: Path) -> tuple[int, int]:
    """[first, last] line of the definition of ``name`` (last: its closing brace at column 0)."""
    start = _def_line(lines, name)
    end = None if start is None else next((i for i in range(start, len(lines))
                                           if lines[i].rstrip("\r\n") == "}"), None)
    if start is None or end is None:
        raise TestRepoError(f"{where}: no definition of {name}() ending with '}}' at column 0; the test "
                            "series needs a ptr_ring.h of v4.12 or later")
    return start, end


def comment_edit(text: str, name: str, note: str, where: Path) -> str:
    lines = text.splitlines(keepends=True)
    i = _def_line(lines, name)
    if i is None:
        raise TestRepoError(f"{where}: no definition of {name}(): the test series puts a comment before it")
    return "".join(lines[:i] + [f"/* ringlab test series: {note} */\n"] + lines[i:])


def layout_edit(text: str, where: Path) -> str:
    lines = text.splitlines(keepends=True)
    i = next((k for k, ln in enumerate(lines) if re.match(r"^struct\s+ptr_ring\s*\{", ln)), None)
    if i is None:
        raise TestRepoError(f"{where}: no 'struct ptr_ring {{' line: the unused function goes before it")
    return "".join(lines[:i] + [UNUSED_FUNCTION + "\n", "\n"] + lines[i:])


def reorder_edit(text: str, where: Path) -> str:
    lines = text.splitlines(keepends=True)
    a0, a1 = _function_span(lines, SWAPPED[0], where)
    b0, b1 = _function_span(lines, SWAPPED[1], where)
    if not a1 < b0:
        raise TestRepoError(f"{where}: {SWAPPED[0]}() is not defined before {SWAPPED[1]}()")
    return "".join(lines[:a0] + lines[b0:b1 + 1] + lines[a1 + 1:b0] + lines[a0:a1 + 1] + lines[b1 + 1:])


def code_tokens(text: str) -> list[str]:
    """The header's tokens with comments left out: equal for two texts that differ in comments
    and blank space only."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S).split()


# -- the repository ---------------------------------------------------------------------------
def _git(repo: Path, *args: str, n: int = 0) -> str:
    date = f"2024-01-01T00:{n:02d}:00+00:00"
    proc = hgit.run(list(args), repo, check=False, env=dict(_IDENTITY, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date))
    if proc.returncode != 0:
        raise TestRepoError(f"{repo}: git {args[0]} failed: {hgit.last_lines(proc.stderr)}")
    return proc.stdout.decode(errors="replace").strip()


def _commit(repo: Path, subject: str, n: int) -> str:
    _git(repo, "add", "-A", n=n)
    _git(repo, "commit", "-q", "--no-verify", "-m", subject, n=n)
    return _git(repo, "rev-parse", "HEAD", n=n)


def _apply_cost(repo: Path, spins: int) -> None:
    bp = builtin_patches.builtin_patch(f"builtin:flush-delay:{spins}", repo / HEADER)
    with tempfile.NamedTemporaryFile("w", suffix=".diff", dir=repo / ".git", delete=False) as f:
        f.write(bp.diff)
    proc = hgit.apply(Path(f.name), repo)
    os.unlink(f.name)
    if proc.returncode != 0:
        raise TestRepoError(f"{repo}: builtin:flush-delay:{spins} does not apply: {hgit.last_lines(proc.stderr)}")


def _step(repo: Path, kind: str, subject: str, arg: str, spins: int) -> None:
    path = repo / HEADER
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if kind == "comment":
        new = comment_edit(text, arg, subject.split(": ", 1)[-1], path)
    elif kind == "layout":
        new = layout_edit(text, path)
    elif kind == "reorder":
        new = reorder_edit(text, path)
    elif kind == "cost":
        _apply_cost(repo, spins)
        return
    else:
        (repo / "Documentation").mkdir(exist_ok=True)
        (repo / "Documentation" / "ringlab-series.txt").write_text(subject + "\n")
        return
    path.write_text(new, encoding="utf-8", errors="surrogateescape")


def _build(repo: Path, source: Path, spins: int) -> list[Commit]:
    (repo / HEADER).parent.mkdir(parents=True)
    shutil.copyfile(source, repo / HEADER)
    _git(repo, "init", "-q", "-b", "main")
    out = [Commit(_commit(repo, f"ptr_ring.h from {source.parents[2].name}", 0), "base",
                  f"ptr_ring.h from {source.parents[2].name}", WHAT["base"].format(source=source), False)]
    cost = False
    for n, (kind, subject, arg) in enumerate(SERIES, start=1):
        _step(repo, kind, subject, arg, spins)
        cost = cost or kind == "cost"
        what = WHAT[kind].format(arg=arg, spins=spins, extra=builtin_patches.expected_extra_per_op(spins))
        out.append(Commit(_commit(repo, subject, n), kind, subject, what, cost))
    return out


def build(spins: int = DEFAULT_SPINS, source: Path | None = None, root: Path | None = None) -> TestRepo | None:
    """The test repository (built, or reused when the same one is there); None when this machine
    has no kernel header tree to start from."""
    source = Path(source) if source else source_header()
    if source is None:
        return None
    builtin_patches.parse_builtin(f"builtin:flush-delay:{spins}")   # PatchError for a bad N
    key = hashlib.sha256(source.read_bytes() + f"|{spins}|{SERIES_VERSION}|{SERIES!r}".encode()).hexdigest()[:12]
    root = Path(root) if root else paths.build_dir() / "bisect-testrepo"
    final = root / key
    if not (final / ".git" / MARKER).is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            commits = _build(tmp, source, spins)
            (tmp / ".git" / MARKER).write_text(json.dumps([asdict(c) for c in commits], indent=1) + "\n")
            if not (final / ".git" / MARKER).is_file():
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    commits = tuple(Commit(**c) for c in json.loads((final / ".git" / MARKER).read_text()))
    return TestRepo(tree=final, source=source, spins=spins, commits=commits)
