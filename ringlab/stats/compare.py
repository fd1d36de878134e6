"""A/B verdicts: every variant against a baseline, within each configuration.

The pipeline, in the order the data flows: the measurement rows of two arms are paired by
round once (``ringlab.stats.rounds.Rounds``, held with the design in ``Arms``); Holm is run
over the run's family (every row with a p); at the row's Holm level each design's estimator
gives the ``Estimate`` the verdict rests on, and at 1 - alpha the printed one
(``ringlab.stats.estimate``); ``decide`` turns the first into a ``Decision`` (``ringlab.stats.decide``:
a ``ringlab.catalog.Verdict`` and its note); an inconclusive one gets a ``Plan`` (``ringlab.stats.plan.plan_more``);
the row is a ``Comparison`` (``ringlab.stats.contract``), serialized once by ``to_frame``.

Unit of analysis: the **round**.  The runner measures every arm of a configuration in
each round (``round`` column; files without it use ``trial``, which is the round index of
the interleaved runner; frames that hold several ``run_id`` pair rounds within a run).
The rows of one arm in one round (in-process iterations, repeats) are first reduced to
their median, so each round gives one value per arm.

Design (``design`` column):

* ``paired`` (default) when both arms were measured in the same rounds (at least half of
  either arm's rounds, and at least 2): ``d = ln(candidate / baseline)`` per common
  round.  The slow and fast states of the machine hit both arms of a round alike and
  cancel in ``d``.  Estimate: the **Hodges-Lehmann** estimate of ``d`` (median of the
  Walsh averages; chosen over the plain median of ``d`` because it is about 1.5x as
  efficient for round-to-round noise while staying robust to a few wild rounds, and it is
  the estimate the signed-rank test itself inverts).  CI: the Wilcoxon signed-rank test
  inverted; ``p_value``: that same test.  ``n_pairs`` = rounds used.
* ``unpaired`` when rounds are incomplete: Hodges-Lehmann shift of the log per-round values
  with the CI from inverting Mann-Whitney, ``p_value`` from the same Mann-Whitney test.
  ``n_pairs`` = 0.
* ``layouts`` when raw.csv has a ``layout`` column with more than one value in the
  configuration (K seeded builds of each arm, paired): one fit of the comparison's levels,
  d = theta + u_layout + e_round on the per-round log ratios, by REML with a random intercept
  per layout pair (``ringlab.stats.fit``: statsmodels' MixedLM, the closed form of one-way ANOVA
  when every pair has the same rounds).  The estimate is theta, the mean log ratio (a
  geometric-mean ratio over layouts and rounds); the CI is Student's t on K - 1 df with the fit's
  SE, ``p_value`` the same t test.  A t interval rather than a hierarchical bootstrap: at
  K = 6-16 a bootstrap over layouts is too narrow, the t interval is exact for normal layout
  effects (``ringlab.stats.layouts`` has the argument).  ``sigma_layout_pct``,
  ``sigma_round_pct``, ``layout_share`` and ``layout_sensitive`` are the fit's components and
  how much of the CI the layout level makes.  One value (``fixed_build``) keeps ``paired``: the
  CI then describes that binary pair, not the code change.
* ``exact``: a deterministic metric (see below), no CI, no p.

Machine states (with a ``layout`` column, ``ringlab.stats.layouts``): trials are classified
by a two-state Markov model on the trial-ordered log metric, as a diagnostic only: the
estimate, CI, p and verdict are the same whatever states are found.  With two states the row
reports the slow share, each state's effect and CI (layouts: the same fit on the rounds whose
two trials both ran in that state; one build: the signed-rank estimate of those rounds) and a
heterogeneity test; when the per-state CIs lie on opposite sides of 0 the verdict keeps its
word and its note says so (``ringlab.stats.decide``).

``ringlab.stats.ranktests`` builds CI and p from one statistic, so at any level
``p <= 1 - level`` exactly when the CI excludes 0.  Values must be positive for the log
scale; otherwise the analysis runs on the raw difference and percentages are relative
to the baseline median.

Reported effect: ``delta_pct = (exp(estimate) - 1) * 100``, the candidate/baseline ratio in
percent; ``ci_low_pct``/``ci_high_pct`` the CI bounds transformed the same way.
``ratio_medians_pct`` = (median_candidate / median_baseline - 1) * 100 stays as a descriptive
column (the statistic earlier versions reported as delta_pct).

Multiplicity: the family is the run: every candidate against the baseline in every
configuration of the frame (one compare() call).  ``p_holm`` is Holm-adjusted within the family
(``family_size`` rows with a p-value).  Every row's CI is printed at one level, ``ci_level`` = 1 - alpha (95%); the verdict
is decided from the same estimator's CI at the row's Holm step level (``holm_ci_*``,
``ringlab.stats.decide``), so a row is significant exactly when Holm rejects it.  A row Holm does
not reject whose printed CI excludes 0 says "not significant after Holm" (``Verdict.NOT_AFTER_HOLM``),
with p (Holm) in its note: no row reads "inconclusive" or "no significant difference" beside a
printed CI that excludes 0.

Verdict (``LOWER_IS_BETTER`` decides the direction), decided from the Holm CI alone:
  faster / slower            the CI excludes 0 (note added when it also lies within +-noise)
  no significant difference  the CI includes 0 and lies within +-noise
  inconclusive               the CI includes 0 and reaches beyond +-noise (or no CI exists);
                             ``trials_needed`` rounds (= trials per arm) bring the CI
                             half-width to +-noise at the variances measured, never from the
                             observed effect (``ringlab.stats.plan.plan_more``).
  not significant after Holm the Holm CI includes 0 but the printed 95% CI excludes it (settled
                             as the Holm CI's verdict would be: within +-noise or not)
``check_rule`` (``ringlab.stats.contract``) enforces that no row says inconclusive while its
Holm CI excludes 0, nor faster/slower while it (or the printed CI) includes 0; ``compare`` calls
it on every result.

Instruction counts (``INSTRUCTION_METRICS``) say "fewer instructions" / "more instructions"
instead of faster/slower.  Deterministic metrics (each arm has one repeated value, or every
row is a callgrind count) are compared exactly: delta is the difference of the medians, no
CI, no p (NaN), no noise band, ``note`` = "exact (deterministic metric)", and equal counts
say "same instructions" ("no significant difference" for other metrics).

The seeds' sign convention (mail tables): ``gain_pct = (base - cand) / base * 100``
for lower-is-better metrics, i.e. "+6.2%" = candidate faster.  Checked against
thread 000: 2562 -> 2401 ms gives 6.28 (mail: 6.2), 4648 -> 4464 gives 3.96 (3.9),
3624 -> 3462 gives 4.47 (4.4), 2758 -> 2547 gives 7.65 (7.6): the mail truncated
this formula to one decimal; (base - cand)/cand would give 6.7/4.1/4.7/8.3.
"""
from __future__ import annotations

