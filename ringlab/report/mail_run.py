"""What the run was and where it ran, for ``ringlab mail``: the PMU line, the machine line as the
kernel test robot writes it, the code under test, the A/A controls and what was not measured."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ringlab import catalog
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
           [e.name for e in catalog.EXPERIMENTS if not e.callgrind] else "icount=false" if params.get("icount") is False
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


def _own_code(exp: str) -> str:
    """Where an arm's code is in experiment ``exp`` (``{}`` the arm; ringlab.catalog)."""
    return catalog.experiment(exp).own_code if exp in catalog.EXPERIMENT_NAMES else "{}"


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
    if exp in catalog.EXPERIMENT_NAMES and catalog.experiment(exp).arms_text:
        arms = catalog.experiment(exp).arms_text
    elif subject:
        arms = f"patch \"{subject}\" on {relative_to_tree(specs.get(baseline, baseline), env)}"
    elif any("+" in specs.get(c, "") for c in candidates):
        arms = "; ".join(f"{c}: patch {Path(specs[c].split('+', 1)[1]).name} on "
                         f"{relative_to_tree(specs[c].split('+', 1)[0], env)}"
                         for c in candidates if "+" in specs.get(c, ""))
        arms += f"; base: {relative_to_tree(specs.get(baseline, baseline), env)}"
    elif specs:
        code = {v: relative_to_tree(specs[v], env) if v in specs else _own_code(exp).format(v)
                for v in [baseline, *candidates]}
        # the arms of ringlab's own code in one shell brace pattern (csrc/rings/ptr_ring_{a,b}.h): one screen
        own = [v for v, c in code.items() if c == _own_code(exp).format(v)]
        pattern = _own_code(exp).split("{}")
        if len(own) > 1 and len(pattern) == 2:
            arms = "; ".join([pattern[0] + "{" + ",".join(own) + "}" + pattern[1]]
                             + [f"{v}: {c}" for v, c in code.items() if v not in own])
        else:
            arms = "; ".join(f"{v}: {c}" for v, c in code.items())
    else:
        arms = ", ".join(_own_code(exp).format(v) for v in [*candidates, baseline])
        arms = f"{arms} (ringlab's own code; base {baseline})"
    return f"tested: {arms}; {rl}"


def not_measured(df: pd.DataFrame, env: RunEnv) -> str:
    """What this host could not measure: the PMU's counters, the CPU placements it lacks."""
    from ringlab.system.topology import PAIR_CLASSES
    env = RunEnv.of(env)
    bits = []
    missing = _pmu_missing(env)
    if missing:   # all of them: the counters line above names the PMU's absence
        bits.append("the PMU's counters (no PMU)" if len(missing) == len(_COUNTER_EVENTS)
                    else f"{', '.join(missing)} (no PMU)")
    topo = env.topology
    present = topo.get("classes_present")
    if isinstance(present, list):
        lack = [c for c in PAIR_CLASSES if c not in present]
        if lack:
            bits.append(f"placements {', '.join(lack)} ({topo.get('n_cpus')} CPUs: {', '.join(present)} only)")
    gov = env.machine_governor
    if gov and not gov.get("available"):
        bits.append("a fixed CPU frequency (" + (gov.get("reason") or "no governor") + ")")
    return "; ".join(bits) + "." if bits else "nothing left out."


# -- how many: the design behind each row, the trials' length, the run's wall time ----------
def _finite_ints(rows, col: str) -> list[int]:
    out = []
    for r in rows:
        try:
            v = float(r.get(col))
        except (TypeError, ValueError):
            continue
        if v == v and v not in (float("inf"), float("-inf")):
            out.append(int(round(v)))
    return out


