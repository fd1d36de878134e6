"""CPU frequency governor and boost: set for the measurement, restore afterwards.

pyperf's ``system tune`` sets the knobs and ``reset`` writes fixed defaults,
so users cannot tell what was changed or get their own settings back
(pyperf #158).  Here every knob is an operation class with
``available()`` / ``show()`` / ``planned_writes()``; ``tune()`` records the
original values in a state file *before* writing anything, and puts them back
on every catchable exit path (normal, exception, SIGINT, SIGTERM).  After a
SIGKILL, ``ringlab env --restore`` (restore_saved_state) uses the state file.

Operations never print: they return reasons and ``Tuning.messages`` collects
human-readable lines that commands print.

Order matters: the governor is set before boost, because switching the
governor of intel_pstate can reset ``no_turbo`` (pyperf's OPERATIONS comment
says the same); restore follows the same order so the last write to boost is
the saved value.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ringlab.system import sysfs

STATE_VERSION = 1
TARGET_GOVERNOR = "performance"
NO_CPUFREQ = "no cpufreq driver (virtual machine?)"


def default_state_file() -> Path:
    """$RINGLAB_STATE_DIR/tuning-state.json, else ~/.cache/ringlab/tuning-state.json."""
    d = os.environ.get("RINGLAB_STATE_DIR")
    base = Path(d) if d else Path.home() / ".cache" / "ringlab"
    return base / "tuning-state.json"


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
    """One sysfs write: what was there before, what we want."""
    op: str
    key: str          # CPU number or knob name, for the report
    path: str         # absolute path (includes the sysfs root, so restore works from the state file alone)
    before: str
    value: str
    done: bool = False
    error: str | None = None


class CPUGovernor:
    """scaling_governor of the cpufreq policy of each CPU in use."""
    name = "governor"

    def __init__(self, cpus: Iterable[int]):
        self.cpus = sorted(set(cpus))

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

    def available(self) -> str | None:
        """None when usable, else the reason."""
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

    def planned_writes(self) -> list[Write]:
        writes, seen = [], set()
        for c in self.cpus:
            d = self.policy_dir(c)
            p = (d / "scaling_governor").resolve()
            if p in seen:          # several CPUs share one policy
                continue
            seen.add(p)
            cur = sysfs.read(p)
            if cur is not None and cur != TARGET_GOVERNOR:
                writes.append(Write(self.name, str(c), str(p), cur, TARGET_GOVERNOR))
        return writes


class Boost:
    """Turbo/boost: cpufreq/boost (acpi-cpufreq), intel_pstate/no_turbo, or per-policy boost (amd-pstate)."""
    name = "boost"

    def __init__(self, cpus: Iterable[int]):
        self.cpus = sorted(set(cpus))

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

    def planned_writes(self) -> list[Write]:
        kind, knobs = self.knobs()
        writes = []
        for key, p in knobs:
            cur = sysfs.read(p)
            want = "1" if kind == "intel_pstate/no_turbo" else "0"
            if cur is not None and cur != want:
                writes.append(Write(self.name, key, str(p), cur, want))
        return writes


# -- state file -------------------------------------------------------------------------
def _write_state(path: Path, writes: list[Write]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"version": STATE_VERSION, "pid": os.getpid(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "sysfs_root": str(sysfs.sysfs_root()),
            "writes": [{"op": w.op, "key": w.key, "path": w.path, "before": w.before, "value": w.value}
                       for w in writes]}
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())   # the file must survive a SIGKILL or power loss right after
    os.replace(tmp, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def restore_saved_state(state_file: str | Path | None = None) -> dict:
    """Write back the values saved by an interrupted tune() (e.g. after SIGKILL).

    Returns {"status": "restored" | "nothing to restore" | "failed", "state_file", "pid",
    "created", "restored": [{"path", "value", "ok", "error"}], "messages": [...]}.  The state
    file is removed only when every value was written back.
    """
    path = Path(state_file) if state_file else default_state_file()
    out = {"status": "nothing to restore", "state_file": str(path), "pid": None, "created": None,
           "restored": [], "messages": []}
    if not path.exists():
        out["messages"].append(f"no saved tuning state at {path}: nothing to restore")
        return out
    try:
        data = json.loads(path.read_text())
        writes = data["writes"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        out["status"] = "failed"
        out["messages"].append(f"cannot read state file {path}: {e}")
        return out
    out["pid"], out["created"] = data.get("pid"), data.get("created")
    ok_all = True
    for w in writes:
        rec = {"path": w["path"], "value": w["before"], "ok": False, "error": None}
        try:
            if sysfs.read(w["path"]) != w["before"]:
                sysfs.write(w["path"], w["before"])
            rec["ok"] = sysfs.read(w["path"]) == w["before"]
            if not rec["ok"]:
                rec["error"] = f"{w['path']} reads {sysfs.read(w['path'])!r} after writing {w['before']!r}"
        except OSError as e:
            rec["error"] = _why_write_failed(Path(w["path"]), e)
        ok_all &= rec["ok"]
        out["restored"].append(rec)
        out["messages"].append(f"{w['op']} {w['key']}: " + (
            f"restored {w['before']}" if rec["ok"] else f"NOT restored — {rec['error']}"))
    if ok_all:
        path.unlink(missing_ok=True)
        out["status"] = "restored"
    else:
        out["status"] = "failed"
    return out


# -- tuning -----------------------------------------------------------------------------
class Tuning:
    """Context manager: set the performance governor (and disable boost) on ``cpus``, restore on exit.

    ``report`` is the dict that goes into env.json; ``messages`` are lines for
    the user.  Failing to tune never raises: the reason goes into the report
    and the measurement goes on.
    """

    HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, cpus: Iterable[int] | None, disable_boost: bool = False,
                 state_file: str | Path | None = None):
        cpus = [int(c) for c in (cpus or []) if int(c) >= 0]
        # Unpinned threads may run anywhere, so all online CPUs are tuned.
        self.cpus = sorted(set(cpus)) or online_cpus()
        self.disable_boost = disable_boost
        self.state_file = Path(state_file) if state_file else default_state_file()
        self.writes: list[Write] = []
        self.messages: list[str] = []
        self.report: dict = {"cpus": sysfs.format_cpulist(self.cpus), "state_file": str(self.state_file)}
        self._old_handlers: dict = {}
        self._restored = False
        self._lock = threading.RLock()

    # context manager protocol
    def __enter__(self) -> "Tuning":
        self.apply()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def _op_report(self, op, not_requested: bool = False) -> dict:
        shown = op.show()
        rep: dict = {"status": None, "reason": None}
        if isinstance(op, CPUGovernor):
            rep["driver"] = shown["driver"]
            rep["before"] = dict(shown["governor"])
        else:
            rep["knob"] = shown["knob"]
            rep["before"] = {"enabled": shown["enabled"]}
        reason = op.available()
        if reason:
            rep.update(status="unavailable", reason=reason)
            self.messages.append(f"{op.name}: not available — {reason}")
        elif not_requested:
            rep.update(status="not requested")
        return rep

    def apply(self) -> dict:
        # A state file left by a killed run holds the true original values:
        # put them back before reading "before", or we would save our own leftovers.
        if self.state_file.exists():
            try:
                old = json.loads(self.state_file.read_text())
            except (OSError, ValueError):
                old = {}
            pid = old.get("pid")
            if isinstance(pid, int) and _pid_alive(pid):
                why = f"another ringlab run (pid {pid}) holds the tuning state file {self.state_file}"
                for name in ("governor", "boost"):
                    self.report[name] = {"status": "failed", "reason": why}
                self.messages.append(f"tuning skipped — {why}")
                return self.report
            res = restore_saved_state(self.state_file)
            self.messages.append(f"state left by an earlier run (pid {pid}): {res['status']}")
            self.report["earlier_state_restored"] = res
            if res["status"] != "restored":
                why = (f"could not restore the earlier run's state file {self.state_file}; "
                       "run `ringlab env --restore`")
                for name in ("governor", "boost"):
                    self.report[name] = {"status": "failed", "reason": why}
                return self.report
        gov, boost = CPUGovernor(self.cpus), Boost(self.cpus)
        g = self._op_report(gov)
        b = self._op_report(boost, not_requested=not self.disable_boost)
        self.report.update(governor=g, boost=b)
        planned = []
        if g["status"] is None:
            planned += gov.planned_writes()
        if b["status"] is None:
            planned += boost.planned_writes()
        for rep, op in ((g, gov), (b, boost)):
            if rep["status"] is None and not any(w.op == op.name for w in planned):
                rep["status"] = "already"
                rep["after"] = rep["before"]
                self.messages.append(f"{op.name}: already " + (
                    TARGET_GOVERNOR if op is gov else "disabled") + f" on CPUs {self.report['cpus']}")
        if not planned:
            return self.report

        try:
            _write_state(self.state_file, planned)
        except OSError as e:
            # Without a state file a SIGKILL would leave the machine tuned: do not touch it.
            why = f"cannot write state file {self.state_file}: {e.strerror or e}"
            for rep in (g, b):
                if rep["status"] is None:
                    rep.update(status="failed", reason=why)
            self.messages.append(f"tuning skipped — {why}")
            return self.report
        self.writes = planned
        self._install_handlers()
        for w in planned:
            try:
                sysfs.write(w.path, w.value)
                w.done = True     # attempted: restore must write `before` back even if the readback differs
                now = sysfs.read(w.path)
                if now != w.value:
                    w.error = f"{w.path} reads {now!r} after writing {w.value!r}"
            except OSError as e:
                w.error = _why_write_failed(Path(w.path), e)
        for rep, op in ((g, gov), (b, boost)):
            mine = [w for w in planned if w.op == op.name]
            if not mine:
                continue
            errs = [w.error for w in mine if w.error]
            shown = op.show()
            rep["after"] = dict(shown["governor"]) if op is gov else {"enabled": shown["enabled"]}
            if errs:
                rep.update(status="failed", reason=errs[0] + (f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""))
                self.messages.append(f"{op.name}: not set — {rep['reason']}")
            else:
                rep["status"] = "set"
                self.messages.append(f"{op.name}: " + (f"set {TARGET_GOVERNOR}" if op is gov else "disabled")
                                     + f" on CPUs {self.report['cpus']} (was {_summ(rep['before'])})")
        return self.report

    def restore(self) -> bool:
        """Write the saved values back (idempotent).  True when everything was restored."""
        with self._lock:
            if self._restored:
                return self.report.get("restored", True)
            self._restored = True
            ok_all = True
            for w in self.writes:
                if not w.done:
                    continue
                try:
                    if sysfs.read(w.path) != w.before:
                        sysfs.write(w.path, w.before)
                    ok = sysfs.read(w.path) == w.before
                except OSError as e:
                    ok = False
                    self.messages.append(f"{w.op} {w.key}: NOT restored — {_why_write_failed(Path(w.path), e)}")
                ok_all &= ok
            for name in ("governor", "boost"):
                rep = self.report.get(name) or {}
                if any(w.op == name and w.done for w in self.writes):
                    op = (CPUGovernor if name == "governor" else Boost)(self.cpus)
                    shown = op.show()
                    rep["restored_to"] = dict(shown["governor"]) if name == "governor" else {"enabled": shown["enabled"]}
                    rep["restored"] = all(
                        (sysfs.read(w.path) == w.before) for w in self.writes if w.op == name and w.done)
                    self.messages.append(f"{name}: " + ("restored" if rep["restored"] else "NOT fully restored")
                                         + f" ({_summ(rep['restored_to'])})")
            if self.writes:
                self.report["restored"] = ok_all
                if ok_all:
                    self.state_file.unlink(missing_ok=True)
                else:
                    self.messages.append(f"some values were not restored; the state file {self.state_file} "
                                         "is kept: run `ringlab env --restore`")
            self._uninstall_handlers()
            return ok_all

    # -- signals --------------------------------------------------------------------
    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal only works in the main thread; the finally path still restores
        for sig in self.HANDLED_SIGNALS:
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN:
                continue   # the signal cannot end us, so there is nothing to catch
            self._old_handlers[sig] = old
            signal.signal(sig, self._on_signal)

    def _uninstall_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
            except (ValueError, TypeError):
                pass
        self._old_handlers.clear()

    def _on_signal(self, signum, frame):
        old = self._old_handlers.get(signum, signal.SIG_DFL)
        self.restore()   # also puts the previous handlers back
        if callable(old):
            old(signum, frame)    # e.g. default_int_handler raises KeyboardInterrupt
        else:
            # Re-deliver with the default action so the exit status is the
            # conventional "killed by signal" (128 + signum in a shell).
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


def _summ(d: dict) -> str:
    vals = sorted({str(v) for v in d.values()})
    if not d:
        return "unknown"
    if "enabled" in d and len(d) == 1:
        return "boost " + ("on" if d["enabled"] else "off" if d["enabled"] is not None else "unknown")
    return "/".join(vals)


def tune(cpus: Iterable[int] | None, disable_boost: bool = False, state_file: str | Path | None = None) -> Tuning:
    """``with tune([1, 2]) as t: ...``: performance governor on CPUs 1 and 2 while inside.

    ``t.report`` goes into env.json; ``t.messages`` are for the user.
    """
    return Tuning(cpus, disable_boost=disable_boost, state_file=state_file)


def show(cpus: Iterable[int] | None = None) -> dict:
    """Current governor and boost state of ``cpus`` (default: all online), with reasons."""
    cpus = sorted(set(cpus)) if cpus else online_cpus()
    gov, boost = CPUGovernor(cpus), Boost(cpus)
    return {"governor": dict(gov.show(), available=gov.available() is None, reason=gov.available()),
            "boost": dict(boost.show(), available=boost.available() is None, reason=boost.available())}
