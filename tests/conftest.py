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
# A run given no -p seed draws one; the tests' runs use seed 1, whose layouts the mock binaries
# cover and their assertions expect (tests/test_layout_seed.py unsets it to see fresh draws).
os.environ.setdefault("RINGLAB_SEED", "1")


_BASETEMP_TOP: list[Path] = []


def pytest_configure(config):
    """Under root, the session's temporary folders lie in a folder of their own, not in
    /tmp/pytest-of-root, which every pytest session resets to 0700, and others may search each
    one (o+x, not list it): the unprivileged user of the compiles and trials
    (ringlab.system.privilege) must reach what a test builds there, as in a checkout."""
    if os.geteuid() != 0:
        return
    if not getattr(config.option, "basetemp", None) and not hasattr(config, "workerinput"):
        import tempfile
        top = Path(tempfile.mkdtemp(prefix="pytest-ringlab-"))
        os.chmod(top, 0o711)
        _BASETEMP_TOP.append(top)
        config.option.basetemp = str(top / "t")
    from _pytest.tmpdir import TempPathFactory
    made = TempPathFactory.mktemp

    def mktemp(self, basename, numbered=True):
        p = made(self, basename, numbered)
        chain = [p, *p.parents]
        top = next((i for i, d in enumerate(chain) if d.name.startswith("pytest-ringlab-")), None)
        for d in chain[:top + 1] if top is not None else (p, self.getbasetemp()):
            os.chmod(d, os.stat(d).st_mode | 0o011)
        return p
    if not getattr(made, "searchable", False):
        mktemp.searchable = True
        TempPathFactory.mktemp = mktemp


#: files whose tests wait minutes on one fixture (a QEMU boot, all CPUs busy under TCG): under
#: pytest-xdist they go first and to one worker, one after the other, so that the rest of the
#: suite runs beside them on the other workers instead of after them or beside a second boot
LONG_FIRST = ("tests/test_guest_topology.py", "tests/test_guest_kmod.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` hands out one file at a time; the QEMU guests' files are one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GuestsTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "qemu-guests" if scope in LONG_FIRST else scope
    return GuestsTogether(config, log)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``make test`` runs ``-n auto --dist loadfile --no-loadscope-reorder``)
    the files are handed out in this order: the QEMU boots first, then the files with most tests.
    Every worker computes the same order; a run without workers keeps pytest's own."""
    if not (getattr(config.option, "numprocesses", None) or hasattr(config, "workerinput")):
        return
    per_file: dict[str, int] = {}
    for it in items:
        f = it.nodeid.split("::", 1)[0]
        per_file[f] = per_file.get(f, 0) + 1
    first = {f: i for i, f in enumerate(LONG_FIRST)}
    rank = {f: (first.get(f, len(first)), -n, f) for f, n in per_file.items()}
    items.sort(key=lambda it: rank[it.nodeid.split("::", 1)[0]])


def pytest_unconfigure(config):
    import shutil
    for top in _BASETEMP_TOP:
        shutil.rmtree(top, ignore_errors=True)


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
    monkeypatch.setenv("RINGLAB_SEED", "1")
    for k in list(os.environ):
        if k.startswith("FAKE_"):
            monkeypatch.delenv(k)
    return build / "bin"


@pytest.fixture
def captured(monkeypatch) -> dict:
    """The matplotlib figures a report draws, by file stem (the files are written all the same)."""
    from ringlab.report import figures
    figs = {}
    real = figures.save

    def keep(fig, out_dir, name):
        figs[name] = fig
        return real(fig, out_dir, name)
    monkeypatch.setattr(figures, "save", keep)
    return figs
