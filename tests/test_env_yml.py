"""env.yml (conda) and pyproject.toml (pip/venv) list the same dependencies."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _name(spec: str) -> tuple[str, str]:
    m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(.*)", spec)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def _pyproject() -> dict[str, str]:
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(proj["dependencies"])
    for extra in proj.get("optional-dependencies", {}).values():
        specs += extra
    return dict(_name(s) for s in specs)


def _env_yml() -> dict[str, str]:
    deps = {}
    text = (ROOT / "env.yml").read_text()
    for line in text[text.index("dependencies:"):].splitlines():
        m = re.match(r"^  - ([A-Za-z0-9_.-]+[^#]*)$", line)
        if m:
            name, ver = _name(m.group(1))
            if name not in ("python", "pip", "c-compiler"):
                deps[name] = ver
    return deps


def test_same_packages_and_bounds():
    assert _env_yml() == _pyproject()


def test_env_yml_uses_conda_forge_without_defaults():
    text = (ROOT / "env.yml").read_text()
    assert "conda-forge" in text and "nodefaults" in text
