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

import hashlib
import itertools
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ringlab import paths


def git_info(root: str | Path | None = None) -> dict[str, Any]:
    """Commit of the ringlab checkout and whether the tree was dirty (hardened git: see
    ringlab.system.git; a checkout of another user is reported, never made an exception)."""
    from ringlab.system import git as hgit
    root = Path(root or paths.ROOT)

    def git(*args: str) -> str:
        # rstrip only: porcelain lines start with a meaningful space.
        return hgit.text(list(args), root, timeout=10, what=f"git -C {root}")
    try:
        commit = git("rev-parse", "HEAD")
    except hgit.GitRefused as e:
        return {"commit": None, "dirty": None, "error": str(e)}
    except hgit.GitError as e:
        if "not installed" in str(e):
            return {"commit": None, "dirty": None, "error": "git not installed"}
        return {"commit": None, "dirty": None, "error": f"not a git checkout ({root}): {e}".strip()}
    try:
        status = git("status", "--porcelain", "--untracked-files=no")
    except hgit.GitError:
        status = None
    return {"commit": commit, "dirty": None if status is None else bool(status),
            "dirty_files": [] if not status else [ln[3:] for ln in status.splitlines()][:50]}


# -- reading a run ------------------------------------------------------------------------
def load_env(run_dir: str | Path) -> dict[str, Any]:
    """env.json of a run folder through ``ringlab.rundir.read_env``: FileNotFoundError when there
    is none, DataError when it is corrupt."""
    from ringlab.rundir import read_env as _read
    if not (Path(run_dir) / "env.json").is_file():
        raise FileNotFoundError(f"{run_dir}: no env.json (not a ringlab run folder)")
    return dict(_read(run_dir).doc)


def read_env(run_dir: str | Path) -> dict[str, Any]:
    """env.json of a run folder, or {} when it is missing or unreadable (reports degrade, never fail)."""
    from ringlab.errors import DataError
    try:
        return load_env(run_dir)
    except (OSError, DataError):
        return {}


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    """raw.csv's rows through ``ringlab.rundir.read_raw`` (typed; missing values None), [] without one."""
    from ringlab.rundir import read_raw
    p = run_dir / "raw.csv"
    if not p.is_file():
        return []
    df = read_raw(p)
    df = df[df["variant"].notna()].astype(object)
    df = df.where(df.notna(), None)
    rows = df.to_dict("records")
    for r in rows:
        r["variant"] = _text(r["variant"])
    return rows


def _text(v: Any) -> str:
    """A raw.csv value as written: 3 not 3.0 for integral numbers read as floats."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return "" if v is None else str(v)


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


def _source_id(entry: dict[str, Any] | None) -> tuple[str | None, str]:
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


def _source_files(entry: dict[str, Any] | None, build: dict) -> dict[str, str] | None:
    if entry and isinstance(entry.get("source_files"), dict) and entry["source_files"]:
        return {str(k): str(v) for k, v in entry["source_files"].items()}
    return _sources_of(entry, build)


# -- the measured command ------------------------------------------------------------------
class _Ctx:
    """What Experiment.command needs to rebuild a trial's argv from a run folder."""

    def __init__(self, values: dict[str, Any], binaries: dict[str, Any]):
        self.values, self._bins, self.warnings = values, binaries, []

    def binary(self, name: str) -> Path:
        b = self._bins.get(name)
        return Path(b["path"]) if isinstance(b, dict) and b.get("path") else paths.bin_dir() / name

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


