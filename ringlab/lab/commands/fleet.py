"""Run ringlab on many machines through Slurm, one exclusive node per host, merged by host.

    ringlab fleet submit --nodes a,b,c -- reproduce --only 10 --profile quick
    ringlab fleet submit --partition bench --constraint x86 -- run ptr_ring -p profile smoke
    ringlab fleet status FLEET-ID
    ringlab fleet collect FLEET-ID
    ringlab fleet submit --resume FLEET-ID
"""
from __future__ import annotations

import sys

import click

from ringlab.errors import ParamError
from ringlab.fmt import printable
from ringlab.lab import fleet
from ringlab.lab.commands import options


@click.group(cls=options.Group, subcommand_metavar="ACTION [ARGS]...")
def command() -> None:
    pass


@command.command("submit", cls=options.Command, help="one exclusive Slurm job per node (command after --)",
                 context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@click.option("--nodes", metavar="NODES", help="node names, comma-separated")
@click.option("--partition", metavar="PARTITION", help="every node of this partition (sinfo -N -p P)")
@click.option("--constraint", metavar="CONSTRAINT", help="with --partition: only nodes with these features (a&b)")
@click.option("--time", default="1:00:00", metavar="TIME", help="Slurm time limit per job (default 1:00:00)")
@click.option("--allow-dirty", is_flag=True, help="submit from a tree with uncommitted changes")
@click.option("--resume", metavar="FLEET-ID", help="re-queue only the nodes whose runs are not complete")
@click.argument("cmd", cls=options.Argument, metavar="COMMAND", nargs=-1, type=click.UNPROCESSED,
                help="after --: 'reproduce [--only ...] [--profile P]' or 'run EXPERIMENT ...'")
def _submit_command(**params) -> int:
    return run(options.Args({"fleet_command": "submit", **params}))


@command.command("status", cls=options.Command, help="each node's job state (sacct, else squeue)")
@click.argument("fleet_id", cls=options.Argument, metavar="FLEET-ID")
def _status_command(**params) -> int:
    return run(options.Args({"fleet_command": "status", **params}))


@command.command("collect", cls=options.Command,
                 help="which hosts delivered complete runs, which failed and why; rebuilds results/README.md",
                 short_help="which hosts delivered complete runs, which failed and why; rebuilds results/README.md")
@click.argument("fleet_id", cls=options.Argument, metavar="FLEET-ID")
def _collect_command(**params) -> int:
    return run(options.Args({"fleet_command": "collect", **params}))


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _submit(args) -> int:
    if args.resume:
        if args.cmd and args.cmd != ["--"]:
            raise ParamError("parameter '--resume': re-queues the fleet's own command; allowed: no command after --")
        fleet.resume(args.resume, log=_log)
        return 0
    if not args.cmd or args.cmd == ["--"]:
        raise ParamError("parameter 'COMMAND': missing; allowed: -- reproduce ... or -- run EXPERIMENT ...")
    nodes = fleet.choose_nodes(args.nodes, args.partition, args.constraint)
    doc = fleet.submit(nodes, args.cmd, args.time, args.partition, args.constraint, args.allow_dirty,
                       log=_log)
    print(doc["fleet_id"])
    return 0


def _status(args) -> int:
    doc, states = fleet.status(args.fleet_id)
    print(printable(f"fleet {doc['fleet_id']} at {doc['commit'][:12]}: ringlab {doc['kind']} {' '.join(doc['command'])}"))
    for node, entry in doc["nodes"].items():
        job = entry["jobs"][-1] if entry["jobs"] else "-"
        st = states.get(job)
        line = f"  {node:20s} job {job:>8s} {st.state if st else 'UNKNOWN':12s}"
        if st is not None:
            line += f" exit {st.exit_code or '-'} elapsed {st.elapsed or '-'} ({st.source})"
        else:
            line += " (neither accounting nor squeue knows the job)"
        print(printable(line))
    return 0


def _collect(args) -> int:
    doc, verdicts, index = fleet.collect(args.fleet_id)
    ok = [v for v in verdicts if v.verdict == "complete"]
    print(f"fleet {doc['fleet_id']}: {len(ok)} of {len(verdicts)} hosts delivered complete runs")
    for v in verdicts:
        where = ", ".join(str(r.path) for r in v.runs if r.path is not None) or "-"
        print(printable(f"  {v.verdict.upper() if v.verdict != 'complete' else 'ok':9s} {v.node} ({v.host}): {where}"
                        + (f": {v.why}" if v.why else "")))
    print(f"index: {index}" if index else "index: no complete run; results/README.md left as it is")
    return 0 if len(ok) == len(verdicts) else 1


def run(args) -> int:
    return {"submit": _submit, "status": _status, "collect": _collect}[args.fleet_command](args)


