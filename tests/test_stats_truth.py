"""The statistics tell the truth on synthetic data with known answers.

The noise is ``ringlab.simulate.noise``: the machine state is a persistent two-state Markov process
on the trial sequence (states last many rounds and switch inside rounds), trial noise is
heavy-tailed, and in the layout design every build adds a layout offset.  One-build runs are
checked by the thousand with the vectorised forms of the tests, which make the same decision as
``compare`` (checked on a sample of runs below); the layout design runs through ``compare()``
on tidy frames.

A rate "is at most r" when a one-sided binomial test does not reject rate <= r at the 1% level,
and "is at least r" likewise; a control "shows inflation" when the binomial test rejects
rate <= 5% at 1%.
"""
import math

import numpy as np
import pytest
from scipy import stats as sst

from layout_runs import tidy_frame
from ringlab.simulate import noise
from ringlab.stats import compare
from ringlab.stats import ranktests as rt
from ringlab.stats import compare_arrays

N_RUNS = 2000
LEVEL = 0.01       # of the binomial tests on simulated rates


def _rejects(D, alpha: float) -> np.ndarray:
    """Rows of D (runs x rounds) whose signed-rank CI at 1 - alpha excludes 0: the paired test's
    call at alpha, as compare() makes it."""
    lo, hi = rt.signed_rank_ci_batch(D, 1 - alpha)
    return (lo > 0) | (hi < 0)




def _rounds(rng, runs, n, effect=0.0, noise_sd=noise.NOISE_SD):
    """(baseline, candidate) log values of one-build runs under the VM's Markov states."""
    return noise.paired_rounds(runs, n, math.log1p(effect), rng, noise_sd=noise_sd)


