"""Fresh layouts every run: a run given no seed draws one and records it; ``-p seed`` reproduces it."""
from __future__ import annotations

import importlib
import json
import sys

import pandas as pd
import pytest

from ringlab import rundir
from ringlab import run as runner
from ringlab.errors import ParamError
prepare = importlib.import_module("ringlab.run.prepare")   # the module (ringlab.run.prepare names a function too)

PARAMS = {"profile": "smoke", "cpus": "none", "governor": "false", "variants": "batch,reorder", "modes": "0",
          "trials": 2, "warmup": 0, "layouts": 2, "quiet": "off"}
COLS = ["order", "variant", "round", "layout", "ring_offset", "env_pad", "binary_sha256"]


@pytest.fixture
def drawn(fakebin, monkeypatch):
    """Runs draw their seed for real; the mock binaries of each drawn seed's layouts are written
    before the run looks for them.  Returns the seeds drawn, in order."""
    import fake_ptr_ring_test as fake
    monkeypatch.delenv(prepare.SEED_VAR, raising=False)
    seeds, draw = [], prepare.draw_seed

    def draw_and_install():
        seed, source = draw()
        seeds.append(seed)
        fake.install(str(fakebin), sys.executable, seeds=(1, 11, seed), layouts=2)
        return seed, source

    monkeypatch.setattr(prepare, "draw_seed", draw_and_install)
    return seeds


def _run(out, **extra):
    res = runner.run_experiment("ptr_ring", {**PARAMS, **extra}, out, build=False, progress=False,
                                log=lambda m: None)
    assert res.exit_code == 0
    return json.loads(res.env_json.read_text()), rundir.read_raw(res.raw_csv, strict=False).sort_values("order")[COLS]


def test_default_runs_draw_fresh_layouts_and_seed_reproduces_them(drawn, tmp_path):
    env_a, raw_a = _run(tmp_path / "a")
    env_b, raw_b = _run(tmp_path / "b")
    assert len(drawn) == 2 and drawn[0] != drawn[1]
    for env, seed in ((env_a, drawn[0]), (env_b, drawn[1])):
        assert env["parameters"]["seed"] == seed and env["plan"]["seed"] == seed
        assert env["plan"]["seed_source"] == "drawn"
    # other layouts: other binaries (the layout builds are named by their pad and alignment)
    assert set(env_a["binaries_used"]) != set(env_b["binaries_used"])
    assert set(raw_a["binary_sha256"]) != set(raw_b["binary_sha256"])

    env_c, raw_c = _run(tmp_path / "c", seed=str(drawn[0]))
    assert len(drawn) == 2                        # given: nothing drawn
    assert env_c["plan"]["seed"] == drawn[0] and env_c["plan"]["seed_source"] == "given"
    assert env_c["binaries_used"] == env_a["binaries_used"]
    assert raw_c.values.tolist() == raw_a.values.tolist()   # same order, layouts and data layouts

    # --resume reuses the recorded seed, draws none
    res = runner.run_experiment("ptr_ring", {}, tmp_path / "a", resume=True, build=False, progress=False,
                                log=lambda m: None)
    env = json.loads(res.env_json.read_text())
    assert len(drawn) == 2 and res.already_done == len(raw_a)
    assert env["plan"]["seed"] == drawn[0] and env["plan"]["seed_source"] == "drawn"
    assert env["binaries_used"] == env_a["binaries_used"]


def test_seed_variable_fixes_the_seed_and_is_checked(monkeypatch):
    monkeypatch.setenv(prepare.SEED_VAR, "11")
    assert prepare.draw_seed() == (11, "env")
    monkeypatch.setenv(prepare.SEED_VAR, "-3")
    with pytest.raises(ParamError, match="RINGLAB_SEED"):
        prepare.draw_seed()
    monkeypatch.delenv(prepare.SEED_VAR)
    draws = {prepare.draw_seed() for _ in range(8)}
    assert len(draws) > 1 and all(src == "drawn" and 0 <= s < 2**32 for s, src in draws)


def test_notebook_default_seed_is_drawn_and_a_given_one_kept(monkeypatch):
    """Notebooks default to seed -1: each run draws its own (recorded), N reproduces a run."""
    from ringlab.lab import notebook as rn
    monkeypatch.delenv("RINGLAB_SEED", raising=False)
    a = rn.params("ptr_ring", profile="smoke", seed=-1)["seed"]
    b = rn.params("ptr_ring", profile="smoke", seed=-1)["seed"]
    assert a != b and a >= 0 and b >= 0
    assert rn.params("ptr_ring", profile="smoke", seed=7)["seed"] == 7
    monkeypatch.setenv("RINGLAB_SEED", "5")
    assert rn.params("ptr_ring", profile="smoke", seed=-1)["seed"] == 5
