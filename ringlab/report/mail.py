"""A run as plain text for a mailing-list reply (``ringlab mail RUN``).

The text answers the reviewer's questions of the seed threads without the reader
opening anything else: where it ran (machine, kernel, compiler and flags), how
(pinning, governor or why not, rounds, trials per arm, failed trials), what came
out per configuration (medians of both arms, the delta with its CI, p and the
verdict, the spread, instructions per operation when counted) and the exact
command lines that reproduce it.

Plain text only: no markdown, every line at most ``width`` (72) columns.  Long
words (paths) are broken with a shell line continuation in commands and
wrapped elsewhere.  Nothing here computes a statistic: the numbers come from
``ringlab.stats.compare`` / ``summarize``, read by column name, so new columns
(``design``, ``n_pairs``, ``ci_level``, ``family_size``) are shown when present.

env.json is read through :func:`read_env` only.
"""
from __future__ import annotations

import json
import math
import shlex
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from ringlab import fmt, schema
from ringlab.stats import StatsError, compare, measurements, summarize
from ringlab.stats.summary import format_value
from ringlab.stats.compare import method_text

WIDTH = 72
MIN_WIDTH = 60
MAX_WIDTH = 1000
INSTR = "instructions_per_op"
#: ptr_ring's modes, as the harness names them
MODE_NAMES = {"ptr_ring": {0: "one thread", 1: "SPSC", 2: "near-full SPSC"}}
# columns shown elsewhere (placement) or not a configuration
_PLACEMENT_COLS = ("cpu_req_producer", "cpu_req_consumer", "pair_class")
_INSTR_VERDICT = {"faster": "fewer instructions", "slower": "more instructions",
                  "no significant difference": "same instructions"}


class MailError(ValueError):
    """Bad input to ``ringlab mail`` (names the parameter and the allowed values)."""


def read_env(run_dir) -> dict[str, Any]:
    """env.json of a run folder ({} when missing).  The only place this module reads it."""
    from ringlab.report.provenance import read_env as _read
    return _read(run_dir)


# -- small formatting helpers --------------------------------------------------------------
def _num(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return math.nan
    return x


def _ok(x) -> bool:
    return math.isfinite(_num(x))


def _int(v) -> str:
    """12 345 678: thin groups that cannot be misread as a decimal point."""
    return f"{int(v):,}".replace(",", " ")


def _count(n, what: str) -> str:
    return f"{int(n)} {what}" + ("" if int(n) == 1 else "s")


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _field(label: str, text: str, width: int, indent: int = 2, label_w: int = 10) -> list[str]:
    """``  label     text`` wrapped with a hanging indent under the text."""
    first = " " * indent + f"{label:<{label_w}}" + " "
    hang = " " * len(first)
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=hang,
                         break_on_hyphens=False) or [first.rstrip()]


def _para(text: str, width: int, indent: int = 0) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=" " * indent,
                         subsequent_indent=" " * indent, break_on_hyphens=False)


def _short(sha: str | None) -> str:
    return (sha or "")[:12] or "n/a"


# -- what the run was -----------------------------------------------------------------------
def pick_baseline(df: pd.DataFrame, env: dict, baseline: str | None) -> str:
    """The run's baseline by the one rule of :mod:`ringlab.report.baseline` (the one summary.md
    names); a run with a single variant compares nothing and names that variant."""
    from ringlab.report.baseline import pick_baseline as rule, run_variants
    variants = run_variants(df)
    if not variants:
        raise MailError("RUN: raw.csv has no variant column or no rows; nothing to compare")
    if baseline and str(baseline) not in variants:
        raise MailError(f"--baseline: {baseline!r} is not a variant of this run; allowed: "
                        + ", ".join(sorted(variants)))
    return rule(df, env, baseline) or variants[0]


