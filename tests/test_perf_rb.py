"""perf_rb: syscall_loop workload, perf record argv/parsing/availability, no orphan perf, real perf run."""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from ringlab.tools import perfrecord
from ringlab.tools.argv import python_module
from ringlab.experiments.base import ParamError, TrialSpec, get
from ringlab.experiments.perf_rb import PerfRb, resolve_placements

ROOT = Path(__file__).resolve().parent.parent
FAKE_PERF = Path(__file__).resolve().parent / "fakes" / "fake_perf"
SRC = ROOT / "csrc" / "workloads" / "syscall_loop.c"

FORWARD_STDERR = ("[ perf record: Woken up 165 times to write data ]\n"
                  "[ perf record: Captured and wrote 0.000 MB /dev/null ]\n")   # recorded here, perf 6.1
OVERWRITE_STDERR = ("[ perf record: Woken up 1 times to write data ]\n"
                    "[ perf record: Captured and wrote 0.000 MB /dev/null ]\n")


@pytest.fixture(autouse=True)
def _fresh_cache():
    perfrecord.clear_cache()
    yield
    perfrecord.clear_cache()


@pytest.fixture(scope="module")
def syscall_loop(tmp_path_factory) -> Path:
    """Compiled here with gcc (as ringlab.build does: -O2 -pthread -I csrc), independent of build/."""
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        pytest.skip("no C compiler (gcc) to build syscall_loop")
    out = tmp_path_factory.mktemp("bin") / "syscall_loop"
    subprocess.run([cc, "-O2", "-pthread", "-Wall", "-Werror", "-I", str(ROOT / "csrc"), "-o", str(out), str(SRC)],
                   check=True)
    return out


class Ctx:
    """The bits of the runner's context perf_rb uses."""
    def __init__(self, binary: Path | None = None, topology=None):
        self._binary = binary
        self.topology = topology
        self.warnings: list[str] = []

    def binary(self, name: str) -> Path:
        assert name == "syscall_loop"
        return self._binary

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)


