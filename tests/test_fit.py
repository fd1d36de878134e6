"""The fit of a comparison's levels (``ringlab.stats.fit``) and what compare() takes from it.

* the closed form of balanced designs and statsmodels' MixedLM agree (theta, SE, components);
  unbalanced designs go through MixedLM, whose result is the GLS mean of its own components;
* a REML layout variance of 0 gives the pooled rounds' SE on K - 1 df; one layout pair gives no
  fit; MixedLM's convergence warnings are caught and the fit falls back, saying so;
* by simulation (``ringlab.simulate.designsim``: layout, process and iteration noise, a machine
  with two states and an effect that differs between them) the 95% CI covers the run's
  geometric-mean effect in at least 94% of runs and calls at most 5% of A/A runs;
* the headline of a compare() row (estimate, CIs, p, Holm's p, verdict) does not move when the
  state classifier's thresholds do, while the state columns do.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats as sst
from statsmodels.tools.sm_exceptions import ConvergenceWarning

from ringlab.simulate import designsim as ds
from ringlab.simulate import noise
from ringlab.stats import compare, states
from ringlab.stats import fit as F
from layout_runs import tidy_frame


def _data(K, n, sigma_layout, seed, sd=0.02, effect=0.01):
    rng = np.random.default_rng(seed)
    lay = np.repeat(np.arange(K), n)
    return effect + rng.normal(0, sigma_layout, K)[lay] + rng.standard_t(4, K * n) * sd, lay


def _close(a: F.LevelFit, b: F.LevelFit, rel=2e-3):
    assert a.theta == pytest.approx(b.theta, rel=1e-9, abs=1e-12)
    assert a.se == pytest.approx(b.se, rel=rel)
    assert a.sigma2_layout == pytest.approx(b.sigma2_layout, rel=rel, abs=1e-8)
    assert a.sigma2_round == pytest.approx(b.sigma2_round, rel=rel)


# -- the fit -----------------------------------------------------------------------------------

@pytest.mark.parametrize("K, n, sigma_layout, seed", [(8, 20, 0.03, 1), (4, 3, 0.03, 2), (16, 2, 0.01, 3),
                                                      (6, 5, 0.0, 4), (8, 20, 0.0, 5), (5, 7, 0.005, 6)])
def test_the_closed_form_of_balanced_designs_is_mixedlms_fit(K, n, sigma_layout, seed):
    d, lay = _data(K, n, sigma_layout, seed)
    fast, mixed = F.fit(d, lay), F.fit(d, lay, closed_form=False)
    assert fast.method == F.CLOSED_FORM
    assert mixed.method == F.MIXEDLM and not mixed.note
    _close(fast, mixed)
    assert fast.df == mixed.df == K - 1 and fast.layouts == K and fast.rounds == K * n
    assert (fast.ci_low, fast.ci_high) == pytest.approx((mixed.ci_low, mixed.ci_high), rel=2e-3, abs=1e-6)


def test_balanced_components_are_the_one_way_anova_ones():
    d, lay = _data(8, 10, 0.03, 7)
    f = F.fit(d, lay)
    y = d.reshape(8, 10)
    msb, msw = 10 * y.mean(axis=1).var(ddof=1), y.var(axis=1, ddof=1).mean()
    assert msb > msw
    assert f.sigma2_round == pytest.approx(msw) and f.sigma2_layout == pytest.approx((msb - msw) / 10)
    assert f.theta == pytest.approx(d.mean()) and f.se == pytest.approx(math.sqrt(msb / 80))
    assert f.layout_share == pytest.approx(f.sigma2_layout / (f.sigma2_layout + f.sigma2_round / 10))
    # the t interval on K - 1 df across the pair means, and p of the same t test
    t = sst.ttest_1samp(y.mean(axis=1), 0.0)
    assert f.p == pytest.approx(t.pvalue)
    assert (f.ci_low, f.ci_high) == pytest.approx(tuple(t.confidence_interval(0.95)))
    g = f.at(0.99)
    assert g.p == f.p and g.ci_low < f.ci_low and g.ci_high > f.ci_high
    assert (g.p <= 0.01) == (g.ci_low > 0 or g.ci_high < 0)


def test_unbalanced_designs_go_through_mixedlm():
    d, lay = _data(8, 12, 0.02, 8)
    keep = np.random.default_rng(9).random(len(d)) > 0.25
    f = F.fit(d[keep], lay[keep])
    assert f.method == F.MIXEDLM and not f.note
    assert f.df == 7 and f.rounds == keep.sum()
    # MixedLM's theta and SE are the GLS mean of the pair means at its own components
    _, inv = np.unique(lay[keep], return_inverse=True)
    n_k = np.bincount(inv)
    means = np.bincount(inv, weights=d[keep]) / n_k
    w = 1 / (f.sigma2_layout + f.sigma2_round / n_k)
    assert f.theta == pytest.approx((w * means).sum() / w.sum(), rel=1e-4)
    assert f.se == pytest.approx(1 / math.sqrt(w.sum()), rel=1e-3)
    # a diagnostic that must stay cheap takes the unweighted pair means instead
    g = F.fit(d[keep], lay[keep], mixedlm=False)
    assert g.method == F.PAIR_MEANS and g.theta == pytest.approx(means.mean())
    assert g.se == pytest.approx(means.std(ddof=1) / math.sqrt(8))


def test_no_layout_variance_keeps_the_pair_means_se_on_k_minus_1_df():
    d, lay = _data(6, 10, 0.0, 12)
    y = d.reshape(6, 10)
    assert 10 * y.mean(axis=1).var(ddof=1) < y.var(axis=1, ddof=1).mean()    # REML puts sigma_L^2 at 0
    for f in (F.fit(d, lay), F.fit(d, lay, closed_form=False)):
        assert f.sigma2_layout == 0 and f.layout_share == 0
        assert f.sigma2_round == pytest.approx(d.var(ddof=1), rel=1e-9)       # the pooled rounds
        assert f.se == pytest.approx(y.mean(axis=1).std(ddof=1) / math.sqrt(6), rel=1e-6)   # MSB / N
        assert f.se < d.std(ddof=1) / math.sqrt(60)
        assert f.df == 5
        q = sst.t.ppf(0.975, 5)
        assert (f.ci_low, f.ci_high) == pytest.approx((d.mean() - q * f.se, d.mean() + q * f.se))


def test_one_layout_pair_has_no_fit_and_one_round_per_pair_no_components():
    d, lay = _data(1, 30, 0.02, 11)
    assert F.fit(d, lay) is None
    d, lay = _data(12, 1, 0.02, 12)
    f = F.fit(d, lay)
    assert f.method == F.CLOSED_FORM and f.se == pytest.approx(d.std(ddof=1) / math.sqrt(12))
    assert math.isnan(f.sigma2_layout) and math.isnan(f.sigma2_round) and math.isnan(f.layout_share)
    same = F.fit(np.full(6, 0.02), np.arange(6) % 3)
    assert same.se == 0 and same.ci_low == same.ci_high == pytest.approx(0.02) and same.p == 0.0


def test_a_mixedlm_that_does_not_converge_falls_back_to_the_pair_means(monkeypatch):
    real = sm.MixedLM.fit

    def failing(self, *a, **kw):
        res = real(self, *a, **kw)
        warnings.warn("Gradient optimization failed, |grad| = 1.0", ConvergenceWarning)
        return res

    monkeypatch.setattr(sm.MixedLM, "fit", failing)
    d, lay = _data(6, 8, 0.02, 13)
    keep = np.ones(len(d), dtype=bool)
    keep[:3] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # nothing escapes the fit
        f = F.fit(d[keep], lay[keep])
    assert f.method == F.PAIR_MEANS and "did not converge" in f.note
    _, inv = np.unique(lay[keep], return_inverse=True)
    means = np.bincount(inv, weights=d[keep]) / np.bincount(inv)
    assert f.theta == pytest.approx(means.mean()) and f.df == 5


# -- by simulation -----------------------------------------------------------------------------

def _rounds(sim: dict):
    """Per run and round: d = ln(candidate / baseline), the layout pair, the candidate's state."""
    y, arm, lay, st = sim["log_y"], sim["arm"], sim["layout"], sim["state"]
    cand_first = arm[:, 0::2] == 1
    d = np.where(cand_first, y[:, 0::2] - y[:, 1::2], y[:, 1::2] - y[:, 0::2])
    return d, lay[:, 0::2], np.where(cand_first, st[:, 0::2], st[:, 1::2])


