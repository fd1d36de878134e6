"""Notebooks: clean sources, documented parameters, and a smoke run of each through papermill."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ringlab import reproduce
from ringlab.paths import NOTEBOOKS

SOURCES = sorted(NOTEBOOKS.glob("*.ipynb"))
PAPERMILL = str(Path(sys.executable).with_name("papermill"))


def test_every_registered_notebook_exists():
    assert sorted(p.stem for p in SOURCES) == sorted(reproduce.NOTEBOOKS)


@pytest.mark.parametrize("nb_path", SOURCES, ids=lambda p: p.stem)
def test_source_notebook_is_clean(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    for c in nb.cells:
        if c.cell_type == "code":
            assert not c.get("outputs"), f"{nb_path.name}: source notebooks carry no outputs"
            assert c.get("execution_count") is None
    # the parameters cell is plain typed literals, one per line, each with a help comment
    for line in tagged[0].source.splitlines():
        if line.strip():
            assert ":" in line and "=" in line and "  # " in line, line
            assert "=" not in line.split("  # ", 1)[1], "papermill --help-notebook drops lines with '=' in the comment"


@pytest.mark.parametrize("nb_path", SOURCES, ids=lambda p: p.stem)
def test_paired_py_percent_matches(nb_path):
    import jupytext
    py = nb_path.with_suffix(".py")
    assert py.exists(), f"{py.name}: the py:percent pair is missing"
    a = [c.source for c in nbformat.read(nb_path, as_version=4).cells]
    b = [c.source for c in jupytext.read(py).cells]
    assert a == b, f"{nb_path.name} and {py.name} differ: run `jupytext --sync {py}`"


@pytest.mark.parametrize("nb_path", SOURCES, ids=lambda p: p.stem)
def test_help_notebook_documents_every_parameter(nb_path):
    nb = nbformat.read(nb_path, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])][0]
    names = [ln.split(":")[0].strip() for ln in params.source.splitlines() if ln.strip()]
    out = subprocess.run([PAPERMILL, "--help-notebook", str(nb_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for n in names:
        assert f"{n}: " in out.stdout, f"{n} missing from papermill --help-notebook"
    assert "profile: str (default \"quick\")" in out.stdout


def test_bad_parameter_names_the_parameter_and_allowed_values(tmp_path):
    nb = NOTEBOOKS / "10-ptr-ring-reorder.ipynb"
    out = subprocess.run([PAPERMILL, str(nb), str(tmp_path / "o.ipynb"), "-k", "python3",
                          "-p", "profile", "smoke", "-p", "modes", "0,7", "-p", "out_dir", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=NOTEBOOKS)
    assert out.returncode == 1
    executed = (tmp_path / "o.ipynb").read_text()
    assert "ParamError" in executed and "modes" in executed
    assert not (tmp_path / "run").exists(), "nothing is written for bad input"


def test_reproduce_continues_after_a_failing_notebook(tmp_path, monkeypatch):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    good = nbformat.v4.new_notebook()
    good.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbformat.v4.new_code_cell('profile = "quick"\nout_dir = ""\nhost = ""')
    p.metadata["tags"] = ["parameters"]
    good.cells = [p, nbformat.v4.new_code_cell("from pathlib import Path\nPath(out_dir).mkdir(parents=True)\n"
                                                "(Path(out_dir) / 'ok.txt').write_text(profile)")]
    bad = nbformat.v4.new_notebook(metadata=good.metadata)
    bad.cells = [p, nbformat.v4.new_code_cell("raise RuntimeError('boom')")]
    nbformat.write(bad, nbdir / "a-bad.ipynb")
    nbformat.write(good, nbdir / "b-good.ipynb")
    monkeypatch.setattr(reproduce.paths, "NOTEBOOKS", nbdir)
    monkeypatch.setattr(reproduce, "NOTEBOOKS", {"a-bad": "bad", "b-good": "good"})
    outs = reproduce.reproduce("smoke", results_root=tmp_path / "results", host="testhost", log=lambda m: None)
    assert [o.ok for o in outs] == [False, True]
    assert "boom" in outs[0].error
    assert (outs[0].run_dir / "a-bad.ipynb").exists(), "the failed notebook is kept, with its error cell"
    assert (outs[1].run_dir / "ok.txt").read_text() == "smoke"
    text, code = reproduce.main_summary(outs)
    assert code == 1 and "FAILED a-bad" in text
    index = (tmp_path / "results" / "README.md").read_text()
    assert "## good" in index and "## bad" in index and "FAILED" in index


@pytest.mark.slow
@pytest.mark.parametrize("name", list(reproduce.NOTEBOOKS))
def test_notebook_smoke_run(name, tmp_path):
    """Every notebook runs end to end with profile=smoke (the committed runs use full)."""
    out = reproduce.execute(name, "smoke", host="ci", results_root=tmp_path / "results", timeout=900)
    nb = out.run_dir / f"{name}.ipynb"
    assert nb.exists()
    assert out.ok, out.error
    executed = json.loads(nb.read_text())
    assert executed["metadata"]["papermill"]["parameters"]["profile"] == "smoke"
    files = {p.name for p in out.run_dir.iterdir()}
    assert "env.json" in files
    if name not in ("00-environment", "90-compare-runs"):
        assert {"raw.csv", "summary.md", "figures"} <= files
