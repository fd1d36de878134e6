"""The ``ringlab`` command line (click).  This module only dispatches, and maps exit codes.

Each subcommand lives in ``ringlab/lab/commands/<name>.py``: a click command ``command``
declared with its arguments and options (see ``ringlab.lab.commands.options``), whose callback
calls the module's ``run(args) -> int``; it parses, calls the library and prints.

Exit codes, all mapped here: 0 ok; a ``RinglabError`` its ``exit_code`` (2 bad parameter or bad
file, 1 failure: a failed run or build, a full disk); 2 bad usage (an unknown option, a missing
value, an invalid choice); 130 SIGINT, 143 SIGTERM, 129 SIGHUP (``RunInterrupted``); 141 when the
reader of stdout left (``ringlab ... | head``).
"""
from __future__ import annotations

import importlib
import os
import sys

import click

from ringlab import __version__
from ringlab.errors import RinglabError, RunInterrupted
from ringlab.lab.commands import options

# name -> (module, one-line help).  Order is the order shown in --help.
COMMANDS = {
    "env": ("ringlab.lab.commands.env", "what this machine can and cannot do (topology, governor, counters)"),
    "build": ("ringlab.lab.commands.build", "build the C ring tests (standalone binaries + cffi module)"),
    "run": ("ringlab.lab.commands.run", "run an experiment's trials into DIR/raw.csv"),
    "compare": ("ringlab.lab.commands.compare", "A/B verdicts from a raw.csv"),
    "summarize": ("ringlab.lab.commands.summarize", "summary tables and figures for a run folder"),
    "provenance": ("ringlab.lab.commands.provenance", "were A and B different binaries from different sources?"),
    "mail": ("ringlab.lab.commands.mail", "a run as plain text for a mailing-list reply (72 columns)"),
    "verify": ("ringlab.lab.commands.verify", "recompute every printed number of a run folder from raw.csv"),
    "import-perf": ("ringlab.lab.commands.import_perf", "turn pasted `perf stat` text into rows"),
    "bench": ("ringlab.lab.commands.bench", "ringlab's own benchmarks (harness fidelity, overhead)"),
    "sessions": ("ringlab.lab.commands.sessions", "one comparison in several runs over time, combined by random effects"),
    "calibrate": ("ringlab.lab.commands.calibrate", "measure this machine's layout spread and states (planning uses it)"),
    "reproduce": ("ringlab.lab.commands.reproduce", "run the notebooks through papermill into results/"),
    "bisect": ("ringlab.lab.commands.bisect", "the first commit of a kernel tree that made an experiment slower"),
    "fleet": ("ringlab.lab.commands.fleet", "run on many machines through Slurm, one exclusive node per host"),
}


def _load(name: str):
    """The command's module.  The command modules are ringlab's own: one that fails to import is
    a bug, and its ImportError propagates."""
    return importlib.import_module(COMMANDS[name][0])


def _command(name: str) -> click.Command:
    mod = _load(name)
    cmd = mod.command
    cmd.short_help = COMMANDS[name][1]
    cmd.help = (mod.__doc__ or COMMANDS[name][1]).strip().splitlines()[0]
    return cmd


class _Commands(options.Group):
    """The commands of COMMANDS, each module imported when its command is looked up: a command
    starts without the libraries only others use (the statistics, plotting and notebook stacks
    take a second or more to import, minutes on an emulated CPU)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        if name not in self.commands:
            self.add_command(_command(name), name)
        return self.commands[name]


def build_group() -> click.Group:
    """The ``ringlab`` group: every command of COMMANDS, each its module's ``command``."""
    group = _Commands("ringlab", help="Reproducible ring-buffer microbenchmarks.",
                      subcommand_metavar="COMMAND [ARGS]...",
                      context_settings={"help_option_names": options.HELP_OPTIONS})
    click.version_option(__version__, "--version", prog_name="ringlab", message="%(prog)s %(version)s",
                         help="show the version and exit")(group)
    return group


def parse_args(argv: list[str]) -> options.Args:
    """The arguments ``ringlab ARGV`` would hand its command's ``run``, without running it."""
    group = build_group()
    with group.make_context("ringlab", list(argv)) as ctx:
        ctx.meta["ringlab.parse_only"] = True
        return group.invoke(ctx)


def usage_message(e: click.UsageError) -> str:
    """A usage error in one line, naming the option or argument and what is allowed."""
    ctx = e.ctx
    cmd = ctx.command if ctx is not None else None
    if isinstance(e, click.NoSuchOption):
        allowed = ["/".join((*p.opts, *p.secondary_opts)) for p in cmd.get_params(ctx)
                   if isinstance(p, click.Option)] if cmd is not None else []
        return f"unrecognized arguments: {e.option_name}" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
    if isinstance(e, click.exceptions.NoSuchCommand) or (
            isinstance(e, click.exceptions.NoArgsIsHelpError) and isinstance(cmd, click.Group)):
        what = (cmd.subcommand_metavar or "COMMAND").split()[0]
        allowed = ", ".join(cmd.list_commands(ctx))
        if isinstance(e, click.exceptions.NoArgsIsHelpError):
            return f"the following arguments are required: {what}; allowed: {allowed}"
        return f"argument {what}: invalid choice: {e.command_name!r}; allowed: {allowed}"
    if isinstance(e, click.MissingParameter):
        return f"the following arguments are required: {options.hint(e.param)}"
    if isinstance(e, click.BadParameter):
        kind = {click.INT: "an integer", click.FLOAT: "a number"}.get(getattr(e.param, "type", None))
        return f"argument {options.hint(e.param)}: {e.message.rstrip('.')}" + (f"; allowed: {kind}" if kind else "")
    return e.format_message().rstrip(".")


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
    """Run one command and return its exit code.  User errors (``ringlab.errors.RinglabError``:
    bad parameter, corrupt file, folder or CPUs in use) and usage errors print one line and
    return their exit code (2; 1 for a failure), never a traceback.  SIGINT returns 130, SIGTERM
    during a run 143, SIGHUP 129; a full disk during a run (``DiskFullError``) returns 1."""
    argv = sys.argv[1:] if argv is None else list(argv)
    bad = _not_utf8_argument(argv)
    if bad:
        print(f"ringlab: error: {bad}", file=sys.stderr)
        return 2
    group = build_group()
    ctx = None

    def name() -> str:
        cmd = ctx.meta.get("ringlab.command") if ctx is not None else None
        return f"ringlab {cmd}" if cmd else "ringlab"

    try:
        with group.make_context("ringlab", argv) as ctx:
            return int(group.invoke(ctx) or 0)
    except click.exceptions.Exit as e:          # --help, --version
        return e.exit_code
    except click.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else name()
        print(f"{where}: error: {usage_message(e)}", file=sys.stderr)
        return 2
    except RunInterrupted as e:
        print(f"{name()}: interrupted ({e})", file=sys.stderr)
        return e.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        print(f"{name()}: interrupted", file=sys.stderr)
        return 130
    except RinglabError as e:
        print(f"{name()}: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:   # `ringlab ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
