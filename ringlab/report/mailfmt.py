"""Plain-text formatting for ``ringlab mail``: fields, paragraphs, numbers (lines of at most
a given width)."""
from __future__ import annotations

import math
import re
import textwrap

# -- small formatting helpers --------------------------------------------------------------
def as_float(x) -> float:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return math.nan
    return x


def is_finite_number(x) -> bool:
    return math.isfinite(as_float(x))


def _int(v) -> str:
    """12 345 678: thin groups that cannot be misread as a decimal point."""
    return f"{int(v):,}".replace(",", " ")


def _count(n, what: str) -> str:
    return f"{int(n)} {what}" + ("" if int(n) == 1 else "s")


def plain_number(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def wrap_para(text: str, width: int, indent: int = 0) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=" " * indent,
                         subsequent_indent=" " * indent, break_on_hyphens=False)


def path_lines(path: str, width: int, indent: int = 2) -> list[str]:
    """A path on lines of its own, indented, broken only after a '/' where it is wider than
    ``width``: a reader sees where each folder name ends (textwrap would cut inside one)."""
    parts = re.findall(r"[^/]*/|[^/]+$", path)
    lines, cur = [], ""
    for part in parts:
        if cur and indent + len(cur) + len(part) > width:
            lines.append(cur)
            cur = ""
        cur += part
    if cur:
        lines.append(cur)
    return [" " * indent + ln for ln in lines]


def short_sha(sha: str | None) -> str:
    return (sha or "")[:12] or "n/a"


#: a space textwrap does not break at (its whitespace is ASCII only); ``hang_para`` glues phrases with it
_GLUE = "\u00a0"


def hang_para(text: str, width: int, indent: int = 2, whole: tuple[str, ...] = ()) -> list[str]:
    """A paragraph whose second and later lines hang ``indent`` columns in: one item of a list
    that reads as one line (a headline) even where the width breaks it.  The phrases in ``whole``
    are never broken across lines ("(95% CI, + = better)": a line ending in "+" hides the sign)."""
    for phrase in whole:
        text = text.replace(phrase, phrase.replace(" ", _GLUE))
    lines = textwrap.wrap(text, width=width, subsequent_indent=" " * indent, break_on_hyphens=False)
    return [ln.replace(_GLUE, " ") for ln in lines] if whole else lines


def sig4(v) -> str:
    """A measured value to 4 significant digits, trailing zeros kept (2.930, 188.9, 1828)."""
    v = as_float(v)
    if not math.isfinite(v):
        return "n/a"
    if abs(v) >= 1e5:
        return f"{v:.3e}"
    return f"{v:#.4g}".rstrip(".")
