"""``git:TREE@REV``: files at revision REV of the git repository TREE.

One implementation serves kernel header sources (ringlab.kernel_header) and ringtest
trees (ringlab.kernel_tree): parse the spec, resolve REV to a commit, read one file at
that commit, or export the files under some paths into ``build/kernel-src/`` (one folder
per commit and set of paths, reused).  Every git call goes through ringlab.system.git:
no repository config, hook, filter or pager runs, and files are read as raw blobs.
Errors are ringlab.system.git.GitError (a ParamError), whose message names the spec.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ringlab.paths import expand_user
from ringlab import paths
from ringlab.system import git
from ringlab.system.git import GitError, GitRefused

PREFIX = "git:"


@dataclass(frozen=True)
class GitSource:
    spec: str      # as given, "git:TREE@REV"
    tree: Path     # TREE, user-expanded (not resolved)
    rev: str

    @property
    def what(self) -> str:
        return f"{self.spec!r}"


def parse(spec: str) -> GitSource:
    """``git:TREE@REV`` -> GitSource (nothing read from disk but whether TREE is a folder)."""
    s = str(spec).strip()
    if not s.startswith(PREFIX):
        raise GitError(f"{s!r}: expected git:TREE@REV (e.g. git:~/linux@v6.1)")
    body = s[len(PREFIX):]
    tree_s, at, rev = body.rpartition("@")
    if (not at or not tree_s or not rev
            or (not expand_user(tree_s, GitError).is_dir() and expand_user(body, GitError).is_dir())):
        raise GitError(f"{s!r}: expected git:TREE@REV with both TREE and REV (e.g. git:~/linux@v6.1)")
    if rev.startswith("-"):
        raise GitError(f"{s!r}: REV {rev!r} starts with '-'; allowed: a commit, tag or branch name")
    return GitSource(s, expand_user(tree_s, GitError), rev)


def _repo(src: GitSource) -> Path:
    tree = src.tree.resolve()
    if not tree.is_dir():
        raise GitError(f"{src.what}: git tree {tree} is not a directory")
    return tree


def _call(src: GitSource, fn, *args, **kw):
    """Run one ringlab.system.git function for src, prefixing its errors with the spec."""
    try:
        return fn(*args, ceiling=_repo(src).parent, what=f"git -C {_repo(src)}", **kw)
    except GitRefused as e:
        raise GitRefused(f"{src.what}: {e}") from None
    except GitError as e:
        raise GitError(f"{src.what}: {e}") from None


def resolve_commit(src: GitSource) -> str:
    """The full commit id REV names in TREE."""
    try:
        sha = _call(src, git.rev_parse_commit, _repo(src), src.rev)
    except GitRefused:
        raise
    except GitError as e:
        if "cannot resolve" in str(e):
            raise
        raise GitError(f"{src.what}: git cannot resolve {src.rev!r} to a commit in {_repo(src)}: "
                       f"{str(e).removeprefix(src.what + ': ')}") from None
    if sha is None:
        raise GitError(f"{src.what}: git cannot resolve {src.rev!r} to a commit in {_repo(src)}: "
                       "unknown revision")
    return sha


def read_file(src: GitSource, commit: str, path: str, max_bytes: int) -> bytes:
    """Raw bytes of ``path`` at ``commit``: a regular file (not a symlink or submodule) of at
    most ``max_bytes``.  FileNotFoundError when the commit has no such path."""
    return _call(src, git.read_file, _repo(src), commit, path, max_bytes)


def export_root() -> Path:
    return paths.build_dir() / "kernel-src"


def export(src: GitSource, prefixes: tuple[str, ...], commit: str | None = None) -> tuple[Path, str]:
    """A folder in build/kernel-src/ holding the regular files under ``prefixes`` at REV, and
    the commit.  Exported once per (commit, prefixes), then reused."""
    commit = commit or resolve_commit(src)
    key = hashlib.sha256(f"git\0{commit}\0{','.join(sorted(prefixes))}".encode()).hexdigest()[:16]
    final = export_root() / f"git-{commit[:12]}-{key}"
    if final.is_dir():
        return final, commit
    export_root().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=export_root()))
    try:
        n = _call(src, git.export, _repo(src), commit, tuple(prefixes), tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if n == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise GitError(f"{src.what}: {', '.join(prefixes)} not found at {src.rev} ({commit[:12]})")
    try:
        os.rename(tmp, final)
    except OSError:          # a concurrent exporter's copy wins
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise
    return final, commit


__all__ = ["GitSource", "GitError", "GitRefused", "parse", "resolve_commit", "read_file", "export",
           "export_root", "PREFIX"]
