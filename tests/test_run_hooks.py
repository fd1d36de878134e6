"""The runner's hooks and records: Experiment.cleanup after a timeout or interrupt,
Experiment.build_info into env.json's build, measured_commands for `ringlab provenance`,
and the command-line errors of `ringlab build` / dash values."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ringlab import rundir
from ringlab.lab import cli
from ringlab.tools import kmod
from ringlab.report import provenance
from ringlab import run as runner
from ringlab.experiments.ptr_ring import PtrRing

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_kmod import fk, _run as kmod_run  # noqa: E402,F401  (the fake kernel fixture)

SMOKE = {"profile": "smoke", "cpus": "none", "governor": "false", "modes": "0", "warmup": 0}




def run(params, out, **kw):
    kw.setdefault("build", False)
    kw.setdefault("progress", False)
    kw.setdefault("log", lambda m: None)
    return runner.run_experiment("ptr_ring", {**SMOKE, **params}, out, **kw)


# -- cleanup ---------------------------------------------------------------------------------------
def test_cleanup_runs_after_a_timeout_only(fakebin, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(PtrRing, "cleanup", lambda self, spec, ctx: calls.append(spec.config["variant"]),
                        raising=False)
    monkeypatch.setenv("FAKE_HANG", "reorder")
    res = run({"variants": "batch,reorder", "trials": 1, "timeout": 1}, tmp_path / "r")
    assert res.counts == {"ok": 1, "timeout": 1}
    assert calls == ["reorder"]


def test_cleanup_runs_when_interrupted_and_its_errors_are_warnings(fakebin, tmp_path, monkeypatch):
    from ringlab.run import process
    calls = []
    monkeypatch.setattr(PtrRing, "cleanup", lambda self, spec, ctx: calls.append(spec.trial), raising=False)

    def interrupted(argv, timeout, env=None, drop=True):
        raise KeyboardInterrupt
    monkeypatch.setattr(process, "run_process", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run({"variants": "batch", "trials": 1}, tmp_path / "r")
    assert calls == [0]
    assert rundir.read_env(tmp_path / "r").status == "interrupted"

    def broken(self, spec, ctx):
        raise OSError("cannot undo")
    monkeypatch.setattr(PtrRing, "cleanup", broken, raising=False)
    monkeypatch.setenv("FAKE_HANG", "batch")
    monkeypatch.setattr(process, "run_process", runner.run_process)
    res = run({"variants": "batch", "trials": 1, "timeout": 1}, tmp_path / "r2")
    assert res.counts == {"timeout": 1}
    assert any("cleanup after trial 0 of batch failed: OSError: cannot undo" in w for w in res.warnings)


def test_kmod_module_is_unloaded_by_the_runner_after_a_timeout(fk, monkeypatch):
    monkeypatch.setenv("FAKE_INSMOD_MODE", "hang")
    unloads = []
    real = kmod.rmmod
    monkeypatch.setattr(kmod, "rmmod", lambda name, *a, **k: unloads.append(name) or real(name, *a, **k))
    res, df = kmod_run(fk, {"trials": 1, "timeout": 3})
    assert res.counts == {"timeout": 1}
    assert unloads == ["page_frag_test"]
    assert fk.loaded() == [], "unloaded before run_experiment returned, not later by the guardian"
    assert "runner: page_frag_test unloaded after trial 0 ended early" in \
        (res.out_dir / "kmod-unload.log").read_text()


# -- build_info ----------------------------------------------------------------------------------
def test_build_info_is_merged_into_env_build(fakebin, tmp_path, monkeypatch):
    extra = {"binaries": {"helper": {"name": "helper", "path": "/x", "sha256": "ab" * 32}}, "tool": "v1"}
    monkeypatch.setattr(PtrRing, "build_info", lambda self, values: extra, raising=False)
    res = run({"variants": "batch", "trials": 1, "layouts": 1}, tmp_path / "r")
    build = rundir.read_env(res.out_dir).doc["build"]
    assert build["tool"] == "v1" and build["binaries"]["helper"]["sha256"] == "ab" * 32
    assert "ptr_ring_test-batch" in build["binaries"], "the checked binaries stay"


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None, reason="needs cc and make")
def test_ringtest_binaries_are_in_the_build_record(tmp_path, monkeypatch):
    from tests.fakes.ringtest_tree import write_fake_ringtest_tree
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    a = write_fake_ringtest_tree(tmp_path / "a", generation=1)
    b = write_fake_ringtest_tree(tmp_path / "b", generation=2)
    res = runner.run_experiment("ringtest", {"tree": f"A={a},B={b}", "cpus": "none", "run_cycles": 100,
                                             "trials": 1, "warmup": 0, "profile": "smoke", "layouts": 1},
                                tmp_path / "run",
                                progress=False, build=True, log=lambda m: None)
    build = rundir.read_env(res.out_dir).doc["build"]
    assert {"ringtest-A-ptr_ring", "ringtest-B-ptr_ring"} <= set(build["binaries"])
    c = provenance.check(res.out_dir)
    assert not [p for p in c["problems"] if "not the one env.json's build recorded" in p]
    (pair,) = c["pairs"]
    assert pair["different_sources"] is True


# -- measured commands ---------------------------------------------------------------------------
def test_measured_commands_are_recorded_and_read_by_provenance(fakebin, tmp_path):
    res = run({"variants": "batch,reorder", "trials": 2, "sizes": "16,1000"}, tmp_path / "r")
    env = rundir.read_env(res.out_dir).doc
    mc = env["measured_commands"]
    assert set(mc) == {"batch", "reorder"} and len(mc["batch"]) == 2     # one per configuration
    item = mc["batch"][0]
    assert item["shape"][0] == "<binary>" and "--json" in item["shape"]
    assert item["row"]["size"] in (16, 1000) and "variant" not in item["row"]
    c = provenance.check(res.out_dir)
    assert c["command_source"] == "recorded at run time"
    assert c["variants"]["batch"]["command"] == c["variants"]["reorder"]["command"]
    # without the record the command is rebuilt, and says so
    del env["measured_commands"]
    (res.out_dir / "env.json").write_text(json.dumps(env))
    assert provenance.check(res.out_dir)["command_source"].startswith("rebuilt")


def test_provenance_reads_typed_values(fakebin, tmp_path):
    res = run({"variants": "batch,reorder", "trials": 1}, tmp_path / "r")
    c = provenance.check(res.out_dir)
    v = c["variants"]["batch"]
    assert v["rows"] == v["ok_rows"] == 1 and isinstance(v["first"], str) and len(v["sha256"][0]) == 64


# -- command line ----------------------------------------------------------------------------------
def test_build_bad_revision_is_a_user_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    rc = cli.main(["build", "--kernel-header", f"k=git:{tmp_path}@no-such-rev"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--kernel-header k=git:" in err and "Traceback" not in err
    rc = cli.main(["build", "--kernel-header", f"k={tmp_path / 'nothing.h'}+{tmp_path / 'no.patch'}"])
    assert rc == 2


def test_dash_values():
    for argv, dest, want in ((["import-perf", "perf.txt", "--csv", "-out.csv"], "csv", "-out.csv"),
                             (["reproduce", "--host", "-lab2"], "host", "-lab2")):
        assert getattr(cli.parse_args(argv), dest) == want
