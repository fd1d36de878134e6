"""One run id per run: a run folder named by a run id (what ringlab reproduce and the
notebooks make) gives env.json and raw.csv that same run id."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from ringlab import rundir
from ringlab import run as runner
from ringlab.lab.reproduce import run_dir_for
from ringlab.run.prepare import RUN_ID_RE, run_id_for

sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes"))
import fake_ptr_ring_test as fake  # noqa: E402


def _run(tmp_path, monkeypatch, out_dir: Path) -> Path:
    build = tmp_path / "build"
    fake.install(str(build / "bin"), sys.executable)
    monkeypatch.setenv("RINGLAB_BUILD", str(build))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    res = runner.run_experiment("ptr_ring", {"profile": "smoke", "cpus": "none", "governor": "false",
                                             "variants": "batch,reorder", "modes": "0", "trials": 1,
                                             "warmup": 0}, out_dir, build=False, progress=False,
                                log=lambda m: None)
    return res.out_dir


def test_notebook_folder_name_is_the_run_id(tmp_path, monkeypatch):
    folder = run_dir_for("ptr-ring-reorder", "h", root=tmp_path / "scratch")
    out = _run(tmp_path, monkeypatch, folder)
    env = json.loads((out / "env.json").read_text())
    assert env["run_id"] == folder.name
    assert set(rundir.read_raw(out / "raw.csv", strict=False)["run_id"].astype(str)) == {folder.name}


def test_a_folder_not_named_by_a_run_id_gets_a_new_one(tmp_path):
    assert run_id_for(tmp_path / "20260101T000000Z-abc123") == "20260101T000000Z-abc123"
    rid = run_id_for(tmp_path / "my-run")
    assert RUN_ID_RE.match(rid) and rid != "my-run"
    assert RUN_ID_RE.match(run_id_for(None))
