"""The kernel's ringtest ``ptr_ring`` beside ringlab's SPSC harness on the same header.

Both harnesses compile the same ``include/linux/ptr_ring.h`` of one tree:
ringtest through the tree's own ``tools/virtio/ringtest`` (experiment
``ringtest``), ringlab through its compat shim as a ``kernel_headers`` variant
of experiment ``ptr_ring`` in mode 1 (producer and consumer threads).  They
run with the same ring size on the same CPU pairs.  The work differs:
ringtest's guest also waits for the host to hand each buffer back through the
used ring, ringlab's producer only produces.  So the ratio says how much of
ringtest's per-item time the bare ring accounts for; it is not a verdict on
either.

* ``tree_header(tree)`` the tree's ptr_ring.h (exported like ringtest's
  sources) and a variant NAME, for ``ptr_ring -p kernel_headers NAME=HEADER``.
* ``side_by_side(ringtest_run, spsc_run)`` one row per ring size and CPU pair:
  medians of both and their ratio (``ratio_of_medians``, descriptive), and
  ringtest/SPSC as ``ratio`` = exp(Hodges-Lehmann shift of the log values) with
  the Mann-Whitney CI that belongs to it (``ratio_ci_low``/``ratio_ci_high`` at
  ``ci_level``; the two runs share no rounds, so unpaired) from
  ``ringlab.stats.compare.compare_arrays``.  Too few trials for a CI at that
  level (fewer than 4 per harness at 95%) leave the CI empty with a ``note``.
* ``harness_figure(...)`` every trial of both, per CPU pair (a Figure); ``figure(...)``
  has ``ringlab.rundir`` save it as PNG + SVG (deterministic).
* ``layouts_ratio(run_dir, ours, real)`` ``ringlab bench fidelity``'s timing criterion: ours/real
  per mode from ``ringlab.stats.compare.compare`` (design ``layouts``: a t interval across the K
  layout-pair estimates), and whether that CI includes a value within ``RATIO_TOLERANCE`` of 1.
"""
from __future__ import annotations

import math
import zlib
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

from ringlab import rundir, schema
from ringlab.catalog import DEFAULT_VARIANT
from ringlab.tools import kernel_tests
from ringlab.sources import kernel_tree
from ringlab.stats.compare import compare, compare_arrays

matplotlib.use("Agg")  # figures go to files, never to a display (as in ringlab.report.figures)
import matplotlib.pyplot as plt  # noqa: E402

KEYS = ["size", "cpu_req_producer", "cpu_req_consumer", "pair_class"]
#: columns the side-by-side reads from each run's raw.csv
_COMMON = ("status", "warmup", "cpu_req_producer", "cpu_req_consumer", "pair_class", "ns_per_op")
RINGTEST_COLUMNS = _COMMON + ("ring", "ring_size")
SPSC_COLUMNS = _COMMON + ("mode", "size")


def tree_header(tree: str) -> tuple[str, Path]:
    """(NAME, path of include/linux/ptr_ring.h) of a single-tree ``tree`` spec."""
    specs = kernel_tree.parse_trees(tree)
    if len(specs) != 1:
        raise kernel_tree.TreeError(f"one tree expected for the side-by-side, got {len(specs)}")
    t = specs[0]
    root, _ = kernel_tree.export(t, kernel_tests.EXPORT_PREFIXES)
    header = root / "include" / "linux" / "ptr_ring.h"
    if not header.is_file():
        raise kernel_tree.TreeError(f"tree {t.name!r}: no include/linux/ptr_ring.h under {root}")
    return t.name, header


def run_status(run_dir) -> tuple[str, str | None]:
    """(status, skipped_reason) from a run folder's env.json (``rundir.RunOutput``)."""
    env = rundir.RunOutput(run_dir).env_file
    return str(env.status), env.skipped_reason


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return schema.measured(df)


def _measured(ringtest_run, spsc_run) -> tuple[pd.DataFrame, pd.DataFrame]:
    rt = _ok(rundir.RunOutput(ringtest_run).read_raw(required=RINGTEST_COLUMNS))
    rt = rt[rt["ring"] == "ptr_ring"].rename(columns={"ring_size": "size"})
    sp = _ok(rundir.RunOutput(spsc_run).read_raw(required=SPSC_COLUMNS))
    sp = sp[sp["mode"] == 1]
    return rt, sp


#: side_by_side's columns, in order
COLUMNS = ["ring_size", "cpus", "pair_class", "n_ringtest", "ringtest_ns_per_item", "n_spsc", "spsc_ns_per_op",
           "ratio_of_medians", "ratio", "ratio_ci_low", "ratio_ci_high", "ci_level", "note"]


def _ratio(pct: float) -> float:
    return 1 + pct / 100 if math.isfinite(pct) else math.nan


