"""results/README.md index: latest run per experiment, headline table, links, machine."""
from __future__ import annotations

import json
import os

import pytest

from ringlab.lab import reproduce, results_index


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


def test_a_bisection_names_the_machine_of_its_steps(tmp_path):
    """A bisect folder keeps env.json per step: the index reads the machine from the first step."""
    env = {"environment": {"cpu": {"model": "Intel Xeon"}, "topology": {"n_cpus": 16},
                           "host": {"machine": "x86_64"}}}
    d = _run(tmp_path, "bisect", "box", "20260301T000000Z-dddddd", "| step |\n|---|\n| 00 |\n", {},
             {"profile": "full"})
    (d / "env.json").unlink()
    for step, doc in (("00-endpoints", env), ("01-abc", {})):
        (d / "steps" / step).mkdir(parents=True)
        (d / "steps" / step / "env.json").write_text(json.dumps(doc))
    assert "Machine: Intel Xeon, 16 CPUs, x86_64." in results_index.render(tmp_path)
    (d / "steps" / "00-endpoints" / "env.json").write_text("{}")
    assert "Machine: machine not recorded." in results_index.render(tmp_path)


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


def test_rendering_is_deterministic_whatever_the_creation_order_and_times(tmp_path):
    runs = [("ptr-ring-reorder", "vm", "20260101T000000Z-aaaaaa", {"profile": "full"}, False),
            ("ptr-ring-reorder", "box", "20260101T000000Z-aaaaaa", {"profile": "quick"}, False),
            ("ptr-ring-reorder", "vm", "20260301T000000Z-cccccc", {"profile": "smoke"}, False),
            ("page-frag", "vm", "20260201T000000Z-bbbbbb", {"profile": "full"}, True)]
    a, b = tmp_path / "a", tmp_path / "b"
    for root, order in ((a, runs), (b, list(reversed(runs)))):
        for i, (exp, host, rid, params, failed) in enumerate(order):
            d = _run(root, exp, host, rid, "| x |\n|---|\n| 1 |\n", {"status": "complete"}, params, failed)
            for p in [d, *d.rglob("*")]:
                os.utime(p, ns=(i * 10**9, i * 10**9))
    assert results_index.render(a) == results_index.render(b)
    path = results_index.write_index(a)
    os.utime(path, ns=(1, 1))
    before = path.read_bytes()
    assert results_index.write_index(a) == path
    assert path.read_bytes() == before and path.stat().st_mtime_ns == 1   # the same bytes: not rewritten


def _fake_execute(root, ok, complete):
    def execute(notebook, profile="quick", host=None, parameters=None, results_root=None, timeout=None):
        env = {"status": "complete" if complete else "interrupted"}
        d = _run(results_root, reproduce.NOTEBOOKS[notebook], "h", "20260401T000000Z-newrun",
                 "| new |\n|---|\n| 2 |\n", env, {"profile": profile}, failed=not ok)
        return reproduce.Outcome(notebook, d, ok, "" if ok else "boom")
    return execute


@pytest.mark.parametrize("ok,complete,rewritten", [(False, True, False), (True, False, False), (True, True, True)],
                         ids=["failed-notebook", "interrupted-run", "complete-run"])
def test_reproduce_rewrites_the_index_only_when_it_adds_a_complete_run(tmp_path, monkeypatch, ok, complete,
                                                                         rewritten):
    root = tmp_path / "results"
    _run(root, "ptr-ring-reorder", "vm", "20260101T000000Z-aaaaaa", "| old |\n|---|\n| 1 |\n",
         {"status": "complete"}, {"profile": "full"})
    index = results_index.write_index(root)
    before = index.read_bytes()
    monkeypatch.setattr(reproduce, "execute", _fake_execute(root, ok, complete))
    logs = []
    reproduce.reproduce("quick", only=["10-ptr-ring-reorder"], results_root=root, log=logs.append)
    assert (index.read_bytes() != before) == rewritten
    if rewritten:
        assert index.read_text() == results_index.render(root) and "20260401T000000Z-newrun" in index.read_text()
    else:
        assert any("README.md left as it is" in m for m in logs)


def test_runs_of_a_local_host_stay_out_of_the_committed_index(tmp_path):
    _run(tmp_path, "ptr-ring-reorder", "vm", "20260101T000000Z-aaaaaa", "| old |\n|---|\n| 1 |\n",
         {"status": "complete"}, {"profile": "full"})
    committed = results_index.render(tmp_path)
    results_index.mark_local(tmp_path / "ptr-ring-reorder" / "mine")
    _run(tmp_path, "ptr-ring-reorder", "mine", "20260501T000000Z-bbbbbb", "| new |\n|---|\n| 2 |\n",
         {"status": "complete"}, {"profile": "quick"})
    assert results_index.render(tmp_path) == committed
    assert results_index.has_published_runs(tmp_path, "vm") and not results_index.has_published_runs(tmp_path, "mine")
    results_index.write_index(tmp_path)
    local = (tmp_path / results_index.LOCAL_INDEX).read_text()
    assert "20260501T000000Z-bbbbbb" in local and "20260101T000000Z-aaaaaa" not in local
    assert (tmp_path / "README.md").read_text() == committed


