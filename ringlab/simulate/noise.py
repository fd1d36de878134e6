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
    """The effect with the states weighted equally (log scale): what the headline estimates."""
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
