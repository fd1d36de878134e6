"""Run an experiment's trials into DIR/raw.csv (fresh process per trial, interleaved, resumable).

    ringlab run ptr_ring -p variants batch,reorder -p profile smoke
    ringlab run ptr_ring -p cflags -O3 -p cpus=1:2
    ringlab run ptr_ring --out scratch/x --resume
"""
from __future__ import annotations

import sys

import click

from ringlab import catalog
from ringlab.errors import ParamError
from ringlab.experiments.base import get
from ringlab.lab.commands import options
from ringlab.run import run_experiment
from ringlab.rundir.outputs import check_run_out


@click.command(cls=options.Command)
@click.argument("experiment", cls=options.Argument, metavar="experiment",
                help=f"experiment name ({', '.join(catalog.EXPERIMENT_NAMES)})")
@options.parameter("set a parameter, as papermill's -p (same names as the notebook's parameters "
                   "cell); also -p NAME=VALUE; VALUE may begin with '-' (-p cflags -O3)")
@click.option("--out", metavar="DIR", help="run folder (default scratch/EXPERIMENT/HOST/RUN-ID/, or under "
              "$RINGLAB_SCRATCH; never results/)")
@click.option("--resume", is_flag=True, help="continue an interrupted run in --out DIR")
@click.option("--no-build", is_flag=True, help="use the binaries already in build/bin")
@click.option("--progress/--no-progress", default=None,
              help="force the progress bar (default: only in a terminal)")
@click.option("--list-params", is_flag=True, help="list the experiment's parameters and exit")
def command(**params) -> int:
    return run(options.Args(params))


def _list_params(name: str) -> int:
    cls = get(name)
    print(f"{cls.name}: {cls.description}")
    for n, p in cls.all_params().items():
        shown = p.default_text or ("unset" if p.default is None else p.format(p.default))
        print(f"  {n:15s} {shown:24s} {p.help}  [{p.allowed()}]")
    for prof, vals in cls.profiles.items():
        print(f"  profile {prof}: " + ", ".join(f"{k}={v}" for k, v in vals.items()))
    return 0


def run(args) -> int:
    if args.list_params:
        return _list_params(args.experiment)
    params: dict[str, str] = {}
    for name, value in args.parameter:
        if name in params:
            raise ParamError(f"parameter '{name}' given twice; allowed: each parameter once")
        params[name] = value
    if args.out:   # never inside another run folder, never inside results/ (only `ringlab reproduce`)
        check_run_out(args.out, "--out")
    res = run_experiment(args.experiment, params, args.out, resume=args.resume, progress=args.progress,
                         build=not args.no_build, argv=list(sys.argv))
    print(f"run {res.run_id}: {res}")
    print(f"  raw data:   {res.raw_csv}")
    print(f"  provenance: {res.env_json}  (ringlab provenance {res.out_dir})")
    t = res.trials
    print(f"  status:     {res.status} ({t.get('ok', 0)} ok, {t.get('failed', 0)} failed, "
          f"{t.get('timeout', 0)} timeout)" + (f": {res.status_reason}" if res.status_reason else ""))
    failed = sum(v for k, v in res.counts.items() if k in ("crash", "timeout", "error"))
    if failed:
        print(f"  {failed} trial(s) failed; see status/stderr_tail in raw.csv")
    return res.exit_code
