import json
import math
import subprocess
import sys

import numpy as np
import pytest

from ringlab.stats import JSON_FIELDS, StatsError, compare, diagnose_ab, holm, to_records, verdict_one
from synth import make_raw


def test_json_has_exactly_the_fields():
    df = make_raw(effects={"reorder": -0.05}, trials=40, seed=1, params={"mode": [0, 1], "size": [1000]})
    res = compare(df, "batch")
    recs = to_records(res)
    assert len(recs) == 2
    for r in recs:
        assert list(r) == JSON_FIELDS
        json.dumps(r)
    assert recs[0]["verdict"] == "faster"
    assert recs[0]["delta_pct"] < 0 and recs[0]["ci_high_pct"] < 0
    assert "p_welch" in res.columns and "gain_pct" in res.columns


def test_delta_is_ratio_of_medians_and_mail_sign():
    df = make_raw(effects={"reorder": 0.04}, trials=30, seed=2)
    r = compare(df, "batch").iloc[0]
    assert r["delta_pct"] == pytest.approx((r["median_candidate"] / r["median_baseline"] - 1) * 100)
    assert r["gain_pct"] == pytest.approx(-r["delta_pct"])
    assert r["verdict"] == "slower"


def test_mail_sign_convention_matches_seed000():
    # thread 000: unpatched -> patched ms and the mail's "delta"
    for base, cand, mail in [(4648, 4464, 3.9), (2562, 2401, 6.2), (3624, 3462, 4.4), (2758, 2547, 7.6)]:
        gain = (base - cand) / base * 100  # = -delta_pct
        assert math.floor(gain * 10) / 10 == mail
        assert abs((base - cand) / cand * 100 - mail) > 0.1 or mail == 3.9


def test_holm():
    p = holm([0.01, 0.04, 0.03, np.nan])
    assert np.allclose(p[:3], [0.03, 0.06, 0.06])
    assert np.isnan(p[3])


def test_no_significant_difference_needs_ci_within_noise():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(0, 0.005, 200), rng.lognormal(0, 0.005, 200)
    r = verdict_one(a, b)
    assert r["verdict"] == "no significant difference"
    r = verdict_one(a[:10], b[:10] * 1.0, noise=0.0001)
    assert r["verdict"] == "inconclusive" and r["trials_needed"] >= 5


def test_inconclusive_trials_needed():
    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 0.05, 8), rng.lognormal(0.01, 0.05, 8)
    r = verdict_one(a, b)
    assert r["verdict"] == "inconclusive"
    assert r["trials_needed"] > 8


def test_deterministic_metric_is_exact():
    df = make_raw(trials=10, seed=5, deterministic_icount={"batch": 120.0, "reorder": 114.0})
    r = compare(df, "batch", metric="instructions_per_op").iloc[0]
    assert r["note"] == "exact (deterministic metric)"
    assert r["verdict"] == "faster" and math.isnan(r["p_value"]) and math.isnan(r["ci_low_pct"])
    assert r["delta_abs"] == -6.0 and r["delta_pct"] == pytest.approx(-5.0)
    same = make_raw(trials=10, seed=5, deterministic_icount={"batch": 120.0, "reorder": 120.0})
    assert compare(same, "batch", metric="instructions_per_op").iloc[0]["verdict"] == "no significant difference"


def test_same_instructions_different_time():
    df = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                  deterministic_icount={"batch": 120.0, "reorder": 120.05})
    (d,) = diagnose_ab(df, "batch", "reorder")
    assert d["finding"] == "same instructions, different time"
    assert "objdump" in d["text"] and "align" in d["text"]
    df2 = make_raw(trials=40, seed=6, effects={"reorder": -0.06},
                   deterministic_icount={"batch": 120.0, "reorder": 110.0})
    (d2,) = diagnose_ab(df2, "batch", "reorder")
    assert d2["finding"] == "different instructions" and "120" in d2["text"] and "110" in d2["text"]


def test_bad_arguments_name_allowed_values():
    df = make_raw(trials=5)
    with pytest.raises(StatsError, match="baseline: 'x'.*allowed: batch, reorder"):
        compare(df, "x")
    with pytest.raises(StatsError, match="noise"):
        compare(df, "batch", noise=5)


def test_cli_compare_json_and_table(tmp_path):
    df = make_raw(effects={"reorder": -0.05}, trials=30, seed=7)
    p = tmp_path / "raw.csv"
    df.to_csv(p, index=False)
    out = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "batch", "--json"],
                         capture_output=True, text=True, check=True).stdout
    recs = json.loads(out)
    assert [list(r) for r in recs] == [JSON_FIELDS]
    txt = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "batch"],
                         capture_output=True, text=True, check=True).stdout
    assert "| batch | reorder | delta |" in txt and "Welch" in txt
    bad = subprocess.run([sys.executable, "-m", "ringlab", "compare", str(p), "--baseline", "nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "allowed: batch, reorder" in bad.stderr
