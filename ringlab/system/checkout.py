"""The ringlab checkout itself: its commit and whether the tree was dirty (env.json's ``git``)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from ringlab import paths


def git_info(root: str | Path | None = None) -> dict[str, Any]:
    """Commit of the ringlab checkout and whether the tree was dirty (argv only, no shell)."""
    root = Path(root or paths.ROOT)

    def git(*args: str) -> str:
        # rstrip only: porcelain lines start with a meaningful space.
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.rstrip("\n")
    try:
        commit = git("rev-parse", "HEAD")
    except FileNotFoundError:
        return {"commit": None, "dirty": None, "error": "git not installed"}
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        return {"commit": None, "dirty": None, "error": f"not a git checkout ({root}): {getattr(e, 'stderr', '') or e}".strip()}
    try:
        status = git("status", "--porcelain", "--untracked-files=no")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        status = None
    return {"commit": commit, "dirty": None if status is None else bool(status),
            "dirty_files": [] if not status else [ln[3:] for ln in status.splitlines()][:50]}
