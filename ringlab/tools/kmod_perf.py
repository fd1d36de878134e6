"""``perf stat -r N insmod MODULE ARGS`` output as kmod rows, and against a published block.

Seed 002 measured ``page_frag_test.ko`` as ``perf stat -r 200 insmod
./page_frag_test.ko test_push_cpu=16 test_pop_cpu=17 test_alloc_len=12
nr_test=51200000``.  ``perf_rows()`` parses such text (``ringlab.perfstat``:
mail quoting, labels like "Before this patchset:") and adds the kmod view of
each block's command: ``variant`` (the block's label, else the module name),
``module``, ``args`` (without the push/pop CPUs), ``cpu_req_producer`` /
``cpu_req_consumer`` (the push/pop CPUs, -1 when not given) and ``nr_test``.

``compare_blocks(published, mine)`` pairs blocks of the same configuration
(module, args, push/pop CPUs) and variant, and gives the ratio of each
side's ``elapsed_s`` (perf's mean over the -r runs) and, within each side,
every variant against the baseline (after/before).  Absolute times of different
machines are not comparable; the ratios are what to set side by side.
"""
from __future__ import annotations

import math
import re
import shlex

import pandas as pd

from ringlab.paths import ROOT
from ringlab.tools import perfstat
from ringlab.tools.kmod import module_name

CONFIG = ["module", "args", "cpu_req_producer", "cpu_req_consumer"]


def _split_command(cmd: str | None, push_arg: str, pop_arg: str) -> dict:
    out = {"module": "", "args": "", "cpu_req_producer": -1, "cpu_req_consumer": -1, "nr_test": math.nan}
    if not cmd:
        return out
    try:
        words = shlex.split(cmd)
    except ValueError:
        words = cmd.split()
    if not words or not re.search(r"(^|/)insmod$", words[0]):
        return out
    rest = words[1:]
    if rest:
        out["module"] = module_name(rest[0])
    args = []
    for w in rest[1:]:
        k, _, v = w.partition("=")
        if k == push_arg and v.isdigit():
            out["cpu_req_producer"] = int(v)
        elif k == pop_arg and v.isdigit():
            out["cpu_req_consumer"] = int(v)
        else:
            args.append(w)
            if k == "nr_test" and v.isdigit():
                out["nr_test"] = int(v)
    out["args"] = " ".join(args)
    return out


def _variant(label: str | None, module: str) -> str:
    if not label:
        return module
    low = label.lower()
    for word in ("before", "after"):
        if re.search(rf"\b{word}\b", low):
            return word
    return re.sub(r"[^a-z0-9]+", "-", low).strip("-") or module


def perf_rows(text: str, push_arg: str = "test_push_cpu", pop_arg: str = "test_pop_cpu") -> pd.DataFrame:
    """One row per ``perf stat ... insmod`` block, with the kmod configuration columns."""
    df = perfstat.blocks_to_rows(perfstat.parse(text))
    if df.empty:
        return df
    extra = pd.DataFrame([_split_command(c, push_arg, pop_arg) for c in df["command"]], index=df.index)
    df = pd.concat([df, extra], axis=1)
    df.insert(1, "variant", [_variant(lab, m) for lab, m in zip(df["label"], df["module"])])
    return df


def compare_blocks(published: pd.DataFrame, mine: pd.DataFrame, metric: str = "elapsed_s",
                   baseline: str | None = None) -> pd.DataFrame:
    """Published and own perf-stat blocks of the same configuration side by side, as ratios.

    ``mine_over_published`` compares the two sides of one (configuration, variant);
    ``vs_baseline_published`` / ``vs_baseline_mine`` compare each variant with ``baseline``
    (default: ``before`` when present, else the first variant published) on each side."""
    cols = CONFIG + ["variant", metric]
    a = published[cols].rename(columns={metric: f"{metric}_published"})
    b = mine[cols].rename(columns={metric: f"{metric}_mine"})
    m = a.merge(b, on=CONFIG + ["variant"], how="outer")
    m["mine_over_published"] = m[f"{metric}_mine"] / m[f"{metric}_published"]
    variants = list(dict.fromkeys(list(published["variant"]) + list(mine["variant"])))
    base = baseline or ("before" if "before" in variants else variants[0] if variants else None)
    for side in ("published", "mine"):
        col = f"{metric}_{side}"
        ref = m[m["variant"] == base].set_index(CONFIG)[col]
        ref = ref[~ref.index.duplicated()]
        key = pd.MultiIndex.from_frame(m[CONFIG])
        m[f"vs_baseline_{side}"] = m[col].to_numpy() / ref.reindex(key).to_numpy()
    m["baseline"] = base
    return m.sort_values(CONFIG + ["variant"], kind="stable").reset_index(drop=True)


def published_seed002() -> pd.DataFrame:
    """Seed 002's ``perf stat -r 200/10 insmod ./page_frag_test.ko ...`` blocks (ringlab/data)."""
    return perf_rows((ROOT / "ringlab" / "data" / "seed002_perfstat.txt").read_text())


def published_ratios(published: pd.DataFrame | None = None, baseline: str | None = None) -> pd.DataFrame:
    """The published blocks alone: elapsed time per configuration and variant, and the ratio to baseline."""
    pub = published_seed002() if published is None else published
    m = compare_blocks(pub, pub.iloc[0:0], baseline=baseline)
    return m[CONFIG + ["variant", "elapsed_s_published", "vs_baseline_published"]].rename(
        columns={"elapsed_s_published": "elapsed_s", "vs_baseline_published": f"vs_{m['baseline'].iloc[0]}"})
