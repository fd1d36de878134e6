"""kmod experiment with fake insmod/rmmod/modinfo/dmesg: parsing, placement, timeout, unload, refusals.

The fake kernel is two files (RINGLAB_PROC_MODULES, RINGLAB_KMSG) that ringlab.tools.kmod reads and
tests/fakes/fake_kmod.py writes; no module is ever loaded.
"""
from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab.tools import kmod
from ringlab.tools import kmod_perf
from ringlab.system import modules
from ringlab.experiments import get
from ringlab.experiments.base import ParamError
from ringlab.errors import RunnerError
from ringlab.run import run_experiment
from ringlab.digest import sha256_file

FAKE = Path(__file__).resolve().parent / "fakes" / "fake_kmod.py"
ROOT = Path(__file__).resolve().parent.parent


class FakeKernel:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in ("insmod", "rmmod", "modinfo", "dmesg"):
            (self.bin / tool).symlink_to(FAKE)
        self.kmsg = tmp / "kmsg"
        self.kmsg.write_text("")
        self.modules = tmp / "modules"
        self.modules.write_text("")
        self.state = tmp / "state"
        self.ko = tmp / "page_frag_test.ko"
        self.ko.write_bytes(b"\x7fELF fake module for tests\n")
        self.argv_log = tmp / "insmod-argv.txt"

    def loaded(self) -> list[str]:
        return [ln.split()[0] for ln in self.modules.read_text().splitlines() if ln.strip()]

    def wait_unloaded(self, limit: float = 15.0) -> bool:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if not self.loaded():
                return True
            time.sleep(0.1)
        return False

    def records(self) -> list[Path]:
        d = self.state / "kmod"
        return sorted(d.glob("*.json")) if d.is_dir() else []


@pytest.fixture
def fk(tmp_path, monkeypatch):
    k = FakeKernel(tmp_path)
    monkeypatch.setenv("PATH", f"{k.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RINGLAB_KMSG", str(k.kmsg))
    monkeypatch.setenv("RINGLAB_PROC_MODULES", str(k.modules))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(k.state))
    monkeypatch.setenv("FAKE_KMOD_ARGV", str(k.argv_log))
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for v in ("FAKE_INSMOD_MODE", "FAKE_RMMOD_MODE", "FAKE_VERMAGIC", "FAKE_KMOD_US"):
        monkeypatch.delenv(v, raising=False)
    if os.geteuid() != 0:
        monkeypatch.setattr(os, "geteuid", lambda: 0)  # the fakes need no privilege
    return k


def _run(fk, params, name="run", **kw):
    p = {"module": str(fk.ko), "args": "test_alloc_len=12 nr_test=51200", "cpus": "none", "trials": 2,
         "warmup": 0, "profile": "smoke"}
    p.update(params)
    res = run_experiment("kmod", p, fk.tmp / name, progress=False, build=False, log=lambda m: None, **kw)
    return res, rundir.read_raw(res.raw_csv, strict=False)


# -- parsing -------------------------------------------------------------------------------------
def test_result_lines_parse_as_in_seed_002():
    lines = ["51200000 of iterations for non-aligned testing took: 3400417us",
             "512000 of iterations for aligned testing took: 8119us", "unrelated line"]
    r = kmod.parse_results(lines)
    assert [(x["items"], x["label"], x["us"]) for x in r] == [(51200000, "non-aligned", 3400417.0),
                                                              (512000, "aligned", 8119.0)]


def test_kernel_log_returns_only_lines_written_after_it_was_opened(tmp_path):
    f = tmp_path / "kmsg"
    f.write_text("6,1,10,-;100 of iterations for aligned testing took: 5us\n")
    log = kmod.KernelLog(f)
    with open(f, "a") as w:
        w.write("6,2,20,-;200 of iterations for non-aligned testing took: 7us\n SUBSYSTEM=x\nplain line\n")
    assert log.read_new() == ["200 of iterations for non-aligned testing took: 7us", "plain line"]
    assert log.read_new() == []
    log.close()


