"""The test repository of notebook 13-bisect: its series, and the notebook's tables on it."""
from __future__ import annotations

import json

import shutil
import subprocess

import pytest

from ringlab.lab.bisect import engine, gitrange, report, testrepo
from ringlab.lab.bisect import notebook as nb
from ringlab.sources import kernel_header as kh
from ringlab.sources import patches
from ringlab.sources import builtin_patches

pytestmark = pytest.mark.skipif(testrepo.source_header() is None or shutil.which("git") is None
                                or shutil.which("gcc") is None,
                                reason="needs git, gcc and a kernel header tree under /usr/src")


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return testrepo.build(spins=24, root=tmp_path_factory.mktemp("tr"))


def header_at(repo, sha: str) -> str:
    return subprocess.run(["git", "-C", str(repo.tree), "show", f"{sha}:{testrepo.HEADER}"],
                          capture_output=True, text=True, check=True).stdout


def diff(repo, a: str, b: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo.tree), "diff", "-U0", a, b, "--", testrepo.HEADER],
                         capture_output=True, text=True, check=True).stdout
    return [ln for ln in out.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_series_shape(repo):
    kinds = [c.kind for c in repo.commits]
    assert kinds[0] == "base" and len(repo.commits) == 1 + len(testrepo.SERIES)
    assert 10 <= len(repo.commits) - 1 <= 14
    assert kinds.count("cost") == 1 and kinds.count("layout") == 1 and kinds.count("reorder") == 1
    assert kinds.count("comment") >= 4
    log = subprocess.run(["git", "-C", str(repo.tree), "rev-list", "--reverse", "HEAD"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert log == [c.sha for c in repo.commits]
    # the candidates are the commits that touch the header: all but the base and the unrelated one
    cands = gitrange.commits(repo.tree, repo.good, repo.bad, gitrange.MEASURED_PATHS["ptr_ring"])
    assert cands == [c.sha for c in repo.commits if c.kind not in ("base", "unrelated")]
    assert header_at(repo, repo.good) == testrepo.source_header().read_text()


def test_exactly_one_commit_adds_the_cost(repo):
    with_loop = [c for c in repo.commits if "ringlab_spin" in header_at(repo, c.sha)]
    first = repo.commits.index(repo.planted)
    assert with_loop == list(repo.commits[first:])
    assert [c.has_cost for c in repo.commits] == [i >= first for i in range(len(repo.commits))]
    added = diff(repo, repo.commits[first - 1].sha, repo.planted.sha)
    assert all(ln.startswith("+") for ln in added) and "< 24;" in "".join(added)
    # the added lines are exactly those of the builtin patch against the parent's header
    bp = builtin_patches.builtin_patch("builtin:flush-delay:24", kh.debian_header())
    assert [ln for ln in bp.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")] == added


def test_layout_commit_adds_one_unused_function(repo):
    i = [c.kind for c in repo.commits].index("layout")
    added = diff(repo, repo.commits[i - 1].sha, repo.commits[i].sha)
    assert added == ["+" + testrepo.UNUSED_FUNCTION, "+"]
    text = header_at(repo, repo.commits[i].sha)
    assert text.index("ringlab_unused") < text.index("struct ptr_ring {")


def test_comment_and_reorder_commits_change_no_code(repo):
    for prev, c in zip(repo.commits, repo.commits[1:]):
        a, b = header_at(repo, prev.sha), header_at(repo, c.sha)
        if c.kind in ("comment", "unrelated"):
            assert testrepo.code_tokens(a) == testrepo.code_tokens(b), c.subject
            assert a != b or c.kind == "unrelated"
        elif c.kind == "reorder":
            assert sorted(a.splitlines()) == sorted(b.splitlines()) and a != b
        else:
            assert testrepo.code_tokens(a) != testrepo.code_tokens(b)


def test_every_commit_compiles(repo):
    for c in repo.commits:
        kh.check_compiles(kh.resolve_header(f"git:{repo.tree}@{c.sha}"))


def test_same_header_same_commits_and_reuse(repo, tmp_path):
    again = testrepo.build(spins=24, root=repo.tree.parent)
    assert again.tree == repo.tree and again.commits == repo.commits
    fresh = testrepo.build(spins=24, root=tmp_path)
    assert [c.sha for c in fresh.commits] == [c.sha for c in repo.commits]
    other = testrepo.build(spins=48, root=tmp_path)
    assert other.planted.sha != repo.planted.sha and other.good == repo.good


def test_no_header_tree_is_said_not_raised(tmp_path, monkeypatch):
    monkeypatch.setattr(kh, "header_trees", lambda root=None: [])
    assert testrepo.build() is None
    p = nb.plan(tmp_path / "b", profile="smoke")
    assert p.config is None and "no kernel header tree" in p.why_not


def test_header_without_the_functions_is_a_data_error(tmp_path):
    h = tmp_path / "src" / "include" / "linux" / "ptr_ring.h"
    h.parent.mkdir(parents=True)
    h.write_text("struct ptr_ring { int x; };\n")
    with pytest.raises(testrepo.TestRepoError, match="__ptr_ring_full"):
        testrepo.build(source=h, root=tmp_path / "r")


def test_plan_and_tables(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(testrepo, "build", lambda spins: repo)
    p = nb.plan(tmp_path / "b", profile="smoke", layouts=4)
    assert p.config.good == repo.good and p.config.bad == repo.bad
    assert p.config.params["layouts"] == "4" and int(p.config.params["trials"]) >= 8
    assert f"{builtin_patches.expected_extra_per_op(24):+.2f} instructions/op" in nb.expectation(repo)
    table = nb.series_table(repo)
    assert list(table["expected"]).count("bad: the first bad commit, the one to find") == 1
    assert table.loc[table["kind"] == "cost", "commit"].item() == repo.planted.sha[:12]
    state = engine.init_state(p.config)
    cands = {c["sha"]: i for i, c in enumerate(state["candidates"])}
    state["endpoints"] = {"rounds": 8, "regression": True, "delta_pct": 9.0, "ci_low_pct": 5.0, "ci_high_pct": 12.0}
    layout = next(c for c in repo.commits if c.kind == "layout")
    state["steps"] = [{"n": 1, "index": cands[layout.sha], "sha": layout.sha, "subject": layout.subject,
                       "status": "bad", "vs_good": {}, "vs_bad": {}},
                      {"n": 2, "index": cands[repo.planted.sha], "sha": repo.planted.sha,
                       "subject": repo.planted.subject, "status": "bad"}]
    state["result"] = {"status": "found", "first_bad": state["candidates"][cands[layout.sha]],
                       "message": "first bad commit: x"}
    steps = nb.step_table(state, repo)
    assert list(steps["kind"]) == ["endpoints", "layout", "cost"]
    assert list(steps["expected"]) == ["regression", "good", "bad"]
    text = nb.check(state, repo)
    assert "**wrong**" in text and f"{layout.sha[:12]} (layout)" in text


@pytest.mark.parametrize("bad", [dict(layouts=0), dict(modes="7"), dict(spins=0), dict(threshold=-1),
                                 dict(tree="/nonexistent", good="a", bad="b"), dict(tree="/tmp", good="a")])
def test_bad_parameters_name_themselves(tmp_path, bad):
    from ringlab.lab.notebook import ParamError
    with pytest.raises(ParamError, match=r"parameter '(\w+)'.*allowed") as e:
        nb.plan(tmp_path / "b", profile="smoke", **bad)
    name = e.value.args[0].split("'")[1]
    assert name in bad or (name == "bad" and "tree" in bad)


def test_notebook_without_a_header_tree_says_so_and_records_only_that_it_skipped(tmp_path, monkeypatch):
    import jupytext

    from ringlab.lab import notebook as rn
    from ringlab.paths import NOTEBOOKS
    monkeypatch.setattr(kh, "header_trees", lambda root=None: [])
    shown = []
    monkeypatch.setattr(rn, "markdown", lambda text, max_chars=20000: shown.append(text))
    cells = [c.source for c in jupytext.read(NOTEBOOKS / "13-bisect.py").cells if c.cell_type == "code"]
    ns: dict = {}
    exec(cells[0], ns)   # the parameters cell
    ns.update(profile="smoke", out_dir=str(tmp_path / "run"))
    for src in cells[1:]:
        exec(src, ns)
    assert ns["state"] is None
    run = tmp_path / "run"
    env = json.loads((run / "env.json").read_text())
    assert env["status"] == "skipped" and "no kernel header tree" in env["skipped_reason"]
    assert sorted(p.name for p in run.iterdir()) == ["env.json", "figures", "summary.md"]
    assert "Not run here" in shown[0] and "no kernel header tree" in shown[0]
    assert len(shown) == 6 and all("no kernel header tree" in t for t in shown)


def test_run_refuses_a_folder_that_holds_a_bisect(repo, tmp_path, monkeypatch):
    from ringlab.lab.notebook import ParamError
    monkeypatch.setattr(testrepo, "build", lambda spins: repo)
    p = nb.plan(tmp_path / "b", profile="smoke")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / engine.STATE_FILE).write_text('{"kind": "bisect"}')
    with pytest.raises(ParamError, match="parameter '--out'.*allowed"):
        nb.run(p.config)
    assert "papermill notebooks/13-bisect.ipynb" in p.config.command


def test_the_test_repositorys_reproduce_line_names_no_folder_of_this_machine(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(testrepo, "build", lambda spins: repo)
    p = nb.plan(tmp_path / "b", profile="smoke", spins=24)
    cmd = p.config.command
    assert "-p spins 24" in cmd and "-p tree" not in cmd and str(repo.tree) not in cmd
    state = engine.init_state(p.config)
    assert state["tree"] == str(repo.tree)   # bisect.json keeps where it ran
    assert state["tree_name"].startswith("the test repository (built from ")
    assert str(repo.tree) not in report.summary_md(state)
    own = nb.plan(tmp_path / "c", tree=str(repo.tree), good=repo.good, bad=repo.bad, profile="smoke")
    assert f"-p tree {repo.tree} -p good {repo.good} -p bad {repo.bad}" in own.config.command
    assert engine.init_state(own.config)["tree_name"] == str(repo.tree)
