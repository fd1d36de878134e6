"""The A/B of a patch as tables: instructions per operation of both arms (callgrind rows of the
run's raw.csv) and the sizes of the measured functions of both binaries (``nm -S``)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd

from ringlab.rundir import RunOutput
from ringlab.sources.builtin_patches import effective_batch
from ringlab.sources.patches import ABPlan


def instructions_table(run_dir, plan: ABPlan):
    """Instructions per operation of both arms per configuration (callgrind rows of raw.csv).

    ``expected extra`` is the built-in patch's prediction (NaN for other patches)."""

    df = RunOutput(run_dir).read_raw()
    cols = ["mode", "size", "instructions/op " + plan.baseline, "instructions/op " + plan.candidate,
            "difference", "expected difference", "runs", "source"]
    if "icount_source" not in df.columns or not (df["icount_source"] == "callgrind").any():
        return pd.DataFrame([{c: ("no callgrind rows in this run (icount=false or valgrind missing)"
                                  if c == "source" else "") for c in cols}])
    ic = df[(df["icount_source"] == "callgrind") & (df["status"] == "ok")]
    rows = []
    for (mode, size), g in ic.groupby(["mode", "size"], sort=True):
        med = g.groupby(g["variant"].astype(str))["instructions_per_op"].median()
        a, b = med.get(plan.baseline, float("nan")), med.get(plan.candidate, float("nan"))
        batch = int(g["batch"].iloc[0]) if "batch" in g.columns else 0
        exp = (plan.builtin.expected_extra(int(size), effective_batch(int(size), batch))
               if plan.builtin else float("nan"))
        same = all(v.nunique() == 1 for _, v in g.groupby("variant")["instructions_per_op"])
        rows.append(dict(zip(cols, [mode, size, round(a, 3), round(b, 3), round(b - a, 3),
                                    (f">= {exp:+.2f}" if exp == exp else "n/a"),
                                    len(g), "callgrind" + (", identical counts" if same else "")])))
    return pd.DataFrame(rows, columns=cols)


def nm_sizes(binary) -> dict[str, int]:
    """Bytes of each ``rl_measured_*`` function of ``binary`` (``nm -S``); {} when nm fails."""
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    sizes = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith("rl_measured_"):
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def function_sizes(binaries: dict[str, Path | str]):
    """One row per measured function, one column per arm (bytes), plus the difference."""
    names = list(binaries)
    sizes = {n: nm_sizes(p) for n, p in binaries.items()}
    missing = [n for n in names if not sizes[n]]
    if missing:
        return pd.DataFrame([{"function": "n/a", "note": "no rl_measured_* symbols read from "
                              + ", ".join(f"{n} ({binaries[n]})" for n in missing)
                              + " (nm missing, or the binary is gone)"}])
    funcs = sorted(set().union(*[set(s) for s in sizes.values()]))
    rows = []
    for f in funcs:
        r = {"function": f.removeprefix("rl_measured_")}
        r.update({n: sizes[n].get(f) for n in names})
        if len(names) == 2 and all(sizes[n].get(f) is not None for n in names):
            r["difference"] = sizes[names[1]][f] - sizes[names[0]][f]
        rows.append(r)
    return pd.DataFrame(rows)
