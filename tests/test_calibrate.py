"""`ringlab calibrate`: sigma_L and the machine states from an A/A run of the layout design.

The A/A runs are simulated with ringlab.simulate.noise (a known sigma_L, known states) and written
as raw.csv run folders; the real run path is exercised by a smoke test that needs ptr_ring's
``layouts`` parameter and a kernel header."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ringlab.lab import cli
from ringlab.rundir import calibration as cal_files
from ringlab.stats import calibration as cal
from ringlab.simulate import noise
from ringlab.stats import plan

#: fields every calibration.json holds (readers rely on them)
FIELDS = ("calibration_version", "host", "date_utc", "run_id", "ringlab_commit", "layouts", "rounds",
          "sigma_layout", "sigma_layout_ci", "layout_share", "round_sd", "seconds_per_round",
          "states", "run_dir", "metric")

TRUE_SIGMA = 0.03


def aa_frame(K=8, R=30, sigma_layout=TRUE_SIGMA, seed=0, effect=(0.0, 0.0), **kw) -> pd.DataFrame:
    """A simulated A/A (or A/B) run as a raw.csv frame: arms a and b, column ``layout``."""
    sim = noise.simulate_ab(K, R, effect, sigma_layout, rng=np.random.default_rng(seed), **kw)
    n = len(sim["order"])
    return pd.DataFrame({
        "run_id": "20261201T000000Z-aa0000", "experiment": "ptr_ring", "host": "calhost",
        "variant": np.where(sim["arm"] == 1, "b", "a"), "mode": 0, "layout": sim["layout"],
        "trial": sim["round"], "round": sim["round"], "iteration": 0, "order": sim["order"],
        "warmup": False, "status": "ok", "exit_code": 0, "stderr_tail": "",
        "timestamp": "2026-12-01T00:00:00Z", "ns_per_op": np.exp(sim["log_y"]), "wall_s": np.full(n, 0.25)})


def write_run(path, df):
    path.mkdir(parents=True)
    df.to_csv(path / "raw.csv", index=False)
    return path


def test_sigma_layout_recovered_and_covered():
    """Over 12 simulated A/As of 8 layouts x 30 rounds the 95% interval of sigma_L holds the true
    value in >= 9 (its coverage is 95%; P(<= 8 of 12) < 0.002), and the median estimate is
    within 30% of the truth."""
    got, hit = [], 0
    for seed in range(12):
        r = cal.calibrate_frame(aa_frame(seed=seed))
        lo, hi = r["sigma_layout_ci"]
        hit += lo <= TRUE_SIGMA <= hi
        got.append(r["sigma_layout"])
        assert r["layouts"] == 8 and r["rounds"] == 240
    assert hit >= 9
    assert abs(np.median(got) / TRUE_SIGMA - 1) < 0.30


def test_no_layout_spread_reads_small():
    r = cal.calibrate_frame(aa_frame(K=16, sigma_layout=0.0, seed=3))
    assert r["sigma_layout"] < 0.01
    assert r["sigma_layout_ci"][0] == 0.0


def test_states_recovered():
    """Known states: gap ln(5.3/3.8), mean durations 20 / 35 trials (slow share 0.64).  From a
    long A/A (16 layouts x 60 rounds = 1920 trials) the two states are found, the gap within
    15%, the slow share within 0.15 and each mean duration within a factor 1.7."""
    r = cal.calibrate_frame(aa_frame(K=16, R=60, seed=5))
    st = r["states"]
    assert st["n_states"] == 2
    gap = st["levels"][1] - st["levels"][0]
    assert abs(gap / noise.STATE_GAP - 1) < 0.15
    assert abs(st["slow_share"] - 35 / 55) < 0.15
    for got, want in zip(st["mean_duration"], noise.DURATIONS):
        assert want / 1.7 < got < want * 1.7


def test_one_state_machine():
    r = cal.calibrate_frame(aa_frame(seed=1, state_gap=0.0))
    assert r["states"]["n_states"] == 1


def test_round_sd_and_seconds():
    r = cal.calibrate_frame(aa_frame(seed=2, state_gap=0.0))
    # t4 noise of SD 2% per trial: the per-round log ratio's SD is 2% x sqrt(2), robust SD a bit less
    assert 0.015 < r["round_sd"] < 0.035
    assert r["seconds_per_round"] == pytest.approx(0.5)


def test_calibration_json_layout(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RINGLAB_HOST", "calhost")
    run = write_run(tmp_path / "aa", aa_frame(seed=4))
    out = tmp_path / "cal" / "calibration" / "calhost"
    assert cli.main(["calibrate", "--from", str(run), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "sigma_L:" in text and "states:" in text
    doc = json.loads((out / "calibration.json").read_text())
    assert set(FIELDS) <= set(doc)
    assert doc["host"] == "calhost" and doc["calibration_version"] == cal.CALIBRATION_VERSION
    assert doc["run_dir"] == str(run) and doc["layouts"] == 8
    lo, hi = doc["sigma_layout_ci"]
    assert lo <= doc["sigma_layout"] <= hi
    assert not list(out.glob("*.tmp*"))                      # written atomically: no leftovers
    found = cal_files.find_calibration("calhost", tmp_path / "cal")
    assert found["sigma_layout"] == doc["sigma_layout"] and found["path"].endswith("calibration.json")
    assert cal_files.find_calibration("otherhost", tmp_path / "cal") is None
    # per mode, the variance and cost of each level (the build cost is not measured with --from)
    lv = doc["levels"]["0"] if "0" in doc["levels"] else next(iter(doc["levels"].values()))
    assert set(lv["upper"]) == {"layout", "process", "iteration"}
    assert lv["upper"]["layout"] >= lv["variance"]["layout"] >= 0
    assert any("build cost not measured" in n for n in lv["notes"])
    assert "layout <" in text and "process <" in text


@pytest.mark.parametrize("argv, what", [
    (["calibrate", "--from", "/nonexistent/run"], "raw.csv"),
    (["calibrate", "--from", "RUN", "-p", "count", "5"], "--from"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, what):
    argv = [str(tmp_path) if a == "RUN" else a for a in argv]
    assert cli.main(argv + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and what in err


def test_run_without_layout_column_is_refused(tmp_path, capsys):
    df = aa_frame(seed=0).drop(columns=["layout"])
    run = write_run(tmp_path / "aa", df)
    assert cli.main(["calibrate", "--from", str(run), "--out", str(tmp_path / "o")]) == 2
    assert "layout" in capsys.readouterr().err


def test_planning_more_layouts_for_larger_sigma_and_smaller_effect():
    base = plan.layout_plan(5.0, 0.02, 0.03)
    assert base.layouts >= plan.LEAST_LAYOUTS_MIN
    assert plan.layout_plan(5.0, 0.05, 0.03).layouts > base.layouts
    assert plan.layout_plan(2.0, 0.02, 0.03).layouts > base.layouts
    assert base.trials == base.layouts * base.rounds_per_layout
    # the smallest K: K - 1 does not satisfy the sizing inequality
    from scipy import stats as sst
    k, var = base.layouts, 0.02 ** 2 + 0.03 ** 2 / 20
    if k > plan.LEAST_LAYOUTS_MIN:
        q = sst.t.ppf(0.975, k - 2) + sst.t.ppf(0.8, k - 2)
        assert k - 1 < q * q * var / math.log(1.05) ** 2


def test_real_calibration_run_smoke(tmp_path, monkeypatch):
    """The wired run path: ptr_ring's A/A with layouts, if this checkout has them."""
    from ringlab.sources import kernel_header
    from ringlab.studies import calibration as study
    if not study.layouts_supported():
        pytest.skip("ptr_ring has no 'layouts' parameter in this checkout yet")
    if not kernel_header.header_trees():
        pytest.skip("no kernel header tree (`ringlab env --headers` finds none)")
    monkeypatch.setenv("RINGLAB_HOST", "calhost")
    path, doc = study.calibrate(tmp_path / "cal", {"profile": "smoke", "trials": "6"})
    assert path.is_file() and doc["layouts"] >= 2
