"""Option values that begin with ``-``: ``-p cflags -O3``, ``--cflags -O3``, ``-p cpus -1:0``.

argparse takes every word that begins with ``-`` for an option, so ``--cflags -O3``
fails with "expected one argument".  ``allow_dash_values(parser)`` makes a
(sub)parser join each value-taking option with the word after it (``--cflags
-O3`` becomes ``--cflags=-O3``) before argparse sees them, unless that word is
itself one of the parser's options: ``--out --resume`` still says that ``--out``
needs a value.

``name_value`` options take a parameter NAME and its VALUE: ``-p NAME VALUE`` or
``-p NAME=VALUE``.  Declare them with ``action=NameValue`` (one argparse value,
``NAME=VALUE``); they are stored as a list of (NAME, VALUE) pairs.
"""
from __future__ import annotations

import argparse
import re
import sys

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class NameValue(argparse.Action):
    """Append (NAME, VALUE) from ``NAME=VALUE`` (what ``allow_dash_values`` makes of ``NAME VALUE``)."""

    def __call__(self, parser, namespace, value, option_string=None):
        name, eq, val = str(value).partition("=")
        if not eq or not _NAME.fullmatch(name):
            parser.error(f"argument {option_string}: expected NAME VALUE or NAME=VALUE, got {value!r}")
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((name, val))
        setattr(namespace, self.dest, items)


def allow_dash_values(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Let the values of ``parser``'s options begin with ``-`` (see the module's docstring)."""
    canonical: dict[str, str] = {}     # option string -> the one written before '='
    pairs: set[str] = set()
    for action in parser._actions:
        if not action.option_strings or action.nargs is not None:
            continue                    # positionals, flags (nargs 0) and multi-value options
        name = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        for o in action.option_strings:
            canonical[o] = name
        if isinstance(action, NameValue):
            pairs.add(name)
    options = set(parser._option_string_actions)
    longs = sorted(o for o in options if o.startswith("--"))

    def resolve(word: str) -> str | None:
        """The option string ``word`` names (exactly or as a unique abbreviation), else None."""
        if word in options:
            return word
        if parser.allow_abbrev and word.startswith("--") and "=" not in word:
            hits = [o for o in longs if o.startswith(word)]
            if len(hits) == 1:
                return hits[0]
        return None

    def join(args: list[str]) -> list[str]:
        out, i = [], 0
        while i < len(args):
            word = args[i]
            if word == "--":
                return out + args[i:]
            opt = resolve(word)
            name = canonical.get(opt) if opt else None
            nxt = args[i + 1:i + 3]
            if name in pairs and nxt and resolve(nxt[0]) is None:
                if "=" in nxt[0] and _NAME.fullmatch(nxt[0].partition("=")[0]):
                    out.append(f"{name}={nxt[0]}")          # -p NAME=VALUE
                    i += 2
                    continue
                if len(nxt) == 2 and resolve(nxt[1]) is None:
                    out.append(f"{name}={nxt[0]}={nxt[1]}")  # -p NAME VALUE
                    i += 3
                    continue
            elif name is not None and name not in pairs and nxt and resolve(nxt[0]) is None:
                out.append(f"{name}={nxt[0]}")
                i += 2
                continue
            out.append(word)
            i += 1
        return out

    parse = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        return parse(join(list(sys.argv[1:] if args is None else args)), namespace)

    # argparse hands a subcommand's words to its parser through parse_known_args
    parser.parse_known_args = parse_known_args
    return parser
