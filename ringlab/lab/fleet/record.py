"""A fleet on disk: results/fleet/<fleet-id>/fleet.json (the commit, the command, the nodes and
their jobs), the job scripts and the jobs' logs beside it."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ringlab import paths
from ringlab.errors import DataError, ParamError
from ringlab.names import check_data_name
from ringlab.rundir import utc_now
from ringlab.rundir.envjson import atomic_write_json
from ringlab.system import git as hgit
from ringlab.system import checkout as checkout_info

FLEET_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]+$")


def fleet_dir(fleet_id: str, results: Path | None = None) -> Path:
    if not FLEET_ID_RE.match(fleet_id or ""):
        raise ParamError(f"parameter 'FLEET-ID': {fleet_id!r} is not a fleet id; allowed: a folder "
                         "name under results/fleet/ (as 20250101T120000Z-1a2b3c)")
    return Path(results or paths.results_dir()) / "fleet" / fleet_id


def load(fleet_id: str, results: Path | None = None) -> dict:
    p = fleet_dir(fleet_id, results) / "fleet.json"
    if not p.is_file():
        raise ParamError(f"parameter 'FLEET-ID': no fleet {fleet_id!r} ({p} not found)")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{p}: unreadable fleet record ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), dict):
        raise DataError(f"{p}: field 'nodes' missing; expected a fleet record written by ringlab fleet submit")
    for node in doc["nodes"]:
        check_data_name(node, p, "field 'nodes': node")
    return doc


def save(doc: dict, results: Path | None = None) -> Path:
    d = fleet_dir(doc["fleet_id"], results)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / "fleet.json", doc)
    return d / "fleet.json"


def git_commit(checkout: Path, allow_dirty: bool) -> tuple[str, bool]:
    """(HEAD's commit, whether the tree has uncommitted changes to code: changes under results/
    and scratch/ are runs, not code); ParamError for a dirty tree
    unless ``allow_dirty``, and for a checkout git cannot read."""
    def git(*a: str) -> subprocess.CompletedProcess:
        proc = hgit.run(list(a), checkout, check=False, timeout=60, what=f"git {a[0]}")
        return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(errors="replace"),
                                           proc.stderr.decode(errors="replace"))
    try:
        head = git("rev-parse", "HEAD")
        st = git(*checkout_info.STATUS_ARGS)
    except hgit.GitError as e:
        raise ParamError(f"checkout {checkout}: git failed ({e}); allowed: a git checkout") from None
    if head.returncode != 0 or st.returncode != 0:
        raise ParamError(f"checkout {checkout}: not a git checkout ({(head.stderr or st.stderr).strip()[:120]}); "
                         "allowed: a git checkout")
    changes = checkout_info.code_changes(st.stdout)
    dirty = bool(changes)
    if dirty and not allow_dirty:
        first = changes[0].strip()
        raise ParamError(f"checkout {checkout} has uncommitted changes ({first} ...); every job must run "
                         "one commit: commit them, or pass --allow-dirty")
    return head.stdout.strip(), dirty


def new_record(fleet_id: str, commit: str, dirty: bool, python: str, command: list[str],
               kind: str, time_limit: str, partition: str | None, constraint: str | None) -> dict:
    return {"fleet_id": fleet_id, "created": utc_now(), "commit": commit, "dirty": dirty,
            "checkout": str(paths.ROOT), "python": python, "results": str(paths.results_dir()),
            "kind": kind, "command": command, "time": time_limit, "partition": partition,
            "constraint": constraint, "nodes": {}, "submissions": []}
