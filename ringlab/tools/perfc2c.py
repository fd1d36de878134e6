"""Parse ``perf c2c report --stdio`` text: its cache lines and their offsets, as tables.

Two tables are read:

* the "Shared Data Cache Line Table": one row per contended cache line (address, HITM
  total/local/remote, records, loads, stores and the rest of perf's columns);
* the "Shared Cache Line Distribution Pareto", where present: per cache line, one row per
  offset and code address (shares of the line's HITMs and stores, cycles, symbol, object,
  source line, nodes).

Column sets differ between perf versions: before v5.x the table has "Tot Hitm" then
"LLC Load Hitm Total/Lcl/Rmt" and "Store Reference Total/L1Hit/L1Miss"; later versions print
"Load Hitm Total/LclHitm/RmtHitm", "Total Stores", "Stores L1Hit/L1Miss/N/A" (or "Anylvl"),
a "Snoop Peer" column and, on Arm, "Peer Snoop" and "Load Peer Total/Local/Remote".  Columns
are named from the two header lines and the ``# .....`` ruler under them, so any order and
any extra column is read; the names ringlab relies on are mapped to one spelling (``ALIASES``).
Mail quote markers (``> >``) and indentation before the ``#`` of the ruler are removed, so a
report pasted in a mail reads as it is.  Anything else is refused with a ``DataError`` that
names the file, the line and what was expected.

Which of the ring's fields each cache line holds is ``ringlab.tools.c2c_ring``; the printed
table and ``ringlab import-perf --c2c`` are ``ringlab.report.c2c``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab.errors import DataError, ParamError

#: default cache line size of perf c2c (it groups addresses by 64 bytes on x86 and arm64)
LINE_BYTES = 64

#: header text (group, top and low line, lower case) -> ringlab's column name
ALIASES = {
    # Shared Data Cache Line Table
    "index": "index",
    "cacheline address": "address", "cacheline node": "node", "cacheline pa cnt": "pa_cnt",
    "load hitm total": "hitm_total", "llc load hitm total": "hitm_total",
    "load hitm lclhitm": "hitm_local", "llc load hitm lcl": "hitm_local",
    "load hitm rmthitm": "hitm_remote", "llc load hitm rmt": "hitm_remote",
    "snoop peer": "peer", "load peer total": "peer",
    "load peer local": "peer_local", "load peer remote": "peer_remote",
    "total records": "records", "total loads": "loads",
    "total stores": "stores", "store reference total": "stores",
    "stores l1hit": "stores_l1hit", "store reference l1hit": "stores_l1hit",
    "stores l1miss": "stores_l1miss", "store reference l1miss": "stores_l1miss",
    "stores n/a": "stores_na", "stores anylvl": "stores_na",
    "core load hit fb": "ld_fbhit", "core load hit l1": "ld_l1hit", "core load hit l2": "ld_l2hit",
    "llc load hit lclhit": "ld_lclhit", "llc load hit llc": "ld_lclhit",
    "llc load hit lclhitm": "ld_lclhitm",
    "llc load hit rmt": "ld_rmthit", "rmt load hit rmthit": "ld_rmthit",
    "rmt load hit rmthitm": "ld_rmthitm",
    "load dram lcl": "dram_lcl", "load dram rmt": "dram_rmt", "llc ld miss": "llc_ld_miss",
    "load hit total": "ld_hit_total",
    # Shared Cache Line Distribution Pareto
    "num": "num",
    "hitm rmthitm": "rmt_hitm_pct", "hitm rmt": "rmt_hitm_pct",
    "hitm lclhitm": "lcl_hitm_pct", "hitm lcl": "lcl_hitm_pct",
    "store refs l1 hit": "store_l1hit_pct", "store refs l1 miss": "store_l1miss_pct",
    "store refs n/a": "store_na_pct", "store refs any lvl": "store_na_pct",
    "data address offset": "offset", "data address node": "node", "data address pa cnt": "pa_cnt",
    "code address": "code_address",
    "cycles rmt hitm": "cycles_rmt_hitm", "cycles lcl hitm": "cycles_lcl_hitm",
    "cycles load": "cycles_load", "cycles peer": "cycles_peer",
    "cycles rmt peer": "cycles_rmt_peer", "cycles lcl peer": "cycles_lcl_peer",
    "cpu cnt": "cpu_cnt", "symbol": "symbol", "shared object": "object",
    "source:line": "source_line", "node": "nodes", "node{cpu list}": "nodes",
    "node{cpus %hitms %stores}": "nodes", "node{cpus %peers %stores}": "nodes",
    "pid": "pid", "tid": "tid",
}
#: Pareto columns whose key depends on the table ("total records", "snoop peer")
PARETO_ALIASES = {"total records": "records", "snoop peer": "peer_pct"}

#: the columns of the line table that every perf version has
REQUIRED_LINE_COLUMNS = ("address", "records")

_TABLE = re.compile(r"Shared Data Cache Line Table")
_PARETO = re.compile(r"Shared Cache Line Distribution Pareto")
_SECTION = re.compile(r"^\s*={10,}\s*$")
_DASH_GROUP = re.compile(r"-+ ([^-]+(?:-[^-\s][^-]*)*?) -+|-{3,}")
_RULER = re.compile(r"^(?P<prefix>.*?)#(?P<body>(?:\s+\.+)+)\s*$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_INT = re.compile(r"^-?[0-9]+$")
_PCT = re.compile(r"^-?[0-9]+(?:\.[0-9]+)?%$")
_FLOAT = re.compile(r"^-?[0-9]+\.[0-9]+$")
_INFO = re.compile(r"^\s*(?P<k>[A-Za-z][^:]*?)\s*:\s*(?P<v>.*?)\s*$")
_DASHES = re.compile(r"^\s*-{10,}\s*$")


@dataclass
class C2cReport:
    """One perf c2c report: its cache-line table and, where printed, its Pareto.

    ``lines``: one row per cache line, columns named as in ``ALIASES`` (others kept under
    their own header words), ``hitm_total``/``hitm_local``/``hitm_remote`` always present
    (local + remote where perf did not print a total).  ``sort_on`` is the header of the
    percentage column perf sorted on ("Tot Hitm", "Snoop Peer", "Peer Snoop", "Rmt Hitm",
    ...), its values in ``sort_pct``.  ``offsets``: one row per cache line, offset and code
    address of the Pareto (``line_index``, ``line_address``, ``offset``, ``address`` = line +
    offset, ...); empty when the report has no Pareto.  ``info``: the "key : value" lines of
    the summary sections (Trace Event Information, c2c details), as text.
    """
    source: str
    first_line: int
    lines: pd.DataFrame
    offsets: pd.DataFrame
    sort_on: str | None = None
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"source": self.source, "first_line": self.first_line, "sort_on": self.sort_on, "info": self.info,
                "lines": records(self.lines), "offsets": records(self.offsets)}


def records(df: pd.DataFrame) -> list:
    """Rows as JSON-ready dicts: NaN/NA as None, numpy scalars as Python numbers."""
    def plain(v):
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            return None
        return v.item() if hasattr(v, "item") else v
    return [{k: plain(v) for k, v in r.items()} for r in df.to_dict(orient="records")]


def _value(tok: str):
    """A table cell: int, hex address, percentage, float, 'N/A' (None) or text (as is)."""
    if tok in ("", "N/A", "-"):
        return None
    if _INT.match(tok):
        return int(tok)
    if _HEX.match(tok):
        return int(tok, 16)
    if _PCT.match(tok):
        return float(tok[:-1])
    if _FLOAT.match(tok):
        return float(tok)
    return tok


def _key(*parts: str) -> str:
    return " ".join(" ".join(p.split()) for p in parts if p and p.strip()).lower()


def _snake(key: str) -> str:
    return re.sub(r"[^0-9a-z%]+", "_", key).strip("_").replace("%", "pct") or "col"


class _Header:
    """Column segments from the ``# .....`` ruler and names from the two header lines above it."""

    def __init__(self, prefix: str, top: str, low: str, ruler: str, aliases: dict, where: str):
        self.prefix = prefix
        spans = [(m.start(), m.end()) for m in re.finditer(r"\.+", ruler)]
        if not spans:
            raise DataError(f"{where}: expected the '# .....' column ruler under the header")
        self.spans = spans
        # boundaries sit in the gap before each column: [start_i - 1, start_{i+1} - 1)
        self.bounds = [max(s - 1, 1) for s, _ in spans]
        groups = [(m.start(), m.end(), (m.group(1) or "").strip()) for m in _DASH_GROUP.finditer(top)]
        rest = _DASH_GROUP.sub(lambda m: " " * (m.end() - m.start()), top)
        tops = [(m.start(), m.end(), m.group(0)) for m in re.finditer(r"\S+", rest)]
        keys = []
        for i, (s, e) in enumerate(spans):
            seg_lo = self.bounds[i]
            seg_hi = self.bounds[i + 1] if i + 1 < len(spans) else max(len(top), len(low), e) + 1
            group = " ".join(g for gs, ge, g in groups if gs < e and ge > s)
            word = " ".join(t for ts, te, t in tops if seg_lo <= (ts + te) // 2 < seg_hi)
            lowtxt = low[seg_lo:seg_hi].strip() if i + 1 < len(spans) else low[seg_lo:].strip()
            keys.append(_key(group, word, lowtxt))
        self.keys = keys
        names, seen = [], set()
        for k in keys:
            n = aliases.get(k) or ALIASES.get(k) or _snake(k)
            while n in seen:
                n += "_2"
            seen.add(n)
            names.append(n)
        self.names = names

    def cells(self, line: str) -> list[str]:
        out = []
        for i, b in enumerate(self.bounds):
            hi = self.bounds[i + 1] if i + 1 < len(self.bounds) else None
            out.append(line[b:hi].strip() if hi is not None else line[b:].strip())
        return out


def _strip_prefix(raw: str, prefix: str) -> str | None:
    """The line without the quote/indent ``prefix`` of its table; None when it has another one."""
    line = raw.rstrip("\n")
    if line.startswith(prefix):
        return line[len(prefix):]
    if line.rstrip() == prefix.rstrip():
        return ""
    return None


def _read_header(lines: list[str], i: int, where, name: str):
    """Find the header of a table that starts after line ``i`` (the title); returns
    (prefix, top, low, ruler, index of the first line after the ruler)."""
    for j in range(i + 1, min(i + 12, len(lines))):
        m = _RULER.match(lines[j])
        if m and j >= 2:
            prefix = m.group("prefix")
            top = _strip_prefix(lines[j - 2], prefix)
            low = _strip_prefix(lines[j - 1], prefix)
            if top is None or low is None or not top.startswith("#") or not low.startswith("#"):
                break
            return prefix, top, low, lines[j][len(prefix):], j + 1
    raise DataError(f"{where(i + 1)}: expected the {name} header: two '#' header lines and a "
                    "'# .....' column ruler (perf c2c report --stdio)")


def parse(text: str, source: str = "<text>") -> list[C2cReport]:
    """Every perf c2c report in ``text`` (one per "Shared Data Cache Line Table"), in order.

    ``DataError`` when the text holds no such table, or a table or Pareto that does not have
    the shape perf prints; the message names ``source``, the line and what was expected."""
    lines = text.splitlines()

    def where(n: int) -> str:
        return f"{source}: line {n}"

    starts = [i for i, ln in enumerate(lines) if _TABLE.search(ln)]
    if not starts:
        hint = ""
        if any(_PARETO.search(ln) for ln in lines):
            hint = " (a Pareto without its table is not enough)"
        elif any("Trace Event Information" in ln for ln in lines):
            hint = " (a --stats-only report has no table)"
        raise DataError(f"{source}: no 'Shared Data Cache Line Table' found{hint}; expected "
                        "`perf c2c report --stdio` output")
    reports = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        prev_end = starts[n - 1] if n else 0
        info = _info(lines[prev_end:start])
        reports.append(_parse_one(lines, start, end, source, where, info))
    return reports


def _info(block: list[str]) -> dict:
    out, on = {}, False
    key = None
    for ln in block:
        s = re.sub(r"^[\s>]*", "", ln)
        if re.search(r"Trace Event Information|Global Shared Cache Line Event Information|c2c details", s):
            on = True
            continue
        if not on or _SECTION.match(s) or not s.strip():
            continue
        m = _INFO.match(s)
        if m and m.group("k"):
            key = m.group("k")
            out[key] = m.group("v")
        elif s.lstrip().startswith(":") and key:       # a second event under "Events"
            out[key] += ", " + s.split(":", 1)[1].strip()
    return out


def _parse_one(lines, start, end, source, where, info) -> C2cReport:
    prefix, top, low, ruler, i = _read_header(lines, start, where, "Shared Data Cache Line Table")
    hdr = _Header(prefix, top, low, ruler, {}, where(i))
    rows, raw_toks = [], []
    pareto_at = None
    while i < end:
        raw = lines[i]
        i += 1
        if _PARETO.search(raw):
            pareto_at = i - 1
            break
        s = _strip_prefix(raw, prefix)
        if s is None:
            if rows:
                break           # text with another quote depth after the table
            raise DataError(f"{where(i)}: expected a row of the Shared Data Cache Line Table starting with "
                            f"{prefix!r} like its header, got {raw.strip()[:60]!r}")
        if s.startswith("#") or not s.strip() or _SECTION.match(s):
            continue
        if not s[:1].isspace():
            if rows:
                break           # mail prose or a fence after the table
            raise DataError(f"{where(i)}: expected a cache-line row of the Shared Data Cache Line Table "
                            f"({len(hdr.names)} columns), got {s.strip()[:60]!r}")
        toks = s.split()
        if len(toks) != len(hdr.names):
            raise DataError(f"{where(i)}: expected {len(hdr.names)} columns in a Shared Data Cache Line "
                            f"Table row ({', '.join(hdr.keys)}), got {len(toks)}")
        for t, c in zip(toks, hdr.names):
            if c == "address":
                if not _HEX.match(t):
                    raise DataError(f"{where(i)}: expected a hex cache-line address (0x...) in column "
                                    f"'Address', got {t!r}")
            elif not (_INT.match(t) or _PCT.match(t) or t == "N/A" or _FLOAT.match(t) or _HEX.match(t)):
                raise DataError(f"{where(i)}: expected a number in column {c!r}, got {t!r}")
        row = {c: _value(t) for t, c in zip(toks, hdr.names)}
        row["line_no"] = i
        rows.append(row)
        raw_toks.append(toks)
    missing = [c for c in REQUIRED_LINE_COLUMNS if c not in hdr.names]
    if missing:
        raise DataError(f"{where(start + 1)}: the Shared Data Cache Line Table has no {', '.join(missing)} "
                        f"column; found {', '.join(hdr.keys)}")
    if not rows:
        raise DataError(f"{where(start + 1)}: the Shared Data Cache Line Table has no rows; expected at least "
                        "one cache line (perf found no shared cache lines in this recording?)")
    df = pd.DataFrame(rows)
    pct_cols = [c for k, c in enumerate(hdr.names) if all(_PCT.match(t[k]) for t in raw_toks)]
    sort_on = None
    if pct_cols:
        c = pct_cols[0]
        sort_on = " ".join(w.capitalize() if w.islower() else w for w in hdr.keys[hdr.names.index(c)].split())
        df = df.rename(columns={c: "sort_pct"})
        # a count column that shares the percentage column's header ("Snoop Peer") takes its name
        df = df.rename(columns={n: n[:-2] for n in df.columns if n.endswith("_2") and n[:-2] not in df})
    _hitm_columns(df, where(start + 1), hdr.keys)
    df.insert(0, "address_hex", df["address"].map(lambda a: f"0x{a:x}"))
    offsets = pd.DataFrame()
    if pareto_at is not None:
        offsets = _parse_pareto(lines, pareto_at, end, source, where, df)
    return C2cReport(source=source, first_line=start + 1, lines=df, offsets=offsets, sort_on=sort_on, info=info)


def _hitm_columns(df: pd.DataFrame, where: str, keys) -> None:
    for col, alt in (("hitm_local", "ld_lclhitm"), ("hitm_remote", "ld_rmthitm")):
        if col not in df and alt in df:
            df[col] = df[alt]
    if "hitm_total" not in df:
        if "hitm_local" in df and "hitm_remote" in df:
            df["hitm_total"] = df["hitm_local"].fillna(0) + df["hitm_remote"].fillna(0)
        else:
            raise DataError(f"{where}: the Shared Data Cache Line Table has no HITM columns; expected "
                            "'Load Hitm'/'LLC Load Hitm' Total, Lcl and Rmt, or 'LLC Load Hit LclHitm' and "
                            f"'RMT Load Hit RmtHitm'; found {', '.join(keys)}")
    for col in ("hitm_local", "hitm_remote"):
        if col not in df:
            df[col] = pd.NA
    if "stores" not in df and "stores_l1hit" in df:
        df["stores"] = df["stores_l1hit"].fillna(0) + df.get("stores_l1miss", 0) + df.get("stores_na", 0)
    if "loads" not in df:
        df["loads"] = pd.NA


def _parse_pareto(lines, at, end, source, where, table: pd.DataFrame) -> pd.DataFrame:
    prefix, top, low, ruler, i = _read_header(lines, at, where, "Shared Cache Line Distribution Pareto")
    hdr = _Header(prefix, top, low, ruler, PARETO_ALIASES, where(i))
    if "offset" not in hdr.names:
        raise DataError(f"{where(i - 1)}: the Pareto header has no 'Data address Offset' column; found "
                        f"{', '.join(hdr.keys)}")
    by_index = dict(zip(table["index"], table["address"])) if "index" in table else {}
    rows = []
    cur = None           # (index, address) of the cache line whose offsets follow
    state = None         # "head": after the opening dashes; "closing": after its header line
    while i < end:
        raw = lines[i]
        i += 1
        s = _strip_prefix(raw, prefix)
        if s is None:
            break
        if s.startswith("#") or not s.strip():
            continue
        if _DASHES.match(s):
            state = "rows" if state == "closing" else "head"
            continue
        if state == "head":
            toks = s.split()
            if len(toks) < 2 or not _INT.match(toks[0]) or not _HEX.match(toks[-1]):
                raise DataError(f"{where(i)}: expected a Pareto cache-line header (its number first, its "
                                f"address 0x... last) between the dashed lines, got {s.strip()[:60]!r}")
            cur = (int(toks[0]), int(toks[-1], 16))
            if by_index.get(cur[0]) not in (None, cur[1]):
                raise DataError(f"{where(i)}: Pareto cache line {cur[0]} is at 0x{cur[1]:x}, but the table's "
                                f"line {cur[0]} is at 0x{by_index[cur[0]]:x}")
            state = "closing"
            continue
        if state == "closing":
            raise DataError(f"{where(i)}: expected the dashed line that closes the Pareto header of cache "
                            f"line {cur[0]}, got {s.strip()[:60]!r}")
        if not s[:1].isspace():
            break           # text after the report
        if cur is None:
            raise DataError(f"{where(i)}: expected a dashed line and a cache-line header before the "
                            "Pareto's offset rows")
        if s.strip()[:1] in ("|", "-"):
            continue        # a call chain under an offset row (perf c2c report -g)
        cells = hdr.cells(s)
        row = {}
        for name, cell in zip(hdr.names, cells):
            row[name] = _value(cell) if name not in ("symbol", "object", "source_line", "nodes") \
                else (cell or None)
        if not isinstance(row.get("offset"), int) or not cells[hdr.names.index("offset")].startswith("0x"):
            raise DataError(f"{where(i)}: expected a hex offset (0x...) in the Pareto column 'Offset', got "
                            f"{cells[hdr.names.index('offset')]!r}; the row does not line up with the "
                            "'# .....' ruler")
        for name, cell in zip(hdr.names, cells):
            if name.endswith("_pct") and cell and not _PCT.match(cell):
                raise DataError(f"{where(i)}: expected a percentage in the Pareto column {name!r}, got "
                                f"{cell!r}; the row does not line up with the '# .....' ruler")
        row.pop("num", None)
        row = {"line_index": cur[0], "line_address": cur[1], "address": cur[1] + row["offset"], **row,
               "line_no": i}
        rows.append(row)
    df = pd.DataFrame(rows)
    if not df.empty:
        df.insert(2, "line_address_hex", df["line_address"].map(lambda a: f"0x{a:x}"))
        for c in ("code_address",):
            if c in df:
                df[c + "_hex"] = df[c].map(lambda a: f"0x{a:x}" if isinstance(a, int) else None)
    return df


def parse_file(path) -> list[C2cReport]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ParamError(f"parameter 'FILE': cannot read {str(path)!r}: {e.strerror}; allowed: a readable "
                         "text file with `perf c2c report --stdio` output") from None
    return parse(text, str(path))


__all__ = ["ALIASES", "C2cReport", "LINE_BYTES", "parse", "parse_file", "records"]
