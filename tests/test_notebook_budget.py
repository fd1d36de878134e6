"""A notebook's further runs share one budget: the lock arm and the batch sweep of the batch-zeroing
notebook together spend what its size sweep may, not that once per run."""
from __future__ import annotations

import pytest

from ringlab.errors import RinglabError
from ringlab.lab import notebook as rn


@pytest.mark.parametrize("profile,budget", [("quick", 60.0), ("full", 300.0)])
def test_further_runs_split_the_profiles_budget(profile, budget):
    values = rn.params("ptr_ring", profile=profile)
    assert values["budget"] == budget
    each = rn.shared_budget(values, 5)
    assert each == pytest.approx(budget / 5)
    further = rn.params("ptr_ring", profile=profile, budget=each)
    assert further["budget"] == pytest.approx(budget / 5) and further["target_ci"] == values["target_ci"]


def test_no_budget_gives_none_and_bad_run_counts_are_refused():
    assert rn.shared_budget({"budget": None}, 3) is None
    assert rn.shared_budget({}, 3) is None
    for bad in (0, -1, 1.5):
        with pytest.raises(RinglabError, match="runs"):
            rn.shared_budget({"budget": 60.0}, bad)