def _machine(env: dict) -> list[tuple[str, str]]:
    e = env.get("environment") or {}
    host, cpu, topo = e.get("host") or {}, e.get("cpu") or {}, e.get("topology") or {}
    virt = (host.get("virtualization") or {}).get("type") if isinstance(host, dict) else None
    parts = [cpu.get("model") or "unknown CPU"]
    if topo.get("n_cpus"):
        llc = len(topo.get("llc_groups") or []) or None
        numa = len(topo.get("numa_nodes") or {}) or None
        extra = ", ".join(_count(n, what) for n, what in ((topo.get("n_packages"), "package"), (llc, "LLC"),
                                                          (numa, "NUMA node")) if n)
        parts.append(f"{topo['n_cpus']} CPUs" + (f" ({extra})" if extra else ""))
    if isinstance(host, dict) and host.get("machine"):
        parts.append(host["machine"])
    parts.append(f"{virt} guest" if virt and virt != "none" else "bare metal" if virt == "none" else "")
    hid = (host.get("host_id") if isinstance(host, dict) else None) or env.get("host")
    if hid:
        parts.append(f"host id {hid}")
    rows = [("Machine", ", ".join(p for p in parts if p))]
    kernel = host.get("kernel") if isinstance(host, dict) else None
    rows.append(("Kernel", kernel or "unknown"))
    b = env.get("build") or {}
    sw = (e.get("software") or {}).get("compiler") or {}
    rows.append(("Compiler", b.get("compiler_version") or sw.get("version") or b.get("compiler") or "unknown"))
    flags = b.get("cflags") or b.get("flags") or []
    rows.append(("Flags", " ".join(flags) if isinstance(flags, list) else str(flags) or "unknown"))
    git = env.get("git") or {}
    rl = f"{env.get('ringlab_version') or '?'}, commit {_short(git.get('commit'))}"
    if git.get("dirty") is not None:
        rl += " (uncommitted changes)" if git.get("dirty") else " (clean tree)"
    rows.append(("ringlab", rl))
    return rows


def _header_source(name: str, env: dict) -> str | None:
    """What a kernel-header variant was built from (build.kernel_headers, str or dict)."""
    kh = (env.get("build") or {}).get("kernel_headers") or {}
    entry = kh.get(name) if isinstance(kh, dict) else None
    if entry is None:
        return None
    if isinstance(entry, str):
        return f"header {entry}"
    if isinstance(entry, dict):
        bits = []
        for k in ("source", "spec", "header", "path", "tree", "rev", "sha", "commit"):
            if entry.get(k):
                bits.append(f"{k} {entry[k]}")
        patch = entry.get("patch") or entry.get("patches")
        for p in (patch if isinstance(patch, list) else [patch] if patch else []):
            if isinstance(p, dict):
                desc = ", ".join(f"{k} {p[k]}" for k in ("subject", "message_id", "from", "date", "sha256")
                                 if p.get(k))
                bits.append(f"patch ({desc})" if desc else "patch")
            else:
                bits.append(f"patch {p}")
        return "; ".join(bits) or json.dumps(entry, sort_keys=True)
    return str(entry)


def _variant_lines(variants: list[str], df: pd.DataFrame, env: dict, width: int) -> list[str]:
    out = []
    used = env.get("binaries_used") or {}
    for v in variants:
        src = _header_source(v, env)
        desc = src or ("ringlab's own ring (csrc/rings)" if env.get("experiment") == "ptr_ring" else "")
        shas = sorted(set(df.loc[df["variant"].astype(str) == v, "binary_sha256"].dropna().astype(str))) \
            if "binary_sha256" in df.columns else []
        if not shas:
            shas = [d.get("sha256") for k, d in used.items() if isinstance(d, dict) and k.endswith(f"-{v}")]
        binary = "binary sha256 " + (", ".join(_short(s) for s in shas if s) or "not recorded")
        out += _field(v, "; ".join(x for x in (desc, binary) if x), width)
    if "binary_sha256" in df.columns and len(variants) > 1:
        sets = {v: set(df.loc[df["variant"].astype(str) == v, "binary_sha256"].dropna()) for v in variants}
        for i, a in enumerate(variants):
            for b in variants[i + 1:]:
                if sets[a] & sets[b]:
                    out += _para(f"WARNING: {a} and {b} ran the same binary: any difference between "
                                 "them comes from how they were run, not from their code.", width, 2)
    return out


