"""Every committed run's summary.md is what today's code renders from its raw.csv and env.json.

For each run folder under results/ of a measuring experiment (one with raw.csv and summary.md;
environment, compare-runs and explore folders are not summaries of trials) the folder is
copied to a temporary directory and rendered there by ``write_report``, the function
``ringlab summarize`` calls, with the run's own baseline, metric and labels from env.json
(``env["report"]`` when the run recorded how it was rendered, else the top-level
``baseline``/``metric``).  The result must equal the committed summary.md byte for byte:
a committed summary that today's code would write differently is stale, and the run has to
be re-made (or re-summarized) before it is committed.  results/ itself is never written.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from ringlab import paths
from ringlab.report import write_report
from ringlab.rundir import read_env
from tests.committed import committed

#: results/ folders whose runs are not summaries of trials
NOT_TRIALS = ("environment", "compare-runs", "explore")
RESULTS = paths.ROOT / "results"


def committed_runs() -> list[Path]:
    runs = []
    for exp in sorted(d.name for d in RESULTS.iterdir() if d.is_dir() and d.name not in NOT_TRIALS):
        runs += [p.parent for p in committed(sorted((RESULTS / exp).rglob("raw.csv")))
                 if (p.parent / "summary.md").is_file()]
    return runs


def render_args(env: dict) -> dict:
    """write_report's arguments for a run: what env.json says it was rendered with."""
    rec = env.get("report") if isinstance(env.get("report"), dict) else {}
    args = {"baseline": rec.get("baseline", env.get("baseline")), "metric": rec.get("metric", env.get("metric"))}
    if isinstance(rec.get("labels"), dict):
        args["labels"] = rec["labels"]
    return {k: v for k, v in args.items() if v is not None}


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_there_are_committed_runs_to_check():
    assert committed_runs(), f"no run folder with raw.csv and summary.md under {RESULTS}"


@pytest.mark.parametrize("run", committed_runs(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_committed_summary_is_what_todays_code_renders(run, tmp_path):
    before = _tree_digest(run)
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    (copy / "summary.md").unlink()
    env = json.loads((run / "env.json").read_text()) if (run / "env.json").is_file() else {}
    write_report(copy, figures=False, **render_args(env))
    assert _tree_digest(run) == before, f"rendering wrote into {run}"
    committed = (run / "summary.md").read_bytes()
    rendered = (copy / "summary.md").read_bytes()
    assert rendered == committed, (f"{run.relative_to(paths.ROOT)}/summary.md is not what today's code renders "
                                   f"(ringlab summarize {run.relative_to(paths.ROOT)}): re-make or re-summarize the run")


def _env_files() -> list[Path]:
    return committed(sorted(RESULTS.glob("*/*/*/env.json")))


@pytest.mark.parametrize("env_file", _env_files(), ids=lambda p: str(p.parent.relative_to(RESULTS)))
def test_committed_runs_come_from_a_clean_tree(env_file):
    """A committed run records the commit it was made from, and that commit held all its code:
    the tree was not dirty (a dirty run cannot be reproduced from the repository)."""
    env = read_env(env_file.parent).doc
    git = env.get("git") or (env.get("environment") or {}).get("git") or {}
    assert git.get("commit"), f"{env_file}: no commit recorded"
    assert git.get("dirty") is False, f"{env_file}: made from a dirty tree ({git.get('dirty_files')})"


#: what a run's numbers depend on in the tree: a host's latest runs share it (commits that differ
#: only in results/ or docs/ are the same ringlab)
CODE_PATHS = ("ringlab", "csrc", "notebooks", "benchmarks", "pyproject.toml")


def _ringlab_commit(run: Path) -> str | None:
    """The ringlab commit a run was made from: env.json's, or its first bisect step's."""
    folders = [run] + sorted((run / "steps").glob("*"))
    docs = [read_env(f).doc for f in folders if (f / "env.json").is_file()]
    for env in docs:
        git = env.get("git") or (env.get("environment") or {}).get("git") or {}
        if git.get("commit"):
            return str(git["commit"])
    return None


def _code_of(commit: str) -> tuple[str, ...] | None:
    """The git object ids of CODE_PATHS at ``commit``; None where git does not hold it."""
    import subprocess
    ids = []
    for path in CODE_PATHS:
        p = subprocess.run(["git", "-C", str(paths.ROOT), "rev-parse", "--verify", "-q", f"{commit}^{{commit}}:{path}"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            return None
        ids.append(p.stdout.strip())
    return tuple(ids)


def _hosts() -> list[str]:
    from ringlab.lab.results_index import latest_by_host
    return sorted(latest_by_host(RESULTS))


@pytest.mark.parametrize("host", _hosts())
def test_a_hosts_latest_runs_come_from_one_ringlab(host):
    """The runs results/README.md shows as a host's latest were made by one ringlab: the same
    code (CODE_PATHS) at every run's recorded commit, so the set can be re-made from one checkout."""
    from ringlab.lab.results_index import latest_by_host
    latest = latest_by_host(RESULTS)[host]
    commits = {exp: _ringlab_commit(run) for exp, run in latest.items()}
    assert all(commits.values()), f"{host}: no recorded commit for {[e for e, c in commits.items() if not c]}"
    codes = {}
    for exp, c in commits.items():
        code = _code_of(c)
        if code is None:
            pytest.skip(f"{host}/{exp}: commit {c[:12]} is not in this clone's history (a shallow clone?)")
        codes.setdefault(code, []).append(f"{exp} ({c[:12]})")
    assert len(codes) == 1, f"{host}: its latest runs come from {len(codes)} versions of ringlab: {list(codes.values())}"
