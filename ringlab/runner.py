"""Run an experiment's trials into DIR/raw.csv, the way reviewers ask for.

``run_experiment(name, params, out_dir)`` is the one entry point (the CLI's ``ringlab
run`` and the notebooks call it).  It

1. resolves the parameters through ``Experiment.resolve`` (same names as the notebook's
   parameters cell) and asks the experiment for its trial plan;
2. validates everything that can be validated (parameters, CPUs, output folder,
   binaries) *before* creating the output folder, so bad input leaves nothing behind;
3. orders the plan: seeded, randomized and interleaved in rounds (see ``order_plan``);
4. writes env.json (provenance) at the start, sets the governor on the CPUs in use,
   measures the core-to-core latency of each CPU pair once, then runs each trial in a
   fresh process with a timeout, appending its rows to raw.csv as soon as it ends;
5. updates env.json at the end (or on interruption).

What an experiment sees of the run is the ``RunContext`` (``ctx`` in
``Experiment.plan/command/parse``): ``ctx.values``, ``ctx.binary(name)``,
``ctx.select_pairs(spec)``, ``ctx.pick_single_cpu()``, ``ctx.pair_class(a, b)``,
``ctx.warn(msg)``, ``ctx.out_dir``, ``ctx.run_id``.

Crash safety: raw.csv is opened with O_APPEND, the header goes first, and each trial's
rows go out in one write() followed by fsync, with newlines inside fields escaped so one
row is always one line.  A SIGKILL therefore leaves at most a torn last line, which
``--resume`` truncates away before rerunning the trial that was in flight.
"""
from __future__ import annotations

import csv
import ctypes
import datetime as _dt
import hashlib
import io
import json
import math
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ringlab import paths, schema
from ringlab.experiments import base
from ringlab.experiments.base import ParamError, TrialSpec

#: bytes of stderr kept for a failed trial
STDERR_TAIL = 500
#: statuses a trial can end with (schema.TRIAL_COLUMNS "status")
STATUSES = ("ok", "crash", "timeout", "error", "skipped")


class RunnerError(RuntimeError):
    """The run cannot start or go on for a reason that is not a parameter (missing binary, build failure)."""


class RunInterrupted(KeyboardInterrupt):
    """SIGTERM (or SIGINT) arrived; the in-flight trial was killed and env.json updated."""


@dataclass
class RunResult:
    out_dir: Path
    raw_csv: Path
    env_json: Path
    run_id: str
    #: trials run by this invocation, by status (ok, crash, timeout, error)
    counts: dict[str, int] = field(default_factory=dict)
    #: trials found already done in raw.csv (--resume)
    already_done: int = 0
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())) or "nothing run"
        done = f" ({self.already_done} already done)" if self.already_done else ""
        return f"{self.raw_csv}: {parts}{done}"


# -- small helpers -------------------------------------------------------------------------
def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_run_id() -> str:
    """UTC timestamp plus a random suffix: sortable, and two runs in one second do not clash."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def host_id() -> str:
    try:
        from ringlab.system import envinfo
        return envinfo.host_id()
    except Exception:  # H3's module missing or failing: fall back to what it documents
        return os.environ.get("RINGLAB_HOST") or socket.gethostname().split(".")[0] or "unknown-host"


def default_out_dir(experiment: str, host: str | None = None, run_id: str | None = None) -> Path:
    """results/<experiment>/<host>/<run-id>/ (never an existing folder)."""
    return paths.results_dir() / experiment / (host or host_id()) / (run_id or new_run_id())


_SHA_CACHE: dict[tuple, str] = {}


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file, cached by (path, size, mtime) so per-trial hashing costs nothing."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


def atomic_write_json(path: Path, doc: dict) -> None:
    """temp + fsync + rename: a reader (or a crash) never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2, sort_keys=False, default=str)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def derive(row: dict[str, Any]) -> None:
    """Derived counter columns; NaN whenever an input is missing (never 0)."""
    def f(name):
        v = row.get(name)
        try:
            v = float(v)
        except (TypeError, ValueError):
            return math.nan
        return v

    def ratio(a, b):
        return a / b if (math.isfinite(a) and math.isfinite(b) and b > 0) else math.nan

    cyc, ins, count = f("cycles"), f("instructions"), f("count")
    row.setdefault("ipc", ratio(ins, cyc))
    row.setdefault("branch_miss_rate", ratio(f("branch_misses"), f("branches")))
    row.setdefault("instructions_per_op", ratio(ins, count))
    row.setdefault("cycles_per_op", ratio(cyc, count))
    if "icount_source" not in row:
        row["icount_source"] = "perf" if math.isfinite(ins) else ""