def _placement(r: pd.Series | dict) -> str:
    p, c = _num(r.get("cpu_req_producer")), _num(r.get("cpu_req_consumer"))
    cls = r.get("pair_class")
    cls = "" if cls is None or (isinstance(cls, float) and math.isnan(cls)) else str(cls)
    mode = _num(r.get("mode"))
    if cls == "unpinned" or (math.isfinite(p) and p < 0):
        return "unpinned"
    if math.isfinite(p) and (mode == 0 or not math.isfinite(c) or c < 0 or cls == "same-cpu" and p == c):
        return f"CPU {int(p)}" + (f" ({cls})" if cls and cls != "same-cpu" else "")
    if math.isfinite(p) and math.isfinite(c):
        return f"producer CPU {int(p)}, consumer CPU {int(c)}" + (f" ({cls})" if cls else "")
    return cls or "not recorded"


def _method_lines(df: pd.DataFrame, env: dict, meas: pd.DataFrame, width: int) -> list[str]:
    out = []
    params = env.get("parameters") or {}
    # pinning, per configuration, and whether the threads stayed there
    if "pair_class" in meas.columns:
        keys = [c for c in ("mode",) + _PLACEMENT_COLS if c in meas.columns]
        places = []
        for key, _ in meas.groupby(keys, sort=True, dropna=False):
            r = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
            places.append((f"mode {_fmt(r['mode'])}: " if "mode" in r else "") + _placement(r))
        text = "; ".join(dict.fromkeys(places))
        if "actual_pair_class" in meas.columns:
            timed = meas[meas["actual_pair_class"].notna()] if "icount_source" not in meas.columns else \
                meas[meas["actual_pair_class"].notna() & meas["icount_source"].isna()]
            if len(timed):
                same = int((timed["actual_pair_class"].astype(str) == timed["pair_class"].astype(str)).sum())
                text += (f"; the threads ran on the requested CPUs in {same} of {len(timed)} "
                         "measured trials")
        out += _field("Pinning", text, width)
    # governor
    gov = ((env.get("governor") or {}).get("governor") or {})
    if not gov:
        gov = (env.get("environment") or {}).get("governor") or {}
    status = gov.get("status") or ("available" if gov.get("available") else None)
    if status in ("set", "applied", "ok", "performance"):
        g = f"performance, set for the run and restored afterwards ({status})"
    elif status:
        g = "not set: " + (gov.get("reason") or status)
    else:
        g = "not recorded"
    if params.get("governor") is False:
        g = "left alone (governor=false)" + (f"; {gov.get('reason')}" if gov.get("reason") else "")
    out += _field("Governor", g, width)
    # rounds
    trials, warm = params.get("trials"), params.get("warmup")
    if trials is not None:
        rounds = int(trials) + int(warm or 0)
        text = (f"{rounds} ({int(warm or 0)} warm-up, {int(trials)} measured); each round runs the "
                "arms of each configuration back to back in a fresh random order, the configurations' "
                "blocks shuffled"
                + (f" (seed {params['seed']})" if "seed" in params else "")
                + ", each trial in a fresh process")
        if params.get("count"):
            text += f"; {_int(params['count'])} operations per trial"
        out += _field("Rounds", text, width)
    # failed trials
    if "status" in df.columns:
        bad = df[df["status"].astype(str) != "ok"]
        if len(bad):
            c = bad.groupby(["variant", "status"]).size()
            text = ", ".join(f"{v} {s} {n}" for (v, s), n in c.items()) + " (excluded from the statistics)"
        else:
            text = f"none ({len(df)} of {len(df)} trials ok)"
        out += _field("Failures", text, width)
    # counters
    e = (env.get("environment") or {}).get("perf") or {}
    missing = sorted(k for k, v in (e.get("counters") or {}).items() if isinstance(v, dict) and not v.get("ok"))
    if missing:
        reason = next((v.get("reason") for k, v in e["counters"].items() if k in missing and v.get("reason")), "")
        out += _field("Counters", f"{', '.join(missing)} not available here" + (f" ({reason})" if reason else "")
                      + "; those columns are empty, never 0", width)
    return out


