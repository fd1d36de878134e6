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
``-p cpus -1:0``).  :class:`Command` adds what ringlab's command lines have always accepted:

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
    """A parameter NAME and its VALUE: ``NAME=VALUE`` (what :class:`Command` makes of ``NAME VALUE``)."""

    name = "NAME VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
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


class Command(click.Command):
    """A ringlab command (see the module's docstring for what it accepts beyond click)."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        return _help_option(super().get_help_option(ctx))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = _normalize(self, ctx, list(args))
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


def _normalize(cmd: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
    """``args`` as click parses them: abbreviations written out, ``-p NAME VALUE`` as
    ``-p NAME=VALUE``, greedy options repeated; a missing value is a usage error."""
    opts: dict[str, click.Option] = {}
    for p in cmd.get_params(ctx):
        if isinstance(p, click.Option):
            for o in (*p.opts, *p.secondary_opts):
                opts[o] = p
    longs = sorted(o for o in opts if o.startswith("--"))

    def lookup(word: str) -> list[str]:
        """The option strings ``word`` names: itself, or the long options it is a prefix of."""
        if word in opts:
            return [word]
        if word.startswith("--") and len(word) > 2:
            return [o for o in longs if o.startswith(word)]
        return []

    def is_option(word: str) -> bool:
        return bool(lookup(word.partition("=")[0] if word.startswith("--") else word))

    out: list[str] = []
    i = 0
    interspersed = ctx.allow_interspersed_args
    while i < len(args):
        word = args[i]
        if word == "--":
            return out + args[i:]
        if not word.startswith("-") or len(word) == 1:
            out.append(word)
            i += 1
            if not interspersed:
                return out + args[i:]
            continue
        name, eq, val = word.partition("=") if word.startswith("--") else (word, "", "")
        hits = lookup(name)
        if len(hits) > 1:
            raise click.UsageError(f"ambiguous option: {name} could match {', '.join(hits)}", ctx)
        if not hits:                  # unknown, or a short option with its value attached: click's
            out.append(word)
            i += 1
            continue
        opt = hits[0]
        param = opts[opt]
        if eq or param.is_flag or param.count:
            out.append(opt + eq + val)
            i += 1
            continue
        nxt = args[i + 1:i + 3]
        if not nxt or is_option(nxt[0]):
            raise click.UsageError(f"argument {hint(param)}: expected one argument", ctx)
        if isinstance(param.type, NameValue):
            before, has_eq, _ = nxt[0].partition("=")
            if not (has_eq and _NAME.fullmatch(before)) and len(nxt) == 2 and not is_option(nxt[1]):
                out += [opt, f"{nxt[0]}={nxt[1]}"]         # -p NAME VALUE
                i += 3
                continue
        out += [opt, nxt[0]]
        i += 2
        if getattr(param, "greedy", False):
            while i < len(args) and not (args[i].startswith("-") and len(args[i]) > 1):
                out += [opt, args[i]]
                i += 1
    return out
