"""A row's verdict from its printed CI, and trials_needed when it is inconclusive."""
from __future__ import annotations

import math

from ringlab import schema
from ringlab.stats import designs as _designs
from ringlab.stats import layouts as _layouts
from ringlab.stats import power as _power

TINY_EFFECT_PCT = 2.0
INSTRUCTION_METRICS = {"instructions_per_op", "instructions"}

def _direction(sign: float, metric: str) -> str:
    lib = metric in schema.LOWER_IS_BETTER
    if metric in INSTRUCTION_METRICS:
        return "fewer instructions" if sign < 0 else "more instructions"
    return "faster" if (sign < 0) == lib else "slower"


def _state_note(r: dict, metric: str) -> str:
    fast, slow = _direction(r["delta_fast_pct"], metric), _direction(r["delta_slow_pct"], metric)
    return (f"{fast} in the fast state ({r['delta_fast_pct']:+.1f}%), {slow} in the slow state "
            f"({r['delta_slow_pct']:+.1f}%)")


def _decide(r: dict, metric: str, noise: float, level: float, unit: str, n_run: int) -> bool:
    """The verdict from the printed CI; True when it is settled (False: inconclusive, plan more)."""
    lo, hi, nz = r["ci_low_pct"], r["ci_high_pct"], noise * 100
    if not math.isfinite(lo):
        r["verdict"] = "inconclusive"
        r["note"] = f"too few {unit} ({n_run}) for a {level:.4g} CI"
        return False
    if lo > 0 or hi < 0:
        r["verdict"] = _direction(lo if lo > 0 else hi, metric)
        if -nz <= lo and hi <= nz:
            r["note"] = f"significant but within the +-{nz:g}% noise threshold"
        return True
    if -nz <= lo and hi <= nz:
        r["verdict"] = "no significant difference"
        return True
    r["verdict"] = "inconclusive"
    return False


def _plan(r: dict, sc, d, x, y, rd, res, n_run: int, alpha_planning: float, seed, n_resamples: int) -> None:
    """trials_needed of an inconclusive row (never fewer than were just run)."""
    effect, nz = r["delta_pct"], r.pop("_noise_pct")
    if not math.isfinite(effect) or abs(effect) < nz:
        effect = TINY_EFFECT_PCT if not (math.isfinite(effect) and effect < 0) else -TINY_EFFECT_PCT
        what = f"a {TINY_EFFECT_PCT:g}% effect (observed effect is tiny)"
    else:
        what = f"the observed {abs(effect):.2g}% effect"
    if rd is not None and rd["n_layouts"] > 1:
        var = res.get("se", math.nan) ** 2 * res.get("n", 0)
        k = _layouts.layouts_needed(var, math.log1p(effect / 100), alpha_planning)
        per = _designs.rounds_per_layout(rd)
        plan = k * per
        n_run = len(rd["d"])
        what += f" ({k:.0f} layout pairs of {per:.0f} rounds)" if math.isfinite(k) else ""
    else:
        plan = _power.rounds_for_effect(effect, d=d, x=x, y=y, alpha=alpha_planning, power=0.8,
                                        log_scale=sc.log, ref=sc.ref, seed=seed, n_resamples=n_resamples)
    r["trials_needed"] = float(max(plan, n_run + 1)) if math.isfinite(plan) else math.nan
    if not r["note"]:
        r["note"] = f"trials_needed for {what}"
