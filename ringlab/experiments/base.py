"""What an experiment is: typed parameters, profiles, trial planning, argv, parsing.

The same parameter names are used by the notebook ``parameters`` cell, by
``ringlab run EXPERIMENT -p NAME VALUE`` and by raw.csv columns.

An experiment never runs anything itself.  The runner (``ringlab.runner``)
asks it for the list of trials, shuffles them (seeded), builds each trial's argv
with ``command()``, runs it in a fresh process and hands stdout back to
``parse()``, which returns raw.csv rows.

Parsing of values is shared by the CLI and the notebooks, and guards against
papermill's traps: ``-p sizes 16,1000`` arrives as a string, ``-p version 1.10``
as a float, YAML ``-y`` lists as lists.  Every error names the parameter and the
allowed values.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ringlab.errors import ParamError  # noqa: F401  (re-exported: experiments raise it)


KINDS = ("int", "float", "bool", "str", "int_list", "str_list", "float_list")

#: The most operations one timed loop may run: the C binaries refuse more (ptr_ring_test and
#: syscall_loop ``-N``, page_frag_test ``nr_test``), so the count parameters stop here too.
MAX_OPS = 10**12
#: Bounds of the common numeric parameters (documented in ``ringlab run EXP --list-params``).
MAX_TRIALS = 100_000          # measured trials (or rounds) per configuration
MAX_WARMUP = 1_000            # warm-up trials per configuration
MAX_TIMEOUT_S = 86_400.0      # one trial may run a day at most
MAX_BUDGET_S = 30 * 86_400.0  # target_ci's budget: thirty days of trials
MAX_SEED = 2**32 - 1
#: A plan may hold at most this many trials (warm-ups and icount trials included): each is a
#: process and at least one raw.csv row, and the plan is held in memory (about 2 KiB a trial).
MAX_PLAN_TRIALS = 1_000_000


def _num_text(x: float) -> str:
    """A bound as users type it: 10000000, not 1e+07."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str                      # one of KINDS
    default: Any
    help: str
    choices: tuple | None = None   # allowed values (for str / str_list / int)
    min: float | None = None       # inclusive bounds for numbers (each list element too)
    max: float | None = None
    column: bool = True            # recorded as a raw.csv parameter column per trial

    def allowed(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices)) + (
                " (comma-separated list)" if self.kind.endswith("_list") else "")
        what = {"int": "an integer", "float": "a number", "bool": "true or false",
                "str": "a string", "int_list": "a comma-separated list of integers",
                "str_list": "a comma-separated list", "float_list": "a comma-separated list of numbers"}[self.kind]
        if self.min is not None and self.max is not None:
            what += f" in [{_num_text(self.min)}, {_num_text(self.max)}]"
        elif self.min is not None:
            what += f" >= {_num_text(self.min)}"
        elif self.max is not None:
            what += f" <= {_num_text(self.max)}"
        return what

    def parse(self, raw: Any) -> Any:
        """Turn a CLI string / papermill value into the typed value, or raise ParamError."""
        def fail(why: str = "") -> ParamError:
            got = repr(raw)
            return ParamError(f"parameter '{self.name}': {why or 'invalid value'} {got}; allowed: {self.allowed()}")

        if self.kind.endswith("_list"):
            elem = Param(self.name, self.kind[:-5], None, self.help, self.choices, self.min, self.max)
            if isinstance(raw, str):
                parts = [p.strip() for p in raw.replace(";", ",").split(",")]
                if parts == [""]:
                    raise fail("empty list")
            elif isinstance(raw, (list, tuple)):
                parts = [p.strip() if isinstance(p, str) else p for p in raw]
            elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
                parts = [raw]
            else:
                raise fail("not a list:")
            if not parts:
                raise fail("empty list")
            if "" in parts:
                raise fail(f"empty element (number {parts.index('') + 1}) in")
            out = []
            for p in parts:
                out.append(elem.parse(p))
            return out
        if self.kind == "bool":
            if isinstance(raw, bool):
                return raw
            if isinstance(raw, (int,)) and raw in (0, 1):
                return bool(raw)
            if isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return raw.strip().lower() in ("1", "true", "yes", "on")
            raise fail("not a boolean:")
        if self.kind == "int":
            if isinstance(raw, bool):
                raise fail("not an integer:")
            if isinstance(raw, int):
                val = raw
            elif isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
                val = int(raw)
            elif isinstance(raw, str):
                s = raw.strip().replace("_", "")
                try:
                    val = int(s, 0) if s.lower().startswith(("0x", "0o", "0b")) else int(s)
                except ValueError:
                    try:
                        f = float(s)  # accept 1e8
                    except ValueError:
                        raise fail("not an integer:") from None
                    if not math.isfinite(f):
                        raise fail("not a finite number:")
                    if not f.is_integer():
                        raise fail("not an integer:") from None
                    val = int(f)
            else:
                raise fail("not an integer:")
        elif self.kind == "float":
            if isinstance(raw, bool):
                raise fail("not a number:")
            try:
                val = float(raw)
            except (TypeError, ValueError):
                raise fail("not a number:") from None
            if not math.isfinite(val):
                raise fail("not a finite number:")
        elif self.kind == "str":
            if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
                raise fail("not a string:")
            # papermill trap: -p version 1.10 arrives as 1.1; we cannot undo that,
            # so strings that must look like numbers should be passed with -r.
            val = str(raw).strip()
        else:  # pragma: no cover - programming error
            raise AssertionError(self.kind)
        if self.choices is not None and val not in self.choices:
            raise fail("unknown value")
        if self.min is not None and val < self.min:
            raise fail("too small:")
        if self.max is not None and val > self.max:
            raise fail("too large:")
        return val

    def format(self, value: Any) -> str:
        """The CLI / CSV spelling of a typed value."""
        if isinstance(value, list):
            return ",".join(map(str, value))
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


