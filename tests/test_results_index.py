"""results/README.md index: latest run per experiment, headline table, links, machine."""
from __future__ import annotations

import json

from ringlab.lab import results_index


def _run(root, exp, host, run_id, summary="", env=None, nb_params=None, failed=False):
    d = root / exp / host / run_id
    (d / "figures").mkdir(parents=True)
    (d / "figures" / "box.png").write_bytes(b"png")
    (d / "raw.csv").write_text("run_id\n")
    (d / "summary.md").write_text(summary)
    (d / "env.json").write_text(json.dumps(env or {}))
    meta = {"papermill": {"parameters": nb_params or {}, "exception": failed}}
    (d / f"{exp}.ipynb").write_text(json.dumps({"cells": [], "metadata": meta}))
    return d


def test_index_lists_latest_run_with_table_links_and_machine(tmp_path):
    env = {"environment": {"cpu": {"model": "AMD EPYC"}, "topology": {"n_cpus": 2},
                           "host": {"machine": "x86_64", "kernel": "6.1.0", "virtualization": {"type": "kvm"}}}}
    _run(tmp_path, "ptr-ring-reorder", "vm", "20260101T000000Z-aaaaaa", "old\n| a |\n|---|\n| 1 |\n")
    _run(tmp_path, "ptr-ring-reorder", "vm", "20260201T000000Z-bbbbbb",
         "# t\n\n| mode | delta |\n|---|---|\n| 0 | +1.0% |\n\nmore\n", env, {"profile": "full"})
    _run(tmp_path, "page-frag", "vm", "20260201T000000Z-cccccc", "", {}, {"profile": "smoke"}, failed=True)
    text = results_index.render(tmp_path)
    assert "## ptr-ring-reorder" in text and "## page-frag" in text
    assert "20260201T000000Z-bbbbbb" in text.split("Earlier runs")[0]
    assert "| 0 | +1.0% |" in text and "| 1 |" not in text
    assert "AMD EPYC, 2 CPUs, x86_64, virt: kvm, kernel 6.1.0" in text
    assert "profile `full`" in text and "figures/box.png" in text
    assert "FAILED" in text
    # regenerating without new runs gives the same file
    assert results_index.render(tmp_path) == text


def test_empty_results(tmp_path):
    assert "No runs yet" in results_index.render(tmp_path / "nothing")


def test_smoke_failed_and_incomplete_runs_never_become_the_latest_run(tmp_path):
    exp = "ptr-ring-reorder"
    _run(tmp_path, exp, "vm", "20260101T000000Z-aaaaaa", "| full |\n|---|\n| 1 |\n",
         {"status": "complete"}, {"profile": "full"})
    _run(tmp_path, exp, "vm", "20260102T000000Z-smoke1", "| smoke |\n|---|\n| 2 |\n",
         {"status": "complete"}, {"profile": "smoke"})
    _run(tmp_path, exp, "vm", "20260103T000000Z-killed", "| killed |\n|---|\n| 3 |\n",
         {"status": "interrupted"}, {"profile": "full"})
    _run(tmp_path, exp, "vm", "20260104T000000Z-failed", "| failed |\n|---|\n| 4 |\n",
         {"status": "complete"}, {"profile": "quick"}, failed=True)
    text = results_index.render(tmp_path)
    latest = text.split("Latest run:")[1].splitlines()[0]
    assert "20260101T000000Z-aaaaaa" in latest and "| full |" in text
    assert "| smoke |" not in text and "| killed |" not in text and "| failed |" not in text
    others = text.split("Not headlines")[1]
    for rid in ("smoke1", "killed", "failed"):
        assert rid in others
    assert "interrupted (env.json)" in others and "FAILED" in others


def test_no_headline_run_says_so(tmp_path):
    _run(tmp_path, "page-frag", "vm", "20260101T000000Z-smoke1", "| x |\n|---|\n| 1 |\n", {}, {"profile": "smoke"})
    text = results_index.render(tmp_path)
    assert "No complete `quick` or `full` run yet." in text and "Latest run:" not in text
