"""Everything checked before a run folder is created: parameters, folder, plan, binaries.

``prepare(...)`` raises ParamError (bad input) or RunnerError (missing binary, failed
build) and creates nothing; it returns a ``Prepared`` run: the experiment, its
``RunContext``, the ordered plan, the raw.csv columns and env.json's opening fields.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ringlab import __version__, paths, schema
from ringlab.build import driver as build_mod
from ringlab.system import checkout, privilege
from ringlab.errors import DataError, NotBuiltError, ParamError, RunnerError
from ringlab.experiments import base
from ringlab.experiments.base import TrialSpec
from ringlab.experiments.params import MAX_PLAN_TRIALS, MAX_SEED, has_target
from ringlab.names import check_name
from ringlab.digest import sha256_file
from ringlab import rundir
from ringlab.run.context import RunContext
from ringlab.run.plan import LAYOUT_DESCRIPTION, ORDER_DESCRIPTION, full_plan
from ringlab.system import envinfo
from ringlab.build import binaries

if TYPE_CHECKING:
    from ringlab.stats.stopping_record import Stopping


def new_run_id() -> str:
    """UTC timestamp plus a random suffix: sortable, and two runs in one second do not clash."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


#: a run id as new_run_id makes them: UTC start time, "-", a random hex suffix
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]+$")


def run_id_for(out_dir: Path | None) -> str:
    """One run id per run: the run folder's name when it is a run id (the folder
    ``ringlab reproduce`` and the notebooks name <experiment>/<host>/<run-id>), else a new one."""
    if out_dir is not None and RUN_ID_RE.match(Path(out_dir).name):
        return Path(out_dir).name
    return new_run_id()


#: environment variable that fixes the seed of runs given no ``-p seed`` (unset: drawn per run)
SEED_VAR = "RINGLAB_SEED"


def draw_seed() -> tuple[int, str]:
    """The seed of a run given no ``-p seed``, and where it came from: ``$RINGLAB_SEED`` when set
    (``"env"``), else drawn from the operating system's random source (``"drawn"``), so that
    every run samples fresh code and data layouts.  env.json records it (``parameters.seed``,
    ``plan.seed``, ``plan.seed_source``); ``-p seed N`` reproduces the run's layouts and order."""
    fixed = os.environ.get(SEED_VAR)
    if fixed is not None and fixed.strip():
        s = fixed.strip()
        if not (s.isascii() and s.isdigit() and int(s) <= MAX_SEED):
            raise ParamError(f"{SEED_VAR}={fixed[:40]!r}: allowed: an integer in [0, {MAX_SEED}], or unset")
        return int(s), "env"
    return secrets.randbelow(MAX_SEED + 1), "drawn"


def host_id() -> str:
    return envinfo.host_id()


def default_out_dir(experiment: str, host: str | None = None, run_id: str | None = None) -> Path:
    """scratch/<experiment>/<host>/<run-id>/ (never an existing folder): the scratch folder of
    notebook runs made outside ``ringlab reproduce`` (``reproduce.scratch_dir``,
    $RINGLAB_SCRATCH), so a run without --out never lands in results/ or its index."""
    return (paths.scratch_dir() / check_name(experiment, "experiment") / check_name(host or host_id(), "host")
            / check_name(run_id or new_run_id(), "run id"))


@dataclass
class Prepared:
    exp: Any                      # the Experiment instance
    ctx: RunContext
    plan: list[TrialSpec]
    columns: list[str]
    config_keys: list[str]
    env: dict[str, Any]           # env.json's fields at the start of this invocation
    unavailable: str | None       # why the experiment cannot run here (None: it can)
    resume: bool
    specs: list[TrialSpec]        # the experiment's plan, in its canonical order
    stopping: Stopping | None = None  # env.json "stopping" (target_ci > 0), else None
    build: bool = True            # build binaries (False: --no-build, check them)
    #: arms that cannot run here (Experiment.unavailable_arms) -> why; the run ends failed naming them
    arms_unavailable: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def out_dir(self) -> Path:
        return self.ctx.out_dir


