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

import itertools
from pathlib import Path
from typing import Any

from ringlab.rundir import RunEnv

from ringlab.report import measured_command
from ringlab.report import provenance_record as record


#: raw.csv columns that pick a different program for each value, by design: a multi-ring
#: ringtest run measures one binary per ring (``ring``), so a variant there has one binary per
#: ring, and only two binaries for the same ring mean a rebuild during the run; a run with code
#: layouts measures one binary per layout pair (``layout``, ringlab.build.layouts).
PROGRAM_COLUMNS = ("ring", "layout")
#: the PROGRAM_COLUMNS column holding the layout index; its seed is in the build record of each
#: binary (env.json build.binaries[NAME].layout: ``{"index", "seed", ...}`` or, for a binary of
#: layout copies, ``{"copies": [{"index", "seed", ..., "copy"}, ...]}``)
LAYOUT_COLUMN = "layout"


def _measured(rows: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[tuple, set]]]:
    """Per variant from raw.csv: binary sha256s, first/last timestamp, row counts; and per
    variant the binaries of each program arm (PROGRAM_COLUMNS values)."""
    variants: dict[str, dict[str, Any]] = {}
    per_arm: dict[str, dict[tuple, set]] = {}
    for r in rows:
        v = variants.setdefault(r["variant"], {"sha256": [], "first": None, "last": None, "rows": 0, "ok_rows": 0})
        sha = record.text(r.get("binary_sha256"))
        if sha and sha not in v["sha256"]:
            v["sha256"].append(sha)
        if sha:
            arm = tuple((c, record.text(r.get(c))) for c in PROGRAM_COLUMNS if record.text(r.get(c)))
            per_arm.setdefault(r["variant"], {}).setdefault(arm, set()).add(sha)
        ts = record.text(r.get("timestamp"))
        if ts:
            v["first"] = ts if v["first"] is None or ts < v["first"] else v["first"]
            v["last"] = ts if v["last"] is None or ts > v["last"] else v["last"]
        v["rows"] += 1
        v["ok_rows"] += r.get("status") == "ok"
    return variants, per_arm


def _describe(name: str, v: dict[str, Any], env: RunEnv, by_sha: dict, shapes: dict, cmd_from: str) -> None:
    """Fill in a variant's binaries, source set, header and measured command from env.json."""
    build = env.build.doc
    used = env.binaries_used
    name_by_sha = {u.get("sha256"): k for k, u in used.items() if isinstance(u, dict)}
    v["binary"] = [name_by_sha.get(s) or by_sha.get(s, {}).get("name") for s in v["sha256"]]
    entries = [by_sha.get(s) for s in v["sha256"]]
    srcs = [record.source_files(e, build) for e in entries]
    v["sources"] = srcs[0] if len(srcs) == 1 else None
    ids = [record.source_id(e) for e in entries]
    v["source_sha256"] = [i for i, _ in ids if i]
    v["source_how"] = ids[0][1] if ids else "no binary hash recorded"
    headers = env.build.header_sources
    v["header"] = headers.get(name) or next((e.get("header") for e in entries if e and e.get("header")), None)
    v["layout_seeds"] = sorted({str(lay["seed"]) for e in entries for lay in _layout_records(e).values()
                                if lay.get("seed") is not None})
    v["source_flags"] = sorted({" ".join(map(str, e["source_flags"])) for e in entries
                                if e and isinstance(e.get("source_flags"), list)})
    v["command"] = next(iter(shapes.values()), None)
    v["command_source"] = cmd_from if shapes else None
    v["_shapes"] = shapes


def _layout_records(entry: dict | None) -> dict[str, dict]:
    """{layout index: its build record without the copy position} of one binary's build record."""
    lay = (entry or {}).get("layout")
    if not isinstance(lay, dict):
        return {}
    copies = lay.get("copies") if isinstance(lay.get("copies"), list) else [lay]
    return {record.text(c.get("index")): {k: x for k, x in c.items() if k != "copy"}
            for c in copies if isinstance(c, dict) and c.get("index") is not None}


