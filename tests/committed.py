"""The committed runs under results/, as the tests that check them see them.

``make reproduce`` on a host without committed runs writes local runs beside the committed
ones (``results/<experiment>/<host>/`` with a ``.gitignore``, ringlab.lab.results_index); a run
it wrote into a committed host's folder is untracked until someone commits it.  Neither is a
committed run: the tests that hold committed runs to today's code take only what git tracks
(where the checkout has no git, what is not in a local host folder).
"""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from ringlab import paths
from ringlab.lab.results_index import is_local

RESULTS = paths.ROOT / "results"


@functools.lru_cache(maxsize=1)
def _tracked() -> frozenset[str] | None:
    try:
        p = subprocess.run(["git", "-C", str(paths.ROOT), "ls-files", "-z", "--", "results"],
                           capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return frozenset(f for f in p.stdout.decode("utf-8", "surrogateescape").split("\0") if f)


def is_committed(path: Path) -> bool:
    """Whether ``path`` (a file or a run folder under results/) is committed."""
    path = Path(path)
    try:
        rel = path.resolve().relative_to(paths.ROOT.resolve())
    except ValueError:
        return False
    parts = rel.parts
    if len(parts) >= 3 and is_local(paths.ROOT.joinpath(*parts[:3])):
        return False
    tracked = _tracked()
    if tracked is None:
        return True
    key = rel.as_posix()
    return key in tracked or any(f.startswith(key + "/") for f in tracked)


def committed(found) -> list[Path]:
    """The committed ones of ``found`` (paths under results/), in their order."""
    return [p for p in found if is_committed(p)]
