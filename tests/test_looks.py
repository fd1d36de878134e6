"""Repeated looks at growing data keep the error: looks that are each an answer split alpha
(``sequential.look_alpha``: a follow-up look at a finished run's pooled rounds, bisect's re-runs
of a step); a staged run's interim looks stop it early at 0.001 each and its verdict is the
fixed-design one at alpha (``sequential.interim_alpha``, Haybittle-Peto).  Seeded simulations of A/A data: the chance that any look calls is at most 5% (binomial 95%
upper tolerance), and the same looks at full alpha each are seen to exceed it."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sst

from ringlab.lab.bisect.engine import DEFAULT_BUDGET_FACTOR, ENDPOINT_BUDGET_FACTOR, max_looks
from ringlab.stats import ranktests as rt
from ringlab.stats.sequential import POLICY, interim_alpha, look_alpha
from ringlab.stats.stopping_record import StageRecord, Stopping

RUNS = 4000


def _rejects(D, alpha: float) -> np.ndarray:
    """Rows of D (runs x rounds) whose signed-rank CI at 1 - alpha excludes 0: the paired test's
    call at alpha, as compare() makes it."""
    lo, hi = rt.signed_rank_ci_batch(D, 1 - alpha)
    return (lo > 0) | (hi < 0)


def _any_look_calls(rng, rounds_per_look: int, looks: int, level) -> int:
    """A/A runs whose rounds arrive ``rounds_per_look`` at a time; each look tests all the rounds so
    far with the signed-rank test at ``level(look)``; how many runs some look called."""
    d = rng.standard_t(5, (RUNS, rounds_per_look * looks)) * 0.03
    called = np.zeros(RUNS, dtype=bool)
    for j in range(1, looks + 1):
        a = level(j)
        if a > 0:
            called |= _rejects(d[:, :rounds_per_look * j], a)
    return int(called.sum())


def _tolerance(rate: float = 0.05) -> float:
    return sst.binom.ppf(0.95, RUNS, rate)


def test_look_alpha_spends_alpha_over_the_looks():
    assert look_alpha(1, 6) == pytest.approx(0.05 / 6)
    assert sum(look_alpha(j, 6) for j in range(1, 10)) == pytest.approx(0.05)   # past the last: 0
    assert look_alpha(7, 6) == 0.0 and look_alpha(1, 1) == 0.05
    # the staged review's level is the rule's: Bonferroni over the policy's stages
    assert look_alpha(3, POLICY.max_stages, POLICY.alpha) == pytest.approx(POLICY.alpha / POLICY.max_stages)
    with pytest.raises(ValueError):
        look_alpha(0, 6)


def test_a_follow_up_look_at_pooled_rounds_keeps_the_aa_rate():
    # a finished run of 20 rounds and a follow-up that adds 20 more and tests all 40: two looks
    rng = np.random.default_rng(31)
    spent = _any_look_calls(rng, 20, 2, lambda j: look_alpha(j, 2))
    assert spent <= _tolerance(), spent / RUNS
    # control: both looks at full alpha inflate the A/A rate (about 8%), and the simulation sees it
    full = _any_look_calls(rng, 20, 2, lambda j: 0.05)
    assert full > _tolerance(), full / RUNS


def test_bisect_endpoint_looks_keep_the_aa_rate():
    # the endpoints take up to ENDPOINT_BUDGET_FACTOR runs of the first run's rounds, each a look
    first = 12
    most = max_looks(ENDPOINT_BUDGET_FACTOR * first, first)
    assert most == ENDPOINT_BUDGET_FACTOR and max_looks(DEFAULT_BUDGET_FACTOR * first, first) == 3
    assert max_looks(5, first) == 1          # a budget under one run: one look at full alpha
    rng = np.random.default_rng(32)
    spent = _any_look_calls(rng, first, most, lambda j: look_alpha(j, most))
    assert spent <= _tolerance(), spent / RUNS
    full = _any_look_calls(rng, first, most, lambda j: 0.05)
    assert full > _tolerance(0.10), full / RUNS    # at 5% each: well above 10% (about 18%)


def test_the_stopping_record_counts_the_looks():
    def stage(i, reason):
        return StageRecord(stage=i, layouts=4, rounds_per_layout=2, new_rounds=8, first_round=8 * i,
                           stop_reason=reason)
    st = Stopping(target_ci=1.0, budget_s=None, stages=(stage(0, None),))
    assert st.looks == 0                     # the pilot runs: not looked at yet
    st = Stopping(target_ci=1.0, budget_s=None, stages=(stage(0, "continue"), stage(1, None)))
    assert st.looks == 1
    st = Stopping(target_ci=1.0, budget_s=None, stages=(stage(0, "continue"), stage(1, "decided")))
    assert st.looks == 2 and Stopping.from_json(st.to_json()).looks == 2   # env.json keeps the count


def test_a_staged_run_s_interim_looks_keep_its_verdict_at_its_level():
    # three looks at 20, 40 and 60 rounds: the first two may stop the run on "decided", the last
    # is the verdict at 5% of the rounds that ran (a stopped run's verdict is its stop's call)
    rng = np.random.default_rng(33)
    most = POLICY.max_stages
    assert interim_alpha(1, most) == POLICY.interim_alpha == 0.001 and interim_alpha(most + 1, most) == 0.0

    def level(j):
        return POLICY.alpha if j == 3 else interim_alpha(j, most)
    spent = _any_look_calls(rng, 20, 3, level)
    assert spent <= _tolerance(), spent / RUNS
    # control: interim looks at alpha / max_stages add every early stop's call to the verdict's 5%
    split = _any_look_calls(rng, 20, 3, lambda j: POLICY.alpha if j == 3 else look_alpha(j, most))
    assert split > spent, (split / RUNS, spent / RUNS)
