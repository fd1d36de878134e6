"""Notebooks run from JupyterLab's Run All in a real (headless Chromium) browser.

Marked ``browser``: they need Chromium (Debian package ``chromium``) and the pip extra
``browser`` (playwright, jupyterlab); they skip with the reason where those are missing.
Screenshots go to pytest's temporary folder, never into the repository.
"""
from __future__ import annotations

import shutil

import pytest

from ringlab.paths import NOTEBOOKS

import labdriver

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_why = labdriver.unavailable()
if _why:
    pytestmark.append(pytest.mark.skip(reason=_why))


def _lab_copy(tmp_path, stem: str, **params):
    """A copy of a source notebook in a scratch JupyterLab root, with parameters set as a user would."""
    root = tmp_path / "lab"
    root.mkdir(exist_ok=True)
    nb = root / f"{stem}.ipynb"
    shutil.copy(NOTEBOOKS / f"{stem}.ipynb", nb)
    labdriver.set_parameters(nb, **params)
    return root, nb


def _scratch_env(tmp_path) -> dict:
    # Runs started from the lab must never touch the repository's results/.
    return {"RINGLAB_RESULTS": str(tmp_path / "results"), "RINGLAB_SCRATCH": str(tmp_path / "scratch"),
            "RINGLAB_HOST": "browser-test"}


def _assert_clean(run: labdriver.LabRun):
    assert not run.error_outputs, f"cells raised: {run.error_outputs}"
    assert run.unexecuted_cells == 0, f"{run.unexecuted_cells} code cells never ran"
    assert not run.page_errors, f"uncaught page errors: {run.page_errors}"
    assert not run.console_errors, f"browser console errors: {run.console_errors}"


def _has_verdict_table(run: labdriver.LabRun) -> bool:
    return any(any(h.strip().lower() == "verdict" for h in hs) for hs in run.table_headers)


def test_notebook_10_run_all_in_jupyterlab(tmp_path):
    root, nb = _lab_copy(tmp_path, "10-ptr-ring-reorder", profile="smoke",
                         out_dir=str(tmp_path / "run10"))
    with labdriver.JupyterLab(root, tmp_path / "jupyter", env=_scratch_env(tmp_path)) as lab:
        run = lab.run_all(nb.name, shots=tmp_path / "shots")
    _assert_clean(run)
    assert _has_verdict_table(run), f"no rendered table with a 'verdict' column: {run.table_headers}"
    # at least the box plot and the execution-order plot
    assert run.images >= 2, f"only {run.images} figures rendered"


def test_notebook_95_run_all_in_jupyterlab(tmp_path):
    if not (NOTEBOOKS / "95-explore.ipynb").exists():
        pytest.fail("notebooks/95-explore.ipynb is missing")
    # it reads the committed runs (RINGLAB_RESULTS points at an empty folder here) and writes to scratch
    root, nb = _lab_copy(tmp_path, "95-explore", results_root=str(NOTEBOOKS.parent / "results"))
    with labdriver.JupyterLab(root, tmp_path / "jupyter", env=_scratch_env(tmp_path)) as lab:
        run = lab.run_all(nb.name, shots=tmp_path / "shots")
    _assert_clean(run)
    assert _has_verdict_table(run), f"no rendered table with a 'verdict' column: {run.table_headers}"
    assert run.images >= 1, "the per-round ratio figure did not render"


def test_a_failing_cell_is_caught(tmp_path):
    """The browser test can fail: a notebook broken on purpose is reported, with the error."""
    root, nb = _lab_copy(tmp_path, "10-ptr-ring-reorder", profile="smoke",
                         out_dir=str(tmp_path / "run10"))
    labdriver.insert_cell_after_parameters(nb, 'raise RuntimeError("broken on purpose")')
    with labdriver.JupyterLab(root, tmp_path / "jupyter", env=_scratch_env(tmp_path)) as lab:
        run = lab.run_all(nb.name, shots=tmp_path / "shots")
    assert any("broken on purpose" in e for e in run.error_outputs), run.error_outputs
    assert run.unexecuted_cells > 0, "Run All should stop at the failing cell"
    with pytest.raises(AssertionError):
        _assert_clean(run)
