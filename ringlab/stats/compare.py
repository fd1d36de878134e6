"""A/B verdicts: every variant against a baseline, within each configuration.

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
  configuration (K seeded builds of each arm, paired): per layout pair the paired
  Hodges-Lehmann estimate of the per-round log ratios; the CI is the t interval across the K
  estimates (K - 1 df) and ``p_value`` the same t test.  A t interval rather than a
  hierarchical bootstrap: at K = 6-16 a bootstrap over layouts is too narrow, the t interval
  is exact for normal layout effects (``ringlab.stats.layouts`` has the argument).
  ``sigma_layout_pct``, ``layout_share`` and ``layout_sensitive`` say how much of the CI the
  layout spread makes.  One value (``fixed_build``) keeps ``paired``: the CI then describes
  that binary pair, not the code change.
* ``exact``: a deterministic metric (see below), no CI, no p.

Machine states (with a ``layout`` column, ``ringlab.stats.designs``): trials are classified
by a two-state Markov model on the trial-ordered log metric; rounds that straddle a switch
are kept out of the per-state estimates.  With two states the headline weights the states
equally (so it does not drift with the slow share of a run), the per-state effects and a
heterogeneity test are reported, and the verdict is ``depends on machine state`` when the
per-state CIs lie on opposite sides of 0.  One state reads as the designs above.

``ringlab.stats.ranktests`` builds CI and p from one statistic, so at any level
``p <= 1 - level`` exactly when the CI excludes 0.  Values must be positive for the log
scale; otherwise the analysis runs on the raw difference and percentages are relative
to the baseline median.

Reported effect: ``delta_pct = (exp(estimate) - 1) * 100``, the candidate/baseline ratio in
percent; ``ci_low_pct``/``ci_high_pct`` the CI bounds transformed the same way.
``ratio_medians_pct`` = (median_candidate / median_baseline - 1) * 100 stays as a descriptive
column (the statistic earlier versions reported as delta_pct).

Multiplicity: the **family** is one candidate against the baseline over the configurations of
the frame (one run).  ``p_holm`` is Holm-adjusted within the family (``family_size`` rows with
a p-value); each row's CI is printed at its Holm step's level ``ci_level``
(``ringlab.stats.holm``), so a row is significant exactly when its printed CI excludes 0.

Verdict (``LOWER_IS_BETTER`` decides the direction), decided from the printed CI alone:
  faster / slower            the CI excludes 0 (note added when it also lies within +-noise)
  no significant difference  the CI includes 0 and lies within +-noise
  inconclusive               the CI includes 0 and reaches beyond +-noise (or no CI exists);
                             ``trials_needed`` rounds (= trials per arm) would resolve an
                             effect of the observed size (or 2% when the observed one is
                             below the noise threshold), see ``ringlab.stats.power``.
  depends on machine state   two states, per-state CIs on opposite sides of 0
``check_rule`` (``ringlab.stats.contract``) enforces that no row says inconclusive while its
CI excludes 0, nor faster/slower while it includes 0; ``compare`` calls it on every result.

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

import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats as sst

from ringlab import schema
from ringlab.stats import designs as _designs
from ringlab.stats import ranktests as _rt
from ringlab.stats.contract import (EXACT_NOTE, JSON_FIELDS, LAYOUT_FIELDS, SIGNIFICANT, STATE_DEPENDENT,
                                    VERDICTS, check_rule, to_records)
from ringlab.stats.decide import (INSTRUCTION_METRICS, TINY_EFFECT_PCT, _decide, _direction, _plan,
                                  _state_note)
from ringlab.stats.grouping import _round_values, comparison_columns, round_key
from ringlab.stats.holm import holm, holm_levels
from ringlab.stats.method import method_text
from ringlab.stats.summary import DEFAULT_RESAMPLES, DEFAULT_SEED, StatsError, measurements

#: paired when the common rounds are at least this share of either arm's rounds
PAIRED_MIN_SHARE = 0.5


def _is_exact(b: np.ndarray, c: np.ndarray, exact_source: bool) -> bool:
    if len(b) == 0 or len(c) == 0:
        return False
    return bool(exact_source or (np.all(b == b[0]) and np.all(c == c[0])))


class _Scale:
    """log scale for positive data (percent = exp - 1), else differences relative to the baseline."""

    def __init__(self, b, c, median_baseline):
        allv = np.concatenate([np.asarray(b, float), np.asarray(c, float)])
        self.log = bool(len(allv) and np.all(allv > 0))
        self.ref = median_baseline

    def fwd(self, x):
        x = np.asarray(x, dtype=float)
        return np.log(x) if self.log else x

    def pct(self, v: float) -> float:
        if not math.isfinite(v):
            return math.nan
        if self.log:
            return math.expm1(v) * 100
        return v / abs(self.ref) * 100 if self.ref else math.nan


def compare_rounds(base_rounds: pd.Series, cand_rounds: pd.Series, metric: str = schema.PRIMARY_METRIC,
                   base_all=None, cand_all=None, exact_source: bool = False, paired=None) -> dict:
    """One comparison from per-round values (Series indexed by round), before multiplicity.

    ``base_all``/``cand_all``: every measurement of each arm (descriptive columns; default:
    the round values).  ``paired``: force the design (None: paired when the rounds allow).
    The CI is filled in by ``finish``.
    """
    b_all = np.asarray(base_rounds if base_all is None else base_all, dtype=float)
    c_all = np.asarray(cand_rounds if cand_all is None else cand_all, dtype=float)
    r = {"n_baseline": len(b_all), "n_candidate": len(c_all),
         "median_baseline": float(np.median(b_all)) if len(b_all) else math.nan,
         "median_candidate": float(np.median(c_all)) if len(c_all) else math.nan,
         "delta_pct": math.nan, "ci_low_pct": math.nan, "ci_high_pct": math.nan,
         "p_value": math.nan, "p_welch": math.nan, "verdict": "inconclusive",
         "trials_needed": math.nan, "design": "unpaired", "n_pairs": 0, "ci_level": math.nan,
         "family_size": 0, "note": "", "delta_abs": math.nan, "ratio_medians_pct": math.nan,
         "_metric": metric}
    if len(b_all) and len(c_all):
        r["delta_abs"] = r["median_candidate"] - r["median_baseline"]
        if r["median_baseline"] != 0:
            r["ratio_medians_pct"] = (r["median_candidate"] / r["median_baseline"] - 1) * 100
    if _is_exact(b_all, c_all, exact_source):
        r.update(note=EXACT_NOTE, design="exact", delta_pct=r["ratio_medians_pct"])
        if r["median_baseline"] == r["median_candidate"]:
            r["verdict"] = "same instructions" if metric in INSTRUCTION_METRICS else "no significant difference"
        else:
            r["verdict"] = _direction(r["delta_abs"], metric)
        return r
    b, c = base_rounds.dropna(), cand_rounds.dropna()
    if len(b) < 2 or len(c) < 2:
        r["note"] = f"too few measurements (baseline {len(b)}, candidate {len(c)}; need >= 2 each)"
        return r
    common = b.index.intersection(c.index)
    if paired is None:
        paired = len(common) >= 2 and len(common) >= PAIRED_MIN_SHARE * max(len(b), len(c))
    sc = _Scale(b.to_numpy(), c.to_numpy(), r["median_baseline"])
    if paired:
        d = sc.fwd(c.loc[common].to_numpy()) - sc.fwd(b.loc[common].to_numpy())
        r.update(design="paired", n_pairs=int(len(common)))
        r["_d"] = d
        n_pos, n_zero, n_neg = _rt._sign_counts("walsh", d, None)
        null = _rt.NullDist("signed_rank", len(d))
        r["_n_run"] = len(d)
    else:
        x, y = sc.fwd(b.to_numpy()), sc.fwd(c.to_numpy())
        r["_x"], r["_y"] = x, y
        n_pos, n_zero, n_neg = _rt._sign_counts("diff", x, y)
        null = _rt.NullDist("mwu", len(x), len(y))
        r["_n_run"] = min(len(x), len(y))
    r["p_value"] = float(min(1.0, 2 * null.cdf(min(n_pos, n_neg) + n_zero)))
    r["_scale"] = sc
    if len(b_all) >= 2 and len(c_all) >= 2 and (np.std(b_all) > 0 or np.std(c_all) > 0):
        with warnings.catch_warnings():  # nearly constant arms: scipy warns, p stays usable
            warnings.simplefilter("ignore", RuntimeWarning)
            r["p_welch"] = float(sst.ttest_ind(b_all, c_all, equal_var=False).pvalue)
    return r


def finish(r: dict, level: float, noise: float, alpha_planning: float, seed=DEFAULT_SEED,
           n_resamples: int = 200) -> None:
    """CI at ``level``, verdict and trials_needed for a row from ``compare_rounds``."""
    metric = r.pop("_metric")
    sc = r.pop("_scale", None)
    d, x, y = r.pop("_d", None), r.pop("_x", None), r.pop("_y", None)
    rd = r.pop("_rounds", None)
    n_run = r.pop("_n_run", 0)
    if r["design"] == "exact" or sc is None:
        return
    r["ci_level"] = float(level)
    if rd is not None:
        res = _designs.verdict(rd, level)
        r.update(_designs.fields(res, sc.pct))
    else:
        res = _rt.signed_rank(d, level) if d is not None else _rt.rank_sum(x, y, level)
    r["delta_pct"] = sc.pct(res["estimate"])
    r["ci_low_pct"], r["ci_high_pct"] = sc.pct(res["ci_low"]), sc.pct(res["ci_high"])
    if rd is not None and res["state_dependent"]:
        r["verdict"], r["note"] = STATE_DEPENDENT, _state_note(r, metric)
        return
    unit = ("layout pairs" if r["design"] == "layouts" else "rounds") if d is not None or rd is not None \
        else "trials per arm"
    if _decide(r, metric, noise, level, unit, n_run):
        return
    r["_noise_pct"] = noise * 100
    _plan(r, sc, d, x, y, rd, res, n_run, alpha_planning, seed, n_resamples)


def compare_arrays(base, cand, metric: str = schema.PRIMARY_METRIC, noise: float = 0.01,
                   alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES, seed=DEFAULT_SEED,
                   paired: bool = False) -> dict:
    """One comparison of two samples (``paired``: base[i] and cand[i] share round i), no
    multiplicity correction (``p_holm`` = ``p_value``, CI at 1 - alpha)."""
    b = np.asarray(base, dtype=float)
    c = np.asarray(cand, dtype=float)
    if paired and len(b) != len(c):
        raise StatsError(f"paired: arms of different lengths ({len(b)}, {len(c)}); need one value per round each")
    r = compare_rounds(pd.Series(b), pd.Series(c), metric, paired=bool(paired))
    r["p_holm"] = r["p_value"]
    r["family_size"] = 1 if math.isfinite(r["p_value"]) else 0
    finish(r, 1 - alpha, noise, alpha, seed)
    return r


def verdict_one(base, cand, metric: str = schema.PRIMARY_METRIC, noise: float = 0.01, alpha: float = 0.05,
                n_resamples: int = DEFAULT_RESAMPLES, seed=DEFAULT_SEED, paired: bool = False) -> dict:
    """``compare_arrays`` plus its verdict, for a single comparison (no Holm)."""
    return compare_arrays(base, cand, metric, noise, alpha, n_resamples, seed, paired)


def _check_args(noise, alpha):
    if not (isinstance(noise, (int, float)) and 0 <= noise < 1):
        raise StatsError(f"noise: {noise!r} not allowed; allowed: a fraction in [0, 1), e.g. 0.01 for 1%")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise StatsError(f"alpha: {alpha!r} not allowed; allowed: a number in (0, 1), e.g. 0.05")


def _layout_analysis(r: dict, bsub: pd.DataFrame, csub: pd.DataFrame, metric: str, has_layout: bool) -> None:
    """The layout fields of a row, and for a paired row of a raw.csv with a ``layout`` column the
    layout / machine-state design (``ringlab.stats.designs``), whose p replaces the signed-rank p."""
    r.update(_designs.defaults(has_layout, _designs.n_layouts(bsub, csub)))
    sc = r.get("_scale")
    if not (has_layout and r["design"] == "paired" and sc is not None and sc.log):
        return
    rd = _designs.round_data(bsub, csub, metric)
    if rd is None:
        return
    v = _designs.verdict(rd, 0.95)    # p does not depend on the level
    r.update(p_value=float(v["p"]), design=v["design"], _rounds=rd)
    r.update(_designs.fields(v, sc.pct))
    if v["design"] == "layouts":
        r["_n_run"] = int(v["layouts_estimated"])


def _group_rows(sub: pd.DataFrame, cols: list[str], key: tuple, baseline: str, variants: list[str],
                metric: str, exact_src: bool, paired, has_layout: bool) -> list[dict]:
    label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
    bsub = sub[sub["variant"] == str(baseline)]
    rows = []
    for cand in variants:
        if cand == str(baseline):
            continue
        csub = sub[sub["variant"] == cand]
        if len(csub) == 0 and len(bsub) == 0:
            continue
        ex = bool(exact_src and len(bsub) and len(csub)
                  and (pd.concat([bsub, csub])["icount_source"].astype(str) == "callgrind").all())
        r = compare_rounds(_round_values(bsub, metric), _round_values(csub, metric), metric,
                           bsub[metric].to_numpy(), csub[metric].to_numpy(), exact_source=ex, paired=paired)
        _layout_analysis(r, bsub, csub, metric, has_layout)
        r.update(group=label, baseline=str(baseline), candidate=cand)
        r.update(dict(zip(cols, key)))
        rows.append(r)
    return rows


def compare(df: pd.DataFrame, baseline: str, metric: str = schema.PRIMARY_METRIC, by=None,
            noise: float = 0.01, alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES,
            seed=DEFAULT_SEED) -> pd.DataFrame:
    """Every other variant against ``baseline`` within each configuration.

    Returns a frame whose first columns are ``JSON_FIELDS``, followed by the group's
    parameter columns and extras: p_welch (Welch t on the measurements, uncorrected,
    descriptive), gain_pct (seed sign convention, NaN for higher-is-better metrics),
    delta_abs, ratio_medians_pct, note, lower_is_better, metric.  ``attrs``: metric,
    group_columns, alpha.  ``n_resamples`` is accepted for compatibility: the CIs are exact
    rank-test inversions and need no resampling; ``seed`` seeds the trials_needed check.

    A ``layout`` column with more than one value in a configuration makes the design
    ``layouts``: per layout pair the paired Hodges-Lehmann estimate of the per-round log
    ratios, the verdict from the t interval across the K estimates (K - 1 df) at the row's
    Holm-matched ``ci_level``, p from the same t test.  A t interval rather than a hierarchical
    bootstrap, because at K = 6-16 a bootstrap over layouts is too narrow (see
    ``ringlab.stats.layouts``).  With a ``layout`` column, machine states are looked for as well
    (``ringlab.stats.designs``): with two, the headline weights the states equally and the
    verdict is ``depends on machine state`` when the per-state CIs lie on opposite sides of 0.
    The ``layout`` columns never define a configuration.
    """
    _check_args(noise, alpha)
    if "variant" not in df.columns:
        raise StatsError("raw.csv has no 'variant' column; compare needs one")
    meas, _ = measurements(df, metric)
    variants = sorted(map(str, df["variant"].dropna().unique()))
    if str(baseline) not in variants:
        raise StatsError(f"baseline: {baseline!r} is not a variant of this raw.csv; allowed: "
                         + ", ".join(variants))
    meas["variant"] = meas["variant"].astype(str)
    cols = [c for c in comparison_columns(meas, by) if by is not None or c not in _designs.LAYOUT_COLUMNS]
    rk = round_key(meas)
    if rk is not None:
        meas["_round"] = rk
    exact_src = metric in INSTRUCTION_METRICS and "icount_source" in meas.columns
    has_layout = _designs.LAYOUT_COLUMN in meas.columns
    rows = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        rows += _group_rows(sub, cols, key, baseline, variants, metric, exact_src,
                            None if rk is not None else False, has_layout)
    if not rows:
        return pd.DataFrame(columns=JSON_FIELDS)
    return _finish_family(rows, cols, metric, noise, alpha, seed)


def _finish_family(rows: list[dict], cols: list[str], metric: str, noise: float, alpha: float,
                   seed) -> pd.DataFrame:
    """Holm per candidate, each row's CI at its Holm level, then the frame (checked by check_rule)."""
    lib = metric in schema.LOWER_IS_BETTER
    for cand in sorted({r["candidate"] for r in rows}):
        fam = [r for r in rows if r["candidate"] == cand]
        p = [r["p_value"] for r in fam]
        m = int(np.isfinite(p).sum())
        for r, pa, lev in zip(fam, holm(p), holm_levels(p, alpha)):
            r["p_holm"] = float(pa)
            r["family_size"] = m
            finish(r, lev if math.isfinite(lev) else 1 - alpha, noise, alpha / max(m, 1), seed)
    for r in rows:
        r["gain_pct"] = -r["delta_pct"] if lib else math.nan
        r["lower_is_better"] = lib
        r["metric"] = metric
    out = pd.DataFrame(rows)
    extra = [c for c in out.columns if c not in JSON_FIELDS]
    out = out[JSON_FIELDS + [c for c in cols if c in extra] + [c for c in extra if c not in cols]]
    out.attrs["metric"] = metric
    out.attrs["group_columns"] = cols
    out.attrs["alpha"] = alpha
    check_rule(out)
    return out


__all__ = ["EXACT_NOTE", "INSTRUCTION_METRICS", "TINY_EFFECT_PCT", "JSON_FIELDS", "LAYOUT_FIELDS", "SIGNIFICANT", "STATE_DEPENDENT", "VERDICTS", "check_rule",
           "compare", "compare_arrays", "compare_rounds", "comparison_columns", "finish", "holm", "holm_levels",
           "method_text", "round_key", "to_records", "verdict_one"]
