"""The statistics tell the truth on synthetic data with known answers (issue 4)."""
import numpy as np
import pytest
from scipy import stats as sst

from ringlab.stats import recommended_trials, verdict_one

CV = 0.05
SIGMA = np.sqrt(np.log1p(CV ** 2))
RESAMPLES = 500  # fewer than production (2000) to keep the suite fast; CI endpoints stay stable


def _sample(rng, n, shift=0.0):
    return 10.0 * (1 + shift) * rng.lognormal(-SIGMA ** 2 / 2, SIGMA, n)


def _run(n_exp, n, shift, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_exp):
        out.append(verdict_one(_sample(rng, n), _sample(rng, n, shift), n_resamples=RESAMPLES, seed=i))
    return out


@pytest.mark.slow
def test_aa_false_positive_rate():
    res = _run(200, 30, 0.0, seed=100)
    called = sum(r["verdict"] in ("faster", "slower") for r in res)
    slack = sst.binom.ppf(0.999, 200, 0.05)  # 5% plus binomial slack
    assert called <= slack, called


@pytest.mark.slow
def test_known_effect_detected_and_covered():
    n = int(recommended_trials(3.0, CV, power=0.9))  # ringlab's n for 90% power
    res = _run(200, n, 0.03, seed=200)
    detected = sum(r["verdict"] == "slower" for r in res) / len(res)
    covered = sum(r["ci_low_pct"] <= 3.0 <= r["ci_high_pct"] for r in res) / len(res)
    assert detected >= 0.90 - 0.04, (n, detected)  # simulation slack: sd of a 90% rate over 200 ~ 2.1%
    assert 0.95 - 0.05 <= covered <= 1.0, covered


@pytest.mark.slow
def test_recommended_n_reaches_promised_power():
    n = int(recommended_trials(3.0, CV, power=0.8))
    res = _run(200, n, 0.03, seed=300)
    power = sum(r["verdict"] == "slower" for r in res) / len(res)
    se = np.sqrt(0.8 * 0.2 / 200)
    assert power >= 0.8 - 3 * se, (n, power)


def test_recommended_trials_formula():
    n = recommended_trials(3.0, CV)
    assert 60 <= n <= 80  # normal approximation x pi/2 for the median
    assert recommended_trials(6.0, CV) < n
