"""Where things live: the repository root, csrc/, build/, results/."""
from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
NOTEBOOKS = ROOT / "notebooks"


def build_dir() -> Path:
    """Build output folder (git-ignored).  RINGLAB_BUILD overrides it."""
    return Path(os.environ.get("RINGLAB_BUILD", ROOT / "build"))


def bin_dir() -> Path:
    return build_dir() / "bin"


def scratch_dir() -> Path:
    """Where notebook runs outside ``ringlab reproduce`` go: $RINGLAB_SCRATCH or <repo>/scratch."""
    return Path(os.environ.get("RINGLAB_SCRATCH") or (ROOT / "scratch"))


def results_dir() -> Path:
    return Path(os.environ.get("RINGLAB_RESULTS", ROOT / "results"))