def _icount_note(df: pd.DataFrame, env: dict) -> str:
    """Where the instruction counts come from, with the numbers of raw.csv (not the requested ones)."""
    params = env.get("parameters") or {}
    if INSTR in df.columns and pd.to_numeric(df[INSTR], errors="coerce").notna().any():
        srcs = sorted(set(df.loc[pd.to_numeric(df[INSTR], errors="coerce").notna(), "icount_source"]
                          .fillna("perf").astype(str))) if "icount_source" in df.columns else ["perf"]
        txt = "counted by " + " and ".join(srcs)
        if "callgrind" in srcs:
            cg = df[df["icount_source"].astype(str) == "callgrind"]
            ops = sorted(set(pd.to_numeric(cg.get("icount_ops"), errors="coerce").dropna().astype(int))) \
                if "icount_ops" in cg.columns else []
            keys = [c for c in ("variant", "mode", "size") if c in cg.columns]
            runs = sorted(set(cg.groupby(keys).size())) if keys else []
            txt += " in the measured region only, single-threaded configurations"
            if runs and ops:
                rr = str(runs[0]) if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
                txt += f", {rr} runs of {' or '.join(_int(o) for o in ops)} operations each"
        return txt
    if params.get("icount") is False:
        return "not counted (icount=false, and no hardware counters recorded)"
    return "not counted (no hardware counters and no callgrind rows)"


# -- the results ----------------------------------------------------------------------------
def _config_key(r, cols) -> tuple:
    return tuple(str(r[c]) for c in cols)


def _ci_label(r) -> str:
    return fmt.ci_header(r.get("ci_level"))


def _verdict(r, instr: bool = False) -> str:
    v = str(r.get("verdict", ""))
    if instr:
        v = _INSTR_VERDICT.get(v, v)
    note = r.get("note")
    tn = _num(r.get("trials_needed"))
    extra = []
    if v == "inconclusive" and math.isfinite(tn):
        extra.append(f"~{int(tn)} trials per arm would settle it")
    elif isinstance(note, str) and note and not note.startswith("trials_needed") and "exact" not in note:
        extra.append(note)
    return v + (f" ({'; '.join(extra)})" if extra else "")


def _instr_rows(df: pd.DataFrame, baseline: str, cols: list[str]) -> dict[tuple, list[tuple[str, pd.Series]]]:
    """(config key, candidate) -> [(source, compare row)] for instructions per op."""
    out: dict[tuple, list] = {}
    if INSTR not in df.columns:
        return out
    vals = pd.to_numeric(df[INSTR], errors="coerce")
    sub = df[vals.notna()]
    if not len(sub):
        return out
    src = sub["icount_source"].fillna("perf").astype(str) if "icount_source" in sub.columns else \
        pd.Series("perf", index=sub.index)
    for s in sorted(src.unique()):
        part = sub[src == s]
        if baseline not in set(part["variant"].astype(str)):
            continue
        try:
            cmp = compare(part, baseline, INSTR, by=cols or None)
        except StatsError:
            continue
        for _, r in cmp.iterrows():
            out.setdefault((_config_key(r, cols), str(r["candidate"])), []).append((s, r))
    return out


def _spread(df: pd.DataFrame, metric: str, cols: list[str]) -> dict[tuple, float]:
    """(variant, config key) -> CV of the measurements (from stats.summarize)."""
    try:
        s = summarize(df, metric, by=cols or None, n_resamples=200)
    except StatsError:
        return {}
    return {(str(r["variant"]),) + _config_key(r, cols): _num(r["cv"]) for _, r in s.iterrows()}


def _test_name(cmp: pd.DataFrame) -> str:
    """The significance test, from a ``test`` column when compare() provides one."""
    for col in ("test", "p_test"):
        if col in cmp.columns and cmp[col].notna().any():
            return ", ".join(sorted(set(cmp[col].dropna().astype(str))))
    designs = set(cmp["design"].dropna().astype(str)) if "design" in cmp.columns else set()
    if designs and designs != {"unpaired"}:
        return "the test that matches each row's design"
    return "Mann-Whitney U"


def _config_title(r, vary: list[str], experiment: str) -> str:
    bits = []
    for c in vary:
        if c == "mode":
            name = MODE_NAMES.get(experiment, {}).get(int(_num(r[c]))) if _ok(r[c]) else None
            bits.append(f"mode {_fmt(r[c])}" + (f" ({name})" if name else ""))
        else:
            bits.append(f"{c} {_fmt(r[c])}")
    place = _placement(r) if any(c in r for c in _PLACEMENT_COLS) else ""
    return ", ".join(bits + ([place] if place else [])) or "all trials"


