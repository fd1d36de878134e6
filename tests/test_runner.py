"""ringlab.runner with the mock executor (tests/fakes/fake_ptr_ring_test.py).

Covers ordering determinism and interleaving, crash/timeout/garbage recorded while the
run goes on, no orphans, warm-up marking, in-process repeats, counters and derived
columns, env.json contents, bad input (exit 2, no folder) and parameters that would be
dangerous in a shell.
"""
from __future__ import annotations

import json
import re
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.lab import cli
from ringlab.run import runner
from ringlab.run.plan import order_plan
from ringlab.experiments.base import TrialSpec

FAKES = Path(__file__).resolve().parent / "fakes"
sys.path.insert(0, str(FAKES))
import fake_ptr_ring_test as fake  # noqa: E402

SMOKE = {"profile": "smoke", "cpus": "none", "governor": "false"}




def run(params, out, **kw):
    kw.setdefault("build", False)
    kw.setdefault("progress", False)
    kw.setdefault("log", lambda m: None)
    return runner.run_experiment("ptr_ring", {**SMOKE, **params}, out, **kw)


# -- order ------------------------------------------------------------------------------
def test_order_plan_is_seeded_and_in_rounds():
    specs = [TrialSpec({"variant": v, "size": s}, t, t < 1) for v in "abc" for s in (1, 2) for t in range(4)]
    a = order_plan(list(specs), 7)
    assert [(s.config["variant"], s.config["size"], s.trial) for s in a] == \
           [(s.config["variant"], s.config["size"], s.trial) for s in order_plan(list(specs), 7)]
    b = order_plan(list(specs), 8)
    assert [id(s) for s in a] != [id(s) for s in b]
    # Round r holds trial r of every configuration: warm-ups first, balanced drift.
    assert [s.trial for s in a] == sorted(s.trial for s in a)
    for r in range(4):
        block = a[r * 6:(r + 1) * 6]
        assert {(s.config["variant"], s.config["size"]) for s in block} == {(v, s) for v in "abc" for s in (1, 2)}
    # and the order inside rounds is really shuffled (not the plan's canonical order)
    assert any(a[r * 6:(r + 1) * 6] != specs[r::4][:6] for r in range(4))


def test_run_order_deterministic_and_interleaved(fakebin, tmp_path):
    params = {"variants": "batch,reorder,spsc", "modes": "0", "sizes": "16,1000", "trials": 2, "warmup": 1,
              "seed": 5}
    fake.install(str(fakebin), sys.executable, seeds=(5, 6), layouts=2)   # smoke: 2 layouts
    run(params, tmp_path / "a")
    run(params, tmp_path / "b")
    run({**params, "seed": 6}, tmp_path / "c")
    key = ["variant", "mode", "trial"]
    da, db, dc = (rundir.read_raw(tmp_path / d / "raw.csv", strict=False) for d in "abc")
    assert da[key].values.tolist() == db[key].values.tolist()
    assert da[key].values.tolist() != dc[key].values.tolist()
    assert da["order"].tolist() == list(range(len(da)))
    # 3 variants x 2 sizes x (1 warm-up + 2) trials, one row each
    assert len(da) == 18 and da["status"].eq("ok").all()
    # interleaved: the variant changes within each round
    assert da.groupby("trial")["variant"].nunique().eq(3).all()
    assert da.groupby("trial")["size"].nunique().eq(2).all()
    # warm-ups are trial 0, all run before any measured trial
    assert da["warmup"].tolist() == [t == 0 for t in da["trial"]]
    assert da[da.warmup]["order"].max() < da[~da.warmup]["order"].min()
    # smoke builds 2 code layouts: each round runs one layout pair; an arm's layouts are two copies
    # in one binary (layout copies), so each arm ran one binary
    assert da.groupby("round")["layout"].nunique().eq(1).all() and set(da["layout"]) <= {0, 1}
    assert da.groupby("variant")["binary_sha256"].nunique().eq(1).all()


