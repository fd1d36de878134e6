"""What this machine can and cannot do: the data behind ``ringlab env`` and env.json.

``collect()`` gathers one dict with a section per concern; every feature that
is not available carries ``"available": False`` and a ``"reason"``.
``format_text()`` renders it like ``pyperf system show``: sections, one line
per item, "OK" / "not available — why", and advice where the user can act.
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import socket
import subprocess
import sys

from ringlab import __version__
from ringlab.names import MAX_NAME_LEN, check_name
from ringlab.system import governor, modules, perfprobe, procstat, sysfs
from ringlab.system.topology import Topology

PACKAGES = ("numpy", "pandas", "scipy", "seaborn", "matplotlib", "cffi", "papermill", "diptest")


#: the environment variable that names this machine in raw.csv and the results path
HOST_ENV = "RINGLAB_HOST"


def host_id() -> str:
    """Short stable machine id for raw.csv: $RINGLAB_HOST or the short hostname, as [a-z0-9-].

    $RINGLAB_HOST is the user's input: it must be a name (``ringlab.names``, as ``--host``),
    else ``BadNameError`` (exit 2) names the variable.  A name is then written in the host id's
    own shape (lower case, runs of other characters as ``-``), like the hostname."""
    raw = os.environ.get(HOST_ENV)
    if raw:
        check_name(raw, f"${HOST_ENV}")
    else:
        raw = socket.gethostname().split(".")[0]
    s = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")[:MAX_NAME_LEN].strip("-")
    return s or "unknown"


def _cpuinfo() -> dict:
    text = sysfs.read(sysfs.procfs_root() / "cpuinfo", "") or ""
    first: dict = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break   # first processor block is enough (model and microcode are per package)
            continue
        k, _, v = line.partition(":")
        first[k.strip()] = v.strip()
    flags = set((first.get("flags") or first.get("Features") or "").split())
    return {"model": first.get("model name") or first.get("Processor") or first.get("cpu model")
            or platform.processor() or None,
            "vendor": first.get("vendor_id") or first.get("CPU implementer"),
            "microcode": first.get("microcode"),
            "hypervisor_flag": "hypervisor" in flags}


def _virtualization(cpu: dict) -> dict:
    """{"type": vm type or "none", "container": ..., "source"}.

    systemd-detect-virt without options reports a container in preference to
    the VM around it, so the two are asked separately.
    """
    out = {"type": None, "container": None, "source": None}
    exe = shutil.which("systemd-detect-virt")
    if exe and "RINGLAB_SYSFS" not in os.environ:   # a fake tree describes another machine
        try:
            vm = subprocess.run([exe, "--vm"], capture_output=True, text=True, timeout=5).stdout.strip()
            ct = subprocess.run([exe, "--container"], capture_output=True, text=True, timeout=5).stdout.strip()
            out.update(type=vm or "none", container=ct or "none", source="systemd-detect-virt")
        except (OSError, subprocess.TimeoutExpired):
            pass
    if out["container"] not in (None, "none") and _in_chroot():
        # systemd-detect-virt recognises docker and podman by files at the root (/.dockerenv,
        # /run/.containerenv); inside a chroot those belong to the tree chrooted into (a VM that
        # mounts its host's root), not to this process.  PID 1's environment is ours.
        out["container"] = _pid1_container() or "none"
    if out["type"] in (None, "none"):
        hv = sysfs.read(sysfs.sysfs_root() / "hypervisor" / "type")
        if hv:
            out.update(type=hv, source="/sys/hypervisor/type")
        elif cpu.get("hypervisor_flag"):
            out.update(type="vm (unknown hypervisor)", source="cpuinfo hypervisor flag")
        elif out["type"] is None:
            out.update(type="none", source="no hypervisor flag in cpuinfo")
    return out


def _in_chroot() -> bool:
    """True when / is not PID 1's root (a chroot); False when that cannot be told."""
    try:
        return os.stat("/").st_ino != os.stat(sysfs.procfs_root() / "1" / "root" / "").st_ino \
            or os.stat("/").st_dev != os.stat(sysfs.procfs_root() / "1" / "root" / "").st_dev
    except OSError:
        return False


