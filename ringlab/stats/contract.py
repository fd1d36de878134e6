"""What ``compare`` promises: the row of one comparison (``Comparison``), its serialization
(``to_frame`` for the frame that summary.csv, mail and ``compare --json`` are written from,
``to_records`` for the JSON), the verdicts and the rule that ties a verdict to its CIs.

Two intervals per row, from the same estimator and point estimate:

* the **printed CI** (``ci_low_pct``, ``ci_high_pct``) is at one level for every row of a report,
  ``ci_level`` = 1 - alpha (95%): the interval every table, figure and mail shows;
* the **Holm CI** (``holm_ci_low_pct``, ``holm_ci_high_pct``) is at the row's Holm step level
  ``holm_ci_level`` (``ringlab.stats.decide``): the verdict rests on it, so a row is called
  exactly when Holm rejects it (``p_holm`` <= alpha).  It contains the printed CI; they are equal
  when the family has one comparison.

A printed CI can therefore exclude 0 on a row that Holm does not reject.  Such a row's verdict
is ``NOT_AFTER_HOLM`` ("not significant after Holm"), never "inconclusive" or "no significant
difference": both of those say the printed CI includes 0, and the note gives p (Holm).

Both answer "how sure are we about this run?".  A third, the **next-run interval**
(``next_low_pct``, ``next_high_pct``), answers "what will another run on this host show?": a
prediction interval with the comparison's between-run variance (``ringlab.stats.replication``),
filled in by the reports.  The verdict never rests on it; ``sign_reproducible`` says whether it keeps a
called row's sign."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ringlab.catalog import CALLS, Verdict
from ringlab.stats.summary import StatsError

if TYPE_CHECKING:   # the pipeline's types; they import this module's verdict names
    from ringlab.stats.decide import Decision
    from ringlab.stats.estimate import Estimate
    from ringlab.stats.plan import Plan

#: The ``--json`` fields, in order.  Meanings:
#:   group             configuration label "col=value,..." ("all" without parameters)
#:   baseline, candidate  variant names
#:   n_baseline, n_candidate  measurements (rows: trials x iterations) of each arm
#:   median_baseline, median_candidate  medians of those measurements
#:   delta_pct         (exp(HL estimate of ln(candidate/baseline)) - 1) * 100; exact rows: ratio of medians;
#:                     design layouts: exp(theta) - 1, theta the mean log ratio of the REML fit
#:                     of layout pair and round (``ringlab.stats.fit``), whatever machine states occur
#:   ci_low_pct, ci_high_pct  the printed CI of delta_pct, at ``ci_level`` (null when none)
#:   p_value           two-sided p of the signed-rank (paired) / Mann-Whitney (unpaired) test; design
#:                     layouts: the fit's t test on K - 1 df
#:   p_holm            p_value Holm-adjusted within the family (the run: every candidate x configuration)
#:   verdict           one of VERDICTS
#:   trials_needed     inconclusive rows only: rounds (= trials per arm) for 80% power
#:   design            paired | unpaired | exact | layouts
#:   n_pairs           rounds paired (0 when unpaired or exact)
#:   ci_level          confidence level of the printed CI: 1 - alpha (0.95) on every row
#:   family_size       comparisons in this row's family (the run's rows with a p)
#:   layouts           layout pairs measured (null when raw.csv has no ``layout`` column)
#:   sigma_layout_pct  layout spread sigma_L in percent points: the fit's layout SD x 100 (null with
#:                     one layout)
#:   sigma_round_pct   the fit's round SD x 100, the spread of a round's log ratio within a layout
#:                     pair (null with one layout, and with one round per layout pair)
#:   layout_share      the layout level's share of the CI's width squared (null with one layout)
#:   layout_sensitive  sigma_L exceeds the size of the effect (null with one layout)
#:   states            machine states found (1 or 2; null without a ``layout`` column); a diagnostic,
#:                     as are the state fields below: the estimate, CI, p and verdict never use them
#:   slow_share        share of trials in the slow state (0 with one state)
#:   delta_fast_pct, ci_fast_low_pct, ci_fast_high_pct  effect and CI in the fast state (two states)
#:   delta_slow_pct, ci_slow_low_pct, ci_slow_high_pct  effect and CI in the slow state (two states)
#:   heterogeneity_p   p of "the effect is the same in both states" (two states)
#:   fixed_build       one layout only: the CI describes this binary pair, not the code change
#:                     (null when raw.csv has no ``layout`` column)
#:   holm_ci_low_pct, holm_ci_high_pct  the CI the verdict rests on, at ``holm_ci_level``
#:   holm_ci_level     the row's Holm step level, 1 - alpha / (m - j + 1) (``ringlab.stats.decide``)
#:   next_low_pct, next_high_pct  where another run of this comparison on this host is expected to
#:                     put delta_pct, at ``next_level``: delta +- t * sqrt(2 se^2 + 2 tau^2)
#:                     (``ringlab.stats.replication.next_run_interval``; null until a report fills
#:                     it in, and for exact rows)
#:   next_level        the level of that interval (0.95)
#:   next_basis        where tau^2 comes from: "runs" (this comparison's own runs on this host),
#:                     "host A/A" (the upper bound of the host's A/A drift calibration) or "none"
#:                     (the interval of a rerun if nothing drifted)
#:   next_between_sd_pct  tau, the between-run SD of the effect, in log points x 100 (null for none)
#:   next_source       the basis in words
#:   sign_reproducible called rows: the next-run interval lies on the verdict's side of 0 (null
#:                     for rows not called)
JSON_FIELDS = ["group", "baseline", "candidate", "n_baseline", "n_candidate", "median_baseline",
               "median_candidate", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
               "verdict", "trials_needed", "design", "n_pairs", "ci_level", "family_size",
               "layouts", "sigma_layout_pct", "sigma_round_pct", "layout_share", "layout_sensitive", "states",
               "slow_share", "delta_fast_pct", "ci_fast_low_pct", "ci_fast_high_pct", "delta_slow_pct",
               "ci_slow_low_pct", "ci_slow_high_pct", "heterogeneity_p", "fixed_build",
               "holm_ci_low_pct", "holm_ci_high_pct", "holm_ci_level", "next_low_pct", "next_high_pct",
               "next_level", "next_basis", "next_between_sd_pct", "next_source", "sign_reproducible"]
#: the fields added by the layout and machine-state analysis (null / absent in older frames)
LAYOUT_FIELDS = JSON_FIELDS[JSON_FIELDS.index("layouts"):JSON_FIELDS.index("fixed_build") + 1]
#: the verdict's interval (absent in frames made when the printed CI was at the Holm level)
HOLM_FIELDS = JSON_FIELDS[JSON_FIELDS.index("holm_ci_low_pct"):JSON_FIELDS.index("holm_ci_level") + 1]
#: the interval for another run on this host (``ringlab.stats.replication.with_next_run``)
NEXT_FIELDS = JSON_FIELDS[JSON_FIELDS.index("next_low_pct"):]
#: a verdict of files made when machine states could decide it (read, never produced)
STATE_DEPENDENT = Verdict.STATE_DEPENDENT
#: Not called, though the printed (95%) CI excludes 0: Holm over the family does not reject it.
NOT_AFTER_HOLM = Verdict.NOT_AFTER_HOLM
#: the verdict words (``ringlab.catalog.Verdict``), in its order
VERDICTS = tuple(v.value for v in Verdict)
#: the words that call a difference
SIGNIFICANT = CALLS
EXACT_NOTE = "exact (deterministic metric)"
_INT_FIELDS = ("trials_needed", "n_pairs", "family_size", "layouts", "states")


def _finite(v) -> bool:
    return isinstance(v, (float, int, np.floating, np.integer)) and math.isfinite(float(v))


def ci_side(lo, hi) -> int:
    """+1 / -1 when the CI [lo, hi] lies above / below 0, else 0 (also when it is missing)."""
    if not (_finite(lo) and _finite(hi)):
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def verdict_ci(row) -> tuple[float, float]:
    """(low, high) of the CI a row's verdict rests on: the Holm CI, or the printed CI in rows
    that have no Holm CI (JSON or frames made before it)."""
    lo, hi = row.get("holm_ci_low_pct"), row.get("holm_ci_high_pct")
    if _finite(lo) and _finite(hi):
        return float(lo), float(hi)
    return row.get("ci_low_pct", math.nan), row.get("ci_high_pct", math.nan)


def check_rule(result) -> None:
    """Raise StatsError when a verdict contradicts its CIs.

    No row says inconclusive while the CI its verdict rests on (``verdict_ci``) excludes 0, nor
    faster/slower while that CI, or its printed CI, includes 0; a row that says ``depends on
    machine state`` has per-state CIs on opposite sides of 0."""
    rows = result.to_dict("records") if isinstance(result, pd.DataFrame) else list(result)
    for r in rows:
        lo, hi = verdict_ci(r)
        if r.get("design") == "exact" or r.get("note") == EXACT_NOTE:
            continue
        if r["verdict"] == STATE_DEPENDENT:
            dirs = {ci_side(r.get("ci_fast_low_pct"), r.get("ci_fast_high_pct")),
                    ci_side(r.get("ci_slow_low_pct"), r.get("ci_slow_high_pct"))}
            if dirs != {1, -1}:
                raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but the per-state CIs do not "
                                 "lie on opposite sides of 0")
            continue
        excl = ci_side(lo, hi) != 0
        if excl and r["verdict"] not in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] excludes 0")
        if not excl and r["verdict"] in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] includes 0")
        plo, phi = r.get("ci_low_pct", math.nan), r.get("ci_high_pct", math.nan)
        if r["verdict"] in SIGNIFICANT and ci_side(plo, phi) == 0:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but the printed CI [{plo}, {phi}] "
                             "includes 0")
        if (r["verdict"] == NOT_AFTER_HOLM) != (r["verdict"] not in SIGNIFICANT and ci_side(plo, phi) != 0):
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} with the printed CI [{plo}, {phi}]: "
                             f"{NOT_AFTER_HOLM.value!r} is the verdict of exactly the rows not called whose printed "
                             "CI excludes 0")


def _json_value(v):
    if v is None or isinstance(v, (bool, np.bool_)):
        return None if v is None else bool(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.integer):
        return v.item()
    return v


def to_records(result: pd.DataFrame) -> list[dict]:
    """The JSON form: a list of objects with exactly ``JSON_FIELDS`` (NaN -> null; a field a
    frame lacks, as one made before the layout analysis, -> null)."""
    frame = result.reindex(columns=JSON_FIELDS)
    recs = []
    for row in frame.itertuples(index=False):
        d = {k: _json_value(v) for k, v in zip(JSON_FIELDS, row)}
        for k in _INT_FIELDS:
            if d[k] is not None:
                d[k] = int(d[k])
        recs.append(d)
    return recs


#: the descriptive columns a compare() frame has after ``JSON_FIELDS`` and the configuration's
#: parameter columns, in order
#: Meanings of the added ones:
#:   gain_pct          the effect in the one sign of the tables: + = better (faster, fewer
#:                     instructions, more ops/s): -delta_pct for lower-is-better metrics, delta_pct else
#:   center_baseline   the baseline's center the effect is measured against: the Hodges-Lehmann
#:                     location of its per-round values (log scale for positive values) over the
#:                     rounds the effect rests on (paired: the common rounds)
#:   center_candidate  center_baseline x (1 + delta_pct / 100): the candidate's center the effect
#:                     implies, so center_candidate / center_baseline - 1 is delta_pct exactly
#:   gain_low_pct, gain_high_pct  the CI of gain_pct (the CI of delta, negated for lower-is-better)
EXTRA_FIELDS = ["p_welch", "note", "delta_abs", "ratio_medians_pct", "gain_pct", "lower_is_better", "metric",
                "center_baseline", "center_candidate", "gain_low_pct", "gain_high_pct"]


@dataclass
class Comparison:
    """One compare() row: a candidate against the baseline in one configuration.

    Built by ``ringlab.stats.compare`` from the descriptive statistics, the ``Estimate``, the
    ``Decision`` and (inconclusive rows) the ``Plan``; ``row`` is the one place it is turned
    into the fields of ``JSON_FIELDS`` + configuration + ``EXTRA_FIELDS``."""
    group: str
    baseline: str
    candidate: str
    metric: str
    n_baseline: int
    n_candidate: int
    median_baseline: float
    median_candidate: float
    delta_abs: float
    ratio_medians_pct: float
    p_welch: float
    n_pairs: int
    estimate: Estimate | None = None     # the verdict's, at the Holm level; None: too few to estimate
    verdict: Decision | None = None
    plan: Plan | None = None             # inconclusive rows only
    p_holm: float = math.nan
    family_size: int = 0
    config: dict = field(default_factory=dict)
    frame_has_layout: bool = False
    n_layouts: int = 0
    lower_is_better: bool = True
    center_baseline: float = math.nan    # see EXTRA_FIELDS
    shown: Estimate | None = None        # the printed one, at 1 - alpha (None: ``estimate`` is at it)

    def _note(self) -> str:
        """The verdict's note, the plan's basis and the estimate's notes (an exact comparison's, a
        layouts fit that fell back), joined."""
        parts = [self.verdict.note, self.plan.basis if self.plan is not None else ""]
        parts += list(self.estimate.notes) if self.estimate is not None else []
        return "; ".join(t for t in parts if t)

    @property
    def printed(self) -> Estimate | None:
        """The estimate at the report's one level (the verdict's own where the levels agree)."""
        return self.shown if self.shown is not None else self.estimate

    def _effect(self) -> tuple[float, float, float, float, float]:
        """(delta_pct, ci_low_pct, ci_high_pct, p_value, ci_level) of the printed estimate."""
        e = self.printed
        if e is None:
            return math.nan, math.nan, math.nan, math.nan, math.nan
        if e.design == "exact":
            return self.ratio_medians_pct, math.nan, math.nan, math.nan, math.nan
        lo, hi = e.ci_pct
        return e.pct(e.estimate), lo, hi, e.p, e.level

    def _holm_fields(self) -> dict:
        e = self.estimate
        if e is None or e.design == "exact":
            return {f: math.nan for f in HOLM_FIELDS}
        lo, hi = e.ci_pct
        return {"holm_ci_low_pct": lo, "holm_ci_high_pct": hi, "holm_ci_level": e.level}

    def _layout_fields(self) -> dict:
        e = self.printed
        if e is None or not math.isfinite(e.states):
            k = self.n_layouts if self.frame_has_layout else math.nan
            out = {f: math.nan for f in LAYOUT_FIELDS}
            out.update(layouts=k, layout_sensitive=None,
                       fixed_build=(self.n_layouts <= 1) if self.frame_has_layout else None)
            return out
        out = {"layouts": e.layouts, "sigma_layout_pct": e.sigma_layout * 100, "sigma_round_pct": e.sigma_round * 100,
               "layout_share": e.layout_share, "layout_sensitive": e.layout_sensitive, "states": e.states,
               "slow_share": e.slow_share}
        for s, name in ((0, "fast"), (1, "slow")):
            p = e.per_state.get(s)
            out[f"delta_{name}_pct"] = e.pct(p.estimate) if p else math.nan
            out[f"ci_{name}_low_pct"] = e.pct(p.ci_low) if p else math.nan
            out[f"ci_{name}_high_pct"] = e.pct(p.ci_high) if p else math.nan
        out["heterogeneity_p"] = e.heterogeneity_p
        out["fixed_build"] = e.layouts <= 1
        return out

    def row(self) -> dict:
        """The fields: ``JSON_FIELDS``, then the configuration's parameters, then ``EXTRA_FIELDS``."""
        delta, lo, hi, p, level = self._effect()
        out = {"group": self.group, "baseline": self.baseline, "candidate": self.candidate,
               "n_baseline": self.n_baseline, "n_candidate": self.n_candidate,
               "median_baseline": self.median_baseline, "median_candidate": self.median_candidate,
               "delta_pct": delta, "ci_low_pct": lo, "ci_high_pct": hi, "p_value": p, "p_holm": self.p_holm,
               "verdict": self.verdict.verdict.value, "trials_needed": self.plan.trials if self.plan else math.nan,
               "design": self.estimate.design if self.estimate is not None else "unpaired",
               "n_pairs": self.n_pairs, "ci_level": level, "family_size": self.family_size,
               **self._layout_fields(), **self._holm_fields(),
               "next_low_pct": math.nan, "next_high_pct": math.nan, "next_level": math.nan, "next_basis": "",
               "next_between_sd_pct": math.nan, "next_source": "", "sign_reproducible": None}
        out.update(self.config)
        sign = -1.0 if self.lower_is_better else 1.0
        glo, ghi = (sign * lo, sign * hi) if sign > 0 else (-hi, -lo)
        cb = self.median_baseline if self.estimate is not None and self.estimate.design == "exact" \
            else self.center_baseline
        out.update(p_welch=self.p_welch, note=self._note(), delta_abs=self.delta_abs,
                   ratio_medians_pct=self.ratio_medians_pct, gain_pct=sign * delta,
                   lower_is_better=self.lower_is_better, metric=self.metric,
                   center_baseline=cb, center_candidate=cb * (1 + delta / 100),
                   gain_low_pct=glo, gain_high_pct=ghi)
        return out


def to_frame(comparisons: list[Comparison], group_columns: list[str], metric: str, alpha: float) -> pd.DataFrame:
    """The compare() frame of ``comparisons`` (columns ``JSON_FIELDS`` + ``group_columns`` +
    ``EXTRA_FIELDS``; ``attrs``: metric, group_columns, alpha), checked by ``check_rule``."""
    if not comparisons:
        return pd.DataFrame(columns=JSON_FIELDS)
    rows = [c.row() for c in comparisons]
    check_rule(rows)    # the rows' own values, before the frame: the same fields the frame holds
    out = pd.DataFrame(rows)
    cols = [c for c in group_columns if c not in JSON_FIELDS and c not in EXTRA_FIELDS]
    out = out[JSON_FIELDS + cols + EXTRA_FIELDS]
    out.attrs["metric"] = metric
    out.attrs["group_columns"] = group_columns
    out.attrs["alpha"] = alpha
    return out