def check_out_dir(out_dir: Path, resume: bool) -> None:
    """Raise ParamError if out_dir cannot be used; creates nothing."""
    if resume:
        if not (out_dir / "env.json").is_file():
            raise ParamError(f"parameter '--resume': {out_dir} holds no env.json of an earlier run; "
                             "allowed: the folder of an interrupted run", input="--resume")
    elif out_dir.exists():
        raise ParamError(f"parameter '--out': {out_dir} already exists; allowed: a new folder"
                         + (" (or pass --resume to continue the run in it)" if (out_dir / "env.json").is_file() else ""))
    anc = out_dir
    while not anc.exists():
        if anc.parent == anc:
            break
        anc = anc.parent
    if not anc.is_dir():
        raise ParamError(f"parameter '--out': {out_dir} is not writable ({anc} is not a folder); "
                         "allowed: a folder path you can write to", input="--out")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise ParamError(f"parameter '--out': {out_dir} is not writable (no write permission on {anc}); "
                         "allowed: a folder path you can write to", input="--out")
    # Root passes os.access everywhere, and /proc or a read-only mount only fail on
    # creation: really create (and remove) a probe folder in the nearest existing ancestor.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ringlab-probe-", dir=anc))
    except OSError as e:
        raise ParamError(f"parameter '--out': {out_dir} is not writable ({anc}: {e.strerror}); "
                         "allowed: a folder path you can write to", input="--out") from None


def check_plan_size(exp_cls, values: dict[str, Any]) -> None:
    """ParamError before any trial is planned when (trials + warmup) x repeats x every list
    parameter's length exceeds ``MAX_PLAN_TRIALS`` rows: the plan, and raw.csv, would not
    fit in memory.  CPU pairs multiply it further; the plan itself is counted once made."""
    n = (int(values.get("trials") or 0) + int(values.get("warmup") or 0)) * int(values.get("repeats") or 1)
    biggest, size = "trials", 0
    for pname, spec in exp_cls.all_params().items():
        v = values.get(pname)
        if spec.kind.endswith("_list") and isinstance(v, list) and v:
            n *= len(v)
            if len(v) > size:
                biggest, size = pname, len(v)
    if n > MAX_PLAN_TRIALS:
        raise ParamError(f"parameter 'trials': (trials + warmup) x repeats x list lengths = {n} rows "
                         f"(largest list: '{biggest}'), more than the limit of {MAX_PLAN_TRIALS}; "
                         "allowed: a smaller plan", input="trials")


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(values, default=str))


def _stored_parameters(exp_cls, params: dict, env: rundir.RunEnv, env_path: Path) -> dict:
    """env.json's parameters, trusted no more than the command line: each one goes through
    the same parsing and checks as ``-p NAME=VALUE`` (a bad one is refused naming the
    parameter and the file), and a parameter that names a program or source to run or
    build (``Experiment.code_params``) is taken only from the command line."""
    stored = rundir.RunEnv.of(env).parameters
    if not isinstance(stored, dict):
        raise ParamError(f"parameter '--resume': {env_path}: 'parameters' is not an object; "
                         "allowed: the env.json of an interrupted run", input="--resume")
    specs = exp_cls.all_params()
    known = {k: v for k, v in stored.items() if k in specs}
    typed = {}
    for k, v in known.items():
        try:
            typed[k] = specs[k].parse(v)
        except ParamError as e:
            raise ParamError(f"{env_path}: {e}", input=env_path) from None
    # Before any experiment check looks at them (a header source may be a git revision).
    for name in exp_cls.code_params:
        if name not in typed:
            continue
        default = specs[name].parse(specs[name].default) if specs[name].default is not None else None
        if typed[name] == default:
            continue
        given = specs[name].parse(params[name]) if name in params else None
        if given != typed[name]:
            raise ParamError(f"parameter '{name}': {env_path} names a program or source to run "
                             f"({stored[name]!r}); --resume takes those only from the command line; "
                             f"allowed: -p {name}={stored[name]} given again, if you trust it, "
                             "or a new --out folder", input=name)
    try:
        exp_cls.resolve(known)
    except ParamError as e:
        raise ParamError(f"{env_path}: {e}", input=env_path) from None
    return known


def _resolve_for_resume(exp_cls, params: dict, env: rundir.RunEnv, env_path: Path) -> dict:
    if env.experiment not in (None, exp_cls.name):
        raise ParamError(f"parameter '--resume': the folder holds a '{env.experiment}' run, "
                         f"not '{exp_cls.name}'; allowed: {env.experiment}", input="--resume")
    merged = _stored_parameters(exp_cls, params, env, env_path)
    stored = env.parameters
    merged.update(params)
    values = exp_cls.resolve(merged)
    diff = sorted(k for k in set(values) | set(stored)
                  if k in stored and _jsonable({k: values.get(k)}) != _jsonable({k: stored.get(k)}))
    if diff:
        d = "; ".join(f"{k}: run has {stored.get(k)!r}, given {values.get(k)!r}" for k in diff)
        raise ParamError(f"parameter '{diff[0]}': --resume needs the parameters of the interrupted run "
                         f"({d}); allowed: the values in env.json, or a new --out folder", input=diff[0])
    return values