def _results(df: pd.DataFrame, env: dict, baseline: str, metric: str, width: int,
             candidates: list[str] | None) -> list[str]:
    cmp = compare(df, baseline, metric)
    if candidates:
        cmp = cmp[cmp["candidate"].astype(str).isin(candidates)]
    if not len(cmp):
        raise MailError(f"RUN: no comparison against baseline {baseline!r} (no other variant was measured)")
    cols = list(cmp.attrs.get("group_columns") or [])
    experiment = str(env.get("experiment") or (df["experiment"].iloc[0] if "experiment" in df.columns else ""))
    vary = [c for c in cols if c not in _PLACEMENT_COLS and cmp[c].astype(str).nunique() > 1]
    const = [c for c in cols if c not in _PLACEMENT_COLS and c not in vary]
    instr = _instr_rows(df, baseline, cols)
    cv = _spread(df, metric, cols)
    lib = bool(cmp["lower_is_better"].iloc[0]) if "lower_is_better" in cmp.columns else metric in schema.LOWER_IS_BETTER
    first = cmp.iloc[0]
    fam = _num(first.get("family_size"))
    fam = int(fam) if math.isfinite(fam) else len(cmp)
    unit = "ns per operation" if metric == "ns_per_op" else metric
    out = [f"Results: {unit} ({'lower' if lib else 'higher'} is better), medians per arm", ""]
    legend = (method_text(cmp).rstrip(".") + ("; negative delta = candidate faster" if lib else "")
              + "; CV: spread of the trials of one arm.")
    out += _para(legend, width, 2)
    if const:
        out += _para("Same in every configuration: " + ", ".join(f"{c} {_fmt(first[c])}" for c in const)
                     + ".", width, 2)
    out += _para("instructions/op: " + _icount_note(df, env) + ".", width, 2)
    for key, grp in cmp.groupby(cols, sort=True, dropna=False) if cols else [((), cmp)]:
        r0 = grp.iloc[0]
        out += ["", *_para(_config_title(r0, vary, experiment), width, 2)]
        ck = _config_key(r0, cols)
        arms = [(baseline, r0["median_baseline"], r0["n_baseline"])]
        arms += [(str(r["candidate"]), r["median_candidate"], r["n_candidate"]) for _, r in grp.iterrows()]
        for name, med, n in arms:
            c = cv.get((name,) + ck, math.nan)
            out += _field(name, f"{format_value(_num(med), metric)}  (n = {int(_num(n))}"
                          + (f", CV {c * 100:.1f}%" if math.isfinite(c) else "") + ")", width, 4, 12)
        multi = len(grp) > 1
        for _, r in grp.iterrows():
            cand = str(r["candidate"])
            tag = f" {cand}" if multi else ""
            d = fmt.pct(r["delta_pct"])
            if _ok(r["ci_low_pct"]):
                d += f", {_ci_label(r)} {fmt.ci(r['ci_low_pct'], r['ci_high_pct'])}"
            if _ok(r.get("p_holm")):
                pv = fmt.p(r["p_holm"])
                d += f", p {pv}" if pv.startswith("<") else f", p = {pv}"
            if isinstance(r.get("note"), str) and "exact" in r["note"]:
                d += ", exact (every trial gave the same value)"
            out += _field("delta" + tag, d, width, 4, 12)
            if "design" in r and isinstance(r["design"], str) and r["design"]:
                dz = r["design"] + (f", {int(_num(r['n_pairs']))} pairs" if _ok(r.get("n_pairs")) else "")
                out += _field("design" + tag, dz, width, 4, 12)
            out += _field("verdict" + tag, _verdict(r), width, 4, 12)
            for src, ir in instr.get((ck, cand), []):
                txt = (f"{baseline} {_num(ir['median_baseline']):.2f}, {cand} {_num(ir['median_candidate']):.2f}"
                       f" ({_num(ir['median_candidate']) - _num(ir['median_baseline']):+.2f}, "
                       f"{fmt.pct(ir['delta_pct'])}): {_verdict(ir, instr=True)}")
                if isinstance(ir.get("note"), str) and "exact" in ir["note"]:
                    txt += f", exact ({src}: identical counts in every run)"
                elif _ok(ir["ci_low_pct"]):
                    txt += f", {_ci_label(ir)} {fmt.ci(ir['ci_low_pct'], ir['ci_high_pct'])} ({src})"
                else:
                    txt += f" ({src})"
                out += _field("instr/op" + tag, txt, width, 4, 12)
    return out