def order_plan(specs: list[TrialSpec], seed: int) -> list[TrialSpec]:
    """Seeded, randomized, interleaved order, in rounds.

    Round r holds trial r of every configuration (variant x parameters x CPU pair),
    shuffled with ``random.Random(seed)``.  Compared with one global shuffle this keeps
    two properties the statistics rely on: every configuration's warm-ups come before its
    measured trials (warm-ups are trials 0..warmup-1), and a slow drift of the machine
    (thermal, a neighbour starting) hits all configurations alike instead of piling onto
    whichever variant happened to be drawn late (Google Benchmark's random interleaving,
    asv's rounds).  The order depends only on the plan and the seed, so --resume
    reproduces it.
    """
    rng = random.Random(seed)
    rounds: dict[int, list[TrialSpec]] = {}
    for s in specs:
        rounds.setdefault(s.trial, []).append(s)
    out: list[TrialSpec] = []
    for r in sorted(rounds):
        block = rounds[r]
        rng.shuffle(block)
        out.extend(block)
    return out


def _cell(v: Any) -> str:
    """One CSV cell.  str() for parameters (so TrialSpec.key() can be rebuilt from the
    file), repr precision for floats, and no raw newlines: one row is one line."""
    if v is None:
        return ""
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    s = str(v)
    if "\n" in s or "\r" in s:
        s = s.replace("\r", "").replace("\n", "\\n")
    return s


