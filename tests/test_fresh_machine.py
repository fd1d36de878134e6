"""A fresh machine: the set-up step installs what the notebooks use or says what is missing, and a
notebook whose input is not here is reported skipped with the reason, never ok or failed."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from ringlab import paths
from ringlab.lab import machine_setup as ms
from ringlab.lab import reproduce
from ringlab.run.skipped import record_skipped
from ringlab.studies.explore.runs import Runs


# -- the set-up step -------------------------------------------------------------------------------
class FakeApt:
    """apt's answers without apt: the packages it knows, and what installing them does."""

    def __init__(self, known: dict[str, list[str]], fail: tuple[str, ...] = ()):
        self.known, self.fail, self.installed = known, fail, []

    def newest(self, pattern):
        import re
        found = [n for n in self.known if re.fullmatch(pattern, n)]
        return sorted(found)[-1] if found else None

    def first(self, names):
        return next((n for n in names if n in self.known), None)

    def install(self, pkgs):
        bad = [p for p in pkgs if p in self.fail]
        for p in pkgs:
            if p not in bad:
                self.installed.append(p)
                for have in self.known[p]:
                    HAVE.add(have)
        return bad


HAVE: set[str] = set()


def need(name, pkg, required=False):
    return ms.Need(name, f"{name} for the tests", lambda: name in HAVE, lambda apt: apt.first([pkg]), required)


@pytest.fixture
def machine(monkeypatch):
    HAVE.clear()
    monkeypatch.setattr(ms.os, "geteuid", lambda: 0)
    monkeypatch.setattr(ms.Apt, "available", staticmethod(lambda: True))
    monkeypatch.delenv(ms.INSTALL_VAR, raising=False)
    return [need("valgrind", "valgrind"), need("kernel source", "linux-source-6.1")]


def test_setup_installs_what_is_missing_and_says_why(machine):
    apt, log = FakeApt({"valgrind": ["valgrind"], "linux-source-6.1": ["kernel source"]}), []
    HAVE.add("valgrind")
    still = ms.setup(tuple(machine), apt, log.append)
    assert still == [] and apt.installed == ["linux-source-6.1"]
    assert log == ["ringlab setup: installing linux-source-6.1 (kernel source: kernel source for the tests)"]


def test_setup_with_installing_off_only_says_what_is_missing_and_how_to_get_it(machine, monkeypatch):
    monkeypatch.setenv(ms.INSTALL_VAR, "0")
    apt, log = FakeApt({"valgrind": ["valgrind"], "linux-source-6.1": ["kernel source"]}), []
    still = ms.setup(tuple(machine), apt, log.append)
    assert [n.name for n in still] == ["valgrind", "kernel source"] and apt.installed == []
    assert log[0] == ("ringlab setup: missing valgrind (valgrind for the tests): apt-get install valgrind; "
                      "installing is turned off (RINGLAB_INSTALL=0)")
    assert "skip that part and say why" in log[-1]


def test_setup_as_a_user_or_without_apt_installs_nothing(machine, monkeypatch):
    monkeypatch.setattr(ms.os, "geteuid", lambda: 1000)
    log = []
    still = ms.setup(tuple(machine), FakeApt({"valgrind": ["valgrind"]}), log.append)
    assert len(still) == 2 and "installing needs root" in log[0]
    assert "not in this system's package lists" in log[1]      # apt knows no kernel source here


def test_a_package_that_fails_to_install_is_said_and_the_rest_still_install(machine):
    apt, log = FakeApt({"valgrind": ["valgrind"], "linux-source-6.1": ["kernel source"]},
                       fail=("linux-source-6.1",)), []
    still = ms.setup(tuple(machine), apt, log.append)
    assert [n.name for n in still] == ["kernel source"] and apt.installed == ["valgrind"]
    assert log[-2].startswith("ringlab setup: missing kernel source")


def test_setup_stops_only_without_what_the_venv_needs(machine, monkeypatch):
    monkeypatch.setattr(ms, "NEEDS", (need("python3 venv", "python3-venv", required=True),))
    monkeypatch.setenv(ms.INSTALL_VAR, "0")
    monkeypatch.setattr(ms.Apt, "available", staticmethod(lambda: False))
    assert ms.main() == 1
    monkeypatch.setattr(ms, "NEEDS", (need("valgrind", "valgrind"),))
    assert ms.main() == 0


