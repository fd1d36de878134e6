"""Variance components of a nested design recover the simulated components."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from ringlab.errors import DataError
from ringlab.stats.calibration import nested_components


def _frame(rng, s_l, s_p, s_i, n_l=12, n_p=10, n_i=6):
    rows = []
    for lay in range(n_l):
        a = rng.normal(0, s_l)
        for t in range(n_p):
            b = rng.normal(0, s_p)
            for it in range(n_i):
                rows.append((lay, t, it, a + b + rng.normal(0, s_i)))
    return pd.DataFrame(rows, columns=["layout", "trial", "iteration", "y"])


@pytest.mark.parametrize("s", [(0.01, 0.005, 0.002), (0.0, 0.01, 0.01), (0.02, 0.0, 0.001)])
def test_components_are_unbiased_and_bounded(s):
    rng = np.random.default_rng(11)
    est, cover = [], []
    for _ in range(200):
        comps = nested_components(_frame(rng, *s), "y", ["layout", "trial"])
        est.append([c.variance for c in comps])
        cover.append([c.upper >= sig ** 2 for c, sig in zip(comps, s)])
    est, cover = np.array(est), np.array(cover)
    for k, sig in enumerate(s):
        # the clamped estimator is biased up only where the truth is 0
        assert est[:, k].mean() == pytest.approx(sig ** 2, abs=max(0.15 * sig ** 2, 2e-6))
        # the 90% upper bound covers at least at its level (a binomial test that can fail)
        assert sst.binomtest(int(cover[:, k].sum()), len(cover), 0.9, alternative="less").pvalue > 0.001


def test_names_and_units():
    rng = np.random.default_rng(3)
    comps = nested_components(_frame(rng, 0.01, 0.01, 0.01, n_l=5, n_p=4, n_i=3), "y", ["layout", "trial"])
    assert [c.level for c in comps] == ["layout", "trial", "iteration"]
    assert [c.units_per_parent for c in comps] == [5, 4, 3]
    assert [c.df for c in comps] == [4, 15, 40]


def test_missing_column_is_named():
    with pytest.raises(DataError, match="no column process"):
        nested_components(pd.DataFrame({"y": [1.0]}), "y", ["process"])
