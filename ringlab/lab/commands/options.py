"""How a ringlab command is declared: a click command of class :class:`Command`.

A command module (``ringlab/lab/commands/<name>.py``) declares its command, its arguments and
its options with click's decorators, and its callback hands them to ``run(args)``::

    @click.command(cls=options.Command)
    @click.argument("dir", cls=options.Argument, metavar="DIR", help="a run folder")
    @options.parameter("a ptr_ring parameter of the run")          # -p/--parameter NAME VALUE
    @click.option("--out", metavar="DIR", help="where the output goes")
    @click.option("--json", is_flag=True, help="print JSON")
    def command(**params):
        return run(options.Args(params))

``lab/cli.py`` adds it to the ``ringlab`` group under its name (its one-line help there, the
module docstring's first line as its description).  ``args`` has one attribute per parameter;
repeatable options (``multiple=True``) are lists.

Click takes the word after an option as its value whatever it begins with (``--cflags -O3``,
``-p cpus -1:0``).  :class:`Command` parses with :class:`Parser`, click's own option parser
with what ringlab's command lines have always accepted besides:

- ``-p NAME VALUE`` and ``-p NAME=VALUE`` (options of type :data:`NAME_VALUE`), as papermill's -p;
- a unique prefix of a long option (``--cfl -O3`` is ``--cflags -O3``);
- ``greedy`` options take every following word up to the next option (``--only 10 11``);
- a value-taking option followed by one of the command's own options, or by nothing, is refused
  (``--out --resume``: "argument --out: expected one argument"), never taken as the value.
"""
from __future__ import annotations

import re
from typing import Any

import click

from ringlab.tools.argv import exit_code_of

try:                                    # click >= 8.2: private, and gone in click 9 (pinned <9)
    from click.parser import _OptionParser as _ClickParser
except ImportError:                                     # click 8.1
    from click.parser import OptionParser as _ClickParser

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: every ringlab command answers to -h as well as --help
HELP_OPTIONS = ["-h", "--help"]


class Args:
    """A command's parsed arguments as attributes (``args.out``); repeatable options as lists."""

    def __init__(self, params: dict[str, Any]):
        for k, v in params.items():
            setattr(self, k, list(v) if isinstance(v, tuple) else v)

    def __repr__(self) -> str:
        return f"Args({vars(self)!r})"


class NameValue(click.ParamType):
    """A parameter NAME and its VALUE: one word ``NAME=VALUE``, or the two words ``NAME VALUE``
    (which :class:`Parser` hands over as a tuple)."""

    name = "NAME VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):                    # -p NAME VALUE, two words
            name, val = value
            if not _NAME.fullmatch(name):
                self.fail(f"expected NAME VALUE or NAME=VALUE, got {f'{name} {val}'!r}", param, ctx)
            return value
        name, eq, val = str(value).partition("=")
        if not eq or not _NAME.fullmatch(name):
            self.fail(f"expected NAME VALUE or NAME=VALUE, got {value!r}", param, ctx)
        return (name, val)


NAME_VALUE = NameValue()


class Choice(click.Choice):
    """click's Choice, refusing a value as "invalid choice: 'x'; allowed: a, b"."""

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(f"invalid choice: {value!r}; allowed: {', '.join(map(str, self.choices))}", param, ctx)


class Argument(click.Argument):
    """A positional argument with a ``help`` text (listed under "Positional arguments" in --help)."""

    def __init__(self, *args, help: str | None = None, **kwargs):   # noqa: A002 - click's own word
        super().__init__(*args, **kwargs)
        self.help = help