class CsvSink:
    """Append-only raw.csv: header first, then each trial's rows in one write + fsync."""

    def __init__(self, path: Path, columns: list[str]):
        self.path, self.columns = path, columns
        new = not path.exists() or path.stat().st_size == 0
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if new:
            self._write([columns])

    def _write(self, rows: list[list[str]]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(rows)
        data = buf.getvalue().encode()
        while data:  # os.write may be partial in theory; loop until all is out
            n = os.write(self.fd, data)
            data = data[n:]
        os.fsync(self.fd)

    def write_rows(self, rows: list[dict[str, Any]]) -> None:
        self._write([[_cell(r.get(c)) for c in self.columns] for r in rows])

    def close(self) -> None:
        os.close(self.fd)


def repair_csv(path: Path) -> int:
    """Truncate a torn last line (a SIGKILL during a write); return bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        # Scan back to the last newline.
        pos, chunk = size, 4096
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            data = f.read(pos - start)
            i = data.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    return size - keep


def read_done(path: Path, config_keys: list[str]) -> tuple[set, list[str] | None]:
    """Keys (as TrialSpec.key()) of the trials already in raw.csv, and its header."""
    done: set = set()
    if not path.exists() or path.stat().st_size == 0:
        return done, None
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return done, None
        idx = {c: i for i, c in enumerate(header)}
        missing = [c for c in config_keys + ["cpu_req_producer", "cpu_req_consumer", "trial"] if c not in idx]
        if missing:
            raise RunnerError(f"{path}: cannot resume, columns {missing} missing from the header")
        for row in reader:
            if len(row) != len(header):
                continue  # cannot happen after repair_csv; be safe anyway
            key = tuple(sorted((k, row[idx[k]]) for k in config_keys)) + (
                ("cpus", f"{row[idx['cpu_req_producer']]}:{row[idx['cpu_req_consumer']]}"),
                ("trial", int(row[idx["trial"]])))
            done.add(key)
    return done, header


# -- the trial process --------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1


def _child_setup() -> None:  # pragma: no cover - runs in the child between fork and exec
    # If the runner itself is SIGKILLed, the kernel kills the trial too: no orphan keeps
    # spinning on a CPU and disturbing the next run.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:
        pass


@dataclass
class TrialOutcome:
    status: str           # ok | crash | timeout
    exit_code: int
    stdout: str
    stderr: str
    wall_s: float


def run_process(argv: list[str], timeout: float) -> TrialOutcome:
    """Run argv (never a shell) in its own session; kill the whole group on timeout.

    ``start_new_session`` puts the trial and anything it forks in a new process group,
    so ``killpg`` reaches grandchildren too; ``communicate`` after the kill reaps it.
    Exceptions (Ctrl-C, SIGTERM) also kill the group before propagating.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_child_setup)

    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    try:
        out, err = proc.communicate(timeout=timeout)
        status = "ok" if proc.returncode == 0 else "crash"
    except subprocess.TimeoutExpired:
        kill_group()
        out, err = proc.communicate()
        status = "timeout"
    except BaseException:
        kill_group()
        proc.communicate()
        raise
    # A trial that exits normally may still leave children behind in its group.
    if status != "timeout":
        kill_group()
    wall = time.perf_counter() - t0
    return TrialOutcome(status, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"), wall)


# -- what an experiment sees ---------------------------------------------------------------
class RunContext:
    """The run as seen by Experiment.plan/command/parse (``ctx``)."""

    def __init__(self, experiment: str, values: dict[str, Any], run_id: str, out_dir: Path,
                 log: Callable[[str], None]):
        self.experiment, self.values, self.run_id, self.out_dir = experiment, values, run_id, out_dir
        self.warnings: list[str] = []
        self._log = log
        self._topo = None
        self._topo_error: str | None = None

    # binaries
    def binary(self, name: str) -> Path:
        """Path of build/bin/NAME (RINGLAB_BUILD moves build/)."""
        return paths.bin_dir() / name

    # topology (ringlab.system.topology)
    @property
    def topology(self):
        if self._topo is None and self._topo_error is None:
            try:
                from ringlab.system.topology import Topology
                self._topo = Topology.read()
            except Exception as e:
                self._topo_error = f"{type(e).__name__}: {e}"
        return self._topo

    def _need_topo(self, what: str):
        topo = self.topology
        if topo is None:
            raise ParamError(f"parameter 'cpus': cannot place threads ({what}) because the CPU topology "
                             f"could not be read ({self._topo_error}); allowed: none")
        return topo

    def select_pairs(self, spec: str, need_two: bool = True) -> list[tuple[int, int, str]]:
        if str(spec).strip().lower() == "none":
            return [(-1, -1, "unpinned")]
        from ringlab.system.topology import select_pairs
        return select_pairs(self._need_topo(spec), spec, need_two=need_two)

    def pick_single_cpu(self) -> int:
        from ringlab.system.topology import pick_single_cpu
        return pick_single_cpu(self._need_topo("single CPU"))

    def pair_class(self, a: int, b: int) -> str:
        if a is None or b is None or a < 0 or b < 0:
            return "unpinned"
        if a == b:
            return "same-cpu"
        topo = self.topology
        if topo is None:
            return ""
        try:
            return topo.pair_class(a, b)
        except Exception:
            return ""

    def warn(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)
            self._log(f"warning: {msg}")


# -- steal time, governor, latency: optional system pieces -----------------------------------
class _Steal:
    """steal ticks on the used CPUs across a trial (ringlab.system.procstat); NaN if unknown."""

    def __init__(self):
        try:
            from ringlab.system import procstat
            self.mod = procstat
            procstat.read_cpu_times()
        except Exception:
            self.mod = None

    def before(self):
        if self.mod is None:
            return None
        try:
            return self.mod.read_cpu_times()
        except Exception:
            return None

    def delta(self, before, cpus: Iterable[int]) -> float:
        if self.mod is None or before is None:
            return math.nan
        try:
            after = self.mod.read_cpu_times()
            used = sorted({c for c in cpus if c is not None and c >= 0}) or None
            v = self.mod.steal_delta(before, after, used)
            return math.nan if v is None else float(v)
        except Exception:
            return math.nan


class _NoGovernor:
    def __init__(self, reason: str):
        self.report = {"changed": False, "reason": reason}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _governor(cpus: list[int], values: dict[str, Any]):
    if not values.get("governor", True):
        return _NoGovernor("not requested (governor=false)")
    try:
        from ringlab.system import governor
    except Exception as e:
        return _NoGovernor(f"ringlab.system.governor unavailable: {e}")
    try:
        return governor.tune(cpus, disable_boost=bool(values.get("disable_boost", False)))
    except Exception as e:  # never abort a run because tuning failed
        return _NoGovernor(f"governor.tune failed: {type(e).__name__}: {e}")


def _report_of(cm, entered) -> dict:
    rep = getattr(entered, "report", None)
    if rep is None:
        rep = getattr(cm, "report", None)
    return dict(rep) if isinstance(rep, dict) else {"report": str(rep)}


def _governor_lines(cm, rep: dict) -> list[str]:
    msgs = getattr(cm, "messages", None)
    if isinstance(msgs, list):
        return [str(m) for m in msgs]
    lines = []
    for k in ("messages", "notes", "errors"):
        v = rep.get(k)
        if isinstance(v, list):
            lines += [str(x) for x in v]
    if rep.get("reason"):
        lines.append(str(rep["reason"]))
    if not lines:
        lines.append(json.dumps(rep, default=str)[:300])
    return lines


# -- parameters and folders ---------------------------------------------------------------
def _check_out_dir(out_dir: Path, resume: bool) -> None:
    """Raise ParamError if out_dir cannot be used; creates nothing."""
    if resume:
        if not (out_dir / "env.json").is_file():
            raise ParamError(f"parameter '--resume': {out_dir} holds no env.json of an earlier run; "
                             "allowed: the folder of an interrupted run")
    elif out_dir.exists():
        raise ParamError(f"parameter '--out': {out_dir} already exists; allowed: a new folder "
                         "(or pass --resume to continue the run in it)")
    anc = out_dir
    while not anc.exists():
        if anc.parent == anc:
            break
        anc = anc.parent
    if not anc.is_dir():
        raise ParamError(f"parameter '--out': {out_dir} is not writable ({anc} is not a folder); "
                         "allowed: a folder path you can write to")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ParamError(f"parameter '--out': {out_dir} is not writable (no write permission on {anc}); "
                         "allowed: a folder path you can write to")
    # Root passes os.access everywhere, and /proc or a read-only mount only fail on
    # creation: really create (and remove) a probe folder in the nearest existing ancestor.
    import tempfile
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ringlab-probe-", dir=anc))
    except OSError as e:
        raise ParamError(f"parameter '--out': {out_dir} is not writable ({anc}: {e.strerror}); "
                         "allowed: a folder path you can write to") from None


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(values, default=str))


