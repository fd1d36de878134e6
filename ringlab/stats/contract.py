"""What ``compare`` promises: the ``--json`` fields, the verdicts and the rule that ties a
verdict to its printed CI."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ringlab.stats.summary import StatsError

#: The ``--json`` fields, in order.  Meanings:
#:   group             configuration label "col=value,..." ("all" without parameters)
#:   baseline, candidate  variant names
#:   n_baseline, n_candidate  measurements (rows: trials x iterations) of each arm
#:   median_baseline, median_candidate  medians of those measurements
#:   delta_pct         (exp(HL estimate of ln(candidate/baseline)) - 1) * 100; exact rows: ratio of medians;
#:                     design layouts: exp(mean of the per-layout-pair HL estimates) - 1; two machine
#:                     states: the per-state effects weighted equally
#:   ci_low_pct, ci_high_pct  the CI of delta_pct at ``ci_level`` (null when none)
#:   p_value           two-sided p of the signed-rank (paired) / Mann-Whitney (unpaired) test; design
#:                     layouts: the t test across layout pairs; two states: the test of the headline
#:   p_holm            p_value Holm-adjusted within the family (candidate over configurations)
#:   verdict           one of VERDICTS
#:   trials_needed     inconclusive rows only: rounds (= trials per arm) for 80% power
#:   design            paired | unpaired | exact | layouts
#:   n_pairs           rounds paired (0 when unpaired or exact)
#:   ci_level          confidence level of the printed CI (>= 0.95; family-adjusted)
#:   family_size       comparisons in this row's family (candidate over configurations)
#:   layouts           layout pairs measured (null when raw.csv has no ``layout`` column)
#:   sigma_layout_pct  layout spread sigma_L in percent points (null with one layout)
#:   layout_share      share of var(per-layout estimate) from the layout spread, hence of the CI
#:                     width squared (null with one layout)
#:   layout_sensitive  sigma_L exceeds the size of the effect (null with one layout)
#:   states            machine states found (1 or 2; null without a ``layout`` column)
#:   slow_share        share of trials in the slow state (0 with one state)
#:   delta_fast_pct, ci_fast_low_pct, ci_fast_high_pct  effect and CI in the fast state (two states)
#:   delta_slow_pct, ci_slow_low_pct, ci_slow_high_pct  effect and CI in the slow state (two states)
#:   heterogeneity_p   p of "the effect is the same in both states" (two states)
#:   fixed_build       one layout only: the CI describes this binary pair, not the code change
#:                     (null when raw.csv has no ``layout`` column)
JSON_FIELDS = ["group", "baseline", "candidate", "n_baseline", "n_candidate", "median_baseline",
               "median_candidate", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "p_holm",
               "verdict", "trials_needed", "design", "n_pairs", "ci_level", "family_size",
               "layouts", "sigma_layout_pct", "layout_share", "layout_sensitive", "states", "slow_share",
               "delta_fast_pct", "ci_fast_low_pct", "ci_fast_high_pct", "delta_slow_pct",
               "ci_slow_low_pct", "ci_slow_high_pct", "heterogeneity_p", "fixed_build"]
#: the fields added by the layout and machine-state analysis (null / absent in older frames)
LAYOUT_FIELDS = JSON_FIELDS[JSON_FIELDS.index("layouts"):]
STATE_DEPENDENT = "depends on machine state"
VERDICTS = ("faster", "slower", "fewer instructions", "more instructions", "same instructions",
            "no significant difference", "inconclusive", STATE_DEPENDENT)
SIGNIFICANT = ("faster", "slower", "fewer instructions", "more instructions")
EXACT_NOTE = "exact (deterministic metric)"
_INT_FIELDS = ("trials_needed", "n_pairs", "family_size", "layouts", "states")


def _finite(v) -> bool:
    return isinstance(v, (float, int, np.floating, np.integer)) and math.isfinite(float(v))


def _excludes_zero(lo, hi) -> int:
    """+1 / -1 when [lo, hi] lies above / below 0, else 0."""
    if not (_finite(lo) and _finite(hi)):
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def check_rule(result) -> None:
    """Raise StatsError when a verdict contradicts its printed CI.

    No row says inconclusive while its CI excludes 0, nor faster/slower while it includes 0;
    a row that says ``depends on machine state`` has per-state CIs on opposite sides of 0."""
    rows = result.to_dict("records") if isinstance(result, pd.DataFrame) else list(result)
    for r in rows:
        lo, hi = r.get("ci_low_pct", math.nan), r.get("ci_high_pct", math.nan)
        if r.get("design") == "exact" or r.get("note") == EXACT_NOTE:
            continue
        if r["verdict"] == STATE_DEPENDENT:
            dirs = {_excludes_zero(r.get("ci_fast_low_pct"), r.get("ci_fast_high_pct")),
                    _excludes_zero(r.get("ci_slow_low_pct"), r.get("ci_slow_high_pct"))}
            if dirs != {1, -1}:
                raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but the per-state CIs do not "
                                 "lie on opposite sides of 0")
            continue
        excl = _excludes_zero(lo, hi) != 0
        if excl and r["verdict"] not in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] excludes 0")
        if not excl and r["verdict"] in SIGNIFICANT:
            raise StatsError(f"{r.get('group')}: verdict {r['verdict']!r} but CI [{lo}, {hi}] includes 0")


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
