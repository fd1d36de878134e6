"""The sysfs knobs ringlab tunes for a measurement: the cpufreq governor and boost.

Every knob is a ``Knob``: it says where it lives, what it reads as, and which
paths and values are its own (the tuning state file is checked against them).
Planning, applying and restoring are the same for every knob; ``governor.Tuning``
loops over ``KNOBS``.  Knobs never print: they return reasons.

Restoring (``put_back``) never overwrites a value that someone else changed
after ringlab set it: the outcome is "left", and the caller reports it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ringlab.system import sysfs

TARGET_GOVERNOR = "performance"
NO_CPUFREQ = "no cpufreq driver (virtual machine?)"


def _cpu_dir() -> Path:
    return sysfs.sysfs_root() / "devices" / "system" / "cpu"


def online_cpus() -> list[int]:
    try:
        return sysfs.parse_cpulist(sysfs.read(_cpu_dir() / "online"))
    except ValueError:
        return []


def _why_write_failed(path: Path, e: OSError) -> str:
    if isinstance(e, PermissionError):
        return f"permission denied writing {path} (run as root)"
    if isinstance(e, FileNotFoundError):
        return f"{path} does not exist"
    return f"cannot write {path}: {e.strerror or e}"


@dataclass
class Write:
    """One sysfs write: what was there before, what we want, what it read after."""
    op: str
    key: str          # CPU number or knob name, for the report
    path: str         # absolute path (includes the sysfs root, so restore works from the state file alone)
    before: str
    value: str
    done: bool = False
    error: str | None = None
    after: str | None = None   # read back after writing `value` (what ringlab left in place)

    def to_json(self) -> dict:
        return {"op": self.op, "key": self.key, "path": self.path, "before": self.before, "value": self.value}


@dataclass
class Outcome:
    """What restoring one Write did: restored, left (someone changed it after us) or failed."""
    write: Write
    status: str                 # "restored" | "left" | "failed"
    now: str | None = None      # the value read at the end
    error: str | None = None

    def message(self) -> str:
        w = self.write
        if self.status == "restored":
            return f"{w.op} {w.key}: restored {w.before}"
        if self.status == "left":
            return (f"{w.op} {w.key}: left as is — {w.path} reads {self.now!r}, not the {w.value!r} "
                    f"ringlab set, so someone changed it since (before ringlab: {w.before!r})")
        return f"{w.op} {w.key}: NOT restored — {self.error}"


def put_back(w: Write) -> Outcome:
    """Write ``w.before`` back unless the knob no longer holds what ringlab set."""
    now = sysfs.read(w.path)
    if now == w.before:
        return Outcome(w, "restored", now)
    ours = {w.value} | ({w.after} if w.after is not None else set())
    if now is not None and now not in ours:
        return Outcome(w, "left", now)
    try:
        sysfs.write(w.path, w.before)
    except OSError as e:
        return Outcome(w, "failed", sysfs.read(w.path), _why_write_failed(Path(w.path), e))
    now = sysfs.read(w.path)
    if now != w.before:
        return Outcome(w, "failed", now, f"{w.path} reads {now!r} after writing {w.before!r}")
    return Outcome(w, "restored", now)


# -- knobs ------------------------------------------------------------------------------
class Knob:
    """One setting tuned for the measurement.

    A subclass says where the knob lives (``targets``), what it reads as
    (``show`` / ``state``) and which sysfs paths and values are its own
    (``PATHS`` / ``VALUE``: the state file is checked against them).  Planning,
    applying and restoring are the same for every knob.
    """
    name = ""
    goal = ""                                 # "performance", "disabled": what tuning makes it
    done_words = ""                           # "set performance", "disabled": what apply() did
    opt_in = False                            # tuned only when the run asks (disable_boost)
    PATHS: tuple[re.Pattern, ...] = ()        # its paths relative to the sysfs root
    VALUE: re.Pattern = re.compile(r"")       # the values it takes

    def __init__(self, cpus: Iterable[int]):
        self.cpus = sorted(set(cpus))

    def available(self) -> str | None:
        """None when usable, else the reason."""
        raise NotImplementedError

    def show(self) -> dict:
        """Everything known about the knob (``ringlab env``)."""
        raise NotImplementedError

    def details(self) -> dict:
        """Fields of the run report that describe the knob (driver, kind)."""
        return {}

    def state(self) -> dict:
        """The knob's current value as the run report records it (before / after / restored_to)."""
        raise NotImplementedError

    @staticmethod
    def summarize(state: dict) -> str:
        vals = sorted({str(v) for v in state.values()})
        return "/".join(vals) if vals else "unknown"

    def targets(self) -> list[tuple[str, Path, str]]:
        """(key, path, wanted value) for each sysfs file to write."""
        raise NotImplementedError

    @classmethod
    def owns(cls, rel_path: str, value: str) -> bool:
        return any(p.fullmatch(rel_path) for p in cls.PATHS) and bool(cls.VALUE.fullmatch(value))

    def planned_writes(self) -> list[Write]:
        writes = []
        for key, path, want in self.targets():
            cur = sysfs.read(path)
            if cur is not None and cur != want:
                writes.append(Write(self.name, key, str(path), cur, want))
        return writes

    def apply(self, writes: list[Write]) -> None:
        """Write each planned value; errors go into ``Write.error``, never raised."""
        for w in writes:
            try:
                sysfs.write(w.path, w.value)
            except OSError as e:
                w.error = _why_write_failed(Path(w.path), e)
                continue
            w.done = True    # attempted: restore must write `before` back even if the readback differs
            w.after = sysfs.read(w.path)
            if w.after != w.value:
                w.error = f"{w.path} reads {w.after!r} after writing {w.value!r}"

    def restore(self, writes: list[Write]) -> list[Outcome]:
        return [put_back(w) for w in writes if w.done]


