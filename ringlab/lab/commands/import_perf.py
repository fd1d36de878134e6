"""Turn pasted `perf stat` output (human text or -x, CSV) into rows, one per perf stat block;
with --c2c, `perf c2c report --stdio` text into rows, one per cache line (ringlab.tools.perfc2c, ringlab.report.c2c).

Quote markers from mail replies (`> >`) are ignored, so a thread can be pasted as is.
Exit codes: 0 ok, 1 no perf stat block found, 2 unreadable FILE.
"""
from __future__ import annotations

import json
import os
import sys

import click

from ringlab.errors import DataError, ParamError
from ringlab.lab.commands import options
from ringlab.rundir.outputs import check_output
from ringlab.report import c2c
from ringlab.tools import kmod_perf, perfstat


@click.command(cls=options.Command)
@click.argument("file", cls=options.Argument, metavar="FILE", help="text file with perf stat output ('-' for stdin)")
@click.option("--csv", metavar="OUT", default=None, help="write the rows to this CSV file")
@click.option("--json", is_flag=True, help="print the parsed blocks as JSON instead of a table")
@click.option("--kmod", is_flag=True,
              help="`perf stat -r N insmod MODULE ARGS` blocks: add module, args, push/pop CPUs (kmod rows)")
@click.option("--c2c", is_flag=True,
              help="FILE is `perf c2c report --stdio` text: one row per cache line (HITM, loads, stores)")
@click.option("--ring", metavar="SPEC", default=None,
              help="with --c2c: label the ring's lines; "
                   "SPEC base=ADDR[,queue=ADDR,size=N][,layout=batch|prebatch|FILE.json][,line=BYTES]")
@click.option("--throughput", metavar="MOPS", type=float, default=None,
              help="with --c2c: the run's throughput (Mops/s), printed beside the HITM counts")
def command(**params) -> int:
    return run(options.Args(params))


#: perf stat text larger than this is refused (a pasted block is a few kilobytes)
MAX_INPUT_BYTES = 64 << 20

#: columns shown in the table (the CSV has all of them)
TABLE_COLUMNS = ["block", "label", "variant", "module", "args", "cpu_req_producer", "cpu_req_consumer",  # --kmod
                 "runs", "elapsed_s", "elapsed_var_pct", "task_clock", "cycles",
                 "instructions", "ipc", "branches", "branch_misses", "counter_errors"]


def run(args) -> int:
    allowed = "allowed: a readable text file with perf stat output, or '-' for stdin"
    try:
        if args.file == "-":
            text = sys.stdin.read(MAX_INPUT_BYTES + 1)
        else:
            if os.path.exists(args.file) and not os.path.isfile(args.file):
                raise ParamError(f"parameter 'FILE': {args.file!r} is not a regular file; {allowed}")
            with open(args.file, encoding="utf-8", errors="replace") as f:
                text = f.read(MAX_INPUT_BYTES + 1)
    except OSError as e:
        raise ParamError(f"parameter 'FILE': cannot read {args.file!r}: {e.strerror}; {allowed}") from None
    if len(text) > MAX_INPUT_BYTES:
        raise DataError(f"{args.file}: larger than {MAX_INPUT_BYTES >> 20} MiB; expected pasted perf stat output")
    if args.csv:
        check_output(args.csv, "--csv")
        out = os.path.dirname(args.csv) or "."
        if os.path.isdir(args.csv) or not os.path.isdir(out):
            raise ParamError(f"parameter '--csv': {args.csv!r} is a directory or in a folder that does not exist; "
                             "allowed: a file path in an existing folder")
    if args.c2c or args.ring or args.throughput is not None:
        return c2c.cli_run(text, args)
    blocks = perfstat.parse(text)
    if not blocks:
        raise DataError(f"{args.file}: no perf stat output found; expected 'Performance counter stats for ...' "
                        "blocks or `perf stat -x,` lines")
    if args.kmod:
        df = kmod_perf.perf_rows(text)
    else:
        df = perfstat.blocks_to_rows(blocks)
    if args.csv:
        df.to_csv(args.csv, index=False)
    if args.json:
        print(json.dumps([b.to_dict() for b in blocks], indent=2))
    else:
        cols = [c for c in TABLE_COLUMNS if c in df.columns and df[c].notna().any() and (df[c] != "").any()]
        fmt = df[cols].copy()
        if "label" in fmt:
            fmt["label"] = fmt["label"].fillna("")
        for c in fmt.columns:
            # counts print as integers (17424187640, not 1.74242e+10); NaN stays NaN
            if fmt[c].dtype.kind == "f" and c not in ("elapsed_s", "ipc") and \
                    (fmt[c].dropna() % 1 == 0).all() and fmt[c].notna().any():
                fmt[c] = fmt[c].astype("Int64")
        print(fmt.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
        cmds = sorted({b.command for b in blocks if b.command})
        for c in cmds:
            print(f"command: {c}")
        print(f"{len(blocks)} block(s)" + (f"; rows written to {args.csv}" if args.csv else ""))
    return 0