def _not_below(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(count, n, rate, alternative="less").pvalue > 0.01


def _not_above(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(count, n, rate, alternative="greater").pvalue > 0.01


@pytest.mark.parametrize("design, runs, drop", [(ds.Design(8, 4, 5), 500, 0.0), (ds.Design(4, 2, 1), 500, 0.0),
                                                (ds.Design(16, 1, 1), 500, 0.0), (ds.Design(6, 5, 1), 100, 0.15)],
                         ids=lambda v: str(v))
def test_the_ci_covers_the_geometric_mean_effect_and_aa_is_at_most_5_percent(design, runs, drop):
    """Runs with two machine states and an effect of -3.5% in the fast state, +9.1% in the slow
    one: the CI holds the run's geometric-mean effect (the mean over its rounds of the effect in
    the state the candidate's trial ran in).  ``drop`` leaves rounds out at random, so the
    design is unbalanced and MixedLM fits it.  Control: the same A/A runs with the rounds
    pooled as if the layout level did not exist (SE of the pooled rounds on N - 1 df) call
    layout differences where a layout pair has several rounds, so the A/A bound can fail."""
    rng = np.random.default_rng(20261207 + design.layouts)
    for effect in ((0.0, 0.0), ds.STATE_EFFECT):
        d, lay, cand_state = _rounds(ds.simulate_runs(design, runs, effect, rng))
        covered = called = pooled_called = 0
        methods = set()
        for i in range(runs):
            keep = rng.random(d.shape[1]) >= drop
            f = F.fit(d[i][keep], lay[i][keep])
            methods.add(f.method)
            truth = float(np.asarray(effect)[cand_state[i][keep]].mean())
            covered += f.ci_low <= truth <= f.ci_high
            called += f.ci_low > 0 or f.ci_high < 0
            v = d[i][keep]
            pooled_called += sst.ttest_1samp(v, 0.0).pvalue <= 0.05
        assert _not_below(covered, runs, 0.94), f"coverage {covered}/{runs} at {design}, effect {effect}"
        assert (F.MIXEDLM in methods) == (drop > 0)
        if effect == (0.0, 0.0):
            assert _not_above(called, runs, 0.05), f"A/A {called}/{runs} at {design}"
            if design.rounds >= 4:      # several rounds per layout pair: pooling them is wrong
                assert not _not_above(pooled_called, runs, 0.05), f"pooled A/A {pooled_called}/{runs}"


# -- the headline does not depend on the state classifier ---------------------------------------

def _two_configurations() -> pd.DataFrame:
    frames = []
    for mode, effect, seed in ((0, (-0.035, 0.087), 4), (1, (0.03, 0.03), 5)):
        sim = noise.simulate_ab(8, 20, effect=effect, sigma_layout=0.02, rng=np.random.default_rng(seed))
        frames.append(tidy_frame(sim, ("base", "cand"), params={"mode": mode}))
    one = noise.simulate_ab(1, 120, effect=(-0.035, 0.087), sigma_layout=0.0, rng=np.random.default_rng(6))
    frames.append(tidy_frame(one, ("base", "cand"), params={"mode": 2}))
    df = pd.concat(frames, ignore_index=True)
    df["round"] = df["round"] + 1000 * df["mode"]
    df["trial"] = df["round"]
    return df


HEADLINE = ("delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm", "verdict", "holm_ci_low_pct",
            "holm_ci_high_pct", "design", "layouts", "sigma_layout_pct", "sigma_round_pct", "trials_needed")
STATE_COLUMNS = ("states", "slow_share", "delta_fast_pct", "ci_fast_low_pct", "ci_fast_high_pct", "delta_slow_pct",
                 "heterogeneity_p")


@pytest.mark.parametrize("name, value", [("MIN_BIC_GAIN", 1e12), ("MIN_SEPARATION", 1e3), ("MIN_SHARE", 0.499),
                                         ("MIN_DURATION", 1e4)])
def test_moving_the_state_thresholds_changes_the_state_columns_only(monkeypatch, name, value):
    df = _two_configurations()
    before = compare(df, "base")
    assert (before["states"] == 2).all() and before["design"].tolist() == ["layouts", "layouts", "paired"]
    # mode 0: faster in the fast state, slower in the slow one; the verdict is the headline's
    r0 = before.iloc[0]
    assert r0["ci_fast_high_pct"] < 0 < r0["ci_slow_low_pct"] and r0["verdict"] == "slower"
    assert "machine states: faster in the fast state" in r0["note"]
    monkeypatch.setattr(states, name, value)
    after = compare(df, "base")
    assert (after["states"] == 1).all() and after["delta_fast_pct"].isna().all()
    for col in HEADLINE:
        pd.testing.assert_series_equal(before[col], after[col], check_exact=True, obj=col)
    for col in STATE_COLUMNS:
        assert not before[col].equals(after[col]), col
    assert "machine states" not in after.iloc[0]["note"]


def test_lowering_the_state_thresholds_finds_states_in_noise_without_moving_the_headline(monkeypatch):
    # a slow state 2% slower: below the default separation, so one state is found
    sim = noise.simulate_ab(8, 20, effect=(0.02, 0.02), sigma_layout=0.02, rng=np.random.default_rng(14),
                            state_gap=0.02)
    df = tidy_frame(sim, ("base", "cand"))
    before = compare(df, "base")
    for name, value in (("MIN_BIC_GAIN", -1e9), ("MIN_SEPARATION", 0.0), ("MIN_SHARE", 0.0), ("MIN_DURATION", 0.0)):
        monkeypatch.setattr(states, name, value)
    after = compare(df, "base")
    assert before.iloc[0]["states"] == 1 and after.iloc[0]["states"] == 2
    for col in HEADLINE:
        pd.testing.assert_series_equal(before[col], after[col], check_exact=True, obj=col)


def test_a_row_not_called_after_holm_keeps_the_state_note():
    """Faster in the fast state, slower in the slow one, p = 0.035: at a Holm level of 1 - p/2 the
    row is not called though its 95% CI excludes 0; the note still gives the states."""
    from ringlab.stats.compare import _layout_analysis, pair_arms
    from ringlab.stats.contract import NOT_AFTER_HOLM
    from ringlab.stats.rounds import ROUND_COLUMN, round_key
    sim = noise.simulate_ab(8, 20, effect=(-0.035, 0.087), sigma_layout=0.02, rng=np.random.default_rng(4))
    df = tidy_frame(sim, ("base", "cand"))
    df[ROUND_COLUMN] = round_key(df)
    b, c = df[df["variant"] == "base"], df[df["variant"] == "cand"]
    arms = pair_arms(b, c, "ns_per_op", group="all", baseline="base", candidate="cand")
    _layout_analysis(arms, b, c, "ns_per_op", True)
    assert 0.01 < arms.p < 0.05
    row = arms.finish(1 - arms.p / 2, 0.01, 0.05, printed_level=0.95)
    assert row.verdict.verdict == NOT_AFTER_HOLM
    assert "machine states: faster in the fast state" in row.verdict.note


def test_a_fit_that_fell_back_says_so_in_the_row(monkeypatch):
    monkeypatch.setattr(F, "_mixedlm", lambda d, inv: None)
    sim = noise.simulate_ab(6, 10, effect=(0.02, 0.02), sigma_layout=0.02, rng=np.random.default_rng(15),
                            state_gap=0.0)
    df = tidy_frame(sim, ("base", "cand"))
    df = df[~df["round"].isin([0, 1, 2])]           # unbalanced: MixedLM's turn
    r = compare(df, "base").iloc[0]
    assert r["design"] == "layouts" and "did not converge" in r["note"]


@pytest.mark.parametrize("K,n", [(10, 10), (20, 2)])
def test_a_small_layout_variance_keeps_the_test_at_its_level(K, n):
    """A layout SD a fifth of the rounds': REML often puts it at 0, and the test still rejects a
    true null 5% of the time (the pooled rounds' SE there made it 3.4-3.8%)."""
    rng = np.random.default_rng(5)
    lay = np.repeat(np.arange(K), n)
    R = 4000
    rej = sum(F.fit(rng.normal(0, 0.2, K)[lay] + rng.normal(0, 1.0, K * n), lay).p < 0.05 for _ in range(R))
    lo, hi = sst.binom.ppf([0.005, 0.995], R, 0.05) / R
    assert lo <= rej / R <= hi, f"{rej / R:.2%} outside [{lo:.2%}, {hi:.2%}]"


def test_an_unbalanced_fit_at_the_boundary_takes_the_weighted_msb_se_and_verify_agrees():
    """Pairs of 4-12 rounds with no layout spread: REML puts sigma_L^2 at 0, and the SE is
    sqrt(sum n_k (m_k - theta)^2 / ((K - 1) N)), the formula docs/verdicts.md gives a reviewer."""
    from ringlab.report import verify as V
    rng = np.random.default_rng(21)
    n_k = np.array([4, 6, 8, 10, 12, 5, 7, 9])
    lay = np.repeat(np.arange(len(n_k)), n_k)
    d = 0.01 + rng.normal(0, 0.02, len(lay))
    f = F.fit(d, lay)
    assert f.method == F.MIXEDLM and f.sigma2_layout == 0
    means = np.array([d[lay == k].mean() for k in range(len(n_k))])
    want = math.sqrt(float((n_k * (means - d.mean()) ** 2).sum()) / ((len(n_k) - 1) * len(d)))
    assert f.theta == pytest.approx(d.mean()) and f.se == pytest.approx(want, rel=1e-9)
    theirs = V.layouts_fit(d, lay)
    assert (theirs["theta"], theirs["se"]) == pytest.approx((f.theta, f.se), rel=1e-9)
