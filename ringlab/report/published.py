"""Numbers published in the seed threads, for published-vs-reproduced sections.

These are *citations*, not measurements: each figure is copied from a public
mailing-list message named in ``source``, and is only ever shown beside ringlab's
own measurements as a ratio (patched/unpatched, after/before, X/BASE) — never as
a claim about this machine.  Seed 000's instruction counts are declared with its arms in
``ringlab.catalog`` (``SEED000.counts``).  The perf stat blocks themselves are bundled in
``ringlab/data/`` and parsed with ``ringlab.perfstat``.
"""
from __future__ import annotations

from importlib import resources

import pandas as pd

SEED000 = ("seed 000: Yunsheng Lin, netdev, 2021-06-25, \"ptr_ring: move r->queue[] clearing after "
           "r->consumer_head updating\"")
SEED003 = "seed 003: Jason Wang / Michael S. Tsirkin, linux-kernel, 2017-04-18, \"ptr_ring: batch ring zeroing\""
SEED004 = ("seed 004: Wang Nan / Peter Zijlstra, 2016-03-28, perf ring buffer \"write backward\" "
           "(close(-1) x 3,000,000 under perf record -e raw_syscalls:*)")


def ptr_ring_reorder_table() -> pd.DataFrame:
    """Seed 000's two tables: ms for 1e8 operations, unpatched (batch) vs patched (reorder)."""
    rows = [
        # mode, arch, unpatched_ms, patched_ms, delta as printed in the mail
        (0, "arm64", 4648, 4464, "+3.9%"),
        (0, "x86", 2562, 2401, "+6.2%"),
        (1, "arm64", 3624, 3462, "+4.4%"),
        (1, "x86", 2758, 2547, "+7.6%"),
    ]
    df = pd.DataFrame(rows, columns=["mode", "arch", "unpatched_ms", "patched_ms", "delta_published"])
    df["count"] = 100_000_000
    df["size"] = 1000
    df["ratio_patched_over_unpatched"] = df["patched_ms"] / df["unpatched_ms"]
    df["source"] = SEED000
    return df


def _bundled(name: str) -> str:
    return resources.files("ringlab").joinpath("data", name).read_text()


def page_frag_perfstat_text() -> str:
    """The `perf stat -r 200 insmod page_frag_test.ko ...` blocks (before/after, 2 CPUs and 1 CPU)."""
    return _bundled("seed002_perfstat.txt")


def _perf_rb_table(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["config", "mean_published", "stdvar_published"])
    df["ratio_to_base"] = df["mean_published"] / df.loc[0, "mean_published"]
    df["source"] = SEED004
    return df


def perf_rb_means() -> pd.DataFrame:
    """Seed 004, after pinning + performance governor: MEAN and STDVAR over 100 runs.

    The thread labels the unit µs for 3,000,000 close(-1) calls; we only ever compare
    ratios to BASE, which do not depend on the unit."""
    return _perf_rb_table([("base", 800214.950, 2853.083), ("forward (pre)", 2253846.700, 9997.014),
                           ("forward (post)", 2257495.540, 8516.293)])


def batch_zeroing_mpps() -> pd.DataFrame:
    """Seed 003: vhost throughput (Mpps) before/after batch zeroing, and with batched dequeue."""
    rows = [("before (prebatch)", 1.84), ("batch zeroing", 2.00), ("+ batched dequeue", 2.30)]
    df = pd.DataFrame(rows, columns=["config", "mpps_published"])
    df["ratio_to_before"] = df["mpps_published"] / 1.84
    df["source"] = SEED003
    return df


def batch_zeroing_gain_pct() -> float:
    """Seed 003's batch zeroing as a time effect in the + = better sign: 1.84 -> 2.00 Mpps is
    (1 - 1.84 / 2.00) * 100 = 8% less time per packet."""
    pub = batch_zeroing_mpps().set_index("config")["mpps_published"]
    return (1 - pub["before (prebatch)"] / pub["batch zeroing"]) * 100


def reorder_gain_pct(mode, arch: str = "x86") -> float | None:
    """Seed 000's effect of the reorder patch in ``mode`` on ``arch`` in the + = better sign:
    (unpatched - patched) / unpatched * 100; None for a mode the thread did not measure."""
    t = ptr_ring_reorder_table()
    t = t[(t["arch"] == arch) & (t["mode"].astype(str) == str(mode))]
    if t.empty:
        return None
    r = t.iloc[0]
    return float((r["unpatched_ms"] - r["patched_ms"]) / r["unpatched_ms"] * 100)