#: Parameters every experiment has (the runner interprets them).
COMMON_PARAMS = [
    Param("profile", "str", "quick", "smoke (seconds, tests) | quick (minutes) | full (committed runs)",
          choices=("smoke", "quick", "full"), column=False),
    Param("trials", "int", 10, "measured trials per configuration", min=1, max=MAX_TRIALS, column=False),
    Param("warmup", "int", 1, "warm-up trials per configuration (kept, marked warmup)", min=0, max=MAX_WARMUP,
          column=False),
    Param("repeats", "int", 1, "in-process timed loops per trial process (Kalibera & Jones)", min=1, max=1000,
          column=False),
    Param("timeout", "float", 120.0, "seconds before a trial is killed and recorded as timeout", min=0.1,
          max=MAX_TIMEOUT_S, column=False),
    Param("seed", "int", 1, "seed of the randomized interleaved trial order", min=0, max=MAX_SEED, column=False),
    Param("counters", "bool", True, "read perf_event_open counters inside the measured region", column=False),
    Param("governor", "bool", True, "set the performance governor on the CPUs in use, restore afterwards",
          column=False),
    Param("disable_boost", "bool", False, "also disable turbo/boost while measuring", column=False),
    Param("icount", "bool", False, "also count instructions under callgrind (single-threaded trials only)",
          column=False),
    Param("icount_ops", "int", 1_000_000, "operations per callgrind trial (callgrind is 50-100x slower)",
          min=1, max=MAX_OPS, column=False),
    Param("icount_trials", "int", 2, "callgrind trials per single-threaded configuration", min=1,
          max=1_000, column=False),
    Param("quiet", "str", "warn", "other work on the measured CPUs at the start: warn, wait for quiet, or off",
          choices=("warn", "wait", "off"), column=False),
    Param("target_ci", "float", 0.0, "stop on a target: after a pilot, run the rounds that bring every "
          "95% CI half-width to this percent (two-stage design; 0: off, trials decides)", min=0.0, max=99.0,
          column=False),
    Param("budget", "float", 0.0, "seconds of trials target_ci may spend at most (0: no limit)", min=0.0,
          max=MAX_BUDGET_S, column=False),
    Param("quiet_timeout", "float", 60.0, "seconds to wait for quiet CPUs (quiet=wait) or for another "
          "ringlab run to release them", min=0.0, max=MAX_TIMEOUT_S, column=False),
]


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

    # -- parameters -----------------------------------------------------------------
    @classmethod
    def all_params(cls) -> dict[str, Param]:
        out = {p.name: p for p in COMMON_PARAMS}
        out.update({p.name: p for p in cls.params})
        return out

    @classmethod
    def resolve(cls, overrides: dict[str, Any] | None = None, profile: str | None = None) -> dict[str, Any]:
        """Validated, typed parameter set: defaults < profile < explicit overrides."""
        overrides = dict(overrides or {})
        specs = cls.all_params()
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
        if values["budget"] > 0 and not values["target_ci"] > 0:
            raise ParamError(f"parameter 'budget': {values['budget']:g} s without target_ci; allowed: 0, or "
                             "a budget together with -p target_ci PCT")
        cls.check(values)
        return values

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        """Cross-parameter validation; raise ParamError.  Override as needed."""

    @classmethod
    def param_columns(cls) -> list[str]:
        """Parameter columns of this experiment's raw.csv (after ``variant``)."""
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


def parse_harness_json(stdout: str, counter_events: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows (one per in-process iteration) from the test binaries' ``--json`` output.

    The format is documented in docs/architecture.md and shared by every binary of
    csrc/harness, so experiments call this from ``parse()`` and add their own columns.
    Counters that did not open (``value`` null) become NaN and their reason goes to
    ``counter_errors``; counters the binary did not report at all are NaN as well.
    Raises ValueError when stdout holds no JSON object.
    """
    from ringlab.schema import COUNTER_EVENTS

    events = list(counter_events or COUNTER_EVENTS)
    text = stdout.strip()
    # Tolerate chatter before the JSON object: take the last line that parses.
    doc = last_json_object(text)
    if doc is None:
        try:
            doc = json.loads(text)
        except ValueError:
            raise ValueError(f"no JSON object in the binary's output: {text[-200:]!r}") from None
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
        row["counter_errors"] = "; ".join(errors)
        row["ctx_voluntary"] = doc.get("ctx_voluntary")
        row["ctx_involuntary"] = doc.get("ctx_involuntary")
        rows.append(row)
    return rows


# -- registry -------------------------------------------------------------------------
_REGISTRY: dict[str, str] = {
    # name -> "module:Class"; modules are imported lazily
    "ptr_ring": "ringlab.experiments.ptr_ring:PtrRing",
    "page_frag": "ringlab.experiments.page_frag:PageFrag",
    "perf_rb": "ringlab.experiments.perf_rb:PerfRb",
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> type[Experiment]:
    if name not in _REGISTRY:
        raise ParamError(f"unknown experiment '{name}'; allowed: {', '.join(names())}")
    import importlib
    mod, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(mod), cls)
