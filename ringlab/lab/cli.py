"""The ``ringlab`` command line.  This module only dispatches.

Each subcommand lives in ``ringlab/commands/<name>.py`` and provides
``add_arguments(parser)`` and ``run(args) -> int``; it parses, calls the library
and prints.  Exit codes: 0 ok, 1 failure (a failed run or build), 2 bad usage, bad parameter or bad
file, 130 SIGINT, 143 SIGTERM, 129 SIGHUP.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ringlab import __version__
from ringlab.errors import RinglabError, RunInterrupted

# name -> (module, one-line help).  Order is the order shown in --help.
COMMANDS = {
    "env": ("ringlab.lab.commands.env", "what this machine can and cannot do (topology, governor, counters)"),
    "build": ("ringlab.lab.commands.build", "build the C ring tests (standalone binaries + cffi module)"),
    "run": ("ringlab.lab.commands.run", "run an experiment's trials into DIR/raw.csv"),
    "compare": ("ringlab.lab.commands.compare", "A/B verdicts from a raw.csv"),
    "summarize": ("ringlab.lab.commands.summarize", "summary tables and figures for a run folder"),
    "provenance": ("ringlab.lab.commands.provenance", "were A and B different binaries from different sources?"),
    "mail": ("ringlab.lab.commands.mail", "a run as plain text for a mailing-list reply (72 columns)"),
    "import-perf": ("ringlab.lab.commands.import_perf", "turn pasted `perf stat` text into rows"),
    "bench": ("ringlab.lab.commands.bench", "ringlab's own benchmarks (harness fidelity, overhead)"),
    "calibrate": ("ringlab.lab.commands.calibrate", "measure this machine's layout spread and states (planning uses it)"),
    "reproduce": ("ringlab.lab.commands.reproduce", "run the notebooks through papermill into results/"),
    "bisect": ("ringlab.lab.commands.bisect", "the first commit of a kernel tree that made an experiment slower"),
    "fleet": ("ringlab.lab.commands.fleet", "run on many machines through Slurm, one exclusive node per host"),
}


def _load(name: str):
    """The command's module.  The command modules are ringlab's own: one that fails to import is
    a bug, and its ImportError propagates."""
    return importlib.import_module(COMMANDS[name][0])


def build_parser() -> argparse.ArgumentParser:
    """Every command, each from its module's ``add_arguments``."""
    p = argparse.ArgumentParser(prog="ringlab", description="Reproducible ring-buffer microbenchmarks.")
    p.add_argument("--version", action="version", version=f"ringlab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (_, help_) in COMMANDS.items():
        mod = _load(name)
        sp = sub.add_parser(name, help=help_, description=(mod.__doc__ or help_).strip().splitlines()[0])
        mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run)
    return p


def _not_utf8_argument(argv: list[str]) -> str | None:
    """Why an argument is not text (a lone surrogate: bytes that are not UTF-8), or None."""
    for i, a in enumerate(argv):
        try:
            str(a).encode("utf-8")
        except UnicodeEncodeError:
            try:
                raw = str(a).encode("utf-8", "surrogateescape")   # the bytes as given
            except UnicodeEncodeError:
                raw = str(a).encode("utf-8", "backslashreplace")
            shown = raw.decode("ascii", "backslashreplace")[:200]
            opt = argv[i - 1] if i and str(argv[i - 1]).startswith("-") else None
            where = f"the value of '{opt}'" if opt else f"argument {i + 1}"
            if i >= 2 and argv[i - 2] in ("-p", "--parameter"):
                where = f"parameter '{argv[i - 1]}'"
            return (f"{where} '{shown}' is not UTF-8 text; allowed: arguments in UTF-8 (paths and names "
                    "as ringlab writes them)")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command.  User errors (``ringlab.errors.RinglabError``: bad parameter, corrupt
    file, folder or CPUs in use) print one line and return their exit code (2; 1 for a
    failed build), never a traceback.  SIGINT returns 130, SIGTERM during a run 143, SIGHUP 129; a full disk
    during a run (``DiskFullError``) returns 1."""
    argv = sys.argv[1:] if argv is None else list(argv)
    bad = _not_utf8_argument(argv)
    if bad:
        print(f"ringlab: error: {bad}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except RunInterrupted as e:
        print(f"ringlab {args.command}: interrupted ({e})", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print(f"ringlab {args.command}: interrupted", file=sys.stderr)
        return 130
    except RinglabError as e:
        print(f"ringlab {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:   # `ringlab ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