def _layout_regrouped(arm: tuple, shas: set, by_sha: dict) -> bool:
    """Whether the binaries of one variant's layout are that same layout in different copy groups.

    A staged run with layout copies (ringlab.build.layouts.copy_groups) rebuilds its last, partial
    block when a stage adds layouts: layout 108 runs from ``@c96-110-...`` in one stage and from
    ``@c96-127-...`` in the next, two binaries by design.  True only when every binary is one the
    build recorded, holds this layout with the same seed, pad and flags, comes from the same
    source set, and no two hold the same set of layouts (that would be one program built twice)."""
    index = dict(arm).get(LAYOUT_COLUMN)
    entries = [by_sha.get(s) for s in shas]
    if index is None or any(e is None for e in entries):
        return False
    layouts = [_layout_records(e) for e in entries]
    here = [lay.get(index) for lay in layouts]
    if any(h is None for h in here) or any(h != here[0] for h in here):
        return False
    sources = {record.source_id(e)[0] for e in entries}
    if None in sources or len(sources) > 1:
        return False
    groups = [tuple(sorted(lay)) for lay in layouts]
    return len(set(groups)) == len(groups)


def _binary_problems(name: str, v: dict[str, Any], arms: dict[tuple, set], by_sha: dict,
                     recorded: bool) -> list[str]:
    """A variant rebuilt during the run, without a binary hash, or with a binary the build did
    not record.  Several program arms (ringtest's rings, layouts) are listed under ``programs``;
    a layout measured from several copy groups (``_layout_regrouped``) under ``regrouped``."""
    problems = []
    if len(arms) > 1:
        # one program per arm by design (ringtest's rings, layouts): different binaries are expected
        v["programs"] = {" ".join(x for _, x in arm) or "-": sorted(shas) for arm, shas in arms.items()}
    for arm, shas in arms.items():
        if len(shas) > 1:
            if _layout_regrouped(arm, shas, by_sha):
                v.setdefault("regrouped", []).append(dict(arm).get(LAYOUT_COLUMN))
                v["regrouped"].sort(key=lambda x: (len(x), x))
                continue
            where = f" ({', '.join(x for _, x in arm)})" if len(arms) > 1 else ""
            problems.append(f"variant {name}{where}: {len(shas)} different binaries during one run "
                            "(rebuilt mid-run?)")
    if not v["sha256"]:
        problems.append(f"variant {name}: no binary sha256 recorded")
    for s in v["sha256"]:
        if recorded and s not in by_sha:
            problems.append(f"variant {name}: binary {s[:12]} is not the one env.json's build recorded")
    return problems


def _pairs(variants: dict[str, dict[str, Any]], cmd_why: str | None) -> tuple[list[dict], list[str]]:
    """Every pair of variants compared (:func:`_pair`), and a problem for each that ran the same code."""
    pairs, problems = [], []
    for a, b in itertools.combinations(sorted(variants), 2):
        p = _pair(a, variants[a], b, variants[b], cmd_why)
        pairs.append(p)
        if p["code"] == "same code":
            what = ("ran the same binary with the same measured command" if p["different_binaries"] is False
                    else "ran the same code (one source set, one measured command)")
            problems.append(f"{a} and {b} {what}: their difference is noise, not code")
    return pairs, problems


def check(run_dir: str | Path) -> dict[str, Any]:
    """Per variant: binaries (sha256), source set, measured command, first/last measurement;
    per pair: "same code" or "different code", with the evidence."""
    run_dir = Path(run_dir)
    env = record.load_env(run_dir)
    bins = record.binaries(env.build.doc)
    by_sha = {b.get("sha256"): b for b in bins if b.get("sha256")}
    rows = record.rows(run_dir)
    variants, per_arm = _measured(rows)
    commands, cmd_why, cmd_from = measured_command.commands(env, rows)
    problems: list[str] = []
    for name, v in variants.items():
        _describe(name, v, env, by_sha, commands.get(name) or {}, cmd_from)
        problems += _binary_problems(name, v, per_arm.get(name) or {}, by_sha, bool(bins))
    pairs, same = _pairs(variants, cmd_why)
    problems += same
    for v in variants.values():
        v.pop("_shapes", None)
    git, build = env.git, env.build
    if git.dirty:
        problems.append("ringlab's tree was dirty at run time (uncommitted changes)")
    return {"run_dir": str(run_dir), "run_id": env.run_id, "experiment": env.experiment,
            "host": env.host, "status": env.status, "started_utc": env.started_utc,
            "ended_utc": env.ended_utc, "git": git.doc, "compiler": build.compiler,
            "compiler_version": build.doc.get("compiler_version"), "flags": build.flags or build.cflags, "variants": variants, "pairs": pairs,
            "command_source": cmd_from or None, "command_error": cmd_why, "problems": problems}