def _resolve_for_resume(exp_cls, params: dict, env: dict) -> dict:
    stored = env.get("parameters") or {}
    if env.get("experiment") not in (None, exp_cls.name):
        raise ParamError(f"parameter '--resume': the folder holds a '{env.get('experiment')}' run, "
                         f"not '{exp_cls.name}'; allowed: {env.get('experiment')}")
    merged = dict(stored)
    merged.update(params)
    values = exp_cls.resolve(merged)
    diff = sorted(k for k in set(values) | set(stored)
                  if _jsonable({k: values.get(k)}) != _jsonable({k: stored.get(k)}))
    if diff:
        d = "; ".join(f"{k}: run has {stored.get(k)!r}, given {values.get(k)!r}" for k in diff)
        raise ParamError(f"parameter '{diff[0]}': --resume needs the parameters of the interrupted run "
                         f"({d}); allowed: the values in env.json, or a new --out folder")
    return values


# -- the run ------------------------------------------------------------------------------
def run_experiment(name: str, params: dict[str, Any] | None, out_dir: str | os.PathLike | None = None,
                   resume: bool = False, progress: bool | None = None, build: bool = True,
                   log: Callable[[str], None] | None = None, argv: list[str] | None = None) -> RunResult:
    """Run experiment ``name`` with ``params`` (raw values, parsed by Param.parse) into out_dir.

    ``out_dir`` None means results/<experiment>/<host>/<run-id>/.  ``progress`` None shows
    a tqdm bar only when stderr is a terminal (quiet under papermill).  ``build`` runs
    ``ringlab.build.build_all`` first.  ``log`` receives one-line messages (governor,
    warnings); default: stderr.  Raises ParamError for bad input, before creating anything.
    """
    log = log or (lambda m: print(f"ringlab run: {m}", file=sys.stderr, flush=True))
    params = dict(params or {})
    exp_cls = base.get(name)
    env_prev: dict = {}
    if resume:
        if out_dir is None:
            raise ParamError("parameter '--resume': needs --out DIR (the folder of the interrupted run); "
                             "allowed: an existing run folder")
        out_dir = Path(out_dir)
        _check_out_dir(out_dir, resume=True)
        env_prev = json.loads((out_dir / "env.json").read_text())
        values = _resolve_for_resume(exp_cls, params, env_prev)
        run_id = env_prev.get("run_id") or out_dir.name
    else:
        values = exp_cls.resolve(params)
        run_id = new_run_id()
        host = host_id()
        out_dir = Path(out_dir) if out_dir is not None else default_out_dir(name, host, run_id)
        _check_out_dir(out_dir, resume=False)
    host = env_prev.get("host") or host_id()

    exp = exp_cls()
    ctx = RunContext(name, values, run_id, out_dir, log)
    specs = exp.plan(values, ctx)
    if not specs:
        raise ParamError(f"experiment '{name}': the parameters select no trials; allowed: non-empty lists")
    plan = order_plan(specs, values["seed"])
    if values.get("icount"):
        # Callgrind trials go after the timing trials, in plan order: they are never
        # timed, and keeping them apart keeps valgrind out of the interleaved rounds.
        icount_plan = exp.icount_specs(values, specs)
        if not icount_plan:
            ctx.warn(f"icount: no single-threaded trials in this {name} plan; nothing to count")
        plan += icount_plan
    config_keys = list(dict.fromkeys(list(specs[0].config)))
    columns = schema.ordered_columns(exp_cls.param_columns(), list(exp_cls.extra_columns))

    # Build and check binaries before anything is written.
    build_info: dict[str, Any]
    if build:
        build_info = _build(exp, values)
    else:
        build_info = _existing_build_info()
    reason = exp.unavailable(values, ctx)
    if reason is None:
        missing = [b for b in exp.needed_binaries(values) if not os.access(ctx.binary(b), os.X_OK)]
        if missing:
            raise RunnerError(f"binaries missing from {paths.bin_dir()}: {', '.join(missing)}; "
                              "run `ringlab build` first")

    out_dir.mkdir(parents=True, exist_ok=resume)
    raw_csv, env_json = out_dir / "raw.csv", out_dir / "env.json"
    env = _initial_env(env_prev, name, run_id, host, values, build_info, plan, argv)
    # What will actually run, hashed here whatever the build step said.
    env["binaries_used"] = {b: {"path": str(ctx.binary(b)), "sha256": sha256_file(ctx.binary(b))}
                            for b in exp.needed_binaries(values) if os.path.isfile(ctx.binary(b))}
    atomic_write_json(env_json, env)
    result = RunResult(out_dir, raw_csv, env_json, run_id)

    if reason is not None:
        log(f"{name} skipped: {reason}")
        env.update(status="skipped", skipped_reason=reason, ended_utc=utc_now())
        CsvSink(raw_csv, columns).close()
        atomic_write_json(env_json, env)
        result.counts = {"skipped": len(plan)}
        return result

    removed = repair_csv(raw_csv) if resume else 0
    if removed:
        log(f"resume: removed a torn last line ({removed} bytes) from raw.csv")
    done, header = read_done(raw_csv, config_keys)
    if header is not None and header != columns:
        raise RunnerError(f"{raw_csv}: its columns differ from this ringlab's raw.csv layout; "
                          "cannot resume into it")
    order_of = {id(s): i for i, s in enumerate(plan)}
    todo = [s for s in plan if s.key() not in done]
    result.already_done = len(plan) - len(todo)
    if resume:
        log(f"resume: {result.already_done} of {len(plan)} trials already in raw.csv, {len(todo)} to run")

    sink = CsvSink(raw_csv, columns)
    cpus_used = sorted({c for s in todo for c in s.cpus if c >= 0})
    steal = _Steal()
    counts: dict[str, int] = {}
    status = "interrupted"
    old_term = _install_sigterm()
    try:
        cm = _governor(cpus_used, values)
        with cm as g:
            rep = _report_of(cm, g)
            env["governor"] = rep
            shown = _governor_lines(cm, rep)
            for line in shown:
                log(line)
            env["c2c_latency_ns"] = c2c = _measure_pairs(todo, env_prev.get("c2c_latency_ns") or {}, log)
            env["warnings"] = list(ctx.warnings)
            atomic_write_json(env_json, env)
            bar = _progress(len(todo), progress, name)
            try:
                for spec in todo:
                    rows = _run_one(exp, ctx, spec, order_of[id(spec)], values, host, steal, c2c)
                    sink.write_rows(rows)
                    st = rows[0]["status"]
                    counts[st] = counts.get(st, 0) + 1
                    if bar is not None:
                        bar.update(1)
                        if st != "ok":
                            bar.set_postfix_str(f"{counts.get('crash', 0) + counts.get('timeout', 0) + counts.get('error', 0)} failed")
            finally:
                if bar is not None:
                    bar.close()
        env["governor"] = _report_of(cm, g)  # after restore
        for line in _governor_lines(cm, env["governor"])[len(shown):]:
            log(line)
        status = "complete"
    except BaseException as e:
        status = "interrupted" if isinstance(e, KeyboardInterrupt) else f"failed: {type(e).__name__}: {e}"
        raise
    finally:
        _restore_sigterm(old_term)
        sink.close()
        env.update(status=status, ended_utc=utc_now(), warnings=list(ctx.warnings))
        env.setdefault("counts_by_invocation", []).append(counts)
        try:
            atomic_write_json(env_json, env)
        except OSError:
            pass
    result.counts = counts
    result.warnings = list(ctx.warnings)
    return result


