"""Noise like a real machine's, for testing the verdicts: states, switches inside rounds, layouts.

``simulate_ab`` draws one A/B run of the layout design:

* K layout pairs; each round measures one pair, baseline and candidate back to back in a random
  order, and rounds cycle over the pairs in randomized blocks (every block is a permutation of
  the K pairs), as ``ringlab.run.plan`` orders them;
* the machine state is a persistent two-state Markov process on the trial sequence (mean
  durations ``durations`` trials, fast first), so a state lasts many rounds and can switch between
  the two trials of a round;
* the slow state adds ``state_gap`` to every log time; the change's effect may differ by state
  (``effect`` = (fast, slow), log scale);
* each arm's layout k adds a fixed offset drawn N(0, sigma_layout^2 / 2), so a layout pair's
  offset has SD ``sigma_layout``;
* trial noise is Student t with 4 df scaled to ``noise_sd`` (heavy tails).

The defaults are the Intel 2-vCPU KVM guest's: a 3.8 vs 5.3 ns/op fast/slow baseline (gap
ln(5.3/3.8)), states of 20 and 35 trials on average, and 2% trial noise.
"""
from __future__ import annotations

import math

import numpy as np

STATE_GAP = math.log(5.3 / 3.8)
DURATIONS = (20.0, 35.0)
NOISE_SD = 0.02


def markov_states(n: int, durations, rng: np.random.Generator) -> np.ndarray:
    """A two-state chain of length n whose runs last ``durations`` trials on average."""
    p_leave = 1.0 / np.asarray(durations, dtype=float)
    share_slow = durations[1] / (durations[0] + durations[1])
    s = np.empty(n, dtype=int)
    s[0] = int(rng.random() < share_slow)
    u = rng.random(n)
    for t in range(1, n):
        s[t] = 1 - s[t - 1] if u[t] < p_leave[s[t - 1]] else s[t - 1]
    return s


def block_plan(K: int, rounds_per_layout: int, rng: np.random.Generator) -> np.ndarray:
    """The layout pair of each round: ``rounds_per_layout`` shuffled blocks of the K pairs."""
    return np.concatenate([rng.permutation(K) for _ in range(rounds_per_layout)])


def simulate_ab(K: int = 8, rounds_per_layout: int = 20, effect=(0.0, 0.0), sigma_layout: float = 0.02,
                rng: np.random.Generator | None = None, durations=DURATIONS, state_gap: float = STATE_GAP,
                noise_sd: float = NOISE_SD, base_level: float = math.log(3.8)) -> dict:
    """One simulated run: per-trial arrays ``order``, ``round``, ``layout``, ``arm``, ``log_y``, ``state``."""
    rng = rng or np.random.default_rng()
    plan = block_plan(K, rounds_per_layout, rng)
    n_rounds = len(plan)
    n = 2 * n_rounds
    state = markov_states(n, durations, rng) if state_gap else np.zeros(n, dtype=int)
    offsets = rng.normal(0.0, sigma_layout / math.sqrt(2), size=(2, K))
    first = rng.integers(0, 2, size=n_rounds)
    arm = np.empty(n, dtype=int)
    arm[0::2], arm[1::2] = first, 1 - first
    rnd = np.repeat(np.arange(n_rounds), 2)
    lay = np.repeat(plan, 2)
    eff = np.asarray(effect, dtype=float)
    noise = rng.standard_t(4, size=n) * noise_sd / math.sqrt(2.0)   # t4 has variance 2
    log_y = (base_level + state_gap * state + offsets[arm, lay] + arm * eff[state] + noise)
    return {"order": np.arange(n), "round": rnd, "layout": lay, "arm": arm, "log_y": log_y,
            "state": state}


def long_run_effect(effect) -> float:
    """The effect with the states weighted equally (log scale).  Not what a run's headline
    estimates: that is the states' effects weighted by the share of the run's trials (every arm's)
    in each (``ringlab.simulate.stoppingsim.run_effect``, ``slow_share``)."""
    return float(np.mean(effect))


