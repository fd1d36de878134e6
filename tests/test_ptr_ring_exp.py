"""ringlab.experiments.ptr_ring: parameters, placement on a fake topology, argv, parsing, real smoke."""
from __future__ import annotations

import dataclasses

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab import paths
from ringlab import run as runner
from ringlab.build.layouts import PLAIN
from ringlab.experiments.base import ParamError, parse_harness_json
from ringlab.experiments.ptr_ring import PtrRing, parse_kernel_headers
from ringlab.system.topology import Topology


class FakeCtx(runner.RunContext):
    """A RunContext on the issue's fake machine: 2 sockets x 4 cores x 2 SMT, 2 LLCs per socket."""

    def __init__(self, values):
        super().__init__("ptr_ring", values, "rid", Path("/nonexistent"), log=lambda m: None)
        self._topo = Topology.fake(2, 4, 2, 2)


def test_profiles_and_defaults():
    for prof in ("smoke", "quick", "full"):
        v = PtrRing.resolve({"profile": prof})
        assert v["variants"] == ["prebatch", "batch", "reorder", "spsc"] and v["trials"] >= 1
    assert PtrRing.resolve({"profile": "smoke"})["trials"] == 2
    v = PtrRing.resolve({"sizes": "16,1000", "modes": "0,2", "count": "1000000", "lock": "yes", "cpus": " 1:2, 3:4"})
    assert (v["sizes"], v["modes"], v["count"], v["lock"], v["cpus"]) == ([16, 1000], [0, 2], 10**6, True, "1:2,3:4")


@pytest.mark.parametrize("params,msg", [
    ({"variants": "batch,fast"}, "parameter 'variants': unknown variant 'fast'; allowed: prebatch, batch"),
    ({"variants": "batch,batch"}, "parameter 'variants': listed twice"),
    ({"sizes": "16,20000000"}, "parameter 'sizes': too large"),
    ({"count": "0"}, "parameter 'count': too small"),
    ({"count": "lots"}, "parameter 'count': not an integer"),
    ({"cpus": "1-2"}, "parameter 'cpus': bad value"),
    ({"kernel_headers": "batch=/etc/hostname"}, "clashes with a built-in variant"),
    ({"kernel_headers": "x=/no/such.h"}, "does not exist"),
    ({"kernel_headers": "justapath"}, "parameter 'kernel_headers': expected NAME=PATH"),
])
def test_bad_parameters(params, msg):
    with pytest.raises(ParamError, match="allowed") as e:
        PtrRing.resolve(params)
    assert msg in str(e.value)


def test_kernel_header_variant(tmp_path):
    h = tmp_path / "my dir; $(x)" / "ptr_ring.h"
    h.parent.mkdir()
    h.write_text("struct ptr_ring {\n\tint producer;\n\tint consumer_head;\n};\n")
    v = PtrRing.resolve({"kernel_headers": f"deb={h}", "variants": "batch,deb", "layouts": 1})
    assert parse_kernel_headers(v["kernel_headers"]) == {"deb": str(h)}
    exp = PtrRing()
    assert exp.needed_binaries(v) == ["ptr_ring_test-batch", "ptr_ring_test-deb"]
    assert exp.build_args(v) == {"kernel_headers": {"deb": str(h)}, "cflags": "",
                                 "layouts": {"ptr_ring_test-batch": [PLAIN], "ptr_ring_test-deb": [PLAIN]}}
    v = PtrRing.resolve({"kernel_headers": f"deb={h}", "variants": "batch,deb"})   # quick: 4 layouts
    names = exp.needed_binaries(v)
    # the 4 layouts of each variant are 4 copies in one binary (layout copies)
    assert len(names) == 2 and len(set(names)) == 2
    assert sum(n.startswith("ptr_ring_test-deb@c0-3-") for n in names) == 1
    groups = exp.build_args(v)["layouts"]["ptr_ring_test-deb"]
    assert [lay.index for g in groups for lay in g.layouts] == [0, 1, 2, 3]
    v = PtrRing.resolve({"variants": "batch", "layouts": 40})
    names = exp.needed_binaries(v)   # at most COPIES_PER_BINARY copies a binary, blocks by index
    assert [n.split("@")[1].rsplit("-", 1)[0] for n in names] == ["c0-31", "c32-39"]