# -- the workload ----------------------------------------------------------------------
def test_syscall_loop_text_and_json(syscall_loop):
    r = subprocess.run([str(syscall_loop), "-N", "1000", "-c", "0"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("syscall_loop: 1000 close(-1) calls took ")
    assert r.stdout.rstrip().endswith("cpu 0 -> 0")
    r = subprocess.run([str(syscall_loop), "-N", "1000", "-r", "3", "--json", "--counters", "none"],
                       capture_output=True, text=True, check=True)
    doc = json.loads(r.stdout)
    assert doc["binary"] == "syscall_loop" and doc["count"] == 1000 and len(doc["iterations"]) == 3
    it = doc["iterations"][0]
    assert it["elapsed_ns"] > 0 and it["ns_per_op"] == pytest.approx(it["elapsed_ns"] / 1000, rel=1e-3)
    assert it["ns_consumer"] is None and it["cpu_consumer_start"] is None
    assert it["cpu_producer_start"] >= 0


@pytest.mark.parametrize("argv,named", [
    (["-N", "abc"], "-N"), (["-N", "0"], "-N"), ([], "-N"), (["-N", "10", "-c", "-1"], "-c"),
    (["-N", "10", "-r", "5000"], "-r"), (["-N", "10", "--bogus"], "--bogus"), (["-N"], "-N"),
])
def test_syscall_loop_usage_errors(syscall_loop, argv, named):
    r = subprocess.run([str(syscall_loop)] + argv, capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith(f"syscall_loop: {named}:") and "usage:" in r.stderr


def test_syscall_loop_offline_cpu(syscall_loop):
    r = subprocess.run([str(syscall_loop), "-N", "10", "-c", "1023"], capture_output=True, text=True)
    assert r.returncode == 1 and "-c 1023: cannot pin" in r.stderr


# -- perf's output ---------------------------------------------------------------------
def test_parse_stderr_forward_and_overwrite():
    f, b = perfrecord.parse_stderr(FORWARD_STDERR), perfrecord.parse_stderr(OVERWRITE_STDERR)
    assert (f.wakeups, f.captured_mb, f.output, f.samples) == (165, 0.0, "/dev/null", None)
    assert b.wakeups == 1 and b.complete and f.complete


def test_parse_stderr_samples_lost_noise_and_errors():
    text = ("syscall_loop: something on stderr\n"
            "Processed 4000000 events and lost 3 chunks!\n\nCheck IO/CPU overload!\n\n"
            "[ perf record: Woken up 2 times to write data ]\n"
            "[ perf record: Captured and wrote 1.234 MB perf.data (12345 samples) ]\n")
    s = perfrecord.parse_stderr(text)
    assert (s.wakeups, s.captured_mb, s.output, s.samples, s.lost) == (2, 1.234, "perf.data", 12345, 3)
    e = perfrecord.parse_stderr("Error:\nNo permission to enable raw_syscalls:sys_enter event.\n")
    assert not e.complete and e.errors == ["No permission to enable raw_syscalls:sys_enter event."]
    assert perfrecord.parse_stderr("").wakeups is None


def test_record_argv_is_a_list_with_pinning():
    argv = perfrecord.record_argv("/usr/bin/perf", ["wl", "-N", "5"], overwrite=True, cpu=3)
    assert argv[:7] == [*python_module("ringlab.tools.perfrecord"), "--cpu", "3", "--"]
    assert argv[7:] == ["/usr/bin/perf", "record", "-o", "/dev/null", "--no-buildid-cache", "-e", "raw_syscalls:*",
                        "--overwrite", "--", "wl", "-N", "5"]
    assert perfrecord.record_argv("perf", ["wl"], cpu=-1)[0] == "perf"


def test_pin_wrapper_pins_and_execs():
    cpu = max(os.sched_getaffinity(0))
    r = subprocess.run(perfrecord.pin_prefix(cpu) + [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == f"[{cpu}]"
    r = subprocess.run(perfrecord.pin_prefix(cpu) + ["/nonexistent/perf"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "cannot run '/nonexistent/perf'" in r.stderr


# -- parameters and placements ---------------------------------------------------------
def test_registered_and_params():
    assert get("perf_rb") is PerfRb
    v = PerfRb.resolve({"variants": "base,backward", "placements": "split"}, profile="smoke")
    assert v["variants"] == ["base", "backward"] and v["count"] == 20_000
    assert PerfRb.resolve(profile="full")["count"] == 3_000_000
    with pytest.raises(ParamError, match="parameter 'variants'.*allowed: one of base, forward, backward"):
        PerfRb.resolve({"variants": "sideways"})
    with pytest.raises(ParamError, match="parameter 'placements'"):
        PerfRb.resolve({"placements": "far"})
    with pytest.raises(ParamError, match="parameter 'count'"):
        PerfRb.resolve({"count": 0})
    assert PerfRb.param_columns() == ["placement", "count"]


def test_placements_on_a_big_machine():
    from ringlab.system.topology import Topology
    topo = Topology.fake(2, 4, 2, 2)  # all five classes exist
    pls = {p.name: p for p in resolve_placements(["auto"], topo)}
    assert list(pls) == ["none", "same-core", "split", "smt-sibling", "cross-llc", "cross-numa"]
    assert pls["none"].workload_cpu == -1 and pls["none"].perf_cpu == -1
    assert pls["same-core"].workload_cpu == pls["same-core"].perf_cpu >= 0
    assert pls["split"].pair_class == "same-llc" and pls["split"].workload_cpu != pls["split"].perf_cpu
    for c in ("smt-sibling", "cross-llc", "cross-numa"):
        assert topo.pair_class(pls[c].workload_cpu, pls[c].perf_cpu) == c


def test_placements_missing_class_and_single_cpu():
    from ringlab.system.topology import Topology
    with pytest.raises(ParamError, match="parameter 'placements': no CPU pair of class 'cross-numa'.*allowed here"):
        resolve_placements(["cross-numa"], Topology.fake(1, 2, 1, 1))
    one = Topology.fake(1, 1, 1, 1)
    with pytest.raises(ParamError, match="'split' needs two CPUs"):
        resolve_placements(["split"], one)
    assert [p.name for p in resolve_placements(["auto"], one)] == ["none", "same-core"]


# -- availability: perf missing / refusing / no tracefs -> perf variants skipped, base runs --
def _plan(values_over, ctx, profile="smoke"):
    exp = PerfRb()
    values = PerfRb.resolve(values_over, profile=profile)
    return exp, values, exp.plan(values, ctx)


def test_perf_missing_skips_forward_and_backward(syscall_loop):
    from ringlab.system.topology import Topology
    ctx = Ctx(syscall_loop, Topology.fake(1, 2, 1, 1))
    exp, values, specs = _plan({"perf": "/nonexistent/perf"}, ctx)
    assert {s.config["variant"] for s in specs} == {"base"}
    assert "perf executable '/nonexistent/perf' not found" in exp.skipped(values, ctx)["forward"]
    assert exp.unavailable(values, ctx) is None  # base can still run
    assert ctx.warnings and ctx.warnings[0].startswith("perf_rb: variants forward, backward skipped: perf executable")
    only_perf = PerfRb.resolve({"perf": "/nonexistent/perf", "variants": "forward,backward"}, profile="smoke")
    assert "not found" in exp.unavailable(only_perf, ctx)
    # The plan stays whole so the runner asks unavailable() and records the skip.
    assert {s.config["variant"] for s in exp.plan(only_perf, ctx)} == {"forward", "backward"}


@pytest.mark.parametrize("mode,why", [("permission", "No permission to enable raw_syscalls"),
                                      ("notrace", "unknown tracepoint|event syntax error")])
def test_perf_refusing_is_reported(monkeypatch, mode, why):
    if perfrecord.privilege_reason() or perfrecord.tracefs_reason():
        pytest.skip("static checks fail first here: " + (perfrecord.privilege_reason() or perfrecord.tracefs_reason()))
    monkeypatch.setenv("FAKE_PERF_MODE", mode)
    reason = perfrecord.unavailable_reason(str(FAKE_PERF))
    assert reason.startswith("perf record probe failed (exit 255): ")
    import re
    assert re.search(why, reason)


def _fake_sys(tmp_path: Path, events: list[str] | None, mountpoint=True) -> Path:
    root = tmp_path / "sys"
    (root / "devices/system/cpu").mkdir(parents=True)
    if mountpoint:
        (root / "kernel/tracing").mkdir(parents=True)
    if events is not None:
        for e in events:
            (root / "kernel/tracing/events" / e).mkdir(parents=True)
    return root


def test_no_tracefs_in_fake_sysfs(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_SYSFS", str(_fake_sys(tmp_path, None, mountpoint=False)))
    assert perfrecord.tracefs_reason().startswith("no tracefs:")
    if perfrecord.privilege_reason() is None and perfrecord.find_perf() is not None:
        assert perfrecord.unavailable_reason("perf").startswith("no tracefs:")


def test_tracefs_without_raw_syscalls_and_with(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_SYSFS", str(_fake_sys(tmp_path / "a", ["sched", "irq"])))
    assert "no raw_syscalls events" in perfrecord.tracefs_reason()
    monkeypatch.setenv("RINGLAB_SYSFS", str(_fake_sys(tmp_path / "b", ["raw_syscalls"])))
    assert perfrecord.tracefs_reason() is None


def test_not_privileged(monkeypatch, tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/perf_event_paranoid").write_text("2\n")
    monkeypatch.setenv("RINGLAB_PROCFS", str(proc))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(perfrecord, "_has_cap", lambda bit: False)
    assert "perf_event_paranoid=2" in perfrecord.privilege_reason()
    (proc / "sys/kernel/perf_event_paranoid").write_text("-1\n")
    assert perfrecord.privilege_reason() is None


# -- plan / command / parse with the fake perf ----------------------------------------
def _run_spec(exp, spec, ctx, timeout=60):
    r = perfrecord.run_group(exp.command(spec, ctx), timeout)
    assert not r.timed_out
    return r, exp.parse(spec, r.stdout, r.stderr, ctx)


def test_forward_backward_with_fake_perf(syscall_loop, monkeypatch):
    from ringlab.system.topology import Topology
    monkeypatch.setenv("FAKE_PERF_MODE", "ok")
    monkeypatch.setattr(perfrecord, "unavailable_reason", lambda perf, **k: None)
    cpus = sorted(os.sched_getaffinity(0))
    topo = Topology.read() if len(cpus) > 1 else Topology.fake(1, 1, 1, 1)
    ctx = Ctx(syscall_loop, topo)
    exp, values, specs = _plan({"perf": str(FAKE_PERF), "count": 2000, "repeats": 2}, ctx)
    assert {(s.config["variant"], s.config["placement"]) for s in specs} >= {
        ("base", "none"), ("forward", "same-core"), ("backward", "none")}
    assert len(specs) == len({s.key() for s in specs})  # resume keys are unique
    seen = {}
    for spec in specs:
        if spec.trial:
            continue
        argv = exp.command(spec, ctx)
        assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
        r, rows = _run_spec(exp, spec, ctx)
        assert r.returncode == 0, r.stderr
        assert len(rows) == 2 and [row["iteration"] for row in rows] == [0, 1]
        row = rows[0]
        assert row["count"] == 2000 and row["elapsed_us"] == pytest.approx(row["elapsed_ns"] / 1e3)
        if spec.config["placement"] != "none":
            assert row["cpu_producer_start"] == spec.extra["workload_cpu"]
        seen[(spec.config["variant"], spec.config["placement"])] = row
    base, fwd, bwd = seen[("base", "same-core")], seen[("forward", "same-core")], seen[("backward", "same-core")]
    assert math.isnan(base["perf_wakeups"]) and math.isnan(base["perf_cpu"]) and base["cpu_req_consumer"] == -1
    assert fwd["perf_wakeups"] == 7 and bwd["perf_wakeups"] == 1 and fwd["perf_captured_mb"] == 0.0
    assert fwd["perf_cpu"] == fwd["cpu_req_consumer"] == fwd["cpu_req_producer"]
    assert seen[("forward", "none")]["perf_cpu"] == -1
    assert math.isnan(fwd["cycles"]) and fwd["counter_errors"]  # no counters: NaN with a reason


def test_parse_rejects_missing_summary_and_bad_output():
    exp = PerfRb()
    spec = TrialSpec(config={"variant": "forward", "placement": "none", "count": 5}, trial=0, warmup=False,
                     extra={"perf_cpu": -1, "workload_cpu": -1})
    good = json.dumps({"schema": 1, "binary": "syscall_loop", "count": 5, "iterations": [
        {"ns_producer": 10.0, "ns_consumer": None, "elapsed_ns": 10.0, "ns_per_op": 2.0,
         "cpu_producer_start": 0, "cpu_producer_end": 0, "cpu_consumer_start": None, "cpu_consumer_end": None}]})
    with pytest.raises(ValueError, match="summary"):
        exp.parse(spec, good, "Error:\nPermission error mapping pages.\n")
    assert exp.parse(spec, good, FORWARD_STDERR)[0]["perf_wakeups"] == 165
    with pytest.raises(ValueError, match="no JSON"):
        exp.parse(spec, "", FORWARD_STDERR)
    with pytest.raises(ValueError, match="not syscall_loop"):
        exp.parse(spec, json.dumps({"binary": "ptr_ring_test", "iterations": [{}]}), FORWARD_STDERR)


# -- no orphan perf ------------------------------------------------------------------
def _procs_with(marker: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if marker.encode() in (d / "cmdline").read_bytes():
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


def _hang_argv(marker: str) -> list[str]:
    # Pinned through the wrapper as the experiment does, so exec keeps the group intact.
    return perfrecord.record_argv(str(FAKE_PERF), [sys.executable, "-c", "pass", marker], cpu=min(os.sched_getaffinity(0)))


def test_hanging_perf_is_killed_and_reaped_on_timeout(monkeypatch):
    monkeypatch.setenv("FAKE_PERF_MODE", "hang")
    marker = f"ringlab-test-marker-{uuid.uuid4().hex}"
    r = perfrecord.run_group(_hang_argv(marker), timeout=2.0)
    assert r.timed_out and r.returncode == -signal.SIGKILL  # it ignored SIGTERM
    assert _procs_with(marker) == []


def test_hanging_perf_is_killed_on_ctrl_c(monkeypatch):
    monkeypatch.setenv("FAKE_PERF_MODE", "hang")
    marker = f"ringlab-test-marker-{uuid.uuid4().hex}"

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            perfrecord.run_group(_hang_argv(marker), timeout=60)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert _procs_with(marker) == []


# -- the real thing ------------------------------------------------------------------
@pytest.mark.root
def test_real_perf_forward_backward(syscall_loop):
    reason = perfrecord.unavailable_reason("perf")
    if reason:
        pytest.skip(f"perf tracepoints unavailable: {reason}")
    ctx = Ctx(syscall_loop)
    exp, values, specs = _plan({"count": 200_000, "placements": "same-core", "trials": 3}, ctx)
    rows: dict[str, list[dict]] = {}
    for spec in sorted(specs, key=lambda s: s.trial):     # the arms interleaved, trial by trial
        r, out = _run_spec(exp, spec, ctx, timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
        rows.setdefault(spec.config["variant"], []).append(out[0])
    assert all(t["perf_wakeups"] >= 1 for arm in ("forward", "backward") for t in rows[arm])
    assert not any(math.isnan(t["perf_captured_mb"]) for t in rows["forward"])
    # Two trace records per syscall cost far more than the noise of a shared VM; each arm's
    # fastest of three trials, so that one trial slowed by the machine's load decides nothing.
    fastest = {arm: min(t["elapsed_us"] for t in ts) for arm, ts in rows.items()}
    assert fastest["forward"] > fastest["base"] and fastest["backward"] > fastest["base"]


# -- through the runner (ringlab.runner) ---------------------------------------------
@pytest.fixture
def runner_env(syscall_loop, tmp_path, monkeypatch):
    from ringlab import run as runner
    marker = f"rlmark{uuid.uuid4().hex[:12]}"
    build = tmp_path / f"build-{marker}"
    (build / "bin").mkdir(parents=True)
    shutil.copy2(syscall_loop, build / "bin" / "syscall_loop")
    from ringlab.build import binaries   # a run without a build measures only declared binaries
    binaries.declare_built(["syscall_loop"], out_dir=build / "bin")
    fake = tmp_path / f"perf-{marker}"
    shutil.copy2(FAKE_PERF, fake)
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    return runner, fake, marker, tmp_path


def _read_csv(path):
    from ringlab import rundir
    return rundir.read_raw(path, strict=False)


def test_runner_with_fake_perf(runner_env, monkeypatch):
    runner, fake, marker, tmp = runner_env
    monkeypatch.setenv("FAKE_PERF_MODE", "ok")
    monkeypatch.setattr(perfrecord, "unavailable_reason", lambda perf, **k: None)
    r = runner.run_experiment("perf_rb", {"profile": "smoke", "governor": False, "count": 1000,
                                          "placements": "none,same-core", "perf": str(fake)},
                              tmp / "run", build=False, progress=False)
    df = _read_csv(r.raw_csv)
    assert set(df.status) == {"ok"} and len(df) == 3 * 2 * 2
    assert {"variant", "placement", "count", "elapsed_us", "perf_wakeups", "perf_cpu"} <= set(df.columns)
    fw = df[df.variant == "forward"]
    assert set(fw.perf_wakeups) == {7} and set(df[df.variant == "backward"].perf_wakeups) == {1}
    assert df[df.variant == "base"].perf_wakeups.isna().all()
    # every trial hashes the workload, not the pinning wrapper or perf in front of it
    workload = json.loads(r.env_json.read_text())["binaries_used"]["syscall_loop"]["sha256"]
    assert set(df.binary_sha256) == {workload}


def test_runner_perf_missing_runs_base_and_says_why(runner_env):
    runner, fake, marker, tmp = runner_env
    r = runner.run_experiment("perf_rb", {"profile": "smoke", "governor": False, "count": 1000,
                                          "placements": "none", "perf": str(tmp / "no-such-perf")},
                              tmp / "run", build=False, progress=False)
    df = _read_csv(r.raw_csv)
    assert set(df.variant) == {"base"} and set(df.status) == {"ok"}
    env = json.loads(r.env_json.read_text())
    assert any("forward, backward skipped: perf executable" in w for w in env["warnings"])
    # an arm missing is never a complete run: failed, naming the arms and why
    assert r.status == env["status"] == "failed" and r.exit_code == 1
    assert env["status_reason"].startswith("arm 'forward' could not run: perf executable ")
    assert "arm 'backward' could not run: perf executable " in env["status_reason"]
    assert set(env["plan"]["arms_unavailable"]) == {"forward", "backward"}
    r2 = runner.run_experiment("perf_rb", {"profile": "smoke", "governor": False, "variants": "forward",
                                           "perf": str(tmp / "no-such-perf")},
                               tmp / "run2", build=False, progress=False)
    env2 = json.loads(r2.env_json.read_text())
    assert env2["status"] == "skipped" and "not found" in env2["skipped_reason"]


def test_runner_perf_probe_failing_fails_the_run_naming_the_arm(runner_env, monkeypatch, capsys):
    """A perf whose probe fails (the fake perf refusing the tracepoint): the forward arm is
    recorded as unable to run with the probe's reason, base still runs, and the run ends failed
    (exit 1), never complete with an arm missing."""
    from ringlab.lab import cli
    runner, fake, marker, tmp = runner_env
    monkeypatch.setenv("FAKE_PERF_MODE", "permission")
    for check in ("perf_root_refusal", "privilege_reason", "tracefs_reason"):   # only the probe decides
        monkeypatch.setattr(perfrecord, check, lambda *a, **k: None)
    out = tmp / "run"
    rc = cli.main(["run", "perf_rb", "-p", "profile", "smoke", "-p", "governor", "false", "-p", "count", "1000",
                   "-p", "variants", "base,forward", "-p", "placements", "none", "-p", "perf", str(fake),
                   "--no-build", "--no-progress", "--out", str(out)])
    printed = capsys.readouterr().out
    assert rc == 1
    env = json.loads((out / "env.json").read_text())
    assert env["status"] == "failed"
    assert env["status_reason"].startswith("arm 'forward' could not run: perf record probe failed (exit 255): ")
    assert "No permission to enable raw_syscalls" in env["status_reason"]
    assert env["plan"]["arms_unavailable"] == {"forward": env["status_reason"].split(": ", 1)[1]}
    assert "status:     failed (2 ok, 0 failed, 0 timeout): arm 'forward' could not run" in printed
    assert set(_read_csv(out / "raw.csv").variant) == {"base"}


def test_runner_no_arm_can_run_is_skipped_with_the_reason(runner_env, monkeypatch):
    runner, fake, marker, tmp = runner_env
    monkeypatch.setenv("FAKE_PERF_MODE", "permission")
    for check in ("perf_root_refusal", "privilege_reason", "tracefs_reason"):
        monkeypatch.setattr(perfrecord, check, lambda *a, **k: None)
    r = runner.run_experiment("perf_rb", {"profile": "smoke", "governor": False, "variants": "forward,backward",
                                          "placements": "none", "perf": str(fake)},
                              tmp / "run", build=False, progress=False)
    env = json.loads(r.env_json.read_text())
    assert r.status == env["status"] == "skipped" and r.exit_code == 0
    assert env["skipped_reason"].startswith("perf record probe failed (exit 255): ")
    assert env["status_reason"] == env["skipped_reason"]


def test_runner_timeout_leaves_no_perf_behind(runner_env, monkeypatch):
    runner, fake, marker, tmp = runner_env
    monkeypatch.setenv("FAKE_PERF_MODE", "hang")
    monkeypatch.setattr(perfrecord, "unavailable_reason", lambda perf, **k: None)
    r = runner.run_experiment("perf_rb", {"profile": "smoke", "governor": False, "count": 1000, "trials": 1,
                                          "variants": "forward", "placements": "same-core", "timeout": 1.5,
                                          "perf": str(fake)},
                              tmp / "run", build=False, progress=False)
    df = _read_csv(r.raw_csv)
    assert list(df.status) == ["timeout"]
    assert _procs_with(marker) == []
