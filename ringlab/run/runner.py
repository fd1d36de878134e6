"""``run_experiment``: run an experiment's trials into a run folder, and ``RunResult``, what one
call ran.  The steps are in the package docstring (ringlab/run/__init__.py)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tqdm import tqdm

from ringlab.rundir import RunFolder, count_trials, judge
from ringlab.run import launcher, machine
from ringlab.run.context import RunContext
from ringlab.run.prepare import prepare
from ringlab.run.process import execute
from ringlab.system import privilege
from ringlab.system.governor import tune

if TYPE_CHECKING:
    from ringlab.stats.stopping_record import Stopping


@dataclass
class RunResult:
    out_dir: Path
    raw_csv: Path
    env_json: Path
    run_id: str
    #: trials run by this invocation, by status (ok, crash, timeout, error, skipped)
    counts: dict[str, int] = field(default_factory=dict)
    #: trials found already done in raw.csv (--resume)
    already_done: int = 0
    warnings: list[str] = field(default_factory=list)
    #: the run's status: complete | failed | skipped (rundir.RUN_STATUSES)
    status: str = "complete"
    status_reason: str = ""
    #: the whole run's trials: {"ok", "failed", "timeout", "skipped"}
    trials: dict[str, int] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when the run is complete (or skipped on this machine), 1 when it failed."""
        return 0 if self.status in ("complete", "skipped") else 1

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())) or "nothing run"
        done = f" ({self.already_done} already done)" if self.already_done else ""
        return f"{self.raw_csv}: {parts}{done}"


def _stderr_log(msg: str) -> None:
    print(f"ringlab run: {msg}", file=sys.stderr, flush=True)


def _progress(todo: list, progress: bool | None, name: str):
    """The trials to run, with a tqdm bar on stderr when it is a terminal (or progress=True)."""
    if progress is None:
        progress = sys.stderr.isatty()
    if not progress or not todo:
        yield from todo
        return
    with tqdm(total=len(todo), desc=name, unit="trial", file=sys.stderr, dynamic_ncols=True) as bar:
        for item in todo:
            yield item
            bar.update(1)


def _start_measuring(f: RunFolder, ctx: RunContext, gov, cpus: list[int], todo: list, log) -> None:
    """Once the CPUs are ours and tuned: look for other work, measure latencies, record both."""
    quiet = machine.check_quiet(cpus, ctx.values["quiet"], ctx.values["quiet_timeout"], log)
    if quiet.get("warning"):
        ctx.warn(quiet["warning"])
    for line in gov.messages:
        log(line)
    ctx.c2c = machine.measure_pairs([s for _, s in todo], ctx.c2c, log)
    f.write_env(governor=gov.report, quiet=quiet, c2c_latency_ns=ctx.c2c, warnings=ctx.warnings)


def _governor(cpus: list[int], values: dict[str, Any]):
    if not values["governor"]:
        return _NoTuning({"changed": False, "reason": "not requested (governor=false)"})
    return tune(cpus, disable_boost=bool(values["disable_boost"]))


class _NoTuning:
    def __init__(self, report: dict):
        self.report, self.messages = report, [report["reason"]]

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False


def _run_trials(f: RunFolder, p, todo: list, res: "RunResult", stop, progress, name: str,
                deadline=None) -> bool:
    """Run ``todo`` ((order, spec) pairs) one by one, each trial's rows appended at once.  With a
    ``deadline`` (``stopping.Deadline``): no round is started once it has passed (the round under
    way finishes; the run's first round always runs); True when it stopped the trials."""
    current = None
    for order, spec in _progress(todo, progress, name):
        if deadline is not None and spec.kind == "timing" and spec.trial != current:
            if deadline.passed() and (current is not None or res.counts or res.already_done):
                return True
            current = spec.trial
        rows = execute(p.exp, spec, order, p.ctx)
        f.append(rows)
        if p.ctx.commands_changed:
            f.write_env(measured_commands=p.ctx.measured_commands)
            p.ctx.commands_changed = False
        stop.check()
        res.counts[rows[0]["status"]] = res.counts.get(rows[0]["status"], 0) + 1
    return False


