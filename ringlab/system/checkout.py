"""The ringlab checkout itself: its commit and whether the tree was dirty (env.json's ``git``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ringlab import paths
from ringlab.system import git as hgit


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
        status = git("status", "--porcelain", "--untracked-files=no")
    except hgit.GitError:
        status = None
    return {"commit": commit, "dirty": None if status is None else bool(status),
            "dirty_files": [] if not status else [ln[3:] for ln in status.splitlines()][:50]}
