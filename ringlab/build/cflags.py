"""User compiler options (``ringlab build --cflags``, ``-p cflags``): split and checked.

Each option must have one of the shapes of :data:`CFLAG_SHAPES` (:func:`validate_cflags`): no
option that runs a program, loads code or writes or reads a file (one rule, :func:`writes_files`),
and no shell or make metacharacter, so
the same flags are safe in argv and in ringtest's ``make`` variable.
"""
from __future__ import annotations

import re
import shlex

from ringlab.errors import ParamError, RunnerError


class BuildError(RunnerError):
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
CFLAG_SHAPES = ("-O*", "-f*", "-m*", "-D*", "-U*", "-g*", "-W*", "-std=*", "-pthread")
#: Characters a user compiler option may hold: no shell or make metacharacter (``$``, backquote,
#: ``;&|<>()'"\\``, ``#``, globs, whitespace) and no ``/``, so no option names a file by path.
CFLAG_CHARS = "letters, digits and _ = + , . : -"
_CFLAG_CHAR_RE = re.compile(r"[A-Za-z0-9_=+,.:-]")
_CFLAG_RE = re.compile(r"-O(?:[0-3sgz]|fast)?|-f[A-Za-z0-9][A-Za-z0-9_=+,.:-]*|-m[a-z0-9][A-Za-z0-9_=+,.:-]*"
                       r"|-D[A-Za-z_][A-Za-z0-9_]*(?:=[A-Za-z0-9_=+,.:-]*)?|-U[A-Za-z_][A-Za-z0-9_]*"
                       r"|-g[a-z0-9=,-]*|-W[A-Za-z0-9][A-Za-z0-9_=+,.:-]*|-std=[a-z0-9+]+|-pthread")

#: The one rule for options that make the compiler, or the binary it builds, write or read a file
#: the build does not name, or run or load other code (:func:`writes_files`):
#:
#: * an output or pass-through option of the driver: ``-o``, ``-M...`` (dependency outputs),
#:   ``-save-temps``, ``-aux-info``, ``-dump...``, ``-p``/``-pg``, ``--...``, ``-X...``
#:   (``-Xassembler``, ``-Xlinker``), ``-Wa,``/``-Wl,``/``-Wp,``;
#: * a ``-f...``, ``-g...`` or ``-m...`` option whose name or value holds one of :data:`FILE_WORDS`,
#:   whole between ``-``, ``=``, ``,`` or ``:``: the words gcc and clang use for options that take an
#:   output or input file (``-fdump-*``, ``-fopt-info*=FILE``, ``-fcallgraph-info``, ``-fstack-usage``,
#:   ``-fsave-optimization-record``, ``-fprofile-*``, ``-ftest-coverage``,
#:   ``-fdiagnostics-format=sarif-file``, ``-fdebug-prefix-map``, ``-flto-incremental=DIR``,
#:   ``-gsplit-dwarf``, ``-fplugin``, ``-fcompare-debug`` ...), so a new option of such a family is
#:   refused without being listed.
FILE_WORDS = ("dump", "info", "temps", "save", "usage", "profile", "coverage", "report", "trace", "file", "files",
              "dir", "directory", "path", "map", "list", "ignorelist", "blacklist", "output", "prefix", "deps",
              "spec", "specs", "index", "incremental", "cache", "plugin", "wrapper", "xray", "compare-debug",
              "split-dwarf")
_FILE_WORD_RE = re.compile(r"(?:^|[-=,:])(?:" + "|".join(re.escape(w) for w in FILE_WORDS) + r")(?=$|[-=,:])")
_OUTPUT_OPTION_RE = re.compile(r"-o|-M|-save-temps|-aux-info|-dump|-pg?$|--|-X|-W[A-Za-z],")
_FUSE_LD = ("-fuse-ld=bfd", "-fuse-ld=gold", "-fuse-ld=lld", "-fuse-ld=mold")


def writes_files(option: str) -> str | None:
    """Why ``option`` may write or read a file the build does not name, or run or load other
    code; None when it does not (the one rule above; the kit's own flags pass it)."""
    if _OUTPUT_OPTION_RE.match(option):
        return "names an output file or passes options through to another program"
    if option[:2] in ("-f", "-g", "-m"):
        m = _FILE_WORD_RE.search(option[2:])
        if m:
            word = m.group(0).lstrip("-=,:")
            return (f"can write or read a file, or load code, the build does not name (options whose name "
                    f"or value holds {word!r} are refused)")
    if option.startswith("-fuse-ld") and option not in _FUSE_LD:
        return "chooses the linker program (allowed: " + ", ".join(_FUSE_LD) + ")"
    return None