import contextlib
import contextvars
import copy
import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import layouts
from ringlab.stats import estimate as _est
from ringlab.stats import ranktests as _rt
from ringlab.catalog import Verdict
from ringlab.stats.contract import EXACT_NOTE, JSON_FIELDS, Comparison, check_rule, to_frame
from ringlab.stats.decide import EQUIVALENCE_MARGIN, INSTRUCTION_METRICS, Decision, decide, state_note
from ringlab.stats.decide import holm, holm_levels
from ringlab.stats.layouts import LayoutRounds
from ringlab.stats.plan import plan_more
from ringlab.stats.ranktests import hodges_lehmann
from ringlab.stats.rounds import ROUND_COLUMN, Rounds, Scale, comparison_columns, round_key, round_values
from ringlab.stats.summary import DEFAULT_SEED, StatsError, measurements


def _is_exact(b: np.ndarray, c: np.ndarray, exact_source: bool) -> bool:
    if len(b) == 0 or len(c) == 0:
        return False
    return bool(exact_source or (np.all(b == b[0]) and np.all(c == c[0])))


def _welch_p(b_all: np.ndarray, c_all: np.ndarray) -> float:
    if len(b_all) >= 2 and len(c_all) >= 2 and (np.std(b_all) > 0 or np.std(c_all) > 0):
        with warnings.catch_warnings():  # nearly constant arms: scipy warns, p stays usable
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(sst.ttest_ind(b_all, c_all, equal_var=False).pvalue)
    return math.nan


