"""One read model of a run folder: no module of ringlab outside ringlab/rundir parses a run
folder's env.json or raw.csv itself; they all read it through ``ringlab.rundir.RunOutput``.

The check walks the AST of every module: a call that parses a file (open, read_text,
read_bytes, json.load/loads, pd.read_csv, csv.reader, rundir's own read_raw / read_env) is
refused when the file it reads is named "env.json" or "raw.csv" there, directly or through a
name bound to such a path (``raw = d / "raw.csv"``, ``for p in root.glob("*/raw.csv")``).
Existence checks (``is_file``, ``exists``) are not reads."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.errors import DataError, RunnerError

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "ringlab"
RUN_FILES = ("env.json", "raw.csv")
#: the calls that read a file's contents
PARSERS = {"open", "read_text", "read_bytes", "load", "loads", "read_csv", "reader", "DictReader",
           "read_raw", "read_env", "read_done", "count_file"}


def _names_file(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
        node.value == f or node.value.endswith("/" + f) for f in RUN_FILES)


def _mentions(node: ast.AST, tainted: set[str]) -> bool:
    return any(_names_file(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(node))


def _targets(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


#: calls whose result is still the path they were given (a path, a list of paths)
PATH_CALLS = {"Path", "PurePath", "sorted", "list", "glob", "rglob", "joinpath", "with_name", "absolute",
              "resolve", "expanduser", "str", "fspath"}


def _is_path(value: ast.AST) -> bool:
    """False for the result of a call that is not a path operation (``f(d / "env.json")`` is what
    ``f`` returns, not the file)."""
    return not isinstance(value, ast.Call) or _call_name(value) in PATH_CALLS


def _tainted(scope: ast.AST) -> set[str]:
    """Names bound to a run file's path in ``scope`` (assignments, loops, with)."""
    tainted: set[str] = set()
    for _ in range(3):   # a name bound from a tainted name
        for n in ast.walk(scope):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                if _is_path(n.value) and _mentions(n.value, tainted):
                    for t in targets:
                        tainted.update(_targets(t))
            elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)) and _mentions(n.iter, tainted):
                tainted.update(_targets(n.target))
            elif isinstance(n, ast.withitem) and n.optional_vars is not None and _mentions(n.context_expr, tainted):
                tainted.update(_targets(n.optional_vars))
    return tainted


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _scopes(tree: ast.Module):
    """(scope, its calls): each function with the calls in it, and the module's own statements."""
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    for f in funcs:
        yield f, [c for c in ast.walk(f) if isinstance(c, ast.Call)]
    top = ast.Module(body=[s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.ClassDef))], type_ignores=[])
    yield top, [c for c in ast.walk(top) if isinstance(c, ast.Call)]


def parses_run_files(source: str, name: str = "<module>") -> list[str]:
    """'name:line: call' for every call in ``source`` that parses a run folder's env.json or raw.csv."""
    found = set()
    for scope, calls in _scopes(ast.parse(source, name)):
        tainted = _tainted(scope)
        for n in calls:
            if _call_name(n) in PARSERS:
                parts = [n.func, *n.args, *(k.value for k in n.keywords)]
                if any(_mentions(p, tainted) for p in parts):
                    found.add(f"{name}:{n.lineno}: {ast.unparse(n)[:100]}")
    return sorted(found)


def _modules():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if rel.parts[:2] == ("ringlab", "rundir"):
            continue
        yield rel, p.read_text(encoding="utf-8")


def test_no_module_outside_rundir_parses_a_run_folder():
    found = [hit for rel, text in _modules() for hit in parses_run_files(text, str(rel))]
    assert not found, ("read these through ringlab.rundir.RunOutput (raw, env, env_file, env_doc):\n"
                       + "\n".join(found))


