"""The command a fleet runs on every node: ``ringlab run ...`` or ``ringlab reproduce ...``,
checked before any job is submitted (``ringlab fleet submit``) and read back (``collect``)."""
from __future__ import annotations

import click

from ringlab.errors import ParamError
from ringlab.lab.cli import usage_message
from ringlab.lab.commands import options, reproduce
from ringlab.lab.reproduce import resolve_only


def parse_command(argv: list[str]) -> tuple[str, list[str]]:
    """("run" | "reproduce", the ringlab arguments) from what follows ``--``."""
    argv = argv[1:] if argv[:1] == ["--"] else list(argv)
    if argv[:1] == ["ringlab"]:
        argv = argv[1:]
    if not argv or argv[0] not in ("run", "reproduce"):
        raise ParamError("parameter 'COMMAND': expected 'reproduce [--only ...] [--profile P]' or "
                         f"'run EXPERIMENT ...' after --; got {' '.join(argv)[:60]!r}")
    bad = {"run": ("--out", "--resume"), "reproduce": ("--host",)}[argv[0]]
    for a in argv[1:]:
        if a.split("=")[0] in bad:
            raise ParamError(f"parameter 'COMMAND': {a.split('=')[0]} is set by ringlab fleet; "
                             f"allowed: the other options of ringlab {argv[0]}")
    if argv[0] == "run" and (len(argv) < 2 or argv[1].startswith("-")):
        raise ParamError("parameter 'COMMAND': 'run' needs an experiment name (run ptr_ring ...)")
    if argv[0] == "reproduce":
        reproduce_args(argv[1:])   # bad --only / --profile fail here, not in every job
    return argv[0], argv[1:]


def reproduce_args(argv: list[str]) -> tuple[str, list[str]]:
    """(profile, notebooks) of a reproduce command, as ``ringlab reproduce`` parses it."""
    try:
        args = options.parse(reproduce.command, "reproduce", argv)
    except click.UsageError as e:
        raise ParamError(f"parameter 'COMMAND': reproduce {usage_message(e)}") from None
    try:
        return args.profile, resolve_only(args.only)
    except ValueError as e:
        raise ParamError(str(e)) from None