def build_for_run(exp, values, prior: dict[str, Any] | None = None) -> dict[str, Any]:
    # Only what this run needs (plus the latency probe and the trial launcher): a ptr_ring run does not
    # wait for page_frag to compile.  ``prior``: a build record of this run whose binaries stand
    # (a staged run's earlier layouts); only the others are compiled, and the records merged.
    only = list(exp.needed_binaries(values)) + ["c2c_latency", "trial_launcher"]
    done = set((prior or {}).get("binaries") or {})
    todo = [b for b in only if b not in done]
    try:
        info = build_mod.build_all(**exp.build_args(values), only=todo or only).to_dict()
    except (build_mod.BuildError, OSError) as e:  # a failed compile ends the run with its text
        raise RunnerError(f"build failed: {e}", input=getattr(e, "input", None)) from e
    for key in ("binaries", "source_sha256"):
        if isinstance((prior or {}).get(key), dict):
            info[key] = {**prior[key], **(info.get(key) or {})}
    return info


def check_built(exp, values) -> dict[str, Any]:
    """Without a build: every binary this run measures must be the one built from the
    source set it asks for (``ringlab.binaries.check_binaries``); never a stale one."""
    try:
        info = binaries.check_binaries(**exp.build_args(values),
                                       only=list(exp.needed_binaries(values))).to_dict()
    except build_mod.BuildError as e:   # StaleBinaryError included
        raise NotBuiltError(f"--no-build: {e}") from None
    info["built_by_run"] = False
    return info


def merge_build(info: dict[str, Any], extra: dict[str, Any]) -> None:
    """An experiment's own build record (``Experiment.build_info``) into env.json's ``build``."""
    for k, v in (extra or {}).items():
        info[k] = {**info[k], **v} if isinstance(v, dict) and isinstance(info.get(k), dict) else v


def _existing_build_info() -> dict[str, Any]:
    """Without a build: whatever build info ringlab build left, plus binary hashes."""
    info: dict[str, Any] = {"built_by_run": False}
    p = paths.build_dir() / "build-info.json"
    if p.is_file():
        try:
            info.update(json.loads(p.read_text()))
            info["source"] = str(p)
        except ValueError:
            info["note"] = f"{p} is not valid JSON"
    return info


def _resolve_run(exp_cls, name: str, params: dict[str, Any], out_dir, resume: bool
                 ) -> tuple[dict[str, Any], str, Path, rundir.RunEnv, str]:
    """The parameter values, run id, output folder, (resuming) the interrupted run's env.json and
    where the seed came from (``given``, ``drawn``, ``env``: :func:`draw_seed`)."""
    prev = rundir.RunEnv.of({})
    if resume:
        if out_dir is None:
            raise ParamError("parameter '--resume': needs --out DIR (the folder of the interrupted run); "
                             "allowed: an existing run folder", input="--resume")
        out_dir = Path(out_dir)
        check_out_dir(out_dir, resume=True)
        try:
            prev = rundir.RunOutput(out_dir).env_file
        except DataError as e:
            raise ParamError(f"parameter '--resume': {e}; allowed: the folder of an interrupted run",
                             input="--resume") from None
        values = _resolve_for_resume(exp_cls, params, prev, out_dir / "env.json")
        run_id = prev.run_id or out_dir.name
        plan = prev.plan
        source = str(plan.get("seed_source") or "given")
    else:
        if "seed" not in params:
            seed, source = draw_seed()
            params = {**params, "seed": seed}
        else:
            source = "given"
        values = exp_cls.resolve(params)
        run_id = run_id_for(out_dir)
        out_dir = Path(out_dir) if out_dir is not None else default_out_dir(name, host_id(), run_id)
        check_out_dir(out_dir, resume=False)
    return values, run_id, out_dir, prev, source


def _build_and_check(exp, values: dict[str, Any], ctx: RunContext, build: bool,
                     prior: dict[str, Any] | None = None) -> tuple[Any, str | None]:
    """Build (or check the built) binaries; return the build info and why the experiment cannot run."""
    build_info = build_for_run(exp, values, prior) if build else None
    reason = exp.unavailable(values, ctx)
    if not build:
        build_info = check_built(exp, values) if reason is None else _existing_build_info()
    if reason is None:
        merge_build(build_info, exp.build_info(values))
        missing = [b for b in exp.needed_binaries(values) if not os.access(ctx.binary(b), os.X_OK)]
        if missing:
            raise RunnerError(f"binaries missing from {paths.bin_dir()}: {', '.join(missing)}; "
                              "run `ringlab build` first")
    return build_info, reason