@dataclass
class Arms:
    """Two arms of one comparison, paired once: the row being built (``comparison``), the
    design's data on its ``scale`` (``d`` paired, ``x``/``y`` unpaired, ``layout_rounds`` for
    the layout and machine-state analysis) and ``p``, which Holm needs before the CI level."""
    comparison: Comparison
    design: str                      # exact | paired | unpaired | too few
    scale: Scale | None = None
    d: np.ndarray | None = None
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    layout_rounds: LayoutRounds | None = None
    p: float = math.nan
    too_few: str = ""
    # level -> Estimate: the p, the verdict's and the printed estimate often share a level
    _by_level: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, rounds: Rounds, comparison: Comparison, b_all, c_all, exact_source: bool = False) -> "Arms":
        """The design of ``rounds`` (exact, paired, unpaired, or too few to compare)."""
        b_all, c_all = np.asarray(b_all, dtype=float), np.asarray(c_all, dtype=float)
        if _is_exact(b_all, c_all, exact_source):
            return cls(comparison, "exact")
        b, c = rounds.baseline, rounds.candidate
        if len(b) < 2 or len(c) < 2:
            return cls(comparison, "too few", too_few=f"too few measurements (baseline {len(b)}, candidate "
                                                      f"{len(c)}; need >= 2 each)")
        sc = rounds.scale(comparison.median_baseline)
        if rounds.paired:
            comparison.n_pairs = rounds.n_common
            d = rounds.differences(sc)
            return cls(comparison, "paired", sc, d=d, p=_rt.signed_rank_p(d))
        x, y = sc.fwd(b.to_numpy()), sc.fwd(c.to_numpy())
        return cls(comparison, "unpaired", sc, x=x, y=y, p=_rt.rank_sum_p(x, y))

    def add_layout_rounds(self, rd: LayoutRounds) -> None:
        """Analyse a paired comparison with a ``layout`` column: one fit of its levels with more than one
        layout pair, and the machine-state diagnostic (its p replaces the signed-rank p)."""
        self.layout_rounds = rd
        self._by_level.clear()           # estimates made before were of the paired design
        self.p = self.estimate(0.95).p   # p does not depend on the level

    def estimate(self, level: float) -> _est.Estimate:
        """The design's estimate at ``level`` (computed once per level)."""
        key = round(float(level), 12)
        if key not in self._by_level:
            self._by_level[key] = self._estimate(level)
        return self._by_level[key]

    def _estimate(self, level: float) -> _est.Estimate:
        c = self.comparison
        if self.design == "exact":
            return _est.exact(c.delta_abs, c.median_baseline, EXACT_NOTE)
        if self.layout_rounds is not None:
            return _est.of_layout_rounds(self.layout_rounds, self.scale, level)
        if self.d is not None:
            return _est.paired(self.d, self.scale, level)
        return _est.unpaired(self.x, self.y, self.scale, level)

    def finish(self, level: float, noise: float, alpha_planning: float, seed=DEFAULT_SEED,
               printed_level: float | None = None, plan_target: tuple[float, str] | None = None) -> Comparison:
        """The estimate at ``level`` (the Holm step's), its verdict and, when inconclusive, the
        plan (for the CI half-width ``plan_target``, (fraction, what it is), else the margin
        ``noise``); with ``printed_level`` (the report's one level) the printed estimate at it too."""
        c = self.comparison
        if self.design == "too few":
            c.verdict = Decision(Verdict.INCONCLUSIVE, self.too_few)
            return c
        c.estimate = self.estimate(level)
        c.verdict = decide(c.estimate, c.metric, noise)
        if printed_level is not None and self.design != "exact" and abs(printed_level - level) > 1e-12:
            c.shown = self.estimate(printed_level)
            lo, hi = c.shown.ci_pct
            if not c.verdict.verdict.is_call and (lo > 0 or hi < 0):
                c.verdict = Decision(Verdict.NOT_AFTER_HOLM, (
                    f"its {printed_level * 100:.4g}% CI excludes 0; p (Holm) = {c.p_holm:.2g} over the "
                    f"{c.family_size} rows of the run"), settled=c.verdict.settled)
                if c.estimate.state_dependent:      # the states' note stays with the verdict
                    c.verdict = replace(c.verdict, note=f"{c.verdict.note}; {state_note(c.estimate, c.metric)}")
        if not c.verdict.settled:
            target, name = plan_target or (noise, "the equivalence margin")
            c.plan = plan_more(c.estimate, target, alpha_planning, d=self.d, x=self.x, y=self.y,
                               layout_rounds=self.layout_rounds, target_name=name)
        return c


