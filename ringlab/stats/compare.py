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
* ``exact``: a deterministic metric (see below), no CI, no p.

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
a p-value).  Each row's CI is printed at the Holm step's level, ``ci_level`` =
1 - alpha / (m - j + 1), where j is the row's rank among the family's p-values, or, for rows
Holm does not reject, the rank of the first non-rejected row.  Hence a row is significant
(``p_holm <= alpha``) exactly when its printed CI excludes 0, and every printed CI has at least
1 - alpha (95%) coverage on its own.

Verdict (``LOWER_IS_BETTER`` decides the direction), decided from the printed CI alone:
  faster / slower            the CI excludes 0 (note added when it also lies within +-noise)
  no significant difference  the CI includes 0 and lies within +-noise
  inconclusive               the CI includes 0 and reaches beyond +-noise (or no CI exists);
                             ``trials_needed`` rounds (= trials per arm) would resolve an
                             effect of the observed size (or 2% when the observed one is
                             below the noise threshold), see ``ringlab.stats.power``.
``check_rule`` enforces that no row says inconclusive while its CI excludes 0, nor
faster/slower while it includes 0; ``compare`` calls it on every result.

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
from ringlab.stats import power as _power
from ringlab.stats import ranktests as _rt
from ringlab.stats.summary import DEFAULT_RESAMPLES, DEFAULT_SEED, StatsError, group_columns, measurements

#: The ``--json`` fields, in order.  Meanings:
#:   group             configuration label "col=value,..." ("all" without parameters)
#:   baseline, candidate  variant names
#:   n_baseline, n_candidate  measurements (rows: trials x iterations) of each arm
#:   median_baseline, median_candidate  medians of those measurements
#:   delta_pct         (exp(HL estimate of ln(candidate/baseline)) - 1) * 100; exact rows: ratio of medians
#:   ci_low_pct, ci_high_pct  the CI of delta_pct at ``ci_level`` (null when none)
#:   p_value           two-sided p of the signed-rank (paired) / Mann-Whitney (unpaired) test
#:   p_holm            p_value Holm-adjusted within the family (candidate over configurations)
#:   verdict           one of VERDICTS
#:   trials_needed     inconclusive rows only: rounds (= trials per arm) for 80% power
#:   design            paired | unpaired | exact
#:   n_pairs           rounds paired (0 when unpaired or exact)
#:   ci_level          confidence level of the printed CI (>= 0.95; family-adjusted)
#:   family_size       comparisons in this row's family (candidate over configurations)
JSON_FIELDS = ["group", "baseline", "candidate", "n_baseline", "n_candidate", "median_baseline",
               "median_candidate", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
               "verdict", "trials_needed", "design", "n_pairs", "ci_level", "family_size"]
VERDICTS = ("faster", "slower", "fewer instructions", "more instructions", "same instructions",
            "no significant difference", "inconclusive")
SIGNIFICANT = ("faster", "slower", "fewer instructions", "more instructions")
EXACT_NOTE = "exact (deterministic metric)"
TINY_EFFECT_PCT = 2.0
INSTRUCTION_METRICS = {"instructions_per_op", "instructions"}
#: paired when the common rounds are at least this share of either arm's rounds
PAIRED_MIN_SHARE = 0.5


