"""Notebook 11's study of seed 003: the sub-runs (lock arm, batch sweep, callgrind count) and the
hosts side by side."""
import pandas as pd

from ringlab.studies import batch_zeroing as bz
from synth import make_raw


def _write(d, **kw):
    d.mkdir(parents=True, exist_ok=True)
    make_raw(variants=("prebatch", "batch"), trials=10, **kw).to_csv(d / "raw.csv", index=False)
    return d


def _notebook_run(root, host="hostA"):
    run = _write(root / bz.EXPERIMENT / host / "20260102T000000Z-aaaaaa", effects={"batch": -0.08},
                 params={"mode": [2], "size": [16, 1024], "batch": [0], "lock": [False]}, seed=1)
    _write(run / bz.LOCK_DIR, effects={"batch": -0.02}, params={"mode": [2], "size": [16, 1024], "batch": [0],
                                                                "lock": [True]}, seed=2)
    for k, b in enumerate((4, 64)):
        _write(run / bz.batch_dir(b), effects={"batch": -0.05},
               params={"mode": [2], "size": [1024], "batch": [b], "lock": [False]}, seed=3 + k)
    return run


def test_effects_cover_the_lock_arm_and_the_batch_sweep(tmp_path):
    run = _notebook_run(tmp_path)
    assert list(bz.arm_runs(run)) == ["sweep", "lock on", "batch 4", "batch 64"]
    rows = bz.effects(run, "hostA")
    assert list(rows["arm"]) == ["sweep", "sweep", "lock on", "lock on", "batch 4", "batch 64"]
    assert list(rows["batch"]) == [1, 16, 1, 16, 4, 64], "the batch the ring used (1 when 16 > size/2)"
    assert list(rows["lock"]) == ["off", "off", "on", "on", "off", "off"]
    assert (rows.loc[rows["arm"] == "sweep", "effect_pct"] > 0).all(), "+ = batch needs less time"
    assert rows["expected_pct"].round(1).eq(8.0).all(), "seed 003's 1.84 -> 2.00 Mpps: 8% less time"


def test_hosts_side_by_side_with_their_noise_floor(tmp_path):
    _notebook_run(tmp_path, "hostA")
    other = _write(tmp_path / bz.EXPERIMENT / "hostB" / "20260103T000000Z-bbbbbb", effects={"batch": 0.05},
                   params={"mode": [2], "size": [16, 1024]}, seed=9)
    cal = tmp_path / "calibration" / "hostB"
    cal.mkdir(parents=True)
    (cal / "calibration.json").write_text('{"sigma_layout": 0.01, "round_sd": 0.02, "aa_ci": [-0.06, 0.05]}')
    assert bz.committed_sweeps(tmp_path, exclude="hostA") == {"hostB": other}
    rows, noise = bz.host_effects(tmp_path / bz.EXPERIMENT / "hostA" / "20260102T000000Z-aaaaaa", "hostA",
                                  root=tmp_path)
    assert sorted(rows["host"].unique()) == ["hostA", "hostB"] and noise["hostA"] is None
    assert abs(noise["hostB"] - 5.82) < 0.01, "the larger side of the A/A CI (log scale), in percent"
    t = bz.hosts_table(rows, noise)
    assert list(t["size"]) == [16, 1024] and list(t["batch"]) == [1, 16]
    assert any(c.startswith("hostB: effect (+ = batch faster)") for c in t.columns)


def test_instruction_table_from_the_callgrind_run(tmp_path):
    run = _notebook_run(tmp_path)
    d = run / bz.ICOUNT_DIR
    d.mkdir()
    make_raw(variants=("prebatch", "batch"), trials=2, params={"mode": [0], "size": [16, 1024]},
             deterministic_icount={"prebatch": 33.0, "batch": 49.5}).to_csv(d / "raw.csv", index=False)
    t = bz.instruction_table(run)
    assert list(t["size"]) == [16, 16, 1024, 1024]
    b16 = t[(t["size"] == 16) & (t["variant"] == "batch")].iloc[0]
    assert b16["batch"] == 1 and b16["instructions/op"] == 49.5 and b16["vs prebatch"] == "+50.0%"
    assert bz.instruction_table(tmp_path / "nothing").empty
    assert isinstance(t, pd.DataFrame)


def test_batch_one_text_sets_the_count_beside_the_timed_effect(tmp_path):
    run = _notebook_run(tmp_path)
    d = run / bz.ICOUNT_DIR
    d.mkdir()
    make_raw(variants=("prebatch", "batch"), trials=2, params={"mode": [0], "size": [16, 1024]},
             deterministic_icount={"prebatch": 33.0, "batch": 49.5}).to_csv(d / "raw.csv", index=False)
    text = bz.batch_one_text(bz.instruction_table(run), bz.effects(run, "hostA"))
    assert text.startswith("Size 16 (batch 1): batch executes 49.50 instructions per operation against "
                           "prebatch's 33.00 (+50.0%")
    assert "Size 1024" not in text, "batch 16 at size 1024: not a batch-1 size"
    assert bz.batch_one_text(pd.DataFrame(), bz.effects(run, "hostA")) == ""