def test_setup_runs_with_plain_python_before_the_venv_exists():
    """`make` runs the step with the system's python3: it imports nothing outside the standard
    library (a fresh interpreter with only the checkout on its path)."""
    code = textwrap.dedent("""
        import sys
        before = set(sys.modules)
        import ringlab.lab.machine_setup
        extra = {m.split('.')[0] for m in set(sys.modules) - before}
        print(sorted(extra - set(sys.stdlib_module_names) - {'ringlab'}))
    """)
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=paths.ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(paths.ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_make_reproduce_and_make_test_run_the_setup_step_first():
    make = (paths.ROOT / "Makefile").read_text()
    assert "\tpython3 -m ringlab.lab.machine_setup" in make.replace("$(PYTHON)", "python3")
    assert "build: setup $(STAMP)" in make and "| setup" in make
    assert "RINGLAB_INSTALL ?= 1" in make and "export RINGLAB_INSTALL" in make
    ci = (paths.ROOT / ".ci" / "run").read_text()
    assert "linux-source" not in ci.split("make test")[0].replace("# ", "#").split("#")[0]


# -- a notebook that cannot measure here ---------------------------------------------------------
def _tiny_notebook(path: Path, body: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbformat.v4.new_code_cell('profile = "quick"\nout_dir = ""\nhost = ""')
    p.metadata["tags"] = ["parameters"]
    nb.cells = [p, nbformat.v4.new_markdown_cell("## Setup"), nbformat.v4.new_code_cell(body),
                nbformat.v4.new_markdown_cell("## Measure"),
                nbformat.v4.new_code_cell("raise RuntimeError('this cell needs the missing input')")]
    nbformat.write(nb, path)


@pytest.mark.slow
def test_a_notebook_without_its_input_is_skipped_with_the_reason(tmp_path, monkeypatch):
    nbdir = tmp_path / "nb"
    nbdir.mkdir()
    _tiny_notebook(nbdir / "a-needs.ipynb",
                   "from pathlib import Path\nfrom ringlab.lab import notebook as rn\n"
                   "rn.skip_rest_if('no widget here: apt-get install widget', 'ptr_ring', Path(out_dir))")
    _tiny_notebook(nbdir / "b-fails.ipynb", "pass")
    monkeypatch.setattr(reproduce.paths, "NOTEBOOKS", nbdir)
    monkeypatch.setattr(reproduce, "NOTEBOOKS", {"a-needs": "needs", "b-fails": "fails"})
    outs = reproduce.reproduce("smoke", results_root=tmp_path / "results", host="testhost", log=lambda m: None)
    assert [o.state for o in outs] == ["skipped", "failed"]
    assert outs[0].skipped == "no widget here: apt-get install widget"
    env = json.loads((outs[0].run_dir / "env.json").read_text())
    assert env["status"] == "skipped" and env["skipped_reason"] == outs[0].skipped and env["host"]
    assert "no widget here" in (outs[0].run_dir / "summary.md").read_text()
    executed = nbformat.read(outs[0].run_dir / "a-needs.ipynb", as_version=4)
    last = executed.cells[-1].outputs
    assert [o.get("text") for o in last] == ["not run here: no widget here: apt-get install widget\n"]
    text, code = reproduce.main_summary(outs, 12.0)
    assert code == 1 and text.splitlines()[0] == "0 of 2 notebooks ok, 1 skipped, 1 failed in 12 s"
    assert f"  a-needs: skipped (no widget here: apt-get install widget) in 0 s -> {outs[0].run_dir}" in \
        [ln.replace(f"{outs[0].seconds:.0f} s", "0 s") for ln in text.splitlines()]


def test_the_closing_lines_list_every_notebook_and_a_skip_is_not_a_failure(tmp_path):
    outs = [reproduce.Outcome("00-environment", tmp_path / "a", True, seconds=3.2),
            reproduce.Outcome("21-kernel-tests", tmp_path / "b", True, seconds=4, skipped="no ringtest: apt-get x")]
    text, code = reproduce.main_summary(outs, 9.4)
    assert code == 0
    assert text.splitlines()[:3] == ["1 of 2 notebooks ok, 1 skipped in 9 s",
                                     f"  00-environment: ok in 3 s -> {tmp_path / 'a'}",
                                     f"  21-kernel-tests: skipped (no ringtest: apt-get x) in 4 s -> {tmp_path / 'b'}"]


def test_skipped_runs_are_left_out_of_the_runs_read_across_and_said(tmp_path):
    run = tmp_path / "page-frag" / "h" / "20261207T000000Z-aaaaaa"
    record_skipped("page_frag", run, "no perf here", host="h")
    (run / "raw.csv").write_text("variant,trial\n")        # a header and no rows, as ringtest leaves it
    runs = Runs.under(tmp_path)
    assert len(runs) == 0 and runs.left_out == {"page-frag/h/20261207T000000Z-aaaaaa": "no perf here"}
    assert "Left out 1 run(s) that measured nothing here (skipped)" in runs.describe()
    assert "no perf here" in runs.describe()


@pytest.mark.slow
def test_kernel_tests_without_ringtest_is_skipped_and_compare_runs_reads_the_rest(tmp_path):
    """Notebook 21 on a machine without the kernel source is reported skipped, not ok; notebook
    90 over a results folder holding that run succeeds and says it left it out."""
    root = tmp_path / "results"
    out = reproduce.execute("21-kernel-tests", "smoke", host="fresh", results_root=root, timeout=600,
                            parameters={"tree": "debian:linux-source-0.1"})
    assert out.ok, out.error
    assert out.state == "skipped" and "linux-source-0.1" in out.skipped and "apt-get install" in out.skipped
    cmp = reproduce.execute("90-compare-runs", "smoke", host="fresh", results_root=tmp_path / "out", timeout=600,
                            parameters={"results_root": str(root)})
    assert cmp.ok and cmp.state == "ok", cmp.error
    executed = (cmp.run_dir / "90-compare-runs.ipynb").read_text()
    assert "Left out 1 run(s) that measured nothing here (skipped)" in executed
