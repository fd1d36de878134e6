"""The one rule that picks a run's baseline: summary.md, ``ringlab summarize``, ``ringlab mail``
and ``ringlab.open(...).baseline`` all name the same one for the same run (``RunOutput.baseline``).

In order, the first that applies:

1. the baseline asked for (``--baseline``, ``baseline=``), which must be a variant of the run;
2. env.json's ``report.baseline``: the baseline the run's notebook asked its report for;
3. env.json's ``baseline``: the one a ``-p target_ci`` run stopped on;
4. the run's ``baseline`` parameter (env.json ``parameters.baseline``);
5. the first of the run's ``variants`` parameter (env.json ``parameters.variants``) that raw.csv has;
6. the first variant in raw.csv.

Names in 2-5 that are not a variant of raw.csv are passed over.  A run with fewer than two
variants has no baseline (None): there is nothing to compare.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from ringlab.errors import ParamError


def run_variants(df: pd.DataFrame) -> list[str]:
    """raw.csv's variants in order of first appearance."""
    return list(dict.fromkeys(df["variant"].dropna().astype(str))) if "variant" in df.columns else []


def _listed(value: Any) -> list[str]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def pick_baseline(df: pd.DataFrame, env: Mapping[str, Any], baseline: str | None = None,
                  option: str = "parameter 'baseline'", error: type[Exception] = ParamError) -> str | None:
    """The run's baseline by the rule of this module; ``error`` naming ``option`` (the input the
    baseline came from) when ``baseline`` is given and is not a variant of the run."""
    variants = run_variants(df)
    if baseline:
        if str(baseline) not in variants:
            raise error(f"{option}: {str(baseline)!r} is not a variant of this run; "
                        f"allowed: {', '.join(sorted(variants)) or '(none: raw.csv has no variant)'}")
        return str(baseline)
    if len(variants) < 2:
        return None
    asked = env.get("report") if isinstance(env.get("report"), Mapping) else {}
    params = env.get("parameters") if isinstance(env.get("parameters"), Mapping) else {}
    for name in [asked.get("baseline"), env.get("baseline"), params.get("baseline"), *_listed(params.get("variants"))]:
        if isinstance(name, str) and name in variants:
            return name
    return variants[0]


__all__ = ["pick_baseline", "run_variants"]