def test_parameters():
    cls = get("kmod")
    v = cls.resolve({"module": "/m/page_frag_test.ko", "args": "test_push_cpu=16 test_pop_cpu=17 "
                     "test_alloc_len=12 nr_test=51200000"}, profile="smoke")
    assert v["cpus"] == "16:17" and v["args"] == "test_alloc_len=12 nr_test=51200000"
    v = cls.resolve({"module": "before=/a/x.ko,after=/b/x.ko", "args": "nr_test=5,test_align=1"})
    assert v["args"] == "nr_test=5 test_align=1"
    bad = [({"module": ""}, "module"), ({"args": "nr_test"}, "args"), ({"args": "a=1 a=2"}, "args"),
           ({"args": "test_push_cpu=1"}, "args"), ({"args": "test_push_cpu=1 test_pop_cpu=2", "cpus": "3:4"}, "args"),
           ({"cpus": "1-2"}, "cpus"), ({"module": "page_frag_test"}, "module"),
           ({"module": "a=/x.ko,a=/y.ko"}, "module"), ({"pattern": "took: (\\d+)us"}, "pattern"),
           ({"pattern": "took: ("}, "pattern")]
    for over, name in bad:
        with pytest.raises(ParamError, match=f"parameter '{name}'"):
            cls.resolve(dict({"module": "/m/x.ko"}, **over))


def test_module_found_by_name_in_a_tree(tmp_path):
    ko = tmp_path / "linux/tools/testing/selftests/mm/page_frag/page_frag_test.ko"
    ko.parent.mkdir(parents=True)
    ko.write_bytes(b"x")
    v = get("kmod").resolve({"module": "page_frag_test", "tree": str(tmp_path / "linux")})
    from ringlab.experiments.kmod import parse_modules
    assert parse_modules(v["module"], v["tree"]) == {"page_frag_test": str(ko.resolve())}


# -- trials ---------------------------------------------------------------------------------------
def test_trials_parse_the_result_and_unload(fk):
    res, df = _run(fk, {})
    assert res.counts == {"ok": 2}
    assert (df["variant"] == "page_frag_test").all() and (df["args"] == "test_alloc_len=12 nr_test=51200").all()
    # fake's figure: us = nr_test // 100 = 512 -> ns/item = 512e3 / 51200 = 10
    assert (df["elapsed_us"] == 512).all() and (df["count"] == 51200).all()
    assert (df["ns_per_op"] == 512e3 / 51200).all() and (df["kmod_label"] == "non-aligned").all()
    assert (df["insmod_exit"] == 0).all() and df["cycles"].isna().all()
    assert (df["binary_sha256"] == sha256_file(fk.ko)).all()
    assert fk.loaded() == [] and fk.records() == []
    assert "unloaded" in (res.out_dir / "kmod-unload.log").read_text()


def test_placement_sets_push_and_pop_cpus(fk):
    cpus = sorted(os.sched_getaffinity(0))
    pair = f"{cpus[0]}:{cpus[-1]}"
    res, df = _run(fk, {"cpus": pair, "trials": 1})
    line = fk.argv_log.read_text().splitlines()[0]
    assert f"test_push_cpu={cpus[0]}" in line and f"test_pop_cpu={cpus[-1]}" in line
    assert (df["cpu_req_producer"] == cpus[0]).all() and (df["cpu_req_consumer"] == cpus[-1]).all()
    fk.argv_log.write_text("")
    res, df = _run(fk, {"cpus": "auto", "trials": 1}, name="auto")
    assert "same-cpu" in set(df["pair_class"]), "auto includes push and pop on one CPU, as in the seed"
    assert len(fk.argv_log.read_text().splitlines()) == len(df)
    # seed 002's command line: the CPUs in args become the placement
    fk.argv_log.write_text("")
    res, df = _run(fk, {"cpus": "auto", "trials": 1, "args": f"test_push_cpu={cpus[0]} test_pop_cpu={cpus[0]} "
                        "test_alloc_len=12 nr_test=1000 test_align=1"}, name="seedform")
    assert list(df["pair_class"]) == ["same-cpu"] and list(df["kmod_label"]) == ["aligned"]
    assert (df["args"] == "test_alloc_len=12 nr_test=1000 test_align=1").all()


