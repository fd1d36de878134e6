"""ringlab.experiments.page_frag: parameters, plan, argv, parse (fake context) + one smoke run."""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest

from ringlab import rundir
from ringlab.build import layouts as L
from ringlab.experiments import base
from ringlab.experiments.base import ParamError, TrialSpec
from ringlab.experiments.page_frag import PageFrag


class FakeCtx:
    """Stands in for runner.RunContext: a 4-CPU box with SMT pairs (0,2) and (1,3)."""

    def __init__(self, values):
        self.values = values
        self.warnings = []

    def binary(self, name):
        return Path("/bin/dir") / name

    def select_pairs(self, spec, need_two=True):
        if spec == "auto":
            return [(1, 3, "smt-sibling"), (1, 2, "same-llc")]
        if spec == "all":
            return [(a, b, "same-llc") for a in range(4) for b in range(4) if a != b]
        out = []
        for item in spec.split(","):
            a, b = map(int, item.split(":"))
            if a > 3 or b > 3:
                raise ParamError("parameter 'cpus': offline; allowed: 0-3")
            out.append((a, b, "same-cpu" if a == b else "same-llc"))
        return out

    def pick_single_cpu(self):
        return 1

    def warn(self, msg):
        self.warnings.append(msg)


def test_registered():
    assert base.get("page_frag") is PageFrag


def test_defaults_and_profiles():
    v = PageFrag.resolve({})
    assert v["variants"] == ["before", "after"] and v["aligns"] == [0, 1]
    assert v["alloc_lens"] == [12, 64, 2048] and v["cpus"] == "auto"
    for prof in ("smoke", "quick", "full"):
        assert PageFrag.resolve({"profile": prof})["nr_test"] > 0
    assert PageFrag.param_columns() == ["align", "alloc_len", "nr_test"]


@pytest.mark.parametrize("name,value,needle", [
    ("variants", "before,sideways", "variants"),
    ("aligns", "0,2", "aligns"),
    ("alloc_lens", "0", "alloc_lens"),
    ("alloc_lens", "4097", "alloc_lens"),
    ("alloc_lens", "12,12", "alloc_lens"),
    ("nr_test", "0", "nr_test"),
    ("cpus", "1-2", "cpus"),
    ("repeats", "3", "repeats"),
])
def test_bad_params(name, value, needle):
    with pytest.raises(ParamError) as e:
        PageFrag.resolve({name: value})
    assert f"'{needle}'" in str(e.value) and "allowed" in str(e.value)


def test_plan_includes_same_cpu_pair():
    v = PageFrag.resolve({"profile": "quick"})
    ctx = FakeCtx(v)
    plan = PageFrag().plan(v, ctx)
    classes = {s.pair_class for s in plan}
    assert classes == {"smt-sibling", "same-llc", "same-cpu"}
    assert {s.cpus for s in plan if s.pair_class == "same-cpu"} == {(1, 1)}
    n_cfg = 2 * 2 * 3 * 3   # variants x aligns x lens x placements
    assert len(plan) == n_cfg * (v["trials"] + v["warmup"])
    assert sum(s.warmup for s in plan) == n_cfg * v["warmup"]
    assert set(plan[0].config) == {"variant", "align", "alloc_len", "nr_test"}


def test_plan_explicit_and_none():
    v = PageFrag.resolve({"cpus": "0:1,2:2", "trials": 1, "warmup": 0})
    plan = PageFrag().plan(v, FakeCtx(v))
    assert {(s.cpus, s.pair_class) for s in plan} == {((0, 1), "same-llc"), ((2, 2), "same-cpu")}
    v = PageFrag.resolve({"cpus": "none", "trials": 1, "warmup": 0})
    assert {s.cpus for s in PageFrag().plan(v, FakeCtx(v))} == {(-1, -1)}
    v = PageFrag.resolve({"cpus": "all", "trials": 1, "warmup": 0})
    assert sum(1 for s in PageFrag().plan(v, FakeCtx(v)) if s.pair_class == "same-cpu") == 12


def test_command_is_argv():
    v = PageFrag.resolve({"counters": "false", "layouts": 1})
    spec = TrialSpec(config={"variant": "after", "align": 1, "alloc_len": 12, "nr_test": 51200000},
                     trial=0, warmup=False, cpus=(16, 17), pair_class="same-llc")
    argv = PageFrag().command(spec, FakeCtx(v))
    assert argv == ["/bin/dir/page_frag_test-after", "test_push_cpu=16", "test_pop_cpu=17",
                    "test_alloc_len=12", "nr_test=51200000", "test_align=1", "--json",
                    "--counters", "none"]


def test_layouts_parameter_and_profiles():
    assert [PageFrag.resolve({"profile": p})["layouts"] for p in ("smoke", "quick", "full")] == [2, 4, 8]
    assert PageFrag.resolve({"profile": "full", "layouts": 1})["layouts"] == 1
    for raw in ("0", "257", "two"):
        with pytest.raises(ParamError, match="parameter 'layouts'.*allowed"):
            PageFrag.resolve({"layouts": raw})