def _header_text(h: dict | None) -> str | None:
    if not h:
        return None
    kind = h.get("kind")
    if kind == "git":
        return f"{h.get('tree')}@{h.get('rev')} = {str(h.get('commit'))[:12]}"
    if kind == "patch":
        subjects = [m.get("subject") or "(diff)" for m in (h.get("patch") or {}).get("messages", [])
                    if m.get("applied")]
        return f"{_header_text(h.get('base')) or h.get('spec')} + {'; '.join(subjects)}"
    return h.get("spec") or h.get("header")


def _binary_evidence(sa: set, sb: set) -> tuple[bool | None, str]:
    """(whether the two variants ran different binaries, None when unknown; the evidence)."""
    if not sa or not sb:
        return None, "binary hash not recorded"
    if not (sa & sb):
        return True, (f"different binaries ({'/'.join(s[:12] for s in sorted(sa))} vs "
                      f"{'/'.join(s[:12] for s in sorted(sb))})")
    return False, f"same binary ({next(iter(sa & sb))[:12]})"


def _changed_files(src_a: dict | None, src_b: dict | None) -> list[str]:
    """The source files that differ between two different source sets."""
    if src_a is None or src_b is None:
        return []
    if set(src_a) == set(src_b) or "<kernel header>" in src_a or "<kernel header>" in src_b:
        return sorted(k for k in set(src_a) | set(src_b) if src_a.get(k) != src_b.get(k))
    return sorted(k for k in set(src_a) ^ set(src_b)
                  if (src_a.get(k) or src_b.get(k)) not in (set(src_a.values()) & set(src_b.values())))


def _source_evidence(va: dict, vb: dict, diff_bin: bool | None) -> tuple[bool | None, list[str], str | None]:
    """(whether the source sets differ, None when unknown; the differing files; the evidence)."""
    ia, ib = set(va.get("source_sha256") or []), set(vb.get("source_sha256") or [])
    if not ia or not ib or len(ia) > 1 or len(ib) > 1:
        diff_src = False if diff_bin is False else None
        why = va.get("source_how") if not ia else vb.get("source_how")
        return diff_src, [], (f"source sets unknown ({why})" if diff_src is None else None)
    how = va.get("source_how")
    if ia == ib:
        return False, [], f"same source set {next(iter(ia))[:16]} (by {how})"
    changed = _changed_files(va.get("sources"), vb.get("sources"))
    return True, changed, (f"different source sets ({next(iter(ia))[:16]} vs {next(iter(ib))[:16]}, "
                           f"by {how})" + (f": {', '.join(changed[:6])} differ" if changed else ""))


def _command_evidence(a: str, va: dict, b: str, vb: dict, cmd_why: str | None) -> tuple[bool | None, str]:
    """(whether both ran the same measured command, None when not compared; the evidence)."""
    shapes_a, shapes_b = va.get("_shapes") or {}, vb.get("_shapes") or {}
    common = [k for k in shapes_a if k in shapes_b]
    differing = [k for k in common if shapes_a[k] != shapes_b[k]]
    show = measured_command.show
    if cmd_why:
        return None, f"measured command not compared: {cmd_why}"
    if not common:
        return None, "measured command not compared: no configuration measured for both"
    if differing:
        k = differing[0]
        return False, (f"measured command differs ({len(differing)} of {len(common)} configurations): "
                       f"{a}: `{show(shapes_a[k])}`; {b}: `{show(shapes_b[k])}`")
    return True, (f"same measured command apart from the binary ({len(common)} configuration"
                  f"{'s' if len(common) > 1 else ''}): `{show(shapes_a[common[0]])}`")