def _typed(v: Any) -> Any:
    """A raw.csv value as the experiment's parameter: integral floats (a column with gaps) as int."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if not isinstance(v, str):
        return v
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() else f


def _int(v: Any, default: int = -1) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if f != f else int(f)


def command_shape(argv: list[str], measured_binary: str) -> list[str]:
    """argv with the measured binary as ``<binary>`` and the Python interpreter as ``<python>``,
    so that two configurations compare by what they run, not by where files lie."""
    out = []
    py = Path(sys.executable).name
    for a in argv:
        a = str(a)
        if a == str(measured_binary):
            out.append("<binary>")
        elif Path(a).name in (py, "python", "python3") and os.sep in a:
            out.append("<python>")
        else:
            out.append(a)
    return out


def _row_key(row: dict[str, Any], cols: list[str]) -> str:
    return json.dumps([[c, _typed(row.get(c))] for c in cols]
                      + [_typed(row.get("cpu_req_producer")), row.get("pair_class")], default=str)


def _commands(env: dict, rows: list[dict[str, str]]) -> tuple[dict[str, dict[str, list[str]]], str | None, str]:
    """{variant: {configuration key: argv shape}}, the reason when not available, and where
    the argv came from: recorded by the runner (env.json "measured_commands") or rebuilt
    with the experiment's own ``command()`` from env.json's parameters and raw.csv's rows."""
    try:
        from ringlab.experiments import base
        exp_cls = base.get(str(env.get("experiment")))
    except Exception as e:   # an unknown experiment: say so, compare the rest
        return {}, f"experiment {env.get('experiment')!r} unknown to this ringlab ({e})", ""
    cols = list(exp_cls.param_columns())
    recorded = env.get("measured_commands")
    if isinstance(recorded, dict) and recorded:
        out: dict[str, dict[str, list[str]]] = {}
        for v, items in recorded.items():
            for it in items if isinstance(items, list) else []:
                if isinstance(it, dict) and isinstance(it.get("shape"), list):
                    out.setdefault(v, {})[_row_key(it.get("row") or {}, cols)] = it["shape"]
        return out, None, "recorded at run time"
    values = dict(env.get("parameters") or {})
    if not values:
        return {}, "env.json has no parameters to rebuild the command from", ""
    exp = exp_cls()
    ctx = _Ctx(values, env.get("binaries_used") or {})
    perf = None
    out = {}
    for row in rows:
        if row.get("icount_source") == "callgrind" or row.get("status") not in ("ok", None):
            continue
        key = _row_key(row, cols)
        v = row["variant"]
        if key in out.get(v, {}):
            continue
        config = {c: _typed(row[c]) for c in ["variant", *cols] if c in row}
        cpus = (_int(row.get("cpu_req_producer")), _int(row.get("cpu_req_consumer")))
        extra: dict[str, Any] = {"repeats": int(values.get("repeats", 1) or 1)}
        if "perf_cpu" in row:
            if perf is None:
                from ringlab import perfrecord
                perf = perfrecord.find_perf(str(values.get("perf", "perf"))) or str(values.get("perf", "perf"))
            extra.update(perf=perf, perf_cpu=_int(row.get("perf_cpu")), workload_cpu=cpus[0])
        spec = base.TrialSpec(config=config, trial=_int(row.get("trial"), 0), warmup=False, cpus=cpus,
                              pair_class=row.get("pair_class") or "unpinned", extra=extra)
        try:
            argv = [str(a) for a in exp.command(spec, ctx)]
            shape = command_shape(argv, str(exp.measured_binary(spec, argv, ctx)))
        except Exception as e:
            return {}, f"cannot rebuild the measured command ({type(e).__name__}: {e})", ""
        out.setdefault(v, {})[key] = shape
    return out, None, "rebuilt from env.json parameters and raw.csv rows"


