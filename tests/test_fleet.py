"""ringlab fleet without a cluster: sbatch argv, status parsing, collect's verdicts, dirty-tree
refusal and resume's choice, with fake sbatch/sacct/squeue/scancel/sinfo (tests/fakes/fake_slurm)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ringlab.errors import ParamError
from ringlab.lab import cli, fleet
from ringlab.lab.fleet import record, slurm
from ringlab.lab.fleet.submit import host_of

FAKES = Path(__file__).resolve().parent / "fakes" / "fake_slurm"

SACCT = """101|ringlab-a|a|COMPLETED|0:0|00:01:02
101.batch|batch|a|COMPLETED|0:0|00:01:02
102|ringlab-b|b|TIMEOUT|0:15|00:10:00
102.batch|batch|b|CANCELLED|0:15|00:10:01
103|ringlab-c|c|CANCELLED by 0|0:0|00:00:03
"""
SQUEUE = "104|ringlab-d|d|RUNNING|0:42\n105|ringlab-e||PENDING|0:00\n"


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    d = tmp_path / "slurm"
    d.mkdir()
    monkeypatch.setenv("FAKE_SLURM_DIR", str(d))
    monkeypatch.setenv("PATH", f"{FAKES}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("RINGLAB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(record, "git_commit", lambda checkout, allow_dirty: ("c0ffee" * 6 + "abcd", False))
    (d / "sinfo.txt").write_text("a\nb\nc\n")
    return d


def calls(d: Path, tool: str) -> list[list[str]]:
    return [c[1:] for c in map(json.loads, (d / "calls.jsonl").read_text().splitlines()) if c[0] == tool]


def write_env(run: Path, status: str, reason: str = "") -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "env.json").write_text(json.dumps({"status": status, "experiment": "ptr_ring",
                                              "status_reason": reason}))


def test_sbatch_argv_is_one_exclusive_node_with_logs(tmp_path):
    argv = slurm.sbatch_argv(tmp_path / "a.sh", "n1", "ringlab-n1", tmp_path, "30", partition="bench")
    assert argv[0] == "sbatch" and argv[-1] == str(tmp_path / "a.sh")
    for a in ("--exclusive", "--nodelist=n1", "--time=30", "--job-name=ringlab-n1", "--partition=bench",
              f"--output={tmp_path}/%x-%j.out", f"--error={tmp_path}/%x-%j.err"):
        assert a in argv
    assert argv[argv.index("-N") + 1] == "1"
    with pytest.raises(ParamError, match="--time"):
        slurm.sbatch_argv(tmp_path / "a.sh", "n1", "x", tmp_path, "soon")


def test_parse_sacct_skips_steps_and_reads_states():
    s = slurm.parse_sacct(SACCT)
    assert sorted(s) == ["101", "102", "103"]
    assert (s["102"].state, s["102"].exit_code, s["102"].node) == ("TIMEOUT", "0:15", "b")
    assert s["103"].state == "CANCELLED" and s["103"].finished
    q = slurm.parse_squeue(SQUEUE)
    assert q["104"].state == "RUNNING" and not q["104"].finished and q["105"].node == ""


def test_status_falls_back_to_jobcomp_then_squeue(fake_slurm):
    (fake_slurm / "squeue.txt").write_text(SQUEUE)
    s = slurm.job_states(["104", "105", "999"])
    assert {j: v.source for j, v in s.items()} == {"104": "squeue", "105": "squeue"}
    (fake_slurm / "jobcomp.txt").write_text(SACCT)
    s = slurm.job_states(["101", "104"])
    assert s["101"].source == "jobcomp" and s["104"].source == "squeue"
    (fake_slurm / "sacct.txt").write_text(SACCT)
    assert slurm.job_states(["102"])["102"].source == "sacct"


def test_partition_nodes_with_constraint(fake_slurm):
    (fake_slurm / "sinfo.txt").write_text("a|x86,smt\nb|arm64\nc|x86\na|x86,smt\n")
    assert slurm.partition_nodes("bench", "x86") == ["a", "c"]
    assert slurm.partition_nodes("bench", "x86&smt") == ["a"]
    assert calls(fake_slurm, "sinfo")[-1] == ["-N", "-h", "-p", "bench", "-o", "%N|%f"]


def submit_run(fake_slurm, nodes=("a", "b")) -> dict:
    return fleet.submit(list(nodes), ["--", "run", "ptr_ring", "-p", "profile", "smoke"], "20",
                        log=lambda m: None)


def test_submit_records_commit_nodes_jobs_and_scripts(fake_slurm, tmp_path):
    doc = submit_run(fake_slurm)
    saved = record.load(doc["fleet_id"])
    assert saved["commit"].startswith("c0ffee") and saved["python"] == sys.executable
    assert {n: e["jobs"] for n, e in saved["nodes"].items()} == {"a": ["101"], "b": ["102"]}
    assert saved["nodes"]["a"]["run_dir"].startswith(str(tmp_path / "results" / "ptr-ring" / "a") + "/")
    sb = calls(fake_slurm, "sbatch")
    assert [a for a in sb[0] if a.startswith("--nodelist")] == ["--nodelist=a"]
    script = Path(sb[1][-1]).read_text()
    assert f"--out {saved['nodes']['b']['run_dir']}" in script and "--resume" not in script
    assert f"exec {sys.executable} -m ringlab run ptr_ring" in script and "RINGLAB_HOST=b" in script


def test_submit_reproduce_passes_host_and_notebooks(fake_slurm):
    doc = fleet.submit(["a"], ["reproduce", "--only", "10", "--profile", "smoke"], "20", log=lambda m: None)
    script = Path(calls(fake_slurm, "sbatch")[0][-1]).read_text()
    assert "reproduce --profile smoke --only 10-ptr-ring-reorder --host a" in script
    assert doc["kind"] == "reproduce"


@pytest.mark.parametrize("argv, match", [
    (["--nodes", "", "--", "run", "ptr_ring"], "empty node list"),
    (["--nodes", "zz", "--", "run", "ptr_ring"], "unknown node 'zz'"),
    (["--nodes", "a", "--", "run", "ptr_ring", "--out", "x"], "--out is set by ringlab fleet"),
    (["--nodes", "a", "--", "ls"], "COMMAND"),
    (["--nodes", "a", "--", "reproduce", "--only", "nope"], "only"),
    (["--nodes", "a", "--time", "later", "--", "run", "ptr_ring"], "--time"),
])
def test_bad_input_exits_2_in_one_line(fake_slurm, capsys, argv, match):
    assert cli.main(["fleet", "submit", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and len(err.splitlines()) == 1


def test_no_sbatch_on_path_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert cli.main(["fleet", "submit", "--nodes", "a", "--", "run", "ptr_ring"]) == 2
    assert "'sbatch' not found" in capsys.readouterr().err


def test_dirty_tree_is_refused_unless_allowed(tmp_path):
    g = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*g, "init", "-q"], check=True)
    (tmp_path / "f").write_text("1")
    subprocess.run([*g, "add", "f"], check=True)
    subprocess.run([*g, "commit", "-qm", "x"], check=True)
    commit, dirty = record.git_commit(tmp_path, False)
    assert len(commit) == 40 and not dirty
    (tmp_path / "f").write_text("2")
    with pytest.raises(ParamError, match="uncommitted changes.*--allow-dirty"):
        record.git_commit(tmp_path, False)
    assert record.git_commit(tmp_path, True) == (commit, True)


def test_runs_under_results_and_scratch_are_not_code_changes(tmp_path):
    g = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*g, "init", "-q"], check=True)
    for f in ("f", "results/README.md", "scratch/keep"):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("1")
    subprocess.run([*g, "add", "."], check=True)
    subprocess.run([*g, "commit", "-qm", "x"], check=True)
    (tmp_path / "results/README.md").write_text("2")
    (tmp_path / "scratch/keep").write_text("2")
    (tmp_path / "results/new-run").mkdir()
    (tmp_path / "results/new-run/env.json").write_text("{}")
    commit, dirty = record.git_commit(tmp_path, False)
    assert not dirty
    (tmp_path / "resultsx").write_text("1")  # untracked, a sibling name: still not dirty
    assert record.git_commit(tmp_path, False) == (commit, False)
    (tmp_path / "f").write_text("2")
    with pytest.raises(ParamError, match="uncommitted changes.*f"):
        record.git_commit(tmp_path, False)


def test_collect_verdicts_and_why(fake_slurm, tmp_path, capsys):
    doc = submit_run(fake_slurm, ("a", "b", "c"))
    runs = {n: Path(e["run_dir"]) for n, e in doc["nodes"].items()}
    write_env(runs["a"], "complete")
    write_env(runs["b"], "running")            # killed by the time limit: no lock held
    (record.fleet_dir(doc["fleet_id"]) / "ringlab-b-102.err").write_text(
        "slurmstepd: error: *** JOB 102 CANCELLED DUE TO TIME LIMIT ***\n\n")
    (fake_slurm / "jobcomp.txt").write_text(SACCT)
    _, vs, index = fleet.collect(doc["fleet_id"])
    v = {x.node: x for x in vs}
    assert v["a"].verdict == "complete" and index == tmp_path / "results" / "README.md"
    assert v["b"].verdict == "failed" and "interrupted" in v["b"].why and "TIMEOUT" in v["b"].why
    assert "TIME LIMIT" in v["b"].why
    assert v["c"].verdict == "missing" and "no run folder" in v["c"].why
    assert cli.main(["fleet", "collect", doc["fleet_id"]]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 hosts delivered complete runs" in out and "FAILED" in out


def test_resume_requeues_only_the_missing_work(fake_slurm):
    doc = submit_run(fake_slurm, ("a", "b", "c"))
    runs = {n: Path(e["run_dir"]) for n, e in doc["nodes"].items()}
    write_env(runs["a"], "complete")
    write_env(runs["b"], "interrupted")
    (fake_slurm / "squeue.txt").write_text("103|ringlab-c|c|PENDING|0:00\n")
    fleet.resume(doc["fleet_id"], log=lambda m: None)
    sb = calls(fake_slurm, "sbatch")
    assert len(sb) == 4 and "--nodelist=b" in sb[3]
    script = Path(sb[3][-1]).read_text()
    assert f"--out {runs['b']} --resume" in script
    saved = record.load(doc["fleet_id"])
    assert saved["nodes"]["b"]["jobs"] == ["102", "104"] and saved["submissions"][-1]["resume"]
    (fake_slurm / "squeue.txt").write_text("")      # c's job ended without a run folder
    fleet.resume(doc["fleet_id"], log=lambda m: None)
    script = Path(calls(fake_slurm, "sbatch")[-1][-1]).read_text()
    assert "--nodelist=c" in calls(fake_slurm, "sbatch")[-1] and "--resume" not in script


def test_host_of_makes_node_names_host_ids():
    assert host_of("Node_07.cluster.lab") == "node-07"
