"""No dead code in the package: vulture at 80% confidence (unused imports, variables, arguments
and unreachable code) finds nothing in ringlab/."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _vulture() -> list[str] | None:
    exe = Path(sys.executable).with_name("vulture")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("vulture")
    return [found] if found else None


def test_vulture_finds_no_dead_code_in_the_package():
    cmd = _vulture()
    if cmd is None:
        pytest.skip("vulture not installed (pip extra 'test')")
    r = subprocess.run(cmd + ["ringlab", "--min-confidence", "80"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and not r.stdout.strip(), r.stdout + r.stderr


def test_vulture_would_see_dead_code(tmp_path):
    """The check can fail: an unused import in a copy of a module is reported."""
    cmd = _vulture()
    if cmd is None:
        pytest.skip("vulture not installed (pip extra 'test')")
    mod = tmp_path / "m.py"
    mod.write_text("import os\n\n\ndef f(x):\n    return 1\n    print(x)\n")
    r = subprocess.run(cmd + [str(mod), "--min-confidence", "80"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unused import 'os'" in r.stdout, r.stdout