def _run_one(exp, ctx, spec: TrialSpec, order: int, values, host, steal: _Steal, c2c: dict) -> list[dict]:
    argv = [str(a) for a in exp.command(spec, ctx)]
    try:
        sha = sha256_file(exp.measured_binary(spec, argv, ctx))
    except OSError:
        sha = ""
    p, c = spec.cpus
    base_row: dict[str, Any] = {
        "run_id": ctx.run_id, "experiment": ctx.experiment, "host": host, **spec.config,
        "trial": spec.trial, "iteration": 0, "order": order, "warmup": spec.warmup,
        "cpu_req_producer": p, "cpu_req_consumer": c, "pair_class": spec.pair_class,
        "binary_sha256": sha, "c2c_latency_ns": c2c.get(f"{p}:{c}", math.nan),
    }
    if spec.kind == "icount":
        return [_icount_row(exp, ctx, spec, argv, base_row, values)]
    before = steal.before()
    out = run_process(argv, float(values["timeout"]))
    base_row["steal_delta"] = steal.delta(before, (p, c))
    base_row["timestamp"] = utc_now()
    base_row["wall_s"] = out.wall_s
    base_row["exit_code"] = out.exit_code
    rows: list[dict[str, Any]]
    if out.status == "ok":
        try:
            parsed = exp.parse(spec, out.stdout, out.stderr, ctx)
            if not parsed:
                raise ValueError("parse() returned no rows")
            rows = []
            for r in parsed:
                row = dict(base_row)
                row.update({k: v for k, v in r.items() if k not in ("run_id", "experiment", "host")})
                row.update(status="ok", stderr_tail="")
                rows.append(row)
        except ValueError as e:
            rows = [dict(base_row, status="error",
                         stderr_tail=(f"parse error: {e} | stderr: " + out.stderr[-STDERR_TAIL:])[-STDERR_TAIL:])]
    else:
        why = "timeout after %gs; " % values["timeout"] if out.status == "timeout" else ""
        rows = [dict(base_row, status=out.status, stderr_tail=(why + out.stderr)[-STDERR_TAIL:])]
    for row in rows:
        row["actual_pair_class"] = _actual_class(ctx, row)
        derive(row)
    return rows


