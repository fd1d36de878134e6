"""Run the notebooks through papermill into results/, and keep the index.

``ringlab reproduce [--profile P] [--only NAME ...]`` executes every notebook (or
the named ones) with kernel ``python3`` and an execution timeout.  Each run
writes ``results/<experiment>/<host>/<run-id>/`` holding the executed notebook,
raw.csv, summary.md/csv, env.json and figures/.  A failing notebook does not stop
the others; failures are listed at the end and make the exit code non-zero.
``results/README.md`` is regenerated when a reproduce added at least one complete run
(``results_index.is_complete``); otherwise the tracked index is left as it is.  The runs of a
host without committed runs go to a local host folder (git-ignored, listed in
``results/LOCAL.md``, never in README.md): see ``results_index``.

Only ``reproduce`` writes into results/: it hands each notebook ``out_dir``.  A notebook
run any other way (plain papermill, JupyterLab) without ``out_dir`` writes its run folder
under :func:`scratch_dir` (``$RINGLAB_SCRATCH``, default ``scratch/`` at the repository
root, git-ignored), so a smoke run never changes results/ or its index.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ringlab import catalog, paths
from ringlab.errors import ParamError
from ringlab.names import check_name
from ringlab.rundir import RunOutput
from ringlab.lab.results_index import LOCAL_INDEX, has_published_runs, is_complete, is_local, mark_local, write_index
from ringlab.run import host_id, new_run_id
from ringlab.system.envinfo import HOST_ENV


#: notebook stem -> results experiment folder (ringlab.catalog).  Order is execution order
#: (90 merges what the others wrote).
NOTEBOOKS: dict[str, str] = {n.stem: n.folder for n in catalog.NOTEBOOKS}

PROFILES = ("smoke", "quick", "full")
#: per-cell limit handed to papermill (seconds), by profile
EXECUTION_TIMEOUT = {"smoke": 600, "quick": 1800, "full": 7200}


#: environment variable naming the scratch folder of runs made outside ``ringlab reproduce``
class ReproduceError(ParamError):
    """Bad arguments to reproduce (names the parameter and the allowed values)."""


def run_dir_for(experiment: str, host: str | None = None, run_id: str | None = None,
                root: Path | None = None) -> Path:
    """<root>/<experiment>/<host>/<run-id>/ (``root`` default: the repository's results/)."""
    root = Path(root) if root is not None else paths.results_dir()
    return (root / check_name(experiment, "experiment folder") / check_name(host or host_id(), "host")
            / check_name(run_id or new_run_id(), "run id"))


@dataclass
class Outcome:
    """One notebook's execution: ``ok`` (it ran to its end), ``error`` (why not), and
    ``skipped`` (the reason, where it ran to its end but its run folder says it measured
    nothing here: an input it needs is not on this machine)."""
    notebook: str
    run_dir: Path
    ok: bool
    error: str = ""
    seconds: float = 0.0
    skipped: str = ""

    @property
    def state(self) -> str:
        """"ok", "skipped" or "failed"."""
        return "failed" if not self.ok else "skipped" if self.skipped else "ok"

    def line(self) -> str:
        """``NAME: ok|skipped (reason)|FAILED (error) in S s -> RUN_DIR``."""
        what = {"ok": "ok", "skipped": f"skipped ({self.skipped})", "failed": f"FAILED ({self.error})"}[self.state]
        return f"{self.notebook}: {what} in {self.seconds:.0f} s -> {self.run_dir}"


def skipped_reason(run_dir: Path) -> str:
    """The reason a run folder gives for having measured nothing (env.json status ``skipped``),
    else ""."""
    try:
        run = RunOutput(run_dir)
        if run.status != "skipped":
            return ""
        return " ".join(str(run.env_file.skipped_reason or run.status_line or "skipped").split())
    except Exception:   # noqa: BLE001 - a folder without a readable env.json is not a skipped run
        return ""


def resolve_only(only: list[str] | None) -> list[str]:
    if not only:
        return list(NOTEBOOKS)
    out = []
    for name in only:
        matches = [n for n in NOTEBOOKS if n == name or n.split("-", 1)[0] == name
                   or NOTEBOOKS[n] == name or n.split("-", 1)[-1] == name]
        if not matches:
            raise ReproduceError(f"parameter 'only': unknown notebook {name!r}; allowed: "
                                 + ", ".join(NOTEBOOKS))
        out.extend(m for m in matches if m not in out)
    return [n for n in NOTEBOOKS if n in out]  # keep canonical order


def error_line(e: BaseException) -> str:
    """One line for a failed notebook: a bad parameter (the notebook's validation cell raised
    ParamError or DataError) is its message alone, ``ParamError: parameter 'modes': ...;
    allowed: ...``; anything else is the exception's type and the last line of its text."""
    ename, evalue = getattr(e, "ename", None), getattr(e, "evalue", None)
    if ename in ("ParamError", "DataError") and evalue:
        return f"{ename}: {' '.join(str(evalue).split())}"
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[-1] if text else ''}"


