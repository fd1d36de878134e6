"""One bisection step: a normal run with the arms ``good``, ``bad`` and ``candidate`` (each a
``git:TREE@SHA`` kernel header, measured in the same rounds), and its classification.

Classification of a candidate (``s`` = the regression's direction, +1 when bad is slower for a
lower-is-better metric; G = candidate vs good, B = candidate vs bad, each with the Holm CI of
``ringlab.stats.compare``, Holm within the run):

* ``looks_bad``:  G's CI excludes 0 on the regression's side (the candidate carries the change);
* ``looks_good``: B's CI excludes 0 on the other side (the candidate lacks it);
* **good** = looks_good and not looks_bad, with G's estimate below half of the endpoints' effect
  (bad against good, in the step's own rounds where it calls it, else step 0's:
  ``endpoint_effect``); **bad** = looks_bad and not looks_good, with G's estimate at least half of
  it (a layout moving a candidate by a point or two is not a regression of ten);
  **unclear** = neither (too few rounds to tell) or both (the candidate sits between the
  endpoints: part of the change).

The endpoint check (step 0) is the same run with two arms: bad against good.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from ringlab.build.cflags import BuildError
from ringlab import rundir
from ringlab.errors import RunnerError
from ringlab.run import run_experiment
from ringlab.sources import kernel_header as kh
from ringlab.stats import StatsError, compare
from ringlab.stats.contract import verdict_ci
from ringlab.stats.decide import called, within

ARMS = ("good", "bad", "candidate")
BUILD_ERROR_FILE = "build_error.txt"


class StepBuildError(RunnerError):
    """A revision's header does not compile; the message is the compiler's error."""


def header_spec(tree: Path, sha: str) -> str:
    return f"git:{tree}@{sha}"


def step_params(base: dict[str, str], tree: Path, arms: dict[str, str], seed: int) -> dict[str, str]:
    """The run parameters of one step: the user's pass-through parameters, the arms as
    ``kernel_headers``/``variants`` and the step's seed."""
    p = dict(base)
    p["variants"] = ",".join(arms)
    p["kernel_headers"] = ",".join(f"{name}={header_spec(tree, sha)}" for name, sha in arms.items())
    p["seed"] = str(seed)
    return p


def check_builds(tree: Path, sha: str) -> None:
    """StepBuildError with the compiler's message when the header at ``sha`` does not compile."""
    try:
        kh.check_compiles(kh.resolve_header(header_spec(tree, sha)))
    except kh.KernelHeaderError as e:
        raise StepBuildError(str(e)) from None


def run_step(out_dir: Path, experiment: str, params: dict[str, str], resume: bool,
             log: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run (or resume) one step's run folder and return its raw.csv.  StepBuildError when a
    header does not build (the compiler's message goes to the step's folder)."""
    resume = resume and rundir.RunOutput(out_dir).env_json.is_file()
    try:
        res = run_experiment(experiment, params, out_dir, resume=resume, progress=False, log=log)
    except BuildError as e:
        raise StepBuildError(str(e)) from None
    return rundir.RunOutput(res.out_dir).read_raw()


def record_build_error(out_dir: Path, message: str) -> None:
    rundir.write_text(out_dir, BUILD_ERROR_FILE, message.rstrip("\n") + "\n")


def ci_excludes_zero(row: dict, side: int) -> bool:
    """The CI the verdict rests on (Holm's, ``verdict_ci``) excludes 0 on ``side`` (+1: above, -1: below)."""
    lo, hi = verdict_ci(row)
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    return lo > 0 if side > 0 else hi < 0


def effect(df: pd.DataFrame, baseline: str, candidate: str, metric: str, group: str | None,
           alpha: float = 0.05) -> dict[str, Any]:
    """``candidate`` vs ``baseline`` in configuration ``group`` (None: the only or the first one):
    the compare() row's numbers at ``alpha`` (the look's level, ``engine``), JSON-ready."""
    sub = df[df["variant"].astype(str).isin([baseline, candidate])]
    try:
        res = compare(sub, baseline, metric=metric, alpha=alpha)
    except StatsError as e:
        return {"error": str(e)}
    res = res[res["candidate"] == candidate]
    if group is not None and (res["group"] == group).any():
        res = res[res["group"] == group]
    if not len(res):
        return {"error": f"no comparison of {candidate} against {baseline}"}
    r = res.iloc[0]
    out = {k: r[k] for k in ("group", "delta_pct", "ci_low_pct", "ci_high_pct", "p_holm", "verdict",
                             "design", "n_pairs", "ci_level", "layouts", "holm_ci_low_pct", "holm_ci_high_pct",
                             "holm_ci_level")}
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else
                (v.item() if hasattr(v, "item") else v)) for k, v in out.items()}


def share_of_endpoint(vs_good: dict, endpoint_pct) -> float | None:
    """The candidate's effect against good as a share of bad's (None when either is unknown)."""
    d = vs_good.get("delta_pct")
    if d is None or endpoint_pct is None or not math.isfinite(d) or not endpoint_pct:
        return None
    return d / endpoint_pct


def endpoint_effect(in_step: dict, confirmed: dict, direction: int) -> float | None:
    """The endpoints' effect a step's share is taken of: bad against good in the step's own rounds
    (``in_step``: every step measures both endpoints beside the candidate) where that step calls it
    in the regression's direction, else the endpoint check's (``confirmed``, step 0).  Step 0's
    estimate alone can be far off when its rounds were noisy, and halving a wrong effect mislabels
    the commit that carries all of it."""
    d = in_step.get("delta_pct") if "error" not in in_step else None
    if d is not None and math.isfinite(d) and ci_excludes_zero(in_step, direction):
        return float(d)
    return confirmed.get("delta_pct")


def classify(vs_good: dict, vs_bad: dict, direction: int, endpoint_pct: float | None = None) -> str:
    """good | bad | unclear (module docstring).  With ``endpoint_pct`` (bad against good), a
    one-sided call also needs G's estimate on its side of the midpoint: a small significant
    change (a layout moving by a point or two) is not called bad for a regression of ten."""
    share = share_of_endpoint(vs_good, endpoint_pct)
    looks_bad = ci_excludes_zero(vs_good, direction)
    looks_good = ci_excludes_zero(vs_bad, -direction)
    if looks_good and not looks_bad and (share is None or share < 0.5):
        return "good"
    if looks_bad and not looks_good and (share is None or share >= 0.5):
        return "bad"
    return "unclear"


def endpoints_decided(rows: list[dict], threshold_pct: float) -> bool:
    """Bad against good is decided (``ringlab.stats.decide``'s rule): a configuration is called,
    by at least ``threshold_pct`` (a regression to bisect), or every configuration's CI lies within
    +-``threshold_pct`` (no change that large: nothing to bisect).  Rows without a CI (an
    error, too few rounds) leave it undecided."""
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return False
    for r in ok:
        d = r.get("delta_pct")
        if called(r) and d is not None and math.isfinite(d) and abs(d) >= threshold_pct:
            return True
    return all(within(r, threshold_pct) for r in ok)


def groups_regressed(df: pd.DataFrame, metric: str, alpha: float = 0.05) -> list[dict]:
    """Every configuration's bad-vs-good row (the endpoint check) at ``alpha``."""
    try:
        res = compare(df, "good", metric=metric, alpha=alpha)
    except StatsError:
        return []
    res = res[res["candidate"] == "bad"]
    return [effect(df, "good", "bad", metric, g, alpha) for g in res["group"]]