def _pid1_container() -> str | None:
    """The ``container=`` variable of PID 1's environment (set by container managers), or None."""
    try:
        env = (sysfs.procfs_root() / "1" / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for kv in env:
        if kv.startswith(b"container="):
            return kv[len(b"container="):].decode(errors="replace") or None
    return None


def _compiler() -> dict:
    cc = os.environ.get("CC") or "gcc"
    out = {"cc": cc, "version": None, "reason": None}
    try:
        r = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10)
        line = (r.stdout or r.stderr).strip().splitlines()
        out["version"] = line[0] if line and r.returncode == 0 else None
        if out["version"] is None:
            out["reason"] = f"`{cc} --version` exited {r.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        out["reason"] = f"compiler {cc!r} not usable: {e}"
    return out


def _packages() -> dict:
    out = {}
    for p in PACKAGES:
        try:
            out[p] = importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            out[p] = None
    return out


def _cpufreq(cpus) -> dict:
    st = governor.show(cpus)
    g, b = st["governor"], st["boost"]
    per = {}
    for c in cpus:
        k = str(c)
        if k in g["governor"]:
            per[k] = {"driver": g["driver"].get(k), "governor": g["governor"].get(k),
                      "available_governors": g["available_governors"].get(k)}
    return {"governor": {"available": g["available"], "reason": g["reason"], "per_cpu": per},
            "boost": {"available": b["available"], "reason": b["reason"], "knob": b["knob"],
                      "enabled": b["enabled"]}}


def _isolation() -> dict:
    cpu_dir = sysfs.sysfs_root() / "devices" / "system" / "cpu"
    return {"cmdline": procstat.kernel_cmdline_flags(),
            "isolated": sysfs.read(cpu_dir / "isolated"),
            "nohz_full": sysfs.read(cpu_dir / "nohz_full"),
            "smt_control": sysfs.read(cpu_dir / "smt" / "control"),
            "smt_active": sysfs.read(cpu_dir / "smt" / "active")}


def _load(interval: float) -> dict:
    before = procstat.read_cpu_times()
    busiest = procstat.busiest_processes(5, interval=interval)   # sleeps `interval`
    after = procstat.read_cpu_times()
    cpus = [k for k in before if k != "all"]
    since_boot = None
    if "all" in before:
        tot = sum(before["all"].values()) - before["all"]["guest"] - before["all"]["guest_nice"]
        since_boot = round(100.0 * before["all"]["steal"] / tot, 3) if tot else None
    return {"loadavg": procstat.loadavg(), "busiest": busiest, "interval_s": interval,
            "steal": {"ticks_since_boot": {str(c): before[c]["steal"] for c in cpus},
                      "pct_since_boot": since_boot,
                      "ticks_during_probe": procstat.steal_delta(before, after, cpus) if cpus else None}}


def _mem_total_kb() -> int | None:
    """MemTotal of /proc/meminfo in kB (None when it cannot be read)."""
    text = sysfs.read(sysfs.procfs_root() / "meminfo", "") or ""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    return int(m.group(1)) if m else None


def collect(probe_counters: bool = True, interval: float = 0.25) -> dict:
    """Everything ``ringlab env`` reports, as a JSON-ready dict (also the base of env.json)."""
    cpu = _cpuinfo()
    info: dict = {"schema": 1}
    uname = platform.uname()
    info["host"] = {"hostname": socket.gethostname(), "host_id": host_id(),
                    "kernel": uname.release, "kernel_version": uname.version, "machine": uname.machine,
                    "virtualization": _virtualization(cpu), "memory_kb": _mem_total_kb()}
    info["cpu"] = cpu
    try:
        topo = Topology.read()
        info["topology"] = topo.to_dict()
        cpus = topo.cpus
    except (OSError, ValueError) as e:
        info["topology"] = {"available": False, "reason": f"cannot read CPU topology: {e}"}
        cpus = governor.online_cpus()
    info.update(_cpufreq(cpus))
    info["isolation"] = _isolation()
    info["perf"] = perfprobe.probe(counters=probe_counters)
    info["load"] = _load(interval)
    info["software"] = {"python": sys.version.split()[0], "python_executable": sys.executable,
                        "compiler": _compiler(), "packages": _packages()}
    info["software"]["ringlab"] = __version__
    info["kmod"] = _kmod()
    info["advice"] = advice(info)
    return info


def _kmod() -> dict:
    """Kernel modules: can they be loaded here, and did a ringlab kmod trial leave one loaded?"""
    reasons = modules.machine_reasons()
    return {"loadable": not reasons, "reason": "; ".join(reasons) or None, "left_loaded": modules.leftovers()}


