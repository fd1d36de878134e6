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
``-p cpus -1:0``).  :class:`Command` reads its command line through click's public API alone: its
``parse_args`` rewrites the words (:class:`CommandLine`) into ones click's own parser reads as
ringlab's command lines have always been read, which accept besides:

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
    """A parameter NAME and its VALUE, as the tuple ``(NAME, VALUE)``: one word ``NAME=VALUE`` (the
    two words ``NAME VALUE`` reach it as that one word, see :class:`CommandLine`)."""

    name = "NAME VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):                    # already converted
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


def _prefix(opt: str) -> str:
    """An option string's prefix as click reads it: ``--`` of ``--out``, ``-`` of ``-p``."""
    if opt[:1].isalnum():
        return ""
    return opt[:2] if opt[1:2] == opt[:1] else opt[:1]


def _takes_value(param: click.Option) -> bool:
    return not (param.is_flag or param.count)


class _HandOver(BaseException):
    """Click itself refuses this word (an unknown option, a flag given a value, a missing value
    click asks for): it goes to click as it stands, so that click's own error names it."""

    def __init__(self, word: str):
        super().__init__(word)
        self.word = word


class CommandLine:
    """A command's words rewritten for click's own parser, taken as ringlab's command lines always
    have been: a unique prefix of a long option names it (an ambiguous one is refused); a
    value-taking option's value is the next word unless that word is one of the command's own
    options (or there is none): "argument --out: expected one argument"; ``-p NAME VALUE`` takes
    two words where the first is not ``NAME=VALUE``; a ``greedy`` option takes every following word
    up to the next one that begins with ``-``.  A value given with ``=`` (``--out=DIR``) is that
    value alone.  Words that name no option, and short options with their value attached
    (``-pNAME=V``) or run together (``-hp``), are taken as click takes them.

    :meth:`words` gives each option with its value as two words (its full name, then the value,
    which click takes whatever it begins with), in the order given, then ``--`` and the
    positional words in the order given: click reads that as it read the words given."""

    def __init__(self, ctx: click.Context, params: list[click.Parameter]):
        self.ctx = ctx
        self.long: dict[str, click.Option] = {}
        self.short: dict[str, click.Option] = {}
        self.prefixes = {"-", "--"}
        for param in params:
            if not isinstance(param, click.Option):
                continue
            for opt in (*param.opts, *param.secondary_opts):
                prefix = _prefix(opt)
                self.prefixes.update({prefix[:1], prefix})
                table = self.short if len(prefix) == 1 and len(opt) == 2 else self.long
                table[opt] = param
        self.options: list[str] = []
        self.positional: list[str] = []

    def names(self, word: str) -> list[str]:
        """The option strings ``word`` names: itself, or the long options it is a prefix of."""
        if word in self.long or word in self.short:
            return [word]
        if word.startswith("--") and len(word) > 2:
            return sorted(o for o in self.long if o.startswith(word) and o.startswith("--"))
        return []

    def names_option(self, word: str) -> bool:
        return bool(self.names(word.partition("=")[0] if word.startswith("--") else word))

    def words(self, args: list[str]) -> list[str]:
        """``args`` as click should read them (see the class)."""
        rargs = list(args)
        while rargs:
            arg = rargs.pop(0)
            if arg == "--":
                return self._done(rargs)
            if arg[:1] in self.prefixes and len(arg) > 1:
                rest, mark = list(rargs), len(self.options)
                try:
                    self._option(arg, rargs)
                except _HandOver as e:
                    return self.options[:mark] + [e.word] + rest
            elif self.ctx.allow_interspersed_args:
                self.positional.append(arg)
            else:
                return self._done([arg, *rargs])
        return self._done([])

    def _done(self, rest: list[str]) -> list[str]:
        return [*self.options, "--", *self.positional, *rest]

    def _emit(self, opt: str, *values: str) -> None:
        self.options += [opt, *values]

    def _option(self, arg: str, rargs: list[str]) -> None:
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        names = self.names(name)
        if len(names) > 1:
            raise click.UsageError(f"ambiguous option: {name} could match {', '.join(names)}", self.ctx)
        if not names:
            return self._as_click(arg, rargs)
        opt = names[0]
        param = self.long.get(opt) or self.short[opt]
        if eq or not _takes_value(param) or param.nargs != 1:
            return self._as_click(opt + eq + value, rargs)
        if not rargs or self.names_option(rargs[0]):
            raise click.UsageError(f"argument {hint(param)}: expected one argument", self.ctx)
        if isinstance(param.type, NameValue) and self._name_and_value(rargs):
            name, value = rargs.pop(0), rargs.pop(0)
            # one word NameValue reads as the two: NAME=VALUE, or (a bad NAME) refused as "NAME VALUE"
            return self._emit(opt, f"{name}={value}" if _NAME.fullmatch(name) else f"{name} {value}")
        self._emit(opt, rargs.pop(0))
        if getattr(param, "greedy", False):
            while rargs and not (rargs[0].startswith("-") and len(rargs[0]) > 1):
                self._emit(opt, rargs.pop(0))

    def _name_and_value(self, words: list[str]) -> bool:
        """Whether ``words`` begin with ``NAME VALUE`` rather than with one ``NAME=VALUE``."""
        name, eq, _ = words[0].partition("=")
        if eq and _NAME.fullmatch(name):
            return False
        return len(words) >= 2 and not self.names_option(words[1])

    def _as_click(self, arg: str, rargs: list[str]) -> None:
        """An option word as click's parser takes it: a long option (``--out=DIR``) or else short
        options run together (``-pNAME=V``)."""
        opt, eq, value = arg.partition("=")
        param = self.long.get(opt)
        if param is not None:
            if not _takes_value(param):
                if eq:
                    raise _HandOver(arg)
                return self._emit(opt)
            if eq:
                rargs.insert(0, value)
            return self._value(opt, param, rargs, arg)
        if arg[:2] not in self.prefixes:
            return self._short(arg, rargs)
        if not self.ctx.ignore_unknown_options:
            raise _HandOver(arg)
        self.positional.append(arg)

    def _short(self, arg: str, rargs: list[str]) -> None:
        unknown = []
        for i, ch in enumerate(arg[1:], start=2):
            opt = arg[0] + ch
            param = self.short.get(opt)
            if param is None:
                if not self.ctx.ignore_unknown_options:
                    raise _HandOver(arg)
                unknown.append(ch)
                continue
            if not _takes_value(param):
                self._emit(opt)
                continue
            if i < len(arg):
                rargs.insert(0, arg[i:])
            self._value(opt, param, rargs, arg)
            break
        if unknown:
            self.positional.append(arg[0] + "".join(unknown))

    def _value(self, opt: str, param: click.Option, rargs: list[str], arg: str) -> None:
        if len(rargs) < param.nargs:
            raise _HandOver(arg)
        values = rargs[:param.nargs]
        del rargs[:param.nargs]
        self._emit(opt, *values)


class Command(click.Command):
    """A ringlab command (see the module's docstring for what it accepts beyond click)."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        return _help_option(super().get_help_option(ctx))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.allow_extra_args = True
        if args:
            try:
                args = CommandLine(ctx, self.get_params(ctx)).words(args)
            except click.UsageError:
                if not ctx.resilient_parsing:
                    raise
                args = []
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
