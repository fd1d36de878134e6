"""Source sets: each binary records the sha256 of what it was built from (header content,
compat shim, harness, flags); a stale binary is refused; a failed build leaves none."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ringlab.build import binaries as BIN
from ringlab.build import driver as B, sourceset
from ringlab.digest import sha256_file
from ringlab.errors import RunnerError

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
MAIN = DATA / "team_mainline"
V48 = DATA / "team_v4.8"
BROKEN = DATA / "broken" / "ptr_ring.h"
IN_TREE = "include/linux/ptr_ring.h"

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


@pytest.fixture
def out(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    return tmp_path / "build" / "bin"


def _copy_header(src_tree: Path, dest: Path) -> Path:
    (dest / "include/linux").mkdir(parents=True)
    shutil.copyfile(src_tree / IN_TREE, dest / IN_TREE)
    return dest


def test_record_next_to_binary(out):
    info = B.build_all(kernel_headers={"k": str(MAIN)}, out_dir=out, only=["ptr_ring_test-k"])
    b = info.binaries["ptr_ring_test-k"]
    rec = json.loads((out / "ptr_ring_test-k.source.json").read_text())
    assert rec["source_sha256"] == b.source_sha256 == info.source_sha256["ptr_ring_test-k"]
    assert rec["binary_sha256"] == b.sha256
    assert rec["files"][sourceset.KERNEL_HEADER_LABEL] == sha256_file(MAIN / IN_TREE)
    # harness and shim by content under stable labels, no checkout path in the flags
    assert {"csrc/harness/ptr_ring_main.c", "csrc/compat/kernel_shim.h"} <= set(rec["files"])
    assert not any(str(B.paths.CSRC) in f for f in rec["flags"])
    assert not any(f.startswith("-DRINGLAB_VARIANT") for f in rec["flags"])
    assert rec["header"]["kind"] == "path" and info.header_sources["k"]["kind"] == "path"
    d = info.to_dict()
    assert d["binaries"]["ptr_ring_test-k"]["source_sha256"] == b.source_sha256
    assert BIN.check_binaries(kernel_headers={"k": str(MAIN)}, out_dir=out,
                            only=["ptr_ring_test-k"]).source_sha256 == info.source_sha256


def test_stale_binary_refused_and_failed_build_removes_it(out):
    B.build_all(kernel_headers={"k": str(MAIN)}, out_dir=out, only=["ptr_ring_test-k"])
    old = sha256_file(out / "ptr_ring_test-k")
    # another header under the same NAME, without building: refused, naming both hashes
    with pytest.raises(BIN.StaleBinaryError) as e:
        BIN.check_binaries(kernel_headers={"k": str(V48)}, out_dir=out, only=["ptr_ring_test-k"])
    msg = str(e.value)
    rec = json.loads((out / "ptr_ring_test-k.source.json").read_text())
    assert "variant k" in msg and rec["source_sha256"] in msg and "<kernel header>" in msg
    assert str(V48) in msg and "--no-build" in msg
    # a failed rebuild of that NAME leaves no binary (and no record) behind ...
    with pytest.raises(B.BuildError, match="broken"):
        B.build_all(kernel_headers={"k": str(BROKEN)}, out_dir=out, only=["ptr_ring_test-k"])
    assert not (out / "ptr_ring_test-k").exists()
    assert not (out / "ptr_ring_test-k.source.json").exists()
    # ... so a later run without building cannot measure the old one
    with pytest.raises(B.BuildError, match="does not exist"):
        BIN.check_binaries(kernel_headers={"k": str(BROKEN)}, out_dir=out, only=["ptr_ring_test-k"])
    # rebuilding gives the same binary content back: a rebuild, not the old file
    B.build_all(kernel_headers={"k": str(MAIN)}, out_dir=out, only=["ptr_ring_test-k"])
    assert (out / "ptr_ring_test-k").is_file() and sha256_file(out / "ptr_ring_test-k") == old


def test_header_that_cannot_be_resolved_removes_binary(out, tmp_path):
    B.build_all(kernel_headers={"k": str(MAIN)}, out_dir=out, only=["ptr_ring_test-k"])
    with pytest.raises(B.BuildError, match="does not exist"):
        B.build_all(kernel_headers={"k": str(tmp_path / "gone")}, out_dir=out, only=["ptr_ring_test-k"])
    assert not (out / "ptr_ring_test-k").exists()


def test_replaced_binary_or_changed_harness_refused(out, tmp_path, monkeypatch):
    csrc = tmp_path / "csrc"
    shutil.copytree(B.paths.CSRC, csrc)
    monkeypatch.setattr(B.paths, "CSRC", csrc)
    B.build_all(out_dir=out, only=["ptr_ring_test-batch"])
    BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])
    with pytest.raises(BIN.StaleBinaryError, match="compile flags"):
        BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"], cflags="-O3")
    main_c = csrc / "harness" / "ptr_ring_main.c"
    main_c.write_text(main_c.read_text() + "\n/* changed */\n")
    with pytest.raises(BIN.StaleBinaryError, match="csrc/harness/ptr_ring_main.c"):
        BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])
    B.build_all(out_dir=out, only=["ptr_ring_test-batch"])
    (out / "ptr_ring_test-batch").write_bytes(b"#!/bin/sh\n")
    with pytest.raises(BIN.StaleBinaryError, match="is not the binary"):
        BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])


def test_same_content_at_two_paths_is_one_source_set(out, tmp_path):
    copy = _copy_header(MAIN, tmp_path / "elsewhere $x #y")
    info = B.build_all(kernel_headers={"a": str(MAIN), "b": str(copy), "c": str(V48)}, out_dir=out,
                       only=["ptr_ring_test-a", "ptr_ring_test-b", "ptr_ring_test-c"])
    h = info.source_sha256
    assert h["ptr_ring_test-a"] == h["ptr_ring_test-b"] != h["ptr_ring_test-c"]
    # the built-in rings differ from each other by source set too
    i2 = B.build_all(out_dir=out, only=["ptr_ring_test-batch", "ptr_ring_test-reorder"])
    assert i2.source_sha256["ptr_ring_test-batch"] != i2.source_sha256["ptr_ring_test-reorder"]
    # and a header at another path with the same bytes passes the no-build check
    BIN.check_binaries(kernel_headers={"a": str(copy)}, out_dir=out, only=["ptr_ring_test-a"])


@needs_git
def test_git_and_patched_variants_by_source_hash(out, tmp_path):
    """git:TREE@REV at two revisions differ; BASE+PATCH that recreates a revision equals it."""
    repo = tmp_path / "tree"
    repo.mkdir()

    def git(*a):
        return subprocess.run(["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@x",
                               *a], check=True, capture_output=True, text=True).stdout
    git("init", "-q")
    _copy_header(MAIN, repo)
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    git("tag", "v1")
    text = (MAIN / IN_TREE).read_text().replace("\tsmp_wmb();\n", "\tsmp_wmb();\n\tcpu_relax();\n", 1)
    (repo / IN_TREE).write_text(text)
    git("commit", "-q", "-am", "ptr_ring: relax")
    git("tag", "v2")
    patch = tmp_path / "relax.patch"
    patch.write_text(git("format-patch", "--stdout", "v1..v2"))
    heads = {"g1": f"git:{repo}@v1", "g2": f"git:{repo}@v2", "p": f"git:{repo}@v1+{patch}"}
    info = B.build_all(kernel_headers=heads, out_dir=out, only=[f"ptr_ring_test-{k}" for k in heads])
    h = info.source_sha256
    assert h["ptr_ring_test-g1"] != h["ptr_ring_test-g2"] == h["ptr_ring_test-p"]
    assert info.header_sources["g2"]["commit"] == git("rev-parse", "v2").strip()
    assert info.header_sources["p"]["patch"]["messages"][0]["subject"] == "[PATCH] ptr_ring: relax"
    rec = json.loads((out / "ptr_ring_test-p.source.json").read_text())
    assert rec["header"]["base"]["rev"] == "v1"
    # the -p kernel_headers path: resolved once for validation, provenance kept in the build
    from ringlab.experiments.ptr_ring import parse_kernel_headers
    parsed = parse_kernel_headers(f"g2=git:{repo}@v2,p=git:{repo}@v1+{patch}")
    again = BIN.check_binaries(kernel_headers=parsed, out_dir=out, only=["ptr_ring_test-g2", "ptr_ring_test-p"])
    assert again.header_sources["p"]["kind"] == "patch" and again.header_sources["g2"]["rev"] == "v2"
    assert again.source_sha256["ptr_ring_test-p"] == h["ptr_ring_test-p"]
    with pytest.raises(BIN.StaleBinaryError, match="variant p"):
        BIN.check_binaries(kernel_headers={"p": f"git:{repo}@v1"}, out_dir=out, only=["ptr_ring_test-p"])


def test_declare_built(out, tmp_path):
    out.mkdir(parents=True)
    fake = out / "ptr_ring_test-batch"
    fake.write_text("#!/bin/sh\n")
    with pytest.raises(BIN.StaleBinaryError, match="no source record"):
        BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])
    BIN.declare_built(["ptr_ring_test-batch"], out_dir=out)
    info = BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])
    assert "csrc/rings/ptr_ring_batch.h" in info.binaries["ptr_ring_test-batch"].source_files
    fake.write_text("#!/bin/sh\nexit 1\n")
    with pytest.raises(BIN.StaleBinaryError, match="is not the binary"):
        BIN.check_binaries(out_dir=out, only=["ptr_ring_test-batch"])


def _run(tmp_path, heads: str, build: bool, name: str):
    from ringlab import run as runner
    return runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                              "variants": "k", "modes": "0", "trials": 1, "warmup": 0,
                                              "count": 10000, "kernel_headers": heads},
                                 tmp_path / name, build=build, progress=False, log=lambda m: None)


@pytest.fixture
def run_env(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path


def test_run_after_failed_rebuild_never_measures_old_binary(run_env):
    from ringlab import run as runner
    _run(run_env, f"k={MAIN}", True, "good")
    with pytest.raises(RunnerError, match="build failed"):
        _run(run_env, f"k={BROKEN}", True, "broken")
    with pytest.raises(RunnerError, match="ptr_ring_test-k"):
        _run(run_env, f"k={BROKEN}", False, "nobuild")
    assert not (run_env / "nobuild" / "raw.csv").exists()


def test_run_without_build_refuses_other_header(run_env):
    from ringlab import run as runner
    _run(run_env, f"k={MAIN}", True, "good")
    with pytest.raises((RunnerError, B.BuildError), match="variant k"):
        _run(run_env, f"k={V48}", False, "stale")
