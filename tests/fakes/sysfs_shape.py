"""How a sysfs topology tree differs in shape from what the real kernel writes.

The reference is a tree captured from Debian's kernel in the QEMU guest (tests/data/sysfs-qemu-*,
made by tests/guest/inside.py).  A hand-made tree may hold fewer files than the kernel writes,
but every file it holds must be one the kernel writes, at the same place, in the kernel's format,
and what ringlab reads must be there for every online CPU and absent for an offline one.
"""
from __future__ import annotations

import re
from pathlib import Path

from ringlab.system.sysfs import format_cpulist, parse_cpulist

#: per online CPU, what ringlab.system.topology reads
READ_PER_CPU = ("topology/physical_package_id", "topology/core_id", "topology/thread_siblings_list")
READ_PER_CACHE = ("level", "type", "shared_cpu_list")
CPULIST_NAMES = {"online", "offline", "possible", "present", "cpulist", "has_cpu", "has_memory",
                 "has_normal_memory"}
_CPULIST = re.compile(r"^(\d+(-\d+)?(,\d+(-\d+)?)*)?$")
_PATTERN = re.compile(r"(cpu|node|index|policy)\d+")


def _pattern(rel: str) -> str:
    return _PATTERN.sub(lambda m: m.group(1) + "N", rel)


def _files(root: Path) -> dict[str, str]:
    base = root / "devices" / "system"
    return {p.relative_to(root).as_posix(): p.read_text() for p in base.rglob("*") if p.is_file()}


def _cpus(path: Path) -> set:
    try:
        return set(parse_cpulist(path.read_text()))
    except ValueError:
        return set()   # reported as a bad CPU list above


def _is_cpulist(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith("_list") or name in CPULIST_NAMES


def problems(tree: Path, reference: Path) -> list[str]:
    """Every way ``tree`` has a shape the kernel of ``reference`` does not produce ([] if none)."""
    tree, reference = Path(tree), Path(reference)
    ref, got = _files(reference), _files(tree)
    ref_patterns = {_pattern(r) for r in ref}
    out = []
    for rel, text in sorted(got.items()):
        if rel.startswith("devices/system/cpu/cpufreq/") or "/cpufreq" in rel:
            continue   # cpufreq is not part of the captured topology
        if _pattern(rel) not in ref_patterns:
            out.append(f"{rel}: the kernel writes no such file")
            continue
        if not text.endswith("\n"):
            out.append(f"{rel}: no trailing newline (the kernel ends every attribute with one)")
        if _is_cpulist(rel):
            v = text.strip()
            if not _CPULIST.match(v):
                out.append(f"{rel}: {v!r} is not a kernel CPU list (like 0-3,8-11)")
            elif v != format_cpulist(parse_cpulist(v)):
                out.append(f"{rel}: {v!r} is not in the kernel's form {format_cpulist(parse_cpulist(v))!r}")
    cpu = tree / "devices" / "system" / "cpu"
    online = _cpus(cpu / "online")
    ref_cpu = reference / "devices" / "system" / "cpu" / "cpu0"
    ref_levels = sorted(p.name for p in (ref_cpu / "cache").glob("index*"))
    for d in sorted(cpu.glob("cpu[0-9]*")):
        c = int(d.name[3:])
        if c not in online:
            for sub in ("topology", "cache"):
                if (d / sub).exists():
                    out.append(f"{d.name}/{sub}: present for an offline CPU (the kernel removes it)")
            continue
        for f in READ_PER_CPU:
            if not (d / f).is_file():
                out.append(f"{d.name}/{f}: missing for an online CPU")
        sib = d / "topology" / "thread_siblings_list"
        if sib.is_file():
            s = _cpus(sib)
            if c not in s or not s <= online:
                out.append(f"{d.name}/topology/thread_siblings_list: {sorted(s)} must hold the CPU and "
                           "only online CPUs")
        idx = sorted(p.name for p in (d / "cache").glob("index*"))
        if idx and ref_levels and idx != ref_levels[:len(idx)]:
            out.append(f"{d.name}/cache: {idx} is not numbered as the kernel numbers them {ref_levels}")
        for i in idx:
            for f in READ_PER_CACHE:
                if not (d / "cache" / i / f).is_file():
                    out.append(f"{d.name}/cache/{i}/{f}: missing")
            sh = d / "cache" / i / "shared_cpu_list"
            if sh.is_file():
                s = _cpus(sh)
                if c not in s or not s <= online:
                    out.append(f"{d.name}/cache/{i}/shared_cpu_list: {sorted(s)} must hold the CPU and "
                               "only online CPUs")
            t = d / "cache" / i / "type"
            if t.is_file() and t.read_text().strip() not in ("Data", "Instruction", "Unified"):
                out.append(f"{d.name}/cache/{i}/type: {t.read_text().strip()!r} is not Data, Instruction "
                           "or Unified")
    nodes = {}
    for n in sorted((tree / "devices" / "system" / "node").glob("node[0-9]*")):
        if (n / "cpulist").is_file():
            nodes[n.name] = _cpus(n / "cpulist")
    seen: set = set()
    for name, cpus in nodes.items():
        if cpus & seen:
            out.append(f"node/{name}/cpulist: CPUs {sorted(cpus & seen)} are in another node too")
        seen |= cpus
    if nodes and online and not online <= seen:
        out.append(f"node/*/cpulist: online CPUs {sorted(online - seen)} are in no node")
    return out