def side_by_side(ringtest_run, spsc_run) -> pd.DataFrame:
    """Per ring size and CPU pair: ringtest ns/item, ringlab SPSC ns/op, the ratio of their medians,
    and the Hodges-Lehmann ratio with its CI (see the module doc)."""
    rt, sp = _measured(ringtest_run, spsc_run)
    rows = []
    for key, g in rt.groupby(KEYS, sort=True):
        m = sp
        for k, v in zip(KEYS, key):
            m = m[m[k] == v]
        if m.empty:
            continue
        c = compare_arrays(m["ns_per_op"].to_numpy(float), g["ns_per_op"].to_numpy(float))
        rows.append({"ring_size": int(key[0]), "cpus": f"{int(key[1])}:{int(key[2])}", "pair_class": key[3],
                     "n_ringtest": len(g), "ringtest_ns_per_item": c["median_candidate"],
                     "n_spsc": len(m), "spsc_ns_per_op": c["median_baseline"],
                     "ratio_of_medians": c["median_candidate"] / c["median_baseline"],
                     "ratio": _ratio(c["delta_pct"]),
                     "ratio_ci_low": _ratio(c["ci_low_pct"]), "ratio_ci_high": _ratio(c["ci_high_pct"]),
                     "ci_level": c["ci_level"], "note": c["note"]})
    return pd.DataFrame(rows, columns=COLUMNS)


def figure(ringtest_run, spsc_run, out_dir) -> list[Path]:
    """``out_dir/harnesses.png|svg`` (``out_dir``: the run folder's ``figures/``), written by
    ``rundir.write_figure``; [] when either run measured nothing."""
    fig = harness_figure(ringtest_run, spsc_run)
    if fig is None:
        return []
    out = Path(out_dir)
    return rundir.write_figure(out.parent, "harnesses", fig, folder=out.name)


def harness_figure(ringtest_run, spsc_run):
    """Every measured trial of both harnesses, one panel per ring size, CPU pairs along x:
    a matplotlib Figure, or None when either run measured nothing."""
    rt, sp = _measured(ringtest_run, spsc_run)
    if rt.empty or sp.empty:
        return None
    sizes = sorted(set(rt["size"]) & set(sp["size"]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 3.6), squeeze=False)
    rng = np.random.default_rng(zlib.crc32(b"harness-compare"))
    for ax, size in zip(axes[0], sizes):
        pairs = sorted({(int(a), int(b), c) for a, b, c in
                        rt[rt["size"] == size][["cpu_req_producer", "cpu_req_consumer", "pair_class"]]
                        .itertuples(index=False)})
        for i, (a, b, cls) in enumerate(pairs):
            for j, (df, label, color) in enumerate(((rt, "ringtest ptr_ring", "C0"), (sp, "ringlab SPSC", "C1"))):
                y = df[(df["size"] == size) & (df["cpu_req_producer"] == a) & (df["cpu_req_consumer"] == b)][
                    "ns_per_op"].to_numpy(float)
                x = i + (j - 0.5) * 0.35 + rng.uniform(-0.08, 0.08, len(y))
                ax.scatter(x, y, s=12, color=color, alpha=0.7, label=label if i == 0 else None)
                if len(y):
                    ax.hlines(np.median(y), i + (j - 0.5) * 0.35 - 0.12, i + (j - 0.5) * 0.35 + 0.12, color=color)
        ax.set_xticks(range(len(pairs)), [f"{a}:{b}\n{c}" for a, b, c in pairs])
        ax.set_ylim(bottom=0)
        ax.set_ylabel("ns per item")
        ax.set_title(f"ring size {size}")
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def skipped_summary(reason: str) -> str:
    """summary.md of a run that could not measure anything here."""
    return f"# Not measured on this machine\n\n{reason}\n"


def write_skipped_summary(run_dir, reason: str) -> Path:
    """summary.md (and an empty figures/) for a run that could not measure anything here,
    written by ``ringlab.rundir``."""
    run_dir = Path(run_dir)
    p = rundir.write_text(run_dir, "summary.md", skipped_summary(reason))
    (run_dir / "figures").mkdir(exist_ok=True)
    return p


#: ``ringlab bench fidelity``'s timing target: the CI of ours/real includes a value within 1 +- this
RATIO_TOLERANCE = 0.01
#: layouts_ratio's columns, in order
RATIO_COLUMNS = ["mode", "design", "layouts", "ratio", "ratio_ci_low", "ratio_ci_high", "ci_level",
                 "sigma_layout_pct", "verdict", "within_target"]


def within(lo: float, hi: float, tol: float = RATIO_TOLERANCE) -> bool | None:
    """Whether [lo, hi] includes a value within 1 +- ``tol`` (None without a finite CI)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return lo <= 1 + tol and hi >= 1 - tol


def layouts_ratio(run_dir, ours: str = DEFAULT_VARIANT, real: str = "kernel", metric: str = "ns_per_op") -> pd.DataFrame:
    """Per mode (and size) of a ptr_ring run holding ``ours`` and ``real``: ours/real as
    exp(estimate) with its CI from ``compare`` (the layouts design when the run has more than one
    layout per variant), the layout spread, the verdict and ``within_target`` (:func:`within`)."""
    df = rundir.RunOutput(run_dir).read_raw()
    cmp = compare(df, real, metric)
    cmp = cmp[cmp["candidate"].astype(str) == ours]
    rows = []
    for _, r in cmp.iterrows():
        lo, hi = _ratio(float(r["ci_low_pct"])), _ratio(float(r["ci_high_pct"]))
        rows.append({"mode": r.get("mode"), "design": r.get("design"), "layouts": r.get("layouts"),
                     "ratio": _ratio(float(r["delta_pct"])), "ratio_ci_low": lo, "ratio_ci_high": hi,
                     "ci_level": r.get("ci_level"), "sigma_layout_pct": r.get("sigma_layout_pct"),
                     "verdict": r["verdict"], "within_target": within(lo, hi)})
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)