def _holm_order(p_values) -> tuple[np.ndarray, np.ndarray, int]:
    """(p as floats, the finite p's indices from smallest p up, how many there are): Holm's set-up."""
    p = np.asarray(p_values, dtype=float)
    ok = np.flatnonzero(np.isfinite(p))
    return p, ok[np.argsort(p[ok], kind="stable")], len(ok)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and does not count)."""
    p, order, m = _holm_order(p_values)
    out = np.full(len(p), np.nan)
    if m == 0:
        return out
    adj = np.maximum.accumulate([(m - i) * p[j] for i, j in enumerate(order)])
    out[order] = np.minimum(adj, 1.0)
    return out


def holm_levels(p_values, alpha: float) -> np.ndarray:
    """The CI level that agrees with Holm for each p (NaN for NaN p), see the module doc."""
    p, order, m = _holm_order(p_values)
    out = np.full(len(p), np.nan)
    if m == 0:
        return out
    stop = m  # 0-based rank of the first row Holm does not reject (m: all rejected)
    for i, j in enumerate(order):
        if p[j] > alpha / (m - i):
            stop = i
            break
    for i, j in enumerate(order):
        out[j] = 1 - alpha / (m - min(i, stop))
    return out


def _direction(sign: float, metric: str) -> str:
    lib = metric in schema.LOWER_IS_BETTER
    if metric in INSTRUCTION_METRICS:
        return "fewer instructions" if sign < 0 else "more instructions"
    return "faster" if (sign < 0) == lib else "slower"


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


def _round_values(frame: pd.DataFrame, metric: str) -> pd.Series:
    """One value per round: the median of the arm's rows in that round."""
    if "_round" not in frame.columns:
        return pd.Series(frame[metric].to_numpy(), index=pd.RangeIndex(len(frame)), dtype=float)
    return frame.groupby("_round", sort=True)[metric].median()


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
    n_run = r.pop("_n_run", 0)
    if r["design"] == "exact" or sc is None:
        return
    r["ci_level"] = float(level)
    res = _rt.signed_rank(d, level) if d is not None else _rt.rank_sum(x, y, level)
    r["delta_pct"] = sc.pct(res["estimate"])
    r["ci_low_pct"], r["ci_high_pct"] = sc.pct(res["ci_low"]), sc.pct(res["ci_high"])
    lo, hi, nz = r["ci_low_pct"], r["ci_high_pct"], noise * 100
    if not math.isfinite(lo):
        unit = "rounds" if d is not None else "trials per arm"
        r["note"] = f"too few {unit} ({n_run}) for a {level:.4g} CI"
    elif lo > 0 or hi < 0:
        r["verdict"] = _direction(lo if lo > 0 else hi, metric)
        if -nz <= lo and hi <= nz:
            r["note"] = f"significant but within the +-{nz:g}% noise threshold"
        return
    elif -nz <= lo and hi <= nz:
        r["verdict"] = "no significant difference"
        return
    r["verdict"] = "inconclusive"
    effect = r["delta_pct"]
    if not math.isfinite(effect) or abs(effect) < nz:
        effect = TINY_EFFECT_PCT if not (math.isfinite(effect) and effect < 0) else -TINY_EFFECT_PCT
        what = f"a {TINY_EFFECT_PCT:g}% effect (observed effect is tiny)"
    else:
        what = f"the observed {abs(effect):.2g}% effect"
    plan = _power.rounds_for_effect(effect, d=d, x=x, y=y, alpha=alpha_planning, power=0.8,
                                    log_scale=sc.log, ref=sc.ref, seed=seed, n_resamples=n_resamples)
    # never fewer than were just run: this run did not resolve its own effect
    r["trials_needed"] = float(max(plan, n_run + 1)) if math.isfinite(plan) else math.nan
    if not r["note"]:
        r["note"] = f"trials_needed for {what}"


def check_rule(result) -> None:
    """Raise StatsError when a verdict contradicts its printed CI (see the module doc)."""
    rows = result.to_dict("records") if isinstance(result, pd.DataFrame) else list(result)
    for r in rows:
        lo, hi = r.get("ci_low_pct", math.nan), r.get("ci_high_pct", math.nan)
        excl = isinstance(lo, float) and math.isfinite(lo) and (lo > 0 or hi < 0)
        if r.get("design") == "exact" or r.get("note") == EXACT_NOTE:
            continue
        if excl and r["verdict"] not in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] excludes 0")
        if not excl and r["verdict"] in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] includes 0")


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


def round_key(frame: pd.DataFrame) -> pd.Series | None:
    """The round of each row: ``round`` (or ``trial`` in older files), per ``run_id``."""
    col = next((c for c in ("round", "trial") if c in frame.columns
                and pd.to_numeric(frame[c], errors="coerce").notna().any()), None)
    if col is None:
        return None
    key = pd.to_numeric(frame[col], errors="coerce")
    if "run_id" in frame.columns and frame["run_id"].nunique(dropna=False) > 1:
        return frame["run_id"].astype(str) + "/" + key.astype("Int64").astype(str)
    return key