def paired_rounds(runs: int, n: int, effect: float = 0.0, rng: np.random.Generator | None = None,
                  durations=DURATIONS, state_gap: float = STATE_GAP, noise_sd: float = NOISE_SD):
    """(baseline, candidate) log values of ``runs`` one-build runs of ``n`` rounds each, arrays
    (runs, n): the machine state is the persistent Markov process of ``simulate_ab`` on the
    trial sequence (2 trials per round, arms in a random order), so states last many rounds and
    switch inside rounds; trial noise t4; the candidate adds ``effect`` (log scale) in every state."""
    rng = rng or np.random.default_rng()
    if n == 0:
        return np.empty((runs, 0)), np.empty((runs, 0))
    p_leave = 1.0 / np.asarray(durations, dtype=float)
    share_slow = durations[1] / (durations[0] + durations[1])
    s = np.empty((runs, 2 * n), dtype=int)
    s[:, 0] = rng.random(runs) < share_slow
    u = rng.random((runs, 2 * n))
    for t in range(1, 2 * n):
        prev = s[:, t - 1]
        s[:, t] = np.where(u[:, t] < p_leave[prev], 1 - prev, prev)
    y = state_gap * s + rng.standard_t(4, size=(runs, 2 * n)) * noise_sd / math.sqrt(2.0)
    first, second = y[:, 0::2], y[:, 1::2]
    base_first = rng.random((runs, n)) < 0.5
    b = np.where(base_first, first, second)
    c = np.where(base_first, second, first) + effect
    return b, c


class RunNoise:
    """The noise of one staged run, drawn trial by trial as the run's stages ask for them.

    A trial is one process of one arm in one mode; its log time is the sum of

    * a **layout** offset per (mode, arm, layout) drawn once, N(0, ``sigma_layout``^2 / 2), so a
      layout pair's log ratio carries ``sigma_layout``^2;
    * a **process (round)** term, N(0, ``sigma_process``^2 / 2), or Student t with ``process_df``
      degrees of freedom scaled to that variance (heavy tails);
    * per timed **iteration** (loop) N(0, ``sigma_iteration``^2 / 2);
    * the **machine state**: a two-state Markov chain over the trials in the order they run,
      persistent across stages, mean durations ``durations`` trials (fast, slow); the slow state
      adds ``state_gap``;
    * the candidate's **effect** in the state the trial ran in (``effects[(mode, arm)]`` = (fast,
      slow), log scale) plus the run's own **drift**: a shift per (mode, arm) drawn once per run,
      N(0, ``drift_sd``^2).

    ``shift`` holds each row's drift, so the run's true effect is known to the harness.
    """

    def __init__(self, rng: np.random.Generator, sigma_layout: float, sigma_process: float, sigma_iteration: float,
                 effects: dict, process_df: float = math.inf, state_gap: float = 0.0,
                 durations=(math.inf, math.inf), drift_sd: float = 0.0):
        self.rng = rng
        self.sd = (sigma_layout / math.sqrt(2), sigma_process / math.sqrt(2), sigma_iteration / math.sqrt(2))
        self.process_df = float(process_df)
        self.effects = {k: (float(v[0]), float(v[1])) for k, v in effects.items()}
        self.state_gap = float(state_gap)
        self.leave = tuple(1.0 / d if d and math.isfinite(d) and d > 0 else 0.0 for d in durations)
        self.states_on = bool(state_gap) and any(self.leave)
        self.offsets: dict = {}
        self.shift = {k: float(rng.normal(0.0, drift_sd)) if drift_sd > 0 else 0.0 for k in self.effects}
        share_slow = durations[1] / (durations[0] + durations[1]) if self.states_on else 0.0
        self.state = int(rng.random() < share_slow)

    def _process(self, n: int) -> np.ndarray:
        if math.isinf(self.process_df):
            return self.rng.normal(0.0, self.sd[1], n)
        nu = self.process_df
        return self.rng.standard_t(nu, n) * self.sd[1] / math.sqrt(nu / (nu - 2))

    def _states(self, n: int) -> np.ndarray:
        s = np.empty(n, dtype=int)
        if not self.states_on:
            s[:] = 0
            return s
        u = self.rng.random(n)
        cur = self.state
        for t in range(n):
            if u[t] < self.leave[cur]:
                cur = 1 - cur
            s[t] = cur
        self.state = cur
        return s

    def trials(self, keys: list, layouts: np.ndarray, repeats: int) -> tuple[np.ndarray, np.ndarray]:
        """(log time of each iteration, shape (trials, repeats); state of each trial) for trials
        of (mode, arm) ``keys`` at ``layouts``, in the order given (the order they run)."""
        n = len(keys)
        off = np.empty(n)
        eff = np.zeros((n, 2))
        for i, (key, k) in enumerate(zip(keys, layouts)):
            o = self.offsets.get((key, int(k)))
            if o is None:
                o = self.offsets[(key, int(k))] = float(self.rng.normal(0.0, self.sd[0]))
            off[i] = o
            if key in self.effects:
                e = self.effects[key]
                eff[i] = (e[0] + self.shift[key], e[1] + self.shift[key])
        st = self._states(n)
        base = off + self._process(n) + self.state_gap * st + eff[np.arange(n), st]
        its = self.rng.normal(0.0, self.sd[2], (n, repeats))
        return base[:, None] + its, st
