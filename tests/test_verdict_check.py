"""Notebook 14's checks: the arms it generates and whether each expectation held."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ringlab.errors import ParamError
from ringlab.sources import kernel_header as kh
from ringlab.sources import patches
from ringlab.sources import builtin_patches
from ringlab.studies import verdict_check as vc

MAINLINE_TREE = Path(__file__).resolve().parent / "data" / "kernel_headers" / "team_mainline"


def _cmp(rows):
    return pd.DataFrame([{"baseline": "base", "candidate": c, "verdict": v, "delta_pct": d,
                          "ci_low_pct": lo, "ci_high_pct": hi} for c, v, d, lo, hi in rows])


GOOD = _cmp([("pad48", "inconclusive", 0.5, -1.0, 2.0), ("d2", "slower", 2.0, 0.5, 3.5),
             ("d8", "slower", 8.0, 5.0, 11.0)])
ALIGNED = _cmp([("d8", "slower", 10.0, 9.0, 12.0)])


def test_every_expectation_holds():
    e = vc.expectations(GOOD, ALIGNED)
    assert list(e.columns) == ["expectation", "observed", "held"]
    assert list(e["expectation"]) == list(vc.EXPECTATIONS)
    assert e["held"].tolist() == [True, True, True, True]
    assert "slower, -8.0% [-11.0%, -5.0%]" in e.loc[2, "observed"]      # + = faster


@pytest.mark.parametrize("arm, verdict, row", [
    ("pad48", "faster", 0), ("pad48", "slower", 0), ("pad48", "depends on machine state", 0),
    ("d2", "faster", 1), ("d8", "inconclusive", 2), ("d8", "no significant difference", 2)])
def test_a_wrong_verdict_does_not_hold(arm, verdict, row):
    cmp = GOOD.copy()
    cmp.loc[cmp["candidate"] == arm, "verdict"] = verdict
    held = vc.expectations(cmp, ALIGNED)["held"].tolist()
    # d8's call is also compared with the aligned build's: a wrong one fails both
    assert held[row] is False and held.count(False) == (2 if arm == "d8" else 1)


def test_d2_may_be_inconclusive_or_slower():
    for v in ("inconclusive", "no significant difference", "slower"):
        cmp = GOOD.copy()
        cmp.loc[cmp["candidate"] == "d2", "verdict"] = v
        assert vc.expectations(cmp, ALIGNED).loc[1, "held"]


def test_an_aligned_estimate_outside_the_next_run_interval_does_not_hold():
    far = _cmp([("d8", "slower", 20.0, 15.0, 25.0)])
    e = vc.expectations(GOOD, far)
    assert e.loc[3, "held"] is False and "aligned slower -20.0%" in e.loc[3, "observed"]


def test_disjoint_cis_hold_when_the_estimate_is_inside_the_next_run_interval():
    """Narrow CIs of two builds need not overlap: two layouts of one change differ by a run-to-run move."""
    near = _cmp([("d8", "slower", 11.8, 11.6, 12.0)])
    e = vc.expectations(GOOD, near)
    assert e.loc[3, "held"] is True, e.loc[3, "observed"]


def test_a_different_call_in_the_aligned_build_does_not_hold():
    other = _cmp([("d8", "inconclusive", 8.0, -1.0, 17.0)])
    assert vc.expectations(GOOD, other).loc[3, "held"] is False


def test_missing_arms_and_missing_cis_are_not_held_either_way():
    e = vc.expectations(GOOD.iloc[:2], None)
    assert e.loc[2, "held"] is None and "no comparison of d8" in e.loc[2, "observed"]
    assert e.loc[3, "held"] is None
    nan_ci = _cmp([("d8", "inconclusive", 9.0, float("nan"), float("nan"))])
    assert vc.expectations(GOOD, nan_ci).loc[3, "held"] is None


def test_plan_generates_the_arms_against_the_base(tmp_path):
    per_op = 40.0
    p = vc.plan(str(MAINLINE_TREE), workdir=tmp_path, base_per_op=per_op)
    assert list(p.specs) == ["pad48", "d2", "d8"] and p.specs["pad48"] == "builtin:pad:48"
    assert p.spin_cost is None, "a given count sizes the arms from the stated figures"
    per_spin = (builtin_patches.expected_extra("builtin:flush-spin:2")
                - builtin_patches.expected_extra("builtin:flush-spin:1"))
    for arm, pct in (("d2", 2.5), ("d8", 7.7)):
        assert p.specs[arm].startswith("builtin:flush-spin:")
        extra = builtin_patches.expected_extra(p.specs[arm])
        assert abs(extra - per_op * pct / 100) <= per_spin / 2
        assert p.files[arm].is_file() and p.files[arm].parent == tmp_path
    kh_default = p.kernel_headers(p.default_arms)
    assert kh_default.startswith(f"base={MAINLINE_TREE},pad48={MAINLINE_TREE}+")
    assert p.variants(p.aligned_arms) == "base,d8"
    assert p.kernel_headers(p.aligned_arms).count(",") == 1
    exp = p.expected().set_index("arm")
    assert exp.loc["pad48", "expected extra instructions/op"] == 0
    assert exp.loc["d8", "expected verdict"] == "slower"


def test_plan_with_a_counted_base_resolves_the_header(tmp_path):
    """The base's instructions/op come from callgrind when it is here."""
    from ringlab.tools import icount
    if not icount.availability().ok:
        pytest.skip("callgrind not available")
    p = vc.plan(str(MAINLINE_TREE), workdir=tmp_path / "p")
    assert p.count_source == "callgrind" and p.base_per_op > 0
    fixed, per = p.spin_cost
    assert per > 0 and fixed >= 0, "every iteration of the volatile loop costs instructions"
    for arm, pct in (("d2", 2.5), ("d8", 7.7)):
        extra = p.expected_extra(p.specs[arm])
        assert abs(100 * extra / p.base_per_op - pct) <= 100 * per / p.base_per_op / 2 + 1e-9


