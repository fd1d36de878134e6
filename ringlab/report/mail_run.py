"""What the run was and where it ran, for ``ringlab mail``: the PMU line, the machine line as the
kernel test robot writes it, the code under test, the A/A controls and what was not measured."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ringlab.errors import DataError
from ringlab.report.mailfmt import short_sha
from ringlab.rundir import RunEnv
from ringlab.rundir.inputs import read_input

INSTR = "instructions_per_op"


# -- the lines of the LKP-shaped reply -------------------------------------------------------
_COUNTER_EVENTS = ("cycles", "instructions", "branches", "branch_misses", "cache_misses")


def _pmu_missing(env: RunEnv) -> list[str]:
    perf = env.perf_counters
    return [k for k in _COUNTER_EVENTS if isinstance(perf.get(k), dict) and not perf[k].get("ok")]


def _virt(env: RunEnv) -> str | None:
    v = (env.machine.get("virtualization") or {}).get("type")
    return v if v and v != "none" else None


def counters_line(df: pd.DataFrame, env: RunEnv, elsewhere: str | None = None) -> str:
    """Whether this host has a PMU, and what counts instructions instead (the mail's second
    line, the first of notebook 10's overview); ``elsewhere``: the sub-runs of the run folder
    that hold callgrind counts, when this run has none of its own."""
    env = RunEnv.of(env)
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
    if elsewhere:
        return (f"No PMU on this host{where}: callgrind counts the instructions of the measured "
                f"region instead, in {elsewhere} (-p icount true, single-threaded rows).")
    params = env.parameters
    exp = env.experiment
    why = (f"callgrind counts single-threaded trials only, and {exp} is not" if exp in
           ("page_frag", "perf_rb", "ringtest", "kmod") else "icount=false" if params.get("icount") is False
           else "callgrind counts single-threaded configurations only")
    return f"No PMU on this host{where}, and no callgrind counts in this run ({why})."


def machine_line(env: RunEnv) -> str:
    """One line as the kernel test robot writes it: "2 threads 1 socket (AMD EPYC) with 8G
    memory", then SMT, virtualisation and kernel."""
    env = RunEnv.of(env)
    host, cpu, topo = env.machine, env.cpu, env.topology
    n, sockets = topo.get("n_cpus"), topo.get("n_packages")
    bits = [f"{n} threads" if n else "? threads", (f"{sockets} socket" + ("s" if sockets != 1 else "")) if sockets else "? sockets",
            f"({cpu.get('model') or 'unknown CPU'})"]
    mem = host.get("memory_kb")
    bits.append(f"with {round(mem / 1048576)}G memory" if isinstance(mem, (int, float)) and mem > 0
                else "with memory not recorded")
    line = " ".join(bits)
    tpc = topo.get("threads_per_core")
    extra = [f"SMT {'on' if tpc > 1 else 'off'}" if isinstance(tpc, int) else None,
             f"{_virt(env)} guest" if _virt(env) else "bare metal" if (host.get("virtualization") or {}).get("type")
             == "none" else None,
             f"kernel {host.get('kernel')}" if host.get("kernel") else None]
    return line + "".join(f", {x}" for x in extra if x)


def _header_specs(env: RunEnv) -> dict[str, str]:
    kh = str(env.parameters.get("kernel_headers") or "")
    out = {}
    for part in kh.split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def aa_controls(env: RunEnv, baseline: str, candidates: list[str]) -> list[str]:
    """The candidates that build the baseline's own code again (an A/A arm): the same
    kernel-header source as the baseline, or the patch A/B's ``control``."""
    specs = _header_specs(RunEnv.of(env))
    return [c for c in candidates
            if (c in specs and specs.get(c) == specs.get(baseline)) or (c == "control" and baseline in specs)]


_OWN_CODE = {"ptr_ring": "csrc/rings/ptr_ring_{}.h", "page_frag": "csrc/page_frag ({})",
"ringtest": "tools/virtio/ringtest ({})"}


def _patch_subject(run_dir: Path) -> str | None:
    for f in sorted(Path(run_dir).glob("*.patch")):
        try:
            text = read_input(f, "a patch file").decode("utf-8", errors="replace")   # never through a link
            for ln in text.splitlines()[:80]:
                if ln.lower().startswith("subject:"):
                    return ln.split(":", 1)[1].strip()
        except (OSError, DataError):
            continue
        return f.name
    return None


def tested_line(env: RunEnv, baseline: str, candidates: list[str], run_dir) -> str:
    """What was measured: the patch (subject), or the code of each arm, and ringlab's commit."""
    from ringlab.report.mail_reproduce import relative_to_tree
    env = RunEnv.of(env)
    git = env.git
    rl = f"ringlab {short_sha(git.commit)}" + (" (uncommitted changes)" if git.dirty else "")
    specs = _header_specs(env)
    subject = _patch_subject(Path(run_dir))
    exp = env.experiment
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


def not_measured(df: pd.DataFrame, env: RunEnv) -> str:
    """What this host could not measure: the PMU's counters, the CPU placements it lacks."""
    from ringlab.system.topology import PAIR_CLASSES
    env = RunEnv.of(env)
    bits = []
    missing = _pmu_missing(env)
    if missing:
        bits.append(f"{', '.join(missing)} (no PMU)")
    topo = env.topology
    present = topo.get("classes_present")
    if isinstance(present, list):
        lack = [c for c in PAIR_CLASSES if c not in present]
        if lack:
            bits.append(f"placements {', '.join(lack)} (this host has {topo.get('n_cpus')} CPUs: "
                        f"{', '.join(present)} only)")
    gov = env.machine_governor
    if gov and not gov.get("available"):
        bits.append("a fixed CPU frequency (" + (gov.get("reason") or "no governor") + ")")
    return "; ".join(bits) + "." if bits else "nothing left out."
