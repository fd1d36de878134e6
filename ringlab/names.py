"""Names that become parts of paths: host ids, node names, run ids, variant names, labels.

One rule (:data:`NAME_RULE`) for every name ringlab takes from a user or a data file and may
join into a path or a file name: 1 to :data:`MAX_NAME_LEN` characters of ``A-Z a-z 0-9 . _ -``,
not starting with ``.`` or ``-``, and no ``..``.  Such a name is one path component, never
``.``/``..``, never an option, and holds no separator, no space, no control character and no
markup, so it is also safe to print.

* :func:`name_problem` says what is wrong with a value (or None);
* :func:`check_name` returns a valid name or raises :class:`BadNameError` (a ``ParamError``,
  exit 2) naming the input (``--host``, ``parameter 'variants'``, ``$RINGLAB_HOST``);
* :func:`check_data_name` does the same for a name read from a file: :class:`BadDataNameError`
  (a ``DataError``) names the file and the column or field.
"""
from __future__ import annotations

import re

from ringlab.errors import DataError, ParamError

#: the longest name (a path component with room for suffixes such as ``@p1234-a16-l1``)
MAX_NAME_LEN = 64
NAME_RULE = (f"1 to {MAX_NAME_LEN} characters of A-Z a-z 0-9 . _ -, "
             "not starting with '.' or '-', without '..'")
_CHAR_RE = re.compile(r"[A-Za-z0-9._-]")


class BadNameError(ParamError):
    """A name given on the command line, in the environment or as a notebook parameter does
    not follow :data:`NAME_RULE`."""


class BadDataNameError(DataError):
    """A name read from a data file (raw.csv, env.json) does not follow :data:`NAME_RULE`."""


def name_problem(value: object) -> str | None:
    """What makes ``value`` not a name, or None when it is one."""
    if not isinstance(value, str):
        return "not a string"
    if not value:
        return "empty"
    if len(value) > MAX_NAME_LEN:
        return f"{len(value)} characters long"
    bad = next((c for c in value if not _CHAR_RE.fullmatch(c)), None)
    if bad is not None:
        return f"character {bad!r} is not allowed"
    if value[0] in ".-":
        return f"starts with {value[0]!r}"
    if ".." in value:
        return "holds '..'"
    return None


def _shown(value: object) -> str:
    """``value`` for a one-line message: repr (escapes control characters), at most 80 characters."""
    s = repr(value)
    return s if len(s) <= 80 else s[:60] + f"...' ({len(value) if isinstance(value, str) else '?'} characters)"


def check_name(value: object, what: str) -> str:
    """``value`` when it is a name; else :class:`BadNameError` naming ``what`` (the input, as
    ``--host`` or ``parameter 'variants'``), the value and :data:`NAME_RULE`."""
    why = name_problem(value)
    if why is not None:
        raise BadNameError(f"{what}: {_shown(value)} is not a name ({why}); allowed: {NAME_RULE}", input=what)
    return value  # type: ignore[return-value]


def check_data_name(value: object, path: object, field: str) -> str:
    """``value`` when it is a name; else :class:`BadDataNameError` naming the file ``path``, the
    column or field ``field`` and :data:`NAME_RULE`."""
    why = name_problem(value)
    if why is not None:
        raise BadDataNameError(f"{path}: {field} {_shown(value)} is not a name ({why}); expected {NAME_RULE}",
                               input=path)
    return value  # type: ignore[return-value]


__all__ = ["MAX_NAME_LEN", "NAME_RULE", "BadNameError", "BadDataNameError", "name_problem", "check_name",
           "check_data_name"]
