"""Seed 003's questions across the runs of notebook 11 (batch ring zeroing).

A notebook-11 run folder holds the size sweep (raw.csv at its top) and, in sub-folders, the
runs that answer the thread's other questions:

* ``lock/``          the same sweep with the spinlocked ``ptr_ring_produce`` / ``ptr_ring_consume``
                     (``-p lock true``: "could you test dropping the consumer spinlock?")
* ``batch-N/``       one ring size with the consumer batch forced to N (``-p batch N``): the batch sweep
* ``icount/``        mode 0 (one thread) under callgrind: instructions per operation of each ring,
                     per size, where the batch is 1 and where it is 16

``effects`` turns every comparison of these runs into forest rows (``ringlab.report.figures``:
+ = better); ``host_effects`` sets the committed sweeps of the other hosts beside this one.
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ringlab import fmt, paths
from ringlab.catalog import SEED003
from ringlab.errors import DataError
from ringlab.report import published
from ringlab.report.figures import effect_rows, host_noise_floor
from ringlab.rundir import RAW_CSV, RunOutput
from ringlab.sources.builtin_patches import effective_batch
from ringlab.stats import compare
from ringlab.stats.summary import StatsError

EXPERIMENT = "ptr-ring-batch-zeroing"
LOCK_DIR = "lock"
ICOUNT_DIR = "icount"


def batch_dir(n: int) -> str:
    """The sub-folder of the batch sweep's run with the consumer batch forced to ``n``."""
    return f"batch-{int(n)}"


def arm_runs(run_dir) -> dict[str, Path]:
    """{arm: run folder} of the timing runs under ``run_dir`` that hold a raw.csv: "sweep" (the
    folder itself), "lock on", "batch N" (in N order)."""
    run_dir = Path(run_dir)
    out = {}
    if (run_dir / RAW_CSV).is_file():
        out["sweep"] = run_dir
    if (run_dir / LOCK_DIR / RAW_CSV).is_file():
        out["lock on"] = run_dir / LOCK_DIR
    sweep = sorted((int(p.parent.name.split("-", 1)[1]), p.parent) for p in run_dir.glob("batch-*/" + RAW_CSV)
                   if p.parent.name.split("-", 1)[1].isdigit())
    out.update({f"batch {n}": d for n, d in sweep})
    return out


def _expected(r) -> float | None:
    return published.batch_zeroing_gain_pct() if str(r.get("candidate")) == SEED003.patched else None


def _rows(run_dir, host: str, baseline: str, arm: str) -> pd.DataFrame:
    run = RunOutput(run_dir)
    try:
        cmp = compare(run.raw, baseline, "ns_per_op")
    except (StatsError, DataError):
        return pd.DataFrame()
    cols = [c for c in ("mode", "size", "pair_class") if c in cmp.columns and cmp[c].nunique() > 1] or \
        [c for c in ("size",) if c in cmp.columns]
    rows = effect_rows(cmp, host, expected=_expected, label_columns=cols)
    if not len(rows):
        return rows
    sizes = cmp["size"].astype(int) if "size" in cmp.columns else pd.Series(0, index=cmp.index)
    given = cmp["batch"].fillna(0).astype(int) if "batch" in cmp.columns else pd.Series(0, index=cmp.index)
    rows["size"] = sizes.to_numpy()
    rows["batch"] = [effective_batch(int(s), int(b)) for s, b in zip(sizes, given)]
    rows["lock"] = "on" if arm == "lock on" else "off"
    rows["arm"] = arm
    # the run each row comes from: a figure that sets several hosts' runs side by side names them
    env = run.env_doc
    rows["commit"] = str((env.doc.get("git") or {}).get("commit") or "")[:12]
    rows["date"] = str(env.started_utc or "")[:10]
    rows["config"] = [f"{arm}: size={s} batch={b}" + (f" {c}" if c and not c.startswith("size=") else "")
                      for s, b, c in zip(rows["size"], rows["batch"],
                                         [" ".join(x for x in str(c).split() if not x.startswith("size="))
                                          for c in rows["config"]])]
    return rows


def effects(run_dir, host: str, baseline: str = SEED003.baseline) -> pd.DataFrame:
    """Forest rows of every timing run of ``run_dir`` (:func:`arm_runs`): batch against
    ``baseline`` per arm, size and effective batch, + = batch better; the published effect
    (seed 003: 1.84 -> 2.00 Mpps, 8% less time) as the marker."""
    parts = [_rows(d, host, baseline, arm) for arm, d in arm_runs(run_dir).items()]
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def committed_sweeps(root=None, exclude: str | None = None) -> dict[str, Path]:
    """{host: the latest committed run folder of notebook 11} under results/ (``root``), every
    host but ``exclude``."""
    base = Path(root) if root is not None else paths.results_dir()
    out = {}
    for host_dir in sorted((base / EXPERIMENT).glob("*")):
        runs = sorted(p.parent for p in host_dir.glob("*/" + RAW_CSV))
        if runs and host_dir.name != exclude:
            out[host_dir.name] = runs[-1]
    return out


