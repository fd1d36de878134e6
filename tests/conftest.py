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


@pytest.fixture
def fakebin(tmp_path, monkeypatch) -> Path:
    """build/bin holding the mock ptr_ring_test for every built-in variant (RINGLAB_BUILD), with
    results, tuning state and CPU locks in the test's own folder and no FAKE_* knobs inherited."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes"))
    import fake_ptr_ring_test as fake
    build = tmp_path / "build"
    fake.install(str(build / "bin"), sys.executable)
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "scratch"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("RINGLAB_LOCK_DIR", str(tmp_path / "locks"))
    for k in list(os.environ):
        if k.startswith("FAKE_"):
            monkeypatch.delenv(k)
    return build / "bin"
