"""The ``ringlab`` command line.  This module only dispatches.

Each subcommand lives in ``ringlab/commands/<name>.py`` and provides
``add_arguments(parser)`` and ``run(args) -> int``; it parses, calls the library
and prints.  Exit codes: 0 ok, 1 failure, 2 bad usage / bad parameter.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help).  Order is the order shown in --help.
COMMANDS = {
    "env": ("ringlab.commands.env", "what this machine can and cannot do (topology, governor, counters)"),
    "build": ("ringlab.commands.build", "build the C ring tests (standalone binaries + cffi module)"),
    "run": ("ringlab.commands.run", "run an experiment's trials into DIR/raw.csv"),
    "compare": ("ringlab.commands.compare", "A/B verdicts from a raw.csv"),
    "summarize": ("ringlab.commands.summarize", "summary tables and figures for a run folder"),
    "provenance": ("ringlab.commands.provenance", "were A and B different binaries from different sources?"),
    "mail": ("ringlab.commands.mail", "a run as plain text for a mailing-list reply (72 columns)"),
    "import-perf": ("ringlab.commands.import_perf", "turn pasted `perf stat` text into rows"),
    "bench": ("ringlab.commands.bench", "ringlab's own benchmarks (harness fidelity, overhead)"),
    "reproduce": ("ringlab.commands.reproduce", "run the notebooks through papermill into results/"),
}


def _load(name: str):
    mod, _ = COMMANDS[name]
    try:
        return importlib.import_module(mod)
    except ModuleNotFoundError as e:
        if e.name == mod:
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ringlab", description="Reproducible ring-buffer microbenchmarks.")
    from ringlab import __version__
    p.add_argument("--version", action="version", version=f"ringlab {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (_, help_) in COMMANDS.items():
        mod = _load(name)
        if mod is None:
            continue
        sp = sub.add_parser(name, help=help_, description=(mod.__doc__ or help_).strip().splitlines()[0])
        mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("ringlab: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # ParamError and friends: clear message, exit 2
        from ringlab.experiments.base import ParamError
        if isinstance(e, ParamError):
            print(f"ringlab {args.command}: error: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