class Option(click.Option):
    """An option; ``greedy=True`` takes every following word up to the next option (``--only 10 11``)."""

    def __init__(self, *args, greedy: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.greedy = greedy


def parameter(help: str):   # noqa: A002
    """``-p/--parameter NAME VALUE`` (also ``-p NAME=VALUE``), repeatable, into ``args.parameter``."""
    return click.option("-p", "--parameter", "parameter", type=NAME_VALUE, multiple=True,
                        metavar="NAME VALUE", help=help)


def parse(cmd: click.Command, name: str, argv: list[str]) -> Args:
    """The arguments ``cmd`` (called ``name``) would hand its ``run`` for ``argv``, without running
    it; --help is not an option here.  A bad command line raises click.UsageError."""
    with cmd.make_context(name, list(argv), help_option_names=[]) as ctx:
        return Args(ctx.params)


def run_alone(cmd: click.Command, argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run ``cmd`` as a program of its own (a benchmark script run as ``python FILE``) on ``argv``
    (default ``sys.argv[1:]``): its callback's return value is the exit code; -h/--help prints
    the help and returns 0; bad usage prints the error and returns 2."""
    return exit_code_of(cmd, argv, prog, help_option_names=HELP_OPTIONS)


def hint(param: click.Parameter | None) -> str:
    """How an error names a parameter: ``-p/--parameter``, or an argument's metavar."""
    if param is None:
        return "argument"
    if isinstance(param, click.Option):
        return "/".join(param.opts)
    return param.metavar or param.name or "argument"


def _help_option(option: click.Option | None) -> click.Option | None:
    if option is not None:
        option.help = "show this help message and exit"
    return option


class Parser(_ClickParser):
    """Click's option parser, taking an option's values as ringlab's command lines always have:
    a unique prefix of a long option names it (an ambiguous one is refused); a value-taking
    option's value is the next word unless that word is one of the command's own options (or
    there is none): "argument --out: expected one argument"; ``-p NAME VALUE`` takes two words
    where the first is not ``NAME=VALUE``; a ``greedy`` option takes every following word up to
    the next one that begins with ``-``.  A value given with ``=`` (``--out=DIR``) is that value
    alone.  Words that name no option (and short options with their value attached, ``-pNAME=V``)
    are left to click as they are."""

    def _names(self, word: str) -> list[str]:
        """The option strings ``word`` names: itself, or the long options it is a prefix of."""
        if word in self._long_opt or word in self._short_opt:
            return [word]
        if word.startswith("--") and len(word) > 2:
            return sorted(o for o in self._long_opt if o.startswith(word) and o.startswith("--"))
        return []

    def _names_option(self, word: str) -> bool:
        return bool(self._names(word.partition("=")[0] if word.startswith("--") else word))

    def _process_opts(self, arg: str, state) -> None:
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        names = self._names(name)
        if len(names) > 1:
            raise click.UsageError(f"ambiguous option: {name} could match {', '.join(names)}", self.ctx)
        if not names:
            return super()._process_opts(arg, state)
        opt = names[0]
        option = self._long_opt.get(opt) or self._short_opt[opt]
        if eq or not option.takes_value or option.nargs != 1:
            return super()._process_opts(opt + eq + value, state)
        words, param = state.rargs, option.obj
        if not words or self._names_option(words[0]):
            raise click.UsageError(f"argument {hint(param)}: expected one argument", self.ctx)
        if isinstance(param.type, NameValue) and self._name_and_value(words):
            option.process((words.pop(0), words.pop(0)), state)
            return
        option.process(words.pop(0), state)
        if getattr(param, "greedy", False):
            while words and not (words[0].startswith("-") and len(words[0]) > 1):
                option.process(words.pop(0), state)

    def _name_and_value(self, words: list[str]) -> bool:
        """Whether ``words`` begin with ``NAME VALUE`` rather than with one ``NAME=VALUE``."""
        name, eq, _ = words[0].partition("=")
        if eq and _NAME.fullmatch(name):
            return False
        return len(words) >= 2 and not self._names_option(words[1])


class Command(click.Command):
    """A ringlab command (see the module's docstring for what it accepts beyond click)."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        return _help_option(super().get_help_option(ctx))

    def make_parser(self, ctx: click.Context) -> Parser:
        parser = Parser(ctx)
        for param in self.get_params(ctx):
            param.add_to_parser(parser, ctx)
        return parser

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.allow_extra_args = True
        rest = super().parse_args(ctx, args)
        if rest:
            raise click.UsageError(f"unrecognized arguments: {' '.join(rest)}", ctx)
        return rest

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.meta.get("ringlab.parse_only"):
            return Args(ctx.params)
        return super().invoke(ctx)

    if not hasattr(click.Command, "format_arguments"):     # click < 8.5 lists no argument's help
        def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            rows = [(p.human_readable_name, p.help or "") for p in self.get_params(ctx) if isinstance(p, click.Argument)]
            if any(help_ for _, help_ in rows):
                with formatter.section("Positional arguments"):
                    formatter.write_dl(rows)
            super().format_options(ctx, formatter)


class Group(click.Group):
    """A group of commands, listed in the order they were added (not sorted)."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        return _help_option(super().get_help_option(ctx))

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        ctx.meta.setdefault("ringlab.command", args[0] if args else None)
        return super().resolve_command(ctx, args)