def _verdict(diff_bin: bool | None, diff_src: bool | None, same_cmd: bool | None,
             evidence: list[str]) -> tuple[str, str]:
    """("different code" | "same code" | "unknown", the verdict sentence)."""
    if diff_src or same_cmd is False:
        why = [w for w, c in (("different source sets", diff_src),
                              ("different measured command", same_cmd is False)) if c]
        if diff_bin is False:
            why.insert(0, "same binary")
        return "different code", f"different code: {', '.join(why)}"
    if (diff_bin is False or diff_src is False) and same_cmd:
        return "same code", ("same code: same binary, same measured command" if diff_bin is False else
                             "same code: different binaries built from the same source set, same measured command")
    return "unknown", "unknown: " + "; ".join(e for e in evidence if "unknown" in e or "not " in e)


def _pair(a: str, va: dict, b: str, vb: dict, cmd_why: str | None = None) -> dict[str, Any]:
    diff_bin, bin_ev = _binary_evidence(set(va["sha256"]), set(vb["sha256"]))
    diff_src, changed, src_ev = _source_evidence(va, vb, diff_bin)
    evidence = [bin_ev] + ([src_ev] if src_ev else [])
    ha, hb = _header_text(va.get("header")), _header_text(vb.get("header"))
    if ha or hb:
        evidence.append(f"headers: {a} from {ha or 'built-in ring'}; {b} from {hb or 'built-in ring'}")
    same_cmd, cmd_ev = _command_evidence(a, va, b, vb, cmd_why)
    evidence.append(cmd_ev)
    code, verdict = _verdict(diff_bin, diff_src, same_cmd, evidence)
    return {"a": a, "b": b, "different_binaries": diff_bin, "different_sources": diff_src,
            "differing_sources": changed, "different_command": None if same_cmd is None else not same_cmd,
            "code": code, "verdict": verdict, "evidence": evidence,
            "measured_a": [va["first"], va["last"]], "measured_b": [vb["first"], vb["last"]]}


def _metric(run_dir: Path, variant: str) -> list[str]:
    """The variant's ok ns_per_op values, as text (so that NaN compares equal to NaN)."""
    return [record.text(r.get("ns_per_op")) for r in record.rows(run_dir)
            if r["variant"] == variant and r.get("status") == "ok"]


def _only_layout_seeds(ca: dict, va: dict, cb: dict, vb: dict) -> bool:
    """Whether one variant's binaries in two runs differ by their layout seeds alone: the same
    compiler (path and version), the same run-wide and per-binary flags, different layout seeds
    (each run draws its layouts from its own seed, ringlab.build.layouts, so its binaries differ
    by design)."""
    return (ca.get("compiler") == cb.get("compiler") and ca.get("compiler_version") == cb.get("compiler_version")
            and ca.get("flags") == cb.get("flags") and va.get("source_flags") == vb.get("source_flags")
            and bool(va.get("layout_seeds")) and bool(vb.get("layout_seeds"))
            and va.get("layout_seeds") != vb.get("layout_seeds"))


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
        ia, ib = set(va.get("source_sha256") or []), set(vb.get("source_sha256") or [])
        same_src = None if not ia or not ib else bool(ia & ib)
        ma, mb = _metric(Path(dir_a), v), _metric(Path(dir_b), v)
        same_numbers = bool(ma) and ma == mb
        out["variants"][v] = {"same_binary": same_bin, "same_sources": same_src, "identical_measurements": same_numbers,
                              "measured_a": [va["first"], va["last"]], "measured_b": [vb["first"], vb["last"]]}
        if same_numbers:
            out["problems"].append(f"{v}: identical ns_per_op values in both runs: stale (copied) data")
        if same_bin:
            out["problems"].append(f"{v}: the same binary in both runs: no code change between them")
        elif same_src and _only_layout_seeds(ca, va, cb, vb):
            out["variants"][v]["only_layout_seeds_differ"] = True
            out["problems"].append(f"{v}: the same sources, flags and compiler in both runs (only the layout "
                                   "seeds differ): no code change between them")
        elif same_src:
            out["problems"].append(f"{v}: the same sources in both runs (only flags/compiler changed)")
    ga, gb = (ca.get("git") or {}).get("commit"), (cb.get("git") or {}).get("commit")
    out["git"] = {"a": ga, "b": gb, "same": ga is not None and ga == gb}
    return out
