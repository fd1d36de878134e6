"""A/A rate and power of the staged design, through the run's own stopping code, by simulation.

Each simulated run is what ``ringlab run`` does with ``-p target_ci`` (``ringlab.run.stopping``),
with only the measuring replaced by draws:

* ``stopping.opening`` plans stage 0 from the planner's calibration (the host's, or ``CAUTIOUS``
  for a first run on a host without one), passed in as the runner passes the host's;
* each stage's rounds get their layouts from ``stopping.round_layouts``, the schedule a run
  measures; in a round each arm runs one process, in a random order;
* a trial's ns/op is drawn from the *true* noise, a ``LevelCalibration`` whose point estimates
  are taken as the truth: per arm and layout a fixed offset N(0, s_L^2 / 2), per process
  N(0, s_P^2 / 2), per timed iteration N(0, s_I^2 / 2) (a pair's log ratio then carries the
  variances the calibration measured), on the log scale, times exp(effect) for the candidate;
* the stage costs what the true calibration says a round and a layout cost (``cost_s``), and that
  is the machine time ``stopping.add_time`` records, so the budget binds as it does in a run;
* ``stopping.review`` stops the run or plans its next stage from the rows and components of the
  simulated raw data, exactly as after a measured stage (stop on ``target`` or on ``decided``);
* the call is ``compare()``'s verdict of the run's whole data when it stopped: what summary.md
  would print.  Under A/A a "faster" or "slower" is a false call.

Stopping on "decided" looks at significance (at ``Policy.interim_alpha`` a look, 0.001) as well as
width, so that is where an A/A rate above 5% would come from; ``aa_interval`` gives the binomial interval
the rate of a correct design lies in.

Runs whose noise has what real runs have (``simulate_real_run``, ``ringlab bench stopping``'s
scenarios): the same loop over the same stopping code, with the trials drawn by
``ringlab.simulate.noise.RunNoise`` (layout, round and iteration levels, machine states with a
state-dependent effect, t4 tails at the round level, a run-level drift of the effect) at sizes read
from the committed runs (``ringlab.simulate.fitted``), one to 3 candidates x 2 modes (compare()'s
Holm family); each look's strict decisions are kept, and ``scenario_summary`` turns a scenario's
runs into its A/A rate over all looks, CI coverage, next-run coverage (``ringlab.stats.replication``'s
``between_of_runs`` and ``next_run_interval``, as the kit measures the between-run variance) and
the widths against the intervals at the true variances.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab.catalog import SEED000, SEED003, Verdict, is_call
from ringlab.run import stopping
from ringlab.stats.compare import compare, states_diagnostic
from ringlab.stats.calibration import LevelCalibration
from ringlab.stats.stopping_record import StageRecord, Stopping

#: the simulated arms: seed 000's (ringlab.catalog; labels only, the noise is simulated)
BASELINE, CANDIDATE = SEED000.arms
#: the simulated baseline ns/op (the verdicts are of ratios: any value serves)
NS_PER_OP = 3.0


@dataclass(frozen=True)
class SimRun:
    """One simulated staged run: its call, its estimate and half-width (%), why it stopped, how
    many stages it took and the machine time it would have spent (s)."""
    verdict: str
    delta_pct: float
    half_width_pct: float
    stop_reason: str
    stages: int
    spent_s: float
    layouts: int
    rounds: int

    @property
    def called(self) -> bool:
        return is_call(self.verdict)


def _values(target_pct: float, budget_s: float | None, stop: str, mode: str) -> dict:
    return {"variants": [BASELINE, CANDIDATE], "modes": [int(mode)], "target_ci": float(target_pct),
            "budget": float(budget_s or 0), "stop": stop, "baseline": BASELINE, "warmup": 0, "repeats": 1}


def _draw_stage(rng: np.random.Generator, st: Stopping, stage: StageRecord, seed: int, truth: LevelCalibration,
                offsets: dict, effect: float, mode: str) -> pd.DataFrame:
    """The raw rows of one stage's new rounds (every arm once a round, one row per iteration)."""
    lays = stopping.round_layouts(st, seed)
    reps = int(st.repeats or 1)
    v = {k: (float(x) if isinstance(x, (int, float)) and math.isfinite(x) else 0.0) for k, x in truth.variance.items()}
    rows = []
    first = stage.first_round
    for r in range(first, first + stage.new_rounds):
        k = int(lays.get(r, 0))
        for order, arm in enumerate(rng.permutation([BASELINE, CANDIDATE])):
            key = (arm, k)
            if key not in offsets:
                offsets[key] = rng.normal(0.0, math.sqrt(v["layout"] / 2))
            proc = rng.normal(0.0, math.sqrt(v["process"] / 2))
            its = rng.normal(0.0, math.sqrt(v["iteration"] / 2), reps)
            shift = effect if arm == CANDIDATE else 0.0
            for i, e in enumerate(its):
                rows.append({"variant": arm, "mode": mode, "size": 1000, "trial": r, "round": r, "layout": k,
                             "iteration": i, "order": order, "warmup": False, "status": "ok",
                             "ns_per_op": NS_PER_OP * math.exp(offsets[key] + proc + e + shift)})
    return pd.DataFrame(rows)