def test_plan_auto_on_fake_topology():
    v = PtrRing.resolve({"profile": "smoke", "modes": "0,1", "variants": "batch"})
    ctx = FakeCtx(v)
    specs = PtrRing().plan(v, ctx)
    pairs = {(s.cpus, s.pair_class) for s in specs if s.config["mode"] == 1}
    classes = sorted(c for _, c in pairs)
    # one pair per class, no same-cpu for spinning SPSC, CPU 0 avoided
    assert classes == sorted(["smt-sibling", "same-llc", "cross-llc", "cross-numa"])
    assert all(0 not in cpus for cpus, _ in pairs)
    single = {s.cpus for s in specs if s.config["mode"] == 0}
    assert single == {(1, 1)}
    assert len(specs) == (1 + 4) * (v["warmup"] + v["trials"])
    assert [s.warmup for s in specs[:3]] == [True, False, False]
    assert not ctx.warnings


def test_plan_all_explicit_and_offline():
    v = PtrRing.resolve({"profile": "smoke", "modes": "1", "variants": "batch", "cpus": "all"})
    assert len({s.cpus for s in PtrRing().plan(v, FakeCtx(v))}) == 16 * 15
    v = PtrRing.resolve({"profile": "smoke", "modes": "0,2", "variants": "batch", "cpus": "3:3,4:12"})
    ctx = FakeCtx(v)
    specs = PtrRing().plan(v, ctx)
    assert {(s.config["mode"], s.cpus, s.pair_class) for s in specs} == {
        (0, (3, 3), "same-cpu"), (0, (4, 4), "same-cpu"), (2, (3, 3), "same-cpu"), (2, (4, 12), "smt-sibling")}
    assert any("same-cpu pair 3:3" in w for w in ctx.warnings)   # warned, not refused
    v = PtrRing.resolve({"cpus": "1:99"})
    with pytest.raises(ParamError, match="parameter 'cpus': CPU 99"):
        PtrRing().plan(v, FakeCtx(v))


def test_command_argv():
    v = PtrRing.resolve({"profile": "smoke", "repeats": 3, "counters": "false", "batch": 8, "lock": "true",
                         "cpus": "2:5"})
    ctx = FakeCtx(v)
    specs = PtrRing().plan(v, ctx)
    s = next(s for s in specs if s.config["mode"] == 1 and s.config["variant"] == "batch")
    argv = PtrRing().command(s, ctx)
    # smoke builds 2 layouts, as 2 copies in one binary; no layout given: layout 0, copy 0
    assert f"ptr_ring_test-{s.config['variant']}@c0-1-" in argv[0]
    assert argv[1:] == ["--copy", "0", "-s", "1000", "-m", "1", "-N", "100000", "-p", "2", "-c", "5", "-b", "8", "-l",
                        "-r", "3", "--counters", "none", "--json"]
    s.extra.update(layout=1, ring_offset=192)
    argv1 = PtrRing().command(s, ctx)
    assert argv1[0] == argv[0] and argv1[1:3] == ["--copy", "1"]
    assert argv1[-3:] == ["--ring-offset", "192", "--json"]
    vl = PtrRing.resolve({"profile": "smoke", "layouts": 40})   # binaries of copies 0-31 and 32-39
    sl = dataclasses.replace(s, extra={**s.extra, "layout": 33})
    argv33 = PtrRing().command(sl, FakeCtx(vl))
    assert "@c32-39-" in argv33[0] and argv33[1:3] == ["--copy", "1"]
    s0 = next(s for s in specs if s.config["mode"] == 0)
    assert "-c" not in PtrRing().command(s0, ctx)
    vn = PtrRing.resolve({"cpus": "none"})
    sn = PtrRing().plan(vn, FakeCtx(vn))[0]
    assert "-p" not in PtrRing().command(sn, FakeCtx(vn)) and sn.pair_class == "unpinned"


