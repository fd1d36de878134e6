"""``ringlab fleet status`` and ``collect``: each node's job state and what its runs delivered."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ringlab.errors import DataError
from ringlab.lab.fleet import record, slurm
from ringlab.lab.reproduce import NOTEBOOKS
from ringlab.lab.results_index import is_complete, write_index
from ringlab import rundir
from ringlab.lab.fleet.command import reproduce_args

#: lines of a job's .err log a failed node's verdict quotes (the last non-empty one)
ERR_TAIL = 20


@dataclass
class NodeRun:
    """One experiment's or notebook's state on one node."""
    name: str               # the experiment (run) or the notebook (reproduce)
    path: Path | None       # its run folder, None when none was written
    state: str              # complete, running, interrupted, failed, skipped, missing
    reason: str = ""

    @property
    def complete(self) -> bool:
        return self.state == "complete"


@dataclass
class NodeVerdict:
    node: str
    host: str
    verdict: str            # complete, pending, running, failed, missing
    job: str = ""
    job_state: str = ""
    runs: list[NodeRun] = field(default_factory=list)
    why: str = ""


def _run_state(path: Path, notebook: bool) -> NodeRun:
    """The state of a run folder, read through ringlab.rundir (a folder "running" with no lock
    held reads as interrupted); a notebook run also needs its executed notebook without error."""
    name = path.parent.parent.name
    try:
        st = rundir.RunOutput(path).run_status()
    except (DataError, OSError) as e:
        return NodeRun(name, path, "failed", str(e).splitlines()[0][:200])
    if notebook and st.state == "complete" and not is_complete(path):
        return NodeRun(name, path, "failed", "the notebook failed (see its error cell)")
    return NodeRun(name, path, st.state, st.reason)


def node_runs(doc: dict, node: str) -> list[NodeRun]:
    """The runs a node owes: the run folder of a ``run`` fleet; for ``reproduce``, per notebook the
    newest folder results/<experiment>/<host>/<run-id> started after the fleet was submitted
    (run ids begin with their UTC start, as fleet ids do)."""
    entry, root = doc["nodes"][node], Path(doc["results"])
    if doc["kind"] == "run":
        p = Path(entry["run_dir"])
        if not rundir.RunOutput(p).env_json.is_file():
            return [NodeRun(doc["command"][0], None, "missing", "no run folder written")]
        return [_run_state(p, notebook=False)]
    since = doc["fleet_id"][:16]
    out = []
    for nb in reproduce_args(doc["command"])[1]:
        d = root / NOTEBOOKS[nb] / entry["host"]
        found = sorted(p for p in d.glob("*") if p.is_dir() and p.name[:16] >= since) if d.is_dir() else []
        runs = [_run_state(p, notebook=True) for p in found]
        best = next((r for r in reversed(runs) if r.complete), runs[-1] if runs else None)
        out.append(NodeRun(nb, best.path, best.state, best.reason) if best else
                   NodeRun(nb, None, "missing", "no run folder written"))
    return out


def err_tail(doc: dict, node: str, job: str) -> str:
    """The last non-empty line of the job's .err log (``ringlab-<node>-<job>.err``), or ''."""
    p = Path(doc["results"]) / "fleet" / doc["fleet_id"] / f"ringlab-{node}-{job}.err"
    try:
        lines = [ln.strip() for ln in p.read_text(errors="replace").splitlines()[-ERR_TAIL:] if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def verdicts(doc: dict, states: dict[str, slurm.JobState]) -> list[NodeVerdict]:
    """One verdict per node: complete when every run it owes is complete; pending/running while
    its last job is queued or running; else failed (a run folder not complete) or missing."""
    out = []
    for node, entry in doc["nodes"].items():
        job = entry["jobs"][-1] if entry["jobs"] else ""
        st = states.get(job)
        runs = node_runs(doc, node)
        v = NodeVerdict(node, entry["host"], "complete", job, st.state if st else "", runs)
        if all(r.complete for r in runs):
            out.append(v)
            continue
        if st is not None and st.state in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED"):
            v.verdict = st.state.lower() if st.state in ("PENDING", "RUNNING") else "running"
            out.append(v)
            continue
        bad = [r for r in runs if not r.complete]
        v.verdict = "missing" if all(r.path is None for r in bad) else "failed"
        why = [f"{r.name}: {r.state}" + (f" ({r.reason})" if r.reason else "") for r in bad]
        if st is not None and st.state != "COMPLETED":
            why.append(f"job {job} {st.state}" + (f" exit {st.exit_code}" if st.exit_code else ""))
        tail = err_tail(doc, node, job)
        if tail:
            why.append(f"log: {tail}")
        v.why = "; ".join(why)
        out.append(v)
    return out


def status(fleet_id: str) -> tuple[dict, dict[str, slurm.JobState]]:
    doc = record.load(fleet_id)
    jobs = [j for n in doc["nodes"].values() for j in n["jobs"]]
    return doc, slurm.job_states(jobs)


def collect(fleet_id: str) -> tuple[dict, list[NodeVerdict], Path | None]:
    """Each node's verdict, and the results index rebuilt (None when no run was complete)."""
    doc, states = status(fleet_id)
    vs = verdicts(doc, states)
    index = write_index(Path(doc["results"])) if any(v.verdict == "complete" for v in vs) else None
    return doc, vs, index
