"""perf ring buffer overhead (seed 004): a syscall loop alone, under perf record, and backward.

Variants (the thing compared):

* ``base``      ``syscall_loop -N COUNT`` alone;
* ``forward``   under ``perf record -o /dev/null -e raw_syscalls:*``: every
                close(-1) puts a sys_enter and a sys_exit record into perf's
                kernel ring buffer, written forward;
* ``backward``  the same with ``--overwrite``: the kernel writes the buffer
                backward (write_backward, Linux 4.7) and perf reads it only at
                the end, so wake-ups drop to ~1.

Placements (why the seed's variance was "immense": ~10% of the runs were twice
as slow when perf and the test ran on different CPUs):

* ``none``       nothing pinned, as in the first half of the thread;
* ``same-core``  workload and perf pinned to the same CPU;
* ``split``      workload on one CPU, perf on another one close to it (as in
                 the fix: test on CPU 6, perf on CPU 7), preferring same-llc;
* ``smt-sibling``, ``same-llc``, ``cross-llc``, ``cross-numa``: one pair of
                 that topology class (ringlab.system.topology.select_pairs);
* ``auto``       none, same-core, split, and every other class this machine has.

raw.csv: parameter columns ``placement`` and ``count`` (``variant`` in the id
block); ``cpu_req_producer`` is the workload's CPU, ``cpu_req_consumer`` is
perf's (perf consumes the ring the workload's syscalls fill; -1 for base and
for unpinned perf); ``pair_class`` is the placement's class for every variant,
so variants of one placement compare.  Extra columns: ``elapsed_us`` (the
seed's unit), ``perf_wakeups``, ``perf_captured_mb``, ``perf_samples``,
``perf_lost`` (NaN for base and when perf did not print them), ``perf_cpu``
(NaN for base, -1 for unpinned perf).

When perf tracepoints are unavailable (perf missing, not privileged, no
tracefs, perf refusing), forward and backward are left out of the plan and
``unavailable_arms()`` / ``ctx.warn()`` (env.json "warnings") say why; base still runs,
and the run ends ``failed`` naming the arms that could not run and why (never
``complete`` with an arm missing).  ``unavailable()`` returns the reason only when no
requested variant can run; the runner then records the run as skipped (env.json
"skipped_reason").
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringlab import catalog
from ringlab.tools import perfrecord
from ringlab.errors import ParamError
from ringlab.experiments.base import Experiment, TrialSpec, parse_harness_json
from ringlab.experiments.params import Param
from ringlab.system import privilege
from ringlab.system.topology import Topology, pick_single_cpu, select_pairs

#: this experiment's catalog entry (raw.csv columns, bounds, arms, binary)
ENTRY = catalog.experiment("perf_rb")
VARIANTS = ENTRY.variants
#: the arms under perf record (the first arm runs the loop alone)
PERF_VARIANTS = VARIANTS[1:]
CLASS_PLACEMENTS = ("smt-sibling", "same-llc", "cross-llc", "cross-numa")
PLACEMENTS = ("none", "same-core", "split") + CLASS_PLACEMENTS + ("auto",)
#: split = "cores on the same CPU" of the fix; nearest distinct-CPU class first.
SPLIT_PREFERENCE = ("same-llc", "smt-sibling", "cross-llc", "cross-numa")
BINARY = ENTRY.binary


@dataclass(frozen=True)
class Placement:
    name: str
    workload_cpu: int      # -1: not pinned
    perf_cpu: int          # -1: not pinned
    pair_class: str


class PerfRb(Experiment):
    name = ENTRY.name
    description = "perf ring buffer overhead: close(-1) loop alone / under perf record forward / backward"
    params = [
        Param("variants", "str_list", list(VARIANTS), "configurations: base, forward, backward",
              choices=VARIANTS, names=True),
        Param("placements", "str_list", ["auto"],
              "where workload and perf run: none, same-core, split, a topology class, or auto",
              choices=PLACEMENTS),
        Param("count", "int", 3_000_000, "close(-1) calls per timed loop (the seed: 3,000,000)",
              min=ENTRY.bound("count").low, max=ENTRY.bound("count").high),
        Param("perf", "str", "perf", "perf executable (name on PATH or a path); as root, a root-owned one "
              "only root can change", column=False),
    ]
    profiles = {
        "smoke": {"count": 20_000, "trials": 2, "warmup": 0, "timeout": 60.0},
        "quick": {"count": 1_000_000, "trials": 10, "warmup": 1},
        # The seed ran 100 per configuration; 20 keeps a 2-CPU VM under ~10 minutes
        # and is enough for the bimodality check (raise -p trials 100 on bare metal).
        "full": {"count": 3_000_000, "trials": 20, "warmup": 2, "timeout": 300.0},
    }
    binaries = list(ENTRY.binaries())
    code_params = ("perf",)
    trial_privilege = "wrapper"
    extra_columns = list(ENTRY.extra_columns)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        # perf runs as root: a perf another user could change is refused (exit 2)
        if any(v in PERF_VARIANTS for v in values["variants"]):
            perfrecord.check_perf(str(values["perf"]))

    # -- availability ---------------------------------------------------------------
    def skipped(self, values: dict[str, Any], ctx: Any = None) -> dict[str, str]:
        """Requested variants that cannot run here -> reason (empty when all can)."""
        wanted = [v for v in values["variants"] if v in PERF_VARIANTS]
        if not wanted:
            return {}
        reason = perfrecord.unavailable_reason(values["perf"])
        return {v: reason for v in wanted} if reason else {}

    def unavailable_arms(self, values: dict[str, Any], ctx: Any = None) -> dict[str, str]:
        skipped = self.skipped(values, ctx)
        return {} if all(v in skipped for v in values["variants"]) else skipped

    def unavailable(self, values: dict[str, Any], ctx: Any = None) -> str | None:
        skipped = self.skipped(values, ctx)
        if skipped and all(v in skipped for v in values["variants"]):
            return next(iter(skipped.values()))
        return None

    # -- planning -------------------------------------------------------------------
    def plan(self, values: dict[str, Any], ctx: Any = None) -> list[TrialSpec]:
        skipped = self.skipped(values, ctx)
        if skipped and all(v in skipped for v in values["variants"]):
            # Nothing can run: keep the plan so the runner sees unavailable()
            # and records the whole run as skipped with the reason.
            skipped = {}
        elif skipped:
            # Reported, not failed: ctx.warn() lands in env.json and on the console.
            ctx.warn(f"perf_rb: variants {', '.join(skipped)} skipped: {next(iter(skipped.values()))} "
                     "(the run ends failed: an arm is missing)")
        variants = [v for v in values["variants"] if v not in skipped]
        placements = resolve_placements(values["placements"], _topology(ctx))
        perf = perfrecord.find_perf(values["perf"]) or values["perf"]
        warmup, trials = int(values["warmup"]), int(values["trials"])
        specs = []
        for variant in variants:
            for pl in placements:
                perf_cpu = pl.perf_cpu if variant in PERF_VARIANTS else -1
                for t in range(warmup + trials):
                    specs.append(TrialSpec(
                        config={"variant": variant, "placement": pl.name, "count": int(values["count"])},
                        trial=t, warmup=t < warmup, cpus=(pl.workload_cpu, perf_cpu),
                        pair_class=pl.pair_class,
                        extra={"perf": perf, "perf_cpu": pl.perf_cpu, "workload_cpu": pl.workload_cpu,
                               "repeats": int(values.get("repeats", 1))}))
        return specs

    def measured_binary(self, spec: TrialSpec, argv: list[str], ctx: Any = None) -> str:
        # forward/backward start with the pinning wrapper and perf; the code under
        # test is always the workload
        return str(_binary(ctx))

    def single_threaded(self, spec: TrialSpec) -> bool:
        return spec.config["variant"] == "base"  # perf record adds a second process

    def command(self, spec: TrialSpec, ctx: Any = None) -> list[str]:
        cfg, ex = spec.config, spec.extra
        workload = [str(_binary(ctx)), "-N", str(ex.get("ops", cfg["count"])), "--json"]
        if ex["workload_cpu"] >= 0:
            workload += ["-c", str(ex["workload_cpu"])]
        if ex.get("repeats", 1) > 1:
            workload += ["-r", str(ex["repeats"])]
        # perf stays root (tracepoints); the workload it starts runs as the unprivileged user
        workload = privilege.wrap(workload)
        if cfg["variant"] == "base":
            return workload
        return perfrecord.record_argv(ex["perf"], workload, overwrite=cfg["variant"] == "backward",
                                      cpu=ex["perf_cpu"])

    def parse(self, spec: TrialSpec, stdout: str, stderr: str, ctx: Any = None) -> list[dict[str, Any]]:
        data = _last_json(stdout)
        if data.get("binary") != BINARY or not data.get("iterations"):
            raise ValueError(f"not {BINARY} --json output: {stdout[-200:]!r}")
        variant = spec.config["variant"]
        perf = {"perf_wakeups": math.nan, "perf_captured_mb": math.nan, "perf_samples": math.nan,
                "perf_lost": math.nan, "perf_cpu": math.nan}
        if variant in PERF_VARIANTS:
            s = perfrecord.parse_stderr(stderr)
            if not s.complete:
                # Without perf's summary we cannot tell that perf was attached
                # for the whole loop, so the time is not "under perf".
                raise ValueError("perf record summary ('Woken up' / 'Captured and wrote') missing "
                                 f"from stderr: {stderr[-300:]!r}")
            perf.update(perf_wakeups=s.wakeups, perf_captured_mb=s.captured_mb,
                        perf_samples=math.nan if s.samples is None else s.samples,
                        perf_lost=0 if s.lost is None else s.lost,  # perf warns only when > 0
                        perf_cpu=spec.extra["perf_cpu"])
        common = {"elapsed_us": None, "cpu_req_producer": spec.cpus[0], "cpu_req_consumer": spec.cpus[1],
                  "pair_class": spec.pair_class, **perf}
        # The shared harness parser: timings, CPUs (-1 for the absent consumer),
        # counters NaN with counter_errors (syscall_loop links no counters).
        rows = parse_harness_json(stdout)
        for row in rows:
            row.update(common)
            row["elapsed_us"] = row["elapsed_ns"] / 1e3  # the seed's unit
        return rows


# -- helpers ----------------------------------------------------------------------------
def _last_json(stdout: str) -> dict:
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"bad JSON from {BINARY}: {e}") from None
    raise ValueError(f"no JSON object in {BINARY} output: {(stdout or '')[-200:]!r}")


def _binary(ctx) -> Path:
    return Path(ctx.binary(BINARY))  # ringlab.run.context.RunContext.binary(name)


def _topology(ctx):
    """The run's topology; read from sysfs when the context has none, None when unreadable
    (placement then falls back to the process's CPU affinity)."""
    if ctx.topology is not None:
        return ctx.topology
    try:
        return Topology.read()
    except OSError:
        return None


def _pairs(topo) -> list[tuple[int, int, str]]:
    """(workload CPU, perf CPU, class) per topology class, via select_pairs when there is a topology."""
    if topo is not None:
        return [(int(a), int(b), str(c)) for a, b, c in select_pairs(topo, "auto")]
    # No topology module: the two highest CPUs we may run on (avoid CPU 0, which
    # takes most interrupts); their class is unknown.
    cpus = sorted(os.sched_getaffinity(0))
    return [(cpus[-2], cpus[-1], "unknown")] if len(cpus) >= 2 else []


def _single_cpu(topo) -> int:
    if topo is not None:
        return int(pick_single_cpu(topo))
    return max(os.sched_getaffinity(0))


def resolve_placements(names: list[str], topo) -> list[Placement]:
    """Placement names -> CPUs.  A class this machine lacks is a ParamError naming those it has."""
    pairs = [p for p in _pairs(topo) if p[0] != p[1] and p[2] != "same-cpu"]
    by_class: dict[str, tuple[int, int, str]] = {}
    for p in pairs:
        by_class.setdefault(p[2], p)
    split = next((by_class[c] for c in SPLIT_PREFERENCE if c in by_class), pairs[0] if pairs else None)
    out: list[Placement] = []

    def add(pl: Placement) -> None:
        if pl.name not in {o.name for o in out}:
            out.append(pl)

    for name in names:
        if name == "none":
            add(Placement("none", -1, -1, "unpinned"))
        elif name == "same-core":
            cpu = _single_cpu(topo)
            add(Placement("same-core", cpu, cpu, "same-cpu"))
        elif name == "split":
            if split is None:
                raise ParamError("parameter 'placements': 'split' needs two CPUs, this machine has one; "
                                 "allowed here: none, same-core")
            add(Placement("split", split[0], split[1], split[2]))
        elif name in CLASS_PLACEMENTS:
            if name not in by_class:
                have = ", ".join(["none", "same-core"] + (["split"] if split else []) + sorted(by_class))
                raise ParamError(f"parameter 'placements': no CPU pair of class '{name}' on this machine; "
                                 f"allowed here: {have}")
            a, b, c = by_class[name]
            add(Placement(name, a, b, c))
        elif name == "auto":
            add(Placement("none", -1, -1, "unpinned"))
            cpu = _single_cpu(topo)
            add(Placement("same-core", cpu, cpu, "same-cpu"))
            if split is not None:
                add(Placement("split", split[0], split[1], split[2]))
            # One pair per other class; split's class is already covered by split.
            for c in CLASS_PLACEMENTS:
                if c in by_class and (split is None or c != split[2]):
                    a, b, _ = by_class[c]
                    add(Placement(c, a, b, c))
        else:  # Param choices already reject this; keep the message anyway
            raise ParamError(f"parameter 'placements': unknown value {name!r}; allowed: {', '.join(PLACEMENTS)}")
    return out
