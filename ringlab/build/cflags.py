"""User compiler options (``ringlab build --cflags``, ``-p cflags``): split and checked.

Each option must have one of the shapes of :data:`CFLAG_SHAPES` (:func:`validate_cflags`): no
option that runs a program, loads code or names a file, and no shell or make metacharacter, so
the same flags are safe in argv and in ringtest's ``make`` variable.
"""
from __future__ import annotations

import re
import shlex

from ringlab.errors import ParamError


class BuildError(RuntimeError):
    """A compile failed; the message names the file and the first compiler error line."""


def split_cflags(cflags: str | list[str] | None) -> list[str]:
    """User flags as an argv list.  A string is split like a POSIX shell would
    split it, but nothing is expanded or executed: ``$(rm -rf /)`` stays text."""
    if not cflags:
        return []
    if isinstance(cflags, str):
        try:
            return shlex.split(cflags)
        except ValueError as e:
            raise BuildError(f"--cflags {cflags!r}: cannot split ({e})") from None
    return [str(c) for c in cflags]


#: The shapes a user compiler option may have (``ringlab build --cflags``, ``-p cflags``).
CFLAG_SHAPES = ("-O*", "-f*", "-m*", "-D*", "-U*", "-g*", "-W*", "-std=*")
#: Characters a user compiler option may hold: no shell or make metacharacter (``$``, backquote,
#: ``;&|<>()'"\\``, ``#``, globs, whitespace) and no ``/``, so no option names a file by path.
CFLAG_CHARS = "letters, digits and _ = + , . : -"
_CFLAG_CHAR_RE = re.compile(r"[A-Za-z0-9_=+,.:-]")
_CFLAG_RE = re.compile(r"-O(?:[0-3sgz]|fast)?|-f[a-z0-9][A-Za-z0-9_=+,.:-]*|-m[a-z0-9][A-Za-z0-9_=+,.:-]*"
                       r"|-D[A-Za-z_][A-Za-z0-9_]*(?:=[A-Za-z0-9_=+,.:-]*)?|-U[A-Za-z_][A-Za-z0-9_]*"
                       r"|-g[a-z0-9=,-]*|-W[A-Za-z0-9][A-Za-z0-9_=+,.:-]*|-std=[a-z0-9+]+")
#: Options of an allowed shape that still load code, name a program or read/write a file
#: the user did not name as an output of this build (prefixes, matched after the shape).
_CFLAG_REFUSED = (
    ("-fplugin", "loads a compiler plugin"),
    ("-wrapper", "runs a program around the compiler"),
    ("-Wl,", "passes options to the linker"),
    ("-Wp,", "passes options to the preprocessor"),
    ("-Wa,", "passes options to the assembler"),
    ("-fprofile-use=", "reads a profile file"),
    ("-fprofile-generate=", "names where the binary writes profiles"),
    ("-fprofile-dir=", "names where the binary writes profiles"),
    ("-fauto-profile", "reads a profile file"),
    ("-fdump-", "writes compiler dump files"),
    ("-fcallgraph-info", "writes files next to the build"),
    ("-fsave-optimization-record", "writes files next to the build"),
    ("-fstack-usage", "writes files next to the build"),
    ("-fcompare-debug", "runs the compiler a second time with other options"),
)
_FUSE_LD = ("-fuse-ld=bfd", "-fuse-ld=gold", "-fuse-ld=lld", "-fuse-ld=mold")


def cflags_allowed() -> str:
    """The 'allowed:' text of a refused compiler option."""
    return (f"compiler options shaped {', '.join(CFLAG_SHAPES)}, made of {CFLAG_CHARS} "
            f"(no -wrapper, -B, -specs, @file, -fplugin, -Wl,/-Wp,/-Wa, pass-through, "
            f"-o, -x, -I or -include, and no path)")


def validate_cflags(cflags: str | list[str] | None, name: str = "cflags") -> list[str]:
    """User compiler options as an argv list, each checked against :data:`CFLAG_SHAPES`.

    Raises ParamError naming ``name`` (``cflags``, ``--cflags``) and the allowed shapes for an
    option that could run a program, load code or name a file (``-wrapper``, ``-B``,
    ``-specs``, ``@file``, ``-fplugin``, ``-Wl,...``, ``-o``, ``-x``, ``-I``, ``-include``), or
    that holds a shell or make metacharacter (``$``, backquote, ``;&|<>()'"\\``, ``#``,
    whitespace inside an option) or a ``/``.  The accepted options are safe as argv elements
    and, joined by spaces, as one ``make`` variable (nothing in them is expanded)."""
    label = f"parameter '{name}'" if not name.startswith("-") else name
    if cflags is not None and not isinstance(cflags, (str, list, tuple)):
        raise ParamError(f"{label}: not a string of compiler options: {cflags!r}; allowed: {cflags_allowed()}")
    if isinstance(cflags, str):
        # Checked as typed, before any splitting: a quote or backslash is refused, not unquoted.
        bad = next((c for c in cflags if c not in " \t" and not _CFLAG_CHAR_RE.fullmatch(c)), None)
        if bad is not None:
            raise ParamError(f"{label}: character {bad!r} in {cflags!r} is not allowed; "
                             f"allowed: {cflags_allowed()}")
        words = cflags.split()
    else:
        words = list(cflags or [])
    for w in words:
        if not isinstance(w, str):
            raise ParamError(f"{label}: {w!r} is not an option; allowed: {cflags_allowed()}")
        bad = next((c for c in w if not _CFLAG_CHAR_RE.fullmatch(c)), None)
        if bad is not None:
            raise ParamError(f"{label}: character {bad!r} in {w!r} is not allowed; allowed: {cflags_allowed()}")
        why = next((why for pre, why in _CFLAG_REFUSED if w.startswith(pre)), None)
        if why is None and w.startswith("-fuse-ld") and w not in _FUSE_LD:
            why = "chooses the linker program (allowed: " + ", ".join(_FUSE_LD) + ")"
        if why is None and "-wrapper" in w:
            why = "runs a program around the compiler"
        if why is None and not _CFLAG_RE.fullmatch(w):
            why = "is not of an allowed shape"
        if why is not None:
            raise ParamError(f"{label}: option {w!r} {why}; allowed: {cflags_allowed()}")
    return words
