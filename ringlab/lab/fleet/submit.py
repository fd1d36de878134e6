"""``ringlab fleet submit``: one exclusive Slurm job per node, all from one commit of the checkout,
each writing its runs to results/<experiment>/<host>/... on the shared filesystem."""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from ringlab import paths, rundir
from ringlab.errors import ParamError
from ringlab.names import check_name
from ringlab.lab.fleet import record, slurm
from ringlab.lab.fleet.collect import verdicts
from ringlab.lab.fleet.command import parse_command, reproduce_args
from ringlab.rundir import utc_now
from ringlab.run import new_run_id


def host_of(node: str) -> str:
    """The host id of a node's runs (results/<experiment>/<host>/): the Slurm node name, made a
    host id as ringlab's host_id makes hostnames ([a-z0-9-])."""
    return re.sub(r"[^a-z0-9-]+", "-", node.split(".")[0].lower()).strip("-") or "unknown"


def choose_nodes(nodes: str | None, partition: str | None, constraint: str | None) -> list[str]:
    """The nodes to run on: ``--nodes a,b`` (each known to Slurm) or the partition's nodes."""
    if (nodes is None) == (partition is None):
        raise ParamError("parameters '--nodes'/'--partition': give exactly one (--nodes a,b,c or "
                         "--partition P [--constraint C])")
    if partition:
        out = slurm.partition_nodes(partition, constraint)
        if not out:
            raise ParamError(f"parameter '--partition': no node in {partition!r}"
                             + (f" with constraint {constraint!r}" if constraint else ""))
        for n in out:
            check_name(n, f"parameter '--partition': node of {partition!r}")
        return out
    out = list(dict.fromkeys(n.strip() for n in nodes.split(",") if n.strip()))
    if not out:
        raise ParamError("parameter '--nodes': empty node list; allowed: node names, comma-separated")
    for n in out:
        check_name(n, "parameter '--nodes'")
    known = slurm.known_nodes()
    unknown = [n for n in out if known is not None and n not in known]
    if unknown:
        raise ParamError(f"parameter '--nodes': unknown node {unknown[0]!r}; allowed: "
                         + ", ".join(sorted(known)[:20]))
    return out


def job_script(doc: dict, node: str, args: list[str]) -> str:
    """The batch script: check the checkout is at the fleet's commit, then exec ringlab with the
    submitting Python (so SIGTERM from Slurm reaches the run, which marks its folder interrupted)."""
    q = shlex.quote
    host, checkout = host_of(node), doc["checkout"]
    return "\n".join([
        "#!/bin/bash",
        f"# ringlab fleet {doc['fleet_id']}: node {node}, commit {doc['commit']}",
        "set -u",
        f"cd {q(checkout)} || exit 2",
        'have=$(git rev-parse HEAD 2>/dev/null)',
        f'if [ "$have" != {q(doc["commit"])} ]; then',
        f'  echo "ringlab fleet: checkout {checkout} is at ${{have:-no commit}}, the fleet runs '
        f'{doc["commit"]}; not running" >&2; exit 2',
        "fi",
        f"export RINGLAB_HOST={q(host)} RINGLAB_RESULTS={q(doc['results'])}",
        f"export RINGLAB_BUILD=${{RINGLAB_BUILD:-{q(str(Path(checkout) / 'build' / 'hosts' / host))}}}",
        "exec " + " ".join(q(a) for a in [doc["python"], "-m", "ringlab", *args]),
        ""])


def node_args(doc: dict, node: str, todo: list[str] | None, resume: bool) -> list[str]:
    """The ringlab arguments of one node's job (``todo``: the notebooks still to run)."""
    kind, cmd = doc["kind"], doc["command"]
    if kind == "run":
        return ["run", *cmd, "--out", doc["nodes"][node]["run_dir"]] + (["--resume"] if resume else [])
    profile, _ = reproduce_args(cmd)
    return ["reproduce", "--profile", profile, "--only", *todo, "--host", host_of(node)]


def _submit_node(doc: dict, node: str, todo: list[str] | None, resume: bool) -> str:
    check_name(node, "node")
    d = record.fleet_dir(doc["fleet_id"], Path(doc["results"]))
    n = len(doc["nodes"][node]["jobs"])
    script = d / f"{node}-{n}.sh"
    script.write_text(job_script(doc, node, node_args(doc, node, todo, resume)), encoding="utf-8")
    script.chmod(0o755)
    argv = slurm.sbatch_argv(script, node, f"ringlab-{node}", d, doc["time"], doc.get("partition"))
    job = slurm.submit(argv)
    doc["nodes"][node]["jobs"].append(job)
    doc["nodes"][node]["sbatch"] = argv
    return job


def submit(nodes: list[str], command: list[str], time_limit: str = "1:00:00",
           partition: str | None = None, constraint: str | None = None,
           allow_dirty: bool = False, log=print) -> dict:
    """Submit one job per node; returns the fleet record (also in results/fleet/<id>/fleet.json)."""
    slurm.require("sbatch")
    slurm.check_time(time_limit)
    for node in nodes:
        check_name(node, "node")
    kind, args = parse_command(command)
    commit, dirty = record.git_commit(paths.ROOT, allow_dirty)
    doc = record.new_record(new_run_id(), commit, dirty, sys.executable, args, kind, time_limit,
                            partition, constraint)
    todo = reproduce_args(args)[1] if kind == "reproduce" else None
    for node in nodes:
        entry: dict = {"host": host_of(node), "jobs": []}
        if kind == "run":
            entry["run_dir"] = str(Path(doc["results"]) / args[0].replace("_", "-") / host_of(node) / new_run_id())
        doc["nodes"][node] = entry
    record.save(doc, Path(doc["results"]))
    jobs = {}
    for node in nodes:
        jobs[node] = _submit_node(doc, node, todo, resume=False)
        log(f"fleet {doc['fleet_id']}: node {node}: job {jobs[node]}")
    doc["submissions"].append({"time": utc_now(), "resume": False, "jobs": jobs})
    record.save(doc, Path(doc["results"]))
    return doc


def resume(fleet_id: str, log=print) -> dict:
    """Re-queue only the nodes whose runs are not complete and whose job has ended: a ``run``
    continues its run folder with --resume (no row twice); ``reproduce`` reruns the missing notebooks."""
    slurm.require("sbatch")
    doc = record.load(fleet_id)
    record.git_commit(paths.ROOT, allow_dirty=bool(doc.get("dirty")))
    states = slurm.job_states([n["jobs"][-1] for n in doc["nodes"].values() if n["jobs"]])
    jobs = {}
    for v in verdicts(doc, states):
        if v.verdict == "complete" or v.verdict in ("pending", "running"):
            log(f"fleet {fleet_id}: node {v.node}: {v.verdict}, not re-queued")
            continue
        exists = any(r.path is not None and rundir.RunOutput(r.path).env_json.is_file() for r in v.runs)
        todo = [r.name for r in v.runs if not r.complete] if doc["kind"] == "reproduce" else None
        jobs[v.node] = _submit_node(doc, v.node, todo, resume=exists)
        log(f"fleet {fleet_id}: node {v.node}: {v.verdict}, re-queued as job {jobs[v.node]}")
    if jobs:
        doc["submissions"].append({"time": utc_now(), "resume": True, "jobs": jobs})
        record.save(doc, Path(doc["results"]))
    return doc