def _icount_row(exp, ctx, spec: TrialSpec, argv: list[str], row: dict, values) -> dict:
    """One callgrind trial: instructions in the measured region per operation.

    Timing columns stay empty (valgrind's times mean nothing); ``instructions_per_op``
    comes from callgrind's count of the ``rl_measured_*`` functions.
    """
    from ringlab import icount
    av = icount.availability()
    row.update(icount_source="callgrind", icount_ops=spec.extra["ops"], valgrind_version=av.version,
               timestamp=utc_now(), ns_per_op=math.nan)
    if not av.ok:
        row.update(status="skipped", exit_code=-1, stderr_tail=f"icount: {av.reason}")
        return row
    with tempfile.TemporaryDirectory(prefix="ringlab-cg-") as tmp:
        out_file = Path(tmp) / "callgrind.out"
        # callgrind is 50-100x slower than native: scale the trial timeout
        out = run_process(icount.callgrind_argv(argv, out_file), max(600.0, 100 * float(values["timeout"])))
        row.update(wall_s=out.wall_s, exit_code=out.exit_code)
        if out.status != "ok":
            row.update(status=out.status, stderr_tail=out.stderr[-STDERR_TAIL:])
            return row
        try:
            ir = icount.parse_callgrind_out(out_file.read_text(errors="replace"))
            parsed = exp.parse(spec, out.stdout, out.stderr, ctx)[0]
        except (OSError, ValueError) as e:
            row.update(status="error", stderr_tail=f"icount: {e}")
            return row
    if ir == 0:
        row.update(status="error", stderr_tail="icount: callgrind counted 0 instructions in rl_measured_*")
        return row
    # placement of the counted run; its timings and counters are not kept
    for k in ("cpu_producer_start", "cpu_producer_end", "cpu_consumer_start", "cpu_consumer_end"):
        if k in parsed:
            row[k] = parsed[k]
    row.update(status="ok", stderr_tail="", instructions=float(ir),
               instructions_per_op=ir / float(spec.extra["ops"]))
    row["actual_pair_class"] = _actual_class(ctx, row)
    return row


