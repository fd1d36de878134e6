"""CPU topology from sysfs and producer/consumer pair classes.

Where the two threads of an SPSC ring run decides which cache line transfers
the ring pays for, so placement is a designed factor (DPDK ring_perf measures
SMT / same-socket / cross-socket pairs).  ringlab uses five classes:

* ``same-cpu``     both threads on one CPU (the scheduler alternates them)
* ``smt-sibling``  two hardware threads of one core (share L1/L2)
* ``same-llc``     different cores sharing the last-level cache
* ``cross-llc``    same NUMA node, different LLC (AMD CCX, Intel sub-NUMA off)
* ``cross-numa``   different NUMA nodes

Sources, all under the sysfs root: ``devices/system/cpu/online``,
``cpuN/topology/{physical_package_id,core_id,thread_siblings_list}``,
``cpuN/cache/index*/{level,type,shared_cpu_list}`` (the highest-level unified
cache is the LLC) and ``devices/system/node/node*/cpulist``.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ringlab.errors import ParamError
from ringlab.system import sysfs

PAIR_CLASSES = ("same-cpu", "smt-sibling", "same-llc", "cross-llc", "cross-numa")
UNPINNED = "unpinned"


@dataclass(frozen=True)
class CpuInfo:
    cpu: int
    package: int
    core: int
    smt_siblings: tuple          # all hardware threads of this core, this CPU included
    llc_id: int                  # index of the LLC group (ordered by first CPU)
    llc_cpus: tuple              # CPUs sharing the last-level cache with this one
    numa_node: int


class Topology:
    """Online CPUs and how they share cores, caches and memory nodes."""

    def __init__(self, infos: Iterable[CpuInfo], source: str = "sysfs", notes: Sequence[str] = ()):
        self._info = {i.cpu: i for i in infos}
        self.cpus: list[int] = sorted(self._info)
        self.source = source
        #: what had to be guessed (missing cache or NUMA information), for env output
        self.notes: list[str] = list(notes)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def read(cls, root: str | Path | None = None) -> "Topology":
        """Read the topology of the online CPUs from a sysfs tree (default: sysfs_root())."""
        root = Path(root) if root is not None else sysfs_root_path()
        cpu_dir = root / "devices" / "system" / "cpu"
        online_txt = sysfs.read(cpu_dir / "online")
        if online_txt is None:
            raise FileNotFoundError(f"cannot read {cpu_dir / 'online'}: not a sysfs tree?")
        online = sysfs.parse_cpulist(online_txt)
        notes: list[str] = []

        # NUMA: node*/cpulist.  No node directory means a kernel without NUMA: one node.
        node_of: dict[int, int] = {}
        node_dir = root / "devices" / "system" / "node"
        if node_dir.is_dir():
            for d in sorted(node_dir.glob("node[0-9]*")):
                for c in sysfs.parse_cpulist(sysfs.read(d / "cpulist", "")):
                    node_of[c] = int(d.name[4:])
        if not node_of:
            notes.append("no NUMA information in sysfs: all CPUs treated as node 0")

        raw = {}
        for c in online:
            t = cpu_dir / f"cpu{c}" / "topology"
            pkg = _int(sysfs.read(t / "physical_package_id"), 0)
            core = _int(sysfs.read(t / "core_id"), c)
            sib = tuple(sysfs.parse_cpulist(sysfs.read(t / "thread_siblings_list", "")) or [c])
            llc = _llc_cpus(cpu_dir / f"cpu{c}" / "cache")
            raw[c] = (pkg, core, sib, llc)

        missing_llc = [c for c in online if raw[c][3] is None]
        if missing_llc:
            # Without cache information assume one LLC per package, the common case.
            notes.append("no cache information for CPUs " + sysfs.format_cpulist(missing_llc)
                         + ": LLC assumed to be the whole package")
        infos = []
        groups = {}
        for c in online:
            pkg, core, sib, llc = raw[c]
            if llc is None:
                llc = tuple(x for x in online if raw[x][0] == pkg)
            # Only online CPUs matter for pairing; shared_cpu_list may list offline ones.
            llc = tuple(x for x in llc if x in raw) or (c,)
            sib = tuple(x for x in sib if x in raw) or (c,)
            groups.setdefault(llc, None)
            raw[c] = (pkg, core, sib, llc)
        llc_ids = {g: i for i, g in enumerate(sorted(groups, key=min))}
        for c in online:
            pkg, core, sib, llc = raw[c]
            infos.append(CpuInfo(c, pkg, core, sib, llc_ids[llc], llc, node_of.get(c, 0)))
        return cls(infos, source=str(root), notes=notes)

    @classmethod
    def fake(cls, sockets: int = 2, cores: int = 4, smt: int = 2, llc_per_socket: int = 2) -> "Topology":
        """A synthetic machine, numbered the way Linux numbers Intel servers.

        CPU = thread * (sockets * cores) + socket * cores + core, so the SMT
        sibling of CPU 0 is CPU sockets*cores.  Each socket is one NUMA node and
        its cores are split evenly into ``llc_per_socket`` LLC groups.
        """
        for name, v in (("sockets", sockets), ("cores", cores), ("smt", smt), ("llc_per_socket", llc_per_socket)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"Topology.fake: {name} must be an integer >= 1, got {v!r}")
        if cores % llc_per_socket:
            raise ValueError(f"Topology.fake: cores ({cores}) must be a multiple of llc_per_socket ({llc_per_socket})")
        per_llc = cores // llc_per_socket
        n = sockets * cores

        def cpu(t, s, c):
            return t * n + s * cores + c

        infos = []
        for t in range(smt):
            for s in range(sockets):
                for c in range(cores):
                    llc_idx = c // per_llc
                    llc = tuple(sorted(cpu(tt, s, cc) for tt in range(smt)
                                       for cc in range(llc_idx * per_llc, (llc_idx + 1) * per_llc)))
                    infos.append(CpuInfo(
                        cpu=cpu(t, s, c), package=s, core=c,
                        smt_siblings=tuple(cpu(tt, s, c) for tt in range(smt)),
                        llc_id=s * llc_per_socket + llc_idx, llc_cpus=llc, numa_node=s))
        return cls(infos, source=f"fake:{sockets}x{cores}x{smt},llc_per_socket={llc_per_socket}")

    # -- queries ----------------------------------------------------------------------
    def info(self, cpu: int) -> CpuInfo:
        try:
            return self._info[int(cpu)]
        except KeyError:
            raise KeyError(f"CPU {cpu} is not online; online CPUs: {sysfs.format_cpulist(self.cpus)}") from None

    def is_online(self, cpu: int) -> bool:
        return cpu in self._info

    def pair_class(self, a: int, b: int) -> str:
        """Class of the pair (a, b), one of PAIR_CLASSES; ``unpinned`` if either is -1."""
        if a < 0 or b < 0:
            return UNPINNED
        if a == b:
            return "same-cpu"
        ia, ib = self.info(a), self.info(b)
        if b in ia.smt_siblings:
            return "smt-sibling"
        if b in ia.llc_cpus:
            return "same-llc"
        if ia.numa_node == ib.numa_node:
            return "cross-llc"
        return "cross-numa"

    def classes_present(self) -> list[str]:
        """The pair classes this machine has, in PAIR_CLASSES order."""
        found = {"same-cpu"} if self.cpus else set()
        for a, b in itertools.combinations(self.cpus, 2):
            found.add(self.pair_class(a, b))
            if len(found) == len(PAIR_CLASSES):
                break
        return [c for c in PAIR_CLASSES if c in found]

    def packages(self) -> list[int]:
        return sorted({i.package for i in self._info.values()})

    def numa_nodes(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in self._info.values():
            out.setdefault(i.numa_node, []).append(i.cpu)
        return {k: sorted(v) for k, v in sorted(out.items())}

    def llc_groups(self) -> list[list[int]]:
        return [list(g) for g in sorted({i.llc_cpus for i in self._info.values()}, key=min)]

    def cores(self) -> list[tuple[int, ...]]:
        return sorted({i.smt_siblings for i in self._info.values()}, key=min)

    def to_dict(self) -> dict:
        """JSON-ready description, for env.json and the notebook's topology picture."""
        cores = self.cores()
        return {
            "source": self.source,
            "online": sysfs.format_cpulist(self.cpus),
            "n_cpus": len(self.cpus),
            "n_packages": len(self.packages()),
            "n_cores": len(cores),
            "threads_per_core": max((len(c) for c in cores), default=0),
            "llc_groups": self.llc_groups(),
            "numa_nodes": {str(k): v for k, v in self.numa_nodes().items()},
            "classes_present": self.classes_present(),
            "cpus": [dict(asdict(self._info[c]), smt_siblings=list(self._info[c].smt_siblings),
                          llc_cpus=list(self._info[c].llc_cpus)) for c in self.cpus],
            "notes": list(self.notes),
        }

    def __repr__(self) -> str:
        d = self.to_dict()
        return (f"Topology({d['n_packages']} packages, {d['n_cores']} cores, {d['threads_per_core']} threads/core, "
                f"{len(d['llc_groups'])} LLCs, {len(d['numa_nodes'])} NUMA nodes, online {d['online']})")


