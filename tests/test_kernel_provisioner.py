"""The notebooks' kernel runs with transport encryption: no "running over TCP without
encryption" warning at each start; and pyproject's license is an SPDX string (no deprecation)."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from ringlab.lab import kernel_provisioner as kp

ROOT = Path(__file__).resolve().parent.parent
PAPERMILL = str(Path(sys.executable).with_name("papermill"))
KERNEL_JSON = Path(sys.prefix) / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"


def test_install_names_the_provisioner_once(tmp_path):
    spec = tmp_path / "kernel.json"
    argv = ["/v/bin/python", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.write_text(json.dumps({"argv": argv, "metadata": {"supported_encryption": ["curve"]}}))
    assert kp.install(spec) is True
    doc = json.loads(spec.read_text())
    if sys.version_info >= (3, 11):
        assert doc["argv"] == [argv[0], "-P", *argv[1:]]
    meta = doc["metadata"]
    assert meta["kernel_provisioner"]["provisioner_name"] == kp.NAME and meta["supported_encryption"] == ["curve"]
    before = spec.read_bytes()
    assert kp.install(spec) is False and spec.read_bytes() == before


def test_the_entry_point_is_the_provisioner():
    from importlib.metadata import entry_points
    eps = [e for e in entry_points(group="jupyter_client.kernel_provisioners") if e.name == kp.NAME]
    assert len(eps) == 1 and eps[0].load() is kp.CurveLocalProvisioner


@pytest.mark.skipif(not KERNEL_JSON.is_file(), reason=f"{KERNEL_JSON} missing: make venv installs it")
def test_a_notebook_kernel_starts_without_the_plain_tcp_warning(tmp_path):
    meta = json.loads(KERNEL_JSON.read_text()).get("metadata", {})
    if meta.get("kernel_provisioner", {}).get("provisioner_name") != kp.NAME:
        pytest.skip(f"{KERNEL_JSON} does not name {kp.NAME}: run make venv")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("print(6 * 7)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "n.ipynb"
    nbformat.write(nb, src)
    out = subprocess.run([PAPERMILL, str(src), str(tmp_path / "o.ipynb"), "-k", "python3"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "42" in (tmp_path / "o.ipynb").read_text()
    assert "without encryption" not in out.stderr, out.stderr[-2000:]


@pytest.mark.skipif(not KERNEL_JSON.is_file(), reason=f"{KERNEL_JSON} missing: make venv installs it")
def test_a_notebook_started_from_the_checkouts_parent_folder_imports_the_package(tmp_path):
    if "-P" not in json.loads(KERNEL_JSON.read_text())["argv"]:
        pytest.skip(f"{KERNEL_JSON} has no -P: run make venv (Python 3.11+)")
    parent = tmp_path / "parent"
    for sub in ("ringlab/build", "ringlab/tools", "ringlab/notebooks"):
        (parent / sub).mkdir(parents=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import ringlab.build.driver, ringlab\nprint(ringlab.__file__)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "n.ipynb")
    out = subprocess.run([PAPERMILL, str(tmp_path / "n.ipynb"), str(tmp_path / "o.ipynb"), "-k", "python3"],
                         capture_output=True, text=True, cwd=parent, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ModuleNotFoundError" not in (tmp_path / "o.ipynb").read_text()


def test_license_is_an_spdx_string():
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert doc["project"]["license"] == "MIT"
    req = [r for r in doc["build-system"]["requires"] if r.startswith("setuptools")]
    assert req == ["setuptools>=77"]   # the first setuptools that takes an SPDX string
