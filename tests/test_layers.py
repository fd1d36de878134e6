"""The layers contract in pyproject.toml ([tool.importlinter]): each layer of ringlab imports only
the layers below it.  The second test breaks the contract on a copy of the package on purpose."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="pip install import-linter (the test extra)")

ROOT = Path(__file__).resolve().parent.parent
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _lint(tree: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", LINT, "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "ringlab", tmp_path / "ringlab", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_layers_contract_is_kept(tmp_path):
    r = _lint(_copy(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    tree = _copy(tmp_path)
    sysfs = tree / "ringlab" / "system" / "sysfs.py"
    sysfs.write_text(sysfs.read_text() + "\nimport ringlab.lab.notebook  # noqa: E402, F401\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert "ringlab.system is not allowed to import ringlab.lab" in r.stdout, r.stdout + r.stderr
    assert "ringlab.system.sysfs -> ringlab.lab.notebook" in r.stdout


def test_the_pipeline_may_not_import_the_simulations(tmp_path):
    tree = _copy(tmp_path)
    compare = tree / "ringlab" / "stats" / "compare.py"
    compare.write_text(compare.read_text() + "\nimport ringlab.simulate.noise  # noqa: E402, F401\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert "ringlab.stats is not allowed to import ringlab.simulate" in r.stdout, r.stdout + r.stderr


def test_simulations_serve_no_module_of_the_package(tmp_path):
    tree = _copy(tmp_path)
    report = tree / "ringlab" / "report" / "tables.py"
    report.write_text(report.read_text() + "\nimport ringlab.simulate.noise  # noqa: E402, F401\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert "ringlab.report is not allowed to import ringlab.simulate" in r.stdout, r.stdout + r.stderr


def test_a_table_below_report_breaks_the_contract(tmp_path):
    tree = _copy(tmp_path)
    src = tree / "ringlab" / "sources" / "patches.py"
    src.write_text(src.read_text() + "\nimport pandas  # noqa: E402, F401\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert "ringlab.sources is not allowed to import pandas" in r.stdout, r.stdout + r.stderr