def _actual_class(ctx, row) -> str:
    """Class of the CPUs the threads really ran on; 'migrated' if a thread moved."""
    def cpu(k):
        v = row.get(k)
        try:
            v = int(v)
        except (TypeError, ValueError):
            return -1
        return v

    ps, pe, cs, ce = (cpu(k) for k in ("cpu_producer_start", "cpu_producer_end",
                                         "cpu_consumer_start", "cpu_consumer_end"))
    if ps < 0:
        return ""
    if (pe >= 0 and pe != ps) or (cs >= 0 and ce >= 0 and ce != cs):
        return "migrated"
    if cs < 0:  # single-threaded workload
        return "same-cpu" if row.get("pair_class") == "same-cpu" else ""
    return ctx.pair_class(ps, cs)


def _measure_pairs(specs: list[TrialSpec], known: dict, log) -> dict[str, float | None]:
    """One-way core-to-core latency of every distinct CPU pair used, once per run."""
    from ringlab import latency
    probe = latency.Probe()
    out = dict(known)
    pairs = sorted({s.cpus for s in specs if s.cpus[0] >= 0 and s.cpus[1] >= 0 and s.cpus[0] != s.cpus[1]})
    for a, b in pairs:
        k = f"{a}:{b}"
        if k in out and out[k] is not None:
            continue
        out[k] = probe.measure(a, b)
        if out[k] is None:
            log(f"c2c latency {k}: not measured ({probe.reasons.get((a, b))})")
    return {k: (math.nan if v is None else v) for k, v in out.items()}