# -- failures -------------------------------------------------------------------------------
def test_crash_timeout_garbage_recorded_and_run_continues(fakebin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH", "reorder")
    monkeypatch.setenv("FAKE_HANG", "spsc")
    monkeypatch.setenv("FAKE_GARBAGE", "prebatch")
    res = run({"modes": "0", "trials": 1, "warmup": 0, "timeout": 0.5}, tmp_path / "r")
    df = rundir.read_raw(res.raw_csv, strict=False).set_index("variant")
    assert df.loc["batch", "status"] == "ok"
    assert df.loc["reorder", "status"] == "crash"
    assert df.loc["reorder", "exit_code"] == -6          # SIGABRT
    assert "ring corrupted" in df.loc["reorder", "stderr_tail"]
    assert df.loc["spsc", "status"] == "timeout"
    assert df.loc["spsc", "exit_code"] == -9
    assert "timeout after 0.5s" in df.loc["spsc", "stderr_tail"]
    assert df.loc["prebatch", "status"] == "error"
    assert "parse error" in df.loc["prebatch", "stderr_tail"]
    assert math.isnan(df.loc["reorder", "ns_per_op"])
    assert res.counts == {"ok": 1, "crash": 1, "timeout": 1, "error": 1}


def test_nonzero_exit_recorded(fakebin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EXIT", "batch:3")
    res = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0}, tmp_path / "r")
    row = rundir.read_raw(res.raw_csv, strict=False).iloc[0]
    assert (row["status"], row["exit_code"]) == ("crash", 3)


def test_timeout_kills_the_whole_process_group(fakebin, tmp_path, monkeypatch):
    pidfile = tmp_path / "grandchild.pid"
    monkeypatch.setenv("FAKE_CHILD_PIDFILE", str(pidfile))
    monkeypatch.setenv("FAKE_HANG", "batch")
    run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0, "timeout": 0.5}, tmp_path / "r")
    pid = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a killed grandchild is reparented to init and reaped there; zombie counts as gone
        st = Path(f"/proc/{pid}/stat")
        if st.exists() and st.read_text().split(") ")[1].startswith("Z"):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"grandchild {pid} of a timed-out trial survived")


# -- rows -------------------------------------------------------------------------------------
def test_repeats_warmup_and_counters(fakebin, tmp_path):
    res = run({"variants": "batch", "modes": "0,1", "trials": 2, "warmup": 1, "repeats": 3}, tmp_path / "r")
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert len(df) == 2 * 3 * 3
    assert sorted(df["iteration"].unique()) == [0, 1, 2]
    # each process (trial) contributes its 3 iterations with one order number
    assert all(sorted(v) == [0, 1, 2] for v in df.groupby(["mode", "trial"])["iteration"].apply(list))
    assert df.groupby(["mode", "trial"])["order"].nunique().eq(1).all()
    assert df[df.trial == 0]["warmup"].all() and not df[df.trial > 0]["warmup"].any()
    # the VM fake: hardware counters are NaN with the reason, never 0
    assert df["cycles"].isna().all() and df["ipc"].isna().all()
    assert df["counter_errors"].str.contains(r"\bcycles\b[^;]*: not supported").all()
    assert df["icount_source"].isna().all()
    # the column contract
    from ringlab import schema
    assert list(df.columns) == schema.ordered_columns(["mode", "size", "count", "batch", "lock"])
    assert (df["binary_sha256"].str.len() == 64).all()
    assert df["timestamp"].str.endswith("Z").all()
    assert df.loc[df["mode"] == 0, "ns_consumer"].isna().all()


def test_derived_counter_columns(fakebin, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_HW_COUNTERS", "1")
    res = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0}, tmp_path / "r")
    row = rundir.read_raw(res.raw_csv, strict=False).iloc[0]
    assert row["ipc"] == pytest.approx(2.0)
    assert row["cycles_per_op"] == pytest.approx(3.0 * row["ns_per_op"])
    assert row["instructions_per_op"] == pytest.approx(6.0 * row["ns_per_op"])
    assert bool(row["counters_multiplexed"]) is True
    assert row["icount_source"] == "perf"
    assert math.isnan(row["branch_miss_rate"])


