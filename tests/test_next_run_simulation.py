"""Does the next-run interval hold the next run at its level, under the kit's own rules?

Series of runs of one comparison: each run's effect is the true one plus a run effect
u ~ N(0, tau^2) (the host's state moving between runs) plus its own noise (SE s, 0.3-1 point,
one level per comparison, each run's SE estimated with 7 degrees of freedom as the layouts
design's is); the host's A/A drift calibration is ``drift.SESSIONS`` runs of an A/A with the same
tau and their own SE.  Each run's interval is taken as a report takes it: from this comparison's
runs so far when there are ``MIN_RUNS`` (``between_of_runs``), else from the host's A/A upper
bound (``between_of_host_aa``).  Printed and asserted per tau = 0, 0.5, 1 point: the share of
next runs inside (93-98%) and the mean width against the interval with the true variances,
z * sqrt(2 s^2 + 2 tau^2) (at most 1.5 times).  "none" is printed beside: it holds at tau = 0 and
misses a drifting host, which is why it says so in words."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from ringlab.stats.replication import (AA_UCB_LEVEL, MIN_RUNS, NONE, between_of_host_aa, between_of_runs,
                                       next_run_interval)
from ringlab.studies.drift import SESSIONS

#: runs per simulated series (so runs 1..RUNS-1 each predict the next)
RUNS = 6
SERIES = 1200
DF_WITHIN = 7
Z = float(sps.norm.ppf(0.975))


def _simulate(tau: float, seed: int) -> dict[str, list]:
    """{basis: [hits, intervals, sum of widths, sum of true widths]} over SERIES series."""
    rng = np.random.default_rng(seed)
    out = {k: [0, 0, 0.0, 0.0] for k in ("runs", "host A/A", "kit", "none")}
    for _ in range(SERIES):
        s = rng.uniform(0.003, 0.01)
        y = 0.03 + rng.normal(0, tau, RUNS) + rng.normal(0, s, RUNS)
        se = s * np.sqrt(rng.chisquare(DF_WITHIN, RUNS) / DF_WITHIN)
        sa = rng.uniform(0.003, 0.01)
        ya = rng.normal(0, tau, SESSIONS) + rng.normal(0, sa, SESSIONS)
        sea = sa * np.sqrt(rng.chisquare(DF_WITHIN, SESSIONS) / DF_WITHIN)
        aa = between_of_host_aa(ya, sea ** 2)
        true_w = 2 * Z * math.sqrt(2 * s * s + 2 * tau * tau)
        for i in range(RUNS - 1):
            own = between_of_runs(y[:i + 1], se[:i + 1] ** 2)
            for name, b in (("kit", own or aa), ("runs" if own else "host A/A", own or aa), ("none", NONE)):
                lo, hi = next_run_interval(float(y[i]), float(se[i]), DF_WITHIN, b)
                r = out[name]
                r[0] += bool(lo <= y[i + 1] <= hi)
                r[1] += 1
                r[2] += hi - lo
                r[3] += true_w
    return out


@pytest.mark.parametrize("tau_pts", [0.0, 0.5, 1.0])
def test_next_run_interval_keeps_its_level_at_a_bounded_width(tau_pts):
    res = _simulate(tau_pts / 100, seed=11 + int(10 * tau_pts))
    lines = []
    for name, (hits, n, w, tw) in res.items():
        lines.append(f"tau {tau_pts:.1f} point  {name:<9} coverage {hits / n:.3f} ({n} intervals), "
                     f"mean width {w / tw:.2f} x the true variances'")
    print(f"\nMIN_RUNS {MIN_RUNS}, host A/A {SESSIONS} runs at a {AA_UCB_LEVEL:.0%} upper bound\n" + "\n".join(lines))
    for name in ("kit", "runs", "host A/A"):
        hits, n, w, tw = res[name]
        assert 0.93 <= hits / n <= 0.98, f"{name}: coverage {hits / n:.3f} at tau {tau_pts} point"
        assert w / tw <= 1.5, f"{name}: width {w / tw:.2f} x the true variances' at tau {tau_pts} point"
    hits, n, *_ = res["none"]
    if tau_pts == 0:
        assert 0.93 <= hits / n <= 0.98, "nothing drifts: the rerun interval holds"
    else:
        assert hits / n < 0.93, "a drifting host: the interval without between-run information misses"
