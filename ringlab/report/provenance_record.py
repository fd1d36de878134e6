"""What a run folder records for provenance: env.json, raw.csv's rows, the build's binaries
and the source set each binary was built from (ringlab.report.provenance compares them).

Reports degrade rather than fail: :func:`read_env` is empty without a readable env.json and
:func:`rows` is [] without a raw.csv.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ringlab import rundir
from ringlab.errors import DataError


def load_env(run_dir: str | Path) -> rundir.RunEnv:
    """env.json of a run folder through ``ringlab.rundir.RunOutput``: FileNotFoundError when there
    is none, DataError when it is corrupt."""
    run = rundir.RunOutput(run_dir)
    if not run.env_json.is_file():
        raise FileNotFoundError(f"{run_dir}: no env.json (not a ringlab run folder)")
    env = run.env_file
    return rundir.RunEnv(env.path, env.version, env.kind, dict(env.doc))


def read_env(run_dir: str | Path) -> rundir.RunEnv:
    """env.json of a run folder, or an empty RunEnv when it is missing or unreadable (reports
    degrade, never fail)."""
    try:
        return load_env(run_dir)
    except (OSError, DataError):
        return rundir.RunEnv.of({})


def rows(run_dir: Path) -> list[dict[str, Any]]:
    """raw.csv's rows through ``ringlab.rundir.RunOutput`` (typed; missing values None), [] without one."""
    run = rundir.RunOutput(run_dir)
    if not run.raw_csv.is_file():
        return []
    df = run.read_raw()
    df = df[df["variant"].notna()].astype(object)
    df = df.where(df.notna(), None)
    rows = df.to_dict("records")
    for r in rows:
        r["variant"] = text(r["variant"])
    return rows


def text(v: Any) -> str:
    """A raw.csv value as written: 3 not 3.0 for integral numbers read as floats."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "" if v is None else str(v)


def binaries(build: dict) -> list[dict[str, Any]]:
    """BuildInfo.to_dict()['binaries'] as a list of dicts with 'name' (dict or list form)."""
    b = (build or {}).get("binaries") or []
    if isinstance(b, dict):
        return [dict(v, name=k) if isinstance(v, dict) else {"name": k, "sha256": v} for k, v in b.items()]
    return [x for x in b if isinstance(x, dict)]


def _sources_of(entry: dict[str, Any] | None, build: dict) -> dict[str, str] | None:
    """{path: sha256} of the sources compiled into one binary, or None if not recorded."""
    if not entry:
        return None
    src = entry.get("inputs", entry.get("sources"))  # ringlab.build: BinaryInfo.inputs
    all_src = (build or {}).get("sources") or {}
    if isinstance(all_src, list):
        all_src = {s.get("path"): s.get("sha256") for s in all_src if isinstance(s, dict)}
    if isinstance(src, dict):
        return {str(k): str(v) for k, v in src.items()}
    if isinstance(src, list):  # paths into the build-wide table
        return {str(s): str(all_src.get(s)) for s in src}
    return None


def source_id(entry: dict[str, Any] | None) -> tuple[str | None, str]:
    """(identity of what a binary was built from, how it was taken).

    ``source_sha256`` when the build recorded one (header, shim, harness and flags, by
    content); for older records, the hash of the sorted content hashes of its inputs
    (flags not included); None when nothing was recorded."""
    if not entry:
        return None, "sources not recorded (env.json has no build record of this binary)"
    if entry.get("source_sha256"):
        return str(entry["source_sha256"]), "source_sha256"
    inputs = entry.get("inputs")
    if isinstance(inputs, dict) and inputs:
        digest = hashlib.sha256("\n".join(sorted(map(str, inputs.values()))).encode()).hexdigest()
        return "inputs:" + digest, "content of the compiled files (flags not recorded)"
    return None, "sources not recorded per binary in env.json"


def source_files(entry: dict[str, Any] | None, build: dict) -> dict[str, str] | None:
    if entry and isinstance(entry.get("source_files"), dict) and entry["source_files"]:
        return {str(k): str(v) for k, v in entry["source_files"].items()}
    return _sources_of(entry, build)