def _extended(f: RunFolder, p, st: Stopping) -> list:
    """The plan of every stage recorded in ``st``, in block order (icount last, once stopped)."""
    from ringlab.run import stopping
    p.ctx.values["layouts"] = int(st.layouts)   # a trial of a new layout names its binary
    plan = stopping.staged_plan(p.exp, p.ctx.values, p.specs, st, p.ctx)
    f.write_env(plan=dict(f.fields.plan, trials_total=len(plan), rounds=int(st.rounds_planned),
                          layouts=int(st.layouts)))
    return plan


def _build_stage(f: RunFolder, p, st: Stopping) -> Stopping:
    """Build (or, with --no-build, check) the binaries of a stage's new layouts; the seconds count."""
    from ringlab.run.prepare import build_for_run, check_built, merge_build
    from ringlab.digest import sha256_file
    from ringlab.run import stopping
    started = stopping.clock()
    values = dict(p.ctx.values, layouts=int(st.layouts))
    if p.build:   # only the new layouts' binaries are compiled
        info = build_for_run(p.exp, values, f.fields.build.doc or None)
        merge_build(info, p.exp.build_info(values))
        f.write_env(build=info)
    else:
        check_built(p.exp, values)
    used = dict(f.fields.binaries_used)
    for b in p.exp.needed_binaries(values):
        path = p.ctx.binary(b)
        if b not in used and path.is_file():
            used[b] = {"path": str(path), "sha256": sha256_file(path)}
    f.write_env(binaries_used=used)
    return stopping.add_time(st, build_s=stopping.clock() - started)


def _run_and_extend(f: RunFolder, p, plan: list, done: set, todo: list, res: "RunResult", stop, progress,
                    name: str, log, started: float | None = None) -> None:
    """Run ``todo``; with a target, review after each stage and run the next until the run stops.
    With a budget: the pilot is sized from its timed warm-up rounds (``_time_pilot``) and no round
    starts once the budget is spent (``stopping.Deadline``).  ``started``: when this invocation
    began (``time.monotonic``); the seconds since then that the record does not hold (the
    environment probe, the quiet check, the latencies) count against the deadline too."""
    if p.stopping is None:
        _run_trials(f, p, todo, res, stop, progress, name)
        return
    # a run with a target only: the statistics it reviews its stages with load scipy
    from ringlab.run import stopping
    st = f.fields.stopping_record if f.fields.stopping else p.stopping
    counted = stopping.spent_s(p.stopping) if not p.resume and p.stopping is not None else 0.0
    before = max(0.0, time.monotonic() - started - counted) if started is not None else 0.0
    deadline = stopping.Deadline(st, before)
    if stopping.times_pilot(st):
        st, todo = _time_pilot(f, p, st, done, todo, res, stop, progress, name, deadline, log)
    ran = {s.key() for _, s in todo} | set(done) | {s.key() for s in p.plan if s.kind == "timing" and s.warmup}
    st, out_of_time = _run_stage(f, p, st, todo, res, stop, progress, name, deadline)
    while st.stop_reason is None:
        st = stopping.review(f.read_raw(), st, log, out_of_time=out_of_time or deadline.passed())
        f.write_env(stopping=st.to_json())
        if st.stop_reason is not None:
            break
        st = _build_stage(f, p, st)
        f.write_env(stopping=st.to_json())
        plan = _extended(f, p, st)
        more = [(i, s) for i, s in enumerate(plan) if s.key() not in ran]
        ran |= {s.key() for _, s in more}
        st, out_of_time = _run_stage(f, p, st, more, res, stop, progress, name, deadline)
    if out_of_time:
        log(f"target_ci: the budget of {float(st.budget_s or 0):g} s is spent: no more rounds started "
            f"({stopping.rounds_run(f.read_raw())} of {st.rounds_planned} planned rounds run)")
    plan = _extended(f, p, st)   # stopped: the icount trials, if any
    _run_trials(f, p, [(i, s) for i, s in enumerate(plan) if s.key() not in ran], res, stop, progress, name)
    f.write_env(stopping=stopping.finish(f.read_raw(), st).to_json())