def describe(rounds: Rounds, b_all, c_all, metric: str, **labels) -> Comparison:
    """The descriptive part of a comparison row (counts, medians, their difference and ratio,
    Welch's p on the measurements); ``labels``: group, baseline, candidate, config, ..."""
    b_all, c_all = np.asarray(b_all, dtype=float), np.asarray(c_all, dtype=float)
    mb = float(np.median(b_all)) if len(b_all) else math.nan
    mc = float(np.median(c_all)) if len(c_all) else math.nan
    delta_abs = ratio = math.nan
    if len(b_all) and len(c_all):
        delta_abs = mc - mb
        if mb != 0:
            ratio = (mc / mb - 1) * 100
    lib = metric in schema.LOWER_IS_BETTER
    return Comparison(labels.pop("group", "all"), labels.pop("baseline", ""), labels.pop("candidate", ""), metric,
                      len(b_all), len(c_all), mb, mc, delta_abs, ratio, _welch_p(b_all, c_all), 0,
                      lower_is_better=lib, center_baseline=baseline_center(rounds), **labels)


def baseline_center(rounds: Rounds) -> float:
    """The baseline's center over the rounds an effect rests on (the common rounds when paired):
    the Hodges-Lehmann location of its per-round values, on the log scale when they are positive."""
    b = rounds.baseline.loc[rounds.common] if rounds.paired else rounds.baseline
    v = np.asarray(b, dtype=float)
    v = v[np.isfinite(v)]
    if not len(v):
        return math.nan
    log = bool(np.all(v > 0))
    hl = hodges_lehmann(np.log(v) if log else v)
    return math.exp(hl) if log else hl


def pair_arms(bsub: pd.DataFrame, csub: pd.DataFrame, metric: str, paired: bool | None = None,
              exact_source: bool = False, **labels) -> Arms:
    """Two arms' measurement rows (with ``ROUND_COLUMN`` where rounds are known) as ``Arms``."""
    rounds = Rounds.of_frames(bsub, csub, metric, paired)
    b_all, c_all = bsub[metric].to_numpy(), csub[metric].to_numpy()
    return Arms.of(rounds, describe(rounds, b_all, c_all, metric, **labels), b_all, c_all, exact_source)


