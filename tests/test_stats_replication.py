"""The run-to-run level: random effects over runs, the host's drift and the next-run interval.

The simulations draw runs whose effect moves between runs (a run effect u ~ N(0, tau^2) on top
of each run's own noise) and check that the next-run interval holds the following run's
estimate at its nominal rate, where the within-run CI does not."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from ringlab.stats import compare
from ringlab.stats.contract import JSON_FIELDS, NEXT_FIELDS, to_records
from ringlab.stats.replication import (NO_DRIFT, Drift, combine, drift_of, drift_of_runs, next_run, row_se,
                                       with_next_run)
from ringlab.stats.summary import StatsError


def _binom_ok(hits: int, n: int, p: float = 0.95) -> bool:
    lo, hi = sps.binom.interval(0.999, n, p)
    return lo <= hits <= hi


def _coverage(tau: float, s: float, drift: Drift | None, n: int = 4000, seed: int = 1) -> tuple[int, int]:
    """(next-run interval hits, within-run CI hits) of run 2's estimate, over ``n`` pairs of runs."""
    rng = np.random.default_rng(seed)
    d = 0.05 + rng.normal(0, tau, (n, 2)) + rng.normal(0, s, (n, 2))
    pi = ci = 0
    z = sps.norm.ppf(0.975)
    for a, b in d:
        lo, hi = next_run(a, s, drift)
        pi += lo <= b <= hi
        ci += abs(b - a) <= z * s
    return pi, ci


def test_next_run_interval_covers_a_drifting_next_run_at_its_nominal_rate():
    pi, ci = _coverage(tau=0.01, s=0.004, drift=Drift(tau=0.01))
    assert _binom_ok(pi, 4000), pi / 4000
    assert ci / 4000 < 0.6        # the run's own CI misses most next runs when the effect drifts


def test_next_run_interval_without_drift_model_undercovers_a_drifting_host():
    pi, _ = _coverage(tau=0.01, s=0.004, drift=None)
    assert pi / 4000 < 0.7        # the two runs' noise alone does not hold a drifting host


def test_next_run_interval_holds_without_drift_when_there_is_none():
    pi, ci = _coverage(tau=0.0, s=0.004, drift=None)
    assert _binom_ok(pi, 4000), pi / 4000
    assert ci / 4000 < 0.9        # a CI is not a prediction interval even on a quiet host (~83%)


@pytest.mark.parametrize("tau", [0.0, 0.004, 0.01])
def test_drift_estimated_from_five_runs_keeps_the_level(tau):
    """The host's drift measured from 5 runs (random effects), then run 6's interval holds run 7."""
    rng = np.random.default_rng(7)
    s, n, hits = 0.004, 800, 0
    for _ in range(n):
        d = 0.05 + rng.normal(0, tau, 7) + rng.normal(0, s, 7)
        drift = drift_of_runs(combine(d[:5], np.full(5, s * s)), "earlier runs")
        lo, hi = next_run(d[5], s, drift)
        hits += lo <= d[6] <= hi
    assert hits / n >= 0.93, hits / n


def test_next_run_interval_is_wider_than_the_ci():
    d, s = math.log(1.05), 0.004
    z = sps.norm.ppf(0.975)
    lo0, hi0 = next_run(d, s, None)
    assert hi0 - lo0 == pytest.approx(2 * z * s * math.sqrt(2))
    lo1, hi1 = next_run(d, s, Drift(tau=0.002, rel=0.5, df=4))
    assert hi1 - lo1 > hi0 - lo0 > 2 * z * s
    # the part proportional to the effect: a larger effect drifts more
    assert Drift(tau=0.002, rel=0.5).variance(0.1) > Drift(tau=0.002, rel=0.5).variance(0.01)


def test_combine_finds_heterogeneity_and_tau():
    eff = [0.017, 0.111, 0.022, 0.034, 0.074]
    var = [0.001 ** 2, 0.02 ** 2, 0.0015 ** 2, 0.004 ** 2, 0.003 ** 2]
    re = combine(eff, var)
    assert re.k == 5 and re.tau > 0.01 and re.i2 > 0.9 and re.heterogeneous()
    assert re.pi_low < min(eff) < max(eff) < re.pi_high or re.pi_high - re.pi_low > re.ci_high - re.ci_low
    same = combine([0.05, 0.051, 0.049], [0.004 ** 2] * 3)
    assert same.tau == 0 and not same.heterogeneous()
    assert same.pi_high - same.pi_low > same.ci_high - same.ci_low


@pytest.mark.parametrize("eff,var", [([0.1], [0.01]), ([0.1, math.nan], [0.01, 0.01]), ([0.1, 0.2], [0.01, 0])])
def test_combine_refuses_what_it_cannot_combine(eff, var):
    with pytest.raises(StatsError):
        combine(eff, var)


