"""What an experiment is: typed parameters, profiles, trial planning, argv, parsing.

The same parameter names are used by the notebook ``parameters`` cell, by
``ringlab run EXPERIMENT -p NAME VALUE`` and by raw.csv columns.

An experiment never runs anything itself.  The runner (``ringlab.runner``)
asks it for the list of trials, shuffles them (seeded), builds each trial's argv
with ``command()``, runs it in a fresh process and hands stdout back to
``parse()``, which returns raw.csv rows.

The parameters themselves (kinds, bounds, parsing) are in ``ringlab.experiments.params``.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ringlab import catalog
from ringlab.errors import ParamError
from ringlab.experiments.params import COMMON_PARAMS, Param
from ringlab.schema import COUNTER_EVENTS


@dataclass
class TrialSpec:
    """One process to run.  ``config`` holds the raw.csv parameter columns (variant included)."""
    config: dict[str, Any]
    trial: int
    warmup: bool
    cpus: tuple[int, int] = (-1, -1)        # requested producer/consumer CPU (-1: unpinned)
    pair_class: str = "unpinned"
    extra: dict[str, Any] = field(default_factory=dict)  # experiment-private, not written

    @property
    def kind(self) -> str:
        """``timing`` (the default) or ``icount`` (a callgrind instruction count, never timed)."""
        return self.extra.get("kind", "timing")

    def key(self) -> tuple:
        """Identity used by --resume: configuration + trial index (+ kind for non-timing trials)."""
        key = tuple(sorted((k, str(v)) for k, v in self.config.items())) + (
            ("cpus", f"{self.cpus[0]}:{self.cpus[1]}"), ("trial", self.trial))
        return key if self.kind == "timing" else key + (("kind", self.kind),)


@dataclass(frozen=True)
class AtMost:
    """A constraint between two parameters that the trial binaries enforce: every value of
    ``name`` is at most the smallest value of ``limit`` (a number or a list parameter).

    Each experiment declares its constraints in ``Experiment.constraints``; ``resolve`` checks
    them all, so a parameter set the binaries would refuse in every trial is refused before
    anything is built or run, with one error naming both parameters and the allowed range.
    ``what`` names the limit as a reader knows it ("the ring size"), ``unit`` as the binary does
    ("size"); ``zero`` says what 0 means when 0 is exempt (None: 0 is bound too); ``applies``
    (values -> bool) restricts the check to the parameter sets whose trials pass the value to
    the binary (None: always); ``why`` says who refuses it."""
    name: str
    limit: str
    what: str
    unit: str
    zero: str | None = None
    applies: Callable[[dict[str, Any]], bool] | None = None
    why: str = ""

    def check(self, values: dict[str, Any]) -> None:
        """Raise ParamError when ``values`` break the constraint."""
        got, lim = values.get(self.name), values.get(self.limit)
        if got is None or lim is None or (self.applies is not None and not self.applies(values)):
            return
        got = got if isinstance(got, list) else [got]
        lims = lim if isinstance(lim, list) else [lim]
        if not lims:
            return
        low = min(lims)
        for v in got:
            if (self.zero is not None and v == 0) or v <= low:
                continue
            lowest = f", the smallest of {self.limit}" if len(lims) > 1 else ""
            allowed = (f"0 ({self.zero}) or " if self.zero is not None else "") + \
                f"1..{self.unit} (here 1..{low}{lowest})"
            raise ParamError(f"parameter '{self.name}': {v} exceeds {self.what} '{self.limit}' {low}"
                             + (f" ({self.why})" if self.why else "") + f"; allowed: {allowed}",
                             input=self.name)


class Experiment:
    """Base class.  Subclasses fill in the class attributes and the three methods."""

    name: str = ""
    description: str = ""
    #: experiment-specific parameters (COMMON_PARAMS are added automatically)
    params: list[Param] = []
    #: per-profile defaults; explicit parameters override them
    profiles: dict[str, dict[str, Any]] = {}
    #: names of binaries under build/bin this experiment needs (``ringlab build`` makes them)
    binaries: list[str] = []
    #: extra measurement columns this experiment writes (beyond ringlab.schema)
    extra_columns: list[str] = []
    #: parameters that name a program, module or source that ringlab runs or builds (a make or
    #: perf executable, a kernel tree, a header, a .ko): ``--resume`` takes them from the
    #: command line only, never from a results folder's env.json (unless they hold the default)
    code_params: tuple[str, ...] = ()
    #: who runs a trial when ringlab runs as root (ringlab.system.privilege): "user" (the trial
    #: process runs as the unprivileged user), "wrapper" (the argv is ringlab's own wrapper, which
    #: keeps root for perf tracepoints and starts the code under test as the user itself) or
    #: "root" (the trial loads a kernel module: insmod and rmmod need root)
    trial_privilege: str = "user"
    #: constraints between parameters that the trial binaries enforce (:class:`AtMost`), checked
    #: by ``resolve`` before anything is built or run
    constraints: list[AtMost] = []

    # -- parameters -----------------------------------------------------------------
    @classmethod
    def all_params(cls) -> dict[str, Param]:
        out = {p.name: p for p in COMMON_PARAMS}
        out.update({p.name: p for p in cls.params})
        return out

    @classmethod
    def resolve(cls, overrides: dict[str, Any] | None = None, profile: str | None = None) -> dict[str, Any]:
        """Validated, typed parameter set: defaults < profile < explicit overrides."""
        specs = cls.all_params()
        # a parameter whose default is unset stays unset when it is passed as None (a resolved
        # set passed on again)
        overrides = {k: v for k, v in (overrides or {}).items()
                     if not (v is None and k in specs and specs[k].default is None)}
        unknown = sorted(set(overrides) - set(specs))
        if unknown:
            raise ParamError(f"unknown parameter '{unknown[0]}' for experiment '{cls.name}'; "
                             f"allowed: {', '.join(sorted(specs))}")
        prof = specs["profile"].parse(overrides.pop("profile", profile or "quick"))
        values: dict[str, Any] = {n: p.default for n, p in specs.items()}
        values.update(cls.profiles.get(prof, {}))
        values["profile"] = prof
        for name, raw in overrides.items():
            values[name] = specs[name].parse(raw)
        # Defaults and profile values go through the same validation.
        for name, p in specs.items():
            if name not in overrides and values[name] is not None:
                values[name] = p.parse(values[name])
        if "target_ci" in cls.profiles.get(prof, {}) and "target_ci" not in overrides:
            cls._profile_target(values, overrides)
        if "target_ci" in overrides and "target_ci_by_mode" in specs and "target_ci_by_mode" not in overrides:
            values["target_ci_by_mode"] = ""     # the target asked for holds in every mode
        if values["budget"] > 0 and not values["target_ci"] > 0:
            raise ParamError(f"parameter 'budget': {values['budget']:g} s without target_ci; allowed: 0, or "
                             "a budget together with -p target_ci PCT")
        arms = values.get("variants")
        if values["baseline"] and isinstance(arms, list) and values["baseline"] not in arms:
            raise ParamError(f"parameter 'baseline': {values['baseline']!r} is not in variants; allowed: "
                             + ", ".join(map(str, arms)), input="baseline")
        judged = [a.strip() for a in str(values.get("target_arms") or "").split(",") if a.strip()]
        if judged and isinstance(arms, list):
            base = values["baseline"] or (arms[0] if arms else "")
            bad = [a for a in judged if a not in arms or a == base]
            if bad:
                raise ParamError(f"parameter 'target_arms': {bad[0]!r} is not an arm compared with the baseline "
                                 f"{base!r}; allowed: " + ", ".join(str(a) for a in arms if a != base),
                                 input="target_arms")
        cls.check(values)
        for constraint in cls.constraints:
            constraint.check(values)
        return values

    @classmethod
    def _profile_target(cls, values: dict[str, Any], overrides: dict[str, Any]) -> None:
        """A profile's target and budget give way to a fixed design: explicit ``trials`` or
        ``layouts``, or a single arm (nothing to compare)."""
        arms = values.get("variants")
        if {"trials", "layouts"} & set(overrides) or (isinstance(arms, list) and len(arms) < 2):
            values["target_ci"] = 0.0
            if "budget" not in overrides:
                values["budget"] = 0.0

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        """Cross-parameter validation; raise ParamError.  Override as needed."""

    @classmethod
    def param_columns(cls) -> list[str]:
        """Parameter columns of this experiment's raw.csv (after ``variant``): its catalog entry's
        (ringlab.catalog), else its parameters recorded per trial."""
        if cls.name in catalog.EXPERIMENT_NAMES:
            return list(catalog.experiment(cls.name).param_columns)
        return [p.name for p in cls.params if p.column and p.name != "variants"]

    # -- trials ---------------------------------------------------------------------
    def plan(self, values: dict[str, Any], ctx: "Any") -> list[TrialSpec]:
        """All trials (warm-ups included), in a canonical order; the runner shuffles."""
        raise NotImplementedError

    def command(self, spec: TrialSpec, ctx: "Any") -> list[str]:
        """argv for one trial.  Never a shell string."""
        raise NotImplementedError

    def parse(self, spec: TrialSpec, stdout: str, stderr: str, ctx: "Any") -> list[dict[str, Any]]:
        """raw.csv rows (one per in-process iteration) from the trial's stdout/stderr.

        Raise ValueError when the output cannot be parsed; the runner records the
        trial as status=error with the message, and goes on."""
        raise NotImplementedError

    # Optional hooks -------------------------------------------------------------------
    def unavailable(self, values: dict[str, Any], ctx: "Any") -> str | None:
        """Return a reason string when this experiment cannot run on this machine (skipped, not failed)."""
        return None

    def unavailable_arms(self, values: dict[str, Any], ctx: "Any") -> dict[str, str]:
        """Arms (variants) that cannot run on this machine -> why, when others can: they are left
        out of the plan, and the run ends ``failed`` naming them (never ``complete`` with an arm
        missing).  When no arm can run, ``unavailable`` says why and the run is skipped."""
        return {}

    def cleanup(self, spec: TrialSpec, ctx: "Any") -> None:
        """Called after a trial that timed out or was interrupted, once its process group is
        killed: undo what the trial left behind (kmod: unload the module).  Errors are warned."""

    def build_info(self, values: dict[str, Any]) -> dict[str, Any]:
        """Merged into env.json's ``build``: what this experiment built itself (its
        ``binaries`` {name: {path, sha256, source_sha256}}), for ``ringlab provenance``."""
        return {}

    def measured_binary(self, spec: TrialSpec, argv: list[str], ctx: "Any") -> str:
        """The executable whose code the trial measures (hashed into binary_sha256).

        Default: argv[0].  Override when argv[0] is a wrapper (perf, a pinning shim)."""
        return argv[0]

    # -- instruction counts (icount=true) ------------------------------------------------
    def single_threaded(self, spec: TrialSpec) -> bool:
        """True when this trial runs one thread, so callgrind's count is meaningful."""
        return False

    def icount_specs(self, values: dict[str, Any], specs: list[TrialSpec]) -> list[TrialSpec]:
        """Callgrind trials for every single-threaded configuration in ``specs``.

        ``icount_trials`` per configuration (two by default: the second shows the count
        repeats exactly), each running ``icount_ops`` operations (``extra["ops"]``, which
        ``command()`` must honour) because callgrind runs code 50-100x slower.  The
        configuration columns stay those of the timing trials, so tables line up.
        """
        out, seen = [], set()
        for s in specs:
            if s.warmup or not self.single_threaded(s):
                continue
            k = s.key()[:-1]  # configuration + cpus, without the trial index
            if k in seen:
                continue
            seen.add(k)
            ops = min(int(values.get("icount_ops", 1_000_000)), int(s.config.get("count", 1 << 62)))
            for t in range(int(values.get("icount_trials", 2))):
                out.append(TrialSpec(dict(s.config), t, False, s.cpus, s.pair_class,
                                     dict(s.extra, kind="icount", ops=ops)))
        return out

    def needed_binaries(self, values: dict[str, Any]) -> list[str]:
        """Names under build/bin this parameter set needs (default: ``binaries``)."""
        return list(self.binaries)

    def build_args(self, values: dict[str, Any]) -> dict[str, Any]:
        """Keyword arguments for ``ringlab.build.driver.build_all`` (e.g. cflags, kernel_headers)."""
        return {}