# -- how to reproduce ------------------------------------------------------------------------
def _executed_notebook(run_dir: Path) -> tuple[str, dict] | None:
    """(notebook file name, papermill parameters) of the executed notebook in the run folder."""
    for nb in sorted(run_dir.glob("*.ipynb")):
        try:
            meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        except (OSError, ValueError):
            continue
        if isinstance(meta.get("parameters"), dict):
            return nb.name, meta["parameters"]
    return None


def _cmd_lines(words: list[str], width: int) -> list[str]:
    """A shell command in lines of at most ``width`` columns, joined by backslash continuations.

    A word too long for a line is split with backslash-newline, which the shell
    removes, so the continuation starts in column 0 and the word stays whole."""
    groups: list[str] = []
    i = 0
    while i < len(words):
        n = 3 if words[i] == "-p" else 2 if words[i] == "-k" else 1
        groups.append(" ".join(words[i:i + n]))
        i += n
    out: list[str] = []
    line = "  "
    for g in groups:
        if line.strip() and len(line) + 1 + len(g) + 2 > width:
            out.append(line + " \\")
            line = "    "
        line = line + (" " if line.strip() else "") + g
        while len(line) + 2 > width and "'" not in line:   # a word longer than a line
            out.append(line[:width - 1] + "\\")
            line = line[width - 1:]
    out.append(line)
    return out


def _patch_copies(kernel_headers: str, run_dir: Path) -> list[str]:
    """For each ``+PATCH`` file of kernel_headers, the copy kept in the run folder (same sha256)."""
    import hashlib
    from ringlab import paths

    def sha(p: Path) -> str | None:
        try:
            return hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            return None
    kept = {sha(f): f.name for f in sorted(run_dir.iterdir())
            if f.is_file() and f.suffix in (".patch", ".mbox", ".diff", ".eml")}
    notes = []
    for part in kernel_headers.split(","):
        if "+" not in part:
            continue
        ref = part.split("+", 1)[1]
        h = sha(Path(ref)) if not ref.startswith(("lore:", "builtin:")) else None
        if h and h in kept:
            notes.append(f"{_relative(ref, paths.ROOT)} is the file {kept[h]} in the run folder "
                         f"(sha256 {h[:12]}).")
    return notes


def _relative(value: str, root: Path) -> str:
    prefix = str(root).rstrip("/") + "/"
    return value.replace(prefix, "")


def reproduce_lines(run_dir: Path, env: dict, width: int,
                    notebook: tuple[str, dict] | None = None) -> list[str]:
    from ringlab import paths
    out = ["How to reproduce (from a ringlab checkout at commit "
           f"{_short((env.get('git') or {}).get('commit'))}):"]
    out = _para(out[0], width)
    params = env.get("parameters") or {}
    experiment = env.get("experiment")
    if experiment and params:
        try:
            from ringlab.experiments import get
            spec = get(experiment).all_params()
        except Exception:  # an unknown or renamed experiment: plain formatting
            spec = {}
        words = ["ringlab", "run", str(experiment)]
        for k, v in params.items():
            txt = spec[k].format(v) if k in spec else (",".join(map(str, v)) if isinstance(v, list)
                                                       else str(v).lower() if isinstance(v, bool) else str(v))
            words += ["-p", k, shlex.quote(_relative(txt, paths.ROOT))]
        out += ["", *_para("The measurement, every parameter spelled out:", width, 2)]
        out += _cmd_lines(words, width)
        for note in _patch_copies(str(params.get("kernel_headers") or ""), run_dir):
            out += _para(note, width, 2)
    nb = notebook or _executed_notebook(run_dir)
    if nb:
        name, nbp = nb
        words = ["papermill", f"notebooks/{name}", "out.ipynb", "-k", "python3"]
        for k, v in nbp.items():
            if k in ("out_dir", "host"):
                continue
            words += ["-p", k, shlex.quote(_relative(str(v), paths.ROOT))]
        out += ["", *_para(f"The whole notebook ({Path(name).stem}), with the parameters it "
                           "was given:", width, 2)]
        out += _cmd_lines(words, width)
    if not (experiment and params) and not nb:
        out += _para("not recorded (env.json has no parameters)", width, 2)
    return out