def _run_stage(f: RunFolder, p, st: Stopping, todo: list, res: "RunResult", stop, progress, name: str,
               deadline) -> tuple[Stopping, bool]:
    """Run a stage's trials against the deadline: the record with their seconds added, and
    whether the deadline stopped them."""
    from ringlab.run import stopping
    started = stopping.clock()
    try:
        out_of_time = _run_trials(f, p, todo, res, stop, progress, name, deadline)
    finally:   # an interrupted stage keeps the time it spent
        st = stopping.add_time(st, measure_s=stopping.clock() - started)
        f.write_env(stopping=st.to_json())
    return st, out_of_time


def _time_pilot(f: RunFolder, p, st: Stopping, done: set, todo: list, res: "RunResult", stop, progress,
                name: str, deadline, log) -> tuple[Stopping, list]:
    """Run the pilot's warm-up rounds, timed, and cut the pilot to what its rounds cost here within
    the budget left (``stopping.fit_pilot_to_rounds``): the record and the pilot's trials still to
    run.  Without warm-up rounds to run (a resume past them) the pilot stands as planned."""
    from ringlab.run import stopping
    warm = [(i, s) for i, s in todo if s.kind == "timing" and s.warmup]
    if not warm:
        return st, todo
    started = stopping.clock()
    st, _ = _run_stage(f, p, st, warm, res, stop, progress, name, deadline)
    took = stopping.clock() - started
    before = (st.layouts, st.rounds_per_layout)
    left = deadline.left_s()
    st = stopping.fit_pilot_to_rounds(st, took, len({s.trial for _, s in warm}), left)
    f.write_env(stopping=st.to_json())
    warm_keys = {s.key() for _, s in warm}
    if (st.layouts, st.rounds_per_layout) == before:
        return st, [(i, s) for i, s in todo if s.key() not in warm_keys]
    log(f"target_ci: pilot re-sized to {st.layouts} layouts x {st.rounds_per_layout} rounds: a round took "
        f"{st.stages[0].round_s_measured:.2f} s here, {left:.0f} s of the budget are left")
    p.specs = stopping.pilot_specs(p.specs, st)
    p.ctx.values["trials"] = int(st.stages[0].new_rounds)
    # fewer layouts put their copies in other binaries (build.layouts.copy_groups: a partial last
    # block) than the ones built for the planned pilot: build them, the seconds count
    st = _build_stage(f, p, st)
    f.write_env(stopping=st.to_json())
    if isinstance(f.fields.parameters, dict) and "trials" in f.fields.parameters:
        f.update_env(parameters=dict(f.fields.parameters, trials=int(st.stages[0].new_rounds),
                                     layouts=int(st.layouts)))
    plan = _extended(f, p, st)
    return st, [(i, s) for i, s in enumerate(plan) if s.key() not in done and s.key() not in warm_keys]


def _note_rounds_run(f: RunFolder) -> None:
    import dataclasses
    from ringlab.run import stopping
    try:
        st = f.fields.stopping_record
        f.update_env(stopping=dataclasses.replace(st, rounds_run=stopping.rounds_run(f.read_raw())).to_json())
    except Exception:   # noqa: BLE001 - a torn or empty raw.csv: keep what env.json says
        pass


def arm_trials(df, arms: list[str]) -> dict[str, dict[str, int]]:
    """Each arm's (variant's) counts of its measured timing trials in raw.csv ``df`` (the first
    row of each trial; warm-ups and callgrind counts left out), every arm of ``arms`` included."""
    import pandas as pd
    from ringlab import schema
    out = {a: count_trials(()) for a in arms}
    if df is None or not len(df) or not {"variant", "status"} <= set(df.columns):
        return out
    keep = ~schema.warmup_mask(df)
    if "iteration" in df.columns:
        keep &= pd.to_numeric(df["iteration"], errors="coerce").fillna(0) == 0
    if "icount_source" in df.columns:
        keep &= df["icount_source"].astype(str) != "callgrind"
    for arm, sts in df[keep].groupby(df[keep]["variant"].astype(str))["status"]:
        out[arm] = count_trials(sts)
    return out