def test_counters_off_passes_none(fakebin, tmp_path):
    from ringlab.experiments.ptr_ring import PtrRing
    res = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0, "counters": "false"}, tmp_path / "r")
    row = rundir.read_raw(res.raw_csv, strict=False).iloc[0]
    assert row["counter_errors"] == "all: counters not read"
    env = json.loads(res.env_json.read_text())
    assert env["parameters"]["counters"] is False
    assert PtrRing.all_params()["counters"].parse("false") is False


def test_env_json_contents(fakebin, tmp_path):
    res = run({"variants": "batch,spsc", "modes": "0", "trials": 1, "warmup": 0, "layouts": 1}, tmp_path / "r")
    env = json.loads(res.env_json.read_text())
    assert env["parameters"]["layouts"] == 1 and env["plan"]["layouts"] == 1   # one fixed build
    for k in ("schema_version", "run_id", "experiment", "host", "started_utc", "ended_utc", "parameters",
              "git", "build", "environment", "governor", "binaries_used", "plan", "status"):
        assert k in env, k
    assert env["status"] == "complete" and env["ended_utc"] >= env["started_utc"]
    assert env["parameters"]["variants"] == ["batch", "spsc"] and env["parameters"]["profile"] == "smoke"
    assert len(env["git"]["commit"]) == 40 and isinstance(env["git"]["dirty"], bool)
    assert env["binaries_used"]["ptr_ring_test-spsc"]["sha256"] != env["binaries_used"]["ptr_ring_test-batch"]["sha256"]
    assert env["governor"]["changed"] is False  # governor=false in these tests
    assert "topology" in env["environment"] or "error" in env["environment"]
    assert env["plan"]["trials_total"] == 2
    assert res.out_dir == tmp_path / "r" and not list((tmp_path / "r").glob(".*tmp"))


def test_default_out_dir_is_new_and_under_scratch_never_results(fakebin, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RINGLAB_SCRATCH", str(tmp_path / "elsewhere"))
    r1 = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0}, None)
    r2 = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0}, None)
    assert r1.out_dir != r2.out_dir
    assert r1.out_dir.parent.parent == tmp_path / "elsewhere" / "ptr_ring"
    assert r1.out_dir.name == r1.run_id
    # `ringlab run` without --out too; results/ stays untouched
    assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "variants", "batch", "-p", "modes", "0",
                     "-p", "trials", "1", "-p", "warmup", "0", "-p", "governor", "false", "--no-build",
                     "--no-progress"]) == 0, capsys.readouterr().err
    assert len(list((tmp_path / "elsewhere" / "ptr_ring").glob("*/*/raw.csv"))) == 3
    assert not (tmp_path / "results").exists()


def test_governor_report_recorded_with_fake_sysfs(fakebin, tmp_path, monkeypatch):
    """Pinned trials go through governor.tune; on a tree without cpufreq the run goes on."""
    res = run({"variants": "batch", "modes": "0", "trials": 1, "warmup": 0, "cpus": "auto",
               "governor": "true"}, tmp_path / "r")
    env = json.loads(res.env_json.read_text())
    assert "governor" in env["governor"] or "reason" in env["governor"]
    assert rundir.read_raw(res.raw_csv, strict=False)["status"].eq("ok").all()


# -- bad input --------------------------------------------------------------------------------
BAD = [
    (["run", "nosuch"], "unknown experiment 'nosuch'"),
    (["run", "ptr_ring", "-p", "bogus", "1"], "unknown parameter 'bogus'"),
    (["run", "ptr_ring", "-p", "variants", "batch,nosuch"], "parameter 'variants': unknown variant 'nosuch'"),
    (["run", "ptr_ring", "-p", "count", "ten"], "parameter 'count': not an integer"),
    (["run", "ptr_ring", "-p", "count", "1.5"], "parameter 'count': not an integer"),
    (["run", "ptr_ring", "-p", "trials", "0"], "parameter 'trials': too small"),
    (["run", "ptr_ring", "-p", "modes", "3"], "parameter 'modes': unknown value"),
    (["run", "ptr_ring", "-p", "sizes", "1"], "parameter 'sizes': too small"),
    (["run", "ptr_ring", "-p", "cpus", "0:4096"], "parameter 'cpus': CPU 4096"),
    (["run", "ptr_ring", "-p", "cpus", "one:two"], "parameter 'cpus'"),
    (["run", "ptr_ring", "-p", "kernel_headers", "mine=/no/such/ptr_ring.h"], "parameter 'kernel_headers'"),
]


