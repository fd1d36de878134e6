"""One estimator per design, each returning the same ``Estimate``.

The designs (see ``ringlab.stats.compare`` for when each applies):

* ``exact``     a deterministic metric: the difference of the medians, no CI, no p;
* ``paired``    one build per arm, rounds paired: Hodges-Lehmann of the per-round differences,
                the inverted Wilcoxon signed-rank CI and its p (``ringlab.stats.ranktests``);
* ``unpaired``  incomplete rounds: Hodges-Lehmann shift, the inverted Mann-Whitney CI and its p;
* ``layouts``   K seeded builds of each arm: one REML fit of d = theta + u_layout + e_round on the
                per-round log ratios (``ringlab.stats.fit``), theta the mean log ratio, its t
                interval on K - 1 df and the same t test's p; ``se``, ``sigma_layout``,
                ``sigma_round`` and ``layout_share`` from the same fit.

With a ``layout`` column the machine states are looked for too (``ringlab.stats.layouts``), as a
diagnostic: ``states``, ``slow_share``, ``per_state``, ``heterogeneity_p`` and
``state_dependent`` describe how the effect differs between the states, and the estimate, CI and
p are the same whatever the classifier finds.

An ``Estimate`` is on the scale of its ``scale`` (``ringlab.stats.rounds.Scale``: log for
positive data); ``pct`` turns one of its values into percent.  ``p`` does not depend on
``level``, so the p of an estimate at any level can feed Holm before the CI level is known.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ringlab.stats import layouts as _layouts
from ringlab.stats import ranktests as _rt
from ringlab.stats.rounds import Scale

#: the unit each design counts its ``n`` in (and asks more of)
UNITS = {"exact": "measurements", "paired": "rounds", "unpaired": "trials per arm", "layouts": "layout pairs"}


@dataclass(frozen=True)
class StateEffect:
    """One machine state's effect and CI (on the estimate's scale)."""
    estimate: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Estimate:
    """The effect of one comparison: point estimate, CI at ``level``, p, and what it rests on.

    ``n``: the units the CI rests on (``unit``); ``se``: the standard error of the layouts
    design's theta (NaN otherwise); ``sigma_layout``, ``sigma_round``: the fit's layout and
    round SDs (log scale).  The layout and state fields are NaN / None where the design has
    none; the state fields never enter the estimate, CI or p."""
    estimate: float
    ci_low: float
    ci_high: float
    level: float
    p: float
    n: int
    unit: str
    design: str
    scale: Scale
    notes: tuple[str, ...] = ()
    se: float = math.nan
    layouts: float = math.nan
    sigma_layout: float = math.nan
    layout_share: float = math.nan
    layout_sensitive: bool | None = None
    sigma_round: float = math.nan
    states: float = math.nan
    slow_share: float = math.nan
    per_state: dict[int, StateEffect] = field(default_factory=dict)
    heterogeneity_p: float = math.nan
    state_dependent: bool = False

    def pct(self, v: float) -> float:
        """A value of this estimate in percent of the baseline."""
        return self.scale.pct(v)

    @property
    def ci_pct(self) -> tuple[float, float]:
        return self.pct(self.ci_low), self.pct(self.ci_high)


def exact(delta_abs: float, median_baseline: float, note: str) -> Estimate:
    """A deterministic metric: the difference of the medians (raw scale), no CI, no p."""
    return Estimate(delta_abs, math.nan, math.nan, math.nan, math.nan, 0, UNITS["exact"], "exact",
                    Scale(False, median_baseline), (note,))


def _from_rank(res: dict, scale: Scale, level: float, n: int, design: str) -> Estimate:
    return Estimate(res["estimate"], res["ci_low"], res["ci_high"], level, res["p"], n, UNITS[design],
                    design, scale)


def paired(d, scale: Scale, level: float) -> Estimate:
    """One build per arm, paired rounds: signed-rank on the per-round differences ``d``."""
    d = np.asarray(d, dtype=float)
    return _from_rank(_rt.signed_rank(d, level), scale, level, len(d), "paired")


def unpaired(x, y, scale: Scale, level: float) -> Estimate:
    """Two independent samples of round values: Mann-Whitney shift ``y - x``."""
    return _from_rank(_rt.rank_sum(x, y, level), scale, level, min(len(x), len(y)), "unpaired")


def _with_states(v: dict, scale: Scale, level: float) -> Estimate:
    per = {s: StateEffect(p["estimate"], p["ci_low"], p["ci_high"]) for s, p in v["per_state"].items()}
    return Estimate(v["estimate"], v["ci_low"], v["ci_high"], level, float(v["p"]), int(v["n"]), UNITS[v["design"]],
                    v["design"], scale, (v["note"],) if v.get("note") else (), se=v.get("se", math.nan),
                    layouts=v["layouts"], sigma_layout=v["sigma_layout"], layout_share=v["layout_share"],
                    layout_sensitive=v["layout_sensitive"], sigma_round=v["sigma_round"], states=v["states"],
                    slow_share=v["slow_share"], per_state=per, heterogeneity_p=v["heterogeneity_p"],
                    state_dependent=bool(v["state_dependent"]))


def of_layout_rounds(rd: _layouts.LayoutRounds, scale: Scale, level: float) -> Estimate:
    """A paired comparison with a ``layout`` column: ``layouts`` with more than one layout pair
    (the fit of ``ringlab.stats.fit``), else ``paired`` (signed-rank), each with the state
    diagnostic (``ringlab.stats.layouts.verdict``)."""
    return _with_states(_layouts.verdict(rd, level), scale, level)