def _num(x: Any) -> float:
    """JSON number or null -> float (NaN for null), so unsupported never reads as 0."""
    return float("nan") if x is None else float(x)


def last_json_object(stdout: str) -> Any:
    """The last line of ``stdout`` that parses as a JSON object (wrappers print one), or None."""
    for line in reversed((stdout or "").strip().splitlines()):
        if line.strip().startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def _grouped(errors: list[str]) -> str:
    """``"ev: reason"`` items joined by ``"; "``, the events that share a reason named once:
    "cycles, instructions: not supported (ENOENT)" (a row per trial repeats it, so it stays short)."""
    by_reason: dict[str, list[str]] = {}
    for e in errors:
        ev, _, reason = e.partition(": ")
        by_reason.setdefault(reason, []).append(ev)
    return "; ".join(f"{', '.join(evs)}: {reason}" for reason, evs in by_reason.items())


def parse_harness_json(stdout: str, counter_events: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows (one per in-process iteration) from the test binaries' ``--json`` output.

    The format is documented in docs/architecture.md and shared by every binary of
    csrc/harness, so experiments call this from ``parse()`` and add their own columns.
    Counters that did not open (``value`` null) become NaN and their reason goes to
    ``counter_errors``; counters the binary did not report at all are NaN as well.
    Raises ValueError when stdout holds no JSON object.
    """
    text = stdout.strip()
    # Tolerate chatter before the JSON object: take the last line that parses.
    doc = last_json_object(text)
    if doc is None:
        try:
            doc = json.loads(text)
        except ValueError:
            raise ValueError(f"no JSON object in the binary's output: {text[-200:]!r}") from None
    return harness_rows(doc, counter_events)


def harness_rows(doc, counter_events: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """``parse_harness_json``'s rows of one parsed JSON object (ValueError when it has no
    ``iterations``)."""
    events = list(counter_events or COUNTER_EVENTS)
    if not isinstance(doc, dict) or not isinstance(doc.get("iterations"), list) or not doc["iterations"]:
        raise ValueError("binary's JSON has no 'iterations' list")
    rows = []
    for k, it in enumerate(doc["iterations"]):
        row: dict[str, Any] = {"iteration": k}
        for col in ("ns_per_op", "elapsed_ns", "ns_producer", "ns_consumer"):
            row[col] = _num(it.get(col))
        for col in ("cpu_producer_start", "cpu_producer_end", "cpu_consumer_start", "cpu_consumer_end"):
            v = it.get(col)
            row[col] = -1 if v is None else int(v)
        row["count"] = doc.get("count")
        counters = it.get("counters") or {}
        errors, multiplexed = [], False
        for ev in events:
            c = counters.get(ev)
            if c is None:
                row[ev] = float("nan")
                if counters:
                    errors.append(f"{ev}: not reported")
                continue
            row[ev] = _num(c.get("value"))
            if c.get("value") is None:
                errors.append(f"{ev}: {c.get('error') or 'not available'}")
            multiplexed = multiplexed or bool(c.get("multiplexed"))
        if not counters:
            errors.append("all: counters not read")
        row["counters_multiplexed"] = multiplexed
        row["counter_errors"] = _grouped(errors)
        row["ctx_voluntary"] = doc.get("ctx_voluntary")
        row["ctx_involuntary"] = doc.get("ctx_involuntary")
        rows.append(row)
    return rows


# -- registry -------------------------------------------------------------------------
#: name -> "module:Class" of every experiment (ringlab.catalog); modules are imported lazily
REGISTRY: dict[str, str] = {e.name: e.implementation for e in catalog.EXPERIMENTS}


def names() -> list[str]:
    return sorted(REGISTRY)


def get(name: str) -> type[Experiment]:
    if name not in REGISTRY:
        raise ParamError(f"unknown experiment '{name}'; allowed: {', '.join(names())}")
    mod, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(mod), cls)
