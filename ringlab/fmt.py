"""Text formatting shared by every table ringlab writes: p-values, percentages, CIs,
and markdown tables.  One definition each, so that two tables never print the same
number two ways.

* :func:`p`        "< 0.001" below 0.001, else three decimals ("0.052"); "n/a" for NaN/None
* :func:`pct`      signed percent with one decimal ("+6.2%"); ``signed=False`` drops the "+"
* :func:`ci`       "[-1.2%, +3.4%]" for a percent interval; ``negate=True`` gives the interval of
                   the negated quantity (the mails' sign), bounds swapped
* :func:`ci_header` "95% CI" from a level such as 0.95 (or 95)
* :func:`md_table` markdown table from a header and rows of cells
* :func:`df_to_markdown` markdown table from a DataFrame (floats as ``floatfmt``, NaN empty)
* :func:`printable` text from a data file made safe for a terminal, a mail or markdown: no control
                   character, no ANSI/OSC escape; ``html=True`` also escapes ``& < >``
"""
from __future__ import annotations

import html as _html
import math
import re
from typing import Any, Iterable, Sequence

NA = "n/a"


def _missing(x: Any) -> bool:
    if x is None:
        return True
    try:
        return not math.isfinite(float(x))
    except (TypeError, ValueError):
        return True


def p(x: Any) -> str:
    """A p-value: "< 0.001" below 0.001, else three decimals."""
    if _missing(x):
        return NA
    x = float(x)
    return "< 0.001" if x < 0.001 else f"{x:.3f}"


def pct(x: Any, signed: bool = True, digits: int = 1) -> str:
    """A percentage already in percent units: "+6.2%" (signed) or "6.2%"."""
    if _missing(x):
        return NA
    return f"{float(x):+.{digits}f}%" if signed else f"{float(x):.{digits}f}%"


def ci(lo: Any, hi: Any, negate: bool = False, digits: int = 1) -> str:
    """A percent interval "[lo, hi]"; with ``negate`` the interval of -x: [-hi, -lo]."""
    if _missing(lo) or _missing(hi):
        return NA
    lo, hi = float(lo), float(hi)
    if negate:
        lo, hi = -hi, -lo
    return f"[{pct(lo, digits=digits)}, {pct(hi, digits=digits)}]"


def ci_header(level: Any = 0.95) -> str:
    """"95% CI" for level 0.95 (or 95); a missing level reads as 95%."""
    if _missing(level):
        level = 0.95
    level = float(level)
    if level <= 1:
        level *= 100
    return f"{level:.4g}% CI"


def cell(v: Any, floatfmt: str = ".4g") -> str:
    """One table cell: floats as ``floatfmt`` (NaN empty), everything else str()."""
    if isinstance(v, float):
        return "" if math.isnan(v) else format(v, floatfmt)
    return str(v)


def md_table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> str:
    """A markdown table; "|" inside a cell is escaped, control characters dropped (:func:`printable`)."""
    def esc(s: Any) -> str:
        return printable(str(s).replace("\n", " ")).replace("|", "\\|")
    out = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def df_to_markdown(df, floatfmt: str = ".4g") -> str:
    """A DataFrame as a markdown table (no `tabulate` needed)."""
    return md_table([str(c) for c in df.columns],
                    [[cell(v, floatfmt) for v in row] for row in df.itertuples(index=False)])


#: an ANSI/ECMA-48 escape: CSI (ESC [ ... final byte, or the C1 CSI), OSC/DCS/PM/APC/SOS strings up
#: to their terminator (BEL, ESC \\ or the C1 ST), or ESC and one more character
_ESCAPE_RE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
                        r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
                        r"|\x1b.?", re.S)
#: C0 controls, DEL and C1 controls; tab and newline are kept only in multi-line text
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_KEEP_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: Any, multiline: bool = False, html: bool = False) -> str:
    """``text`` (from a data file: a variant name, a host, a note, a commit subject) as it may
    reach a terminal, a mail or markdown: ANSI/OSC escape sequences removed, then every other
    control character (C0, DEL, C1; tab and newline too unless ``multiline``) replaced by
    ``?``; lone surrogates replaced too.  With ``html``, ``&``, ``<`` and ``>`` are escaped
    (markdown renders raw HTML)."""
    s = "" if text is None else str(text)
    s = s.encode("utf-8", "replace").decode("utf-8") if any("\ud800" <= c <= "\udfff" for c in s) else s
    s = _ESCAPE_RE.sub("", s)
    s = (_CONTROL_KEEP_RE if multiline else _CONTROL_RE).sub("?", s)
    return _html.escape(s, quote=False) if html else s


__all__ = ["NA", "printable", "p", "pct", "ci", "ci_header", "cell", "md_table", "df_to_markdown"]
