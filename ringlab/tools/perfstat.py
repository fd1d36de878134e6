"""Parse ``perf stat`` output: the human text (as pasted in mails) and ``-x,`` CSV.

The seeds quote perf stat blocks in mail replies, so the text parser
tolerates quote markers (``> >``), several blocks pasted one after another,
the program's own output line before a block, old (``task-clock (msec)``) and
new (``msec task-clock``) spellings, thousands separators, ``<not supported>``
/ ``<not counted>`` and the multiplexing share ``(83.33%)``.

Note on ``( +- x% )``: perf prints the relative standard error of the mean
over the ``-r`` runs, not the run-to-run standard deviation (see
benchmark-methods.md §5): σ ≈ x·√runs.  We keep perf's number as
``variance_pct`` and add ``rel_sd_pct`` (x·√runs) in blocks_to_rows().
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

import pandas as pd

from ringlab.schema import COUNTER_EVENTS

#: perf's event names -> ringlab.schema names
EVENT_ALIASES = {
    "cycles": "cycles", "cpu-cycles": "cycles",
    "instructions": "instructions",
    "branches": "branches", "branch-instructions": "branches",
    "branch-misses": "branch_misses",
    "cache-misses": "cache_misses",
    "task-clock": "task_clock",
    "context-switches": "context_switches", "cs": "context_switches",
    "cpu-migrations": "cpu_migrations", "migrations": "cpu_migrations",
    "page-faults": "page_faults", "faults": "page_faults",
}

_QUOTE = re.compile(r"^[\s>]*")
_HEADER = re.compile(r"Performance counter stats for (?:'(?P<cmd>.*)'|(?P<other>[^:(]+?))"
                     r"\s*(?:\((?P<runs>\d+) runs\))?\s*:")
_NUM = r"[0-9][0-9,]*(?:\.[0-9]+)?"
_COUNTER = re.compile(
    rf"^(?P<value><not supported>|<not counted>|{_NUM})\s+(?:(?P<unit>msec|ms|ns|us|sec|seconds|Joules|MiB)\s+)?"
    r"(?P<event>[A-Za-z_][\w\-./:=,@]*?)(?:\s+\((?P<unit_old>msec)\))?(?=\s|$)(?P<rest>.*)$")
_VAR = re.compile(r"\(\s*\+-\s*(?P<v>[0-9.]+)\s*%\s*\)")
_MUX = re.compile(r"\((?P<p>[0-9]+(?:\.[0-9]+)?)%\)")
_ELAPSED = re.compile(rf"(?P<v>{_NUM})\s*(?:\+-\s*(?P<abs>[0-9.]+)\s*)?seconds time elapsed"
                      r"(?:\s*\(\s*\+-\s*(?P<pct>[0-9.]+)\s*%\s*\))?")
_USERSYS = re.compile(rf"^(?P<v>{_NUM})\s+seconds (?P<which>user|sys)\b")
_PERF_CMD = re.compile(r"(^|[#$]\s*|\s)perf\s+stat\b")
_SECTION = [re.compile(r"^-{3,}\s*(?P<l>.*?)\s+begin\s*-{3,}\s*$", re.I),
            re.compile(r"^(?P<l>(?:before|after)\b[^:]{0,60}):\s*$", re.I)]


@dataclass
class PerfStatBlock:
    """One ``perf stat`` invocation's output.

    events: {perf event name: {"value": float|None, "unit": str|None, "variance_pct": float|None,
    "supported": bool, "counted": bool, "multiplexed_pct": float|None, "metric": str|None}}.
    ``value`` is None for <not supported>/<not counted>, never 0.
    """
    command: str | None = None
    runs: int | None = None
    events: dict = field(default_factory=dict)
    elapsed_s: float | None = None
    elapsed_var_pct: float | None = None
    user_s: float | None = None
    sys_s: float | None = None
    program_output: str = ""
    label: str | None = None        # "unpatched ptr_ring.c", "Before this patchset" ... when pasted with one
    source: str = "text"            # text | csv

    def to_dict(self) -> dict:
        return asdict(self)


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def _event_dict(value_tok: str, unit: str | None, rest: str) -> dict:
    supported = value_tok != "<not supported>"
    counted = not value_tok.startswith("<")
    m_var = _VAR.search(rest)
    mux = None
    for m in _MUX.finditer(rest):
        mux = float(m.group("p"))    # the last "(xx.xx%)" without "+-" is the running-time share
    metric = None
    if "#" in rest:
        metric = rest.split("#", 1)[1]
        metric = _VAR.sub("", metric)
        metric = _MUX.sub("", metric).strip() or None
    return {"value": _num(value_tok) if counted else None, "unit": unit,
            "variance_pct": float(m_var.group("v")) if m_var else None,
            "supported": supported, "counted": counted,
            "multiplexed_pct": mux if mux is not None and mux < 100.0 else None,
            "metric": metric}


def parse_perf_stat(text: str) -> list[PerfStatBlock]:
    """All ``perf stat`` blocks (human format) in ``text``, in order."""
    blocks: list[PerfStatBlock] = []
    cur: PerfStatBlock | None = None
    pending: list[str] = []        # lines since the last block, to find the program output
    label = None
    for raw in text.splitlines():
        line = _QUOTE.sub("", raw).rstrip()
        for sec in _SECTION:
            m = sec.match(line)
            if m:
                label = m.group("l").strip()
        m = _HEADER.search(line)
        if m:
            cur = PerfStatBlock(command=m.group("cmd") if m.group("cmd") is not None else m.group("other").strip(),
                                runs=int(m.group("runs")) if m.group("runs") else None,
                                program_output=_program_output(pending), label=label)
            blocks.append(cur)
            pending = []
            line = line[m.end():].strip()
            if not line:
                continue
        if cur is None:
            pending.append(line)
            continue
        if not line.strip():
            continue
        m = _ELAPSED.search(line)
        if m:
            cur.elapsed_s = _num(m.group("v"))
            cur.elapsed_var_pct = float(m.group("pct")) if m.group("pct") else None
            continue
        m = _USERSYS.match(line)
        if m:
            setattr(cur, f"{m.group('which')}_s", _num(m.group("v")))
            continue
        m = _COUNTER.match(line.strip())
        if m and not line.strip().startswith(("#",)):
            unit = m.group("unit") or m.group("unit_old")
            cur.events[m.group("event")] = _event_dict(m.group("value"), unit, m.group("rest"))
            continue
        # Anything else ends the block (mail text, the next command's output ...).
        cur = None
        pending = [line]
    return blocks


def _program_output(lines: list[str]) -> str:
    """The program's own output: lines after the last `perf stat` command line before the header."""
    idx = [i for i, l in enumerate(lines) if _PERF_CMD.search(l)]
    if not idx:
        return ""
    out = [l.strip() for l in lines[idx[-1] + 1:] if l.strip()]
    return "\n".join(out)


