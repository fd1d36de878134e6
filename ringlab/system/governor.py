"""CPU frequency governor and boost: set for the measurement, restore afterwards.

pyperf's ``system tune`` sets the knobs and ``reset`` writes fixed defaults,
so users cannot tell what was changed or get their own settings back
(pyperf #158).  Here every knob is a ``knobs.Knob`` (show / apply / restore)
and ``Tuning`` loops over them: it records the original values in a state file
*before* writing anything, and puts them back on every catchable exit path
(normal, exception, SIGINT, SIGTERM, SIGHUP).  After a SIGKILL, ``ringlab env
--restore`` (restore_saved_state) uses the state file.

Restoring never overwrites a value that someone else changed after ringlab set
it: that value is left as it is and reported.

The state file is written as root and read back as root, so it is trusted only
when it is a regular file owned by the current user, not writable by group or
others, and lists nothing but cpufreq governor and boost knobs under the sysfs
root, with values such knobs take.  Anything else refuses the whole file and
nothing is written.

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
import stat
import threading
from pathlib import Path
from typing import Iterable

from ringlab import paths
from ringlab.errors import DataError, UnsafeDirError
from ringlab.system import sysfs
from ringlab.system.knobs import (KNOBS, NO_CPUFREQ, TARGET_GOVERNOR, Boost, CPUGovernor, Knob, Outcome,
                                  Write, online_cpus, put_back)

__all__ = ["KNOBS", "NO_CPUFREQ", "TARGET_GOVERNOR", "Boost", "CPUGovernor", "Knob", "StateFileError",
           "Tuning", "default_state_file", "load_state", "online_cpus", "restore_saved_state", "show", "tune"]

STATE_VERSION = 1


def default_state_file() -> Path:
    """$RINGLAB_STATE_DIR/tuning-state.json, else ~/.cache/ringlab/tuning-state.json."""
    d = os.environ.get("RINGLAB_STATE_DIR")
    base = Path(d) if d else Path.home() / ".cache" / "ringlab"
    return base / "tuning-state.json"

# -- state file -------------------------------------------------------------------------
class StateFileError(DataError):
    """The state file cannot be trusted or read; the message says why."""


def _write_state(path: Path, writes: list[Write]) -> None:
    """Atomically write the state file, mode 0600 whatever the umask (it is checked on reading)."""
    # a folder only this user can write (mode 0700, checked): the file is written as root
    paths.private_dir(path.parent, "tuning state folder", "RINGLAB_STATE_DIR")
    data = {"version": STATE_VERSION, "pid": os.getpid(),
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "sysfs_root": str(sysfs.sysfs_root()),
            "writes": [w.to_json() for w in writes]}
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())   # the file must survive a SIGKILL or power loss right after
    os.replace(tmp, path)


def _check_entry(i: int, e) -> Write:
    if not isinstance(e, dict):
        raise StateFileError(f"entry {i} is not an object")
    for k in ("path", "before", "value"):
        if not isinstance(e.get(k), str):
            raise StateFileError(f"entry {i} has no string '{k}'")
    rel = sysfs.relative_to_root(e["path"])
    if rel is None:
        raise StateFileError(f"entry {i}: {e['path']} is not under the sysfs root {sysfs.sysfs_root()}")
    knob = next((k for k in KNOBS if any(p.fullmatch(rel) for p in k.PATHS)), None)
    if knob is None:
        raise StateFileError(f"entry {i}: {e['path']} is not a cpufreq governor or boost knob; "
                             "allowed: .../cpufreq/policyN/scaling_governor, cpufreq/boost, "
                             "intel_pstate/no_turbo, .../cpufreq/policyN/boost")
    if not knob.owns(rel, e["before"]):
        raise StateFileError(f"entry {i}: {e['before']!r} is not a value {knob.name} knobs take")
    return Write(knob.name, str(e.get("key", "?")), e["path"], e["before"], e["value"], done=True)


def load_state(path: Path) -> dict:
    """The state file's content, with ``writes`` as Write objects, if it can be trusted.

    Raises StateFileError (with the reason) when the file is a symlink or not a regular file,
    is owned by another user, is writable by group or others, is not valid JSON, or lists a
    path that is not a cpufreq governor or boost knob under the sysfs root (or a value such
    a knob does not take).  FileNotFoundError when there is no file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise
        if path.is_symlink():
            raise StateFileError(f"{path} is a symbolic link") from None
        raise StateFileError(f"cannot open {path}: {e.strerror or e}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise StateFileError(f"{path} is {'a directory' if stat.S_ISDIR(st.st_mode) else 'not a regular file'}")
    with os.fdopen(fd, "rb") as f:
        if st.st_uid != os.geteuid():
            raise StateFileError(f"{path} is owned by uid {st.st_uid}, not by the current user "
                                 f"(uid {os.geteuid()}); it could name any file to write")
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            who = " and ".join(w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH))
                               if st.st_mode & bit)
            raise StateFileError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}: writable by {who}; "
                                 "allowed: not writable by group or others (chmod go-w)")
        raw = f.read(1 << 20)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise StateFileError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("writes"), list):
        raise StateFileError(f"{path} has no 'writes' list")
    pid = data.get("pid")
    data["pid"] = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    data["writes"] = [_check_entry(i, e) for i, e in enumerate(data["writes"])]
    return data


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

    Returns {"status": "restored" | "nothing to restore" | "refused" | "failed", "state_file",
    "pid", "created", "restored": [{"path", "value", "ok", "outcome", "now", "error"}],
    "messages": [...]}.  ``outcome`` is "restored", "left" (someone changed the knob after
    ringlab set it: not touched) or "failed".  A refused state file (see ``load_state``) is
    kept and nothing is written.  Otherwise the file is removed when nothing failed.
    """
    path = Path(state_file) if state_file else default_state_file()
    out = {"status": "nothing to restore", "state_file": str(path), "pid": None, "created": None,
           "restored": [], "messages": []}
    try:
        data = load_state(path)
    except FileNotFoundError:
        out["messages"].append(f"no saved tuning state at {path}: nothing to restore")
        return out
    except StateFileError as e:
        out["status"] = "refused"
        out["messages"].append(f"state file refused, nothing written: {e}")
        return out
    out["pid"], out["created"] = data["pid"], data.get("created")
    ok_all = True
    for o in (put_back(w) for w in data["writes"]):
        out["restored"].append({"path": o.write.path, "value": o.write.before, "ok": o.status != "failed",
                                "outcome": o.status, "now": o.now, "error": o.error})
        ok_all &= o.status != "failed"
        out["messages"].append(o.message())
    if ok_all:
        path.unlink(missing_ok=True)
        out["status"] = "restored"
    else:
        out["status"] = "failed"
    return out


# -- tuning -----------------------------------------------------------------------------
class Tuning:
    """Context manager: set the performance governor (and disable boost) on ``cpus``, restore on exit.

    ``report`` is the dict that goes into env.json (one entry per knob, plus
    ``restored`` and, when someone changed a knob during the run,
    ``left_changed``); ``messages`` are lines for the user.  Failing to tune
    never raises: the reason goes into the report and the measurement goes on.
    """

    HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, cpus: Iterable[int] | None, disable_boost: bool = False,
                 state_file: str | Path | None = None):
        cpus = [int(c) for c in (cpus or []) if int(c) >= 0]
        # Unpinned threads may run anywhere, so all online CPUs are tuned.
        self.cpus = sorted(set(cpus)) or online_cpus()
        self.disable_boost = disable_boost
        self.state_file = Path(state_file) if state_file else default_state_file()
        self.knobs: list[Knob] = [k(self.cpus) for k in KNOBS]
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

    def __exit__(self, *_exc) -> None:
        self.restore()

    def requested(self, knob: Knob) -> bool:
        """Opt-in knobs (boost) are tuned only when the run asks for it (disable_boost)."""
        return not knob.opt_in or self.disable_boost

    def _skip_all(self, why: str) -> dict:
        for k in self.knobs:
            self.report[k.name] = {"status": "failed", "reason": why}
        self.messages.append(f"tuning skipped — {why}")
        return self.report

    def _leftover_state(self) -> str | None:
        """Put back what a killed run left; the reason tuning must be skipped, or None."""
        try:
            old = load_state(self.state_file)
        except FileNotFoundError:
            return None
        except StateFileError as e:
            return (f"the tuning state file left by an earlier run is refused ({e}); check the "
                    f"governor and boost by hand, then remove {self.state_file}")
        pid = old["pid"]
        if pid is not None and pid != os.getpid() and _pid_alive(pid):
            return f"another ringlab run (pid {pid}) holds the tuning state file {self.state_file}"
        res = restore_saved_state(self.state_file)
        self.messages.append(f"state left by an earlier run (pid {pid}): {res['status']}")
        self.messages += [f"  {m}" for m in res["messages"]]
        self.report["earlier_state_restored"] = res
        if res["status"] != "restored":
            return (f"could not restore the earlier run's state file {self.state_file}; "
                    "run `ringlab env --restore`")
        return None

    def apply(self) -> dict:
        # A state file left by a killed run holds the true original values:
        # put them back before reading "before", or we would save our own leftovers.
        why = self._leftover_state()
        if why:
            return self._skip_all(why)
        planned: list[Write] = []
        for k in self.knobs:
            rep = {"status": None, "reason": None, **k.details(), "before": k.state()}
            self.report[k.name] = rep
            reason = k.available()
            if reason:
                rep.update(status="unavailable", reason=reason)
                self.messages.append(f"{k.name}: not available — {reason}")
            elif not self.requested(k):
                rep["status"] = "not requested"
            else:
                mine = k.planned_writes()
                if not mine:
                    rep.update(status="already", after=rep["before"])
                    self.messages.append(f"{k.name}: already {k.goal} on CPUs {self.report['cpus']}")
                planned += mine
        if not planned:
            return self.report
        try:
            _write_state(self.state_file, planned)
        except (OSError, UnsafeDirError) as e:
            # Without a state file a SIGKILL would leave the machine tuned: do not touch it.
            why = f"cannot write state file {self.state_file}: {getattr(e, 'strerror', None) or e}"
            for k in self.knobs:
                if self.report[k.name]["status"] is None:
                    self.report[k.name].update(status="failed", reason=why)
            self.messages.append(f"tuning skipped — {why}")
            return self.report
        self.writes = planned
        self._install_handlers()
        for k in self.knobs:
            mine = [w for w in planned if w.op == k.name]
            if not mine:
                continue
            k.apply(mine)
            rep = self.report[k.name]
            rep["after"] = k.state()
            errs = [w.error for w in mine if w.error]
            if errs:
                rep.update(status="failed", reason=errs[0] + (f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""))
                self.messages.append(f"{k.name}: not set — {rep['reason']}")
            else:
                rep["status"] = "set"
                self.messages.append(f"{k.name}: {k.done_words} on CPUs {self.report['cpus']} "
                                     f"(was {k.summarize(rep['before'])})")
        return self.report

    def restore(self) -> bool:
        """Write the saved values back (idempotent).  True when nothing failed.

        A knob that no longer holds what ringlab set was changed by someone during the
        run: it is left as it is, listed in ``report["left_changed"]`` and in a message.
        """
        with self._lock:
            if self._restored:
                return self.report.get("restored", True)
            self._restored = True
            outcomes: list[Outcome] = []
            for k in self.knobs:
                mine = [w for w in self.writes if w.op == k.name]
                if not any(w.done for w in mine):
                    continue
                done = k.restore(mine)
                outcomes += done
                rep = self.report[k.name]
                rep["restored_to"] = k.state()
                rep["restored"] = all(o.status != "failed" for o in done)
                self.messages += [o.message() for o in done if o.status != "restored"]
                self.messages.append(f"{k.name}: " + ("restored" if rep["restored"] else "NOT fully restored")
                                     + f" ({k.summarize(rep['restored_to'])})")
            ok_all = all(o.status != "failed" for o in outcomes)
            if self.writes:
                self.report["restored"] = ok_all
                left = [o for o in outcomes if o.status == "left"]
                if left:
                    self.report["left_changed"] = [{"path": o.write.path, "before": o.write.before,
                                                    "set": o.write.value, "now": o.now} for o in left]
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


def tune(cpus: Iterable[int] | None, disable_boost: bool = False, state_file: str | Path | None = None) -> Tuning:
    """``with tune([1, 2]) as t: ...``: performance governor on CPUs 1 and 2 while inside.

    ``t.report`` goes into env.json; ``t.messages`` are for the user.
    """
    return Tuning(cpus, disable_boost=disable_boost, state_file=state_file)


def show(cpus: Iterable[int] | None = None) -> dict:
    """Current governor and boost state of ``cpus`` (default: all online), with reasons."""
    cpus = sorted(set(cpus)) if cpus else online_cpus()
    out = {}
    for k in (knob(cpus) for knob in KNOBS):
        reason = k.available()
        out[k.name] = dict(k.show(), available=reason is None, reason=reason)
    return out
