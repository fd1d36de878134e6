"""ringlab fleet on a real one-node Slurm cluster (.ci/slurm/start.sh): a job runs and delivers
its run folder; scancel mid-run leaves it interrupted and ``fleet submit --resume`` completes it
with no trial twice.  Skips with the reason where the cluster cannot be started."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM_DIR = os.environ.get("RINGLAB_SLURM_DIR", "/tmp/ringlab-slurm")
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from cli_runs import KEY  # noqa: E402  (the trial key of a ptr_ring raw.csv)
from ringlab import rundir

RUN = ["run", "ptr_ring", "--no-build", "--no-progress", "-p", "profile", "smoke", "-p", "modes", "0",
       "-p", "variants", "batch,reorder"]


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("Slurm: not root (the one-node cluster starts slurmd as root)")
    p = subprocess.run(["bash", str(ROOT / ".ci/slurm/start.sh")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "RINGLAB_SLURM_DIR": SLURM_DIR})
    if p.returncode != 0:
        pytest.skip("Slurm: " + " ".join((p.stderr or p.stdout).split())[:300])
    return f"{SLURM_DIR}/slurm.conf"


@pytest.fixture
def env(cluster, fakebin, tmp_path):
    return {**os.environ, "SLURM_CONF": cluster, "PYTHONPATH": str(ROOT)}


def ringlab(env, *argv, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "ringlab", *argv], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert not check or p.returncode == 0, p.stderr
    return p


def wait_done(env, fleet_id: str, limit: float = 90) -> str:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        out = ringlab(env, "fleet", "status", fleet_id).stdout
        if any(s in out for s in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")):
            return out
        time.sleep(1)
    raise AssertionError(f"fleet {fleet_id} not done after {limit} s:\n{out}")


def submit(env, *extra) -> str:
    node = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()
    p = ringlab(env, "fleet", "submit", "--nodes", node, "--time", "5", "--allow-dirty", *extra,
                "--", *RUN)
    return p.stdout.strip()


def fleet_doc(env, fleet_id):
    return json.loads((Path(env["RINGLAB_RESULTS"]) / "fleet" / fleet_id / "fleet.json").read_text())


def test_fleet_job_delivers_its_run(env):
    fid = submit(env)
    wait_done(env, fid)
    p = ringlab(env, "fleet", "collect", fid, check=False)
    assert p.returncode == 0 and "1 of 1 hosts delivered complete runs" in p.stdout, p.stdout + p.stderr
    doc = fleet_doc(env, fid)
    (node, entry), = doc["nodes"].items()
    run = Path(entry["run_dir"])
    e = json.loads((run / "env.json").read_text())
    assert e["status"] == "complete" and e["host"] == entry["host"]
    assert doc["commit"] in json.dumps(e.get("git")), e.get("git")
    assert run.parent.parent.parent == Path(env["RINGLAB_RESULTS"])
    assert (Path(env["RINGLAB_RESULTS"]) / "README.md").is_file()


def test_scancel_leaves_interrupted_and_resume_completes(env):
    slow = {**env, "FAKE_SLEEP": "0.5"}
    fid = submit(slow)
    doc = fleet_doc(env, fid)
    (node, entry), = doc["nodes"].items()
    run = Path(entry["run_dir"])
    end = time.monotonic() + 60
    while time.monotonic() < end and not ((run / "raw.csv").is_file() and len((run / "raw.csv").read_text().splitlines()) > 2):
        time.sleep(0.5)
    subprocess.run(["scancel", entry["jobs"][-1]], env=env, check=True)
    wait_done(env, fid)
    time.sleep(2)
    st = json.loads((run / "env.json").read_text())["status"]
    from ringlab.rundir import RunFolder
    assert RunFolder(run).status().state == "interrupted", st
    ringlab(slow, "fleet", "submit", "--resume", fid)
    assert len(fleet_doc(env, fid)["nodes"][node]["jobs"]) == 2
    end = time.monotonic() + 90
    while time.monotonic() < end and RunFolder(run).status().state != "complete":
        time.sleep(1)
    assert RunFolder(run).status().state == "complete"
    df = rundir.read_raw(run / "raw.csv", strict=False)
    assert not df.duplicated(KEY).any()
    assert "1 of 1 hosts" in ringlab(env, "fleet", "collect", fid, check=False).stdout
