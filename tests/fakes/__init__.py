"""Builders of fake sysfs / procfs trees for tests and notebook demos.

Point ``RINGLAB_SYSFS`` / ``RINGLAB_PROCFS`` at the returned roots.  The trees
contain only the files ringlab reads, laid out as Linux lays them out.
"""
from __future__ import annotations

from pathlib import Path

from ringlab.system.sysfs import format_cpulist
from ringlab.system.topology import Topology


def _w(path: Path, text) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")
    return path


def write_topology(root: Path, topo: Topology, offline: list[int] = ()) -> Path:
    """Write a sysfs tree describing ``topo`` (e.g. Topology.fake(2, 4, 2, 2)) under root."""
    root = Path(root)
    cpu_dir = root / "devices" / "system" / "cpu"
    online = [c for c in topo.cpus if c not in offline]
    _w(cpu_dir / "online", format_cpulist(online))
    _w(cpu_dir / "possible", format_cpulist(topo.cpus))
    _w(cpu_dir / "offline", format_cpulist(offline))
    on = set(online)
    for c in topo.cpus:
        if c not in on:
            # the kernel removes an offline CPU's topology/ and cache/; cpuN/online says 0
            _w(cpu_dir / f"cpu{c}" / "online", 0)
            continue
        i = topo.info(c)
        t = cpu_dir / f"cpu{c}" / "topology"
        sib = [x for x in i.smt_siblings if x in on]
        _w(t / "physical_package_id", i.package)
        _w(t / "core_id", i.core)
        _w(t / "thread_siblings_list", format_cpulist(sib))
        cache = cpu_dir / f"cpu{c}" / "cache"
        for idx, (level, typ, shared) in enumerate([
                (1, "Data", sib), (1, "Instruction", sib),
                (2, "Unified", sib), (3, "Unified", [x for x in i.llc_cpus if x in on])]):
            _w(cache / f"index{idx}" / "level", level)
            _w(cache / f"index{idx}" / "type", typ)
            _w(cache / f"index{idx}" / "shared_cpu_list", format_cpulist(shared))
    for node, cpus in topo.numa_nodes().items():
        # node*/cpulist lists the node's online CPUs only
        _w(root / "devices" / "system" / "node" / f"node{node}" / "cpulist",
           format_cpulist([x for x in cpus if x in on]))
    return root


def add_cpufreq(root: Path, cpus, driver: str = "intel_cpufreq", governor: str = "powersave",
                available: str = "performance schedutil powersave", boost: str | None = "cpufreq",
                boost_enabled: bool = True) -> Path:
    """Add per-policy cpufreq files (one policy per CPU, cpuN/cpufreq -> policyN) and a boost knob.

    boost: "cpufreq" (cpufreq/boost, acpi-cpufreq), "intel_pstate" (intel_pstate/no_turbo),
    "policy" (cpufreq/policyN/boost, amd-pstate on 6.11+) or None.
    """
    root = Path(root)
    cpu_dir = root / "devices" / "system" / "cpu"
    for c in cpus:
        pol = cpu_dir / "cpufreq" / f"policy{c}"
        _w(pol / "scaling_governor", governor)
        _w(pol / "scaling_available_governors", available)
        _w(pol / "scaling_driver", driver)
        _w(pol / "affected_cpus", c)
        _w(pol / "related_cpus", c)
        link = cpu_dir / f"cpu{c}" / "cpufreq"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(Path("..") / "cpufreq" / f"policy{c}")
        if boost == "policy":
            _w(pol / "boost", int(boost_enabled))
    if boost == "cpufreq":
        _w(cpu_dir / "cpufreq" / "boost", int(boost_enabled))
    elif boost == "intel_pstate":
        _w(cpu_dir / "intel_pstate" / "no_turbo", int(not boost_enabled))
    return root


def break_writes(path: Path) -> None:
    """Make writes to a sysfs file fail although we run as root: a directory replaces it.

    Reads then fail too (the knob looks absent), which is what a read-only
    mount or a driver that rejects writes looks like from our side.
    """
    path = Path(path).resolve()
    path.unlink()
    path.mkdir()


def write_procfs(root: Path, ncpus: int = 2, steal=(0, 0), cmdline: str = "BOOT_IMAGE=/vmlinuz ro quiet",
                 loadavg: str = "0.50 0.40 0.30 2/345 12345", processes: dict | None = None) -> Path:
    """A fake /proc with stat, loadavg, cmdline, sys/kernel/perf_event_paranoid and some processes.

    processes: {pid: (comm, utime_ticks, stime_ticks)}.
    """
    root = Path(root)
    lines = []
    tot = [0] * 10
    per = []
    for c in range(ncpus):
        st = steal[c] if c < len(steal) else 0
        vals = [100 + c, 0, 50, 1000, 5, 0, 3, st, 0, 0]
        per.append(f"cpu{c} " + " ".join(map(str, vals)))
        tot = [a + b for a, b in zip(tot, vals)]
    lines.append("cpu  " + " ".join(map(str, tot)))
    lines += per
    lines += ["intr 1 2 3", "ctxt 12345", "btime 1700000000", "processes 999", "procs_running 2",
              "procs_blocked 0"]
    _w(root / "stat", "\n".join(lines))
    _w(root / "loadavg", loadavg)
    _w(root / "cmdline", cmdline)
    _w(root / "sys" / "kernel" / "perf_event_paranoid", 2)
    for pid, (comm, ut, stt) in (processes or {}).items():
        fields = [str(pid), f"({comm})", "S", "1", str(pid), str(pid), "0", "-1", "4194560", "0", "0", "0",
                  "0", str(ut), str(stt)] + ["0"] * 37
        _w(root / str(pid) / "stat", " ".join(fields))
    return root