def _span(vals: list[int]) -> str:
    lo, hi = min(vals), max(vals)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def design_text(rows) -> str:
    """How many measurements each compared row rests on, from the compare() rows: "233 layout
    pairs x 3 rounds" (a layouts design: rounds of each layout pair), "10 rounds, one layout
    pair" (paired trials of one build), else the trials of each arm ("30 and 30 trials")."""
    rows = list(rows)
    pairs, layouts = _finite_ints(rows, "n_pairs"), [k for k in _finite_ints(rows, "layouts") if k > 0]
    if pairs and layouts and max(layouts) > 1:
        per = {round(p / k, 3) for r in rows for p, k in zip(_finite_ints([r], "n_pairs"), _finite_ints([r], "layouts"))
               if k > 0}
        if len(layouts) == len(rows) and len(per) == 1 and float(next(iter(per))).is_integer():
            return f"{_span(layouts)} layout pairs x {int(next(iter(per)))} rounds"
        return f"{_span(pairs)} rounds over {_span(layouts)} layout pairs"
    if pairs:
        return f"{_span(pairs)} rounds" + (", one layout pair" if layouts else "")
    nb, nc = _finite_ints(rows, "n_baseline"), _finite_ints(rows, "n_candidate")
    if nb and nc:
        return f"{_span(nb)} and {_span(nc)} trials"
    return "n not recorded"


def duration_text(seconds: float) -> str:
    """7.5 ms, 2.2 s, 3.1 min: a length of time in the unit that reads best."""
    s = float(seconds)
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    return f"{s / 60:.3g} min" if s < 7200 else f"{s / 3600:.3g} h"


def trial_length(df: pd.DataFrame) -> tuple[float, float]:
    """(operations per trial, seconds per trial): the medians over the measured trials of
    raw.csv's ``count`` and ``wall_s`` (NaN where the column is missing or empty)."""
    from ringlab import schema
    meas = schema.measured(df) if len(df) else df

    def med(col):
        if col not in meas.columns:
            return float("nan")
        v = pd.to_numeric(meas[col], errors="coerce").dropna()
        return float(v.median()) if len(v) else float("nan")
    return med("count"), med("wall_s")


def ops_text(n: float) -> str:
    """625k, 2.5M, 20M: a count of operations in one word (a line break never splits it)."""
    n = float(n)
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.0f}"


def trial_text(df: pd.DataFrame, short: bool = False) -> str:
    """"2.5M ops per trial (7.5 ms)"; ``short``: "7.5 ms trials"."""
    ops, secs = trial_length(df)
    dur = duration_text(secs) if secs == secs and secs > 0 else ""
    if short:
        return f"{dur} trials" if dur else (f"{ops_text(ops)}-op trials" if ops == ops else "trial length not recorded")
    if ops == ops and ops > 0:
        return f"{ops_text(ops)} ops per trial" + (f" ({dur})" if dur else "")
    return f"{dur} per trial" if dur else "trial length not recorded"


def _utc(text) -> float | None:
    from datetime import datetime
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def wall_time(env: RunEnv, df: pd.DataFrame) -> float:
    """The run's wall time in seconds: env.json's ended_utc - started_utc, else the span of
    raw.csv's timestamps (NaN when neither is recorded)."""
    env = RunEnv.of(env)
    t0, t1 = _utc(env.started_utc), _utc(env.ended_utc)
    if t0 is not None and t1 is not None and t1 >= t0:
        return t1 - t0
    if "timestamp" in df.columns and len(df):
        ts = pd.to_datetime(df["timestamp"], errors="coerce", utc=True).dropna()
        if len(ts) > 1:
            return float((ts.max() - ts.min()).total_seconds())
    return float("nan")


def cpus_text(env: RunEnv) -> str:
    """"2 CPUs (AMD EPYC)": the host's CPU count and model, trademark marks and the word
    "Processor" left out ("Intel(R) Xeon(R) Processor": "Intel Xeon")."""
    env = RunEnv.of(env)
    n = env.topology.get("n_cpus")
    model = str(env.cpu.get("model") or "unknown CPU")
    for mark in ("(R)", "(TM)", "(tm)", "(r)"):
        model = model.replace(mark, "")
    model = " ".join(w for w in model.split() if w != "Processor") or "unknown CPU"
    return f"{n} CPUs ({model})" if n else f"? CPUs ({model})"
