"""argv of the tool processes: a wrapper's own options before ``--`` and the command after
it (:func:`run_command` runs a tool's click command on them), and the shape of a measured
command (what runs, not where its files lie)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click


def split_at_dashes(argv: list[str]) -> tuple[list[str], list[str]]:
    """``[OPTIONS..., "--", COMMAND...]`` -> (OPTIONS, COMMAND); no ``--``: (argv, [])."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


def run_command(command: click.Command, argv: list[str] | None, prog: str) -> int:
    """Run a tool's click ``command`` as ``prog`` on ``argv`` (default ``sys.argv[1:]``): the
    words before ``--`` are its options, the words after it its ``ctx.obj``.  Returns the exit
    code: the command's return value, 0 for --help, 2 for bad usage (printed with the usage)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    options, after = split_at_dashes(argv)
    return exit_code_of(command, options, prog, obj=after)


def exit_code_of(command: click.Command, args: list[str] | None, prog: str | None, **extra) -> int:
    """``command`` run on ``args`` as a program of its own: its callback's return value is the exit
    code, -h/--help prints the help and gives 0, bad usage prints the error and gives 2 (``extra``:
    click's ``main`` settings, e.g. ``obj``)."""
    try:
        rc = command.main(args=args, prog_name=prog, standalone_mode=False, **extra)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:      # click's name for a KeyboardInterrupt
        raise KeyboardInterrupt from None
    return int(rc or 0)


def command_shape(argv: list[str], measured_binary: str) -> list[str]:
    """argv with the measured binary as ``<binary>`` and the Python interpreter as ``<python>``,
    so that two configurations compare by what they run, not by where files lie."""
    out = []
    py = Path(sys.executable).name
    for a in argv:
        a = str(a)
        if a == str(measured_binary):
            out.append("<binary>")
        elif Path(a).name in (py, "python", "python3") and os.sep in a:
            out.append("<python>")
        else:
            out.append(a)
    return out


def python_module(module: str) -> list[str]:
    """argv that runs ``python -m module`` of the interpreter running ringlab, isolated from the
    working directory: a folder named ``ringlab`` there (a checkout's parent folder holds one)
    never shadows the installed package.  ``-P`` (Python 3.11+) drops only the working directory
    from sys.path; Python 3.10 has ``-I``, which also drops PYTHONPATH and the user site."""
    return [sys.executable, "-P" if sys.version_info >= (3, 11) else "-I", "-m", module]