def _at_most(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(int(count), n, rate, alternative="greater").pvalue > LEVEL


def _at_least(count: int, n: int, rate: float) -> bool:
    return sst.binomtest(int(count), n, rate, alternative="less").pvalue > LEVEL


def _inflated(count: int, n: int, rate: float = 0.05) -> bool:
    return sst.binomtest(int(count), n, rate, alternative="greater").pvalue < LEVEL


def test_batch_decisions_match_compare_arrays():
    rng = np.random.default_rng(1)
    b, c = _rounds(rng, 40, 15, 0.02)
    lo, hi = rt.signed_rank_ci_batch(c - b, 0.95)
    rej = (lo > 0) | (hi < 0)
    for i in range(40):
        r = compare_arrays(np.exp(b[i]), np.exp(c[i]), paired=True, noise=0.0)
        assert (r["verdict"] in ("faster", "slower")) == bool(rej[i])
        assert r["ci_low_pct"] == pytest.approx(math.expm1(lo[i]) * 100)
        assert r["ci_high_pct"] == pytest.approx(math.expm1(hi[i]) * 100)


def test_paired_aa_false_positive_rate():
    rng = np.random.default_rng(100)
    for n in (10, 30, 60):
        b, c = _rounds(rng, N_RUNS, n)
        called = _rejects(c - b, 0.05).sum()
        assert _at_most(called, N_RUNS, 0.05), (n, called)


def test_paired_ci_covers_a_known_shift():
    rng = np.random.default_rng(200)
    b, c = _rounds(rng, N_RUNS, 30, 0.03)
    lo, hi = rt.signed_rank_ci_batch(c - b, 0.95)
    covered = ((lo <= math.log1p(0.03)) & (math.log1p(0.03) <= hi)).sum()
    assert _at_least(covered, N_RUNS, 0.95), covered


def test_unpaired_fallback_aa_and_coverage():
    rng = np.random.default_rng(300)
    x = rng.normal(0, 0.05, (N_RUNS, 20)) + 0.05 * rng.standard_t(3, (N_RUNS, 20))
    y = rng.normal(0, 0.05, (N_RUNS, 20)) + 0.05 * rng.standard_t(3, (N_RUNS, 20)) + math.log1p(0.03)
    lo, hi = rt.rank_sum_ci_batch(x, y, 0.95)
    s = math.log1p(0.03)
    assert _at_most(((lo - s > 0) | (hi - s < 0)).sum(), N_RUNS, 0.05)      # A/A: the shift removed
    assert _at_least(((lo <= s) & (s <= hi)).sum(), N_RUNS, 0.95)


def test_pairing_beats_independent_arms_under_round_noise():
    rng = np.random.default_rng(400)
    b, c = _rounds(rng, 300, 30)
    plo, phi = rt.signed_rank_ci_batch(c - b, 0.95)
    ulo, uhi = rt.rank_sum_ci_batch(b, c, 0.95)
    narrower = int(((phi - plo) < (uhi - ulo)).sum())
    # the paired CI is the narrower one in most runs (sign test at 1%), and on average
    assert sst.binomtest(narrower, 300, 0.5, alternative="greater").pvalue < LEVEL, narrower
    assert np.mean(uhi - ulo) > np.mean(phi - plo)


def test_simulation_can_see_an_inflated_rate():
    # control: stopping as soon as the CI excludes 0 (a look after every 5 rounds) is wrong and the
    # same simulation must show it, or the tests above could not fail
    rng = np.random.default_rng(800)
    b, c = _rounds(rng, N_RUNS, 60)
    d = c - b
    hit = np.zeros(N_RUNS, dtype=bool)
    for n in range(10, 61, 5):
        hit |= _rejects(d[:, :n], 0.05)
    assert _inflated(hit.sum(), N_RUNS), hit.mean()


# -- the layout design through compare() -----------------------------------------------------

def _layout_runs(runs: int, effect, seed: int, sigma_layout=(0.01, 0.034), K: int = 8, R: int = 20,
                 truths: list | None = None):
    """compare() rows of simulated layout runs; sigma_L drawn per run from the range.  ``truths``
    gets each run's geometric-mean effect (log): the effect in the state each candidate trial
    ran in, averaged over the run."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        sl = rng.uniform(*sigma_layout)
        sim = noise.simulate_ab(K, R, effect=effect, sigma_layout=sl, rng=rng)
        out.append(compare(tidy_frame(sim, ("base", "cand")), "base", noise=0.0).iloc[0])
        if truths is not None:
            truths.append(float(np.asarray(effect)[sim["state"][sim["arm"] == 1]].mean()))
    return out


def _cis(rows):
    lo = np.log1p(np.array([r["ci_low_pct"] for r in rows]) / 100)
    hi = np.log1p(np.array([r["ci_high_pct"] for r in rows]) / 100)
    return lo, hi


def test_layouts_aa_is_at_most_5_percent():
    rows = _layout_runs(160, (0.0, 0.0), seed=21)
    assert all(r["design"] == "layouts" for r in rows)
    called = sum(r["verdict"] in ("faster", "slower") for r in rows)
    assert _at_most(called, len(rows), 0.05), f"A/A {called}/{len(rows)}"


def test_layouts_cover_the_geometric_mean_effect_and_runs_agree():
    effect = (-0.035, 0.087)            # the VM's d8: faster in the fast state, slower in the slow one
    truths: list = []
    rows = _layout_runs(160, effect, seed=22, sigma_layout=(0.02, 0.02), truths=truths)
    lo, hi = _cis(rows)
    target = np.array(truths)
    covered = int(((lo <= target) & (target <= hi)).sum())
    assert _at_least(covered, len(rows), 0.95), f"covered {covered}/{len(rows)}"
    # runs agree when the effect is the same in both states (with a state-dependent one, two runs
    # differ by their slow shares, which each row reports)
    rows = _layout_runs(160, (0.03, 0.03), seed=25, sigma_layout=(0.02, 0.02))
    lo, hi = _cis(rows)
    disjoint = int(((hi[0::2] < lo[1::2]) | (hi[1::2] < lo[0::2])).sum())
    assert _at_most(disjoint, len(rows) // 2, 0.05), f"disjoint {disjoint}/{len(rows) // 2}"


def test_layouts_power_for_5_percent_with_8_layouts_of_20_rounds():
    rows = _layout_runs(100, (math.log(1.05),) * 2, seed=23, sigma_layout=(0.034, 0.034))
    found = sum(r["verdict"] == "slower" for r in rows)
    assert _at_least(found, len(rows), 0.80), f"power {found}/{len(rows)}"


def test_pooling_the_layouts_into_one_signed_rank_test_fails_the_aa_check():
    # control: the same A/A runs analysed as one binary (every round in one signed-rank test)
    # call layout differences, so the A/A check above can fail
    rng = np.random.default_rng(24)
    called = 0
    for _ in range(60):
        sim = noise.simulate_ab(8, 20, sigma_layout=0.034, rng=rng)
        df = tidy_frame(sim, ("base", "cand")).drop(columns="layout")
        called += compare(df, "base", noise=0.0).iloc[0]["verdict"] in ("faster", "slower")
    assert _inflated(called, 60), called
