"""`ringlab bench power`'s simulation on frames with known noise (the bench itself reads results/)."""
import subprocess
import sys

import numpy as np
from scipy import stats as sst

from ringlab.simulate.powersim import power_table, targets, units_from_frame
from synth import make_raw


def test_units_remove_the_real_effect_and_keep_round_noise():
    df = make_raw(trials=30, seed=1, cv=0.01, round_cv=0.1, effects={"reorder": 0.2}, params={"mode": [0, 1]})
    units = units_from_frame(df, source="synth")
    assert len(units) == 2 and all(u["n_rounds"] == 30 for u in units)
    for u in units:
        assert abs(np.median(u["cand"] - u["base"])) < 0.01  # the 20% effect is gone
        assert np.corrcoef(u["base"], u["cand"])[0, 1] > 0.8   # the shared round state is not


def test_power_table_on_round_noise():
    df = make_raw(trials=30, seed=2, cv=0.01, round_cv=0.1, params={"mode": [0, 1, 2]})
    tab = power_table(units_from_frame(df, source="synth"), rounds=(30,), reps=150, seed=0)
    p = tab[tab["design"] == "paired"].iloc[0]
    u = tab[tab["design"] == "unpaired"].iloc[0]
    # the arms are swapped at random inside each round, so the null is exactly true: the paired
    # A/A count over 3 units x 150 runs is binomial with the signed-rank test's size (<= 5%)
    n_runs = 3 * 150
    assert sst.binomtest(round(p["aa_rate"] * n_runs), n_runs, 0.05, alternative="greater").pvalue > 0.01
    assert sst.binomtest(round(u["aa_rate"] * n_runs), n_runs, 0.05, alternative="greater").pvalue > 0.01
    assert p["power_5pct"] > 0.95 and p["power_5pct"] > u["power_5pct"]
    assert u["ci_width_pct"] > 2 * p["ci_width_pct"]
    got = {name.split(" ")[1]: met for name, met, _ in targets(tab, rounds_max=30)}
    assert got["power"], got
    # the CI widths against the unpaired analyses are printed for reference, not judged
    assert [met for name, met, _ in targets(tab, rounds_max=30) if "reference" in name] == [None]
    # the A/A target is judged on the worst paired rate, exactly
    for aa_max in (p["aa_rate"], p["aa_rate"] - 1e-9):
        assert targets(tab, aa_max=aa_max, rounds_max=30)[0][1] is (p["aa_rate"] <= aa_max)


def test_bench_power_lists_and_refuses_bad_input(tmp_path):
    out = subprocess.run([sys.executable, "-m", "ringlab", "bench", "power", "--help"],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "--reps" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "ringlab", "bench", "power", "--results", str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--results" in bad.stderr


def test_least_layouts_cached_quantile_is_scipys():
    """The cached t quantile the layout plan walks with is scipy's, to the bit."""
    from scipy import stats as sst
    from ringlab.stats.plan import t_quantile
    for q, df in ((0.975, 3), (0.8, 11), (0.99375, 200)):
        assert t_quantile(q, df) == float(sst.t.ppf(q, df))