# -- the mail --------------------------------------------------------------------------------
def mail_text(run_dir, baseline: str | None = None, width: int = WIDTH, metric: str | None = None,
              candidates: list[str] | None = None, notebook: tuple[str, dict] | None = None) -> str:
    """The run in ``run_dir`` as plain text for a mailing-list reply.

    ``notebook`` = (notebook file name, its parameters) lets a notebook that is still
    running give its own papermill line; otherwise the executed notebook in the run folder
    (papermill metadata) is used when there is one."""
    if not isinstance(width, int) or width < MIN_WIDTH:
        raise MailError(f"--width: {width!r} is too narrow; allowed: an integer >= {MIN_WIDTH} (default {WIDTH})")
    if width > MAX_WIDTH:
        raise MailError(f"--width: {width!r} is too wide; allowed: an integer in [{MIN_WIDTH}, {MAX_WIDTH}] "
                        f"(default {WIDTH})")
    run_dir = Path(run_dir)
    raw = run_dir / "raw.csv"
    if run_dir.is_dir() and not raw.exists() and not raw.is_symlink():
        raise MailError(f"RUN: no raw.csv in {run_dir} ({raw}: no such file); allowed: a run folder written by `ringlab run` "
                        "or a notebook")
    from ringlab.rundir import read_run, require_metric
    df, run_env = read_run(run_dir)   # DataError (exit 2) naming the file and line when one is corrupt
    env = dict(run_env.doc) if run_env is not None else {}
    from ringlab.report import pick_metric
    try:
        metric = pick_metric(df, metric)
        require_metric(df, metric, raw)
        measurements(df, metric)
    except StatsError as e:
        raise MailError(f"--metric: {e}") from None
    base = pick_baseline(df, env, baseline)
    variants = [base] + sorted(set(df["variant"].astype(str)) - {base})
    if candidates:
        bad = [c for c in candidates if c not in variants or c == base]
        if bad:
            raise MailError(f"--candidate: {', '.join(bad)} not a variant of this run other than the baseline; "
                            f"allowed: {', '.join(v for v in variants if v != base)}")
        variants = [base] + [v for v in variants if v in candidates]
    meas, _ = measurements(df, metric)

    exp = env.get("experiment") or (str(df["experiment"].iloc[0]) if "experiment" in df.columns and len(df) else "run")
    title = f"ringlab A/B: {', '.join(variants[1:])} against {base} ({exp}, run {env.get('run_id') or run_dir.name})"
    lines = _para(title, width)
    when = [x for x in (env.get("started_utc"), env.get("ended_utc")) if x]
    if when:
        lines += _para(f"Measured {' to '.join(when)}" + (f", status {env['status']}" if env.get("status") else "")
                       + ".", width)
    lines.append("")
    for label, text in _machine(env):
        lines += _field(label, text, width, 0)
    lines += ["", "Variants"]
    lines += _variant_lines(variants, df, env, width)
    lines += ["", "Method"]
    lines += _method_lines(df, env, meas, width)
    lines.append("")
    lines += _results(df, env, base, metric, width, variants[1:] if candidates else None)
    lines.append("")
    lines += reproduce_lines(run_dir, env, width, notebook)
    for w in env.get("warnings") or []:
        lines += [""] + _para(f"Warning recorded during the run: {w}", width)
    lines += ["", *_para("Generated by ringlab mail from raw.csv (one row per trial) and env.json "
                         "of the run folder.", width)]
    text = "\n".join(ln.rstrip() for ln in lines) + "\n"
    return text


__all__ = ["MailError", "WIDTH", "mail_text", "pick_baseline", "read_env", "reproduce_lines"]
