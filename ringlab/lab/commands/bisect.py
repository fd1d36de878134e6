"""Find the commit of a kernel tree that changed what an experiment measures.

    ringlab bisect ptr_ring -p tree ~/linux -p good v6.1 -p bad v6.2 --out scratch/bisect/x
    ringlab bisect ptr_ring -p tree ~/linux -p good v6.1 -p bad v6.2 -p profile quick -p layouts 4
    ringlab bisect ptr_ring --out scratch/bisect/x --resume

``-p metric``, ``-p threshold PCT`` (default 2) and ``-p step_budget ROUNDS`` are the bisect's own;
every other -p goes to each step's run (profile, layouts, modes, seed ...).  docs/bisect.md.
"""
from __future__ import annotations

import math
import re
import shlex
import sys

import click
from pathlib import Path

from ringlab.errors import ParamError
from ringlab.names import check_name
from ringlab.rundir.outputs import check_run_out
from ringlab.lab.bisect import Config, start
from ringlab.lab.bisect.report import write_outputs
from ringlab.lab.commands import options


OWN = ("tree", "good", "bad", "metric", "threshold", "step_budget")


@click.command(cls=options.Command)
@click.argument("experiment", cls=options.Argument, metavar="experiment", help="experiment name (ptr_ring)")
@options.parameter("tree, good, bad (required), metric, threshold (percent, default 2), step_budget "
                   "(rounds per step); any other parameter goes to the steps' runs")
@click.option("--out", metavar="DIR", help="bisect folder (default scratch/bisect/EXPERIMENT-GOOD-BAD)")
@click.option("--resume", is_flag=True, help="continue an interrupted bisect in --out DIR")
def command(**params) -> int:
    return run(options.Args(params))


def _number(params: dict, name: str, kind, default):
    if name not in params:
        return default
    try:
        v = kind(params[name])
    except ValueError:
        v = None
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or v < 0:
        raise ParamError(f"parameter '{name}': {params[name]!r}; allowed: a number >= 0")
    return v


def _rev_label(rev: str) -> str:
    """A revision as part of a name: characters outside the name rule as '_', at most 24."""
    return re.sub(r"\.{2,}", "_", re.sub(r"[^A-Za-z0-9._-]", "_", rev))[:24]


def bisect_label(experiment: str, good: str, bad: str) -> str:
    """The default bisect folder's name, EXPERIMENT-GOOD-BAD, made a name (ringlab.names): a
    revision such as ``origin/master`` or ``HEAD~3`` gives ``origin_master``, ``HEAD_3``."""
    return check_name(f"{experiment}-{_rev_label(good)}-{_rev_label(bad)}", "bisect label (EXPERIMENT-GOOD-BAD)")


def config(args):
    params: dict[str, str] = {}
    for name, value in args.parameter:
        if name in params:
            raise ParamError(f"parameter '{name}': given twice; allowed: each parameter once")
        params[name] = value
    missing = [n for n in ("tree", "good", "bad") if not params.get(n)]
    if missing:
        raise ParamError(f"parameter '{missing[0]}': missing; allowed: -p tree DIR -p good REV -p bad REV")
    out = Path(args.out) if args.out else Path("scratch") / "bisect" / bisect_label(
        args.experiment, params["good"], params["bad"])
    cmd = ["ringlab", "bisect", args.experiment]
    for name, value in args.parameter:
        cmd += ["-p", name, value]
    check_run_out(out, "--out")
    cmd += ["--out", str(out)]
    return Config(experiment=args.experiment, tree=params["tree"], good=params["good"], bad=params["bad"],
                  out=out, metric=params.get("metric", "ns_per_op"),
                  threshold_pct=_number(params, "threshold", float, 2.0),
                  step_budget=_number(params, "step_budget", int, None),
                  params={k: v for k, v in params.items() if k not in OWN}, command=shlex.join(cmd))


def run(args) -> int:
    cfg = config(args)
    b = start(cfg, resume=args.resume)
    b.log = lambda msg: print(f"ringlab bisect: {msg}", file=sys.stderr)
    state = b.run()
    write_outputs(cfg.out, state)
    res = state["result"]
    print(res["message"])
    eff = res.get("effect")
    if eff and eff.get("delta_pct") is not None:
        print(f"  effect against good: {eff['delta_pct']:+.1f}% [{eff['ci_low_pct']:+.1f}, "
              f"{eff['ci_high_pct']:+.1f}] ({eff.get('source')})")
    print(f"  {state['skipped_commits']} of {state['commits_in_range']} commits skipped (they do not change "
          f"{', '.join(state['paths'])})")
    print(f"  report: {cfg.out / 'summary.md'}  (ringlab mail {cfg.out})")
    return 0