_CPU = r"devices/system/cpu/"
_POLICY = rf"{_CPU}(?:cpufreq/policy\d+|cpu\d+/cpufreq)/"


class CPUGovernor(Knob):
    """scaling_governor of the cpufreq policy of each CPU in use."""
    name = "governor"
    goal = TARGET_GOVERNOR
    done_words = f"set {TARGET_GOVERNOR}"
    PATHS = (re.compile(_POLICY + "scaling_governor"),)
    VALUE = re.compile(r"[A-Za-z0-9_-]{1,32}")

    def policy_dir(self, cpu: int) -> Path | None:
        # cpuN/cpufreq is a symlink to cpufreq/policyM; fall back to scanning
        # the policies' related_cpus for trees (or kernels) without the link.
        d = _cpu_dir() / f"cpu{cpu}" / "cpufreq"
        if sysfs.read(d / "scaling_governor") is not None:
            return d
        for pol in sorted((_cpu_dir() / "cpufreq").glob("policy*")):
            rel = sysfs.read(pol / "related_cpus") or sysfs.read(pol / "affected_cpus") or ""
            if cpu in sysfs.parse_cpulist(rel.replace(" ", ",")) and sysfs.read(pol / "scaling_governor") is not None:
                return pol
        return None

    def show(self) -> dict:
        out = {"driver": {}, "governor": {}, "available_governors": {}}
        for c in self.cpus:
            d = self.policy_dir(c)
            if d is None:
                continue
            out["driver"][str(c)] = sysfs.read(d / "scaling_driver")
            out["governor"][str(c)] = sysfs.read(d / "scaling_governor")
            out["available_governors"][str(c)] = (sysfs.read(d / "scaling_available_governors") or "").split()
        return out

    def details(self) -> dict:
        return {"driver": self.show()["driver"]}

    def state(self) -> dict:
        return dict(self.show()["governor"])

    def available(self) -> str | None:
        missing = [c for c in self.cpus if self.policy_dir(c) is None]
        if missing and len(missing) == len(self.cpus):
            return NO_CPUFREQ
        if missing:
            return f"no cpufreq policy for CPUs {sysfs.format_cpulist(missing)}"
        for c in self.cpus:
            d = self.policy_dir(c)
            avail = (sysfs.read(d / "scaling_available_governors") or "").split()
            if avail and TARGET_GOVERNOR not in avail:
                drv = sysfs.read(d / "scaling_driver") or "?"
                return (f"driver {drv} on CPU {c} does not offer '{TARGET_GOVERNOR}' "
                        f"(available: {', '.join(avail)})")
        return None

    def targets(self) -> list[tuple[str, Path, str]]:
        out, seen = [], set()
        for c in self.cpus:
            p = (self.policy_dir(c) / "scaling_governor").resolve()
            if p not in seen:          # several CPUs share one policy
                seen.add(p)
                out.append((str(c), p, TARGET_GOVERNOR))
        return out