@pytest.mark.parametrize("argv,msg", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_input_exit_2_and_no_folder(fakebin, tmp_path, capsys, argv, msg):
    out = tmp_path / "out"
    rc = cli.main(argv + ["-p", "profile", "smoke", "--no-build", "--out", str(out)] if argv[1] != "nosuch"
                  else argv + ["--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert msg in err and ("allowed" in err or "online CPUs" in err)
    assert not out.exists()


def test_out_exists_without_resume(fakebin, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "--no-build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    # an empty folder holds no run: --resume would refuse it, so it is not advised
    assert "'--out'" in err and "already exists" in err and "--resume" not in err
    assert list(out.iterdir()) == []
    (out / "env.json").write_text("{}")
    assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "--no-build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "pass --resume to continue the run in it" in err


def test_out_not_writable(fakebin, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile / "sub", Path("/proc/ringlab-nope/run")):
        assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "--no-build", "--out", str(out)]) == 2
        assert "not writable" in capsys.readouterr().err
        assert not out.exists()


def test_missing_binary_is_error_without_folder(tmp_path, monkeypatch, capsys):
    """--no-build with nothing built: the user's to fix (exit 2), nothing created."""
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "empty"))
    out = tmp_path / "out"
    assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "cpus", "none", "--no-build",
                     "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "ringlab build" in err and "does not exist" in err
    assert not out.exists()


def test_no_build_refuses_a_binary_changed_after_its_record(fakebin, tmp_path, capsys):
    """A binary replaced after it was built (or declared) is never measured: exit 2 naming
    the variant and both hashes (here: a code layout of it; smoke builds 2)."""
    from ringlab.build.layouts import arm_layouts, copy_groups
    exe = fakebin / copy_groups(arm_layouts(1, "batch", 2))[0].binary_name("ptr_ring_test-batch")
    exe.write_text(exe.read_text() + "# edited\n")
    out = tmp_path / "out"
    assert cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
                     "-p", "variants", "batch", "--no-build", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "variant batch" in err and "is not the binary its source record names" in err
    assert len(re.findall(r"[0-9a-f]{64}", err)) == 2
    assert not out.exists()


def test_same_cpu_spinning_pair_warns(fakebin, tmp_path):
    msgs = []
    res = run({"variants": "batch", "modes": "1", "trials": 1, "warmup": 0, "cpus": "1:1"}, tmp_path / "r",
              log=msgs.append)
    assert any("same-cpu" in m for m in msgs)
    assert any("same-cpu" in w for w in json.loads(res.env_json.read_text())["warnings"])


def test_shell_metacharacters_never_reach_a_shell(fakebin, tmp_path, monkeypatch):
    """Kernel-header paths and output paths with ; $() and spaces are plain data (cflags with
    them are refused: tests/test_security_code.py)."""
    monkeypatch.chdir(tmp_path)
    canary = tmp_path / "pwned"
    weird = tmp_path / "dir with space; $(touch pwned) `touch pwned`"
    weird.mkdir()
    header = weird / "ptr_ring.h"
    header.write_text("/* a user's header */\nstruct ptr_ring { int producer; int consumer_head; };\n")
    out = weird / "out $(touch x); rm -rf /tmp/nothing"
    cflags = "-O2 -DX=1"
    fake.install(str(fakebin), sys.executable, variants=("batch", "mine"), kernel_headers={"mine": header},
                 cflags=cflags)
    res = run({"variants": "batch,mine", "modes": "0", "trials": 1, "warmup": 0, "cflags": cflags,
               "kernel_headers": f"mine={header}"}, out)
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert set(df["variant"]) == {"batch", "mine"} and df["status"].eq("ok").all()
    env = json.loads(res.env_json.read_text())
    assert env["parameters"]["cflags"] == cflags
    assert str(header) in env["parameters"]["kernel_headers"]
    assert not canary.exists()
    assert res.out_dir == out and out.is_dir()