def host_effects(run_dir, host: str, baseline: str = SEED003.baseline, root=None):
    """(rows, {host: A/A bound %}): this run's size sweep beside the latest committed sweep of
    every other host, rows = size x host (the main sweep of each, as :func:`effects`)."""
    runs = {host: Path(run_dir), **committed_sweeps(root, exclude=host)}
    parts, noise = [], {}
    for h, d in sorted(runs.items()):
        rows = _rows(d, h, baseline, "sweep")
        if len(rows):
            parts.append(rows)
            noise[h] = host_noise_floor(h, root)
    return (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()), noise


def hosts_table(rows: pd.DataFrame, noise: dict) -> pd.DataFrame:
    """One line per ring size, one column pair per host: the effect (+ = batch faster) with its
    CI, and whether it clears the host's A/A band."""
    if not len(rows):
        return pd.DataFrame()
    out = []
    for size, g in rows.groupby("size", sort=True):
        line = {"size": int(size), "batch": int(g["batch"].iloc[0])}
        for _, r in g.sort_values("host").iterrows():
            bound = noise.get(r["host"])
            inside = bound is not None and abs(r["effect_pct"]) < bound
            line[f"{r['host']}: effect (+ = batch faster)"] = (
                f"{fmt.pct(r['effect_pct'])} {fmt.ci(r['ci_low_pct'], r['ci_high_pct'])} "
                f"({fmt.ci_header(r['ci_level']).split(' ')[0]})")
            line[f"{r['host']}: verdict"] = r["verdict"] + (f" (inside the A/A band ±{bound:.2g}%)"
                                                            if inside else "")
        out.append(line)
    return pd.DataFrame(out)


def instruction_table(run_dir, baseline: str = SEED003.baseline) -> pd.DataFrame:
    """Callgrind instructions per operation (mode 0: one produce + one consume) of each ring per
    ring size of ``run_dir/icount`` (or ``run_dir`` itself), with the effective batch and the
    difference to ``baseline``; empty when no run holds callgrind rows."""
    for d in (Path(run_dir) / ICOUNT_DIR, Path(run_dir)):
        if not (d / RAW_CSV).is_file():
            continue
        df = RunOutput(d).raw
        if "icount_source" not in df.columns or not (df["icount_source"] == "callgrind").any():
            continue
        ic = df[(df["icount_source"] == "callgrind") & (df["status"] == "ok")]
        ic = ic.assign(instructions_per_op=pd.to_numeric(ic["instructions_per_op"], errors="coerce"))
        rows = []
        for size, g in ic.groupby(ic["size"].astype(int), sort=True):
            per = g.groupby(g["variant"].astype(str))["instructions_per_op"].median()
            given = g["batch"].fillna(0).astype(int) if "batch" in g.columns else pd.Series(0, index=g.index)
            base = per.get(baseline, math.nan)
            for v, ipo in per.items():
                b = effective_batch(int(size), int(given.iloc[0])) if v != baseline else None
                rows.append({"size": int(size), "variant": v, "batch": b if b is not None else "-",
                             "instructions/op": round(float(ipo), 2),
                             f"vs {baseline}": "-" if v == baseline else fmt.pct((ipo / base - 1) * 100)})
        return pd.DataFrame(rows)
    return pd.DataFrame()


def batch_one_text(instructions: pd.DataFrame, rows: pd.DataFrame, baseline: str = SEED003.baseline) -> str:
    """One sentence per ring size where the batch ring ran with batch 1: its callgrind
    instructions per operation against ``baseline``'s, beside the timed effect of the size
    sweep at that size (``rows``: :func:`effects`); "" when either is missing."""
    if not len(instructions) or not len(rows):
        return ""
    out = []
    for size, g in instructions.groupby("size", sort=True):
        cand = g[(g["variant"] != baseline) & (g["batch"].astype(str) == "1")]
        base = g[g["variant"] == baseline]
        timed = rows[(rows["arm"] == "sweep") & (rows["size"] == size)] if "arm" in rows.columns else rows[:0]
        if cand.empty or base.empty or timed.empty:
            continue
        c, b, t = cand.iloc[0], base.iloc[0], timed.iloc[0]
        out.append(f"Size {int(size)} (batch 1): {c['variant']} executes {c['instructions/op']:.2f} "
                   f"instructions per operation against {baseline}'s {b['instructions/op']:.2f} "
                   f"({c[f'vs {baseline}']}, callgrind, mode 0); timed in the size sweep it is "
                   f"{fmt.pct(t['effect_pct'])} {fmt.ci(t['ci_low_pct'], t['ci_high_pct'])} "
                   f"(+ = {c['variant']} faster; {t['verdict']}).")
    return "\n\n".join(out)


__all__ = ["batch_one_text", "EXPERIMENT", "ICOUNT_DIR", "LOCK_DIR", "arm_runs", "batch_dir", "committed_sweeps", "effects",
           "host_effects", "hosts_table", "instruction_table"]
