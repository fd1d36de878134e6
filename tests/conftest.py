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


_BASETEMP_TOP: list[Path] = []


def pytest_configure(config):
    """Under root, the session's temporary folders lie in a folder of their own that others
    may search (0711), not in /tmp/pytest-of-root, which every pytest session resets to 0700:
    the unprivileged user of the compiles and trials must reach what a test builds."""
    if os.geteuid() != 0 or getattr(config.option, "basetemp", None) or hasattr(config, "workerinput"):
        return
    import tempfile
    top = Path(tempfile.mkdtemp(prefix="pytest-ringlab-"))
    os.chmod(top, 0o711)
    _BASETEMP_TOP.append(top)
    config.option.basetemp = str(top / "t")


def pytest_unconfigure(config):
    import shutil
    for top in _BASETEMP_TOP:
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(autouse=True)
def _tmp_path_reachable(request):
    """Under root, a test's tmp_path (pytest makes it and its parents 0700) can be searched by
    others, so the unprivileged user that compiles and runs trials (ringlab.system.privilege)
    reaches what a test builds there, as it would in a checkout; nothing becomes listable."""
    if os.geteuid() == 0 and "tmp_path" in request.fixturenames:
        tmp = request.getfixturevalue("tmp_path")
        base = request.getfixturevalue("tmp_path_factory").getbasetemp().parent
        for d in [tmp, *tmp.parents]:
            os.chmod(d, os.stat(d).st_mode | 0o011)
            if d == base:
                break
    yield


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
    # The mock binaries are Python scripts of this suite, whose interpreter may lie where only
    # root can reach it: under root they run as root (tests/test_least_privilege.py checks the
    # unprivileged trials with real binaries).
    monkeypatch.setenv("RINGLAB_RUN_USER", "root")
    for k in list(os.environ):
        if k.startswith("FAKE_"):
            monkeypatch.delenv(k)
    return build / "bin"