def test_no_header_tree_names_the_parameter(monkeypatch):
    monkeypatch.setattr(kh, "header_trees", lambda root=None: [])
    with pytest.raises(ParamError, match=r"parameter 'base'.*allowed:"):
        vc.plan("")


def test_bad_base_names_the_parameter(tmp_path):
    with pytest.raises(ParamError, match=r"parameter 'base'"):
        vc.plan(str(tmp_path / "nope"), workdir=tmp_path, base_per_op=40.0)


def test_forest_rows_hold_both_builds():
    r = vc.forest_rows(GOOD, ALIGNED, host="h", expected={"d2": 2.18, "d8": 7.39})
    assert [c.split(":")[0] for c in r["config"]] == ["default"] * 3 + ["aligned"]
    assert r["config"].tolist()[1] == "default: d2 vs base" and set(r["host"]) == {"h"}
    # one sign, + = better: an arm that costs 8% more time is -8%, its CI turned with it
    assert r["effect_pct"].tolist() == [-0.5, -2.0, -8.0, -10.0]
    assert r[["ci_low_pct", "ci_high_pct"]].values.tolist()[2] == [-11.0, -5.0]
    # the stated extra instructions are a count, drawn as their own marker, never an expected time
    assert r["instructions_pct"].tolist()[1:] == [-2.18, -7.39, -7.39] and r["instructions_pct"].isna().tolist()[0]
    assert r["expected_pct"].isna().all()


# -- ringlab bench fidelity's timing target -------------------------------------------------------
def test_fidelity_target_is_a_ci_that_reaches_within_one_percent():
    from ringlab.studies.harness_compare import RATIO_TOLERANCE, within
    assert RATIO_TOLERANCE == 0.01
    assert within(0.95, 1.05) and within(1.005, 1.2) and within(0.8, 0.991)
    assert not within(0.90, 0.989) and not within(1.011, 1.1)
    assert within(float("nan"), 1.0) is None


def test_layouts_ratio_reads_ours_over_real(tmp_path):
    """ours/real from compare() on a synthetic layouts run: ours 2% slower in every layout."""
    import numpy as np
    from ringlab.studies.harness_compare import RATIO_COLUMNS, layouts_ratio
    rng = np.random.default_rng(7)
    rows = []
    for layout in range(6):
        shift = rng.normal(0, 0.01)
        for rnd in range(8):
            state = rng.normal(0, 0.002)
            for v, eff in (("kernel", 0.0), ("batch", np.log(1.02))):
                rows.append({"variant": v, "mode": 0, "size": 1000, "trial": layout * 8 + rnd,
                             "round": layout * 8 + rnd, "layout": layout, "status": "ok", "warmup": False,
                             "ns_per_op": float(np.exp(np.log(4.0) + eff + shift * (v == "batch") + state))})
    pd.DataFrame(rows).to_csv(tmp_path / "raw.csv", index=False)
    t = layouts_ratio(tmp_path, "batch", "kernel")
    assert list(t.columns) == RATIO_COLUMNS and len(t) == 1
    r = t.iloc[0]
    assert r["design"] == "layouts" and r["ratio_ci_low"] < r["ratio"] < r["ratio_ci_high"]
    assert 1.0 < r["ratio"] < 1.05


def test_rounds_are_twenty_per_layout_at_full_unless_asked():
    assert vc.rounds(8) == 8 * vc.FULL_ROUNDS_PER_LAYOUT == 160
    assert vc.rounds(8, profile="quick") is None and vc.rounds(2, profile="smoke") is None
    assert vc.rounds(4, 3, profile="smoke") == 12 and vc.rounds(1, 5) == 5
    with pytest.raises(ParamError, match=r"parameter 'rounds_per_layout'.*allowed:"):
        vc.rounds(8, -1)
