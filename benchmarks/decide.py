"""Machine time to a decisive verdict: designs planned from this machine's measured noise against
today's profile full.  Prints figures and ratios; asserts nothing.

In one run:

1. A level calibration (``ringlab calibrate``'s A/A of one kernel ptr_ring.h under two names,
   modes 0 and 1, ``--count`` ops a trial), timed; without a kernel header the cautious
   defaults of ``ringlab.stats.levels`` are used, and it says so.
2. For each question, a staged run of the product itself (``-p target_ci T -p budget S -p stop
   target``: the pilot planned from the calibration just measured, then stages planned from the
   run's own variance components, stopping at the target or at the budget): batch vs
   reorder, size 1000, mode 0 to +-0.25% and mode 1 to +-0.75%; the machine time, builds
   included, the half-width reached, why it stopped and the design it ended with.
3. Today's profile full on the same question (its counts, that mode and size only), and the
   ratio of the two half-widths at equal machine time (profile full's scaled by
   sqrt(its time / the staged run's time)).
4. Where a kernel header is found: that header against its ``kernel-reorder`` form (the 2021
   reorder change, derived as ``benchmarks/fidelity_headers.py`` does) to +-1% in mode 0,
   within twice the budget.
5. The A/A rate and power (for an effect of 1.43 target half-widths, which a 95% test finds
   80% of the time when the half-width holds) of each design the staged runs ended with,
   simulated from the calibration's point estimates with the t interval the verdict uses.

    ringlab bench decide [--budget 60] [--count 2000000] [--sims 2000]

Exit status 0 when every planned run reached its target within its budget, else 1.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
from scipy import stats as sst

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.rundir import read_env, read_raw  # noqa: E402
from ringlab.rundir.calibration import calibration_dir  # noqa: E402
from ringlab.run import run_experiment  # noqa: E402
from ringlab.sources import kernel_header  # noqa: E402
from ringlab.stats import compare  # noqa: E402
from ringlab.stats.levels import CAUTIOUS, LevelCalibration  # noqa: E402
from ringlab.studies import calibration as study  # noqa: E402
from ringlab.system.envinfo import host_id  # noqa: E402

QUESTIONS = (("0", 0.25), ("1", 0.75))
HEADER_TARGET = 1.0


def _quiet(_msg: str) -> None:
    pass


def calibrate(work: Path, count: int) -> tuple[dict[str, LevelCalibration], float, str]:
    """Per mode the level calibration measured now, its machine time, and where it came from."""
    if not kernel_header.header_trees():
        return {m: CAUTIOUS for m, _ in QUESTIONS}, 0.0, CAUTIOUS.source
    t0 = time.monotonic()
    _, doc = study.calibrate(calibration_dir(host_id(), work / "results"), {"count": str(count), "modes": "0,1"},
                             log=_quiet)
    took = time.monotonic() - t0
    out = {}
    for mode, _ in QUESTIONS:
        lv = (doc.get("levels") or {}).get(mode)
        out[mode] = LevelCalibration.from_dict(lv) if lv and "error" not in lv else CAUTIOUS
    return out, took, f"measured now ({doc.get('run_id')})"


def measure(work: Path, name: str, params: dict, baseline: str, mode: str) -> tuple[float, float, float, dict]:
    """(machine seconds builds included, half-width %, estimate %, env.json's ``stopping`` or {})
    of one ptr_ring run."""
    t0 = time.monotonic()
    res = run_experiment("ptr_ring", params, work / name, progress=False, log=_quiet)
    took = time.monotonic() - t0
    df = read_raw(res.raw_csv)
    stop = read_env(work / name).doc.get("stopping") or {}
    rows = compare(df, baseline)
    rows = rows[rows["mode"].astype(str) == mode] if "mode" in rows.columns else rows
    if not len(rows):
        return took, math.nan, math.nan, stop
    r = rows.iloc[0]
    return took, (r["ci_high_pct"] - r["ci_low_pct"]) / 2, r["delta_pct"], stop


def staged_params(base: dict, mode: str, target: float, budget: float) -> dict:
    """The staged run of one question: the product's own stop-when-answered design."""
    return base | {"modes": mode, "sizes": "1000", "target_ci": str(target), "budget": str(budget), "stop": "target"}


def ended_design(stop: dict) -> SimpleNamespace:
    """The design a staged run ended with, as the simulation reads a plan."""
    return SimpleNamespace(layouts=int(stop.get("layouts") or 2), rounds_per_layout=int(stop.get("rounds_per_layout") or 1),
                           iterations=int(stop.get("repeats") or 1))


def _stop_text(stop: dict) -> str:
    return (f"ended at {stop.get('layouts')} layouts x {stop.get('rounds_per_layout')} rounds in "
            f"{len(stop.get('stages') or [])} stages, stopped: {stop.get('stop_reason')}")


def simulate(cal: LevelCalibration, plan, target_pct: float, sims: int, seed: int = 1) -> tuple[float, float]:
    """A/A rate and power of the planned design under the calibration's point estimates."""
    rng = np.random.default_rng(seed)
    v = {k: (x if isinstance(x, float) and math.isfinite(x) else 0.0) for k, x in cal.variance.items()}
    per_pair_var = v["layout"] + v["process"] / plan.rounds_per_layout + v["iteration"] / (plan.rounds_per_layout * plan.iterations)
    effect = math.log1p(1.43 * target_pct / 100)
    q = sst.t.ppf(0.975, plan.layouts - 1)
    hits = {0.0: 0, effect: 0}
    for mu in hits:
        x = rng.normal(mu, math.sqrt(per_pair_var), (sims, plan.layouts))
        half = q * x.std(axis=1, ddof=1) / math.sqrt(plan.layouts)
        hits[mu] = int((np.abs(x.mean(axis=1)) > half).sum())
    return hits[0.0] / sims, hits[effect] / sims


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--budget", type=float, default=60.0, help="seconds each planned run may take, builds included")
    ap.add_argument("--count", type=int, default=2_000_000, help="ops per timed iteration")
    ap.add_argument("--sims", type=int, default=2000, help="simulated runs per design for the A/A rate and power")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


def run(args) -> int:
    with tempfile.TemporaryDirectory(prefix="ringlab-decide-") as d:
        work = Path(d)
        cals, cal_s, source = calibrate(work, args.count)
        print(f"calibration: {source}; {cal_s:.1f} s")
        # every run below plans from the calibration just measured, not the committed one
        with mock.patch.dict(os.environ, {"RINGLAB_RESULTS": str(work / "results")}):
            ok = questions(args, work, cals)
    return 0 if ok else 1


def questions(args, work: Path, cals: dict[str, LevelCalibration]) -> bool:
    """Each question's staged run and profile full; True when every staged run reached its target."""
    ok = True
    base = {"variants": "batch,reorder", "baseline": "batch", "counters": "false", "quiet": "warn"}
    for mode, target in QUESTIONS:
        cal = cals[mode]
        took, hw, est, stop = measure(work, f"staged-{mode}", staged_params(base, mode, target, args.budget),
                                      "batch", mode)
        reached = math.isfinite(hw) and hw <= target and took <= args.budget * 1.1
        ok &= reached
        aa, power = simulate(cal, ended_design(stop), target, args.sims)
        print(f"mode {mode} batch vs reorder to +-{target}% within {args.budget:g} s: staged run "
              f"{_stop_text(stop)}; measured {est:+.2f}% +-{hw:.2f}% in {took:.1f} s, builds included: "
              f"{'reached' if reached else 'NOT reached'}")
        print(f"  its design simulated: A/A rate {aa:.1%}, power {power:.1%} for "
              f"{1.43 * target:.2f}% ({args.sims} runs)")
        f_took, f_hw, f_est, _ = measure(work, f"full-{mode}", base | {"profile": "full", "modes": mode, "sizes": "1000"},
                                         "batch", mode)
        if math.isfinite(f_hw) and math.isfinite(hw) and hw > 0:
            eq = f_hw * math.sqrt(f_took / took)
            print(f"  profile full: {f_est:+.2f}% +-{f_hw:.2f}% in {f_took:.1f} s; at the staged run's machine time "
                  f"+-{eq:.2f}%: ratio {eq / hw:.2f}x the staged run's half-width")
    hdr = kernel_header.debian_header()
    if hdr is not None:
        from benchmarks.fidelity_headers import KERNEL_NAME, KERNEL_REORDER, write_derived
        hdr = kernel_header.resolve_header(hdr)
        derived = write_derived(hdr, KERNEL_REORDER, work / "derived")
        params = staged_params({"counters": "false", "variants": f"{KERNEL_NAME},{KERNEL_REORDER}",
                                "baseline": KERNEL_NAME, "quiet": "warn",
                                "kernel_headers": f"{KERNEL_NAME}={hdr},{KERNEL_REORDER}={derived}"},
                               "0", HEADER_TARGET, 2 * args.budget)
        took, hw, est, stop = measure(work, "header", params, KERNEL_NAME, "0")
        reached = math.isfinite(hw) and hw <= HEADER_TARGET and took <= 2 * args.budget * 1.1
        ok &= reached
        print(f"mode 0 {hdr} vs its {KERNEL_REORDER} form to +-{HEADER_TARGET}% within {2 * args.budget:g} s: "
              f"staged run {_stop_text(stop)}; measured {est:+.2f}% +-{hw:.2f}% in {took:.1f} s: "
              f"{'reached' if reached else 'NOT reached'}")
    else:
        print("kernel header vs kernel-reorder: not measured: no kernel ptr_ring.h found (`ringlab env --headers`)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
