"""The commits of a bisection: resolve TREE@REV, list ``good..bad``, keep the ones that change
what the experiment measures, and describe a commit (subject, author, date).

Every git call goes through ``ringlab.system.git`` (the hardened runner: clean environment, no
hook, pager, external diff, signature check or other program the tree's config names, literal
pathspecs).
"""
from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from ringlab import catalog
from ringlab.paths import expand_user
from ringlab.errors import ParamError
from ringlab.system import git as hgit

#: what each experiment measures (ringlab.catalog): the paths whose change makes a commit a candidate
MEASURED_PATHS = {e.name: e.kernel_paths for e in catalog.EXPERIMENTS if e.kernel_paths}
@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str

    @property
    def short(self) -> str:
        return self.sha[:12]

    def to_dict(self) -> dict:
        return asdict(self)


def _run(args: list[str], tree: Path) -> subprocess.CompletedProcess:
    """One git command in ``tree`` (not checked: the caller reads the exit code)."""
    return hgit.run(args, tree, check=False, what=f"git {args[0]}")


def _text(args: list[str], tree: Path, what: str) -> str:
    proc = _run(args, tree)
    if proc.returncode != 0:
        err = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if ln.strip()]
        raise ParamError(f"{what}: {err[-1].strip() if err else f'git exit {proc.returncode}'}")
    return proc.stdout.decode(errors="replace").rstrip("\n")


def check_tree(tree: str) -> Path:
    """The absolute folder of a git tree, or ParamError naming ``tree``."""
    p = expand_user(tree).resolve()
    if not p.is_dir():
        raise ParamError(f"parameter 'tree': {tree!r} is not a directory; allowed: a git tree's folder")
    _text(["rev-parse", "--git-dir"], p, f"parameter 'tree': {p} is not a git repository")
    return p


def resolve(tree: Path, rev: str, name: str) -> str:
    """The full commit id ``rev`` names in ``tree``; ParamError (exit 2) when it names none."""
    if not rev or rev.startswith("-"):
        raise ParamError(f"parameter '{name}': {rev!r}; allowed: a commit, tag or branch of {tree}")
    proc = _run(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], tree)
    if proc.returncode != 0:
        raise ParamError(f"parameter '{name}': {rev!r} is not a commit in {tree}; allowed: a commit, "
                         "tag or branch of that tree")
    return proc.stdout.decode().strip()


def check_order(tree: Path, good: str, bad: str) -> None:
    """ParamError unless ``good`` is an ancestor of ``bad`` (and not the same commit)."""
    if good == bad:
        raise ParamError(f"parameter 'good': {good[:12]} is the same commit as 'bad'; allowed: an "
                         "ancestor of bad")
    proc = _run(["merge-base", "--is-ancestor", good, bad], tree)
    if proc.returncode == 1:
        raise ParamError(f"parameter 'good': {good[:12]} is not an ancestor of bad {bad[:12]} (good "
                         "later than bad, or on another branch); allowed: an ancestor of bad")
    if proc.returncode != 0:
        raise ParamError(f"parameter 'good': git merge-base failed in {tree}: "
                         f"{proc.stderr.decode(errors='replace').strip()[-200:]}")


def commits(tree: Path, good: str, bad: str, paths: tuple[str, ...] = ()) -> list[str]:
    """``good..bad`` in first-parent order, oldest first; only those changing ``paths`` when given
    (a merge counts by its change against its first parent)."""
    args = ["rev-list", "--first-parent", "--reverse", f"{good}..{bad}"]
    if paths:
        args += ["--", *paths]
    out = _text(args, tree, f"parameter 'tree': git rev-list {good[:12]}..{bad[:12]}")
    return [ln.strip() for ln in out.splitlines() if ln.strip()]


def describe(tree: Path, sha: str) -> Commit:
    """A commit's subject, author (name <email>) and author date (ISO 8601)."""
    out = _text(["log", "-1", "--format=%H%x00%s%x00%an <%ae>%x00%aI", sha, "--"], tree,
                f"parameter 'tree': commit {sha[:12]}")
    full, subject, author, date = (out.split("\x00") + ["", "", "", ""])[:4]
    return Commit(full, subject, author, date)