def advice(info: dict) -> list[str]:
    """What the user could do to measure better on this machine."""
    out = []
    if not info["governor"]["available"]:
        out.append("frequency is not under our control here; compare A and B in one interleaved run "
                   "(ringlab does) and watch the run-sequence plot for drift")
    elif any(v.get("governor") != "performance" for v in info["governor"]["per_cpu"].values()):
        out.append("the governor is not 'performance'; `ringlab run` sets it on the CPUs in use (as root)")
    if info["boost"]["available"] and info["boost"]["enabled"]:
        out.append("boost/turbo is on: use -p disable_boost true for steadier clocks")
    iso = info["isolation"]["cmdline"]
    if not iso.get("isolcpus") and not iso.get("nohz_full"):
        out.append("no isolated CPUs: boot with isolcpus=/nohz_full=/rcu_nocbs= for the CPUs you pin to")
    virt = (info["host"]["virtualization"] or {}).get("type")
    if virt and virt != "none":
        out.append(f"running in a VM ({virt}): steal time and vCPU placement add noise; "
                   "hardware counters are usually missing")
    ctr = (info["perf"].get("counters") or {})
    if ctr and not ctr.get("cycles", {}).get("ok"):
        out.append("no cycle/instruction counters: use -p icount true (callgrind instruction counts) "
                   "for a noise-free second metric")
    la = info["load"].get("loadavg")
    ncpu = info["topology"].get("n_cpus") or os.cpu_count() or 1
    for left in (info.get("kmod") or {}).get("left_loaded") or []:
        if not left.get("trial_alive"):
            out.append(f"kernel module {left['module']} was left loaded by a crashed ringlab kmod trial: "
                       f"rmmod {left['module']}")
    if la and la["1min"] > 0.5 * ncpu:
        out.append(f"load average {la['1min']:.2f} on {ncpu} CPUs: other work competes with the benchmark")
    return out


# -- text -------------------------------------------------------------------------------
def _na(reason) -> str:
    return f"not available — {reason}"


class _Text:
    """Sections of ``title`` lines followed by ``  name  value`` items."""
    WIDTH = 22

    def __init__(self):
        self.lines: list[str] = []

    def sec(self, title: str) -> None:
        if self.lines:
            self.lines.append("")
        self.lines.append(title)

    def item(self, name, value) -> None:
        self.lines.append(f"  {name:<{self.WIDTH}} {value}")


def _machine_text(r: _Text, info: dict) -> None:
    h = info["host"]
    r.sec("Machine")
    r.item("host", f"{h['hostname']} (host id {h['host_id']})")
    r.item("kernel", f"{h['kernel']} {h['machine']}")
    v = h.get("virtualization") or {}
    r.item("virtualization", f"{v.get('type')} ({v.get('source')})"
           + (f", container: {v['container']}" if v.get("container") not in (None, "none") else ""))


def _cpu_text(r: _Text, info: dict) -> None:
    c = info["cpu"]
    r.sec("CPU")
    r.item("model", c.get("model") or _na("not in /proc/cpuinfo"))
    r.item("microcode", c.get("microcode") or _na("not in /proc/cpuinfo (VM or non-x86)"))
    t = info["topology"]
    if t.get("available") is False:
        r.item("topology", _na(t["reason"]))
    else:
        r.item("online CPUs", f"{t['online']} ({t['n_cpus']})")
        r.item("topology", f"{t['n_packages']} package(s), {t['n_cores']} core(s), "
                           f"{t['threads_per_core']} thread(s)/core, {len(t['llc_groups'])} LLC group(s), "
                           f"{len(t['numa_nodes'])} NUMA node(s)")
        r.item("LLC groups", "  ".join(sysfs.format_cpulist(g) for g in t["llc_groups"]))
        r.item("NUMA nodes", "  ".join(f"node{k}: {sysfs.format_cpulist(v)}" for k, v in t["numa_nodes"].items()))
        r.item("pair classes", ", ".join(t["classes_present"]))
        for n in t.get("notes", []):
            r.item("note", n)
    r.item("SMT", info["isolation"].get("smt_control") or _na("no smt/control in sysfs"))


