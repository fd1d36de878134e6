"""Recompute every number the run folder prints from its raw.csv and env.json, and name each that disagrees.

    ringlab verify DIR [--json]

Exit 0 when every printed number recomputes, 1 when one does not (each named: file, row, field,
printed, recomputed), 2 when DIR has no raw.csv to recompute from.
"""
from __future__ import annotations

import json

import click

from ringlab.fmt import printable
from ringlab.lab.commands import options
from ringlab.report import verify as _verify


@click.command(cls=options.Command)
@click.argument("run_dir", cls=options.Argument, metavar="DIR",
                help="a run folder (raw.csv, env.json and what was rendered from them)")
@click.option("--json", is_flag=True, help="print the result as JSON")
def command(**params) -> int:
    return run(options.Args(params))


def run(args) -> int:
    res = _verify.verify(args.run_dir)
    if args.json:
        print(json.dumps({"run": str(res.run), "ok": res.ok, "checked": res.checked, "files": res.files,
                          "disagreements": [vars(f) for f in res.findings],
                          "not_checked": list(dict.fromkeys(res.not_checked))}, indent=2))
    else:
        # text from the run's files reaches the terminal without control characters or escapes
        print(printable(res.text(), multiline=True))
    return 0 if res.ok else 1
