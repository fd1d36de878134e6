"""Code and data layouts: seeded layout specs, K builds per arm, their records, the round plan,
per-trial ring offsets and environment sizes, and (real gcc) equal instruction counts."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab import paths
from ringlab import run as runner
from ringlab.build import binaries, driver
from ringlab.build.compile import OBJECT_CACHE
from ringlab.build import layouts as L
from ringlab.build.sourceset import source_record_path
from ringlab.errors import ParamError
from ringlab.experiments.base import TrialSpec
from ringlab.experiments.ptr_ring import PtrRing
from ringlab.run import plan as P
from ringlab.run import process


# -- layout specs ----------------------------------------------------------------------------
def test_layout_spec_is_deterministic_and_in_range():
    a = [L.layout_spec(7, "batch", k) for k in range(64)]
    assert a == [L.layout_spec(7, "batch", k) for k in range(64)]
    assert all(0 <= x.pad < 4096 for x in a) and all(x.align in L.ALIGNS for x in a)
    assert [x.index for x in a] == list(range(64))
    assert len({x.pad for x in a}) > 40                 # pads of any size, not a few
    assert any(x.pad % 64 for x in a)                   # not only multiples of 64
    assert len({x.align for x in a}) > 3
    # each arm and each seed draws its own layouts
    assert a != [L.layout_spec(7, "reorder", k) for k in range(64)]
    assert a != [L.layout_spec(8, "batch", k) for k in range(64)]


def test_common_layouts_give_every_arm_the_same_pads_and_alignments():
    from ringlab.experiments.ptr_ring import PtrRing
    common = {v: L.arm_layouts(7, v, 8, common=True) for v in ("batch", "reorder")}
    own = {v: L.arm_layouts(7, v, 8) for v in ("batch", "reorder")}
    key = [(x.pad, x.align, x.loops) for x in common["batch"]]
    assert key == [(x.pad, x.align, x.loops) for x in common["reorder"]]
    assert key != [(x.pad, x.align, x.loops) for x in own["batch"]]
    assert own["batch"] != own["reorder"]
    assert L.arm_layouts(8, "batch", 8, common=True) != common["batch"]       # still drawn per seed
    assert L.arm_layouts(7, "batch", 1, common=True) == [L.PLAIN]
    # user-pinned alignments stand in common layouts too
    assert all(x.align == 0 for x in L.arm_layouts(7, "batch", 4, "-falign-functions=32", common=True))
    values = PtrRing.resolve({"variants": "batch,reorder", "layouts": 3, "common_layouts": "true", "seed": 5})
    names = PtrRing().needed_binaries(values)
    assert sorted(n.split("@")[1] for n in names if "-batch@" in n) == \
        sorted(n.split("@")[1] for n in names if "-reorder@" in n)
    assert PtrRing.resolve({})["common_layouts"] is False


def test_layout_spec_does_not_depend_on_the_hash_seed():
    code = ("from ringlab.build.layouts import layout_spec as s; "
            "print([(s(3, 'batch', k).pad, s(3, 'batch', k).align) for k in range(4)])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(paths.ROOT), "PYTHONHASHSEED": h}).stdout
            for h in ("1", "2")}
    assert len(outs) == 1
    assert outs.pop().strip() == str([(L.layout_spec(3, "batch", k).pad, L.layout_spec(3, "batch", k).align)
                                      for k in range(4)])


def test_one_layout_is_the_plain_build_and_names():
    assert L.arm_layouts(5, "batch", 1) == [L.PLAIN]
    assert L.PLAIN.flags() == [] and L.PLAIN.binary_name("ptr_ring_test-batch") == "ptr_ring_test-batch"
    lays = L.arm_layouts(5, "batch", 8)
    names = [x.binary_name("ptr_ring_test-batch") for x in lays]
    assert len(set(names)) == 8
    for x, n in zip(lays, names):
        assert n == f"ptr_ring_test-batch@p{x.pad}-a{x.align}-l1" and L.base_name(n) == "ptr_ring_test-batch"
        # loop heads unaligned in every layout alike: no padding NOPs that would run in some only
        assert x.flags() == [f"-DRINGLAB_LAYOUT_PAD={x.pad}", f"-falign-functions={x.align}",
                             "-falign-loops=1", "-falign-jumps=1"]
    with pytest.raises(ValueError):
        L.arm_layouts(5, "batch", 0)


def test_user_pinned_alignments_stand():
    for cflags, align, loops in (("-falign-functions=64", False, True),
                                 ("-falign-loops=32", True, False), ("-O2 -falign-jumps=64", True, False),
                                 ("-falign-functions=64 -falign-loops=64 -falign-jumps=64", False, False)):
        for lay in L.arm_layouts(5, "batch", 4, cflags):
            assert bool(lay.align) is align and bool(lay.loops) is loops and lay.pad == L.layout_spec(5, "batch", lay.index).pad
            assert not lay.plain


@pytest.mark.parametrize("raw", ["0", "257", "two"])
def test_layouts_parameter_bounds(raw):
    with pytest.raises(ParamError, match="parameter 'layouts'.*allowed"):
        PtrRing.resolve({"layouts": raw})


def test_profile_defaults():
    assert [PtrRing.resolve({"profile": p})["layouts"] for p in ("smoke", "quick", "full")] == [2, 4, 8]
    assert PtrRing.resolve({"profile": "full", "layouts": 1})["layouts"] == 1


# -- builds and their records ----------------------------------------------------------------
def _layouts(seed=3, k=3):
    return {"ptr_ring_test-batch": L.arm_layouts(seed, "batch", k)}


def test_build_plan_names_and_flags(tmp_path):
    lays = _layouts()
    jobs, _, _ = driver.plan_jobs(None, "-O3 -DX=1", None, tmp_path, ["ptr_ring_test-batch", "c2c_latency"], lays)
    by = {j.name: j for j in jobs}
    assert "c2c_latency" in by and "ptr_ring_test-batch" not in by
    for lay in lays["ptr_ring_test-batch"]:
        job = by[lay.binary_name("ptr_ring_test-batch")]
        flags = job.argv_flags()
        # the user's validated cflags, then the layout's
        assert flags[-len(lay.flags()):] == lay.flags() and flags.index("-O3") < flags.index(lay.flags()[0])
        assert job.layout == lay
    # layout names in ``only`` select their base target
    jobs2, _, _ = driver.plan_jobs(None, "", None, tmp_path, [lays["ptr_ring_test-batch"][1].binary_name(
        "ptr_ring_test-batch")], lays)
    assert len(jobs2) == 3


def _declare(out: Path, lays):
    out.mkdir(parents=True)
    for lay in lays["ptr_ring_test-batch"]:
        p = out / lay.binary_name("ptr_ring_test-batch")
        p.write_text(f"#!/bin/sh\n# {lay}\n")
        p.chmod(0o755)
    binaries.declare_built(["ptr_ring_test-batch"], out_dir=out, layouts=lays)


def test_records_hold_the_layout_and_no_build_checks_it(tmp_path):
    lays, out = _layouts(), tmp_path / "bin"
    _declare(out, lays)
    info = binaries.check_binaries(only=["ptr_ring_test-batch"], out_dir=out, layouts=lays)
    srcs = set()
    for lay in lays["ptr_ring_test-batch"]:
        name = lay.binary_name("ptr_ring_test-batch")
        rec = json.loads(source_record_path(out / name).read_text())
        assert rec["layout"] == {"index": lay.index, "pad": lay.pad, "align": lay.align, "loops": lay.loops,
                                 "seed": lay.seed, "flags": lay.flags()}
        assert not any("RINGLAB_LAYOUT_PAD" in f for f in rec["flags"])   # moves code, changes none
        assert info.binaries[name].layout == rec["layout"]
        srcs.add(rec["source_sha256"])
    assert len(srcs) == 1      # one arm's layouts: one source set
    # a record that says another pad: refused, naming both
    name = lays["ptr_ring_test-batch"][0].binary_name("ptr_ring_test-batch")
    rec = json.loads(source_record_path(out / name).read_text())
    rec["layout"]["pad"] += 1
    source_record_path(out / name).write_text(json.dumps(rec))
    with pytest.raises(binaries.StaleBinaryError, match=f"pad {rec['layout']['pad']}"):
        binaries.check_binaries(only=["ptr_ring_test-batch"], out_dir=out, layouts=lays)


# -- the plan ----------------------------------------------------------------------------------
def _specs(rounds=12, arms=("a", "b"), sizes=(1, 2)):
    return [TrialSpec({"variant": v, "size": s}, t, t < 1) for v in arms for s in sizes for t in range(rounds)]


def test_plan_blocks_cycle_over_layout_pairs():
    K, rounds = 4, 12
    plan = P.order_plan(_specs(rounds), 9, K)
    assert [(s.config, s.trial, s.extra) for s in plan] == \
           [(s.config, s.trial, s.extra) for s in P.order_plan(_specs(rounds), 9, K)]
    by_round = {}
    for s in plan:
        by_round.setdefault(s.trial, []).append(s)
    for r, trials in by_round.items():
        assert len({s.extra["layout"] for s in trials}) == 1                 # one pair a round
        assert Counter((s.config["variant"], s.config["size"]) for s in trials) == \
            Counter({(v, z): 1 for v in "ab" for z in (1, 2)})               # each arm once
    for b in range(rounds // K):                                             # every pair once a block
        assert sorted(by_round[r][0].extra["layout"] for r in range(b * K, b * K + K)) == list(range(K))
    seq = [by_round[r][0].extra["layout"] for r in range(rounds)]
    assert seq != sorted(seq) and seq != [P.round_layout(10, r, K) for r in range(rounds)]


def test_one_layout_is_todays_plan():
    old = P.order_plan(_specs(), 9)
    new = P.order_plan(_specs(), 9, 1)
    assert [(s.config, s.trial) for s in old] == [(s.config, s.trial) for s in new]
    assert {s.extra["layout"] for s in new} == {0}
    v = PtrRing.resolve({"layouts": 1, "variants": "batch,reorder"})
    assert PtrRing().needed_binaries(v) == ["ptr_ring_test-batch", "ptr_ring_test-reorder"]


def test_icount_trials_count_two_layouts():
    class Ctx:
        values = PtrRing.resolve({"profile": "smoke", "cpus": "none", "icount": "true", "variants": "batch"})

        def warn(self, m):
            raise AssertionError(m)
    exp = PtrRing()
    plan = P.full_plan(exp, Ctx.values, exp.plan(Ctx.values, Ctx()), Ctx())
    ic = [s for s in plan if s.kind == "icount"]
    assert sorted(s.extra["layout"] for s in ic) == [0, 1]


# -- per-trial data layout ---------------------------------------------------------------------
def test_per_trial_offsets_are_seeded():
    offs = [L.ring_offset(4, o) for o in range(500)]
    assert offs == [L.ring_offset(4, o) for o in range(500)]
    assert all(o % 64 == 0 and 0 <= o <= 4032 for o in offs) and len(set(offs)) > 40
    pads = [L.env_pad(4, o) for o in range(500)]
    assert all(0 <= p < 4096 for p in pads) and len(set(pads)) > 400
    assert offs != [L.ring_offset(5, o) for o in range(500)]
    s = process.trial_layout(TrialSpec({"variant": "a"}, 0, False), 17, 4)
    assert s.extra == {"ring_offset": L.ring_offset(4, 17), "env_pad": L.env_pad(4, 17)}
    assert len(process.trial_env(37)[process.ENV_PAD_VAR]) == 37


def test_run_records_layout_columns(fakebin, tmp_path):
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "batch,reorder", "modes": "0", "trials": 3},
                                tmp_path / "r", build=False, progress=False, log=lambda m: None)
    df = rundir.read_raw(res.raw_csv, strict=False).sort_values("order")
    env = json.loads(res.env_json.read_text())
    assert env["parameters"]["layouts"] == 2 and env["plan"]["layouts"] == 2 and env["schema_version"] == 4
    assert df["ring_offset"].tolist() == [L.ring_offset(1, o) for o in df["order"]]   # as the binary says
    assert df["env_pad"].tolist() == [L.env_pad(1, o) for o in df["order"]]
    assert df["layout"].tolist() == [P.round_layout(1, r, 2) for r in df["round"]]
    # each arm ran its two layouts, as two copies in one binary (layout copies)
    assert df.groupby("variant")["binary_sha256"].nunique().eq(1).all()
    assert sorted(env["binaries_used"]) == sorted(g.binary_name(f"ptr_ring_test-{v}") for v in ("batch", "reorder")
                                                  for g in L.copy_groups(L.arm_layouts(1, v, 2)))
    shapes = env["measured_commands"]["batch"][0]["shape"]
    assert shapes[shapes.index("--ring-offset") + 1] == "<ring-offset>"
    # provenance: one binary per layout pair by design, not a rebuild during the run
    from ringlab.report import provenance
    c = provenance.check(res.out_dir)
    assert not [x for x in c["problems"] if "dirty" not in x]
    assert set(c["variants"]["batch"]["programs"]) == {"0", "1"}


# -- real builds: the layout moves code, not one instruction -------------------------------------
@pytest.fixture(scope="module")
def two_layouts(tmp_path_factory):
    if shutil.which(driver.compiler()) is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) on PATH")
    a, b = L.Layout(0, 40, 1, 1), L.Layout(1, 2903, 64, 2)
    out = tmp_path_factory.mktemp("bin")
    info = driver.build_all(only=["ptr_ring_test-batch"], out_dir=out, jobs=2,
                            layouts={"ptr_ring_test-batch": [a, b]})
    return [Path(info.binaries[x.binary_name("ptr_ring_test-batch")].path) for x in (a, b)]


def _address(binary: Path, symbol: str) -> int:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not on PATH")
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[0], 16) for line in out.splitlines() if line.split()[-1] == symbol)


def test_layouts_move_the_measured_code(two_layouts):
    a, b = (_address(p, "rl_measured_simple") for p in two_layouts)
    assert a != b


def test_layouts_count_the_same_instructions(two_layouts, tmp_path):
    from ringlab.tools import icount
    av = icount.availability()
    if not av.ok:
        pytest.skip(f"callgrind: {av.reason}")
    counts = []
    for i, exe in enumerate(two_layouts):
        cg = tmp_path / f"cg{i}.out"
        argv = [str(exe), "-m", "0", "-s", "64", "-N", "20000", "--counters", "none", "--json",
                "--ring-offset", str(64 * i)]
        subprocess.run(icount.callgrind_argv(argv, cg), capture_output=True, check=True, timeout=300)
        counts.append(icount.parse_callgrind_out(cg.read_text()))
    assert counts[0] > 0 and counts[0] == counts[1]


# -- layout copies: several layouts in one binary ---------------------------------------------------
def test_copy_groups_are_bounded_and_named_by_their_layouts():
    lays = L.arm_layouts(5, "batch", 40)
    groups = L.copy_groups(lays, 16)
    assert [len(g.layouts) for g in groups] == [16, 16, 8]
    assert [len(g.layouts) for g in L.copy_groups(lays)] == [32, 8] and L.COPIES_PER_BINARY == 32
    # more layouts of the same run keep the full blocks: only the last, partial one changes
    more = L.copy_groups(L.arm_layouts(5, "batch", 56), 16)
    assert [g.suffix() for g in more[:2]] == [g.suffix() for g in groups[:2]]
    assert more[2].suffix() != groups[2].suffix()
    assert [lay for g in groups for lay in g.layouts] == lays
    assert all(len(g.layouts) <= L.COPIES_PER_BINARY for g in groups)
    assert [g.position(k) for g in groups for k in (g.layouts[0].index, g.layouts[-1].index)] == \
        [0, 15, 0, 15, 0, 7]
    assert L.copy_groups(lays[:3], 16)[0].binary_name("ptr_ring_test-batch").startswith("ptr_ring_test-batch@c0-2-")
    # another seed: other layouts, another name; the name has no layout separator but the first
    other = L.copy_groups(L.arm_layouts(6, "batch", 40), 16)
    assert {g.suffix() for g in groups}.isdisjoint(g.suffix() for g in other)
    assert L.base_name(groups[1].binary_name("ptr_ring_test-batch")) == "ptr_ring_test-batch"
    rec = groups[0].record()
    assert [c["copy"] for c in rec["copies"]] == list(range(16)) and rec["copies"][3]["pad"] == lays[3].pad
    with pytest.raises(ValueError):
        groups[0].position(20)


def test_copy_records_are_checked(tmp_path):
    lays = L.arm_layouts(3, "batch", 3)
    group = L.copy_groups(lays)[0]
    out = tmp_path / "bin"
    out.mkdir()
    name = group.binary_name("ptr_ring_test-batch")
    (out / name).write_text("#!/bin/sh\n")
    (out / name).chmod(0o755)
    want = {"ptr_ring_test-batch": [group]}
    binaries.declare_built(["ptr_ring_test-batch"], out_dir=out, layouts=want)
    info = binaries.check_binaries(only=[name], out_dir=out, layouts=want)
    assert info.binaries[name].layout == group.record()
    rec = json.loads(source_record_path(out / name).read_text())
    rec["layout"]["copies"][2]["align"] = 99
    source_record_path(out / name).write_text(json.dumps(rec))
    with pytest.raises(binaries.StaleBinaryError, match="3 layout copies"):
        binaries.check_binaries(only=[name], out_dir=out, layouts=want)


@pytest.fixture(scope="module")
def copies_build(tmp_path_factory):
    if shutil.which(driver.compiler()) is None or shutil.which("objcopy") is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) or objcopy on PATH")
    lays = [L.Layout(0, 40, 1, 1, 1), L.Layout(1, 2903, 64, 2, 1), L.Layout(2, 1000, 16, 3, 1),
            L.Layout(3, 7, 64, 4, 1)]
    group = L.LayoutCopies(tuple(lays))
    out = tmp_path_factory.mktemp("copies")
    info = driver.build_all(only=["ptr_ring_test-batch"], out_dir=out, jobs=2,
                            layouts={"ptr_ring_test-batch": [group, lays[1]]})
    return lays, Path(info.binaries[group.binary_name("ptr_ring_test-batch")].path), \
        Path(info.binaries[lays[1].binary_name("ptr_ring_test-batch")].path), info


def _addresses(binary: Path, symbol: str) -> list[int]:
    out = subprocess.run(["nm", "-n", str(binary)], capture_output=True, text=True, check=True).stdout
    return [int(line.split()[0], 16) for line in out.splitlines() if line.split()[-1] == symbol]


def test_copies_sit_at_their_own_alignment_and_offset(copies_build):
    lays, exe, _, info = copies_build
    for sym in ("rl_measured_simple", "rl_measured_producer", "rl_measured_consumer"):
        addr = _addresses(exe, sym)
        assert len(addr) == len(lays) and len(set(addr)) == len(lays)
        assert all(a % lay.align == 0 for a, lay in zip(addr, lays))
        assert len({a % 4096 for a in addr}) == len(lays)
    # copies of one alignment are one compile (0 and 1 differ, 1 and 3 share 64)
    rec = info.binaries[exe.name].layout
    assert [c["align"] for c in rec["copies"]] == [1, 64, 16, 64]
    # each copy runs; one past the last is a usage error naming the allowed values
    for j in range(len(lays)):
        proc = subprocess.run([str(exe), "--copy", str(j), "-N", "1000", "--json"], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0 and json.loads(proc.stdout)["variant"] == "batch"
    proc = subprocess.run([str(exe), "--copy", "4"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "allowed: 0..3" in proc.stderr
    # one source set: the plain, the separate and the copies build of one arm
    assert info.binaries[exe.name].source_sha256 == \
        info.binaries[lays[1].binary_name("ptr_ring_test-batch")].source_sha256


def test_a_copy_counts_the_instructions_of_its_separate_build(copies_build, tmp_path):
    from ringlab.tools import icount
    av = icount.availability()
    if not av.ok:
        pytest.skip(f"callgrind: {av.reason}")
    lays, exe, separate, _ = copies_build
    counts = []
    for i, argv0 in enumerate([[str(exe), "--copy", "1"], [str(separate)], [str(exe), "--copy", "3"]]):
        cg = tmp_path / f"cg{i}.out"
        argv = [*argv0, "-m", "0", "-s", "64", "-N", "20000", "--counters", "none", "--json"]
        subprocess.run(icount.callgrind_argv(argv, cg), capture_output=True, check=True, timeout=300)
        counts.append(icount.parse_callgrind_out(cg.read_text()))
    assert counts[0] > 0 and counts[0] == counts[1] == counts[2]


def test_cflags_that_pin_function_alignment_keep_it_in_every_layout():
    from ringlab.build.layouts import arm_layouts, pins_function_alignment
    pinned = arm_layouts(7, "batch", 4, "-O2 -falign-functions=64 -falign-loops=64")
    assert pins_function_alignment("-falign-functions=64") and not pins_function_alignment("-O2")
    assert all(lay.align == 0 for lay in pinned)
    assert all(not any(f.startswith("-falign-functions") for f in lay.flags()) for lay in pinned)
    assert [lay.pad for lay in pinned] == [lay.pad for lay in arm_layouts(7, "batch", 4)]


def test_build_seconds_count_each_copy_as_a_build():
    from ringlab.studies.calibration import build_seconds
    group = L.copy_groups(L.arm_layouts(3, "batch", 4))[0]
    name = group.binary_name("ptr_ring_test-batch")
    env = {"started_utc": "2026-01-01T00:00:10+00:00", "ended_utc": "2026-01-01T00:00:20+00:00",
           "binaries_used": {name: {}, "ptr_ring_test-reorder": {}},
           "build": {"binaries": {name: {"layout": group.record()}, "ptr_ring_test-reorder": {"layout": None}}}}
    assert build_seconds(20.0, env) == pytest.approx(10.0 / 5)


def _copy_addresses(exe) -> dict[str, list[int]]:
    out = subprocess.run(["nm", "--defined-only", str(exe)], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[int]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].startswith("rl_measured_"):
            found.setdefault(parts[2], []).append(int(parts[0], 16))
    return {k: sorted(v) for k, v in found.items()}


@pytest.mark.skipif(shutil.which("nm") is None or shutil.which("objcopy") is None, reason="needs binutils")
def test_a_layout_keeps_its_place_in_the_page_whatever_the_number_of_copies(tmp_path):
    """Layout k in a binary of 3 copies and in one of 6 (a run that grew by a stage): each measured
    function of copy k sits at the same offset within its page."""
    addr = {}
    for n in (3, 6):
        lays = [L.layout_spec(77, "batch", k) for k in range(n)]
        info = driver.build_all(out_dir=tmp_path / f"o{n}", only=["ptr_ring_test-batch"],
                                layouts={"ptr_ring_test-batch": L.copy_groups(lays)})
        (name,) = [b for b in info.binaries if "@c" in b]
        addr[n] = _copy_addresses(info.binaries[name].path)
    for fn, small in addr[3].items():
        assert len(small) == 3 and len(addr[6][fn]) == 6
        assert [a % 4096 for a in small] == [a % 4096 for a in addr[6][fn][:3]], fn


def test_binaries_that_share_objects_in_one_build_are_the_ones_built_alone(tmp_path):
    if shutil.which(driver.compiler()) is None or shutil.which("objcopy") is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) or objcopy on PATH")
    lays = L.arm_layouts(11, "batch", 6)
    a, b = L.copy_groups(lays, 3)
    # one worker: the second binary takes the first one's shared and measured objects
    both = driver.build_all(only=["ptr_ring_test-batch"], out_dir=tmp_path / "both", jobs=1,
                            layouts={"ptr_ring_test-batch": [a, b]})
    alone = driver.build_all(only=["ptr_ring_test-batch"], out_dir=tmp_path / "alone", jobs=1,
                             layouts={"ptr_ring_test-batch": [b]})
    name = b.binary_name("ptr_ring_test-batch")
    assert both.binaries[name].sha256 == alone.binaries[name].sha256
    assert both.binaries[name].inputs == alone.binaries[name].inputs
    assert both.binaries[name].source_sha256 == alone.binaries[name].source_sha256


def _compiles(monkeypatch) -> list:
    """Every compile (``cc ... -c``) the driver runs from here on."""
    seen, real = [], driver.subprocess.run

    def spy(argv, *a, **kw):
        if "-c" in argv and any(str(x).endswith(".c") for x in argv):
            seen.append(argv)
        return real(argv, *a, **kw)
    monkeypatch.setattr(driver.subprocess, "run", spy)
    return seen


def test_a_later_build_links_the_kept_objects_and_gives_the_same_binary(tmp_path, monkeypatch):
    if shutil.which(driver.compiler()) is None or shutil.which("objcopy") is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) or objcopy on PATH")
    lays = L.arm_layouts(11, "batch", 6)
    a, b = L.copy_groups(lays, 3)
    driver.build_all(only=["ptr_ring_test-batch"], out_dir=tmp_path / "kept", layouts={"ptr_ring_test-batch": [a]})
    seen = _compiles(monkeypatch)
    later = driver.build_all(only=["ptr_ring_test-batch"], out_dir=tmp_path / "kept",
                             layouts={"ptr_ring_test-batch": [a, b]})
    needed = {lay.align for lay in b.layouts} - {lay.align for lay in a.layouts}
    # only the alignments the first build never compiled are compiled now
    assert len(seen) == len(needed), [x[-6:] for x in seen]
    monkeypatch.undo()
    fresh = driver.build_all(only=["ptr_ring_test-batch"], out_dir=tmp_path / "fresh",
                             layouts={"ptr_ring_test-batch": [b]})
    name = b.binary_name("ptr_ring_test-batch")
    assert later.binaries[name].sha256 == fresh.binaries[name].sha256
    assert later.binaries[name].inputs == fresh.binaries[name].inputs


def test_a_kept_object_whose_header_changed_or_whose_bytes_are_torn_is_compiled_anew(tmp_path, monkeypatch):
    if shutil.which(driver.compiler()) is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) on PATH")
    header = tmp_path / "ptr_ring.h"
    shutil.copyfile(Path(__file__).resolve().parent / "data/kernel_headers/team_mainline/include/linux/ptr_ring.h",
                    header)
    out = tmp_path / "bin"
    first = driver.build_all(kernel_headers={"mine": str(header)}, only=["ptr_ring_test-mine"], out_dir=out)
    seen = _compiles(monkeypatch)
    (out / ".stamps" / "ptr_ring_test-mine.json").unlink()     # the binary must be built again
    driver.build_all(kernel_headers={"mine": str(header)}, only=["ptr_ring_test-mine"], out_dir=out)
    assert seen == []                                           # every object was kept
    header.write_text(header.read_text() + "\n/* edited */\n")
    (out / ".stamps" / "ptr_ring_test-mine.json").unlink()
    again = driver.build_all(kernel_headers={"mine": str(header)}, only=["ptr_ring_test-mine"], out_dir=out)
    assert seen                                                 # the header's objects compiled anew
    recorded = again.binaries["ptr_ring_test-mine"].inputs
    assert recorded[str(header.resolve())] != first.binaries["ptr_ring_test-mine"].inputs[str(header.resolve())]
    n = len(seen)
    for o in (out / OBJECT_CACHE).glob("*.o"):
        o.write_bytes(b"torn")
    (out / ".stamps" / "ptr_ring_test-mine.json").unlink()
    driver.build_all(kernel_headers={"mine": str(header)}, only=["ptr_ring_test-mine"], out_dir=out)
    assert len(seen) > n                                        # nothing torn was linked
