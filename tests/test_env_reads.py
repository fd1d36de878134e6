"""env.json's fields are read through RunEnv's typed properties outside ringlab/rundir: no
``env["host"]`` or ``env.get("git")`` on a value named like an env.json (env, env_doc,
env_file, a RunFolder's fields)."""
from __future__ import annotations

import ast
from pathlib import Path

from ringlab.rundir.envjson import FIELD_TYPES

PKG = Path(__file__).resolve().parent.parent / "ringlab"

#: names a value holding env.json goes by (the last part: ``run.env``, ``RunOutput(d).env_doc``, ``f.fields``)
ENV_NAMES = {"env", "env_doc", "env_file", "fields"}

#: files whose ``env`` is not env.json: the machine snapshot ``envinfo.collect()`` (notebook 00
#: writes it under env.json's ``environment``)
NOT_ENV_JSON = {"studies/envreport.py"}


def _name(node: ast.AST) -> str | None:
    """The last name of a receiver: ``env`` for ``env``, ``run.env``, ``RunOutput(d).env`` and
    ``(run.env or {})``."""
    if isinstance(node, ast.BoolOp):
        return next((n for n in map(_name, node.values) if n in ENV_NAMES), None)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, (ast.Name, ast.Attribute)):
        return _name(node.func)   # env() / run.env_doc()
    return None


def _key(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def env_reads(source: str, where: str = "<snippet>") -> list[str]:
    """``where:line: receiver[key]`` for each read of an env.json field by string key."""
    found = []
    for node in ast.walk(ast.parse(source)):
        recv = key = None
        if isinstance(node, ast.Subscript):
            recv, key = node.value, _key(node.slice)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args):
            recv, key = node.func.value, _key(node.args[0])
        if key in FIELD_TYPES and _name(recv) in ENV_NAMES:
            found.append((node.lineno, f"{where}:{node.lineno}: {ast.unparse(recv)}[{key!r}]"))
    return [f for _, f in sorted(found)]


def test_no_string_key_reads_of_env_json_outside_rundir():
    found = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith("rundir/") or rel in NOT_ENV_JSON:
            continue
        found += env_reads(p.read_text(encoding="utf-8"), f"ringlab/{rel}")
    assert not found, "read env.json's fields through RunEnv's properties:\n" + "\n".join(found)


def test_the_scan_finds_string_key_reads():
    snippet = '''
def f(run, env, folder):
    a = env.get("experiment")
    b = (run.env_doc.get("git") or {}).get("commit")
    c = env["started_utc"]
    d = RunOutput(run).env_file.get("parameters") or {}
    e = (run.env or {}).get("host")
    folder.fields["stopping"] = None
    ok = env.experiment, env.get("hostname"), calibration.get("run_id"), env.git.commit
'''
    found = env_reads(snippet)
    assert [f.split(": ", 1)[1] for f in found] == [
        "env['experiment']", "run.env_doc['git']", "env['started_utc']", "RunOutput(run).env_file['parameters']",
        "run.env or {}['host']", "folder.fields['stopping']"], found
    assert env_reads("x = dict(doc)\ny = meta.get('parameters')\n") == []


def test_run_env_properties_and_the_defaults_older_files_imply(tmp_path):
    from ringlab.rundir import RunEnv, RunOutput
    empty = RunEnv.of({})
    assert (empty.path, empty.experiment, empty.parameters, empty.warnings, empty.git.commit,
            empty.build.out_dir, empty.topology, empty.stopping_record) == (None, None, {}, [], None, None, {}, None)
    env = RunEnv.of({"experiment": "ptr_ring", "git": {"commit": "abc", "dirty": True}, "parameters": None,
                     "build": {"out_dir": "/t/build/bin", "cflags": ["-O2"]},
                     "environment": {"host": "not a dict", "cpu": {"model": "M"}, "topology": {"n_cpus": 2}}})
    assert RunEnv.of(env) is env and env["experiment"] == "ptr_ring" and dict(env) == env.doc
    assert (env.experiment, env.git.commit, env.git.dirty, env.parameters, env.build.cflags, env.machine,
            env.cpu_model, env.topology) == ("ptr_ring", "abc", True, {}, ["-O2"], {}, "M", {"n_cpus": 2})
    run = RunOutput(tmp_path)
    assert isinstance(run.env, RunEnv) and not run.env and isinstance(run.env_doc, RunEnv) and not run.env_doc