# -- core-to-core latency ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def c2c_exe(tmp_path_factory):
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    src = Path(__file__).resolve().parent.parent / "csrc" / "harness" / "c2c_latency.c"
    exe = tmp_path_factory.mktemp("c2c") / "c2c_latency"
    subprocess.run([gcc, "-O2", "-Wall", "-Werror", "-pthread", "-o", str(exe), str(src)], check=True)
    return exe


def test_c2c_latency_probe(c2c_exe):
    from ringlab.tools import latency
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    doc = latency.run_probe(cpus[0], cpus[1], iterations=2000, rounds=3, exe=str(c2c_exe))
    assert doc["a"] == cpus[0] and doc["rounds"] == 3 and len(doc["samples_ns"]) == 3
    assert 0 < doc["one_way_ns"] < 1e7
    assert doc["samples_ns"] == sorted(doc["samples_ns"])
    # same CPU and offline CPU: refused with a reason, measure() says None
    with pytest.raises(RuntimeError, match="same CPU"):
        latency.run_probe(cpus[0], cpus[0], exe=str(c2c_exe))
    with pytest.raises(RuntimeError, match="cannot pin"):
        latency.run_probe(cpus[0], 4095, exe=str(c2c_exe))
    p = latency.Probe(exe="/nonexistent/c2c_latency")
    assert p.measure(0, 1) is None and "not built" in p.reasons[(0, 1)]


def test_runner_records_c2c_per_pair(fakebin, tmp_path, c2c_exe):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    shutil.copy(c2c_exe, fakebin / "c2c_latency")
    res = run({"variants": "batch", "modes": "0,1", "trials": 1, "warmup": 0, "cpus": "auto"}, tmp_path / "r")
    df = rundir.read_raw(res.raw_csv, strict=False)
    pair = df[df["mode"] == 1]
    assert pair["c2c_latency_ns"].notna().all() and (pair["c2c_latency_ns"] > 0).all()
    assert df[df["mode"] == 0]["c2c_latency_ns"].isna().all()
    env = json.loads(res.env_json.read_text())
    assert len(env["c2c_latency_ns"]) == 1


# -- how a run is judged: per arm, and nothing run --------------------------------------------------
def test_an_arm_without_a_successful_trial_fails_the_run(fakebin, tmp_path, monkeypatch, capsys):
    """Half the trials crash (every trial of one arm): under the failure threshold, but an arm has
    nothing to compare, so the run fails naming it, and `ringlab run` exits 1."""
    monkeypatch.setenv("FAKE_CRASH", "batch")
    out = tmp_path / "r"
    rc = cli.main(["run", "ptr_ring", "-p", "profile", "smoke", "-p", "cpus", "none", "-p", "governor", "false",
                   "-p", "variants", "batch,reorder", "-p", "modes", "0", "--no-build", "--no-progress",
                   "--out", str(out)])
    assert rc == 1
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "failed"
    assert env["status_reason"] == "arm 'batch' has no successful trial (2 failed, 0 timed out, 0 skipped)"
    assert "status:     failed (3 ok, 3 failed, 0 timeout): arm 'batch' has no successful trial" in capsys.readouterr().out


def test_a_run_that_ran_no_trial_is_skipped(fakebin, tmp_path, monkeypatch):
    """Every trial skipped (nothing to measure): the run is skipped with the reason, exit code 0."""
    real = runner.execute

    def skipped(exp, spec, order, ctx):
        return [dict(r, status="skipped") for r in real(exp, spec, order, ctx)]
    monkeypatch.setattr(runner, "execute", skipped)
    res = run({"variants": "batch,reorder", "modes": "0", "trials": "1", "warmup": "0"}, tmp_path / "r")
    env = json.loads(res.env_json.read_text())
    assert (res.status, res.status_reason, res.exit_code) == ("skipped", "no trial to run", 0)
    assert (env["status"], env["status_reason"]) == ("skipped", "no trial to run")
