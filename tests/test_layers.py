"""The contracts in pyproject.toml ([tool.importlinter]): each layer of ringlab imports only
the layers below it, and of those only the ones its row of docs/architecture.md's table names.
The second test breaks each kind of contract on a copy of the package on purpose."""
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
    assert "Contracts: 12 kept, 0 broken" in r.stdout


#: (module edited, the import added, what lint-imports must say): one break of each contract
BREAKS = [
    ("system/sysfs.py", "ringlab.lab.notebook", "ringlab.system is not allowed to import ringlab.lab"),
    ("stats/compare.py", "ringlab.simulate.noise", "ringlab.stats is not allowed to import ringlab.simulate"),
    ("report/tables.py", "ringlab.simulate.noise", "ringlab.report is not allowed to import ringlab.simulate"),
    ("sources/patches.py", "pandas", "ringlab.sources is not allowed to import pandas"),
    # below report in the layers, but not in report's row of docs/architecture.md's table
    ("report/tables.py", "ringlab.run.plan", "ringlab.report is not allowed to import ringlab.run"),
]


@pytest.mark.parametrize("module, imported, message", BREAKS, ids=[b[0] for b in BREAKS])
def test_each_contract_breaks_on_a_forbidden_import(tmp_path, module, imported, message):
    tree = _copy(tmp_path)
    f = tree / "ringlab" / module
    f.write_text(f.read_text() + f"\nimport {imported}  # noqa: E402, F401\n")
    r = _lint(tree)
    assert r.returncode != 0
    assert message in r.stdout, r.stdout + r.stderr
    if module == "system/sysfs.py":
        assert "ringlab.system.sysfs -> ringlab.lab.notebook" in r.stdout