def execute(notebook: str, profile: str = "quick", host: str | None = None,
            parameters: dict | None = None, results_root: Path | None = None,
            timeout: int | None = None) -> Outcome:
    """Execute one notebook with papermill into a fresh run folder."""
    # papermill (pip install papermill) takes seconds to import (jupyter, nbclient) and only
    # `ringlab reproduce` executes notebooks: imported here, so that every other command starts fast
    import papermill as pm
    src = paths.NOTEBOOKS / f"{notebook}.ipynb"
    host = host or host_id()
    root = results_root or paths.results_dir()
    run_dir = run_dir_for(NOTEBOOKS[notebook], host, root=root)
    if not run_dir.parent.exists() and not has_published_runs(root, host):
        # a host without committed runs: its runs stay out of git and out of README.md
        mark_local(run_dir.parent)
    # The notebook is executed into a staging file next to the run folder and
    # moved in afterwards: the runner refuses an existing output folder, and a
    # failed notebook must still be kept (papermill saves it with an error banner).
    staging = run_dir.parent / f".inflight-{run_dir.name}-{notebook}.ipynb"
    staging.parent.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "out_dir": str(run_dir), "host": host}
    params.update(parameters or {})
    t0 = time.monotonic()
    ok, err = True, ""
    # the kernel inherits the environment: its runs record the same host as the folder they go to
    saved_host = os.environ.get(HOST_ENV)
    os.environ[HOST_ENV] = host
    try:
        pm.execute_notebook(str(src), str(staging), parameters=params, kernel_name="python3",
                            cwd=str(paths.NOTEBOOKS), progress_bar=False, log_output=False,
                            execution_timeout=timeout or EXECUTION_TIMEOUT[profile])
    except Exception as e:  # PapermillExecutionError, DeadKernelError, timeouts ...
        ok, err = False, error_line(e)
    finally:
        if saved_host is None:
            os.environ.pop(HOST_ENV, None)
        else:
            os.environ[HOST_ENV] = saved_host
        if staging.exists():
            run_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staging), str(run_dir / f"{notebook}.ipynb"))
    return Outcome(notebook, run_dir, ok, err, time.monotonic() - t0, skipped_reason(run_dir) if ok else "")


def reproduce(profile: str = "quick", only: list[str] | None = None, host: str | None = None,
              results_root: Path | None = None, parameters: dict | None = None,
              log=print) -> list[Outcome]:
    if profile not in PROFILES:
        raise ReproduceError(f"parameter 'profile': unknown value {profile!r}; allowed: {', '.join(PROFILES)}")
    names = resolve_only(only)
    if host is not None:
        check_name(host, "--host")
    outcomes = []
    for nb in names:
        log(f"[reproduce] {nb} (profile={profile}) ...")
        o = execute(nb, profile, host, parameters, results_root)
        log(f"[reproduce] {o.line()}")
        outcomes.append(o)
    root = results_root or paths.results_dir()
    if any(o.ok and is_complete(o.run_dir) for o in outcomes):
        write_index(root)
        local = sorted({o.run_dir.parent.name for o in outcomes if is_local(o.run_dir.parent)})
        if local:
            log(f"[reproduce] runs of host {', '.join(local)} are this checkout's, not committed (git-ignored): "
                f"listed in {Path(root) / LOCAL_INDEX}, not in {Path(root) / 'README.md'}")
    else:
        log(f"[reproduce] no complete run added: {Path(root) / 'README.md'} left as it is")
    return outcomes


def main_summary(outcomes: list[Outcome], seconds: float | None = None) -> tuple[str, int]:
    """The closing lines (every notebook: ok, skipped with the reason, or failed, with its run
    folder; the counts and the wall time) and the exit code: 1 when a notebook failed, else 0
    (a notebook skipped for want of an input on this machine is not a failure)."""
    failed = [o for o in outcomes if o.state == "failed"]
    skipped = [o for o in outcomes if o.state == "skipped"]
    wall = seconds if seconds is not None else sum(o.seconds for o in outcomes)
    head = f"{len(outcomes) - len(failed) - len(skipped)} of {len(outcomes)} notebooks ok"
    if skipped:
        head += f", {len(skipped)} skipped"
    if failed:
        head += f", {len(failed)} failed"
    lines = [f"{head} in {wall:.0f} s"]
    lines += [f"  {o.line()}" for o in outcomes]
    for o in failed:
        lines.append(f"FAILED {o.notebook}: {o.error} (notebook kept at {o.run_dir / (o.notebook + '.ipynb')})")
    if skipped:
        lines.append("Skipped here, and how to get what they need: see each reason above "
                     "(`make reproduce` installs the system packages as root unless RINGLAB_INSTALL=0).")
    return "\n".join(lines), (1 if failed else 0)
