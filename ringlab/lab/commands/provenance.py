"""Did A and B run the same code or different code (binary, source set, measured command), and when?

    ringlab provenance DIR [--json]
    ringlab provenance DIR --against OTHER_DIR     (stale data across two runs?)
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from ringlab.errors import ParamError
from ringlab.lab.commands import options
from ringlab.report import provenance
from ringlab.rundir import RunOutput
from ringlab.fmt import printable


@click.command(cls=options.Command)
@click.argument("run_dir", cls=options.Argument, metavar="DIR", help="a run folder (holds env.json and raw.csv)")
@click.option("--against", metavar="DIR2", help="compare with another run folder (stale data?)")
@click.option("--json", is_flag=True, help="print the result as JSON")
def command(**params) -> int:
    return run(options.Args(params))


def _yn(v) -> str:
    return {True: "yes", False: "NO", None: "unknown"}[v]


def format_check(c: dict) -> str:
    git = c.get("git") or {}
    commit = (git.get("commit") or "unknown")[:12] + (" (dirty)" if git.get("dirty") else "")
    out = [f"run {c['run_id']} ({c['experiment']} on {c['host']}), status {c['status']}",
           f"  started {c['started_utc']}  ended {c['ended_utc'] or '-'}  ringlab {commit}"]
    if c.get("compiler"):
        comp = c["compiler"] if isinstance(c["compiler"], str) else json.dumps(c["compiler"])
        out.append(f"  compiler {comp}  flags {c.get('flags') or '-'}")
    out.append("variants:")
    for v, d in sorted(c["variants"].items()):
        shas = ", ".join(s[:12] for s in d["sha256"]) or "-"
        src = ", ".join(s[:12] for s in d.get("source_sha256") or []) or "-"
        out.append(f"  {v:12s} binary {shas:14s} source set {src:14s} measured {d['first'] or '-'} .. "
                   f"{d['last'] or '-'}  ({d['ok_rows']}/{d['rows']} rows ok)")
    for v, d in sorted(c["variants"].items()):
        if d.get("regrouped"):
            out.append(f"  {v}: layouts {', '.join(d['regrouped'])} each ran from more than one copy-group "
                       "binary (same layout seed and sources: a later stage rebuilt the last, partial group)")
    if c.get("command_error"):
        out.append(f"measured commands: not compared ({c['command_error']})")
    elif c.get("command_source"):
        out.append(f"measured commands: {c['command_source']}")
    if c["pairs"]:
        out.append("pairs:")
    for p in c["pairs"]:
        out.append(f"  {p['a']} vs {p['b']}: {p['verdict']}")
        for e in p.get("evidence") or []:
            out.append(f"    - {e}")
    for pr in c["problems"]:
        out.append(f"WARNING: {pr}")
    return "\n".join(out)


def format_compare(c: dict) -> str:
    out = [f"{c['a']}  vs  {c['b']}"]
    g = c["git"]
    out.append(f"  ringlab commit {(g['a'] or '?')[:12]} vs {(g['b'] or '?')[:12]}" + (" (same)" if g["same"] else ""))
    for v, d in sorted(c["variants"].items()):
        out.append(f"  {v:12s} same binary {_yn(d['same_binary'])}; same sources {_yn(d['same_sources'])}; "
                   f"identical measurements {_yn(d['identical_measurements'])}; "
                   f"measured {d['measured_a'][0] or '-'} / {d['measured_b'][0] or '-'}")
    if not c["variants"]:
        out.append("  no variant in common")
    for pr in c["problems"]:
        out.append(f"WARNING: {pr}")
    return "\n".join(out)


def run(args) -> int:
    for d in [args.run_dir] + ([args.against] if args.against else []):
        # corrupt files: DataError (exit 2) naming the file and line
        run = RunOutput(d)
        if not Path(d).is_dir() or run.has_raw:
            run.read()
        elif run.has_env:
            run.env_file
    try:
        res = (provenance.compare_runs(args.run_dir, args.against) if args.against
               else provenance.check(args.run_dir))
    except FileNotFoundError as e:
        raise ParamError(f"parameter 'DIR': {e}; allowed: a run folder written by `ringlab run`") from None
    if args.json:
        print(json.dumps(res, indent=2, default=str))
    else:
        # text from the run's files reaches the terminal without control characters or escapes
        print(printable(format_compare(res) if args.against else format_check(res), multiline=True))
    return 1 if res["problems"] else 0
