"""The ringlab checkout itself: its commit and whether the tree was dirty (env.json's ``git``).

"Dirty" means uncommitted changes to tracked files outside results/ and scratch/: runs kept
there are data, not code, so a run written into the checkout (``make reproduce``) never makes
the code dirty.  Untracked files do not count either."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ringlab import paths
from ringlab.system import git as hgit


#: top-level folders of the checkout that hold data (runs), not code
DATA_DIRS = ("results", "scratch")
#: the ``git status`` arguments whose output ``code_changes`` reads
STATUS_ARGS = ("status", "--porcelain", "--untracked-files=no", "--no-renames")


def _is_data(path: str) -> bool:
    path = path.strip()
    if path.startswith('"'):  # a quoted name (special characters): the folder part is plain text
        path = path[1:]
    return path.split("/", 1)[0] in DATA_DIRS and "/" in path


def code_changes(porcelain: str) -> list[str]:
    """The lines of ``git status --porcelain`` (STATUS_ARGS) that change code: every line but
    those of files under results/ and scratch/."""
    return [ln for ln in porcelain.splitlines() if ln.strip() and not _is_data(ln[3:])]


def git_info(root: str | Path | None = None) -> dict[str, Any]:
    """Commit of the ringlab checkout and whether the tree was dirty (hardened git: see
    ringlab.system.git; a checkout of another user is reported, never made an exception)."""
    root = Path(root or paths.ROOT)

    def git(*args: str) -> str:
        # rstrip only: porcelain lines start with a meaningful space.
        return hgit.text(list(args), root, timeout=10, what=f"git -C {root}")
    try:
        commit = git("rev-parse", "HEAD")
    except hgit.GitRefused as e:
        return {"commit": None, "dirty": None, "error": str(e)}
    except hgit.GitError as e:
        if "not installed" in str(e):
            return {"commit": None, "dirty": None, "error": "git not installed"}
        return {"commit": None, "dirty": None, "error": f"not a git checkout ({root}): {e}".strip()}
    try:
        changes = code_changes(git(*STATUS_ARGS))
    except hgit.GitError:
        changes = None
    return {"commit": commit, "dirty": None if changes is None else bool(changes),
            "dirty_files": [ln[3:] for ln in changes or []][:50]}
