"""``ringlab import-perf --c2c``: a ``perf c2c report`` as a 72-column table of its cache lines,
labelled with the ring's fields, with HITMs per ring cache line beside the run's throughput,
and as CSV (``--csv``) or JSON."""
from __future__ import annotations

import json

import pandas as pd

from ringlab.errors import ParamError
from ringlab.rundir.outputs import check_output
from ringlab.tools.c2c_ring import RingLayout, label_lines, label_offsets, ring_summary
from ringlab.tools.perfc2c import parse, records

WIDTH = 72


def _cut(s: str, w: int) -> str:
    return s if len(s) <= w else s[:max(w - 1, 0)] + "~"


def format_lines(df: pd.DataFrame, width: int = WIDTH) -> str:
    """One row per cache line: index, address, ring fields, HITM total/local/remote, loads,
    stores, in at most ``width`` columns (the ring fields are cut with '~' to fit)."""
    def n(v):
        return "-" if v is None or (isinstance(v, float) and v != v) or v is pd.NA else str(int(v))
    num_cols = [("hitm", "hitm_total"), ("lcl", "hitm_local"), ("rmt", "hitm_remote"),
                ("loads", "loads"), ("stores", "stores")]
    if "peer" in df and (pd.to_numeric(df["peer"], errors="coerce").fillna(0) > 0).any():
        num_cols.insert(3, ("peer", "peer"))     # Arm SPE reports: peer snoops instead of HITMs
    ring = "ring_line" in df
    cells = [[str(r.get("index", i)), r["address_hex"], r.get("ring_line", "") or ""] +
             [n(r.get(c)) for _, c in num_cols] for i, r in enumerate(df.to_dict(orient="records"))]
    heads = ["#", "cache line", "ring fields"] + [h for h, _ in num_cols]
    w = [max([len(heads[k])] + [len(c[k]) for c in cells]) for k in range(len(heads))]
    rest = width - (sum(w) - w[2]) - (len(w) - 1)
    w[2] = max(min(w[2], rest), 6)
    out = []
    for row in [heads] + cells:
        parts = [row[0].rjust(w[0]), row[1].ljust(w[1])] + ([_cut(row[2], w[2]).ljust(w[2])] if ring else []) + \
                [row[k].rjust(w[k]) for k in range(3, len(row))]
        out.append(" ".join(parts).rstrip())
    return "\n".join(out)


def format_summary(summary: pd.DataFrame, width: int = WIDTH) -> str:
    lines = []
    for r in summary.to_dict(orient="records"):
        share = r.get("hitm_share_pct")
        share_s = f"{share:5.1f}%" if share == share else "   - "
        lines.append(_cut(f"{r['ring_group']}: {int(r['lines'])} line(s), HITM {int(r['hitm_total'])} "
                          f"({share_s.strip()}; lcl {int(r['hitm_local'] or 0)}, rmt {int(r['hitm_remote'] or 0)})",
                          width))
    if "throughput_mops" in summary and len(summary):
        lines.append(f"throughput: {summary['throughput_mops'].iloc[0]:g} Mops/s (as given)")
    return "\n".join(lines)


def import_c2c(text: str, source: str, csv: str | None = None, ring: str | None = None,
               throughput: float | None = None, as_json: bool = False) -> int:
    """``ringlab import-perf --c2c``: parse, label with ``ring`` (a ``RingLayout.from_spec``
    spec), print the 72-column table (or JSON), write the per-line CSV to ``csv`` and, when
    the report has a Pareto, the per-offset rows beside it (``NAME.offsets.csv``)."""
    if throughput is not None and not (throughput > 0):
        raise ParamError(f"parameter '--throughput': {throughput!r}; allowed: a throughput > 0 (Mops/s)")
    layout = RingLayout.from_spec(ring) if ring else None
    reports = parse(text, source)
    lines, offsets = [], []
    for k, rep in enumerate(reports, 1):
        df = label_lines(rep, layout) if layout else rep.lines.copy()
        off = label_offsets(rep, layout) if layout else rep.offsets.copy()
        df.insert(0, "report", k)
        df.insert(1, "sort_on", rep.sort_on)
        if not off.empty:
            off.insert(0, "report", k)
        lines.append(df)
        offsets.append(off)
    all_lines = pd.concat(lines, ignore_index=True)
    all_off = pd.concat([o for o in offsets if not o.empty], ignore_index=True) if any(
        not o.empty for o in offsets) else pd.DataFrame()
    off_path = None
    if csv and not all_off.empty:
        off_path = offsets_path(csv)
        check_output(off_path, "--csv")      # NAME.offsets.csv: refused in a run folder, as --csv is
    if csv:
        all_lines.drop(columns=["line_no"]).to_csv(csv, index=False)
        if off_path:
            all_off.drop(columns=["line_no"]).to_csv(off_path, index=False)
    if as_json:
        out = []
        for rep, df, off in zip(reports, lines, offsets):
            d = rep.to_dict()
            d["lines"], d["offsets"] = records(df), records(off)      # with the ring labels
            out.append(d)
        print(json.dumps(out, indent=2, default=str))
        return 0
    for k, (rep, df) in enumerate(zip(reports, lines), 1):
        if len(reports) > 1:
            print(f"report {k} (line {rep.first_line}):")
        if rep.info.get("Events"):
            print(_cut(f"events: {rep.info['Events']}", WIDTH))
        print(f"sorted on: {rep.sort_on or '?'}; {len(df)} cache line(s)"
              + (f", {len(offsets[k - 1])} offset row(s)" if not offsets[k - 1].empty else ""))
        print(format_lines(df))
        if layout:
            print(format_summary(ring_summary(df, throughput)))
    if throughput is not None and not layout:
        print(f"throughput: {throughput:g} Mops/s (as given)")
    if csv:
        print(f"rows written to {csv}")
        if off_path:
            print(f"offset rows written to {off_path}")
    return 0


def offsets_path(csv: str) -> str:
    """Where the Pareto's offset rows go beside ``--csv OUT``: OUT without .csv + '.offsets.csv'."""
    p = str(csv)
    return (p[:-4] if p.endswith(".csv") else p) + ".offsets.csv"




def cli_run(text: str, args) -> int:
    """The ``--c2c`` branch of ``ringlab import-perf`` (FILE already read and ``--csv`` checked)."""
    if not getattr(args, "c2c", False):
        raise ParamError("parameters '--ring'/'--throughput': allowed only with --c2c")
    if getattr(args, "kmod", False):
        raise ParamError("parameters '--c2c' and '--kmod': allowed: one of them (--kmod reads perf stat blocks)")
    source = "<stdin>" if args.file == "-" else args.file
    return import_c2c(text, source, csv=args.csv, ring=args.ring, throughput=args.throughput,
                      as_json=args.json)


__all__ = ["WIDTH", "cli_run", "format_lines", "format_summary", "import_c2c", "offsets_path"]
