"""A/A rate, coverage and next-run coverage of the staged design, simulated through the run's own stopping code.

Usage: ringlab bench stopping [--runs 2000] [--scenarios 1,2,...] [--planner calibrated|cautious]
                              [--host HOST] [--mode 0] [--target 0.5] [--budget 60] [--jobs N] [--seed 0]
       ringlab bench stopping --gaussian [--runs 2000] [--power-runs 200] ...   (the two Gaussian designs)
       (or python benchmarks/stopping_aa.py ...)

Each simulated run is a staged run of ``ringlab.run.stopping`` (``opening``, ``review`` after every
stage with compare() at every look, its re-planning and its stop), with only the measuring replaced
by draws (``ringlab.simulate.noise.RunNoise``): a layout level per layout pair, rounds (processes),
timed iterations (loops), and, per scenario, two machine states with a state-dependent effect,
Student t (4 df) tails at the round level, a run-level drift of the effect, or a Holm family of 3
candidates x 2 modes.  The size of every level is read from the committed runs' own fitted
components (``ringlab.simulate.fitted``), and each figure is printed with where it came from.
Method: ringlab.simulate.stoppingsim (``simulate_real_run``, ``scenario_summary``).

Scenarios: 1 no drift; 2 drift 0.5 point; 3 drift 1 point; 4 two states with a state-dependent
effect; 5 t4 noise; 6 3 candidates x 2 modes.  The planner is the truth's own calibration
(``--planner calibrated``) or the cautious defaults of a host without one (``cautious``).

Per scenario it prints the A/A rate over all looks with its binomial 95% interval around 5% and
whether it is inside (where a run's effect is not 0 -- drift, a mix of states -- the rate of calls
of the sign opposite to the run's own effect, which must not lie above it), the 95% CI's coverage
of the run's own effect (the true effect, its state mix and the run's drift), the next-run
interval's coverage of the next simulated run's estimate of the same comparison (the between-run variance from the runs before, as
``ringlab.stats.replication.between_of_runs`` measures it), each interval's mean width over the
same interval at the true variances, the stops and the seconds per simulated run.  Exit status 1
when a criterion misses (A/A outside that interval or a false-call rate above it, CI coverage < 94%, next-run coverage outside
93-98%, a width ratio > 1.5), naming which.

``--gaussian``: the two designs of a Gaussian noise without states (the host calibration's
components as the truth): ``calibrated, stop decided`` and ``first run, stop target``, with their
A/A rates, stops and power for an effect of 1.43 target half-widths over ``--power-runs`` runs;
exit status 1 when an A/A rate lies above its interval.
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

from ringlab.catalog import Verdict  # noqa: E402
from ringlab.rundir.calibration import level_calibration  # noqa: E402
from ringlab.simulate import stoppingsim  # noqa: E402
from ringlab.stats.calibration import CAUTIOUS  # noqa: E402
from ringlab.system.envinfo import host_id  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--runs", type=int, default=2000, help="simulated runs per scenario or design (default 2000)")
@click.option("--scenarios", default="1,2,3,4,5,6", help="the scenarios, by number (default 1,2,3,4,5,6)")
@click.option("--planner", type=click.Choice(["calibrated", "cautious"]), default="calibrated",
              help="what the runs plan from: the committed calibration or the cautious defaults (default calibrated)")
@click.option("--results", default=None, help="the committed results folder the noise sizes are read from "
              "(default: the checkout's results/)")
@click.option("--gaussian", is_flag=True, default=False,
              help="the two Gaussian designs (calibrated / first run) instead of the scenarios")
@click.option("--power-runs", type=int, default=200,
              help="simulated runs per design with an effect of 1.43 target half-widths (default 200; 0: skip)")
@click.option("--host", default=None, help="whose calibration gives the truth: the scenarios' process, iteration, state "
              "and cost figures (default: this host's, else the first complete committed one); "
              "--gaussian: all of it (default: this host's)")
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
    if not getattr(a, "gaussian", False):
        return run_scenarios(a)
    return run_gaussian(a)


def run_scenarios(a) -> int:
    from ringlab.simulate import fitted
    results = Path(a.results) if a.results else ROOT / "results"
    here = a.host or host_id()
    levels = fitted.committed_levels(results, here, a.mode)
    print(f"noise sizes from the committed runs (host {levels.host}, mode {levels.mode}):")
    for line in levels.lines():
        print(f"  {line}")
    if levels.missing():
        print(f"cannot simulate: no committed figure for {', '.join(levels.missing())}")
        return 2
    if a.planner == "cautious":
        planner = CAUTIOUS
    else:
        planner = level_calibration(levels.host, levels.mode, results)
    print(f"planner: {'the cautious defaults (a host without a calibration)' if a.planner == 'cautious' else f'the committed calibration of {levels.host} (a calibrated host)'}; "
          f"target +-{a.target:g}%, budget {a.budget:g} s, stop decided; {a.runs} runs per scenario, "
          f"{max(1, a.jobs)} worker(s)")
    api = stoppingsim.next_run_api()
    if api is None:
        print("next-run coverage: not available yet (ringlab.stats.replication has no between_of_runs / "
              "next_run_interval); its lines are left out")
    wanted = [int(x) for x in str(a.scenarios).split(",") if x.strip()]
    all_sc = stoppingsim.scenarios(levels)
    ok = True
    t_all = time.monotonic()
    missed, cpu_all, runs_all = [], 0.0, 0
    with ProcessPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        for i in wanted:
            sc = all_sc[i - 1]
            t0 = time.monotonic()
            per = math.ceil(a.runs / max(1, a.jobs * 4))
            futs = [pool.submit(stoppingsim.timed_real_runs, levels, sc, planner, a.target, a.budget,
                                min(per, a.runs - j), "decided", a.seed + j) for j in range(0, a.runs, per)]
            got = [f.result() for f in futs]
            runs = [r for rs, _ in got for r in rs]
            cpu = sum(c for _, c in got)
            cpu_all, runs_all = cpu_all + cpu, runs_all + len(runs)
            s = stoppingsim.scenario_summary(runs, sc)
            lo, hi = s["aa_interval"]
            inside = lo <= s["aa_rate"] <= hi
            print(f"{i}. {sc.name}: {len(runs[0].rows) if runs else 0} row(s) a run")
            what = ("A/A over all looks" if s["aa_only"] else
                    "false calls (sign opposite to the run's own effect) over all looks")
            verdict = ("inside" if inside else "OUTSIDE") if s["aa_only"] else \
                ("not above" if s["aa_rate"] <= hi else "ABOVE")
            print(f"  {what}: {s['aa_rate']:.2%} ({s['aa']} of {s['runs']}; at a stage review's strict level "
                  f"{s['aa_looks']}, in the final 5% verdict {s['aa_final']}); an exact 5% lands in "
                  f"[{lo:.2%}, {hi:.2%}]: {verdict}")
            print(f"  95% CI coverage of the run's own effect: {s['ci_coverage']:.1%} of {s['ci_rows']} rows; "
                  f"mean width {s['ci_width_ratio']:.2f}x the interval at the true variances")
            if s["next_coverage"] is not None:
                print(f"  next-run coverage: {s['next_coverage']:.1%} of {s['next_pairs']} (run, next run) pairs; "
                      f"mean width {s['next_width_ratio']:.2f}x the interval at the true variances")
            elif api is not None:
                print("  next-run coverage: no pair had an interval")
            print(f"  stopped: " + ", ".join(f"{k} {n}" for k, n in sorted(s["stops"].items(), key=lambda x: -x[1]))
                  + f"; mean {s['looks']:.2f} looks; {cpu / max(1, len(runs)):.2f} CPU s per simulated run, "
                  f"{time.monotonic() - t0:.0f} s wall")
            if s["failed"]:
                ok = False
                missed.append(f"{i} ({'; '.join(s['failed'])})")
                print(f"  MISSED: {'; '.join(s['failed'])}")
    print(f"total {time.monotonic() - t_all:.0f} s wall, {cpu_all:.0f} CPU s ({cpu_all / max(1, runs_all):.3f} a "
          f"simulated run)")
    print("criteria missed: " + ", ".join(missed) if missed else "criteria met in every scenario")
    return 0 if ok else 1


def run_gaussian(a) -> int:
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
                right = sum(r.verdict == Verdict.SLOWER for r in pw)
                print(f"  power for a {effect:g}% slower candidate: {right / len(pw):.1%} ({right} of {len(pw)}); "
                      f"wrong sign {sum(r.verdict == Verdict.FASTER for r in pw)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
