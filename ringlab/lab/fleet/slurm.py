"""Slurm through its own commands: the argv of ``sbatch``, ``sacct``, ``squeue``, ``scancel`` and
``sinfo``, and the parsing of what they print.  No Python client library: the argv is what an
administrator reads in the logs, and nothing beyond Slurm's own tools has to be installed."""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ringlab.errors import ParamError

#: sacct's fields, in the order ``ringlab fleet status`` asks for them
SACCT_FIELDS = ("JobID", "JobName", "NodeList", "State", "ExitCode", "Elapsed")
#: squeue's format giving the same fields where it knows them (no exit code while queued)
SQUEUE_FORMAT = "%i|%j|%N|%T|%M"
#: the states of a job that has ended
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL",
            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED")
_TIME_RE = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}){0,2}|UNLIMITED|INFINITE)$")


@dataclass
class JobState:
    job_id: str
    name: str = ""
    node: str = ""
    state: str = "UNKNOWN"
    exit_code: str = ""
    elapsed: str = ""
    source: str = "sacct"

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


def require(tool: str) -> str:
    """The path of a Slurm command, or ParamError (exit 2) naming it."""
    path = shutil.which(tool)
    if path is None:
        raise ParamError(f"'{tool}' not found on PATH; allowed: a machine with the Slurm client "
                         "commands (Debian: apt-get install slurm-client)")
    return path


def check_time(limit: str) -> str:
    if not _TIME_RE.match(limit or ""):
        raise ParamError(f"parameter '--time': {limit!r} is not a Slurm time limit; allowed: MINUTES, "
                         "HH:MM:SS, D-HH:MM:SS")
    return limit


def sbatch_argv(script: Path, node: str, job_name: str, log_dir: Path, time_limit: str,
                partition: str | None = None, export: dict[str, str] | None = None) -> list[str]:
    """One exclusive job on one named node; its stdout/stderr in ``log_dir`` as %x-%j.out/.err."""
    argv = ["sbatch", "--parsable", "--exclusive", "-N", "1", f"--nodelist={node}",
            f"--time={check_time(time_limit)}", f"--job-name={job_name}",
            f"--output={log_dir / '%x-%j.out'}", f"--error={log_dir / '%x-%j.err'}",
            f"--chdir={log_dir}"]
    if partition:
        argv.append(f"--partition={partition}")
    if export:
        argv.append("--export=" + ",".join(["ALL"] + [f"{k}={v}" for k, v in export.items()]))
    return argv + [str(script)]


def submit(argv: list[str]) -> str:
    """Run sbatch; the job id it printed (``--parsable``: ``ID`` or ``ID;CLUSTER``)."""
    require("sbatch")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise ParamError(f"sbatch refused the job for {_arg(argv, '--nodelist=')}: "
                         + " ".join((p.stderr or p.stdout).split())[:300])
    job = p.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise ParamError(f"sbatch printed {p.stdout.strip()[:80]!r}; expected a job id")
    return job


def _arg(argv: list[str], prefix: str) -> str:
    return next((a[len(prefix):] for a in argv if a.startswith(prefix)), "?")


def partition_nodes(partition: str, constraint: str | None = None) -> list[str]:
    """The nodes of a partition (``sinfo -N -h -p P -o %N``), with a feature constraint if given."""
    require("sinfo")
    argv = ["sinfo", "-N", "-h", "-p", partition, "-o", "%N|%f" if constraint else "%N"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise ParamError(f"parameter '--partition': sinfo failed for {partition!r}: "
                         + " ".join(p.stderr.split())[:200])
    return parse_sinfo_nodes(p.stdout, constraint)


def parse_sinfo_nodes(text: str, constraint: str | None = None) -> list[str]:
    """Node names from sinfo's lines (``NODE`` or ``NODE|FEATURES``), each once, in order; with a
    constraint, only nodes whose features hold every ``&``-joined name in it."""
    want = [c for c in re.split(r"[&,]", constraint or "") if c]
    out: list[str] = []
    for line in text.splitlines():
        node, _, feats = line.strip().partition("|")
        if not node or node in out:
            continue
        if want and not set(want) <= set(feats.split(",")):
            continue
        out.append(node)
    return out


def known_nodes() -> set[str] | None:
    """Every node Slurm knows (``sinfo -N -h -o %N``), or None when sinfo cannot tell."""
    if shutil.which("sinfo") is None:
        return None
    p = subprocess.run(["sinfo", "-N", "-h", "-o", "%N"], capture_output=True, text=True, timeout=60)
    return set(p.stdout.split()) if p.returncode == 0 else None


def parse_sacct(text: str) -> dict[str, JobState]:
    """sacct ``-n -P`` lines -> job id -> JobState; job steps (``ID.batch``, ``ID.0``) are skipped."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        f = line.strip().split("|")
        if len(f) < len(SACCT_FIELDS) or "." in f[0]:
            continue
        state = f[3].split()[0] if f[3].strip() else "UNKNOWN"   # "CANCELLED by 0"
        out[f[0]] = JobState(f[0], f[1], f[2], state, f[4], f[5], "sacct")
    return out


def parse_squeue(text: str) -> dict[str, JobState]:
    """squeue ``-h -o %i|%j|%N|%T|%M`` lines -> job id -> JobState."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        f = line.strip().split("|")
        if len(f) < 5 or not f[0]:
            continue
        out[f[0]] = JobState(f[0], f[1], f[2], f[3] or "UNKNOWN", "", f[4], "squeue")
    return out


def job_states(job_ids: list[str]) -> dict[str, JobState]:
    """State of each job: from accounting (``sacct``), else the job completion log (``sacct -c``,
    jobcomp/filetxt), then ``squeue`` for jobs still queued or running.  A job none of them knows
    is absent from the result."""
    if not job_ids:
        return {}
    ids = ",".join(job_ids)
    fields = ["-n", "-P", "-o", ",".join(SACCT_FIELDS)]
    out: dict[str, JobState] = {}
    if shutil.which("sacct"):
        for extra in ([], ["-c"]):
            p = subprocess.run(["sacct", *extra, "-j", ids, *fields], capture_output=True,
                               text=True, timeout=60)
            if p.returncode == 0:
                out = parse_sacct(p.stdout)
                if extra:
                    for s in out.values():
                        s.source = "jobcomp"
                break
    missing = [j for j in job_ids if j not in out or not out[j].finished]
    if missing and shutil.which("squeue"):
        p = subprocess.run(["squeue", "-h", "-j", ",".join(missing), "-o", SQUEUE_FORMAT],
                           capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            out.update(parse_squeue(p.stdout))
    return {j: out[j] for j in job_ids if j in out}