def test_parse_harness_json():
    doc = {"schema": 1, "count": 1000, "ctx_voluntary": 2, "ctx_involuntary": 1, "iterations": [
        {"ns_producer": 5e3, "ns_consumer": None, "elapsed_ns": 5e3, "ns_per_op": 5.0,
         "cpu_producer_start": 1, "cpu_producer_end": 1, "cpu_consumer_start": None, "cpu_consumer_end": None,
         "counters": {"cycles": {"value": None, "error": "not supported (ENOENT)"},
                      "task_clock": {"value": 5e3, "multiplexed": True, "error": None}}}]}
    (row,) = parse_harness_json("noise\n" + json.dumps(doc))
    assert row["ns_per_op"] == 5.0 and row["count"] == 1000 and row["cpu_consumer_start"] == -1
    assert row["task_clock"] == 5e3 and row["counters_multiplexed"] is True
    assert pd.isna(row["cycles"]) and pd.isna(row["ns_consumer"]) and pd.isna(row["page_faults"])
    assert "cycles: not supported (ENOENT)" in row["counter_errors"]
    doc["iterations"][0]["counters"].update(instructions={"value": None, "error": "not supported (ENOENT)"},
                                            branches={"value": None, "error": "not counted"})
    (row,) = parse_harness_json(json.dumps(doc))
    # the events that share a reason are named once, in the order they were read
    assert row["counter_errors"].startswith(
        "cycles, instructions: not supported (ENOENT); branches: not counted; branch_misses, "), row["counter_errors"]
    with pytest.raises(ValueError):
        parse_harness_json("Segmentation fault")
    with pytest.raises(ValueError):
        parse_harness_json('{"iterations": []}')


REAL = paths.bin_dir() / "ptr_ring_test-batch"


@pytest.mark.skipif(not os.access(REAL, os.X_OK), reason=f"{REAL} not built (run `ringlab build`)")
def test_real_binary_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "variants": "batch,reorder", "governor": "false",
                                             "count": 20000, "trials": 1, "warmup": 1, "repeats": 2,
                                             "layouts": 1},
                                tmp_path / "run", build=False, progress=False, log=lambda m: None)
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert df["status"].eq("ok").all(), df["stderr_tail"].dropna().tolist()
    assert (df["ns_per_op"] > 0).all() and set(df["iteration"]) == {0, 1}
    assert df["binary_sha256"].nunique() == 2
    assert set(df["mode"]) == {0, 1}
    assert (df["cpu_req_producer"] >= 0).all() == (len(os.sched_getaffinity(0)) >= 1)


def test_batch_reaches_only_the_rings_that_can_set_it():
    """A run that sets the batch passes -b to the rings whose header can set one (the others refuse
    it and would crash every trial), and the rows of both arms keep the run's batch, so a batch
    sweep pairs the batching ring with the one it replaces."""
    import re
    from ringlab import paths
    from ringlab import catalog
    from ringlab.experiments.ptr_ring import SETS_BATCH
    defines = {h.stem.removeprefix("ptr_ring_") for h in (paths.ROOT / "csrc" / "rings").glob("*.h")
               if re.search(r"^#define RINGLAB_HAS_SET_BATCH\b", h.read_text(), re.M)}
    assert set(SETS_BATCH) == defines and defines <= set(catalog.VARIANT_NAMES)
    v = PtrRing.resolve({"profile": "smoke", "batch": 4, "variants": "prebatch,batch", "modes": "2", "sizes": "1024"})
    ctx = FakeCtx(v)
    for spec in PtrRing().plan(v, ctx):
        argv = PtrRing().command(spec, ctx)
        assert ("-b" in argv) == (spec.config["variant"] == "batch"), (spec.config["variant"], argv)
        assert spec.config["batch"] == 4