@pytest.mark.parametrize("snippet", [
    'env = json.loads((step_dir / "env.json").read_text())',
    'df = pd.read_csv(run / "raw.csv")',
    'rows = list(csv.reader(open(path / "raw.csv")))',
    'raw = d / "raw.csv"\ndf = read_raw(raw)',
    'for raw in sorted(root.glob("*/*/*/raw.csv")):\n    df = rundir.read_raw(raw)',
    'for step in sorted(run.glob("steps/*/env.json")):\n    doc = json.loads(step.read_text())',
    'with open(run_dir / "env.json") as f:\n    doc = json.load(f)',
    'env = rundir.read_env(Path(d) / "env.json")',
])
def test_the_check_finds_a_module_that_parses_a_run_file(snippet):
    assert parses_run_files(snippet), f"not caught: {snippet!r}"


@pytest.mark.parametrize("snippet", [
    'ok = (run_dir / "env.json").is_file()',
    'links = [f"[raw.csv]({rel}/raw.csv)"] if (latest / "raw.csv").exists() else []',
    'df = rundir.RunOutput(run_dir).raw',
    'nb = json.loads(p.read_text())',          # not a run file (a notebook, a state file)
    'doc = json.loads((out / "bisect.json").read_text())',
])
def test_the_check_lets_existence_checks_and_run_reads_pass(snippet):
    assert not parses_run_files(snippet)


# -- the read model itself ----------------------------------------------------------------------
def _folder(tmp_path: Path, experiment: str = "ptr_ring") -> Path:
    d = tmp_path / "results" / "ptr-ring-reorder" / "h1" / "20260101T000000Z-aaaaaa"
    d.mkdir(parents=True)
    pd.DataFrame({"variant": ["a", "b", "a", "b"], "experiment": [experiment] * 4,
                  "ns_per_op": [1.0, 2.0, 1.5, 2.5]}).to_csv(d / "raw.csv", index=False)
    (d / "env.json").write_text(json.dumps({"env_version": 2, "kind": "run", "experiment": "ptr_ring",
                                            "host": "h1", "run_id": d.name, "status": "complete",
                                            "parameters": {"variants": "b,a"}}))
    return d


def test_run_reads_raw_env_baseline_and_names(tmp_path):
    d = _folder(tmp_path)
    run = rundir.RunOutput(d)
    assert run.has_raw and run.has_env
    assert list(run.raw["variant"]) == ["a", "b", "a", "b"] and run.variants == ["a", "b"]
    assert run.env["experiment"] == "ptr_ring" and run.env_file.kind == "run"
    assert run.status == "complete" and run.status_line == ""
    assert run.baseline() == "b"            # the first of the variants parameter
    assert run.baseline("a") == "a"
    assert run.names == ("ptr-ring-reorder", "h1", d.name)
    assert run.summary_md is None and run.notebook is None and run.summary_csv is None
    df, env = run.read(need_env=True)
    assert env is not None and env["host"] == "h1" and df is run.raw


def test_run_refuses_an_env_of_another_experiment_and_degrades_in_env_doc(tmp_path):
    d = _folder(tmp_path, experiment="page_frag")
    run = rundir.RunOutput(d)
    run.raw
    with pytest.raises(DataError, match="env.json"):
        run.env
    (d / "env.json").write_text('{"status": NaN}')
    run = rundir.RunOutput(d)
    assert run.env_doc == {}
    with pytest.raises(DataError, match="env.json"):
        run.env_file


def test_run_without_raw_names_the_folder(tmp_path):
    run = rundir.RunOutput(tmp_path)
    assert not run.has_raw and run.env == {} and run.status == "unknown"
    with pytest.raises(DataError, match=r"run_dir: no raw.csv in"):
        run.raw


def test_the_one_header_check_refuses_a_foreign_raw_csv(tmp_path):
    cols = ["variant", "cpu_req_producer", "cpu_req_consumer", "trial"]
    (tmp_path / "raw.csv").write_text(",".join(cols) + "\na,0,1,0\n")
    done, header = rundir.RunOutput(tmp_path).resume_keys(["variant"], cols)
    assert header == cols and len(done) == 1
    with pytest.raises(RunnerError, match="its columns differ from this ringlab's raw.csv layout"):
        rundir.RunOutput(tmp_path).resume_keys(["variant"], cols + ["extra"])