def compare_arrays(base, cand, metric: str = schema.PRIMARY_METRIC, noise: float = EQUIVALENCE_MARGIN,
                   alpha: float = 0.05, seed=DEFAULT_SEED, paired: bool = False) -> dict:
    """One comparison of two samples (``paired``: base[i] and cand[i] share round i), no
    multiplicity correction (``p_holm`` = ``p_value``, CI at 1 - alpha); the row's fields."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    if paired and len(b) != len(c):
        raise StatsError(f"paired: arms of different lengths ({len(b)}, {len(c)}); need one value per round each")
    rounds = Rounds.pair(pd.Series(b), pd.Series(c), paired=bool(paired))
    arms = Arms.of(rounds, describe(rounds, b, c, metric), b, c)
    arms.comparison.p_holm = arms.p
    arms.comparison.family_size = 1 if math.isfinite(arms.p) else 0
    return arms.finish(1 - alpha, noise, alpha, seed).row()


def _check_args(noise, alpha):
    if not (isinstance(noise, (int, float)) and 0 <= noise < 1):
        raise StatsError(f"noise: {noise!r} not allowed; allowed: a fraction in [0, 1), e.g. 0.01 for 1%")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise StatsError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1), e.g. 0.05")


#: whether compare() looks for machine states when its caller does not say (``states=None``)
STATES = contextvars.ContextVar("compare_states", default=True)


@contextlib.contextmanager
def states_diagnostic(on: bool):
    """Within the block, compare() calls that do not say (``states=None``) look for machine states
    or not: a simulation that needs only the headline of compare() called by other code (a staged
    run's review) skips the classifier, whose result never changes the headline."""
    token = STATES.set(bool(on))
    try:
        yield
    finally:
        STATES.reset(token)


def _layout_analysis(arms: Arms, bsub: pd.DataFrame, csub: pd.DataFrame, metric: str, has_layout: bool,
                     states: bool = True) -> None:
    """For a paired comparison of positive values in a raw.csv with a ``layout`` column: the
    layout / machine-state design (``ringlab.stats.layouts``)."""
    arms.comparison.frame_has_layout = has_layout
    arms.comparison.n_layouts = layouts.n_layouts(bsub, csub)
    if not (has_layout and arms.design == "paired" and arms.scale.log):
        return
    rd = layouts.round_data(bsub, csub, metric, states=states)
    if rd is not None:
        arms.add_layout_rounds(rd)


def _group_arms(sub: pd.DataFrame, cols: list[str], key: tuple, baseline: str, variants: list[str],
                metric: str, exact_src: bool, paired, has_layout: bool, states: bool = True) -> list[Arms]:
    label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
    bsub = sub[sub["variant"] == str(baseline)]
    out = []
    for cand in variants:
        if cand == str(baseline):
            continue
        csub = sub[sub["variant"] == cand]
        if len(csub) == 0 and len(bsub) == 0:
            continue
        ex = bool(exact_src and len(bsub) and len(csub)
                  and (pd.concat([bsub, csub])["icount_source"].astype(str) == "callgrind").all())
        arms = pair_arms(bsub, csub, metric, paired, ex, group=label, baseline=str(baseline), candidate=cand,
                         config=dict(zip(cols, key)))
        _layout_analysis(arms, bsub, csub, metric, has_layout, states)
        out.append(arms)
    return out


def compare(df: pd.DataFrame, baseline: str, metric: str = schema.PRIMARY_METRIC, by=None,
            noise: float = EQUIVALENCE_MARGIN, alpha: float = 0.05, seed=DEFAULT_SEED,
            plan_target: float | None = None, plan_target_by_mode: dict | None = None,
            states: bool | None = None) -> pd.DataFrame:
    """Every other variant against ``baseline`` within each configuration.

    Returns a frame whose first columns are ``JSON_FIELDS``, followed by the group's
    parameter columns and ``EXTRA_FIELDS``: p_welch (Welch t on the measurements, uncorrected,
    descriptive), note, delta_abs, ratio_medians_pct, gain_pct (+ = better: -delta for
    lower-is-better metrics, delta else), lower_is_better, metric, center_baseline,
    center_candidate, gain_low_pct, gain_high_pct (``ringlab.stats.contract.EXTRA_FIELDS``).  ``attrs``: metric, group_columns,
    alpha.  The CIs are exact rank-test inversions (or t intervals across layouts); ``seed`` is
    accepted for callers (nothing here draws at random).  ``noise``: the equivalence margin
    (``ringlab.stats.decide.EQUIVALENCE_MARGIN`` by default), which "no significant difference"
    is tested against and ``trials_needed`` plans the CI half-width for, unless a staged run's
    target is given: ``plan_target`` (a fraction, the run's ``target_ci``) and
    ``plan_target_by_mode`` ({mode as text: fraction}, its ``target_ci_by_mode``) are then the
    half-widths planned for, each row its mode's.

    A ``layout`` column with more than one value in a configuration makes the design
    ``layouts``: one REML fit of the per-round log ratios with a random intercept per layout
    pair (``ringlab.stats.fit``), the verdict from its t interval on K - 1 df at the row's Holm
    level (``holm_ci_level``; printed at ``ci_level`` = 1 - alpha), p from the same t test.  A t
    interval rather than a hierarchical bootstrap, because at K = 6-16 a bootstrap over layouts
    is too narrow (see ``ringlab.stats.layouts``).  With a ``layout`` column, machine states are
    looked for as well (``ringlab.stats.layouts``), as a diagnostic that never changes the
    estimate, CI, p or verdict: per-state effects, slow share, heterogeneity p, and a note when
    the per-state CIs lie on opposite sides of 0.  ``states=False`` skips that search (every row
    one state, the same headline); None: as ``states_diagnostic`` says (default: look).
    The ``layout`` columns never define a configuration.
    """
    return compare_alphas(df, baseline, (alpha,), metric, by, noise, seed, plan_target, plan_target_by_mode,
                          states)[0]


def compare_alphas(df: pd.DataFrame, baseline: str, alphas, metric: str = schema.PRIMARY_METRIC, by=None,
                   noise: float = EQUIVALENCE_MARGIN, seed=DEFAULT_SEED, plan_target: float | None = None,
                   plan_target_by_mode: dict | None = None, states: bool | None = None) -> list[pd.DataFrame]:
    """``compare()`` of one frame at each of ``alphas``, in order: each frame is the one compare()
    gives at that alpha.  The arms are paired and fitted once (nothing of that depends on alpha;
    an estimate at a level is computed once for all), then each alpha's Holm family is finished
    on its own copy of the rows: a staged run's look reads the same data at 5% and at its strict
    level."""
    for alpha in alphas:
        _check_args(noise, alpha)
    if "variant" not in df.columns:
        raise StatsError("raw.csv has no 'variant' column; compare needs one")
    meas, _ = measurements(df, metric)
    variants = sorted(map(str, df["variant"].dropna().unique()))
    if str(baseline) not in variants:
        raise StatsError(f"baseline: {baseline!r} is not a variant of this raw.csv; allowed: "
                         + ", ".join(variants))
    meas["variant"] = meas["variant"].astype(str)
    cols = [c for c in comparison_columns(meas, by) if by is not None or c not in layouts.LAYOUT_COLUMNS]
    rk = round_key(meas)
    if rk is not None:
        meas[ROUND_COLUMN] = rk
    exact_src = metric in INSTRUCTION_METRICS and "icount_source" in meas.columns
    has_layout = layouts.LAYOUT_COLUMN in meas.columns
    states = STATES.get() if states is None else bool(states)
    arms = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        arms += _group_arms(sub, cols, key, baseline, variants, metric, exact_src,
                            None if rk is not None else False, has_layout, states)
    out = []
    for alpha in alphas:
        fresh = [_unfinished(a) for a in arms] if len(alphas) > 1 else arms
        out.append(to_frame(_finish_family(fresh, noise, alpha, seed, plan_target, plan_target_by_mode), cols,
                            metric, alpha))
    return out


def _unfinished(arms: Arms) -> Arms:
    """A copy of ``arms`` whose row ``finish`` fills in without touching the original's; the
    estimates made at each level are shared (they depend on the level alone)."""
    out = copy.copy(arms)
    out.comparison = copy.copy(arms.comparison)
    return out


def _row_target(c: Comparison, plan_target: float | None, by_mode: dict | None) -> tuple[float, str] | None:
    """The half-width a row's plan is for: its mode's staged target, else the run's, else None
    (the equivalence margin)."""
    mode = (c.config or {}).get("mode")
    if by_mode and mode is not None and str(mode) in {str(k) for k in by_mode}:
        return float({str(k): v for k, v in by_mode.items()}[str(mode)]), f"mode {mode}'s target_ci"
    return (float(plan_target), "the run's target_ci") if plan_target else None


def _finish_family(arms: list[Arms], noise: float, alpha: float, seed, plan_target: float | None = None,
                   plan_target_by_mode: dict | None = None) -> list[Comparison]:
    """Holm over the run: one family of every row with a p (every candidate in every
    configuration), each row's verdict from its CI at its Holm level (``ringlab.stats.decide``),
    its printed CI at 1 - alpha.  A family per candidate would let the run's error rate grow with
    its candidates (three candidates at 5% each: about 14% that some row is called by chance)."""
    p = [a.p for a in arms]
    m = int(np.isfinite(p).sum())
    for a, pa, lev in zip(arms, holm(p), holm_levels(p, alpha)):
        a.comparison.p_holm = float(pa)
        a.comparison.family_size = m
        a.finish(lev if math.isfinite(lev) else 1 - alpha, noise, alpha / max(m, 1), seed,
                 printed_level=1 - alpha, plan_target=_row_target(a.comparison, plan_target, plan_target_by_mode))
    return [a.comparison for a in arms]


__all__ = ["Arms", "JSON_FIELDS", "check_rule", "compare", "compare_arrays", "comparison_columns", "describe",
           "compare_alphas", "holm", "holm_levels", "pair_arms", "round_key", "round_values", "states_diagnostic"]
