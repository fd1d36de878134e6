"""ringtest experiment: out-of-tree build from a folder / git revision / tarball, pinning, timing, errors.

Most tests use a fake tree of our own (tests/fakes/ringtest_tree.py); the last ones build and
run the real tools/virtio/ringtest from Debian's linux-source-6.1 and skip, with the reason,
when that package is not installed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ringlab import rundir
from ringlab.build import layouts as L
from ringlab.tools import kernel_tests
from ringlab.sources import kernel_tree
from ringlab.experiments import get
from ringlab.experiments.base import ParamError
from ringlab.errors import RunnerError
from ringlab.run import run_experiment
from tests.fakes.ringtest_tree import write_fake_ringtest_tree

DEBIAN_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
needs_cc = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                              reason="needs a C compiler and make")


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    d = tmp_path / "build"
    monkeypatch.setenv("RINGLAB_BUILD", str(d))
    return d


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*"))}


def _run(params, out, **kw):
    return run_experiment("ringtest", params, out, progress=False, build=False, log=lambda m: None, **kw)


# -- parameters ------------------------------------------------------------------------------
def test_registered_and_parameters_validated():
    cls = get("ringtest")
    v = cls.resolve({"tree": "/x", "rings": "ptr_ring,noring", "ring_sizes": "64,256"}, profile="smoke")
    assert v["rings"] == ["ptr_ring", "noring"] and v["ring_sizes"] == [64, 256]
    for bad, name in [({"ring_sizes": "100"}, "ring_sizes"), ({"rings": "ptr ring"}, "rings"),
                      ({"rings": "ptr_ring,ptr_ring"}, "rings"), ({"tree": "git:/x"}, "tree"),
                      ({"tree": "debian:ubuntu"}, "tree"), ({"cpus": "0-1"}, "cpus"),
                      ({"tree": "a=/x,a=/y"}, "tree")]:
        with pytest.raises(ParamError, match=f"parameter '{name}'"):
            cls.resolve(dict({"tree": "/x"}, **bad))


def test_tree_specs_parse():
    a, b = kernel_tree.parse_trees("old=git:/src/linux@v6.1,new=/home/me/linux")
    assert (a.name, a.kind, a.rev, str(a.path)) == ("old", "git", "v6.1", "/src/linux")
    assert (b.name, b.kind) == ("new", "dir")
    (d,) = kernel_tree.parse_trees("debian:linux-source-6.1")
    assert d.kind == "debian" and d.name == "linux-source-6.1" and d.path.name == "linux-source-6.1.tar.xz"
    (t,) = kernel_tree.parse_trees("/tmp/linux-6.6.tar.gz")
    assert t.kind == "tarball" and t.name == "linux-6.6"
    (g,) = kernel_tree.parse_trees("git:/a/b@HEAD~1")
    assert g.name == "HEAD-1"


# -- the fake tree ---------------------------------------------------------------------------
@needs_cc
def test_builds_out_of_tree_and_never_writes_the_tree(tmp_path, build_dir):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    before = _snapshot(tree)
    (spec,) = kernel_tree.parse_trees(f"mine={tree}")
    prep = kernel_tests.prepare(spec)
    assert prep.programs == ["ptr_ring", "noring", "broken"]
    binary = kernel_tests.build(prep, "ptr_ring")
    assert binary.is_file() and build_dir in binary.parents
    # the included header was copied next to the copy, with the tree's layout
    assert (prep.build_root / "include/linux/ptr_ring.h").is_file()
    assert _snapshot(tree) == before, "building changed the user's tree"


@needs_cc
def test_missing_program_and_build_failure_are_reported_by_name(tmp_path, build_dir):
    tree = write_fake_ringtest_tree(tmp_path / "linux", broken=True)
    (spec,) = kernel_tree.parse_trees(f"mine={tree}")
    prep = kernel_tests.prepare(spec)
    with pytest.raises(kernel_tests.RingtestError, match=r"'virtio_ring_0_9' not found in tree 'mine'.*ptr_ring"):
        kernel_tests.build(prep, "virtio_ring_0_9")
    with pytest.raises(kernel_tests.RingtestError, match=r"program 'broken' of tree 'mine' failed to build"):
        kernel_tests.build(prep, "broken")
    # through the runner: refused before anything is written
    out = tmp_path / "run"
    with pytest.raises(RunnerError, match="'broken'"):
        _run({"tree": f"mine={tree}", "rings": "ptr_ring,broken", "profile": "smoke"}, out)
    assert not out.exists()


def test_tree_without_ringtest_is_reported(tmp_path, build_dir):
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunnerError, match="no tools/virtio/ringtest/Makefile"):
        _run({"tree": str(tmp_path / "empty"), "profile": "smoke"}, tmp_path / "run")


@needs_cc
def test_trials_are_pinned_timed_and_written(tmp_path, build_dir, monkeypatch):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs for a pinned guest:host pair")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    log = tmp_path / "argv.txt"
    log.touch()
    log.chmod(0o666)        # under root the ring programs run as the unprivileged user
    monkeypatch.setenv("FAKE_RINGTEST_ARGV", str(log))
    res = _run({"tree": f"mine={tree}", "rings": "ptr_ring,noring", "ring_sizes": "64", "run_cycles": 1000,
                "batch": 4, "param": 2, "cpus": f"{cpus[0]}:{cpus[1]}", "trials": 2, "warmup": 0,
                "profile": "smoke", "layouts": 1}, tmp_path / "run")
    assert res.counts == {"ok": 4}
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert set(df["variant"]) == {"mine"} and set(df["ring"]) == {"ptr_ring", "noring"}
    assert (df["count"] == 1000).all() and (df["ring_size"] == 64).all()
    assert (df["ns_per_op"] == df["elapsed_ns"] / 1000).all() and (df["ns_per_op"] > 0).all()
    assert (df["cpu_req_producer"] == cpus[0]).all() and (df["cpu_req_consumer"] == cpus[1]).all()
    assert df["cycles"].isna().all() and df["counter_errors"].str.contains("no counters").all()
    assert df["cpu_user_s"].notna().all() and df["source_sha256"].str.len().eq(64).all()
    # binary_sha256 is the ring program's, not the wrapper interpreter's
    assert df.groupby("ring")["binary_sha256"].nunique().eq(1).all()
    assert df["binary_sha256"].nunique() == 2
    lines = log.read_text().splitlines()
    assert len(lines) == 4
    for ln in lines:
        assert f"--guest-affinity {cpus[0]}" in ln and f"--host-affinity {cpus[1]}" in ln
        assert "--ring-size 64 --run-cycles 1000 --batch 4 --param 2" in ln


@needs_cc
def test_crash_and_abort_are_recorded(tmp_path, build_dir, monkeypatch):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    monkeypatch.setenv("FAKE_RINGTEST_ABORT", "1")
    res = _run({"tree": str(tree), "cpus": "none", "trials": 1, "warmup": 0, "profile": "smoke"},
               tmp_path / "run")
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert res.counts == {"crash": 1}
    assert df["exit_code"].iloc[0] == 128 + 6 and "signal 6" in df["stderr_tail"].iloc[0]


@needs_cc
def test_ab_between_two_trees_and_two_git_revisions(tmp_path, build_dir):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    a = write_fake_ringtest_tree(tmp_path / "a", generation=1)
    b = write_fake_ringtest_tree(tmp_path / "b", generation=2)
    res = _run({"tree": f"A={a},B={b}", "cpus": "none", "run_cycles": 100, "trials": 3, "warmup": 0,
                "profile": "smoke", "layouts": 1}, tmp_path / "run1")
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert set(df["variant"]) == {"A", "B"}
    sha = df.groupby("variant")["source_sha256"].unique()
    assert len(sha["A"]) == 1 and len(sha["B"]) == 1 and sha["A"][0] != sha["B"][0]
    from ringlab.stats import compare
    verdicts = compare(df, baseline="A")
    assert len(verdicts) == 1 and verdicts["candidate"].iloc[0] == "B"

    # the same two states as two commits of one git checkout
    repo = tmp_path / "repo"
    shutil.copytree(a, repo)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.org", "-c", "user.name=t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    shutil.copy(b / "include/linux/ptr_ring.h", repo / "include/linux/ptr_ring.h")
    subprocess.run(git + ["commit", "-qam", "two"], check=True)
    (repo / "include/linux/ptr_ring.h").write_text("uncommitted edits are not exported\n")
    before = _snapshot(repo)
    res = _run({"tree": f"old=git:{repo}@HEAD~1,new=git:{repo}@HEAD", "cpus": "none", "run_cycles": 100,
                "trials": 2, "warmup": 0, "profile": "smoke", "layouts": 1}, tmp_path / "run2")
    df2 = rundir.read_raw(res.raw_csv, strict=False)
    assert res.counts == {"ok": 4}
    sha2 = df2.groupby("variant")["source_sha256"].first()
    assert sha2["old"] == sha["A"][0] and sha2["new"] == sha["B"][0], "a revision exports exactly its files"
    # the same sources build once, to the same bytes: provenance can tell "same code"
    bins = df.groupby("variant")["binary_sha256"].first()
    assert df2.groupby("variant")["binary_sha256"].first()["old"] == bins["A"] != bins["B"]
    assert _snapshot(repo) == before
    with pytest.raises(RunnerError, match="tree 'x'"):
        _run({"tree": f"x=git:{repo}@no-such-rev", "profile": "smoke"}, tmp_path / "run3")


# -- code layouts: function alignment only -----------------------------------------------------
def test_layouts_parameter_and_aligns():
    cls = get("ringtest")
    assert [cls.resolve({"tree": "/x", "profile": p})["layouts"] for p in ("smoke", "quick", "full")] == [2, 4, 8]
    with pytest.raises(ParamError, match="parameter 'layouts'.*allowed"):
        cls.resolve({"tree": "/x", "layouts": "257"})
    v = cls.resolve({"tree": "/x", "layouts": 8, "seed": 5})
    aligns = cls.layout_aligns(v, "mine")
    assert aligns == [L.layout_spec(5, "mine", k).align for k in range(8)]
    assert set(aligns) <= {1, 2, 4, 8, 16, 32, 64} and len(set(aligns)) > 1
    assert aligns != cls.layout_aligns(v, "theirs")                  # each tree draws its own
    assert cls.layout_aligns(dict(v, layouts=1), "mine") == [0]     # one layout: no flag


def _seed_with_distinct_aligns(k: int) -> int:
    """A seed whose first ``k`` layouts of tree 'mine' have ``k`` different alignments."""
    return next(s for s in range(1, 500) if len({L.layout_spec(s, "mine", i).align for i in range(k)}) == k)


@needs_cc
def test_prepare_per_alignment_keeps_the_source_hash(tmp_path, build_dir):
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    (spec,) = kernel_tree.parse_trees(f"mine={tree}")
    plain, a64 = kernel_tests.prepare(spec, "-O2"), kernel_tests.prepare(spec, "-O2", align=64)
    assert plain.source_sha256 == a64.source_sha256 and plain.build_root != a64.build_root
    assert a64.build_root.name == plain.build_root.name + "-a64"
    binary = kernel_tests.build(a64, "ptr_ring", cflags="-O2")
    log = (a64.ringtest_dir / ".make-ptr_ring.log").read_text()
    assert "--eval=CFLAGS += -O2 -falign-functions=64" in log.splitlines()[0]
    kernel_tests.build(plain, "ptr_ring", cflags="-O2")
    assert "-falign-functions" not in (plain.ringtest_dir / ".make-ptr_ring.log").read_text()
    if shutil.which("nm"):
        nm = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
        assert all(int(ln.split()[0], 16) % 64 == 0 for ln in nm.splitlines()
                   if ln.split()[-1] in ("main", "fake_main") and ln.split()[1] in "tT")
    for bad in (3, -1, 8192):
        with pytest.raises(ValueError, match="align"):
            kernel_tests.prepare(spec, align=bad)


@needs_cc
def test_layouts_build_each_alignment_and_run_the_rounds_pair(tmp_path, build_dir):
    import json
    from ringlab.run import plan as P
    tree = write_fake_ringtest_tree(tmp_path / "linux")
    seed = _seed_with_distinct_aligns(3)
    aligns = [L.layout_spec(seed, "mine", k).align for k in range(3)]
    res = _run({"tree": f"mine={tree}", "rings": "ptr_ring,noring", "cpus": "none", "run_cycles": 100,
                "trials": 6, "warmup": 0, "layouts": 3, "seed": seed, "profile": "smoke"}, tmp_path / "run")
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert res.counts == {"ok": 12}
    assert df["layout"].tolist() == [P.round_layout(seed, r, 3) for r in df["round"]]
    assert sorted(df["layout"].unique()) == [0, 1, 2]
    # one binary per (ring, layout); the layouts of one ring differ; the source hash does not
    per = df.groupby(["ring", "layout"])["binary_sha256"].nunique()
    assert per.eq(1).all() and df.groupby("ring")["binary_sha256"].nunique().eq(3).all()
    assert df["source_sha256"].nunique() == 1
    env = json.loads(res.env_json.read_text())
    bins = env["build"]["binaries"]
    for ring in ("ptr_ring", "noring"):
        for a in aligns:
            b = bins[f"ringtest-mine-{ring}@a{a}"]
            assert b["layout"]["flags"] == [f"-falign-functions={a}"] and f"-a{a}/" in b["path"]
    used = {(r.ring, r.layout): r.binary_sha256 for r in df.itertuples()}
    for (ring, k), sha in used.items():
        assert bins[f"ringtest-mine-{ring}@a{aligns[k]}"]["sha256"] == sha


@needs_cc
def test_tarball_tree_is_exported_into_build(tmp_path, build_dir):
    src = write_fake_ringtest_tree(tmp_path / "linux-9.9")
    tb = tmp_path / "linux-9.9.tar.xz"
    with tarfile.open(tb, "w:xz") as tf:
        tf.add(src, arcname="linux-9.9")
    res = _run({"tree": str(tb), "cpus": "none", "run_cycles": 100, "trials": 1, "warmup": 0,
                "profile": "smoke"}, tmp_path / "run")
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert res.counts == {"ok": 1} and df["variant"].iloc[0] == "linux-9.9"
    assert list((build_dir / "kernel-src").glob("linux-9.9-*/tools/virtio/ringtest/Makefile"))


def test_missing_debian_package_skips_with_the_reason(tmp_path, build_dir, monkeypatch):
    monkeypatch.setenv("RINGLAB_DEBIAN_SRC_DIR", str(tmp_path / "nothing"))
    res = _run({"tree": "debian:linux-source-6.1", "profile": "smoke"}, tmp_path / "run")
    import json
    env = json.loads(res.env_json.read_text())
    assert env["status"] == "skipped"
    assert "apt-get install linux-source-6.1" in env["skipped_reason"]


def test_timing_wrapper_reports_wall_and_cpu_time_and_passes_exit_codes():
    out = subprocess.run(kernel_tests.time_argv(10, [sys.executable, "-c", "sum(range(200000))"]),
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    import json
    doc = json.loads(out.stdout)
    assert doc["items"] == 10 and doc["wall_ns"] > 0 and doc["cpu_user_ns"] + doc["cpu_sys_ns"] > 0
    bad = subprocess.run(kernel_tests.time_argv(10, [sys.executable, "-c", "import sys; sys.exit(3)"]),
                         capture_output=True, text=True)
    assert bad.returncode == 3 and bad.stdout == ""
    killed = subprocess.run(kernel_tests.time_argv(10, [sys.executable, "-c",
                                                        "import os, signal; os.kill(os.getpid(), 9)"]),
                            capture_output=True, text=True)
    assert killed.returncode == 128 + 9 and "signal 9" in killed.stderr


# -- the real ringtest (Debian's linux-source-6.1) ------------------------------------------------
needs_debian = pytest.mark.skipif(not DEBIAN_TARBALL.is_file(),
                                  reason=f"{DEBIAN_TARBALL} missing: apt-get install linux-source-6.1 "
                                         "(.ci/run installs it)")


@needs_cc
@needs_debian
@pytest.mark.parametrize("ring", kernel_tests.KNOWN_PROGRAMS)
def test_real_ringtest_programs_build(ring):
    # default build/ (not a tmp one): the 140 MB tarball is exported once and reused
    (spec,) = kernel_tree.parse_trees("debian:linux-source-6.1")
    prep = kernel_tests.prepare(spec)
    assert ring in prep.programs
    assert os.access(kernel_tests.build(prep, ring), os.X_OK)


@needs_cc
@needs_debian
def test_real_ptr_ring_trials_run(tmp_path):
    res = run_experiment("ringtest", {"tree": "debian:linux-source-6.1", "rings": "ptr_ring",
                                      "run_cycles": 100_000, "trials": 2, "warmup": 0, "profile": "smoke"},
                         tmp_path / "run", progress=False, build=False, log=lambda m: None)
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert res.counts == {"ok": len(df)} and len(df) >= 2
    assert (df["ns_per_op"] > 0).all() and (df["count"] == 100_000).all()
    assert (df["variant"] == "linux-source-6.1").all()
    # smoke: two layouts; the alignment reaches the LTO build (different aligns, different bytes)
    aligns = [L.layout_spec(1, "linux-source-6.1", k).align for k in range(2)]
    per = df.groupby("layout")["binary_sha256"].unique()
    assert set(per.index) == {0, 1} and per.map(len).eq(1).all()
    assert (per[0][0] != per[1][0]) == (aligns[0] != aligns[1])


# -- ringtest beside ringlab's SPSC (notebook 21) ---------------------------------------------------
def _fake_runs(tmp_path, rt_values=(23.0, 24.0, 25.0, 26.0, 27.0), sp_values=(4.0, 5.0, 6.0, 7.0, 8.0)):
    rt = tmp_path / "rt"
    sp = tmp_path / "sp"
    rt.mkdir(parents=True)
    sp.mkdir(parents=True)
    base = {"status": "ok", "cpu_req_producer": 0, "cpu_req_consumer": 1, "pair_class": "same-llc"}
    rows_rt = [dict(base, warmup=False, ring="ptr_ring", ring_size=256, ns_per_op=v) for v in rt_values]
    rows_rt += [dict(base, warmup=True, ring="ptr_ring", ring_size=256, ns_per_op=500.0)]
    rows_sp = [dict(base, warmup=False, mode=1, size=256, ns_per_op=v) for v in sp_values]
    rows_sp += [dict(base, warmup=False, mode=0, size=256, ns_per_op=1.0)]
    pd.DataFrame(rows_rt).to_csv(rt / "raw.csv", index=False)
    pd.DataFrame(rows_sp).to_csv(sp / "raw.csv", index=False)
    return rt, sp


def test_side_by_side_ratio_of_medians(tmp_path):
    from ringlab.studies import harness_compare as hc
    rt, sp = _fake_runs(tmp_path)
    t = hc.side_by_side(rt, sp)
    assert len(t) == 1
    r = t.iloc[0]
    assert (r["ring_size"], r["cpus"], r["n_ringtest"], r["n_spsc"]) == (256, "0:1", 5, 5)
    assert r["ringtest_ns_per_item"] == 25.0 and r["spsc_ns_per_op"] == 6.0   # warm-up and mode 0 left out
    assert r["ratio_of_medians"] == pytest.approx(25 / 6)
    # the CI belongs to the Hodges-Lehmann ratio: median of the pairwise ln(ringtest/spsc)
    hl = np.exp(np.median([np.log(a / b) for a in (23, 24, 25, 26, 27) for b in (4, 5, 6, 7, 8)]))
    assert r["ratio"] == pytest.approx(hl) and r["ci_level"] == pytest.approx(0.95)
    assert 1 < r["ratio_ci_low"] <= r["ratio"] <= r["ratio_ci_high"]
    # 3 trials per harness cannot give a 95% rank CI: it stays empty and the note says why
    few = hc.side_by_side(*_fake_runs(tmp_path / "few", (24.0, 25.0, 26.0), (5.0, 6.0, 7.0))).iloc[0]
    assert few["ratio_of_medians"] == pytest.approx(25 / 6) and np.isnan(few["ratio_ci_low"])
    assert "too few" in few["note"]
    a = hc.figure(rt, sp, tmp_path / "f1")
    b = hc.figure(rt, sp, tmp_path / "f2")
    assert [p.name for p in a] == ["harnesses.png", "harnesses.svg"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b], "figures are byte-identical for equal data"