def _stage_cost(truth: LevelCalibration, stage: StageRecord, layouts_before: int, repeats: int) -> tuple[float, float]:
    """(build seconds, measuring seconds) of one stage at the true calibration's costs."""
    c = {k: float(x or 0) for k, x in truth.cost_s.items()}
    new_layouts = max(0, stage.layouts - layouts_before)
    per_round = c.get("process", 0.0) + repeats * c.get("iteration", 0.0)
    return new_layouts * c.get("layout", 0.0), stage.new_rounds * per_round


def simulated_stopping(truth: LevelCalibration, planner: LevelCalibration, target_pct: float,
                       budget_s: float | None, stop: str = "decided", effect_pct: float = 0.0,
                       seed: int = 0) -> tuple[Stopping, pd.DataFrame]:
    """One staged run planned from ``planner`` and measured from ``truth`` (see the module doc):
    its stopping record when it stopped and its raw rows."""
    rng = np.random.default_rng(seed)
    mode = str(truth.mode if truth.mode != "any" else "0")
    values = _values(target_pct, budget_s, stop, mode)
    st = stopping.opening(values, {mode: planner})
    effect = math.log1p(effect_pct / 100)
    offsets: dict = {}
    frames = []
    layouts_before = 0
    while True:
        stage = st.last_stage
        frames.append(_draw_stage(rng, st, stage, seed, truth, offsets, effect, mode))
        build_s, measure_s = _stage_cost(truth, stage, layouts_before, int(st.repeats or 1))
        layouts_before = stage.layouts
        st = stopping.add_time(st, measure_s=measure_s, build_s=build_s)
        df = pd.concat(frames, ignore_index=True)
        st = stopping.review(df, st, lambda _m: None)
        if st.stop_reason:
            return st, df


def simulate_run(truth: LevelCalibration, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                 stop: str = "decided", effect_pct: float = 0.0, seed: int = 0) -> SimRun:
    """One staged run planned from ``planner`` and measured from ``truth`` (see the module doc)."""
    st, df = simulated_stopping(truth, planner, target_pct, budget_s, stop, effect_pct, seed)
    row = compare(df, BASELINE).iloc[0]
    return SimRun(str(row["verdict"]), float(row["delta_pct"]),
                  float((row["ci_high_pct"] - row["ci_low_pct"]) / 2), str(st.stop_reason), len(st.stages),
                  float(stopping.spent_s(st)), int(st.layouts), int(df["round"].nunique()))


def simulate_runs(truth: LevelCalibration, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                  runs: int, stop: str = "decided", effect_pct: float = 0.0, seed: int = 0) -> list[SimRun]:
    """``runs`` independent staged runs (seeds ``seed`` .. ``seed + runs - 1``)."""
    return [simulate_run(truth, planner, target_pct, budget_s, stop, effect_pct, seed + i) for i in range(runs)]


def aa_interval(runs: int, level: float = 0.05, confidence: float = 0.95) -> tuple[float, float]:
    """The interval a correct design's A/A rate over ``runs`` runs falls in ``confidence`` of the
    time: the binomial(runs, level) central interval, as rates."""
    lo, hi = sst.binom.interval(confidence, runs, level)
    return lo / runs, hi / runs


