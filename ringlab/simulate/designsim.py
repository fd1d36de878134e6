"""Error rates of the layouts verdict at the designs the level planner picks, by simulation.

The planner (``ringlab.stats.plan.allocate``) picks K layout pairs (at least
``plan.MIN_LAYOUTS``), R processes per layout pair and arm (= rounds per layout) and I
timed iterations per process.  ``simulate_runs`` draws runs of such a design from noise at the
three levels the planner plans with, on a machine that switches between a fast and a slow state:

* rounds: R shuffled blocks of the K layout pairs; in each round one fresh process of each arm,
  in a random order (``ringlab.run.plan``);
* layout level: each arm's build of pair k adds a fixed offset N(0, s_L^2 / 2), so a pair's log
  ratio carries s_L^2;
* process level: each process adds Student t (4 df) noise scaled to variance s_P^2 / 2;
* iteration level: each of the I iterations adds N(0, s_I^2 / 2); a process's value is the median
  of its iterations, as ``ringlab.stats.layouts`` takes it;
* machine states: a persistent two-state Markov chain on the sequence of processes (mean
  durations ``durations`` processes), so states last many processes and switch between the two
  processes of a round; the slow state adds ``state_gap`` to the log time, and the change's
  effect may differ by state (``effect`` = (fast, slow), log scale).

Each run goes through the pipeline as a run folder does: ``layouts.rounds_from_trials``
(per-round log ratios, the states of ``ringlab.stats.states.classify``), then
``layouts.layout_verdict``: the REML fit of layout pair and round (``ringlab.stats.fit``), with
the states as a diagnostic that does not enter the CI.

Sequential stopping (``stages`` > 1): the run measures a stage of K layout pairs x R rounds,
and adds another stage of K fresh layout pairs while the half-width is above the plan's
target (the predicted half-width of one stage), up to ``stages`` stages; the verdict is that of
the rounds measured when it stops.  The decision looks at the CI's width only, never its side.

What the verdict claims, fixed before the data are seen: the run's geometric-mean effect, the
mean over its rounds of the effect in the state its candidate trial ran in (``true_effect``),
whatever states the classifier finds.  ``design_rates`` counts, per design:

* A/A: runs whose CI excludes 0 with no effect;
* coverage: runs whose CI holds the run's geometric-mean effect, under a state-dependent effect;
* disjoint reruns: pairs of independent runs whose CIs do not overlap, under the planned effect
  (the same in both states; under a state-dependent effect two runs differ by their slow
  shares, which each row reports, and ``disjoint`` counts those pairs for information);
* power: runs whose CI lies above 0 for the planned effect (the same in both states): the
  effect the planned design finds with 80% power, from the planner's variances (the upper
  bounds, ``upper`` x what a calibration of this machine measures, ``calibrated_components``)
  and its t half-width on K - 1 df.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats as sst

from ringlab.simulate import noise as _noise
from ringlab.stats import layouts as _layouts

#: per-level SDs of the log ratio (layout, process, iteration): a noisy 2-vCPU guest
COMPONENTS = (0.02, 0.02, 0.01)
#: a state-dependent effect: faster in the fast state, slower in the slow one (the VM's d8)
STATE_EFFECT = (-0.035, 0.087)
#: the planner plans with upper bounds of the components; their ratio to the truth
UPPER = 1.5


def calibrated_components(components=COMPONENTS, durations=_noise.DURATIONS,
                          state_gap: float = _noise.STATE_GAP) -> tuple[float, float, float]:
    """The level SDs an A/A calibration on this simulated machine measures: a round whose two
    processes ran in different states carries the state gap, so the process level holds
    ``state_gap^2`` times the chance that the state changes from one process to the next."""
    s_l, s_p, s_i = components
    switch = 2.0 / (durations[0] + durations[1])
    return s_l, math.sqrt(s_p ** 2 + switch * state_gap ** 2), s_i


@dataclass(frozen=True)
class Design:
    """K layout pairs x R processes per layout pair and arm (rounds) x I iterations per process."""
    layouts: int
    rounds: int
    iterations: int

    def unit_variance(self, components=None, upper: float = UPPER) -> float:
        """Variance of one layout pair's estimate as the planner computes it (``plan.allocate``'s
        formula, at upper bounds ``upper`` x the calibrated components)."""
        comps = calibrated_components() if components is None else components
        s_l, s_p, s_i = (upper * c * c for c in comps)
        return s_l + s_p / self.rounds + s_i / (self.rounds * self.iterations)

    def half_width(self, components=None, upper: float = UPPER, level: float = 0.95) -> float:
        """The plan's t half-width (log scale) on K - 1 df, as ``plan.allocate`` predicts it."""
        K = self.layouts
        return float(sst.t.ppf(0.5 + level / 2, K - 1) * math.sqrt(self.unit_variance(components, upper) / K))

    def planned_effect(self, components=None, upper: float = UPPER, power: float = 0.8,
                       level: float = 0.95) -> float:
        """The effect (log scale) this design calls (CI above 0) with ``power``, by the noncentral t."""
        K = self.layouts
        se = math.sqrt(self.unit_variance(components, upper) / K)
        q = sst.t.ppf(0.5 + level / 2, K - 1)
        f = lambda ncp: sst.nct.sf(q, K - 1, ncp) - power
        return float(optimize.brentq(f, 0.0, 50.0) * se)


