"""ringlab.provenance and `ringlab provenance`: were A and B really different, and re-measured?"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ringlab import run as runner
from ringlab.lab import cli
from ringlab.report import provenance
from ringlab.system import checkout

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
                                             "warmup": 0, "layouts": 1}, tmp_path / "run", build=False, progress=False,
                                log=lambda m: None)
    return res.out_dir


def _set_build(run_dir: Path, same_sources: bool):
    """Give env.json a ringlab.build-style record with per-binary inputs."""
    env = json.loads((run_dir / "env.json").read_text())
    bins = {}
    for name, b in env["binaries_used"].items():
        variant = name.split("-", 1)[1]
        hdr = "csrc/rings/ptr_ring_batch.h" if same_sources else f"csrc/rings/ptr_ring_{variant}.h"
        content = "bb" * 32 if same_sources else hashlib.sha256(variant.encode()).hexdigest()
        bins[name] = {"name": name, "path": b["path"], "sha256": b["sha256"],
                      "inputs": {"csrc/harness/ptr_ring_main.c": "aa" * 32, hdr: content}}
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
    assert p["code"] == "different code" and p["verdict"] == "different code: different source sets"
    assert p["different_command"] is False
    assert any(e.startswith("same measured command apart from the binary") for e in p["evidence"])
    assert not [x for x in c["problems"] if "dirty" not in x]


def _drop_build(run_dir: Path):
    env = json.loads((run_dir / "env.json").read_text())
    env["build"] = {}
    (run_dir / "env.json").write_text(json.dumps(env))


def test_no_build_run_records_the_checked_source_sets(run_dir):
    """A run without a build records what ringlab.binaries.check_binaries found (declared here)."""
    p = provenance.check(run_dir)["pairs"][0]
    assert p["different_sources"] is True and p["code"] == "different code"


def test_same_sources_and_unknown_sources(run_dir):
    _drop_build(run_dir)
    c = provenance.check(run_dir)       # no build record: sources unknown, said so
    p = c["pairs"][0]
    assert p["different_sources"] is None and p["code"] == "unknown" and "not recorded" in p["verdict"]
    _set_build(run_dir, same_sources=True)   # same file content under other paths: same code
    p = provenance.check(run_dir)["pairs"][0]
    assert p["different_sources"] is False and p["code"] == "same code"
    assert "different binaries built from the same source set" in p["verdict"]


def test_same_binary_flagged(tmp_path, monkeypatch):
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    fake.install(str(build / "bin"), sys.executable, variants=("batch",))
    shutil.copy(build / "bin" / "ptr_ring_test-batch", build / "bin" / "ptr_ring_test-reorder")
    from ringlab.build import binaries
    binaries.declare_built(["ptr_ring_test-reorder"], out_dir=build / "bin")
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "batch,reorder", "modes": "0", "trials": 1, "warmup": 0,
                                             "layouts": 1}, tmp_path / "run", build=False, progress=False, log=lambda m: None)
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
    assert "batch vs reorder: different code: different source sets" in out
    assert "different binaries (" in out and "same measured command apart from the binary" in out
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
    g = checkout.git_info()
    assert len(g["commit"]) == 40 and isinstance(g["dirty"], bool)
    assert all(not f.startswith(" ") for f in g["dirty_files"])
    assert checkout.git_info("/")["commit"] is None


def test_results_only_changes_are_not_dirty(tmp_path):
    g = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*g, "init", "-q"], check=True)
    for f in ("code.py", "results/README.md", "scratch/x/y.txt", "docs/results/a.md"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("1")
    subprocess.run([*g, "add", "."], check=True)
    subprocess.run([*g, "commit", "-qm", "x"], check=True)
    (tmp_path / "results/README.md").write_text("2")
    (tmp_path / "scratch/x/y.txt").write_text("2")
    assert checkout.git_info(tmp_path)["dirty"] is False
    (tmp_path / "docs/results/a.md").write_text("2")  # a results/ folder deeper down is code
    g2 = checkout.git_info(tmp_path)
    assert g2["dirty"] is True and g2["dirty_files"] == ["docs/results/a.md"]
    assert checkout.code_changes(' M "results/odd name"\n M code.py\n') == [" M code.py"]


def _perf_rb_run(tmp_path: Path) -> Path:
    """A perf_rb run folder: base, forward and backward all measured the same syscall_loop."""
    d = tmp_path / "perf"
    d.mkdir()
    sha, src = "17" * 32, "5e" * 32
    params = {"profile": "quick", "trials": 1, "warmup": 0, "repeats": 1, "timeout": 60.0, "seed": 1,
              "counters": True, "governor": False, "disable_boost": False, "icount": False,
              "icount_ops": 1000000, "icount_trials": 2, "variants": ["base", "forward", "backward"],
              "placements": ["split"], "count": 3000000, "perf": "perf"}
    env = {"run_id": "r", "experiment": "perf_rb", "host": "h", "status": "complete", "parameters": params,
           "build": {"compiler": "/usr/bin/gcc", "binaries": {"syscall_loop": {
               "name": "syscall_loop", "path": "/x/build/bin/syscall_loop", "sha256": sha,
               "source_sha256": src, "source_files": {"csrc/workloads/syscall_loop.c": "ab" * 32}}}},
           "binaries_used": {"syscall_loop": {"path": "/x/build/bin/syscall_loop", "sha256": sha}}}
    (d / "env.json").write_text(json.dumps(env))
    cols = ["run_id", "experiment", "host", "variant", "placement", "count", "trial", "status", "timestamp",
            "cpu_req_producer", "cpu_req_consumer", "pair_class", "perf_cpu", "icount_source",
            "binary_sha256", "ns_per_op"]
    lines = [",".join(cols)]
    for i, (v, perf_cpu, ns) in enumerate([("base", "nan", "250.0"), ("forward", "1", "3300.0"),
                                           ("backward", "1", "260.0")]):
        lines.append(",".join(["r", "perf_rb", "h", v, "split", "3000000", "0", "ok",
                               f"2026-01-01T00:00:0{i}Z", "0", "1" if perf_cpu != "nan" else "-1",
                               "same-llc", perf_cpu, "", sha, ns]))
    (d / "raw.csv").write_text("\n".join(lines) + "\n")
    return d


def test_perf_rb_same_binary_different_command(tmp_path):
    c = provenance.check(_perf_rb_run(tmp_path))
    pairs = {(p["a"], p["b"]): p for p in c["pairs"]}
    p = pairs[("base", "forward")]
    assert p["different_binaries"] is False and p["different_sources"] is False
    assert p["different_command"] is True and p["code"] == "different code"
    assert p["verdict"] == "different code: same binary, different measured command"
    ev = " ".join(p["evidence"])
    assert "perf record" in ev and "raw_syscalls" in ev and "<binary>" in ev
    fb = pairs[("backward", "forward")]
    assert fb["code"] == "different code" and "--overwrite" in " ".join(fb["evidence"])
    assert not any("noise" in x for x in c["problems"])
    fwd = c["variants"]["forward"]["command"]
    assert "record" in fwd and fwd[len(fwd) - fwd[::-1].index("--")] == "<binary>"
    assert c["variants"]["base"]["command"][0] == "<binary>"


def test_perf_rb_cli_says_different_code(tmp_path, capsys):
    cli.main(["provenance", str(_perf_rb_run(tmp_path))])
    out = capsys.readouterr().out
    assert "base vs forward: different code: same binary, different measured command" in out
    assert "same binary (171717171717)" in out


needs_cc = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler (gcc) on PATH")


@needs_cc
def test_same_header_content_at_two_paths_is_same_code(tmp_path, monkeypatch):
    """A real build and run: byte-identical headers at two paths are the same code,
    a different header is different code."""
    data = Path(__file__).resolve().parent / "data" / "kernel_headers"
    copy = tmp_path / "other place" / "include" / "linux"
    copy.mkdir(parents=True)
    shutil.copyfile(data / "team_mainline/include/linux/ptr_ring.h", copy / "ptr_ring.h")
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    heads = f"a={data / 'team_mainline'},b={copy / 'ptr_ring.h'},c={data / 'team_v4.8'}"
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "a,b,c", "modes": "0", "trials": 1, "warmup": 0,
                                             "count": 10000, "kernel_headers": heads},
                                tmp_path / "run", build=True, progress=False, log=lambda m: None)
    c = provenance.check(res.out_dir)
    pairs = {(p["a"], p["b"]): p for p in c["pairs"]}
    ab = pairs[("a", "b")]
    assert ab["different_binaries"] is True and ab["different_sources"] is False
    assert ab["different_command"] is False and ab["code"] == "same code"
    assert ab["verdict"] == "same code: different binaries built from the same source set, same measured command"
    assert any(x.startswith("a and b ran the same code") for x in c["problems"])
    for other in (("a", "c"), ("b", "c")):
        p = pairs[other]
        assert p["code"] == "different code" and p["different_sources"] is True
        assert "<kernel header>" in p["differing_sources"]
    assert c["variants"]["a"]["source_sha256"] == c["variants"]["b"]["source_sha256"]


def _ringtest_run(tmp_path: Path, rebuilt: bool = False) -> Path:
    """A two-tree, two-ring ringtest run: one binary per (tree, ring), as the experiment builds them."""
    d = tmp_path / "ringtest"
    d.mkdir()
    sha = {(t, r): hashlib.sha256(f"{t}-{r}".encode()).hexdigest()
           for t in ("old", "new") for r in ("ptr_ring", "virtio_ring_0_9")}
    env = {"run_id": "r", "experiment": "ringtest", "host": "h", "status": "complete",
           "parameters": {"rings": ["ptr_ring", "virtio_ring_0_9"]}}
    (d / "env.json").write_text(json.dumps(env))
    cols = ["run_id", "experiment", "host", "variant", "ring", "trial", "status", "timestamp",
            "binary_sha256", "ns_per_op"]
    lines = [",".join(cols)]
    for i, ((t, r), s) in enumerate(sorted(sha.items())):
        for trial in (0, 1):
            if rebuilt and (t, r) == ("new", "ptr_ring") and trial == 1:
                s = "ee" * 32
            lines.append(",".join(["r", "ringtest", "h", t, r, str(trial), "ok",
                                   f"2026-01-01T00:00:{i}{trial}Z", s, "25.0"]))
    (d / "raw.csv").write_text("\n".join(lines) + "\n")
    return d


def test_multi_ring_ringtest_is_not_a_mid_run_rebuild(tmp_path):
    c = provenance.check(_ringtest_run(tmp_path))
    assert not [p for p in c["problems"] if "rebuilt mid-run" in p], c["problems"]
    assert set(c["variants"]["old"]["programs"]) == {"ptr_ring", "virtio_ring_0_9"}


def test_rebuild_of_one_ring_is_still_flagged(tmp_path):
    c = provenance.check(_ringtest_run(tmp_path, rebuilt=True))
    flagged = [p for p in c["problems"] if "rebuilt mid-run" in p]
    assert flagged == ["variant new (ptr_ring): 2 different binaries during one run (rebuilt mid-run?)"]


# -- multi-layout runs: one layout from several copy-group binaries; runs differing by layout seeds --

ROOT = Path(__file__).resolve().parent.parent
EPYC_LAYOUTS_RUN = ROOT / "results/ptr-ring-reorder/epyc-kvm-2vcpu/20261206T231146Z-95902d"
BETWEEN = ROOT / "results/calibration/epyc-kvm-2vcpu/between/20261204T133052Z-fc1726"


def _copy_run(src: Path, dst: Path) -> Path:
    """raw.csv and env.json of a committed run in a scratch folder (the committed one stays as it is)."""
    dst.mkdir()
    for name in ("raw.csv", "env.json"):
        shutil.copy(src / name, dst / name)
    return dst


def test_committed_multi_layout_run_is_not_a_mid_run_rebuild(capsys):
    c = provenance.check(EPYC_LAYOUTS_RUN)
    assert not [p for p in c["problems"] if "rebuilt mid-run" in p], c["problems"][:3]
    # the staged run's second stage rebuilt the partial copy group c96-110 as c96-127
    assert c["variants"]["batch"]["regrouped"] == [str(k) for k in range(96, 111)]
    assert cli.main(["provenance", str(EPYC_LAYOUTS_RUN)]) == 0
    out = capsys.readouterr().out
    assert "rebuilt mid-run" not in out
    assert "batch: layouts 96, 97" in out and "a later stage rebuilt the last, partial group" in out


def test_planted_second_binary_for_one_variant_and_layout_still_warns(tmp_path):
    import pandas as pd
    run = _copy_run(EPYC_LAYOUTS_RUN, tmp_path / "run")
    env = json.loads((run / "env.json").read_text())
    shas = env["raw_values"]["binary_sha256"]
    shas.append("ee" * 32)                         # a binary the build never recorded
    (run / "env.json").write_text(json.dumps(env))
    raw = pd.read_csv(run / "raw.csv", keep_default_na=False, dtype=str)
    rows = raw.index[(raw["variant"] == "batch") & (raw["layout"] == "5")]
    raw.loc[rows[-1], "binary_sha256_ref"] = str(len(shas) - 1)   # its last trial ran another binary
    raw.to_csv(run / "raw.csv", index=False)
    c = provenance.check(run)
    rebuilt = [p for p in c["problems"] if "rebuilt mid-run" in p]
    assert rebuilt == ["variant batch (5): 2 different binaries during one run (rebuilt mid-run?)"]


def test_regrouped_layout_from_other_sources_still_warns(tmp_path):
    run = _copy_run(EPYC_LAYOUTS_RUN, tmp_path / "run")
    env = json.loads((run / "env.json").read_text())
    name = next(n for n in env["build"]["binaries"] if n.startswith("ptr_ring_test-batch@c96-127-"))
    env["build"]["binaries"][name]["source_sha256"] = "dd" * 32   # the later stage built other code
    (run / "env.json").write_text(json.dumps(env))
    c = provenance.check(run)
    rebuilt = sorted(p for p in c["problems"] if "rebuilt mid-run" in p)
    assert len(rebuilt) == 15 and all(p.startswith("variant batch (") for p in rebuilt)
    assert "variant batch (108): 2 different binaries during one run (rebuilt mid-run?)" in rebuilt


def test_against_runs_differing_only_in_layout_seeds_says_so(capsys):
    a, b = BETWEEN / "session-1", BETWEEN / "session-2"
    c = provenance.compare_runs(a, b)
    assert c["problems"] and all("only the layout seeds differ" in p for p in c["problems"]), c["problems"]
    assert not [p for p in c["problems"] if "flags/compiler" in p]
    assert all(v["only_layout_seeds_differ"] for v in c["variants"].values())
    cli.main(["provenance", str(a), "--against", str(b)])
    assert "only the layout seeds differ" in capsys.readouterr().out


def test_against_with_other_flags_still_blames_flags(tmp_path):
    a = _copy_run(BETWEEN / "session-1", tmp_path / "a")
    env = json.loads((a / "env.json").read_text())
    env["build"]["cflags"] = env["build"]["cflags"] + ["-O3"]
    (a / "env.json").write_text(json.dumps(env))
    c = provenance.compare_runs(a, BETWEEN / "session-2")
    assert c["problems"] and all("only flags/compiler changed" in p for p in c["problems"]), c["problems"]