def prepare(name: str, params: dict[str, Any], out_dir, resume: bool, build: bool,
            log: Callable[[str], None], argv: list[str] | None) -> Prepared:
    exp_cls = base.get(name)
    values, run_id, out_dir, prev, seed_source = _resolve_run(exp_cls, name, params, out_dir, resume)
    host = prev.host or host_id()

    exp = exp_cls()
    target = has_target(values)
    stop, probe = None, None
    if target:   # the staged design: the pilot's (and every recorded stage's) layouts and rounds
        # imported here: the statistics it plans with load scipy, which a run without a target
        # (a smoke run, an emulated CPU) starts without
        from ringlab.run import stopping
        prev_stop = prev.stopping_record
        if prev_stop is not None and prev_stop.stages:
            stop = prev_stop
        else:
            levels = stopping.load_levels(values, host)   # calibration.json, read once for the run
            stop = stopping.opening(values, levels)
            probe = None
            if build and stop.budget_s:   # time the first layouts' builds; the pilot fits them
                first = stopping.probe_layouts(stop)
                started = time.monotonic()
                probe = build_for_run(exp, stopping.stage_values(values, dataclasses.replace(stop, layouts=first)))
                took = time.monotonic() - started
                # the pilot planned again at the build cost just timed
                stop = stopping.opening(values, levels, layout_s=took / first)
                stop = stopping.fit_pilot_to_builds(stop, first, took)
        values = stopping.stage_values(values, stop)
    ctx = RunContext(name, values, run_id, out_dir, log, host=host)
    check_plan_size(exp_cls, values)
    specs = exp.plan(values, ctx)
    if not specs:
        raise ParamError(f"experiment '{name}': the parameters select no trials; allowed: non-empty lists")
    if len(specs) > MAX_PLAN_TRIALS:
        raise ParamError(f"parameter 'trials': the plan holds {len(specs)} trials, more than the limit of "
                         f"{MAX_PLAN_TRIALS}; allowed: fewer trials, warm-ups, list values or CPU pairs",
                         input="trials")
    # With a target the icount trials wait for the run to stop (stopping.staged_plan).
    layouts = int(values.get("layouts", 1) or 1)
    if target:
        stopping.check_variants(specs)
    plan = stopping.staged_plan(exp, values, specs, stop, ctx) if target else full_plan(exp, values, specs, ctx)
    config_keys = list(dict.fromkeys(list(specs[0].config)))
    columns = schema.ordered_columns(exp_cls.param_columns(), list(exp_cls.extra_columns))
    if resume:   # a corrupt or foreign raw.csv, or a row not of the plan, is refused before the folder is touched
        rundir.RunOutput(out_dir).resume_keys(config_keys, columns, plan=plan)

    # Build and check binaries before anything is written.
    started = time.monotonic()
    build_info, reason = _build_and_check(exp, values, ctx, build, probe)
    if stop is not None and not stop.stages[0].built:   # the budget counts builds
        stop = stopping.add_time(stop, build_s=time.monotonic() - started)
        stop = dataclasses.replace(stop, stages=(dataclasses.replace(stop.stages[0], built=True),) + stop.stages[1:])
    missing = {} if reason is not None else dict(exp.unavailable_arms(values, ctx) or {})
    env = {} if prev else {"schema_version": schema.SCHEMA_VERSION, "run_id": run_id, "experiment": name,
                           "host": host}
    env.update(
        ringlab_version=__version__, command=argv, git=checkout.git_info(),
        # the parameters only: what a stage adds to the values (stopping.COUNT_BY_MODE) is in "stopping"
        parameters=_jsonable({k: v for k, v in values.items() if k in exp_cls.all_params()}),
        build=build_info,
        plan={"trials_total": len(plan), "seed": values["seed"], "seed_source": seed_source,
              "order": ORDER_DESCRIPTION,
              "layouts": layouts, **({"layout_order": LAYOUT_DESCRIPTION,
                                      "common_layouts": bool(values.get("common_layouts", False))}
                                     if layouts > 1 else {}),
              **({"arms_unavailable": missing} if missing else {})},
        environment=envinfo.collect(),
        privilege=privilege.record(getattr(exp, "trial_privilege", "user")),
        # What will actually run, hashed here whatever the build step said.
        binaries_used={b: {"path": str(ctx.binary(b)), "sha256": sha256_file(ctx.binary(b))}
                       for b in exp.needed_binaries(values) if os.path.isfile(ctx.binary(b))})
    ctx.c2c = dict(prev.c2c_latency_ns)
    ctx.measured_commands = {str(k): list(v) for k, v in (prev.measured_commands or {}).items()
                             if isinstance(v, list)}
    if stop is not None:   # the report compares against the arm the stopping rule planned for
        env.update(stopping=stop.to_json(), baseline=stop.baseline)
    return Prepared(exp, ctx, plan, columns, config_keys, env, reason, resume, list(specs), stop, build,
                    missing)
