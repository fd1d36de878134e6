"""Experiment parameters: their kinds, bounds and parsing, and the parameters every experiment has.

Parsing of values is shared by the CLI and the notebooks, and guards against
papermill's traps: ``-p sizes 16,1000`` arrives as a string, ``-p version 1.10``
as a float, YAML ``-y`` lists as lists.  Every error names the parameter and the
allowed values.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from typing import Any

from ringlab.catalog import experiments as catalog_experiments
from ringlab.catalog import STOP_MODES
from ringlab.errors import ParamError
from ringlab.names import check_name


KINDS = ("int", "float", "bool", "str", "int_list", "str_list", "float_list")

#: The most operations one timed loop may run (ringlab.catalog.experiments): the count parameters
#: stop there too.
MAX_OPS = catalog_experiments.MAX_OPS
#: Bounds of the common numeric parameters (documented in ``ringlab run EXP --list-params``).
MAX_TRIALS = 100_000          # measured trials (or rounds) per configuration
MAX_WARMUP = 1_000            # warm-up trials per configuration
MAX_TIMEOUT_S = 86_400.0      # one trial may run a day at most
MAX_BUDGET_S = 30 * 86_400.0  # target_ci's budget: thirty days of trials
MAX_SEED = 2**32 - 1
#: A plan may hold at most this many trials (warm-ups and icount trials included): each is a
#: process and at least one raw.csv row, and the plan is held in memory (about 2 KiB a trial).
MAX_PLAN_TRIALS = 1_000_000


#: The only spelling of an integer a string may have: plain decimal digits, a '-' in front where
#: the parameter allows negative values (no '+', '_', 0x/0o/0b, exponent or other scripts' digits).
_INT_RE = re.compile(r"-?[0-9]+")
#: The only spelling of a number a string may have: decimal, an optional fraction and exponent.
_FLOAT_RE = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
#: The one list separator of a list parameter given as text.
LIST_SEPARATOR = ","


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
    names: bool = False            # each value is a name (ringlab.names), e.g. a variant: refused otherwise
    #: what ``--list-params`` shows as the default when it is not the value itself (the seed: a
    #: fresh one per run)
    default_text: str | None = None

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

    def _fail(self, raw: Any, why: str = "") -> ParamError:
        """The one-line error for ``raw``: parameter name, reason and the allowed values."""
        got = repr(raw)
        return ParamError(f"parameter '{self.name}': {why or 'invalid value'} {got}; allowed: {self.allowed()}",
                          input=self.name)

    def _parse_list(self, raw: Any) -> list[Any]:
        """A comma-separated string or a sequence, each element parsed as the element kind; a value
        given twice is refused (one rule for every list parameter)."""
        elem = Param(self.name, self.kind[:-5], None, self.help, self.choices, self.min, self.max,
                     names=self.names)
        # a name keeps its tabs and newlines, so that the name rule refuses them
        strip = (lambda s: s.strip(" ")) if self.names else (lambda s: s.strip())
        if isinstance(raw, str):
            other = ";" if ";" in raw else None
            if other is not None:
                raise ParamError(f"parameter '{self.name}': {other!r} in {raw!r} is not a list separator; "
                                 f"allowed: {self.allowed()} (',' only between the values)", input=self.name)
            parts = [strip(p) for p in raw.split(LIST_SEPARATOR)]
            if parts == [""]:
                raise self._fail(raw, "empty list")
        elif isinstance(raw, (list, tuple)):
            parts = [strip(p) if isinstance(p, str) else p for p in raw]
        elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
            parts = [raw]
        else:
            raise self._fail(raw, "not a list:")
        if not parts:
            raise self._fail(raw, "empty list")
        if "" in parts:
            raise self._fail(raw, f"empty element (number {parts.index('') + 1}) in")
        out = []
        for p in parts:
            v = elem.parse(p)
            if v in out:
                shown = raw if isinstance(raw, str) else self.format(list(raw))
                raise ParamError(f"parameter '{self.name}': listed twice: {self.format(v)} in {shown!r}; "
                                 f"allowed: each value once, {self.allowed()}", input=self.name)
            out.append(v)
        return out

    def _parse_bool(self, raw: Any) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, (int,)) and raw in (0, 1):
            return bool(raw)
        if isinstance(raw, str) and raw.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        raise self._fail(raw, "not a boolean:")

    def _parse_int(self, raw: Any) -> int:
        """An int, an integral float (papermill, YAML), or a string of plain decimal digits with a
        leading '-' where negative values are allowed; nothing else (no '_', 0x, 1e8 or '+')."""
        if isinstance(raw, bool):
            raise self._fail(raw, "not an integer:")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and math.isfinite(raw) and raw.is_integer():
            return int(raw)
        if not isinstance(raw, str):
            raise self._fail(raw, "not an integer:")
        s = raw.strip()
        if not _INT_RE.fullmatch(s):
            raise self._fail(raw, "not an integer in plain decimal digits:")
        if s.startswith("-") and self.min is not None and self.min >= 0:
            raise self._fail(raw, "too small:")
        return int(s)

    def _parse_float(self, raw: Any) -> float:
        if isinstance(raw, bool):
            raise self._fail(raw, "not a number:")
        if isinstance(raw, str) and not _FLOAT_RE.fullmatch(raw.strip()):
            # float() reads '1_0', 'infinity' and other scripts' digits too
            finite = True
            try:
                finite = math.isfinite(float(raw)) if raw.isascii() else True
            except ValueError:
                pass
            raise self._fail(raw, "not a finite number:" if not finite else "not a number in plain decimal notation:")
        try:
            val = float(raw)
        except (TypeError, ValueError):
            raise self._fail(raw, "not a number:") from None
        if not math.isfinite(val):
            raise self._fail(raw, "not a finite number:")
        if val != 0 and abs(val) < sys.float_info.min:
            raise self._fail(raw, "a subnormal number (too small to be a measure):")
        return val

    def _parse_str(self, raw: Any) -> str:
        if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
            raise self._fail(raw, "not a string:")
        # papermill trap: -p version 1.10 arrives as 1.1; we cannot undo that,
        # so strings that must look like numbers should be passed with -r.
        return str(raw).strip(" ") if self.names else str(raw).strip()

    def parse(self, raw: Any) -> Any:
        """Turn a CLI string / papermill value into the typed value, or raise ParamError."""
        if self.kind.endswith("_list"):
            return self._parse_list(raw)
        if self.kind == "bool":
            return self._parse_bool(raw)
        if self.kind == "int":
            val = self._parse_int(raw)
        elif self.kind == "float":
            val = self._parse_float(raw)
        elif self.kind == "str":
            val = self._parse_str(raw)
            if self.names:
                check_name(val, f"parameter '{self.name}'")
        else:  # pragma: no cover - programming error
            raise AssertionError(self.kind)
        if self.choices is not None and val not in self.choices:
            raise self._fail(raw, "unknown value")
        if self.min is not None and val < self.min:
            raise self._fail(raw, "too small:")
        if self.max is not None and val > self.max:
            raise self._fail(raw, "too large:")
        return val

    def format(self, value: Any) -> str:
        """The CLI / CSV spelling of a typed value."""
        if isinstance(value, list):
            return ",".join(map(str, value))
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)


def has_target(values: dict[str, Any]) -> bool:
    """Whether a run measures in stages until ``target_ci`` holds (``ringlab.run.stopping``)."""
    return float(values.get("target_ci") or 0) > 0


def parse_mode_targets(text: Any, modes=None) -> dict[str, float]:
    """``target_ci_by_mode`` ("1:1.0,2:0.75": MODE:PCT, comma-separated) as {mode: PCT}; empty
    text gives {}.  ParamError names the parameter and the allowed values."""
    allowed = (f"MODE:PCT pairs, comma-separated, MODE one of {', '.join(map(str, modes))}" if modes else
               "MODE:PCT pairs, comma-separated") + ", PCT in (0, 99]; empty: target_ci in every mode"
    out: dict[str, float] = {}
    for part in str(text or "").replace(" ", "").split(","):
        if not part:
            continue
        mode, sep, pct = part.partition(":")
        try:
            value = float(pct) if sep and pct.isascii() else math.nan
        except ValueError:
            value = math.nan
        if not mode.isdigit() or (modes and int(mode) not in modes) or not 0 < value <= 99 or mode in out:
            raise ParamError(f"parameter 'target_ci_by_mode': bad entry {part!r} in {text!r}; allowed: {allowed}",
                             input="target_ci_by_mode")
        out[str(int(mode))] = value
    return out


#: Parameters every experiment has (the runner interprets them).
COMMON_PARAMS = [
    Param("profile", "str", "quick", "smoke (seconds, tests) | quick (minutes; ptr_ring: ±0.5% in mode 0, ±1% in modes 1-2, within 60 s) | full (a tight target; "
          "ptr_ring: ±0.25% in mode 0, ±0.75% in modes 1-2, within 300 s)",
          choices=("smoke", "quick", "full"), column=False),
    Param("trials", "int", 10, "measured trials per configuration", min=1, max=MAX_TRIALS, column=False),
    Param("warmup", "int", 1, "warm-up trials per configuration (kept, marked warmup)", min=0, max=MAX_WARMUP,
          column=False),
    Param("repeats", "int", 1, "in-process timed loops per trial process (Kalibera & Jones)", min=1, max=1000,
          column=False),
    Param("timeout", "float", 120.0, "seconds before a trial is killed and recorded as timeout", min=0.1,
          max=MAX_TIMEOUT_S, column=False),
    # a run given no seed draws one (ringlab.run.prepare.draw_seed): the default is only what
    # resolve() fills in outside a run
    Param("seed", "int", 1, "seed of the randomized interleaved trial order and of the code and data layouts "
          "(a run given none draws one, recorded in env.json)", min=0, max=MAX_SEED, column=False,
          default_text="fresh random seed per run (recorded in env.json)"),
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
    Param("target_ci", "float", 0.0, "stop when the question is answered: measure in stages planned "
          "from the level calibration until every 95% CI half-width is at most this percent or every "
          "row is decided (0: off, trials decides; profiles quick and full set one)", min=0.0, max=99.0,
          column=False),
    Param("stop", "str", "decided", "what ends a run with target_ci before its budget: decided (every row "
          "decided or at its target) or target (every row at its target half-width)",
          choices=STOP_MODES, column=False),
    Param("baseline", "str", "", "the arm every other is compared with, one of variants (empty: the first "
          "of variants); a run with target_ci judges its rows against it", column=False),
    Param("target_arms", "str", "", "the arms whose rows a run with target_ci judges, comma-separated "
          "(empty: every arm but the baseline); the others are measured alongside and reported at the "
          "half-width they reach", column=False),
    Param("margin", "float", 1.0, "the equivalence margin in percent: a row whose CI includes 0 and lies "
          "within +-margin reads 'no significant difference' (the note states the margin); beyond it, "
          "inconclusive; reports of the run test this margin", min=0.0, max=99.0, column=False),
    Param("budget", "float", 0.0, "seconds of builds and trials target_ci may spend at most (0: no limit)",
          min=0.0, max=MAX_BUDGET_S, column=False),
    Param("quiet_timeout", "float", 60.0, "seconds to wait for quiet CPUs (quiet=wait) or for another "
          "ringlab run to release them", min=0.0, max=MAX_TIMEOUT_S, column=False),
]
