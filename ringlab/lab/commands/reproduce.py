"""Run the notebooks through papermill into results/<experiment>/<host>/<run-id>/."""
from __future__ import annotations

import sys

from ringlab.lab.commands.dashvalues import allow_dash_values
from ringlab.lab.reproduce import NOTEBOOKS, PROFILES, main_summary, reproduce


def add_arguments(p):
    p.add_argument("--profile", default="quick", choices=PROFILES,
                   help="smoke (seconds), quick (minutes, default), full (what we commit)")
    p.add_argument("--only", nargs="+", metavar="NAME",
                   help="run only these notebooks (" + ", ".join(NOTEBOOKS) + "; or their number)")
    p.add_argument("--host", help="machine id for the results path (default: $RINGLAB_HOST or hostname)")
    allow_dash_values(p)   # --host -lab2


def run(args) -> int:
    outcomes = reproduce(args.profile, args.only, args.host,
                         log=lambda m: print(m, file=sys.stderr, flush=True))
    text, code = main_summary(outcomes)
    print(text)
    return code
