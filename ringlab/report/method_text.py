"""How a compare() result was made, in one paragraph (for `ringlab compare` and summary.md)."""
from __future__ import annotations

import pandas as pd


def method_text(res: pd.DataFrame) -> str:
    """One paragraph saying how a compare() result was made: designs, tests, the real family
    sizes and CI levels (for `ringlab compare` and summary.md)."""
    metric = res.attrs.get("metric", "the metric")
    designs = sorted(set(res["design"].astype(str)))
    parts = [f"the effect is the estimated candidate/baseline ratio of {metric} (Hodges-Lehmann on the log scale)"]
    if "paired" in designs:
        parts.append("paired rows: per-round ln(candidate/baseline), CI and p from the Wilcoxon "
                     "signed-rank test")
    if "unpaired" in designs:
        parts.append("unpaired rows (incomplete rounds): CI and p from Mann-Whitney")
    if "layouts" in designs:
        parts.append("layouts rows: per layout pair the Hodges-Lehmann estimate of the per-round log "
                     "ratios, CI and p from a t test across the layout pairs (K - 1 df)")
    if "states" in res.columns and (pd.to_numeric(res["states"], errors="coerce") == 2).any():
        st = pd.to_numeric(res["states"], errors="coerce") == 2
        lay = st & (res["design"].astype(str) == "layouts")
        if lay.any():
            parts.append("two machine states in layouts rows: both trials' states of each round a covariate, "
                         "CIs from the jackknife across layout pairs")
        if (st & ~lay).any():
            parts.append("two machine states: rounds that straddle a switch left out of the per-state "
                         "effects")
        parts.append("the headline weights the states equally")
    if "exact" in designs:
        parts.append("exact rows: deterministic metric, no CI or p")
    m = int(pd.to_numeric(res["family_size"], errors="coerce").max()) if len(res) else 0
    holm = list((res["holm_ci_level"] if "holm_ci_level" in res.columns else res["ci_level"]).dropna())
    if m > 0:
        text = (f"p Holm-corrected over the run ({m} comparison(s): every candidate in every configuration), and "
                "each verdict taken from the row's CI at its Holm step's level")
        if holm:
            lo, hi = min(holm), max(holm)
            text += f" ({lo * 100:.4g}%)" if lo == hi else f" ({lo * 100:.4g}-{hi * 100:.4g}%)"
        lv = res["ci_level"].dropna() if "ci_level" in res.columns else []
        if len(lv):
            text += f"; every printed CI is at {lv.min() * 100:.4g}%" if lv.min() == lv.max() else ""
        parts.append(text)
    return "; ".join(parts) + "."
