"""ringlab.provenance and `ringlab provenance`: were A and B really different, and re-measured?"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ringlab import cli, provenance, runner

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))
import fake_ptr_ring_test as fake  # noqa: E402


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    build = tmp_path / "build"
    fake.install(str(build / "bin"), sys.executable)
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "batch,reorder", "modes": "0", "trials": 1,
                                             "warmup": 0}, tmp_path / "run", build=False, progress=False,
                                log=lambda m: None)
    return res.out_dir


def _set_build(run_dir: Path, same_sources: bool):
    """Give env.json a ringlab.build-style record with per-binary inputs."""
    env = json.loads((run_dir / "env.json").read_text())
    bins = {}
    for name, b in env["binaries_used"].items():
        variant = name.split("-", 1)[1]
        hdr = "csrc/rings/ptr_ring_batch.h" if same_sources else f"csrc/rings/ptr_ring_{variant}.h"
        bins[name] = {"name": name, "path": b["path"], "sha256": b["sha256"],
                      "inputs": {"csrc/harness/ptr_ring_main.c": "aa" * 32, hdr: "bb" * 32}}
    env["build"] = {"compiler": "/usr/bin/gcc", "cflags": ["-O2"], "binaries": bins}
    (run_dir / "env.json").write_text(json.dumps(env))


def test_check_different_binaries_and_sources(run_dir):
    _set_build(run_dir, same_sources=False)
    c = provenance.check(run_dir)
    assert set(c["variants"]) == {"batch", "reorder"}
    v = c["variants"]["batch"]
    assert len(v["sha256"]) == 1 and v["first"] <= v["last"] and v["ok_rows"] == 1
    (p,) = c["pairs"]
    assert p["different_binaries"] is True and p["different_sources"] is True
    assert set(p["differing_sources"]) == {"csrc/rings/ptr_ring_batch.h", "csrc/rings/ptr_ring_reorder.h"}
    assert p["verdict"] == "different binaries from different sources"
    assert not [x for x in c["problems"] if "dirty" not in x]


def test_same_sources_and_unknown_sources(run_dir):
    c = provenance.check(run_dir)       # no ringlab.build record: sources unknown, said so
    assert c["pairs"][0]["different_sources"] is None and "not recorded" in c["pairs"][0]["verdict"]
    _set_build(run_dir, same_sources=True)
    p = provenance.check(run_dir)["pairs"][0]
    assert p["different_sources"] is False and "SAME sources" in p["verdict"]


def test_same_binary_flagged(tmp_path, monkeypatch):
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    fake.install(str(build / "bin"), sys.executable, variants=("batch",))
    shutil.copy(build / "bin" / "ptr_ring_test-batch", build / "bin" / "ptr_ring_test-reorder")
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "batch,reorder", "modes": "0", "trials": 1, "warmup": 0},
                                tmp_path / "run", build=False, progress=False, log=lambda m: None)
    c = provenance.check(res.out_dir)
    assert c["pairs"][0]["different_binaries"] is False
    assert any("same binary" in x for x in c["problems"])


def test_compare_runs_flags_stale_data(run_dir, tmp_path):
    _set_build(run_dir, same_sources=False)
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    c = provenance.compare_runs(run_dir, copy)
    assert c["variants"]["batch"]["identical_measurements"] is True
    assert c["variants"]["batch"]["same_binary"] is True
    assert any("stale" in x for x in c["problems"])
    assert c["git"]["same"] is True


def test_cli_text_and_json(run_dir, capsys):
    _set_build(run_dir, same_sources=False)
    cli.main(["provenance", str(run_dir)])
    out = capsys.readouterr().out
    assert "batch vs reorder: different binaries yes; different sources yes" in out
    assert "measured" in out
    cli.main(["provenance", str(run_dir), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["pairs"][0]["different_binaries"] is True
    cli.main(["provenance", str(run_dir), "--against", str(run_dir)])
    assert "identical measurements yes" in capsys.readouterr().out


def test_cli_not_a_run_dir(tmp_path, capsys):
    assert cli.main(["provenance", str(tmp_path)]) == 2
    assert "no env.json" in capsys.readouterr().err


def test_git_info():
    g = provenance.git_info()
    assert len(g["commit"]) == 40 and isinstance(g["dirty"], bool)
    assert all(not f.startswith(" ") for f in g["dirty_files"])
    assert provenance.git_info("/")["commit"] is None
