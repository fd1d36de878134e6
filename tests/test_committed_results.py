"""What a committed run under results/ promises (docs/results.md), checked without re-rendering it.

A committed run's raw.csv, env.json, executed notebook and reports come from one run of one clean
commit (env.json's ``git``); reports re-rendered later from the same trials say so in env.json's
``rerendered`` record (commit, time, the files it wrote).  Its printed numbers are held to its raw.csv
by ``ringlab verify`` (tests/test_verify.py), never its bytes to today's renderer: a change of how
reports are rendered leaves results/ as it is.  Each experiment keeps one committed run per host,
and a host's set comes from one ringlab.  results/ itself is never written.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ringlab import paths
from ringlab.rundir import read_env
from tests.committed import committed

#: results/ folders whose runs are not summaries of trials
NOT_TRIALS = ("environment", "compare-runs", "explore")
#: results/ folders that are not runs of a notebook (a host's calibration: its A/A runs and drift record)
NOT_RUNS = ("calibration",)
RESULTS = paths.ROOT / "results"
RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")


def committed_runs() -> list[Path]:
    runs = []
    for exp in sorted(d.name for d in RESULTS.iterdir() if d.is_dir() and d.name not in NOT_TRIALS):
        runs += [p.parent for p in committed(sorted((RESULTS / exp).rglob("raw.csv")))
                 if (p.parent / "summary.md").is_file()]
    return runs


def test_there_are_committed_runs_to_check():
    assert committed_runs(), f"no run folder with raw.csv and summary.md under {RESULTS}"


def run_folders() -> list[Path]:
    """Every committed run folder: results/<experiment>/<host>/<run-id>/."""
    return committed(sorted(p for p in RESULTS.glob("*/*/*") if p.is_dir() and RUN_ID.match(p.name)
                            and p.parts[-3] not in NOT_RUNS))


def one_run_per_experiment_and_host(folders: list[Path]) -> list[str]:
    """The experiment/host folders that hold more than one of ``folders`` (each a run folder)."""
    by: dict[str, list[str]] = {}
    for f in folders:
        by.setdefault(f"{f.parts[-3]}/{f.parts[-2]}", []).append(f.name)
    return [f"{k}: {', '.join(v)}" for k, v in sorted(by.items()) if len(v) > 1]


def test_each_experiment_keeps_one_committed_run_per_host():
    """A new run of an experiment on a host replaces the committed one (git keeps the older)."""
    extra = one_run_per_experiment_and_host(run_folders())
    assert not extra, "more than one committed run of an experiment on a host:\n" + "\n".join(extra)


def test_the_one_run_rule_can_fail(tmp_path):
    a, b = (tmp_path / "patch-ab" / "h" / f"2026010{d}T000000Z-{x * 6}" for d, x in ((1, "a"), (2, "b")))
    c = tmp_path / "patch-ab" / "g" / "20260101T000000Z-cccccc"
    assert one_run_per_experiment_and_host([a, c]) == []
    assert one_run_per_experiment_and_host([a, b, c]) == [f"patch-ab/h: {a.name}, {b.name}"]


def rerendered_problems(env: dict) -> list[str]:
    """What is missing from a run's ``rerendered`` record: the commit that re-rendered, when, and
    which kinds of report it wrote (a kind the run has no file of may be named), never the notebook."""
    rec = env.get("rerendered")
    if rec is None:
        return []
    if not isinstance(rec, dict):
        return [f"rerendered is {type(rec).__name__}, not an object"]
    out = [f"rerendered has no {k}" for k in ("commit", "utc", "files") if not rec.get(k)]
    files = rec.get("files") or []
    out += [f"rerendered names the notebook {f}: an executed notebook keeps what its run printed"
            for f in files if str(f).endswith(".ipynb")]
    return out


@pytest.mark.parametrize("run", run_folders(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_rerendered_run_says_what_was_rerendered(run):
    """Reports written after the run, from the same trials, are named with the commit that wrote them;
    the executed notebook is never among them (``ringlab verify`` lists it as not checked)."""
    env = read_env(run).doc if (run / "env.json").is_file() else {}
    assert not rerendered_problems(env), f"{run.relative_to(RESULTS)}: {rerendered_problems(env)}"


def test_the_rerendered_rule_can_fail():
    good = {"rerendered": {"commit": "0" * 40, "utc": "2026-12-07T19:02:48Z", "files": ["summary.md"]}}
    assert rerendered_problems(good) == [] and rerendered_problems({}) == []
    assert rerendered_problems({"rerendered": {"commit": "0" * 40, "files": ["mail.txt", "10-x.ipynb"]}}) \
        == ["rerendered has no utc",
            "rerendered names the notebook 10-x.ipynb: an executed notebook keeps what its run printed"]
    assert rerendered_problems({"rerendered": "yes"}) == ["rerendered is str, not an object"]


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
