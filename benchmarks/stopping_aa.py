"""A/A rate and power of the staged design, simulated through the run's own stopping code.

Usage: ringlab bench stopping [--runs 2000] [--power-runs 200] [--host HOST] [--mode 0]
                              [--target 0.5] [--budget 60] [--jobs N]
       (or python benchmarks/stopping_aa.py ...)

Each simulated run is a staged run of ``ringlab.run.stopping`` (opening, review after every
stage, its re-planning and its stop on "target" or on "decided") over draws from a host's level
calibration taken as the truth; the call is ``compare()``'s verdict of the data the run stopped
with.  Method: ringlab.simulate.stoppingsim.

Two designs, side by side:

* ``calibrated, stop decided``: planned from the host's calibration; stops when every row is at
  its target half-width *or decided* (significant at 5% / the policy's max_stages, or no change larger than
  the target): the stop that looks at significance;
* ``first run, stop target``: planned from the cautious defaults, as a first run on a host
  without a calibration is (profile quick's stop: the half-width only).

Per design it prints the A/A rate over ``--runs`` runs with its Clopper-Pearson interval, the
binomial 95% interval that a design with an exact 5% rate falls in over that many runs, whether
the rate lies in it, the stop reasons, the mean stages and machine time, and the power for an
effect of 1.43 target half-widths (what a 95% test finds 80% of the time at the target) over ``--power-runs`` runs.  Exit status 1 when an A/A rate
lies above that interval.
"""
from __future__ import annotations

import collections
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ringlab.rundir.calibration import level_calibration  # noqa: E402
from ringlab.simulate import stoppingsim  # noqa: E402
from ringlab.stats.levels import CAUTIOUS  # noqa: E402
from ringlab.system.envinfo import host_id  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--runs", type=int, default=2000, help="simulated A/A runs per design (default 2000)")
@click.option("--power-runs", type=int, default=200,
              help="simulated runs per design with an effect of 1.43 target half-widths (default 200; 0: skip)")
@click.option("--host", default=None, help="whose calibration is the truth (default: this host's)")
@click.option("--mode", default="0", help="the calibration's mode (default 0)")
@click.option("--target", type=float, default=0.5, help="target half-width, percent (default 0.5)")
@click.option("--budget", type=float, default=60.0, help="budget of each run, seconds (default 60)")
@click.option("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: the CPUs)")
@click.option("--seed", type=int, default=0, help="first seed (default 0)")
def command(**params) -> int:
    return run(SimpleNamespace(**params))


def main(argv=None) -> int:
    return options.run_alone(command, argv)


def _many(pool, jobs: int, truth, planner, target, budget, runs, stop, effect, seed) -> list:
    """``runs`` simulated runs, in chunks spread over the pool's workers."""
    per = math.ceil(runs / max(1, jobs * 4))
    futs = [pool.submit(stoppingsim.simulate_runs, truth, planner, target, budget, min(per, runs - i), stop,
                        effect, seed + i) for i in range(0, runs, per)]
    return [r for f in futs for r in f.result()]


def run(a) -> int:
    host = a.host or host_id()
    truth = level_calibration(host, a.mode)
    if truth is CAUTIOUS:
        print(f"host {host}: no level calibration of mode {a.mode} (`ringlab calibrate`); the truth is "
              f"the cautious defaults")
    v = truth.variance
    print(f"truth: host {host} mode {a.mode} level calibration ({truth.source}): SD layout "
          f"{math.sqrt(v['layout']) * 100:.2f}%, process {math.sqrt(v['process']) * 100:.2f}%, iteration "
          f"{math.sqrt(v['iteration']) * 100:.2f}% of a pair's log ratio; target +-{a.target:g}%, budget "
          f"{a.budget:g} s")
    lo, hi = stoppingsim.aa_interval(a.runs)
    ok = True
    designs = (("calibrated, stop decided", truth, "decided"), ("first run, stop target", CAUTIOUS, "target"))
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for name, planner, stop in designs:
            t0 = time.monotonic()
            aa = _many(pool, a.jobs, truth, planner, a.target, a.budget, a.runs, stop, 0.0, a.seed)
            calls = sum(r.called for r in aa)
            rate = calls / len(aa)
            clo, chi = stoppingsim.rate_interval(calls, len(aa))
            inside = lo <= rate <= hi
            ok &= rate <= hi
            reasons = collections.Counter(r.stop_reason for r in aa)
            print(f"{name}: A/A rate {rate:.2%} ({calls} of {len(aa)}; 95% CI [{clo:.2%}, {chi:.2%}]); an exact "
                  f"5% design lands in [{lo:.2%}, {hi:.2%}]: {'inside' if inside else 'OUTSIDE'}")
            print(f"  stopped: " + ", ".join(f"{k} {n}" for k, n in reasons.most_common())
                  + f"; mean {sum(r.stages for r in aa) / len(aa):.2f} stages, "
                  f"{sum(r.spent_s for r in aa) / len(aa):.1f} s machine time, half-width "
                  f"{sum(r.half_width_pct for r in aa) / len(aa):.2f}% ({time.monotonic() - t0:.0f} s to simulate)")
            if a.power_runs > 0:
                effect = round(1.43 * a.target, 3)
                pw = _many(pool, a.jobs, truth, planner, a.target, a.budget, a.power_runs, stop, effect,
                           a.seed + a.runs)
                right = sum(r.verdict == "slower" for r in pw)
                print(f"  power for a {effect:g}% slower candidate: {right / len(pw):.1%} ({right} of {len(pw)}); "
                      f"wrong sign {sum(r.verdict == 'faster' for r in pw)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
