"""What the run was and how it ran, for ``ringlab mail``: machine, variants, method."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from ringlab.report.mailfmt import _count, _field, _fmt, _int, _num, _para, _short

INSTR = "instructions_per_op"
# columns shown elsewhere (placement) or not a configuration
_PLACEMENT_COLS = ("cpu_req_producer", "cpu_req_consumer", "pair_class")


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


def _pinning_text(meas: pd.DataFrame) -> str:
    """The placement of each configuration and how many measured trials ran on the requested CPUs."""
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
    return text


def _governor_text(env: dict, params: dict) -> str:
    """Whether the run set the performance governor, and why not."""
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
    return g


def _method_lines(df: pd.DataFrame, env: dict, meas: pd.DataFrame, width: int) -> list[str]:
    out = []
    params = env.get("parameters") or {}
    # pinning, per configuration, and whether the threads stayed there
    if "pair_class" in meas.columns:
        out += _field("Pinning", _pinning_text(meas), width)
    # governor
    out += _field("Governor", _governor_text(env, params), width)
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


# -- the lines of the LKP-shaped reply -------------------------------------------------------
_COUNTER_EVENTS = ("cycles", "instructions", "branches", "branch_misses", "cache_misses")


def _pmu_missing(env: dict) -> list[str]:
    perf = ((env.get("environment") or {}).get("perf") or {}).get("counters") or {}
    return [k for k in _COUNTER_EVENTS if isinstance(perf.get(k), dict) and not perf[k].get("ok")]


def _virt(env: dict) -> str | None:
    host = (env.get("environment") or {}).get("host") or {}
    v = (host.get("virtualization") or {}).get("type") if isinstance(host, dict) else None
    return v if v and v != "none" else None


def counters_line(df: pd.DataFrame, env: dict) -> str:
    """Whether this host has a PMU, and what counts instructions instead (the mail's second
    line, the first of notebook 10's overview)."""
    missing = _pmu_missing(env)
    counted = INSTR in df.columns and pd.to_numeric(df[INSTR], errors="coerce").notna().any()
    srcs = sorted(set(df.loc[pd.to_numeric(df[INSTR], errors="coerce").notna(), "icount_source"]
                      .fillna("perf").astype(str))) if counted and "icount_source" in df.columns else []
    if not missing:
        return "Counters: perf_event on this host's PMU" + (f"; instructions also by {', '.join(srcs)}"
                                                            if srcs else "") + "."
    where = f" ({_virt(env)} guest)" if _virt(env) else ""
    if "callgrind" in srcs:
        return (f"No PMU on this host{where}: callgrind counts the instructions of the measured "
                "region instead (-p icount true, single-threaded rows).")
    params = env.get("parameters") or {}
    exp = env.get("experiment")
    why = (f"callgrind counts single-threaded trials only, and {exp} is not" if exp in
           ("page_frag", "perf_rb", "ringtest", "kmod") else "icount=false" if params.get("icount") is False
           else "callgrind counts single-threaded configurations only")
    return f"No PMU on this host{where}, and no callgrind counts in this run ({why})."


def machine_line(env: dict) -> str:
    """One line as the kernel test robot writes it: "2 threads 1 sockets (AMD EPYC) with 8G
    memory", then SMT, virtualisation and kernel."""
    e = env.get("environment") or {}
    host, cpu, topo = e.get("host") or {}, e.get("cpu") or {}, e.get("topology") or {}
    n, sockets = topo.get("n_cpus"), topo.get("n_packages")
    bits = [f"{n} threads" if n else "? threads", f"{sockets} sockets" if sockets else "? sockets",
            f"({cpu.get('model') or 'unknown CPU'})"]
    mem = host.get("memory_kb") if isinstance(host, dict) else None
    bits.append(f"with {round(mem / 1048576)}G memory" if isinstance(mem, (int, float)) and mem > 0
                else "with memory not recorded")
    line = " ".join(bits)
    tpc = topo.get("threads_per_core")
    extra = [f"SMT {'on' if tpc > 1 else 'off'}" if isinstance(tpc, int) else None,
             f"{_virt(env)} guest" if _virt(env) else "bare metal" if (host.get("virtualization") or {}).get("type")
             == "none" else None,
             f"kernel {host.get('kernel')}" if isinstance(host, dict) and host.get("kernel") else None]
    return line + "".join(f", {x}" for x in extra if x)


def _header_specs(env: dict) -> dict[str, str]:
    kh = str((env.get("parameters") or {}).get("kernel_headers") or "")
    out = {}
    for part in kh.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def aa_controls(env: dict, baseline: str, candidates: list[str]) -> list[str]:
    """The candidates that build the baseline's own code again (an A/A arm): the same
    kernel-header source as the baseline, or the patch A/B's ``control``."""
    specs = _header_specs(env)
    return [c for c in candidates
            if (c in specs and specs.get(c) == specs.get(baseline)) or (c == "control" and baseline in specs)]


_OWN_CODE = {"ptr_ring": "csrc/rings/ptr_ring_{}.h", "page_frag": "csrc/page_frag ({})",
"ringtest": "tools/virtio/ringtest ({})"}


def _patch_subject(run_dir: Path) -> str | None:
    for f in sorted(Path(run_dir).glob("*.patch")):
        try:
            for ln in f.read_text(errors="replace").splitlines()[:80]:
                if ln.lower().startswith("subject:"):
                    return ln.split(":", 1)[1].strip()
        except OSError:
            continue
        return f.name
    return None


def tested_line(env: dict, baseline: str, candidates: list[str], run_dir) -> str:
    """What was measured: the patch (subject), or the code of each arm, and ringlab's commit."""
    from ringlab.report.mail_reproduce import relative_to_tree
    git = env.get("git") or {}
    rl = f"ringlab {_short(git.get('commit'))}" + (" (uncommitted changes)" if git.get("dirty") else "")
    specs = _header_specs(env)
    subject = _patch_subject(Path(run_dir))
    exp = env.get("experiment")
    if exp == "perf_rb":
        arms = ("close(-1) loop alone (base) and under perf record on the running kernel "
                "(forward; backward: --overwrite)")
    elif subject:
        arms = f"patch \"{subject}\" on {relative_to_tree(specs.get(baseline, baseline), env)}"
    elif any("+" in specs.get(c, "") for c in candidates):
        arms = "; ".join(f"{c}: patch {Path(specs[c].split('+', 1)[1]).name} on "
                         f"{relative_to_tree(specs[c].split('+', 1)[0], env)}"
                         for c in candidates if "+" in specs.get(c, ""))
        arms += f"; base: {relative_to_tree(specs.get(baseline, baseline), env)}"
    elif specs:
        arms = "; ".join(f"{v}: {relative_to_tree(specs[v], env)}" if v in specs else
                         f"{v}: {_OWN_CODE.get(exp, '{}').format(v)}" for v in [baseline, *candidates])
    else:
        arms = ", ".join(_OWN_CODE.get(exp, "{}").format(v) for v in [*candidates, baseline])
        arms = f"{arms} (ringlab's own code; base {baseline})"
    return f"tested: {arms}; {rl}"


def not_measured(df: pd.DataFrame, env: dict) -> str:
    """What this host could not measure: the PMU's counters, the CPU placements it lacks."""
    from ringlab.system.topology import PAIR_CLASSES
    bits = []
    missing = _pmu_missing(env)
    if missing:
        bits.append(f"{', '.join(missing)} (no PMU)")
    topo = (env.get("environment") or {}).get("topology") or {}
    present = topo.get("classes_present")
    if isinstance(present, list):
        lack = [c for c in PAIR_CLASSES if c not in present]
        if lack:
            bits.append(f"placements {', '.join(lack)} (this host has {topo.get('n_cpus')} CPUs: "
                        f"{', '.join(present)} only)")
    gov = (env.get("environment") or {}).get("governor") or {}
    if gov and not gov.get("available"):
        bits.append("a fixed CPU frequency (" + (gov.get("reason") or "no governor") + ")")
    return "; ".join(bits) + "." if bits else "nothing left out."