def test_make_reproduce_of_another_host_leaves_the_checkout_clean(tmp_path):
    """A smoke reproduce of one notebook under a host without committed runs, into a git copy of
    the committed results/: no tracked file changes, git status stays empty, LOCAL.md lists it."""
    import shutil
    import subprocess
    from ringlab import paths
    g = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    tracked = subprocess.run(["git", "-C", str(paths.ROOT), "ls-files", "-z", "results", ".gitignore"],
                             capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, tracked):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(paths.ROOT / f, tmp_path / f)
    subprocess.run([*g, "init", "-q"], check=True)
    subprocess.run([*g, "add", "-A"], check=True)
    subprocess.run([*g, "commit", "-qm", "committed runs"], check=True)
    root = tmp_path / "results"
    hosts = {h.name for exp in root.iterdir() if exp.is_dir() for h in exp.iterdir() if h.is_dir()}
    host = "first-run-host"
    assert host not in hosts
    before = (root / "README.md").read_bytes()
    outs = reproduce.reproduce("smoke", only=["00-environment"], host=host, results_root=root,
                               parameters={"probe_counters": False}, log=lambda m: None)
    assert [o.ok for o in outs] == [True], outs[0].error
    assert outs[0].run_dir.is_relative_to(root / "environment" / host)
    assert (root / "README.md").read_bytes() == before
    status = subprocess.run([*g, "status", "--porcelain", "--untracked-files=all"], capture_output=True,
                            text=True, check=True).stdout
    assert status == "", status
    assert outs[0].run_dir.name in (root / results_index.LOCAL_INDEX).read_text()


def test_every_host_side_by_side_with_its_noise_floor(tmp_path):
    for host, delta in (("amd", "+1.0%"), ("intel", "-9.0%")):
        _run(tmp_path, "ptr-ring-reorder", host, "20260101T000000Z-aaaaaa", "| a |\n|---|\n| old |\n",
             {}, {"profile": "full"})
        _run(tmp_path, "ptr-ring-reorder", host, "20260201T000000Z-bbbbbb", f"| a |\n|---|\n| {delta} |\n",
             {}, {"profile": "full"})
    cal = tmp_path / "calibration" / "amd"
    cal.mkdir(parents=True)
    (cal / "calibration.json").write_text(json.dumps({"aa_ci": [-0.0299, 0.0200], "sigma_layout": 0.01, "round_sd": 0.02,
                                                       "layouts": 8, "run_id": "20260101T000000Z-cccccc"}))
    text = results_index.render(tmp_path)
    latest = text.split("Earlier runs")[0]
    assert "### `amd`" in latest and "### `intel`" in latest
    assert "| +1.0% |" in latest and "| -9.0% |" in latest and "| old |" not in text
    floor = text.split("## Noise floor of each host")[1].split("## Latest runs of each host")[0]
    assert "| `amd` | ±2.9% |" in floor and "`intel`" not in floor     # no calibration, no row
    assert results_index.render(tmp_path) == text


def test_hosts_side_by_side_latest_run_per_host_and_noise_floor(tmp_path):
    """One column per host: its newest headline run of each experiment (not an older or smoke one),
    'none' where it has no run, and the noise floor row."""
    _run(tmp_path, "ptr-ring-reorder", "epyc", "20260101T000000Z-aaaaaa", "", {}, {"profile": "full"})
    _run(tmp_path, "ptr-ring-reorder", "epyc", "20260201T000000Z-bbbbbb", "", {}, {"profile": "full"})
    _run(tmp_path, "ptr-ring-reorder", "epyc", "20260301T000000Z-cccccc", "", {}, {"profile": "smoke"})
    _run(tmp_path, "ptr-ring-reorder", "xeon", "20260102T000000Z-dddddd", "", {}, {"profile": "quick"})
    _run(tmp_path, "page-frag", "xeon", "20260102T000000Z-eeeeee", "", {}, {"profile": "full"})
    table = results_index.hosts_table(tmp_path, "results/")
    lines = table.splitlines()
    assert lines[0] == "| experiment | `epyc` | `xeon` |"
    assert lines[2] == "| noise floor | not calibrated | not calibrated |"
    assert "| page-frag | none | [20260102T000000Z-eeeeee](results/page-frag/xeon/20260102T000000Z-eeeeee/) (full) |" in lines
    row = next(ln for ln in lines if ln.startswith("| ptr-ring-reorder"))
    assert "20260201T000000Z-bbbbbb" in row and "aaaaaa" not in row and "cccccc" not in row and "(quick)" in row
    assert "## Latest runs of each host" in results_index.render(tmp_path)


def test_readme_block_is_replaced_and_a_readme_without_marks_is_refused(tmp_path):
    from ringlab.errors import DataError
    _run(tmp_path / "results", "page-frag", "xeon", "20260102T000000Z-eeeeee", "", {}, {"profile": "full"})
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{results_index.README_BEGIN}\nold\n{results_index.README_END}\n\ntail\n")
    assert results_index.update_readme(readme, tmp_path / "results")
    text = readme.read_text()
    assert "old" not in text and text.endswith("\n\ntail\n") and "20260102T000000Z-eeeeee" in text
    assert not results_index.update_readme(readme, tmp_path / "results")
    readme.write_text("# no marks\n")
    with pytest.raises(DataError, match="README.md"):
        results_index.update_readme(readme, tmp_path / "results")


def test_the_readme_shows_every_hosts_latest_runs():
    """The README's side-by-side table is what results/ holds now (python -m ringlab.lab.results_index)."""
    from ringlab import paths
    text = (paths.ROOT / "README.md").read_text()
    assert results_index.readme_block(paths.ROOT / "results") in text, \
        "README.md's latest runs are stale: python -m ringlab.lab.results_index"
