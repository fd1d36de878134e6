"""Opening the files of a run folder for reading, and quoting what could not be parsed.

* ``open_input(path, expected)``: a file of a run folder (raw.csv, env.json, summary.md,
  compare.csv, bisect.json, a patch, a notebook ...) opened for reading, in binary.  The file is
  opened relative to a descriptor of its folder with ``O_NOFOLLOW``: a symbolic link in the
  folder (``raw.csv -> /etc/shadow``) is refused, never followed, so what is read is always an
  entry of the folder itself and never a file elsewhere; anything but a regular file (a folder,
  a FIFO, a device, a socket) is refused as well, before a byte is read (``O_NONBLOCK``: a FIFO
  does not block the open).  The folder is the one the user named (a link to the folder itself
  is followed: the user chose it).  Missing: ``FileNotFoundError`` (the caller says what it
  expected); every refusal is a ``DataError`` naming the file, why, and ``expected``.
* ``quote(text)``: the piece of a file's text an error message shows: at most ``QUOTE_MAX``
  characters, control characters, escape sequences' introducers and other unprintable
  characters replaced by ``?``, in quotes (``repr``), ``...`` after a cut.  A message never
  shows more of a file than that.  ``clean(text, limit)`` is the same without the quotes, for a
  parser's own message (which may quote the file).
"""
from __future__ import annotations

import errno
import os
import stat
import unicodedata
from pathlib import Path
from typing import BinaryIO

from ringlab.errors import DataError

#: the most characters of a file's text an error message quotes
QUOTE_MAX = 40

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def open_input(path: str | os.PathLike, expected: str) -> BinaryIO:
    """``path`` opened for reading (binary), never through a symbolic link and only when it is
    a regular file (module docstring); ``expected`` ends every refusal ("expected ...")."""
    path = Path(path)
    folder = path.parent
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError:
        raise DataError(f"{path}: {folder} is not a folder; expected {expected}", input=path) from None
    try:
        try:
            fd = os.open(path.name, _FLAGS, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP or (e.errno == errno.EMLINK and _is_link(path.name, dfd)):
                raise DataError(f"{path}: a symbolic link; ringlab reads a run folder's files only from the "
                                f"folder itself, never through a link; expected {expected}", input=path) from None
            if e.errno == errno.ENXIO:   # a socket, or a FIFO with no writer on some systems
                raise DataError(f"{path}: not a regular file; expected {expected}", input=path) from None
            raise
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise DataError(f"{path}: {_kind(st.st_mode)}, not a regular file; expected {expected}", input=path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _is_link(name: str, dfd: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dfd).st_mode)
    except OSError:
        return False


def read_input(path: str | os.PathLike, expected: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` (``open_input``), at most ``limit`` + 1 of them when ``limit`` is given."""
    with open_input(path, expected) as f:
        return f.read() if limit is None else f.read(limit + 1)


def _shown_char(c: str) -> str:
    cat = unicodedata.category(c)
    if cat[0] == "C" or cat in ("Zl", "Zp") or c in "\\\x1b\x9b":
        return "?"
    return c


def clean(text: object, limit: int = QUOTE_MAX) -> str:
    """``text`` sanitised (unprintable characters as ``?``) and cut to ``limit`` characters
    (``...`` after a cut), unquoted: a parser's own message that may hold a file's text."""
    s = text if isinstance(text, str) else str(text)
    return "".join(_shown_char(c) for c in s[:limit]) + ("..." if len(s) > limit else "")


def quote(text: object, limit: int = QUOTE_MAX) -> str:
    """``text`` for an error message: sanitised (unprintable characters as ``?``), at most ``limit``
    characters, quoted; ``...`` follows when it was cut."""
    s = text if isinstance(text, str) else str(text)
    shown = "".join(_shown_char(c) for c in s[:limit])
    return repr(shown) + ("..." if len(s) > limit else "")


__all__ = ["QUOTE_MAX", "open_input", "read_input", "clean", "quote"]
