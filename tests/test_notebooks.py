"""Notebooks: clean sources, documented parameters, and a smoke run of each through papermill."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import ringlab

from ringlab.lab import reproduce
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


def _error_outputs(nb) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


@pytest.mark.parametrize("bad", [("modes", "0,7"), ("baseline", "nope")], ids=lambda b: b[0])
def test_bad_parameter_shows_only_the_message(tmp_path, bad):
    """A user's typo gets one line naming the parameter and the allowed values, no traceback;
    papermill still reports the notebook failed, and nothing is written."""
    name, value = bad
    nb = NOTEBOOKS / "10-ptr-ring-reorder.ipynb"
    out = subprocess.run([PAPERMILL, str(nb), str(tmp_path / "o.ipynb"), "-k", "python3",
                          "-p", "profile", "smoke", "-p", name, value, "-p", "out_dir", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=NOTEBOOKS)
    assert out.returncode == 1
    errors = _error_outputs(nbformat.read(tmp_path / "o.ipynb", as_version=4))
    assert len(errors) == 1
    err = errors[0]
    assert err["ename"] == "ParamError" and f"'{name}'" in err["evalue"] and "allowed:" in err["evalue"]
    assert err["traceback"] == [f"ParamError: {err['evalue']}"], "no traceback for a bad parameter"
    # papermill's CLI prints its own stack; the cell's part of it is the one line
    assert out.stderr.rstrip().endswith(f"ParamError: {err['evalue']}")
    # no frame of ringlab's code: neither the package's files nor any ringlab/...py path (the
    # checkout itself may be a folder named ringlab, so its notebook path can appear)
    pkg = str(Path(ringlab.__file__).resolve().parent) + os.sep
    assert pkg not in out.stderr, "no frame of ringlab's code is shown"
    # (a checkout's .venv, where papermill's own frames live, is not ringlab's code)
    assert not re.search(r"ringlab/(?!\.venv/)(?:[\w-]+/)*[\w-]+\.py\b", out.stderr), "no frame of ringlab's code is shown"
    assert not (tmp_path / "run").exists(), "nothing is written for bad input"


def test_runs_outside_reproduce_go_to_scratch(tmp_path, monkeypatch):
    from ringlab import paths
    from ringlab.lab import notebook
    monkeypatch.delenv("RINGLAB_SCRATCH", raising=False)
    d = notebook.run_dir("", "page-frag", "h")
    assert d.parent.parent.parent == (paths.ROOT / "scratch").resolve() and d.parent.name == "h"
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "s"))
    assert notebook.run_dir("", "page-frag", "h").is_relative_to(tmp_path / "s")
    assert notebook.run_dir(str(tmp_path / "mine"), "page-frag", "h") == tmp_path / "mine"
    ignored = subprocess.run(["git", "-C", str(paths.ROOT), "check-ignore", "-q", "scratch/x/y"])
    assert ignored.returncode == 0, "scratch/ is git-ignored"


def test_plain_papermill_run_never_changes_results(tmp_path):
    """Notebook 00 from plain papermill, no out_dir: the run lands in the scratch folder."""
    import os
    results, scratch = tmp_path / "results", tmp_path / "scratch"
    env = dict(os.environ, RINGLAB_RESULTS=str(results), RINGLAB_SCRATCH=str(scratch), RINGLAB_HOST="t")
    out = subprocess.run([PAPERMILL, str(NOTEBOOKS / "00-environment.ipynb"), str(tmp_path / "o.ipynb"),
                          "-k", "python3", "-p", "profile", "smoke", "-p", "probe_counters", "False"],
                         capture_output=True, text=True, cwd=NOTEBOOKS, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert not results.exists()
    assert [p.name for p in (scratch / "environment" / "t").iterdir()] != []


def test_make_lab_installs_once_opens_the_repo_root_and_runs_as_root(tmp_path):
    import os
    import shutil
    import time
    if not shutil.which("make"):
        pytest.skip("make not installed")
    root = NOTEBOOKS.parent
    for f in ("Makefile", "pyproject.toml"):
        shutil.copy(root / f, tmp_path / f)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    first = subprocess.run(["make", "-n", "lab"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "pip install" in first
    time.sleep(0.05)
    stamps = [ln.split()[-1] for ln in first.splitlines() if ln.startswith("touch ")]
    assert stamps, first
    for stamp in stamps:  # what the first call would have installed
        (tmp_path / stamp).touch()
    again = subprocess.run(["make", "-n", "lab"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "pip install" not in again, "the packages are installed once (stamp)"
    lab = [ln for ln in again.splitlines() if "jupyter lab" in ln]
    assert len(lab) == 1 and "--notebook-dir=." in lab[0]
    assert ("--allow-root" in lab[0]) == (os.getuid() == 0)


def test_reproduce_continues_after_a_failing_notebook(tmp_path, monkeypatch):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    good = nbformat.v4.new_notebook()
    good.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    p = nbformat.v4.new_code_cell('profile = "quick"\nout_dir = ""\nhost = ""')
    p.metadata["tags"] = ["parameters"]
    good.cells = [p, nbformat.v4.new_code_cell("from pathlib import Path\nPath(out_dir).mkdir(parents=True)\n"
                                                "(Path(out_dir) / 'ok.txt').write_text(profile)\n"
                                                "from ringlab.system.envinfo import host_id\n"
                                                "(Path(out_dir) / 'host.txt').write_text(host_id())")]
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
    assert (outs[1].run_dir / "host.txt").read_text() == "testhost", "the runs record the folder's host"
    assert outs[1].run_dir.parent.name == "testhost" and os.environ.get("RINGLAB_HOST") != "testhost"
    text, code = reproduce.main_summary(outs)
    assert code == 1 and "FAILED a-bad" in text
    # a host without committed runs is a local one: its runs are listed in LOCAL.md, not README.md
    from ringlab.lab.results_index import LOCAL_INDEX
    index = (tmp_path / "results" / LOCAL_INDEX).read_text()
    assert "## good" in index and "## bad" in index and "FAILED" in index


@pytest.mark.slow
@pytest.mark.parametrize("name", list(reproduce.NOTEBOOKS))
def test_notebook_smoke_run(name, tmp_path):
    """Every notebook runs end to end with profile=smoke (the committed runs use full); one whose
    input is not on this machine (13 without a kernel header tree) is reported skipped, with the
    reason in its run folder, and the test skips with that reason."""
    out = reproduce.execute(name, "smoke", host="ci", results_root=tmp_path / "results", timeout=900)
    nb = out.run_dir / f"{name}.ipynb"
    assert nb.exists()
    assert out.ok, out.error
    executed = json.loads(nb.read_text())
    assert executed["metadata"]["papermill"]["parameters"]["profile"] == "smoke"
    if out.skipped:
        # an input this notebook needs is not on this machine: the run folder says so, and why
        assert json.loads((out.run_dir / "env.json").read_text())["status"] == "skipped"
        assert out.skipped in " ".join((out.run_dir / "summary.md").read_text().split())
        assert not empty_sections(nbformat.reads(nb.read_text(), as_version=4))
        pytest.skip(f"{name} measured nothing here: {out.skipped}")
    files = {p.name for p in out.run_dir.iterdir()}
    if name == "13-bisect":
        # the run folder is the bisect folder: its state, summary and figure, each step a run folder
        assert {"bisect.json", "summary.md", "figures", "steps"} <= files
        assert (out.run_dir / "figures" / "effect.png").is_file()
        assert {"env.json", "raw.csv"} <= {p.name for p in (out.run_dir / "steps").glob("00-*/*")}
    else:
        assert "env.json" in files
    if name not in ("00-environment", "13-bisect", "90-compare-runs", "95-explore"):
        assert {"raw.csv", "summary.md", "figures"} <= files
    assert not empty_sections(nbformat.reads(nb.read_text(), as_version=4))
    if name == "90-compare-runs":
        # it reads the committed runs under results/, which hold batch and reorder
        assert (out.run_dir / "figures" / "forest.png").is_file()
    if name == "95-explore":
        # it opens the committed runs under results/ and draws the per-round ratio of one of them
        assert (out.run_dir / "figures" / "round_ratio.png").is_file() and "raw.csv" not in files


def empty_sections(nb) -> list[str]:
    """Markdown headings whose section (up to the next heading) has no code cell with output.
    A section the run cannot fill must still say so ("not available here because ...")."""
    bad, heading, has_output = [], None, True
    for c in nb.cells:
        if c.cell_type == "markdown" and c.source.lstrip().startswith("#"):
            if heading is not None and not has_output:
                bad.append(heading)
            heading, has_output = c.source.lstrip().splitlines()[0], False
        elif c.cell_type == "code" and c.get("outputs"):
            has_output = True
    if heading is not None and not has_output:
        bad.append(heading)
    return bad


def test_empty_sections_detects_a_heading_without_output():
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    shown = code("x")
    shown.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1")]
    nb = nbformat.v4.new_notebook(cells=[md("# t"), shown, md("## empty\nsome text"), code("y"),
                                         md("## shown"), shown])
    assert empty_sections(nb) == ["## empty"]
