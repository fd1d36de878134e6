"""Provenance: "is this actually the numbers for this patch set?" (Duyck, seed 002).

A run folder holds env.json (written by ringlab.runner: parameters, git commit, build
info with every binary's and source's sha256, environment) and raw.csv (each row
carries the sha256 of the executable that produced it and the time it ended).
``check(run_dir)`` answers, for each pair of variants in one run, whether they ran
different binaries built from different sources, and when each was measured.
``compare_runs(a, b)`` looks across two runs for stale data: the same binaries and
sources presented as a new revision, or measurements copied over unchanged.

Nothing here prints; ringlab/commands/provenance.py formats the dicts.
"""
from __future__ import annotations

import csv
import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

from ringlab import paths


def git_info(root: str | Path | None = None) -> dict[str, Any]:
    """Commit of the ringlab checkout and whether the tree was dirty (argv only, no shell)."""
    root = Path(root or paths.ROOT)

    def git(*args: str) -> str:
        # rstrip only: porcelain lines start with a meaningful space.
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.rstrip("\n")
    try:
        commit = git("rev-parse", "HEAD")
    except FileNotFoundError:
        return {"commit": None, "dirty": None, "error": "git not installed"}
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        return {"commit": None, "dirty": None, "error": f"not a git checkout ({root}): {getattr(e, 'stderr', '') or e}".strip()}
    try:
        status = git("status", "--porcelain", "--untracked-files=no")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        status = None
    return {"commit": commit, "dirty": None if status is None else bool(status),
            "dirty_files": [] if not status else [ln[3:] for ln in status.splitlines()][:50]}


# -- reading a run ------------------------------------------------------------------------
def load_env(run_dir: str | Path) -> dict[str, Any]:
    p = Path(run_dir) / "env.json"
    if not p.is_file():
        raise FileNotFoundError(f"{run_dir}: no env.json (not a ringlab run folder)")
    return json.loads(p.read_text())


def read_env(run_dir: str | Path) -> dict[str, Any]:
    """env.json of a run folder, or {} when it is missing or unreadable (reports degrade, never fail)."""
    try:
        return load_env(run_dir)
    except (OSError, ValueError):
        return {}


def _rows(run_dir: Path) -> list[dict[str, str]]:
    p = run_dir / "raw.csv"
    if not p.is_file():
        return []
    with open(p, newline="") as f:
        return [r for r in csv.DictReader(f) if r.get("variant") is not None]


def _binaries(build: dict) -> list[dict[str, Any]]:
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


def check(run_dir: str | Path) -> dict[str, Any]:
    """Per variant: binaries (sha256), sources, first/last measurement; per pair: a verdict."""
    run_dir = Path(run_dir)
    env = load_env(run_dir)
    build = env.get("build") or {}
    bins = _binaries(build)
    by_sha = {b.get("sha256"): b for b in bins if b.get("sha256")}
    used = env.get("binaries_used") or {}
    name_by_sha = {v.get("sha256"): k for k, v in used.items() if isinstance(v, dict)}
    variants: dict[str, dict[str, Any]] = {}
    for r in _rows(run_dir):
        v = variants.setdefault(r["variant"], {"sha256": [], "first": None, "last": None, "rows": 0, "ok_rows": 0})
        sha = r.get("binary_sha256") or ""
        if sha and sha not in v["sha256"]:
            v["sha256"].append(sha)
        ts = r.get("timestamp") or ""
        if ts:
            v["first"] = ts if v["first"] is None or ts < v["first"] else v["first"]
            v["last"] = ts if v["last"] is None or ts > v["last"] else v["last"]
        v["rows"] += 1
        v["ok_rows"] += r.get("status") == "ok"
    problems: list[str] = []
    for name, v in variants.items():
        v["binary"] = [name_by_sha.get(s) or by_sha.get(s, {}).get("name") for s in v["sha256"]]
        srcs = [_sources_of(by_sha.get(s), build) for s in v["sha256"]]
        v["sources"] = srcs[0] if len(srcs) == 1 else None
        if len(v["sha256"]) > 1:
            problems.append(f"variant {name}: {len(v['sha256'])} different binaries during one run "
                            "(rebuilt mid-run?)")
        if not v["sha256"]:
            problems.append(f"variant {name}: no binary sha256 recorded")
        for s in v["sha256"]:
            if bins and s not in by_sha:
                problems.append(f"variant {name}: binary {s[:12]} is not the one env.json's build recorded")
    pairs = []
    for a, b in itertools.combinations(sorted(variants), 2):
        pairs.append(_pair(a, variants[a], b, variants[b]))
        if pairs[-1]["different_binaries"] is False:
            problems.append(f"{a} and {b} ran the same binary: their difference is noise, not code")
    git = env.get("git") or {}
    if git.get("dirty"):
        problems.append("ringlab's tree was dirty at run time (uncommitted changes)")
    return {"run_dir": str(run_dir), "run_id": env.get("run_id"), "experiment": env.get("experiment"),
            "host": env.get("host"), "status": env.get("status"), "started_utc": env.get("started_utc"),
            "ended_utc": env.get("ended_utc"), "git": git, "compiler": build.get("compiler"),
            "flags": build.get("flags") or build.get("cflags"), "variants": variants, "pairs": pairs,
            "problems": problems}