def _markov(runs: int, n: int, durations, rng) -> np.ndarray:
    p_leave = 1.0 / np.asarray(durations, dtype=float)
    share_slow = durations[1] / (durations[0] + durations[1])
    s = np.empty((runs, n), dtype=int)
    s[:, 0] = rng.random(runs) < share_slow
    u = rng.random((runs, n))
    for t in range(1, n):
        prev = s[:, t - 1]
        s[:, t] = np.where(u[:, t] < p_leave[prev], 1 - prev, prev)
    return s


def simulate_runs(design: Design, runs: int, effect=(0.0, 0.0), rng=None, components=COMPONENTS,
                  durations=_noise.DURATIONS, state_gap: float = _noise.STATE_GAP, stages: int = 1) -> dict:
    """``runs`` runs of ``stages`` x K layout pairs, vectorised: arrays (runs, processes) of
    ``round``, ``layout``, ``arm``, ``log_y``, ``state`` (true), in the order they ran."""
    rng = rng or np.random.default_rng()
    K, R, I = design.layouts, design.rounds, design.iterations
    s_l, s_p, s_i = components
    KK = K * stages
    # per stage: R blocks of that stage's K fresh pairs
    plan = np.concatenate([np.stack([rng.permutation(K) + g * K for _ in range(R * runs)]).reshape(runs, R * K)
                           for g in range(stages)], axis=1)
    n_rounds = plan.shape[1]
    n = 2 * n_rounds
    state = _markov(runs, n, durations, rng) if state_gap else np.zeros((runs, n), dtype=int)
    first = rng.integers(0, 2, size=(runs, n_rounds))
    arm = np.empty((runs, n), dtype=int)
    arm[:, 0::2], arm[:, 1::2] = first, 1 - first
    lay = np.repeat(plan, 2, axis=1)
    offsets = rng.normal(0.0, s_l / math.sqrt(2), size=(runs, 2, KK))
    off = np.take_along_axis(offsets.reshape(runs, 2 * KK), arm * KK + lay, axis=1)
    proc = rng.standard_t(4, size=(runs, n)) * s_p / math.sqrt(2) / math.sqrt(2.0)
    it = np.median(rng.normal(0.0, s_i / math.sqrt(2), size=(runs, n, I)), axis=2)
    eff = np.asarray(effect, dtype=float)
    log_y = math.log(3.8) + state_gap * state + off + proc + it + arm * eff[state]
    rnd = np.repeat(np.arange(n_rounds), 2)[None, :].repeat(runs, axis=0)
    return {"round": rnd, "layout": lay, "arm": arm, "log_y": log_y, "state": state, "stage_rounds": R * K}


def analyse(sim: dict, i: int, n_rounds: int | None = None):
    """The verdict of run ``i`` on its first ``n_rounds`` rounds (all without), and its rounds."""
    n = 2 * n_rounds if n_rounds else sim["log_y"].shape[1]
    order = np.arange(n)
    r = _layouts.rounds_from_trials(order, sim["round"][i, :n], sim["layout"][i, :n], sim["arm"][i, :n],
                                    sim["log_y"][i, :n])
    return r


