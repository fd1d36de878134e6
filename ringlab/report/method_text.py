"""How a compare() result was made, in one paragraph (for `ringlab compare` and summary.md)."""
from __future__ import annotations

import pandas as pd


def method_text(res: pd.DataFrame) -> str:
    """One paragraph saying how a compare() result was made: designs, tests, the real family
    sizes and CI levels (for `ringlab compare` and summary.md)."""
    metric = res.attrs.get("metric", "the metric")
    designs = sorted(set(res["design"].astype(str)))
    how = ("the geometric mean over layouts and rounds" if designs == ["layouts"] else
           "Hodges-Lehmann on the log scale" + ("; the geometric mean in layouts rows" if "layouts" in designs else ""))
    parts = [f"the effect is the estimated candidate/baseline ratio of {metric} ({how})"]
    if "paired" in designs:
        parts.append("paired rows: per-round ln(candidate/baseline), CI and p from the Wilcoxon "
                     "signed-rank test")
    if "unpaired" in designs:
        parts.append("unpaired rows (incomplete rounds): CI and p from Mann-Whitney")
    if "layouts" in designs:
        parts.append("layouts rows: the mean per-round log ratio from one REML fit of layout pair and round "
                     "(a random intercept per layout pair), CI and p from its t test on K - 1 df")
    if "states" in res.columns and (pd.to_numeric(res["states"], errors="coerce") == 2).any():
        parts.append("two machine states: each state's effect from the rounds wholly in it, reported beside "
                     "the headline, which is the same whatever states are found")
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