def _progress(total: int, progress: bool | None, name: str):
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress or total == 0:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=name, unit="trial", file=sys.stderr, dynamic_ncols=True)


def _install_sigterm():
    """SIGTERM becomes RunInterrupted, so the trial group is killed and the governor restored."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        raise RunInterrupted(f"signal {signum}")
    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(old) -> None:
    if old is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, old)


def _build(exp, values) -> dict[str, Any]:
    try:
        from ringlab import build as build_mod
    except ModuleNotFoundError as e:
        if e.name != "ringlab.build":
            raise
        return dict(_existing_build_info(), note="ringlab.build not available; existing binaries used")
    try:
        # Only what this run needs (plus the latency probe): a ptr_ring run does not
        # wait for page_frag to compile.
        only = list(exp.needed_binaries(values)) + ["c2c_latency"]
        info = build_mod.build_all(**exp.build_args(values), only=only)
    except ParamError:
        raise
    except Exception as e:
        raise RunnerError(f"build failed: {e}") from e
    return info.to_dict() if hasattr(info, "to_dict") else dict(info)


def _existing_build_info() -> dict[str, Any]:
    """Without a build: whatever build info ringlab build left, plus binary hashes."""
    info: dict[str, Any] = {"built_by_run": False}
    for cand in ("build-info.json", "build_info.json"):
        p = paths.build_dir() / cand
        if p.is_file():
            try:
                info.update(json.loads(p.read_text()))
                info["source"] = str(p)
            except ValueError:
                pass
            break
    return info


def _git_info() -> dict[str, Any]:
    from ringlab import provenance
    return provenance.git_info()


def _initial_env(prev: dict, name, run_id, host, values, build_info, plan, argv) -> dict[str, Any]:
    from ringlab import __version__
    env: dict[str, Any] = dict(prev)
    now = utc_now()
    if prev:
        env.setdefault("resumed_utc", []).append(now)
    else:
        env.update(schema_version=schema.SCHEMA_VERSION, ringlab_version=__version__, run_id=run_id,
                   experiment=name, host=host, started_utc=now)
    env["status"] = "running"
    env["ended_utc"] = None
    env["parameters"] = _jsonable(values)
    env["command"] = argv
    env["git"] = _git_info()
    env["build"] = build_info
    env["plan"] = {"trials_total": len(plan), "seed": values["seed"],
                   "order": "seeded random shuffle within rounds (round r = trial r of every configuration)"}
    try:
        from ringlab.system import envinfo
        env["environment"] = envinfo.collect()
    except Exception as e:
        env["environment"] = {"error": f"envinfo.collect() failed: {type(e).__name__}: {e}"}
    return env