def _verdict(r, shift: float = 0.0) -> dict:
    return _layouts.layout_verdict(r.d + shift, r.layout, r.state)


def _staged(sim: dict, i: int, stages: int, target: float, shift: float = 0.0):
    """The stage the run stops at, its rounds and its verdict (the width decides, never the side)."""
    per = sim["stage_rounds"]
    for g in range(1, stages + 1):
        r = analyse(sim, i, per * g)
        v = _verdict(r, shift)
        hw = (v["ci_high"] - v["ci_low"]) / 2
        if g == stages or (math.isfinite(hw) and hw <= target):
            return g, r, v
    raise AssertionError("unreachable")


def true_effect(sim: dict, i: int, n_rounds: int, effect) -> float:
    """Run ``i``'s geometric-mean effect over its first ``n_rounds`` rounds (log scale): the mean
    of the effect in the state each candidate trial ran in."""
    n = 2 * n_rounds
    arm, st = sim["arm"][i, :n], sim["state"][i, :n]
    return float(np.asarray(effect, dtype=float)[st[arm == 1]].mean())


def design_rates(design: Design, runs: int = 200, seed: int = 0, stages: int = 1, effect=STATE_EFFECT,
                 components=COMPONENTS, durations=_noise.DURATIONS, state_gap: float = _noise.STATE_GAP,
                 upper: float = UPPER) -> dict:
    """Counts over ``runs`` runs of ``design``: ``aa`` (A/A calls), ``power`` (calls of the planned
    effect), ``covered`` (CIs holding the run's geometric-mean effect, ``true_effect``, under the
    state-dependent ``effect``), ``disjoint`` (non-overlapping CIs among ``runs // 2`` pairs of
    runs under ``effect``), ``disjoint_uniform`` (the same under the planned effect),
    ``two_states`` (runs whose verdict found two states), ``stages`` (mean stages run),
    ``planned_effect`` (log)."""
    rng = np.random.default_rng(seed)
    kw = {"components": components, "durations": durations, "state_gap": state_gap, "stages": stages}
    planner = calibrated_components(components, durations, state_gap)
    target = design.half_width(planner, upper)
    planned = design.planned_effect(planner, upper)
    null = simulate_runs(design, runs, (0.0, 0.0), rng, **kw)
    dep = simulate_runs(design, runs, effect, rng, **kw)
    aa = power = covered = two = 0
    used = []
    lo, hi = np.empty(runs), np.empty(runs)
    plo, phi = np.empty(runs), np.empty(runs)
    per = null["stage_rounds"]
    for i in range(runs):
        _, _, v = _staged(null, i, stages, target)
        aa += bool(v["ci_low"] > 0 or v["ci_high"] < 0)
        _, _, vp = _staged(null, i, stages, target, planned)
        power += bool(vp["ci_low"] > 0)
        plo[i], phi[i] = vp["ci_low"], vp["ci_high"]
        g, _, vd = _staged(dep, i, stages, target)
        used.append(g)
        lo[i], hi[i] = vd["ci_low"], vd["ci_high"]
        covered += bool(vd["ci_low"] <= true_effect(dep, i, per * g, effect) <= vd["ci_high"])
        two += vd["states"] == 2
    m = runs // 2
    apart = (hi[0:2 * m:2] < lo[1:2 * m:2]) | (hi[1:2 * m:2] < lo[0:2 * m:2])
    apart_u = (phi[0:2 * m:2] < plo[1:2 * m:2]) | (phi[1:2 * m:2] < plo[0:2 * m:2])
    return {"design": design, "runs": runs, "aa": aa, "power": power, "covered": covered, "pairs": m,
            "disjoint": int(apart.sum()), "disjoint_uniform": int(apart_u.sum()), "two_states": two,
            "stages": float(np.mean(used)), "planned_effect": planned, "half_width": target}


#: the designs the planner can pick, as the tests grid them
GRID = tuple(Design(K, R, I) for K in (4, 8, 16, 32) for R in (1, 2, 4, 8) for I in (1, 5))