def _judged(f: RunFolder, p) -> tuple[str, str]:
    """The run's (status, reason), judged from its trial counts and each arm's (``judge``)."""
    arms = list(dict.fromkeys([*(str(s.config.get("variant")) for s in p.specs), *p.arms_unavailable]))
    try:
        df = f.read_raw()
    except Exception:   # noqa: BLE001 - a raw.csv that cannot be read back: the totals judge alone
        df = None
    counts = arm_trials(df, arms) if df is not None else None
    return judge(f.trials, counts if counts is not None else {}, p.arms_unavailable)


def run_experiment(name: str, params: dict[str, Any] | None, out_dir=None, resume: bool = False,
                   progress: bool | None = None, build: bool = True,
                   log: Callable[[str], None] | None = None, argv: list[str] | None = None) -> RunResult:
    """Run experiment ``name`` with ``params`` (raw values, parsed by Param.parse) into out_dir.

    ``out_dir`` None means scratch/<experiment>/<host>/<run-id>/ (``$RINGLAB_SCRATCH``).  ``progress`` None shows a
    tqdm bar only when stderr is a terminal.  Raises ParamError (bad input, nothing created),
    RunnerError, RunLockedError (folder in use), CpuBusyError (CPUs in use by another run),
    KeyboardInterrupt / RunInterrupted (SIGINT / SIGTERM / SIGHUP; env.json says interrupted),
    DiskFullError (raw.csv or env.json could not be written: no torn row is left, env.json says
    interrupted when it can still be written; ``ringlab run`` exits 1).
    """
    log = log or _stderr_log
    started = time.monotonic()   # a staged run's deadline counts from here
    p = prepare(name, dict(params or {}), out_dir, resume, build, log, argv)
    ctx, res = p.ctx, RunResult(p.out_dir, p.out_dir / "raw.csv", p.out_dir / "env.json", p.ctx.run_id)
    RunFolder(p.out_dir).check_free()   # a --resume into a folder in use fails before waiting for CPUs
    with machine.signals() as stop, \
            machine.cpu_lock(machine.measured_cpus(p.plan), ctx.values["quiet_timeout"], log) as lock, \
            RunFolder(p.out_dir, mode="resume" if resume else "create") as f:
        f.write_env(**p.env, cpu_lock=lock)
        done = f.open_csv(p.columns, p.config_keys, log)
        plan = p.plan   # with a target: every stage recorded so far (--resume goes on from there)
        todo = [(i, s) for i, s in enumerate(plan) if s.key() not in done]
        res.already_done = len(plan) - len(todo)
        if resume:
            log(f"resume: {res.already_done} of {len(plan)} trials already in raw.csv, {len(todo)} to run")
        if p.unavailable is not None:
            log(f"{name} skipped: {p.unavailable}")
            f.finish("skipped", p.unavailable)
            f.write_env(skipped_reason=p.unavailable)
            res.counts = {"skipped": len(todo)}
        else:
            every = plan if p.stopping is not None else [s for _, s in todo]   # extension: the same CPUs
            pinned = sorted({c for s in every for c in s.cpus if c >= 0})
            with _governor(pinned, ctx.values) as gov:
                _start_measuring(f, ctx, gov, pinned or machine.measured_cpus(p.plan),
                                 [(i, s) for i, s in enumerate(every)] if p.stopping is not None else todo, log)
                shown = len(gov.messages)
                if privilege.dropping():   # every binary checked at once, not one check per layout
                    privilege.check_readable([ctx.binary(b) for b in p.exp.needed_binaries(ctx.values)
                                              if ctx.binary(b).is_file()], f"{name}: trial binary")
                if getattr(p.exp, "trial_privilege", "user") == "user":
                    ctx.launcher = launcher.start(log)
                try:
                    _run_and_extend(f, p, plan, done, todo, res, stop, progress, name, log, started)
                finally:
                    if ctx.launcher is not None:
                        ctx.launcher.close()
                        ctx.launcher = None
                    if p.stopping is not None and isinstance(f.fields.stopping, dict):
                        _note_rounds_run(f)   # an interrupted run says how far it got
            f.update_env(governor=gov.report, warnings=ctx.warnings)   # after the restore
            for line in gov.messages[shown:]:
                log(line)
            f.finish(*_judged(f, p))
    res.status, res.status_reason = f.final_status, f.fields.status_reason or ""
    res.trials, res.warnings = dict(f.trials), list(ctx.warnings)
    return res