def parse_perf_csv(text: str) -> list[PerfStatBlock]:
    """``perf stat -x,`` output.  A new block starts when an event repeats.

    Field layout: value, unit, event, [variance%, ] run time, run pct, metric value, metric unit
    (variance only with -r); a leading "CPUn" field (-A) is dropped.  Lines that
    are not CSV records (the program's stdout) are kept as program_output.
    """
    blocks: list[PerfStatBlock] = []
    cur = None
    other: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        f = [x.strip() for x in line.split(",")]
        if f and re.fullmatch(r"CPU\d+", f[0]):
            f = f[1:]
        if len(f) < 3 or not (f[0] in ("<not supported>", "<not counted>") or re.fullmatch(r"[0-9.]+", f[0])) \
                or not f[2]:
            other.append(line)
            continue
        value, unit, event = f[0], f[1] or None, f[2]
        rest = f[3:]
        var = None
        if rest and rest[0].endswith("%"):
            var = float(rest[0][:-1]) if rest[0][:-1] else None
            rest = rest[1:]
        pct = None
        if len(rest) >= 2:
            try:
                pct = float(rest[1])
            except ValueError:
                pct = None
        metric = " ".join(x for x in rest[2:4] if x) or None
        if cur is None or event in cur.events:
            cur = PerfStatBlock(source="csv", program_output="\n".join(other))
            other = []
            blocks.append(cur)
        counted = not value.startswith("<")
        cur.events[event] = {"value": float(value) if counted else None, "unit": unit,
                             "variance_pct": var, "supported": value != "<not supported>", "counted": counted,
                             "multiplexed_pct": pct if pct is not None and pct < 100.0 else None,
                             "metric": metric}
    return blocks