def sysfs_root_path() -> Path:
    return sysfs.sysfs_root()


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _llc_cpus(cache_dir: Path) -> tuple | None:
    """shared_cpu_list of the highest-level Unified cache, or None if unknown."""
    best = None
    for d in sorted(cache_dir.glob("index[0-9]*")):
        level = _int(sysfs.read(d / "level"), -1)
        typ = (sysfs.read(d / "type") or "").lower()
        shared = sysfs.read(d / "shared_cpu_list")
        if level < 0 or typ != "unified" or not shared:
            continue
        if best is None or level > best[0]:
            best = (level, tuple(sysfs.parse_cpulist(shared)))
    return best[1] if best else None


# -- pair selection ---------------------------------------------------------------------
CPUS_ALLOWED = "auto, all, none, or explicit pairs like 1:2,3:4"


def _param_error(msg: str) -> ParamError:
    return ParamError(msg)


def _avoid_score(topo: Topology, cpus: Sequence[int]) -> tuple:
    # CPU 0 takes most housekeeping (timers, IRQs that cannot move, and on
    # many systems the boot-time daemons), which is why ringtest's
    # run-on-all.sh leaves it out; its SMT sibling shares its core.
    zero_core = set(topo.info(0).smt_siblings) if topo.is_online(0) else set()
    return (sum(1 for c in cpus if c == 0), sum(1 for c in cpus if c in zero_core), tuple(cpus))


