"""The environment run (notebook 00): what this machine can and cannot do, as files.

``write_environment_run(run_dir)`` collects ``ringlab.system.envinfo`` and writes
``env.json``, ``summary.md`` (machine, capabilities with reasons, pair classes)
and ``figures/topology.png|svg`` (packages, LLC groups, cores, SMT siblings), all
through ``ringlab.rundir``.
The tables are built from the collected dict only, so they can be re-rendered
from a committed env.json.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.patches import Rectangle

from ringlab import fmt, rundir
from ringlab.tools import icount
from ringlab.system.checkout import git_info
from ringlab.rundir import RunFolder
from ringlab.system import envinfo
from ringlab.system.topology import PAIR_CLASSES, Topology, select_pairs

matplotlib.use("Agg")  # figures go to files, never to a display (as in ringlab.report.figures)
import matplotlib.pyplot as plt  # noqa: E402


def _ok(flag: bool | None, reason: str | None) -> tuple[str, str]:
    if flag:
        return "available", ""
    return "not available", reason or "unknown"


def machine_table(env: dict) -> pd.DataFrame:
    h, c, t = env.get("host", {}), env.get("cpu", {}), env.get("topology", {})
    virt = h.get("virtualization") or {}
    sw = env.get("software", {})
    rows = [
        ("host id", h.get("host_id")),
        ("kernel", f"{h.get('kernel', '?')} {h.get('machine', '')}".strip()),
        ("virtualization", virt.get("type") or "none detected"),
        ("CPU model", c.get("model")),
        ("microcode", c.get("microcode")),
        ("online CPUs", f"{t.get('online')} ({t.get('n_cpus')})"),
        ("packages / cores / threads per core",
         f"{t.get('n_packages')} / {t.get('n_cores')} / {t.get('threads_per_core')}"),
        ("LLC groups", "; ".join(",".join(map(str, g)) for g in t.get("llc_groups", []))),
        ("NUMA nodes", "; ".join(f"node{n}: {','.join(map(str, cs))}"
                                 for n, cs in sorted((t.get("numa_nodes") or {}).items()))),
        ("compiler", (sw.get("compiler") or {}).get("version")),
        ("python", sw.get("python")),
    ]
    return pd.DataFrame(rows, columns=["item", "value"]).astype({"value": str})


def capabilities_table(env: dict) -> pd.DataFrame:
    """One row per feature ringlab uses: status and, when missing, why."""
    rows = []
    gov, boost = env.get("governor", {}), env.get("boost", {})
    rows.append(("governor (set performance, restore)", *_ok(gov.get("available"), gov.get("reason"))))
    rows.append(("boost / turbo control", *_ok(boost.get("available"), boost.get("reason"))))
    iso = (env.get("isolation") or {}).get("cmdline") or {}
    for k in ("isolcpus", "nohz_full", "rcu_nocbs"):
        rows.append((k, "set: " + str(iso[k]) if iso.get(k) else "not set",
                     "" if iso.get(k) else "kernel command line has no " + k))
    perf = env.get("perf", {})
    counters = perf.get("counters") or {}
    for name, res in counters.items():
        rows.append((f"counter {name}", *_ok(res.get("ok"), res.get("reason"))))
    if not counters:
        rows.append(("perf_event_open counters", "not probed", "probe_counters=False"))
    tp = perf.get("tracepoints") or {}
    rows.append(("tracepoints (raw_syscalls)", *_ok(tp.get("raw_syscalls"), tp.get("reason"))))
    tool = tp.get("perf") or {}
    rows.append(("perf tool", *(("available", tool.get("version") or "") if tool.get("path")
                                else ("not available", tool.get("reason") or "not found"))))
    icount = env.get("icount") or {}
    rows.append(("callgrind instruction counts", *_ok(icount.get("ok"), icount.get("reason"))))
    steal = (env.get("load") or {}).get("steal") or {}
    if steal:
        rows.append(("steal time", f"{steal.get('pct_since_boot', float('nan')):.3g}% since boot",
                     "VM guest: other guests can take our CPU time" if steal.get("pct_since_boot") else ""))
    return pd.DataFrame(rows, columns=["feature", "status", "reason"])


def pair_classes_table(env: dict) -> pd.DataFrame:
    """Pair classes present and the pair `cpus=auto` would use for each."""
    topo = Topology.read()
    chosen = {cls: (a, b) for a, b, cls in select_pairs(topo, "auto")}
    present = set((env.get("topology") or {}).get("classes_present") or topo.classes_present())
    rows = []
    for cls in PAIR_CLASSES:
        if cls in chosen:
            rows.append((cls, "present", f"{chosen[cls][0]}:{chosen[cls][1]}"))
        else:
            rows.append((cls, "present" if cls in present else "absent on this machine", ""))
    return pd.DataFrame(rows, columns=["pair class", "status", "cpus=auto pair"])


def topology_figure(env: dict):
    """Packages > LLC groups > cores > CPUs, drawn as nested boxes: a matplotlib Figure
    (``rundir.write_figure(run_dir, "topology", fig)`` saves it, deterministically)."""
    cpus = (env.get("topology") or {}).get("cpus") or []
    by_pkg: dict = {}
    for c in cpus:
        by_pkg.setdefault(c["package"], {}).setdefault(c["llc_id"], {}).setdefault(c["core"], []).append(c)
    n_llc = sum(len(v) for v in by_pkg.values()) or 1
    max_cores = max((len(cores) for llcs in by_pkg.values() for cores in llcs.values()), default=1)
    fig, ax = plt.subplots(figsize=(min(2.2 * n_llc + 1, 14), 1.2 + 0.55 * max_cores))
    x = 0.0
    for pkg in sorted(by_pkg):
        llcs = by_pkg[pkg]
        x0 = x
        for llc in sorted(llcs):
            cores = llcs[llc]
            ax.add_patch(Rectangle((x + 0.1, 0.1), 1.8, 0.55 * len(cores) + 0.3, fill=False, lw=1.2, ec="tab:blue"))
            ax.text(x + 1.0, 0.55 * len(cores) + 0.5, f"LLC {llc}", ha="center", fontsize=8, color="tab:blue")
            for i, core in enumerate(sorted(cores)):
                sib = sorted(cores[core], key=lambda c: c["cpu"])
                node = sib[0].get("numa_node")
                ax.add_patch(Rectangle((x + 0.2, 0.2 + 0.55 * i), 1.6, 0.45, fc="#eef3fa", ec="grey", lw=0.8))
                ax.text(x + 1.0, 0.42 + 0.55 * i,
                        f"core {core}: CPU {' '.join(str(s['cpu']) for s in sib)}"
                        + (f" (node {node})" if node is not None else ""),
                        ha="center", va="center", fontsize=7)
            x += 2.0
        ax.add_patch(Rectangle((x0 + 0.02, 0.02), x - x0 - 0.04, 0.55 * max_cores + 0.75, fill=False, lw=1.6))
        ax.text((x0 + x) / 2, 0.55 * max_cores + 0.82, f"package {pkg}", ha="center", fontsize=9, weight="bold")
        x += 0.3
    ax.set_xlim(-0.1, max(x, 2.2))
    ax.set_ylim(-0.1, 0.55 * max_cores + 1.1)
    ax.set_axis_off()
    ax.set_title("CPU topology (sysfs)", fontsize=10)
    return fig


def summary_text(env: dict) -> str:
    """summary.md of the environment run: capabilities, machine, pair classes, advice."""
    md = ["# Environment", "", f"Host `{env['host']['host_id']}`.", "",
          "## Capabilities", "", fmt.df_to_markdown(capabilities_table(env)), "",
          "## Machine", "", fmt.df_to_markdown(machine_table(env)), "",
          "## CPU-pair classes", "", fmt.df_to_markdown(pair_classes_table(env)), "",
          "## Advice", ""] + [f"- {a}" for a in env.get("advice", [])] + [""]
    return "\n".join(md)


def text(env: dict) -> str:
    return envinfo.format_text(env)


def write_environment_run(run_dir: Path | str, probe_counters: bool = True) -> dict:
    """Collect, then write env.json, summary.md and figures/topology.* into ``run_dir``.

    Returns the environment (``envinfo.collect()`` plus "icount"), the dict the tables
    above take; env.json holds it under "environment" (``ringlab.rundir`` layout).
    """
    run_dir = Path(run_dir)
    env = envinfo.collect(probe_counters=probe_counters)
    av = icount.availability()
    env["icount"] = {"ok": av.ok, "reason": av.reason, "version": av.version}
    with RunFolder(run_dir, mode="write", kind="environment") as f:
        f.write_env(host=env["host"]["host_id"], git=git_info(), environment=env)
        rundir.write_figure(run_dir, "topology", topology_figure(env))
        rundir.write_text(run_dir, "summary.md", summary_text(env))
        f.finish("complete")
    return env