def _show(shape: list[str], limit: int = 160) -> str:
    text = shlex.join(shape)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check(run_dir: str | Path) -> dict[str, Any]:
    """Per variant: binaries (sha256), source set, measured command, first/last measurement;
    per pair: "same code" or "different code", with the evidence."""
    run_dir = Path(run_dir)
    env = load_env(run_dir)
    build = env.get("build") or {}
    bins = _binaries(build)
    by_sha = {b.get("sha256"): b for b in bins if b.get("sha256")}
    used = env.get("binaries_used") or {}
    name_by_sha = {v.get("sha256"): k for k, v in used.items() if isinstance(v, dict)}
    rows = _rows(run_dir)
    variants: dict[str, dict[str, Any]] = {}
    for r in rows:
        v = variants.setdefault(r["variant"], {"sha256": [], "first": None, "last": None, "rows": 0, "ok_rows": 0})
        sha = _text(r.get("binary_sha256"))
        if sha and sha not in v["sha256"]:
            v["sha256"].append(sha)
        ts = _text(r.get("timestamp"))
        if ts:
            v["first"] = ts if v["first"] is None or ts < v["first"] else v["first"]
            v["last"] = ts if v["last"] is None or ts > v["last"] else v["last"]
        v["rows"] += 1
        v["ok_rows"] += r.get("status") == "ok"
    commands, cmd_why, cmd_from = _commands(env, rows)
    headers = build.get("header_sources") or {}
    problems: list[str] = []
    for name, v in variants.items():
        v["binary"] = [name_by_sha.get(s) or by_sha.get(s, {}).get("name") for s in v["sha256"]]
        entries = [by_sha.get(s) for s in v["sha256"]]
        srcs = [_source_files(e, build) for e in entries]
        v["sources"] = srcs[0] if len(srcs) == 1 else None
        ids = [_source_id(e) for e in entries]
        v["source_sha256"] = [i for i, _ in ids if i]
        v["source_how"] = ids[0][1] if ids else "no binary hash recorded"
        v["header"] = headers.get(name) or next((e.get("header") for e in entries if e and e.get("header")), None)
        shapes = commands.get(name) or {}
        v["command"] = next(iter(shapes.values()), None)
        v["command_source"] = cmd_from if shapes else None
        v["_shapes"] = shapes
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
        p = _pair(a, variants[a], b, variants[b], cmd_why)
        pairs.append(p)
        if p["code"] == "same code":
            what = ("ran the same binary with the same measured command" if p["different_binaries"] is False
                    else "ran the same code (one source set, one measured command)")
            problems.append(f"{a} and {b} {what}: their difference is noise, not code")
    for v in variants.values():
        v.pop("_shapes", None)
    git = env.get("git") or {}
    if git.get("dirty"):
        problems.append("ringlab's tree was dirty at run time (uncommitted changes)")
    return {"run_dir": str(run_dir), "run_id": env.get("run_id"), "experiment": env.get("experiment"),
            "host": env.get("host"), "status": env.get("status"), "started_utc": env.get("started_utc"),
            "ended_utc": env.get("ended_utc"), "git": git, "compiler": build.get("compiler"),
            "flags": build.get("flags") or build.get("cflags"), "variants": variants, "pairs": pairs,
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


def _pair(a: str, va: dict, b: str, vb: dict, cmd_why: str | None = None) -> dict[str, Any]:
    sa, sb = set(va["sha256"]), set(vb["sha256"])
    diff_bin = None if not sa or not sb else not (sa & sb)
    ia, ib = set(va.get("source_sha256") or []), set(vb.get("source_sha256") or [])
    src_a, src_b = va.get("sources"), vb.get("sources")
    evidence: list[str] = []
    if diff_bin is None:
        evidence.append("binary hash not recorded")
    elif diff_bin:
        evidence.append(f"different binaries ({'/'.join(s[:12] for s in sorted(sa))} vs "
                        f"{'/'.join(s[:12] for s in sorted(sb))})")
    else:
        evidence.append(f"same binary ({next(iter(sa & sb))[:12]})")
    changed: list[str] = []
    if not ia or not ib or len(ia) > 1 or len(ib) > 1:
        diff_src = False if diff_bin is False else None
        why = va.get("source_how") if not ia else vb.get("source_how")
        if diff_src is None:
            evidence.append(f"source sets unknown ({why})")
    else:
        diff_src = ia != ib
        if src_a is not None and src_b is not None:
            if not diff_src:
                changed = []
            elif set(src_a) == set(src_b) or "<kernel header>" in src_a or "<kernel header>" in src_b:
                changed = sorted(k for k in set(src_a) | set(src_b) if src_a.get(k) != src_b.get(k))
            else:
                changed = sorted(k for k in set(src_a) ^ set(src_b)
                                 if (src_a.get(k) or src_b.get(k)) not in
                                 (set(src_a.values()) & set(src_b.values())))
        how = va.get("source_how")
        if diff_src:
            evidence.append(f"different source sets ({next(iter(ia))[:16]} vs {next(iter(ib))[:16]}, "
                            f"by {how})" + (f": {', '.join(changed[:6])} differ" if changed else ""))
        else:
            evidence.append(f"same source set {next(iter(ia))[:16]} (by {how})")
    ha, hb = _header_text(va.get("header")), _header_text(vb.get("header"))
    if ha or hb:
        evidence.append(f"headers: {a} from {ha or 'built-in ring'}; {b} from {hb or 'built-in ring'}")
    shapes_a, shapes_b = va.get("_shapes") or {}, vb.get("_shapes") or {}
    common = [k for k in shapes_a if k in shapes_b]
    differing_cmd = [k for k in common if shapes_a[k] != shapes_b[k]]
    if cmd_why:
        same_cmd = None
        evidence.append(f"measured command not compared: {cmd_why}")
    elif not common:
        same_cmd = None
        evidence.append("measured command not compared: no configuration measured for both")
    elif differing_cmd:
        same_cmd = False
        k = differing_cmd[0]
        evidence.append(f"measured command differs ({len(differing_cmd)} of {len(common)} configurations): "
                        f"{a}: `{_show(shapes_a[k])}`; {b}: `{_show(shapes_b[k])}`")
    else:
        same_cmd = True
        evidence.append(f"same measured command apart from the binary ({len(common)} configuration"
                        f"{'s' if len(common) > 1 else ''}): `{_show(shapes_a[common[0]])}`")
    if diff_src or same_cmd is False:
        code = "different code"
        why = [w for w, c in (("different source sets", diff_src),
                              ("different measured command", same_cmd is False)) if c]
        if diff_bin is False:
            why.insert(0, "same binary")
        verdict = f"different code: {', '.join(why)}"
    elif (diff_bin is False or diff_src is False) and same_cmd:
        code = "same code"
        verdict = ("same code: same binary, same measured command" if diff_bin is False else
                   "same code: different binaries built from the same source set, same measured command")
    else:
        code = "unknown"
        verdict = "unknown: " + "; ".join(e for e in evidence if "unknown" in e or "not " in e)
    return {"a": a, "b": b, "different_binaries": diff_bin, "different_sources": diff_src,
            "differing_sources": changed, "different_command": None if same_cmd is None else not same_cmd,
            "code": code, "verdict": verdict, "evidence": evidence,
            "measured_a": [va["first"], va["last"]], "measured_b": [vb["first"], vb["last"]]}


def _metric(run_dir: Path, variant: str) -> list[str]:
    """The variant's ok ns_per_op values, as text (so that NaN compares equal to NaN)."""
    return [_text(r.get("ns_per_op")) for r in _rows(run_dir)
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
        elif same_src:
            out["problems"].append(f"{v}: the same sources in both runs (only flags/compiler changed)")
    ga, gb = (ca.get("git") or {}).get("commit"), (cb.get("git") or {}).get("commit")
    out["git"] = {"a": ga, "b": gb, "same": ga is not None and ga == gb}
    return out