def comparison_columns(meas: pd.DataFrame, by=None) -> list[str]:
    """Configuration key of a comparison: the parameters and requested placement, except
    placement columns on which the arms disagree while each arm's value follows from the
    other columns (a single-threaded arm records no consumer CPU, -1 or NaN: its ``base``
    must still meet the two-thread arms of the same placement)."""
    cols = group_columns(meas, by, include_variant=False)
    if by is not None or "variant" not in meas.columns or not len(meas):
        return cols
    place = [c for c in cols if c in schema.CONFIG_PLACEMENT_COLUMNS]
    other = [c for c in cols if c not in place]
    drop = []
    for c in place:
        determined, per_variant = True, {}
        for v, sub in meas.groupby("variant", sort=True):
            if other:
                g = sub.groupby(other, dropna=False, sort=True)[c]
                if (g.nunique(dropna=False) > 1).any():
                    determined = False
                    break
                per_variant[v] = g.first().astype(str).to_dict()
            else:
                if sub[c].nunique(dropna=False) > 1:
                    determined = False
                    break
                per_variant[v] = {(): str(sub[c].iloc[0])}
        if not determined:
            continue
        maps = list(per_variant.values())
        disagree = any(m.get(k) != maps[0].get(k) for m in maps[1:] for k in set(m) & set(maps[0]))
        if disagree:
            drop.append(c)
    return [c for c in cols if c not in drop]


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
    cols = comparison_columns(meas, by)
    rk = round_key(meas)
    if rk is not None:
        meas["_round"] = rk
    exact_src = metric in INSTRUCTION_METRICS and "icount_source" in meas.columns
    rows = []
    groups = meas.groupby(cols, sort=True, dropna=False) if cols else [((), meas)]
    for key, sub in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ",".join(f"{c}={v}" for c, v in zip(cols, key)) or "all"
        bsub = sub[sub["variant"] == str(baseline)]
        for cand in variants:
            if cand == str(baseline):
                continue
            csub = sub[sub["variant"] == cand]
            if len(csub) == 0 and len(bsub) == 0:
                continue
            ex = bool(exact_src and len(bsub) and len(csub)
                      and (pd.concat([bsub, csub])["icount_source"].astype(str) == "callgrind").all())
            r = compare_rounds(_round_values(bsub, metric), _round_values(csub, metric), metric,
                               bsub[metric].to_numpy(), csub[metric].to_numpy(), exact_source=ex,
                               paired=None if rk is not None else False)
            r.update(group=label, baseline=str(baseline), candidate=cand)
            r.update(dict(zip(cols, key)))
            rows.append(r)
    if not rows:
        return pd.DataFrame(columns=JSON_FIELDS)
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


def method_text(res: pd.DataFrame) -> str:
    """One paragraph saying how a compare() result was made: designs, tests, the real family
    sizes and CI levels (for `ringlab compare` and summary.md)."""
    metric = res.attrs.get("metric", "the metric")
    designs = sorted(set(res["design"].astype(str)))
    parts = [f"delta = estimated candidate/baseline ratio - 1 of {metric} (Hodges-Lehmann on the log scale)"]
    if "paired" in designs:
        parts.append("paired rows: per-round ln(candidate/baseline), CI and p from the Wilcoxon "
                     "signed-rank test")
    if "unpaired" in designs:
        parts.append("unpaired rows (incomplete rounds): CI and p from Mann-Whitney")
    if "exact" in designs:
        parts.append("exact rows: deterministic metric, no CI or p")
    fams = []
    for cand, sub in res.groupby("candidate", sort=True):
        m = int(sub["family_size"].max()) if len(sub) else 0
        if m:
            lv = sub["ci_level"].dropna()
            lvl = (f"{lv.min() * 100:.4g}%" if lv.min() == lv.max()
                   else f"{lv.min() * 100:.4g}-{lv.max() * 100:.4g}%")
            fams.append(f"{cand}: {m} comparison(s), CI level {lvl}")
    if fams:
        parts.append("p Holm-corrected per candidate over its configurations, CI level matched to it ("
                     + "; ".join(fams) + ")")
    return "; ".join(parts) + "."


def to_records(result: pd.DataFrame) -> list[dict]:
    """The JSON form: a list of objects with exactly ``JSON_FIELDS`` (NaN -> null)."""
    recs = []
    for row in result[JSON_FIELDS].itertuples(index=False):
        d = {}
        for k, v in zip(JSON_FIELDS, row):
            if isinstance(v, (float, np.floating)):
                v = None if math.isnan(v) else float(v)
            elif isinstance(v, (np.integer, np.bool_)):
                v = v.item()
            d[k] = v
        for k in ("trials_needed", "n_pairs", "family_size"):
            if d[k] is not None:
                d[k] = int(d[k])
        recs.append(d)
    return recs
