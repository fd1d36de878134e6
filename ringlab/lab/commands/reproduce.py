"""Run the notebooks through papermill into results/<experiment>/<host>/<run-id>/."""
from __future__ import annotations

import sys
import time

import click

from ringlab.lab.commands import options
from ringlab.lab.reproduce import NOTEBOOKS, PROFILES, main_summary, reproduce


@click.command(cls=options.Command)
@click.option("--profile", default="quick", type=options.Choice(PROFILES), metavar="{" + ",".join(PROFILES) + "}",
              help="smoke (seconds), quick (minutes, default), full (a tight target: the committed runs)")
@click.option("--only", cls=options.Option, greedy=True, multiple=True, metavar="NAME [NAME ...]",
              help="run only these notebooks (" + ", ".join(NOTEBOOKS) + "; or their number)")
@click.option("--host", metavar="HOST", help="machine id for the results path (default: $RINGLAB_HOST or hostname)")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:
    t0 = time.monotonic()
    outcomes = reproduce(args.profile, args.only or None, args.host,
                         log=lambda m: print(m, file=sys.stderr, flush=True))
    text, code = main_summary(outcomes, time.monotonic() - t0)
    print(text)
    return code
