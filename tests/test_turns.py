"""Arms that take turns (csrc/harness/turns.h, ``-p interleave true``): the binaries' --with, the
plan's blocks as one entry, and a run whose rounds are one run of processes."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from ringlab import rundir
from ringlab import run as runner
from ringlab.build.driver import build_all
from ringlab.build.targets import RING_HEADERS
from ringlab.errors import ParamError
from ringlab.experiments import get
from ringlab.experiments.base import TrialSpec
from ringlab.run.plan import take_turns


@pytest.fixture(scope="session")
def bins():
    info = build_all(only=[f"ptr_ring_test-{v}" for v in RING_HEADERS])
    return {b.removeprefix("ptr_ring_test-"): b_info.path for b, b_info in info.binaries.items()}


def run(path, *args, timeout=120):
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=timeout)


def _turn_order(doc: dict) -> list[str]:
    ev = [(t, doc["variant"]) for t in doc["turn_start_ns"]]
    for o in doc["interleaved"]:
        ev += [(t, o["variant"]) for t in o["turn_start_ns"]]
    return [v for _, v in sorted(ev)]


@pytest.mark.parametrize("mode", [0, 1])
def test_the_arms_take_turns_loop_by_loop(bins, mode):
    p = run(bins["batch"], "-m", str(mode), "-N", "20000", "-r", "3", "--counters", "none", "--json",
            "--with", bins["reorder"], "--with", bins["prebatch"])
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["variant"] == "batch" and [o["variant"] for o in doc["interleaved"]] == ["reorder", "prebatch"]
    assert _turn_order(doc) == ["batch", "reorder", "prebatch"] * 3
    for d in (doc, *doc["interleaved"]):
        assert len(d["iterations"]) == 3 and all(it["ns_per_op"] > 0 for it in d["iterations"])
        assert d["mode"] == mode and d["count"] == 20000


def test_an_arm_gets_the_options_and_its_own_copy(bins, tmp_path):
    # a binary of layout copies: --with-copy picks the other arm's copy
    info = build_all(only=["ptr_ring_test-reorder"], out_dir=tmp_path / "bin",
                     layouts=get("ptr_ring").layouts_of({"variants": ["reorder"], "seed": 5, "layouts": 3}))
    copies = next(b.path for n, b in info.binaries.items() if "@c" in n)
    p = run(bins["batch"], "-s", "64", "-N", "5000", "-r", "2", "-b", "4", "--ring-offset", "128", "--json",
            "--counters", "none", "--with", copies, "--with-copy", "2")
    assert p.returncode == 0, p.stderr
    other = json.loads(p.stdout)["interleaved"][0]
    assert (other["variant"], other["size"], other["batch"], other["ring_offset"], other["repeats"]) == \
        ("reorder", 64, 4, 128, 2)
    bad = run(bins["batch"], "-N", "1000", "--json", "--with", copies, "--with-copy", "9")
    assert bad.returncode == 1 and "--copy: invalid value '9'" in bad.stderr and "ended before it was ready" in bad.stderr


@pytest.mark.parametrize("args, msg", [
    (["--with", "X"], "--with: needs --json"),
    (["--with-copy", "1", "--json"], "--with-copy: no --with before it"),
    (["--turns", "3", "--json"], "--turns: invalid value '3'; allowed: RFD,WFD"),
    (["--turns", "3,4", "--with", "X", "--json"], "--with: not with --turns"),
    (["--with", "", "--json"], "--with: empty path"),
])
def test_bad_turn_options_name_the_option(bins, args, msg):
    p = run(bins["batch"], "-N", "1000", *args)
    assert p.returncode == 2 and msg in p.stderr, p.stderr


def test_too_many_arms_are_refused(bins):
    p = run(bins["batch"], "-N", "1000", "--json", *(["--with", bins["reorder"]] * 8))
    assert p.returncode == 2 and "--with: more than 7 other arms" in p.stderr


def test_an_arm_that_cannot_start_fails_the_trial(bins, tmp_path):
    p = run(bins["batch"], "-N", "1000", "--json", "--with", str(tmp_path / "missing"))
    assert p.returncode == 1 and p.stdout == ""
    assert f"turns: cannot run {tmp_path / 'missing'}" in p.stderr and "exit status 127" in p.stderr


def test_an_arm_that_dies_ends_the_round_at_once(bins):
    """A killed arm's pipes close: the next arm reads end-of-file and the leader reports it,
    long before the turn timeout."""
    proc = subprocess.Popen([bins["batch"], "-N", "200000000", "-r", "4", "--json", "--counters", "none",
                             "--barrier-timeout", "60", "--with", bins["reorder"]],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(0.5)
    kids = (Path("/proc") / str(proc.pid) / "task" / str(proc.pid) / "children").read_text().split()
    assert kids, "the leader started its arm"
    t0 = time.monotonic()
    os.kill(int(kids[0]), signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and out == ""
    assert "turns:" in err and ("ended" in err or "was killed by signal 9" in err), err
    assert time.monotonic() - t0 < 20


def _spec(variant, trial, layout=0, kind="timing"):
    extra = {"layout": layout} if kind == "timing" else {"kind": kind}
    return TrialSpec({"variant": variant, "mode": 0}, trial, False, (1, 1), "same-cpu", extra)


def test_a_block_is_one_entry_led_by_its_first_arm():
    plan = [_spec("b", 0), _spec("a", 0), _spec("a", 1, 1), _spec("b", 1, 1), _spec("a", 0, kind="icount")]
    out = take_turns(plan)
    assert [(s.config["variant"], s.trial) for s in out] == [("b", 0), ("a", 1), ("a", 0)]
    assert [p.config["variant"] for p in out[0].extra["partners"]] == ["a"]
    assert [p.config["variant"] for p in out[1].extra["partners"]] == ["b"]
    assert "partners" not in out[2].extra   # icount trials are never merged


class _Ctx:
    values = {"seed": 1, "layouts": 1, "variants": ["batch", "reorder"]}

    @staticmethod
    def binary(name):
        return Path(__file__)       # any readable file: its hash stands for the arm's binary


def _doc(variant, **more):
    return {"schema": 1, "variant": variant, "count": 10, "ring_offset": 64,
            "iterations": [{"ns_per_op": 1.0, "elapsed_ns": 10.0}], **more}


def test_parse_gives_each_arm_its_rows_and_refuses_a_mismatch():
    exp = get("ptr_ring")()
    lead = dataclasses.replace(_spec("batch", 3), extra={"partners": [_spec("reorder", 3)]})
    good = json.dumps(_doc("batch", interleaved=[_doc("reorder")]))
    rows = exp.parse(lead, good, "", _Ctx)
    assert [r["variant"] for r in rows if "variant" in r] == ["reorder"] and len(rows) == 2
    assert rows[1]["binary_sha256"] and rows[1]["ring_offset"] == 64
    with pytest.raises(ValueError, match="reported 0 interleaved arms, 1 were started"):
        exp.parse(lead, json.dumps(_doc("batch")), "", _Ctx)
    with pytest.raises(ValueError, match="reported variant 7, not 'reorder'"):
        exp.parse(lead, json.dumps(_doc("batch", interleaved=[7])), "", _Ctx)
    with pytest.raises(ValueError, match="reported variant 'prebatch', not 'reorder'"):
        exp.parse(lead, json.dumps(_doc("batch", interleaved=[_doc("prebatch")])), "", _Ctx)


def test_interleave_needs_two_to_eight_arms():
    with pytest.raises(ParamError, match=r"parameter 'interleave': the arms take turns, so it needs 2\.\.8 variants"):
        get("ptr_ring").resolve({"variants": "batch", "interleave": "true", "profile": "smoke"})
    assert get("ptr_ring").resolve({"variants": "batch,reorder", "interleave": "true"})["interleave"] is True


def test_a_run_whose_arms_take_turns(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "variants": "batch,reorder", "governor": "false",
                                             "count": 20000, "trials": 3, "warmup": 1, "repeats": 3,
                                             "layouts": 2, "interleave": "true", "modes": "0"},
                                tmp_path / "run", build=True, progress=False, log=lambda m: None)
    df = rundir.read_raw(res.raw_csv, strict=False)
    assert df["status"].eq("ok").all(), df["stderr_tail"].dropna().tolist()
    # every round holds both arms, each with its own binary and every loop
    per = df.groupby(["round", "variant"]).agg(n=("iteration", "size"), sha=("binary_sha256", "first"),
                                               order=("order", "first"), layout=("layout", "first"))
    assert (per["n"] == 3).all() and len(per) == 2 * 4
    for _, r in per.groupby(level="round"):
        assert r["order"].nunique() == 1 and r["layout"].nunique() == 1 and r["sha"].nunique() == 2
    env = json.loads((res.out_dir / "env.json").read_text())
    shapes = [c["shape"] for cmds in env["measured_commands"].values() for c in cmds]
    assert all("--with" in s and "<with>" in s for s in shapes)
