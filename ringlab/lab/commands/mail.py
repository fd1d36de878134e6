"""A run as plain text for a mailing-list reply (72 columns, no markdown).

    ringlab mail results/ptr-ring-reorder/<host>/<run-id> [--baseline NAME] [--width 72]
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ringlab.errors import ParamError
from ringlab.lab.commands import options
from ringlab.fmt import printable
from ringlab.report.bisect_mail import bisect_mail_text, is_bisect_folder
from ringlab.report.mail import mail_text
from ringlab.lab.notebook import harness_mail, is_harness_folder
from ringlab.rundir import write_text
from ringlab.rundir.outputs import check_output


@click.command(cls=options.Command)
@click.argument("run_dir", cls=options.Argument, metavar="RUN", help="a run folder (raw.csv + env.json)")
@click.option("--baseline", metavar="NAME", default=None,
              help="the unpatched variant (default: env.json's baseline, else the first of the "
                   "run's variants)")
@click.option("--candidate", metavar="NAME", multiple=True,
              help="only this candidate (repeatable; default: every other variant)")
@click.option("--metric", default=None, metavar="METRIC", help="metric column (default ns_per_op)")
@click.option("--width", type=int, default=72, metavar="WIDTH", help="maximum line length (default 72, at least 60)")
@click.option("-o", "--output", metavar="FILE", help="write the text to FILE instead of stdout")
def command(**params) -> int:
    return run(options.Args(params))


#: the mail's own file in a run folder: ``-o RUN/mail.txt`` is the one target inside a run folder
OWN_OUTPUT = "mail.txt"


def run(args) -> int:
    into_run = None
    if args.output:
        into_run = check_output(args.output, "-o", own=(OWN_OUTPUT,))
        out = Path(args.output)
        if out.is_dir():
            raise ParamError(f"parameter '-o': {out} is a directory; allowed: a file path in an existing folder")
        parent = out.parent if str(out.parent) else Path(".")
        if not parent.is_dir():
            raise ParamError(f"parameter '-o': {out}: folder {parent} does not exist; allowed: a file path in "
                             "an existing folder")
        if (out.exists() and not os.access(out, os.W_OK)) or not os.access(parent, os.W_OK | os.X_OK):
            raise ParamError(f"parameter '-o': {out} is not writable; allowed: a file path you can write to")
    if is_bisect_folder(args.run_dir):   # a `ringlab bisect` folder: the regression report
        text = bisect_mail_text(args.run_dir, width=args.width)
    elif is_harness_folder(args.run_dir):   # notebook 21: ringtest beside ringlab's SPSC
        text = harness_mail(args.run_dir, width=args.width)
    else:
        text = mail_text(args.run_dir, baseline=args.baseline, width=args.width, metric=args.metric,
                         candidates=args.candidate or None)
    # text from the run's files reaches the terminal or the file without control characters
    text = printable(text, multiline=True)
    if into_run is not None:
        write_text(into_run, OWN_OUTPUT, text)
    elif args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise ParamError(f"parameter '-o': {args.output}: {e.strerror}; allowed: a file path you can "
                             "write to") from None
    else:
        sys.stdout.write(text)
    return 0