class Boost(Knob):
    """Turbo/boost: cpufreq/boost (acpi-cpufreq), intel_pstate/no_turbo, or per-policy boost (amd-pstate)."""
    name = "boost"
    goal = "disabled"
    done_words = "disabled"
    opt_in = True
    PATHS = (re.compile(_CPU + "cpufreq/boost"), re.compile(_CPU + "intel_pstate/no_turbo"),
             re.compile(_POLICY + "boost"))
    VALUE = re.compile(r"[01]")

    def knobs(self) -> tuple[str | None, list[tuple[str, Path]]]:
        """(kind, [(key, path)]); kind None when no knob exists."""
        cd = _cpu_dir()
        # intel_pstate exposes no_turbo (inverted sense) and no cpufreq/boost.
        p = cd / "intel_pstate" / "no_turbo"
        if sysfs.read(p) is not None:
            return "intel_pstate/no_turbo", [("no_turbo", p)]
        p = cd / "cpufreq" / "boost"
        if sysfs.read(p) is not None:
            return "cpufreq/boost", [("boost", p)]
        # amd-pstate (kernel 6.11+) and others: per-policy cpufreq/policyN/boost.
        gov = CPUGovernor(self.cpus)
        per = []
        seen = set()
        for c in self.cpus:
            d = gov.policy_dir(c)
            if d is not None and sysfs.read(d / "boost") is not None:
                rp = (d / "boost").resolve()
                if rp not in seen:
                    seen.add(rp)
                    per.append((str(c), rp))
        if per:
            return "cpufreq/policy*/boost", per
        return None, []

    def available(self) -> str | None:
        kind, _ = self.knobs()
        if kind is None:
            if CPUGovernor(self.cpus).available() == NO_CPUFREQ:
                return NO_CPUFREQ
            return "no boost knob (intel_pstate/no_turbo, cpufreq/boost or policy boost) in sysfs"
        return None

    def show(self) -> dict:
        kind, knobs = self.knobs()
        if kind is None:
            return {"knob": None, "enabled": None}
        vals = {k: sysfs.read(p) for k, p in knobs}
        if kind == "intel_pstate/no_turbo":
            enabled = vals["no_turbo"] == "0"
        else:
            enabled = any(v == "1" for v in vals.values())
        return {"knob": kind, "enabled": enabled, "values": vals}

    def details(self) -> dict:
        return {"knob": self.show()["knob"]}

    def state(self) -> dict:
        return {"enabled": self.show()["enabled"]}

    @staticmethod
    def summarize(state: dict) -> str:
        e = state.get("enabled")
        return "boost " + ("on" if e else "off" if e is not None else "unknown")

    def targets(self) -> list[tuple[str, Path, str]]:
        kind, knobs = self.knobs()
        want = "1" if kind == "intel_pstate/no_turbo" else "0"
        return [(key, p, want) for key, p in knobs]


#: Every knob, in the order they are set and restored (governor before boost).
KNOBS: tuple[type[Knob], ...] = (CPUGovernor, Boost)