def test_drift_splits_absolute_and_proportional_parts():
    aa = combine([0.0, 0.004, -0.004, 0.001], [0.002 ** 2] * 4)
    ab = combine([0.05, 0.09, 0.03, 0.07], [0.002 ** 2] * 4)
    d = drift_of(aa, ab, "test")
    assert d.rel > 0.2 and d.df == 3
    assert d.variance(ab.estimate) == pytest.approx(max(aa.tau2, ab.tau2), rel=1e-6)
    back = Drift.from_dict(d.as_dict())
    assert back.tau == pytest.approx(d.tau) and back.rel == pytest.approx(d.rel)
    with pytest.raises(StatsError):
        Drift.from_dict({"tau_pct": -1})
    with pytest.raises(StatsError):
        drift_of(None, None, "x")


def _frame(effect: float = 0.05, n: int = 40, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for mode in (0, 1):
        for r in range(n):
            b = 100 * math.exp(rng.normal(0, 0.01))
            rows += [{"variant": "a", "mode": mode, "round": r, "trial": r, "ns_per_op": b, "status": "ok"},
                     {"variant": "b", "mode": mode, "round": r, "trial": r,
                      "ns_per_op": b * math.exp(effect + rng.normal(0, 0.01)), "status": "ok"}]
    return pd.DataFrame(rows)


def test_with_next_run_fills_every_row_and_says_where_the_drift_comes_from():
    cmp = compare(_frame(), "a")
    assert cmp["next_low_pct"].isna().all()            # compare() alone makes no claim about other runs
    out = with_next_run(cmp, {"0": Drift(tau=0.01, df=4, source="calibration X")})
    assert list(out.columns) == list(cmp.columns)
    for _, r in out.iterrows():
        assert r["next_low_pct"] < r["ci_low_pct"] <= r["ci_high_pct"] < r["next_high_pct"]
        assert r["next_level"] == 0.95 and math.isfinite(row_se(r))
    by_mode = out.set_index("mode")
    assert by_mode.loc[0, "next_source"] == "calibration X" and by_mode.loc[1, "next_source"] == NO_DRIFT
    assert math.isnan(by_mode.loc[1, "drift_pct"]) and by_mode.loc[0, "drift_pct"] == pytest.approx(1.0)
    assert all(v is True for v in out["sign_reproducible"])
    rec = to_records(out)[0]
    assert list(rec) == JSON_FIELDS and set(NEXT_FIELDS) <= set(rec)


def test_sign_reproducible_false_when_the_next_run_may_flip_it():
    cmp = compare(_frame(effect=0.012, n=60), "a")
    called = cmp[cmp["verdict"] == "slower"]
    assert len(called)
    out = with_next_run(cmp, {"*": Drift(tau=0.05, df=4)})
    assert (out.loc[called.index, "sign_reproducible"] == False).all()  # noqa: E712 - the value, not truth


# -- machine states: a run that found two, and a next run that may find one ---------------------

def _two_state_run(rng, e, s_state, present):
    """One run's (headline, se, per-state effects) when the states ``present`` (0, 1 or both) are
    seen: the headline weighs the states it saw equally, each seen state is measured with noise."""
    seen = {k: e[k] + rng.normal(0, s_state) for k in present}
    head = float(np.mean(list(seen.values())))
    se = s_state / math.sqrt(len(seen))
    return head, se, seen


def test_a_next_run_in_one_machine_state_lands_in_the_two_state_interval():
    """A host with a fast and a slow state whose effects differ: a run that saw both weighs them
    equally, the next run finds one state, the other, or both.  The state-aware interval holds the
    next run at its level; the headline's alone misses the one-state runs."""
    from ringlab.stats.replication import next_run_of_states
    rng = np.random.default_rng(3)
    e, s = (0.25, 0.47), 0.008
    n, hits, plain = 3000, 0, 0
    for _ in range(n):
        head, se, seen = _two_state_run(rng, e, s, (0, 1))
        states = [(seen[k], s, s) for k in (0, 1)]
        nxt = _two_state_run(rng, e, s, [(0,), (1,), (0, 1)][rng.integers(3)])[0]
        lo, hi = next_run_of_states(head, se, None, states=states)
        hits += lo <= nxt <= hi
        lo0, hi0 = next_run(head, se, None)
        plain += lo0 <= nxt <= hi0
    assert hits / n >= 0.95, hits / n
    assert plain / n < 0.4, plain / n


def test_a_row_with_one_state_keeps_the_headline_interval():
    from ringlab.stats.replication import next_run_of_states
    d, s = math.log(1.05), 0.004
    assert next_run_of_states(d, s, Drift(tau=0.003, df=5), states=[]) == next_run(d, s, Drift(tau=0.003, df=5))


def test_with_next_run_widens_a_two_state_row_to_each_states_effect():
    """A compare() row in the shape of a committed two-state row (fast +27.7%, slow +59.6%,
    headline +42.8%): its next-run interval holds both states' effects; the one-state row beside
    it is unchanged."""
    cmp = compare(_frame(), "a").head(2).copy()
    two = cmp.index[0]
    cmp.loc[two, ["delta_pct", "ci_low_pct", "ci_high_pct"]] = [42.76, 40.94, 44.60]
    cmp.loc[two, ["delta_fast_pct", "ci_fast_low_pct", "ci_fast_high_pct"]] = [27.71, 25.66, 29.80]
    cmp.loc[two, ["delta_slow_pct", "ci_slow_low_pct", "ci_slow_high_pct"]] = [59.57, 55.0, 64.3]
    cmp.loc[two, "states"] = 2
    cmp.loc[cmp.index[1], "states"] = 1
    drifts = {"*": Drift(tau=0.0075, df=5)}
    out = with_next_run(cmp, drifts)
    r = out.loc[two]
    assert r["next_low_pct"] < 27.71 and r["next_high_pct"] > 59.57
    one_state = with_next_run(cmp.assign(states=1), drifts)
    assert one_state.loc[two, "next_low_pct"] > 35      # the headline alone: around +42.8% only
    assert out.loc[cmp.index[1], "next_low_pct"] == one_state.loc[cmp.index[1], "next_low_pct"]


# -- a mode the drift calibration did not measure ----------------------------------------------

def test_an_uncalibrated_mode_takes_the_widest_calibrated_drift_and_says_so():
    from ringlab.stats.replication import WIDEST, widest_drift
    drifts = {"0": Drift(tau=0.0075, rel=0.0, df=5, source="calibrated X", runs=6),
              "1": Drift(tau=0.0142, rel=0.14, df=4, source="calibrated X", runs=5)}
    w = widest_drift(drifts)
    assert (w.tau, w.rel, w.df, w.runs) == (0.0142, 0.14, 4, 5)
    assert w.source == f"{WIDEST} 0, 1 (calibrated X)"
    assert widest_drift({}) is None
    cmp = compare(_frame(), "a")
    out = with_next_run(cmp, {**drifts, "*": w})
    plain = with_next_run(cmp, drifts)
    r2, p2 = out[out["mode"] == 1].iloc[0], plain[plain["mode"] == 1].iloc[0]
    assert r2["next_source"] == "calibrated X" == p2["next_source"]
    other = with_next_run(cmp.assign(mode=2), {**drifts, "*": w})
    bare = with_next_run(cmp.assign(mode=2), drifts)
    assert (other["next_source"] == w.source).all() and (bare["next_source"] == NO_DRIFT).all()
    assert ((other["next_high_pct"] - other["next_low_pct"]) > (bare["next_high_pct"] - bare["next_low_pct"])).all()


def test_host_drifts_gives_the_widest_for_the_modes_not_calibrated(tmp_path):
    import json
    from ringlab.rundir.calibration import host_drifts
    d = tmp_path / "calibration" / "h"
    d.mkdir(parents=True)
    (d / "drift.json").write_text(json.dumps({"date_utc": "2026-12-04T00:00:00Z", "span_min": 52, "modes": {
        "0": {"tau_pct": 0.75, "rel": 0.0, "df": 5, "runs": 6},
        "1": {"tau_pct": 1.42, "rel": 0.14, "df": 5, "runs": 6}}}))
    drifts = host_drifts("h", tmp_path)
    assert set(drifts) == {"0", "1", "*"}
    assert drifts["*"].tau == pytest.approx(0.0142) and drifts["*"].rel == pytest.approx(0.14)
    assert host_drifts("none", tmp_path) == {}


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("tau_over_se", [0.0, 1.0, 2.0])
def test_combined_ci_covers_the_pooled_effect_at_its_level_with_few_runs(k, tau_over_se):
    """k runs of one comparison, each with its own run effect (SD tau) and noise (SE se): the
    combined 95% CI holds the true effect in 95% of simulated series, less four binomial standard
    errors of 2000 draws (0.93); a normal quantile covers 84-91% here at tau > 0."""
    rng = np.random.default_rng(1000 * k + int(10 * tau_over_se))
    truth, se = 0.02, 0.005
    tau = tau_over_se * se
    held = 0
    for _ in range(2000):
        sizes = se * rng.uniform(0.7, 1.3, k)          # the runs' SEs differ a little, as real runs' do
        eff = truth + rng.normal(0, tau, k) + rng.normal(0, sizes)
        re = combine(eff, sizes ** 2)
        held += re.ci_low <= truth <= re.ci_high
    assert held / 2000 >= 0.95 - 4 * math.sqrt(0.95 * 0.05 / 2000), f"k={k}, tau={tau_over_se} SE: CI held {held / 2000:.3f}"