def looks_like_csv(text: str) -> bool:
    """True when the text is ``perf stat -x,`` output rather than the human format."""
    if "Performance counter stats" in text:
        return False
    return any(re.match(r"^\s*(<not supported>|<not counted>|[0-9.]+),[^,]*,[A-Za-z]", l) for l in text.splitlines())


def parse(text: str) -> list[PerfStatBlock]:
    """Either format, detected."""
    return parse_perf_csv(text) if looks_like_csv(text) else parse_perf_stat(text)


def normalize_event(name: str) -> str:
    """perf event name -> raw.csv column name (branch-misses -> branch_misses, cycles:u -> cycles)."""
    base = re.sub(r":[ukhHGp]+$", "", name)            # modifiers
    base = re.sub(r"^cpu(?:_core|_atom)?/(.+)/$", r"\1", base)  # cpu/cycles/ (hybrid PMUs)
    return EVENT_ALIASES.get(base, re.sub(r"[^A-Za-z0-9]+", "_", base).strip("_").lower())


def blocks_to_rows(blocks: list[PerfStatBlock]):
    """Tidy DataFrame: one row per block, counter columns named like raw.csv.

    Columns: block, label, command, runs, program_output, elapsed_s, elapsed_var_pct,
    elapsed_rel_sd_pct, user_s, sys_s, then per event ``<name>`` (task_clock in msec as perf
    prints it), ``<name>_var_pct`` and ``<name>_multiplexed_pct``; ``counters_multiplexed``,
    ``counter_errors`` ("branches: not supported; ..."), ``ipc`` and ``branch_miss_rate``.
    Unsupported or uncounted events are NaN, never 0.
    """
    rows = []
    for i, b in enumerate(blocks):
        row = {"block": i, "label": b.label, "command": b.command, "runs": b.runs,
               "program_output": b.program_output, "elapsed_s": b.elapsed_s,
               "elapsed_var_pct": b.elapsed_var_pct,
               "elapsed_rel_sd_pct": _rel_sd(b.elapsed_var_pct, b.runs),
               "user_s": b.user_s, "sys_s": b.sys_s}
        errors, mux = [], False
        for ev, d in b.events.items():
            col = normalize_event(ev)
            val = d["value"]
            if val is not None and col == "task_clock" and d.get("unit") in ("ns",):
                val = val / 1e6
            row[col] = math.nan if val is None else val
            row[f"{col}_var_pct"] = d["variance_pct"] if d["variance_pct"] is not None else math.nan
            row[f"{col}_multiplexed_pct"] = d["multiplexed_pct"] if d["multiplexed_pct"] is not None else math.nan
            mux |= d["multiplexed_pct"] is not None
            if not d["supported"]:
                errors.append(f"{col}: not supported")
            elif not d["counted"]:
                errors.append(f"{col}: not counted")
        row["counters_multiplexed"] = mux
        row["counter_errors"] = "; ".join(errors)
        cyc, ins = row.get("cycles", math.nan), row.get("instructions", math.nan)
        row["ipc"] = ins / cyc if _finite(cyc) and _finite(ins) and cyc else math.nan
        br, bm = row.get("branches", math.nan), row.get("branch_misses", math.nan)
        row["branch_miss_rate"] = bm / br if _finite(br) and _finite(bm) and br else math.nan
        rows.append(row)
    df = pd.DataFrame(rows)
    # schema counters first, in schema order, then anything else perf reported
    if not df.empty:
        lead = [c for c in df.columns if c in ("block", "label", "command", "runs", "program_output", "elapsed_s",
                                              "elapsed_var_pct", "elapsed_rel_sd_pct", "user_s", "sys_s")]
        ctr = [c for c in COUNTER_EVENTS if c in df.columns]
        rest = [c for c in df.columns if c not in lead and c not in ctr]
        df = df[lead + ctr + rest]
    return df


def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _rel_sd(pct: float | None, runs: int | None) -> float:
    # perf's "+- x%" is the standard error of the mean; σ/mean = x·√n.
    if pct is None or not runs:
        return math.nan
    return pct * math.sqrt(runs)
