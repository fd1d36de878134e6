"""The rule a finished staged run is judged by (``target_met``) on raw.csv frames."""
from ringlab.stats import compare, target_met
from synth import make_raw


def test_target_met_reads_the_printed_ci():
    df = make_raw(trials=40, seed=4, cv=0.01, round_cv=0.1, effects={"reorder": 0.05})
    res = compare(df, "batch")
    hw = float((res["ci_high_pct"] - res["ci_low_pct"]).iloc[0] / 2)
    assert target_met(res, hw + 0.01) and not target_met(res, hw - 0.01)
    few = compare(make_raw(trials=3, seed=5), "batch")  # no CI at all from 3 rounds
    assert not target_met(few, 50.0)
