"""Shared pytest fixtures."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SEEDS = ROOT.parent / "shared" / "seeds"

# Tests never touch the real cpufreq state unless they ask for it.
os.environ.setdefault("RINGLAB_STATE_DIR", str(ROOT / "build" / "test-state"))
# ... and never share CPU locks with a real run on this machine.
os.environ.setdefault("RINGLAB_LOCK_DIR", str(ROOT / "build" / "test-locks"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def seeds_dir() -> Path:
    if not SEEDS.is_dir():
        pytest.skip(f"seed threads not found at {SEEDS}")
    return SEEDS