def pick_single_cpu(topo: Topology) -> int:
    """One CPU for single-threaded work: the lowest one not on CPU 0's core, else not 0, else 0."""
    if not topo.cpus:
        raise ValueError("no online CPUs")
    return min(topo.cpus, key=lambda c: _avoid_score(topo, [c]))


def select_pairs(topo: Topology, spec, need_two: bool = True) -> list[tuple[int, int, str]]:
    """Producer/consumer CPU pairs for a ``cpus`` parameter value.

    * ``auto``: one representative pair per class present (DPDK ring_perf style),
      avoiding CPU 0 and its SMT sibling when there is a choice.  ``same-cpu``
      is included; the runner warns that spinning SPSC on one CPU can livelock.
    * ``all``: every ordered pair of distinct online CPUs (for a heatmap).
    * ``none``: ``[(-1, -1, "unpinned")]``.
    * ``"1:2,3:4"`` (or a list of ``"a:b"`` strings): explicit pairs, validated.

    With ``need_two=False`` (single-threaded workloads) each entry is one CPU
    reported as ``(c, c, "same-cpu")``: ``auto`` gives pick_single_cpu(),
    ``all`` every online CPU, and explicit items may be plain CPUs (``"3,5"``).
    Bad values raise ParamError naming parameter 'cpus' and the online CPUs.
    """
    online = sysfs.format_cpulist(topo.cpus)
    if isinstance(spec, (list, tuple)):
        items = [str(s).strip() for s in spec]
        word = items[0].lower() if len(items) == 1 else None
    elif isinstance(spec, str):
        word = spec.strip().lower()
        items = [p.strip() for p in spec.replace(";", ",").split(",")]
    else:
        raise _param_error(f"parameter 'cpus': not a CPU spec: {spec!r}; allowed: {CPUS_ALLOWED}")
    items = [i for i in items if i]
    if word == "none":
        return [(-1, -1, UNPINNED)]
    if word == "auto":
        return _auto_pairs(topo, need_two)
    if word == "all":
        if not need_two:
            return [(c, c, "same-cpu") for c in topo.cpus]
        return [(a, b, topo.pair_class(a, b)) for a in topo.cpus for b in topo.cpus if a != b]
    if not items:
        raise _param_error(f"parameter 'cpus': empty value; allowed: {CPUS_ALLOWED}; online CPUs: {online}")
    out, seen = [], set()
    for item in items:
        a, b = _explicit_pair(topo, item, need_two, online)
        if (a, b) not in seen:
            seen.add((a, b))
            out.append((a, b, topo.pair_class(a, b)))
    return out


def _auto_pairs(topo: Topology, need_two: bool) -> list[tuple[int, int, str]]:
    """``cpus=auto``: one pair per class present, each the pair that best avoids CPU 0 and its sibling."""
    c0 = pick_single_cpu(topo)
    if not need_two:
        return [(c0, c0, "same-cpu")]
    best: dict[str, tuple] = {"same-cpu": (_avoid_score(topo, [c0, c0]), (c0, c0))}
    for a, b in itertools.combinations(topo.cpus, 2):
        cls = topo.pair_class(a, b)
        score = _avoid_score(topo, [a, b])
        if cls not in best or score < best[cls][0]:
            best[cls] = (score, (a, b))
    return [(*best[cls][1], cls) for cls in PAIR_CLASSES if cls in best]


def _explicit_pair(topo: Topology, item: str, need_two: bool, online: str) -> tuple[int, int]:
    """One ``"a:b"`` item (or ``"c"`` without ``need_two``) of an explicit ``cpus``, validated."""
    parts = item.split(":")
    if len(parts) == 1 and not need_two:
        parts = [parts[0], parts[0]]
    if len(parts) != 2:
        raise _param_error(f"parameter 'cpus': bad pair {item!r}; allowed: {CPUS_ALLOWED}; online CPUs: {online}")
    try:
        a, b = (int(p.strip()) for p in parts)
    except ValueError:
        raise _param_error(f"parameter 'cpus': bad pair {item!r} (CPUs must be integers); "
                           f"allowed: {CPUS_ALLOWED}; online CPUs: {online}") from None
    for c in (a, b):
        if not topo.is_online(c):
            raise _param_error(f"parameter 'cpus': CPU {c} in {item!r} is not online; online CPUs: {online}")
    return a, b