def _pair(a: str, va: dict, b: str, vb: dict) -> dict[str, Any]:
    sa, sb = set(va["sha256"]), set(vb["sha256"])
    diff_bin = None if not sa or not sb else not (sa & sb)
    src_a, src_b = va.get("sources"), vb.get("sources")
    if src_a is None or src_b is None:
        diff_src, changed = None, []
        why = "sources not recorded per binary in env.json"
    else:
        changed = sorted(k for k in set(src_a) | set(src_b) if src_a.get(k) != src_b.get(k))
        diff_src = bool(changed)
        why = ""
    if diff_bin is False:
        verdict = "SAME binary: not a comparison"
    elif diff_bin and diff_src:
        verdict = "different binaries from different sources"
    elif diff_bin and diff_src is False:
        verdict = "different binaries from the SAME sources (flags or compiler differ?)"
    elif diff_bin:
        verdict = f"different binaries ({why})"
    else:
        verdict = "unknown (no binary hash recorded)"
    return {"a": a, "b": b, "different_binaries": diff_bin, "different_sources": diff_src,
            "differing_sources": changed, "verdict": verdict,
            "measured_a": [va["first"], va["last"]], "measured_b": [vb["first"], vb["last"]]}


def _metric(run_dir: Path, variant: str) -> list[str]:
    return [r.get("ns_per_op", "") for r in _rows(run_dir)
            if r["variant"] == variant and r.get("status") == "ok"]


def compare_runs(dir_a: str | Path, dir_b: str | Path) -> dict[str, Any]:
    """Across two runs: for each variant in both, were binaries/sources/numbers identical?

    Identical binaries (or sources) in two runs presented as different revisions mean the
    "after" numbers were not built from new code; identical ns_per_op sequences mean the
    data was copied, not re-measured (the seed-002 question).
    """
    ca, cb = check(dir_a), check(dir_b)
    out = {"a": ca["run_dir"], "b": cb["run_dir"], "variants": {}, "problems": []}
    for v in sorted(set(ca["variants"]) & set(cb["variants"])):
        va, vb = ca["variants"][v], cb["variants"][v]
        same_bin = bool(set(va["sha256"]) & set(vb["sha256"]))
        same_src = (None if va.get("sources") is None or vb.get("sources") is None
                    else va["sources"] == vb["sources"])
        ma, mb = _metric(Path(dir_a), v), _metric(Path(dir_b), v)
        same_numbers = bool(ma) and ma == mb
        out["variants"][v] = {"same_binary": same_bin, "same_sources": same_src, "identical_measurements": same_numbers,
                              "measured_a": [va["first"], va["last"]], "measured_b": [vb["first"], vb["last"]]}
        if same_numbers:
            out["problems"].append(f"{v}: identical ns_per_op values in both runs: stale (copied) data")
        if same_bin:
            out["problems"].append(f"{v}: the same binary in both runs: no code change between them")
        elif same_src:
            out["problems"].append(f"{v}: the same sources in both runs (only flags/compiler changed)")
    ga, gb = (ca.get("git") or {}).get("commit"), (cb.get("git") or {}).get("commit")
    out["git"] = {"a": ga, "b": gb, "same": ga is not None and ga == gb}
    return out