#: Options that stop the compiler before it writes an object file, or that change the link model:
#: the build compiles each source to an object itself (``-c``, ``-o``), links the objects into an
#: executable, and makes layout copies from ordinary objects with objcopy, so each of these breaks
#: a step after the compile (a missing .o, a link of LTO bytecode).  Refused with why; a name
#: ending in ``*`` is a family (every option that begins so).
STOPS_OR_RELINKS = {
    "-fsyntax-only": "stops the compiler after checking syntax, before it writes an object file",
    "-E": "stops the compiler after preprocessing, before it writes an object file",
    "-S": "stops the compiler at assembly, before it writes an object file",
    "-c": "stops before linking; the build passes -c itself and then links",
    "-M": "makes the compiler write dependencies instead of an object file",
    "-MM": "makes the compiler write dependencies instead of an object file",
    "-o*": "names the output file; the build names its objects and binaries itself",
    "-flto*": "changes the link model (link-time optimization: the objects hold compiler bytecode, "
              "which the build's layout copies and link step do not handle)",
    "-ffat-lto-objects": "changes the link model (link-time optimization)",
    "-fuse-linker-plugin": "changes the link model (link-time optimization)",
    "-fwhole-program": "changes the link model (each object is compiled as if it were the whole program)",
    "-shared": "changes the link model (a shared library, not an executable)",
    "-static*": "changes the link model (static linking)",
    "-r": "changes the link model (a relocatable object, not an executable)",
    "-nostdlib": "changes the link model (no C library)",
    "-nostartfiles": "changes the link model (no startup files)",
}


def stops_or_relinks(option: str) -> str | None:
    """Why ``option`` stops the compile before an object file or changes the link model
    (:data:`STOPS_OR_RELINKS`); None when it does neither."""
    for name, why in STOPS_OR_RELINKS.items():
        if option == name or (name.endswith("*") and option.startswith(name[:-1])):
            return why
    return None


def cflags_allowed() -> str:
    """The 'allowed:' text of a refused compiler option."""
    return (f"compiler options shaped {', '.join(CFLAG_SHAPES)}, made of {CFLAG_CHARS} "
            f"(no option that writes or reads a file or runs a program: no -o, -M..., -save-temps, "
            f"-fdump-*, -fopt-info*, -fstack-usage, -fprofile-*, -wrapper, -B, -specs, @file, -fplugin, "
            f"-Wl,/-Wp,/-Wa, pass-through, -x, -I or -include, and no path; no option that stops the compile "
            f"before an object file or changes the link model: -fsyntax-only, -E, -S, -c, -M, -MM, -o, -flto*, "
            f"-fwhole-program, -shared, -static, -r)")


def validate_cflags(cflags: str | list[str] | None, name: str = "cflags") -> list[str]:
    """User compiler options as an argv list, each checked against :data:`CFLAG_SHAPES`.

    Raises ParamError naming ``name`` (``cflags``, ``--cflags``) and the allowed shapes for an
    option that could run a program, load code or name a file (``-wrapper``, ``-B``,
    ``-specs``, ``@file``, ``-x``, ``-I``, ``-include``), that could write or read a file
    (:func:`writes_files`: ``-o``, ``-M...``, ``-save-temps``, ``-fdump-*``, ``-fopt-info*``,
    ``-fplugin``, ``-Wl,...`` ...), or
    that holds a shell or make metacharacter (``$``, backquote, ``;&|<>()'"\\``, ``#``,
    whitespace inside an option) or a ``/``.  The accepted options are safe as argv elements
    and, joined by spaces, as one ``make`` variable (nothing in them is expanded)."""
    label = f"parameter '{name}'" if not name.startswith("-") else name
    if cflags is not None and not isinstance(cflags, (str, list, tuple)):
        raise ParamError(f"{label}: not a string of compiler options: {cflags!r}; allowed: {cflags_allowed()}",
                         input=label)
    if isinstance(cflags, str):
        # Checked as typed, before any splitting: a quote or backslash is refused, not unquoted.
        bad = next((c for c in cflags if c not in " \t" and not _CFLAG_CHAR_RE.fullmatch(c)), None)
        if bad is not None:
            raise ParamError(f"{label}: character {bad!r} in {cflags!r} is not allowed; "
                             f"allowed: {cflags_allowed()}", input=label)
        words = cflags.split()
    else:
        words = list(cflags or [])
    for w in words:
        if not isinstance(w, str):
            raise ParamError(f"{label}: {w!r} is not an option; allowed: {cflags_allowed()}", input=label)
        bad = next((c for c in w if not _CFLAG_CHAR_RE.fullmatch(c)), None)
        if bad is not None:
            raise ParamError(f"{label}: character {bad!r} in {w!r} is not allowed; allowed: {cflags_allowed()}",
                             input=label)
        why = stops_or_relinks(w) or writes_files(w)
        if why is None and not _CFLAG_RE.fullmatch(w):
            why = "runs a program around the compiler" if "-wrapper" in w else "is not of an allowed shape"
        if why is not None:
            raise ParamError(f"{label}: option {w!r} {why}; allowed: {cflags_allowed()}", input=label)
    return words