def test_layout_builds_binaries_and_command():
    v = PageFrag.resolve({"layouts": 3, "variants": "before,after", "seed": 11, "counters": "false"})
    exp = PageFrag()
    lays = {b: L.arm_layouts(11, b.split("-")[-1], 3) for b in ("page_frag_test-before", "page_frag_test-after")}
    assert exp.build_args(v) == {"layouts": lays}
    names = exp.needed_binaries(v)
    assert names == [x.binary_name(b) for b, xs in lays.items() for x in xs] and len(set(names)) == 6
    assert {L.base_name(n) for n in names} == set(lays)
    assert all(not x.plain and x.flags()[0].startswith("-DRINGLAB_LAYOUT_PAD=") for xs in lays.values() for x in xs)
    cfg = {"variant": "after", "align": 0, "alloc_len": 12, "nr_test": 100}
    for k in range(3):
        spec = TrialSpec(config=dict(cfg), trial=0, warmup=False, cpus=(0, 1),
                         extra={"layout": k, "ring_offset": 64 * k})
        argv = exp.command(spec, FakeCtx(v))
        assert argv[0] == f"/bin/dir/{lays['page_frag_test-after'][k].binary_name('page_frag_test-after')}"
        assert argv[argv.index("--ring-offset") + 1] == str(64 * k)
    one = PageFrag.resolve({"layouts": 1})
    assert exp.needed_binaries(one) == ["page_frag_test-before", "page_frag_test-after"]
    # no callgrind counts to keep equal across layouts: two threads, icount is refused
    with pytest.raises(ParamError, match="parameter 'icount'"):
        PageFrag.resolve({"icount": "true", "layouts": 3})


def _doc(variant="before", **it):
    iteration = {"ns_producer": 900.0, "ns_consumer": 1000.0, "elapsed_ns": 1000.0, "ns_per_op": 10.0,
                 "elapsed_us": 1.0, "cpu_producer_start": 0, "cpu_producer_end": 0,
                 "cpu_consumer_start": 1, "cpu_consumer_end": 1, "ring_full": 3, "ring_empty": 5,
                 "page_refills": 2, "page_refills_order0": 0, "page_reuses": 1, "page_abandons": 1,
                 "alloc_failed": 0,
                 "counters": {"cycles": {"value": None, "raw": None, "enabled": 0, "running": 0,
                                         "multiplexed": False, "error": "not supported (ENOENT)"},
                              "task_clock": {"value": 950.0, "raw": 950.0, "enabled": 1, "running": 1,
                                             "multiplexed": False, "error": None}}}
    iteration.update(it)
    return json.dumps({"schema": 1, "binary": "page_frag_test", "variant": variant, "count": 100,
                       "alloc_len": 12, "align": 0, "ctx_voluntary": 0, "ctx_involuntary": 4,
                       "pages_leaked": 0, "iterations": [iteration]})


def test_parse_rows():
    spec = TrialSpec(config={"variant": "before", "align": 0, "alloc_len": 12, "nr_test": 100},
                     trial=0, warmup=False, cpus=(0, 1))
    [row] = PageFrag().parse(spec, _doc(), "", FakeCtx({}))
    assert row["ns_per_op"] == 10.0 and row["elapsed_us"] == 1.0 and row["count"] == 100
    assert math.isnan(row["cycles"]) and row["task_clock"] == 950.0   # unsupported: NaN, never 0
    assert re.search(r"\bcycles\b[^;]*: not supported", row["counter_errors"]), row["counter_errors"]
    assert row["ring_full"] == 3 and row["page_reuses"] == 1 and row["ctx_involuntary"] == 4
    assert "ring_offset" not in row            # the binary reported none
    [row] = PageFrag().parse(spec, json.dumps(dict(json.loads(_doc()), ring_offset=448)), "", FakeCtx({}))
    assert row["ring_offset"] == 448
    with pytest.raises(ValueError):
        PageFrag().parse(spec, _doc(variant="after"), "", FakeCtx({}))
    with pytest.raises(ValueError):
        PageFrag().parse(spec, "100 of iterations for non-aligned testing took: 5us\n", "", FakeCtx({}))


def _binaries_ready() -> bool:
    from ringlab import paths
    return all(os.access(paths.bin_dir() / f"page_frag_test-{v}", os.X_OK) for v in ("before", "after"))


def test_smoke_run_end_to_end(tmp_path):
    from ringlab import run as runner
    if not _binaries_ready():
        pytest.skip("build/bin/page_frag_test-* not built (run `ringlab build`)")
    import pandas as pd
    out = tmp_path / "run"
    res = runner.run_experiment("page_frag", {"profile": "smoke", "governor": False}, out)
    raw = Path(getattr(res, "raw_csv", None) or next(out.rglob("raw.csv")))
    df = rundir.read_raw(raw, strict=False)
    assert (df["status"] == "ok").all(), df[["status", "stderr_tail"]]
    assert set(df["variant"]) == {"before", "after"} and set(df["align"]) == {0, 1}
    assert "same-cpu" in set(df["pair_class"])
    assert (df["ns_per_op"] > 0).all()
    assert df["elapsed_us"].round(3).equals((df["elapsed_ns"] / 1e3).round(3))
    # smoke: two layouts per variant, the round's pair per trial, ring offsets as drawn
    from ringlab.run import plan as P
    assert df["layout"].tolist() == [P.round_layout(1, r, 2) for r in df["round"]]
    assert set(df["layout"]) == {0, 1}
    assert df.groupby("variant")["binary_sha256"].nunique().eq(2).all()
    assert df["ring_offset"].tolist() == [L.ring_offset(1, o) for o in df["order"]]