def rate_interval(calls: int, runs: int, confidence: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a measured rate (statsmodels' ``proportion_confint``, beta)."""
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = proportion_confint(calls, runs, alpha=1 - confidence, method="beta")
    return float(lo), float(hi)


# --- runs whose noise has what real runs have (``ringlab bench stopping``'s scenarios) -------------

#: the candidates of a family scenario, in order (the first is the one-candidate scenarios')
CANDIDATES = (CANDIDATE, SEED003.baseline, "kernel")


@dataclass(frozen=True)
class Scenario:
    """What one scenario's runs measure: ``candidates`` x ``modes`` rows (a Holm family when more
    than one), a run-level drift of each row's effect (SD ``drift_sd``, log), the process level's
    tails (Student t with ``process_df`` df; inf: normal), and machine states (``states``) with a
    state-dependent effect of ``state_effect`` (fast minus slow, log) around a long-run effect of 0."""
    name: str
    candidates: int = 1
    modes: int = 1
    drift_sd: float = 0.0
    process_df: float = math.inf
    states: bool = False
    state_effect: float = 0.0


def scenarios(levels) -> list[Scenario]:
    """The scenarios ``ringlab bench stopping`` simulates, sized by ``levels``
    (``ringlab.simulate.fitted.Levels``): no drift; drift of 0.5 and 1 point; two states with a
    state-dependent effect; t4 noise at the round level; 3 candidates x 2 modes."""
    return [Scenario("no drift"),
            Scenario("drift 0.5 point", drift_sd=0.005),
            Scenario("drift 1 point", drift_sd=0.01),
            Scenario("two states, state-dependent effect", states=True, state_effect=float(levels.state_effect_diff)),
            Scenario("t4 noise at the round level", process_df=4.0),
            Scenario("3 candidates x 2 modes (Holm family of 6)", candidates=3, modes=2)]


def run_effect(effect, slow_share: float, drift: float) -> float:
    """The effect one run measures of one row (log scale), what its CI is a statement about:
    ``effect`` = (fast, slow) weighted by the share of the run's trials in the slow state,
    ``slow_share`` (``slow_share``: every arm's, the machine's state mix over the run), plus the
    run's own drift."""
    return float(effect[0] * (1 - slow_share) + effect[1] * slow_share + drift)


def slow_share(state_log: dict) -> float:
    """The share of a run's trials, of every arm and mode, that ran in the slow state (0 with
    none).  What a row's estimate is centred on given the machine's states: each round runs every
    arm once in a random order, so the candidate's trial is equally likely in each of the round's
    slots and its log ratio to the baseline's has the expectation effect(state of a random slot)
    (the gap between the two trials' states averages out over the order); the mean per-round log
    ratio the fit estimates (``ringlab.stats.fit``) is then the states' effects weighted by the
    share of all the round's trials in each.  The share of the candidate's own trials is not: it
    moves with the order, together with the state gap between a round's two trials, so a truth
    weighted by it is off by a term the CI does not hold."""
    states = [s for log in state_log.values() for s in log]
    return float(np.mean(states)) if states else 0.0


def false_call(verdict, truth: float) -> bool:
    """Whether a row's ``verdict`` is a false call of a run whose effect is ``truth`` (log scale): a
    call ("faster" / "slower") when the run's effect is 0 (A/A: identical arms), or a call of the
    sign opposite to the run's effect (the call then excludes the run's own effect on the far side
    of 0)."""
    if not is_call(verdict):
        return False
    return truth == 0 or (Verdict(verdict).direction < 0) != (truth > 0)


def _group_mode(group: str, modes: list) -> str:
    """The mode of a compare() group label ("mode=0,size=1000"); the run's only mode without one."""
    for part in str(group).split(","):
        k, _, v = part.partition("=")
        if k.strip() == "mode":
            return v.strip()
    return modes[0]


@dataclass(frozen=True)
class RowOutcome:
    """One compare() row of a simulated run when it stopped, log scale: its estimate, CI, standard
    error and df (``replication.row_se``/``row_df``), the effect this run measures (``truth``,
    ``run_effect``: the state mix of the run's trials, ``slow_share``, and the run's drift), the SD of its
    estimate at the true variances (``true_se``), its verdict and the states it found (1 where the
    classifier did not run)."""
    estimate: float
    low: float
    high: float
    se: float
    df: float
    truth: float
    true_se: float
    verdict: str
    states: int


@dataclass(frozen=True)
class RealRun:
    """One simulated staged run of a ``Scenario``: its rows when it stopped, how many looks (stage
    reviews) it made and at how many some row was decided faster or slower at the look's strict
    level falsely (``false_call`` against the run's effect at that look), why it stopped, its design
    and the machine time it would have spent."""
    rows: tuple
    looks: int
    looks_called: int
    stop_reason: str
    spent_s: float
    layouts: int
    rounds: int
    repeats: int

    @property
    def final_called(self) -> bool:
        """Some row of the final (printed, 5%) verdict is a false call."""
        return any(false_call(r.verdict, r.truth) for r in self.rows)

    @property
    def called_any_look(self) -> bool:
        return self.looks_called > 0 or self.final_called

    @property
    def aa(self) -> bool:
        """Every row's effect in this run is 0: an A/A run."""
        return all(r.truth == 0 for r in self.rows)


def _family_values(sc: Scenario, target_pct: float, budget_s: float | None, stop: str) -> dict:
    return {"variants": [BASELINE, *CANDIDATES[:sc.candidates]], "modes": list(range(sc.modes)),
            "target_ci": float(target_pct), "budget": float(budget_s or 0), "stop": stop, "baseline": BASELINE,
            "warmup": 0, "repeats": 1}


def _true_var(levels, sc: Scenario, rounds: int, layouts: int, repeats: int, arms: int) -> float:
    """Variance of a row's estimate at the true components: s_L^2 / K + s_P^2 / n + s_I^2 / (n I) for
    n rounds over K layout pairs and I iterations a process, the process level with what a state
    switch between a pair's two trials adds (the switch rate 2 / (d_fast + d_slow) per trial times
    the mean distance (m + 1) / 3 between two of a round's m trials in random order).  The
    normal-theory variance of the estimator; the medians and Hodges-Lehmann estimates the kit takes
    are within a few percent of it at these tails."""
    s_p2 = levels.sigma_process ** 2
    if sc.states:
        rate = 2.0 / (levels.durations[0] + levels.durations[1])
        s_p2 += min(0.5, rate * (arms * sc.modes + 1) / 3) * levels.state_gap ** 2
    n = max(1, rounds)
    return levels.sigma_layout ** 2 / max(1, layouts) + s_p2 / n + levels.sigma_iteration ** 2 / (n * max(1, repeats))


def _stage_frame(noise, st: Stopping, stage: StageRecord, seed: int, keys: list, repeats: int,
                 state_log: dict) -> pd.DataFrame:
    """The raw rows of one stage's new rounds: every (mode, arm) once a round, in a random order."""
    lays = stopping.round_layouts(st, seed)
    rounds = np.arange(stage.first_round, stage.first_round + stage.new_rounds)
    m = len(keys)
    order = np.stack([noise.rng.permutation(m) for _ in rounds]) if len(rounds) else np.empty((0, m), int)
    seq_keys = [keys[j] for j in order.ravel()]
    seq_round = np.repeat(rounds, m)
    seq_layout = np.array([int(lays.get(int(r), 0)) for r in rounds], dtype=int).repeat(m)
    logs, states = noise.trials(seq_keys, seq_layout, repeats)
    for key, s in zip(seq_keys, states):
        state_log.setdefault(key, []).append(int(s))
    n = len(seq_keys)
    pos = np.tile(np.arange(m), len(rounds))
    return pd.DataFrame({
        "variant": np.repeat([k[1] for k in seq_keys], repeats),
        "mode": np.repeat([k[0] for k in seq_keys], repeats),
        "size": 1000, "trial": np.repeat(seq_round, repeats), "round": np.repeat(seq_round, repeats),
        "layout": np.repeat(seq_layout, repeats), "iteration": np.tile(np.arange(repeats), n),
        "order": np.repeat(pos, repeats), "warmup": False, "status": "ok",
        "ns_per_op": NS_PER_OP * np.exp(logs.ravel())})


@contextlib.contextmanager
def looks_printed():
    """Within the block, each compare() a staged run's look makes (``sequential.review``'s
    ``compare_alphas``: its frame at 5% and at the look's strict level) is kept, the call and its
    result untouched, in the dict yielded (``"last"``: arguments and frames of the latest), so the
    harness reads the frame the last look printed instead of making it again: compare() of the data
    the run stopped with is that frame (tested)."""
    from ringlab.stats import sequential
    real = getattr(sequential, "compare_alphas", None)
    seen: dict = {}
    if real is None:
        yield seen
        return

    def kept(df, baseline, alphas, *args, **kwargs):
        out = real(df, baseline, alphas, *args, **kwargs)
        seen["last"] = (df, baseline, tuple(alphas), args, kwargs, out)
        return out

    sequential.compare_alphas = kept
    try:
        yield seen
    finally:
        sequential.compare_alphas = real


def last_look_printed(seen: dict, df: pd.DataFrame) -> pd.DataFrame | None:
    """The frame the last look printed (``looks_printed``) where it is compare(df, BASELINE): the
    same frame object, baseline and defaults, at 5%; else None."""
    last = seen.get("last")
    if last is None:
        return None
    frame, baseline, alphas, args, kwargs, out = last
    if frame is df and baseline == BASELINE and alphas[:1] == (0.05,) and not args and not kwargs:
        return out[0]
    return None


def simulate_real_run(levels, sc: Scenario, planner: LevelCalibration, target_pct: float,
                      budget_s: float | None, stop: str = "decided", seed: int = 0) -> RealRun:
    """One staged run of scenario ``sc``: planned from ``planner`` by ``stopping.opening``, each
    stage's rounds drawn from ``noise.RunNoise`` at ``levels``' sizes and reviewed by
    ``stopping.review`` (the run's own stop and re-planning, compare() at every look), the stage's
    machine time at ``levels``' costs; its rows from compare() of the data it stopped with."""
    from ringlab.simulate.noise import RunNoise
    from ringlab.stats import replication

    rng = np.random.default_rng(seed)
    values = _family_values(sc, target_pct, budget_s, stop)
    modes = [str(m) for m in values["modes"]]
    cands = list(CANDIDATES[:sc.candidates])
    keys = [(m, a) for m in modes for a in [BASELINE, *cands]]
    half = sc.state_effect / 2
    effects = {(m, c): (half, -half) for m in modes for c in cands}
    noise = RunNoise(rng, levels.sigma_layout, levels.sigma_process, levels.sigma_iteration, effects,
                     process_df=sc.process_df, state_gap=levels.state_gap if sc.states else 0.0,
                     durations=levels.durations if sc.states else (math.inf, math.inf), drift_sd=sc.drift_sd)
    st = stopping.opening(values, {m: planner for m in modes})
    repeats = int(st.repeats or 1)
    arms = len(values["variants"])
    c = {k: float(x or 0) for k, x in levels.cost_s.items()}
    per_round = sc.modes * arms / 2 * (c.get("process", 0.0) + repeats * c.get("iteration", 0.0))
    frames, state_log = [], {}
    layouts_before, looks, looks_called = 0, 0, 0

    def truth(key) -> float:
        return run_effect(effects.get(key, (0.0, 0.0)), slow_share(state_log), noise.shift.get(key, 0.0))

    def key_of(mode, candidate) -> tuple:
        mode = str(mode)
        return (str(int(float(mode))) if mode not in modes else mode, str(candidate))

    # the classifier of machine states only adds a diagnostic to compare()'s rows (never their
    # headline), and nothing here reads it: the looks run without it
    with states_diagnostic(False), looks_printed() as seen:
        while True:
            stage = st.last_stage
            frames.append(_stage_frame(noise, st, stage, seed, keys, repeats, state_log))
            build_s = max(0, stage.layouts - layouts_before) * c.get("layout", 0.0) * arms / 2
            layouts_before = stage.layouts
            st = stopping.add_time(st, measure_s=stage.new_rounds * per_round, build_s=build_s)
            df = pd.concat(frames, ignore_index=True)
            st = stopping.review(df, st, lambda _m: None)
            looks += 1
            looks_called += any(false_call(r.decided, truth(key_of(_group_mode(r.group, modes), r.candidate)))
                                for r in (st.rows or ()) if r.judged)
            if st.stop_reason:
                break
        cmp = last_look_printed(seen, df)
        if cmp is None:
            cmp = compare(df, BASELINE)
    n_rounds = int(df["round"].nunique())
    true_se = math.sqrt(_true_var(levels, sc, n_rounds, int(st.layouts), repeats, arms))
    rows = []
    for _, r in cmp.iterrows():
        key = key_of(r.get("mode") if "mode" in cmp.columns else modes[0], r["candidate"])
        n_states = int(r.get("states") or 1) if pd.notna(r.get("states")) else 1
        rows.append(RowOutcome(estimate=replication.log_ratio(r["delta_pct"]),
                               low=replication.log_ratio(r["ci_low_pct"]), high=replication.log_ratio(r["ci_high_pct"]),
                               se=float(replication.row_se(r)), df=float(replication.row_df(r)), truth=truth(key),
                               true_se=true_se, verdict=str(r["verdict"]), states=n_states))
    return RealRun(rows=tuple(rows), looks=looks, looks_called=looks_called, stop_reason=str(st.stop_reason),
                   spent_s=float(stopping.spent_s(st)), layouts=int(st.layouts), rounds=n_rounds, repeats=repeats)


def simulate_real_runs(levels, sc: Scenario, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                       runs: int, stop: str = "decided", seed: int = 0) -> list[RealRun]:
    """``runs`` independent runs of ``sc`` (seeds ``seed`` .. ``seed + runs - 1``)."""
    return [simulate_real_run(levels, sc, planner, target_pct, budget_s, stop, seed + i) for i in range(runs)]


def timed_real_runs(levels, sc: Scenario, planner: LevelCalibration, target_pct: float, budget_s: float | None,
                    runs: int, stop: str = "decided", seed: int = 0) -> tuple[list[RealRun], float]:
    """``simulate_real_runs`` and the CPU seconds they took (a worker's share of a scenario).  The
    objects alive before are frozen out of the garbage collector (``gc.freeze``): statsmodels'
    multipletests (compare()'s Holm, every look) runs a full collection, which otherwise walks the
    whole heap of the imported libraries each time."""
    import gc
    import time
    gc.freeze()
    t0 = time.process_time()
    out = simulate_real_runs(levels, sc, planner, target_pct, budget_s, runs, stop, seed)
    return out, time.process_time() - t0


@dataclass(frozen=True)
class Criteria:
    """What a scenario must show: its A/A rate (every look) within the binomial interval of
    ``aa_level`` over its runs (where a run's effect is not 0: its rate of opposite-sign calls not
    above it), CI coverage of the run's own effect at least ``ci_coverage``, next-run
    coverage within ``next_coverage``, each interval's mean width at most ``width_ratio`` times the
    width of the same interval at the true variances."""
    aa_level: float = 0.05
    ci_coverage: float = 0.94
    next_coverage: tuple = (0.93, 0.98)
    width_ratio: float = 1.5


#: the kit's between-run variance and next-run interval (``ringlab.stats.replication``)
BETWEEN_RUNS = 5


def next_run_api():
    """(between_of_runs, NONE, next_run_interval) of ``ringlab.stats.replication``, or None where that
    API is not available."""
    from ringlab.stats import replication
    names = ("between_of_runs", "NONE", "next_run_interval")
    return tuple(getattr(replication, n) for n in names) if all(hasattr(replication, n) for n in names) else None


def scenario_summary(runs: list[RealRun], sc: Scenario, level: float = 0.95,
                     criteria: Criteria = Criteria()) -> dict:
    """The figures ``ringlab bench stopping`` prints for one scenario's runs (in seed order):

    * ``aa``: runs with a false call (``false_call``) at any look (a row decided faster/slower at a
      stage review's strict level, or in the final verdict at 5%), of ``runs``, its rate,
      ``aa_looks`` (at a stage review only) and ``aa_final`` (the final verdict only); ``aa_only``:
      every row of every run has effect 0 (no drift, no state mix), so these are A/A rates and must
      lie in the binomial interval of 5%; else they count calls against the sign of the run's own
      effect and must not lie above it;
    * ``ci_coverage``: share of rows whose CI holds the row's true effect (``RowOutcome.truth``);
      ``ci_width_ratio``: mean CI width over the mean width of the normal interval at the true SD;
    * ``next_coverage``: run i's next-run interval (``replication.next_run_interval`` of its row,
      with ``between_of_runs`` of runs i - 4 .. i of the same row, as the kit measures it) holding
      run i + 1's estimate of that row; ``next_width_ratio`` against the interval at the true
      variances (both runs' true SD and the true drift); None where that API is not available;
    * ``failed``: the criteria missed, one text each."""
    n = len(runs)
    aa = sum(r.called_any_look for r in runs)
    lo, hi = aa_interval(n, criteria.aa_level)
    z = float(sst.norm.ppf(0.5 + level / 2))
    rows = [row for r in runs for row in r.rows if math.isfinite(row.low) and math.isfinite(row.high)]
    cov = sum(row.low <= row.truth <= row.high for row in rows) / max(1, len(rows))
    w = float(np.mean([row.high - row.low for row in rows])) if rows else math.nan
    w_true = float(np.mean([2 * z * row.true_se for row in rows])) if rows else math.nan
    aa_only = all(r.aa for r in runs)
    out = {"runs": n, "aa": aa, "aa_rate": aa / max(1, n), "aa_final": sum(r.final_called for r in runs),
           "aa_looks": sum(r.looks_called > 0 for r in runs), "aa_only": aa_only,
           "aa_interval": (lo, hi), "ci_coverage": cov, "ci_rows": len(rows), "ci_width_ratio": w / w_true,
           "next_coverage": None, "next_pairs": 0, "next_width_ratio": None,
           "stops": {}, "looks": float(np.mean([r.looks for r in runs])) if runs else math.nan}
    for r in runs:
        out["stops"][r.stop_reason] = out["stops"].get(r.stop_reason, 0) + 1
    api = next_run_api()
    if api is not None:
        between_of_runs, none, interval = api
        hits, widths, true_w = 0, [], []
        width = len(runs[0].rows) if runs else 0
        for j in range(width):
            for i in range(BETWEEN_RUNS - 1, n - 1):
                if any(len(runs[k].rows) != width for k in range(i - BETWEEN_RUNS + 1, i + 2)):
                    continue            # a run whose compare() gave other rows: no row to pair
                past = [runs[k].rows[j] for k in range(i - BETWEEN_RUNS + 1, i + 1)]
                with warnings.catch_warnings():     # statsmodels' I^2 of equal effects divides by 0
                    warnings.simplefilter("ignore", RuntimeWarning)
                    b = between_of_runs([p.estimate for p in past], [p.se ** 2 for p in past], level)
                row, nxt = runs[i].rows[j], runs[i + 1].rows[j]
                a, bhi = interval(row.estimate, row.se, row.df, none if b is None else b, level)
                if not (math.isfinite(a) and math.isfinite(bhi) and math.isfinite(nxt.estimate)):
                    continue
                hits += a <= nxt.estimate <= bhi
                widths.append(bhi - a)
                true_w.append(2 * z * math.sqrt(row.true_se ** 2 + nxt.true_se ** 2 + 2 * sc.drift_sd ** 2))
        out["next_pairs"] = len(widths)
        if widths:
            out["next_coverage"] = hits / len(widths)
            out["next_width_ratio"] = float(np.mean(widths) / np.mean(true_w))
    failed = []
    if aa_only and not lo <= out["aa_rate"] <= hi:
        failed.append(f"A/A rate {out['aa_rate']:.2%} outside [{lo:.2%}, {hi:.2%}]")
    elif not aa_only and out["aa_rate"] > hi:
        failed.append(f"false-call rate {out['aa_rate']:.2%} above {hi:.2%}")
    if cov < criteria.ci_coverage:
        failed.append(f"CI coverage {cov:.1%} < {criteria.ci_coverage:.0%}")
    if not out["ci_width_ratio"] <= criteria.width_ratio:
        failed.append(f"CI width ratio {out['ci_width_ratio']:.2f} > {criteria.width_ratio:g}")
    if out["next_coverage"] is not None:
        a, b = criteria.next_coverage
        if not a <= out["next_coverage"] <= b:
            failed.append(f"next-run coverage {out['next_coverage']:.1%} outside [{a:.0%}, {b:.0%}]")
        if not out["next_width_ratio"] <= criteria.width_ratio:
            failed.append(f"next-run width ratio {out['next_width_ratio']:.2f} > {criteria.width_ratio:g}")
    out["failed"] = failed
    return out