def test_ab_between_two_module_builds(fk):
    other = fk.tmp / "after" / "page_frag_test.ko"
    other.parent.mkdir()
    other.write_bytes(b"\x7fELF another build\n")
    res, df = _run(fk, {"module": f"before={fk.ko},after={other}", "trials": 3})
    assert res.counts == {"ok": 6} and set(df["variant"]) == {"before", "after"}
    assert df.groupby("variant")["binary_sha256"].nunique().eq(1).all()
    assert df["binary_sha256"].nunique() == 2


def test_init_that_fails_on_purpose_still_gives_its_result(fk, monkeypatch):
    monkeypatch.setenv("FAKE_INSMOD_MODE", "eagain")
    res, df = _run(fk, {"trials": 1})
    assert res.counts == {"ok": 1} and (df["insmod_exit"] == 1).all()


def test_failing_insmod_is_recorded_and_nothing_stays_loaded(fk, monkeypatch):
    monkeypatch.setenv("FAKE_INSMOD_MODE", "fail")
    res, df = _run(fk, {"trials": 1})
    assert res.counts == {"crash": 1}
    assert "Invalid parameters" in df["stderr_tail"].iloc[0]
    assert fk.loaded() == [] and fk.records() == []


def test_old_result_lines_in_the_log_are_not_taken(fk, monkeypatch):
    fk.kmsg.write_text("6,1,1,-;51200 of iterations for non-aligned testing took: 999us\n")
    monkeypatch.setenv("FAKE_INSMOD_MODE", "noline")
    res, df = _run(fk, {"trials": 1})
    assert res.counts == {"crash": 1} and "no result line" in df["stderr_tail"].iloc[0]
    assert fk.loaded() == []