def _frequency_text(r: _Text, info: dict) -> None:
    r.sec("Frequency")
    g = info["governor"]
    if not g["available"]:
        r.item("governor", _na(g["reason"]))
    else:
        by = {}
        for cpu, d in g["per_cpu"].items():
            by.setdefault((d["driver"], d["governor"], " ".join(d["available_governors"] or [])), []).append(int(cpu))
        for (drv, gov, avail), cpus in sorted(by.items()):
            ok = "OK" if gov == "performance" else "not tuned (ringlab run sets performance)"
            r.item(f"CPUs {sysfs.format_cpulist(cpus)}", f"driver {drv}, governor {gov} [{avail}] — {ok}")
    b = info["boost"]
    r.item("boost", _na(b["reason"]) if not b["available"] else
           f"{'enabled' if b['enabled'] else 'disabled'} ({b['knob']})"
           + (" — use -p disable_boost true for steadier clocks" if b["enabled"] else " — OK"))


def _isolation_text(r: _Text, info: dict) -> None:
    iso = info["isolation"]
    r.sec("Isolation")
    for k, val in iso["cmdline"].items():
        r.item(k, "not set" if val is None else (val or "(set, no CPU list)"))
    r.item("isolated (sysfs)", iso.get("isolated") or "none")


def _perf_text(r: _Text, info: dict) -> None:
    p = info["perf"]
    r.sec("Perf")
    par = p.get("paranoid")
    r.item("perf_event_paranoid", _na(p.get("paranoid_reason")) if par is None else
           f"{par}" + (" — OK" + (" (we are root)" if par > 1 else "") if par <= 1 or os.geteuid() == 0 else
                       " — user-space counting only; kernel counting needs root or paranoid <= 1"))
    r.item("hardware PMU", "OK" if p.get("hw_pmu") else _na("no core PMU in /sys/bus/event_source (virtual machine?)"))
    ctr = p.get("counters")
    if ctr is None:
        r.item("counters", "not probed (--no-probe)")
    else:
        for ev, res in ctr.items():
            r.item(ev, (f"OK ({res['scope']})" if res["ok"] else _na(res["reason"])))
    tp = p.get("tracepoints") or {}
    r.item("tracefs", tp.get("tracefs") or _na(tp.get("reason")))
    r.item("raw_syscalls events", "OK" if tp.get("raw_syscalls") else _na(tp.get("reason")))
    pt = tp.get("perf") or {}
    r.item("perf tool", f"{pt['version']} ({pt['path']})" if pt.get("version") else _na(pt.get("reason")))


def _load_text(r: _Text, info: dict) -> None:
    ld = info["load"]
    r.sec("Load")
    la = ld.get("loadavg")
    r.item("load average", _na("cannot read /proc/loadavg") if not la else
           f"{la['1min']:.2f} {la['5min']:.2f} {la['15min']:.2f} ({la['runnable']} runnable of {la['threads']})")
    bz = ld.get("busiest") or []
    r.item("busiest others", ", ".join(f"{p['comm']}[{p['pid']}] {p.get('cpu_pct', p.get('cpu_s'))}%"
                                       for p in bz) if bz else f"none used CPU in {ld.get('interval_s')} s — OK")
    st = ld.get("steal") or {}
    r.item("steal time", _na("no /proc/stat") if st.get("pct_since_boot") is None else
           f"{st['pct_since_boot']:.3f}% since boot, {st.get('ticks_during_probe')} ticks during the "
           f"{ld.get('interval_s')} s probe" + (" — OK" if not st.get("ticks_during_probe") else " — noisy neighbour"))


def _software_text(r: _Text, info: dict) -> None:
    s = info["software"]
    r.sec("Software")
    r.item("ringlab", s.get("ringlab"))
    r.item("python", s["python"])
    cc = s["compiler"]
    r.item(f"compiler ({cc['cc']})", cc["version"] or _na(cc["reason"]))
    r.item("packages", ", ".join(f"{k} {v or 'missing'}" for k, v in s["packages"].items()))
    km = info.get("kmod")
    if km is not None:
        r.sec("Kernel modules")
        r.item("loading", "OK" if km["loadable"] else _na(km["reason"]))
        for line in modules.leftover_text(km["left_loaded"]):
            r.item("LEFT LOADED", line)


def format_text(info: dict) -> str:
    """Human-readable report, sectioned like ``pyperf system show``."""
    r = _Text()
    for section in (_machine_text, _cpu_text, _frequency_text, _isolation_text, _perf_text,
                    _load_text, _software_text):
        section(r, info)
    if info.get("advice"):
        r.sec("Advice")
        for a in info["advice"]:
            r.lines.append(f"  - {a}")
    return "\n".join(r.lines) + "\n"