def test_timeout_kills_the_trial_and_the_module_is_unloaded(fk, monkeypatch):
    monkeypatch.setenv("FAKE_INSMOD_MODE", "hang")
    res, df = _run(fk, {"trials": 1, "timeout": 3})
    assert res.counts == {"timeout": 1}
    assert fk.wait_unloaded(), "the guardian unloads the module after the runner's kill"
    end = time.monotonic() + 10
    while fk.records() and time.monotonic() < end:
        time.sleep(0.1)
    assert fk.records() == []
    assert "guardian" in (res.out_dir / "kmod-unload.log").read_text()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_unload_on_signal(fk, monkeypatch, sig):
    monkeypatch.setenv("FAKE_INSMOD_MODE", "hang")
    log = fk.tmp / "unload.log"
    p = subprocess.Popen(kmod.trial_argv(str(fk.ko), ["nr_test=10"], log=str(log)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    end = time.monotonic() + 20
    while not fk.loaded() and time.monotonic() < end:
        time.sleep(0.05)
    assert fk.loaded() == ["page_frag_test"] and len(fk.records()) == 1
    if sig == signal.SIGKILL:
        os.killpg(p.pid, sig)   # what the runner does on timeout: the whole group
    else:
        p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    if sig != signal.SIGKILL:
        assert p.returncode == 128 + sig and "unloading" in err
        assert fk.loaded() == [], "unloaded by the trial process itself"
    assert fk.wait_unloaded()
    end = time.monotonic() + 10
    while fk.records() and time.monotonic() < end:
        time.sleep(0.1)
    assert fk.records() == []


def test_module_left_loaded_is_reported_by_env(fk, monkeypatch):
    monkeypatch.setenv("FAKE_RMMOD_MODE", "fail")
    res, df = _run(fk, {"trials": 1})
    assert res.counts == {"crash": 1} and "still loaded" in df["stderr_tail"].iloc[0]
    left = modules.leftovers()
    assert [x["module"] for x in left] == ["page_frag_test"] and not left[0]["trial_alive"]
    from ringlab.system import envinfo
    info = envinfo.collect(probe_counters=False, interval=0.0)
    text = envinfo.format_text(info)
    assert "LEFT LOADED" in text and "rmmod page_frag_test" in text
    # the next trial refuses to load over it
    monkeypatch.delenv("FAKE_RMMOD_MODE")
    monkeypatch.setattr(kmod, "WAIT_LEFTOVER_S", 0.2)
    r = subprocess.run(kmod.trial_argv(str(fk.ko), ["nr_test=10"]), capture_output=True, text=True,
                       env=dict(os.environ))
    assert r.returncode == 3 and "already loaded" in r.stderr


# -- refusals -------------------------------------------------------------------------------------
def test_refusals_before_any_trial(fk, monkeypatch, tmp_path):
    def refused(match, **kw):
        out = fk.tmp / f"refused-{len(list(fk.tmp.iterdir()))}"
        with pytest.raises(RunnerError, match=match):
            run_experiment("kmod", {"module": str(fk.ko), "cpus": "none", "profile": "smoke", **kw}, out,
                           progress=False, build=False, log=lambda m: None)
        assert not out.exists()
        assert fk.argv_log.exists() is False or fk.argv_log.read_text() == ""

    monkeypatch.setenv("FAKE_VERMAGIC", "5.10.0-99-amd64 SMP mod_unload")
    refused(r"built for kernel 5\.10\.0-99-amd64 but this kernel is " + os.uname().release.replace(".", r"\."))
    monkeypatch.delenv("FAKE_VERMAGIC")
    refused("does not exist", module=str(fk.tmp / "missing.ko"))
    proc = tmp_path / "proc"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/modules_disabled").write_text("1\n")
    monkeypatch.setenv("RINGLAB_PROCFS", str(proc))
    refused("module loading is disabled")
    monkeypatch.delenv("RINGLAB_PROCFS")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    refused("not root")


def test_this_machine_says_why_it_cannot_load_modules_or_that_it_can():
    reasons = modules.machine_reasons()
    assert all(isinstance(r, str) and r for r in reasons)
    out = subprocess.run([sys.executable, "-m", "ringlab.tools.kmod", "check"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.startswith("kernel modules: ")
    assert (out.returncode == 0) == (not reasons)


# -- perf stat -r N insmod ... --------------------------------------------------------------------------
def test_perf_stat_insmod_blocks_import_and_compare():
    text = (ROOT / "ringlab" / "data" / "seed002_perfstat.txt").read_text()
    pub = kmod_perf.perf_rows(text)
    assert len(pub) == 8 and set(pub["variant"]) == {"before", "after"}
    assert set(pub["module"]) == {"page_frag_test"}
    first = pub.iloc[0]
    assert (first["cpu_req_producer"], first["cpu_req_consumer"], first["nr_test"]) == (16, 17, 51200000)
    assert first["args"] == "test_alloc_len=12 nr_test=51200000" and first["runs"] == 200
    # a user's own block for one configuration, compared with the published ones
    mine_text = ("Before this patchset:\n"
                 "Performance counter stats for 'insmod ./page_frag_test.ko test_push_cpu=16 test_pop_cpu=17 "
                 "test_alloc_len=12 nr_test=51200000' (5 runs):\n\n"
                 "  1.5 msec task-clock\n\n  3.0 seconds time elapsed ( +- 1.00% )\n")
    mine = kmod_perf.perf_rows(mine_text)
    cmp = kmod_perf.compare_blocks(pub, mine)
    row = cmp[(cmp["variant"] == "before") & (cmp["args"] == "test_alloc_len=12 nr_test=51200000")
              & (cmp["cpu_req_producer"] == 16)].iloc[0]
    assert row["elapsed_s_published"] == pytest.approx(6.382252558)
    assert row["mine_over_published"] == pytest.approx(3.0 / 6.382252558)
    after = cmp[(cmp["variant"] == "after") & (cmp["args"] == "test_alloc_len=12 nr_test=51200000")
                & (cmp["cpu_req_producer"] == 16)].iloc[0]
    assert after["vs_baseline_published"] == pytest.approx(5.624666079 / 6.382252558)
    assert row["vs_baseline_mine"] == 1.0 and math.isnan(after["vs_baseline_mine"])


def test_import_perf_kmod_command(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ringlab", "import-perf", "--kmod",
                          str(ROOT / "ringlab/data/seed002_perfstat.txt"), "--csv", str(tmp_path / "o.csv")],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(tmp_path / "o.csv")
    assert {"module", "args", "cpu_req_producer", "cpu_req_consumer", "variant"} <= set(df.columns)
    assert "page_frag_test" in out.stdout


def test_kmod_part_says_why_it_cannot_run():
    why = modules.cannot_run_reasons("")
    assert why[0].startswith("no module given")
    assert any("does not exist" in w for w in modules.cannot_run_reasons("/nonexistent/page_frag_test.ko"))
