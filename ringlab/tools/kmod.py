"""In-kernel test modules (seed 002's ``page_frag_test.ko``): checks, one trial, unload on every path.

A test module runs its test in its init function and prints the result to the
kernel log, e.g. seed 002's::

    51200000 of iterations for non-aligned testing took: 3400417us

One trial is ``insmod MODULE ARGS`` (init runs the test; insmod returns when
it is done), the result line read from the kernel log, then ``rmmod``.  This
module owns all of that; ``ringlab.experiments.kmod`` only plans trials.

* Why modules cannot be loaded here, which are loaded and which a trial left
  loaded is the machine's state: ``ringlab.system.modules``.
* ``KernelLog`` reads ``/dev/kmsg`` from its end at the time the trial starts,
  so only lines written after that are matched (``RINGLAB_KMSG`` points at
  another file in tests).
* ``python -m ringlab.tools.kmod trial ...`` is the trial process.  It loads the
  module in try/finally and turns SIGTERM, SIGINT and SIGHUP into an
  exception, so the module is unloaded on those paths; it also starts a
  guardian (``python -m ringlab.tools.kmod guard``) in its own session, holding the
  read end of a pipe.  When the trial process dies without saying "done" (the
  runner's timeout kills its process group with SIGKILL), the guardian sees
  end-of-file, waits for the module's init to finish, and unloads it.
  Before loading, each trial records itself in ``$RINGLAB_STATE_DIR/kmod/``
  (default ``~/.cache/ringlab/kmod/``); the record goes once the module is
  unloaded, so ``ringlab env`` can report a module left loaded after a crash
  (``leftovers()``).

Loaded modules are read from ``/proc/modules`` (``RINGLAB_PROC_MODULES``
overrides it in tests).  Everything runs as argv lists; nothing goes through a
shell.
"""
from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from ringlab.paths import expand_user
from ringlab import paths
from ringlab.errors import DataError, UnsafeDirError
from ringlab.system import modules
from ringlab.system.modules import module_state, state_dir
from ringlab.tools.argv import python_module, run_command

#: seed 002's result line (page_frag_test.ko): "N of iterations for aligned|non-aligned testing took: Xus"
DEFAULT_PATTERN = r"(?P<items>\d+) of iterations for (?P<label>[\w-]+) testing took: ?(?P<us>\d+) ?us"
#: how long a trial waits for a module left by the previous trial (its guardian unloading it)
WAIT_LEFTOVER_S = 10.0
#: how long a guardian keeps trying to unload (a module whose init never returns cannot be)
GUARD_LIMIT_S = 900.0
RMMOD_TRIES = 20


# -- where things are -----------------------------------------------------------------------
def kmsg_path() -> Path:
    return Path(os.environ.get("RINGLAB_KMSG") or "/dev/kmsg")


def module_name(path) -> str:
    """The kernel's name for a module file: its stem with '-' as '_'."""
    name = Path(path).name
    for suf in (".ko.xz", ".ko.zst", ".ko.gz", ".ko"):
        if name.endswith(suf):
            name = name[: -len(suf)]
            break
    return name.replace("-", "_")


def find_module(tree, name: str) -> Path | None:
    """NAME.ko below a kernel tree (e.g. tools/testing/selftests/mm/page_frag/page_frag_test.ko)."""
    hits = sorted(expand_user(tree).rglob(f"{name}.ko"))
    return hits[0].resolve() if hits else None


def rmmod(name: str, tries: int = RMMOD_TRIES, pause: float = 0.1) -> tuple[bool, str]:
    """Unload ``name``; retried while the module is still starting or busy."""
    exe = shutil.which("rmmod") or "rmmod"
    msg = ""
    for _ in range(max(1, tries)):
        if module_state(name) is None:
            return True, ""
        if module_state(name) == "Live":
            try:
                r = subprocess.run([exe, name], capture_output=True, text=True, timeout=60)
                msg = (r.stderr or r.stdout).strip()
            except (OSError, subprocess.TimeoutExpired) as e:
                msg = str(e)
        if module_state(name) is None:
            return True, ""
        time.sleep(pause)
    return module_state(name) is None, msg or f"{name} still {module_state(name)}"


# -- the kernel log -------------------------------------------------------------------------
class KernelLog:
    """Kernel log records written after construction.

    ``/dev/kmsg`` hands out one record per read (``prio,seq,usec,flags;text``)
    and SEEK_END skips everything already there; EPIPE means records were
    overwritten before we read them (skipped, noted).  A plain file (tests)
    works the same way: we read from its end at construction time."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path or kmsg_path())
        self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)
        self.lost = 0

    def read_new(self) -> list[str]:
        chunks: list[bytes] = []
        while True:
            try:
                data = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:
                    self.lost += 1
                    continue
                raise
            if not data:
                break
            chunks.append(data)
        out = []
        for line in b"".join(chunks).decode(errors="replace").splitlines():
            if not line or line.startswith(" "):
                continue  # continuation lines (" SUBSYSTEM=...") carry no text
            head, sep, text = line.partition(";")
            out.append(text if sep and re.fullmatch(r"\d+,\d+,\d+,[^;]*", head) else line)
        return out

    def close(self) -> None:
        os.close(self.fd)


def parse_results(lines: list[str], pattern: str = DEFAULT_PATTERN) -> list[dict]:
    """Matches of the result pattern: {"items", "label", "us", "line"} each.

    ``items`` and ``us`` are the named groups (a custom pattern needs ``us``;
    ``items`` and ``label`` are optional)."""
    rx = re.compile(pattern)
    out = []
    for ln in lines:
        m = rx.search(ln)
        if m:
            g = m.groupdict()
            out.append({"items": int(g["items"]) if g.get("items") else None,
                        "label": g.get("label") or "", "us": float(g["us"]), "line": ln.strip()})
    return out


class _Stop(BaseException):
    """SIGTERM / SIGINT / SIGHUP arrived."""


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _log(path: str | None, msg: str) -> None:
    if not path:
        return
    # imported here: the run folder's package loads pandas, which a trial process started per
    # insmod has no other use for (it logs only after the module is unloaded)
    from ringlab import rundir
    try:
        rundir.append_line(Path(path).parent, Path(path).name, f"{utc_now()} {msg}")
    except (OSError, DataError):
        pass


def trial_argv(module: str, args: list[str], *, name: str | None = None, pattern: str = DEFAULT_PATTERN,
               log: str | None = None) -> list[str]:
    argv = [*python_module("ringlab.tools.kmod"), "trial", "--module", str(module),
            "--name", name or module_name(module), "--pattern", pattern]
    if log:
        argv += ["--log", str(log)]
    return argv + ["--", *args]


def _start_guard(name: str, log: str | None) -> tuple[subprocess.Popen, int]:
    r, w = os.pipe()
    argv = [*python_module("ringlab.tools.kmod"), "guard", "--name", name, "--parent", str(os.getpid())]
    if log:
        argv += ["--log", log]
    g = subprocess.Popen(argv, stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    os.close(r)
    return g, w


def _leftover_or_unsafe(name: str) -> int:
    """3 when a module of that name is still loaded after a short wait (the previous trial's guardian
    unloads it), 2 when the state folder is unsafe, else 0."""
    deadline = time.monotonic() + WAIT_LEFTOVER_S
    while module_state(name) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if module_state(name) is not None:
        print(f"ringlab.kmod: {name} is already loaded (left by an earlier trial or loaded by hand); "
              f"not loading it again: rmmod {name}", file=sys.stderr)
        return 3
    try:   # the record is written as root: only into a folder of this user, never through a link
        paths.private_dir(state_dir(), "kmod state folder", "RINGLAB_STATE_DIR")
    except UnsafeDirError as e:
        print(f"ringlab.kmod: {e}", file=sys.stderr)
        return 2
    return 0


class _Loaded:
    """What a trial started (insmod, the kernel log reader), for the unload on every way out."""
    proc: subprocess.Popen | None = None
    klog: KernelLog | None = None


def _write_record(record: Path, name: str, module: str, args: list[str]) -> None:
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as rf:
        rf.write(json.dumps({"module": name, "path": str(module), "pid": os.getpid(),
                             "args": args, "started_utc": utc_now()}))


def _load(module: str, args: list[str], pattern: str, result: dict, held: _Loaded) -> None:
    """insmod the module and read the result lines it logs into ``result``."""
    insmod = shutil.which("insmod") or "insmod"
    held.klog = KernelLog()
    t0 = time.perf_counter_ns()
    held.proc = subprocess.Popen([insmod, str(module), *args], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    out, err = held.proc.communicate()
    result["insmod_ns"] = time.perf_counter_ns() - t0
    result["insmod_exit"] = held.proc.returncode
    result["insmod_stderr"] = (err or out or "").strip()[-300:]
    lines = held.klog.read_new()
    result["log_lines"] = lines[-20:]
    result["log_lost"] = held.klog.lost
    result["results"] = parse_results(lines, pattern)


def _unload(name: str, record: Path, log: str | None, guard_w: int, result: dict, held: _Loaded) -> str:
    """Stop insmod, rmmod the module, drop the record and release the guardian; why rmmod failed."""
    # Ignore further signals while cleaning up: a second Ctrl-C must not skip the unload.
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    if held.proc is not None and held.proc.poll() is None:
        held.proc.kill()
        try:
            held.proc.wait(timeout=GUARD_LIMIT_S)
        except subprocess.TimeoutExpired:  # pragma: no cover - init never returns
            pass
    if held.klog is not None:
        held.klog.close()
    ok, why = rmmod(name)
    result["unloaded"] = ok
    if ok:
        try:
            record.unlink()
        except OSError:
            pass
        _log(log, f"trial pid {os.getpid()}: {name} unloaded")
    else:
        _log(log, f"trial pid {os.getpid()}: {name} NOT unloaded: {why}")
    try:
        os.write(guard_w, b"done\n")
        os.close(guard_w)
    except OSError:
        pass
    return why


def _outcome(result: dict, name: str, pattern: str, why: str) -> int:
    """Print the trial's JSON and return 0, or say why there is none and return its exit status."""
    if not result["unloaded"]:
        print(f"ringlab.kmod: {name} still loaded after rmmod: {why}", file=sys.stderr)
        return 3
    if not result["results"]:
        print(f"ringlab.kmod: no result line matching {pattern!r} in the kernel log after insmod "
              f"(insmod exit {result['insmod_exit']}: {result['insmod_stderr'] or 'no message'})",
              file=sys.stderr)
        return 1 if result["insmod_exit"] == 0 else result["insmod_exit"] or 1
    print(json.dumps(result), flush=True)
    return 0


def run_trial(module: str, name: str, args: list[str], pattern: str, log: str | None) -> int:
    """insmod / read the kernel log / rmmod, with the module unloaded on every way out."""
    def stop(signum, frame):
        raise _Stop(signum)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, stop)
    code = _leftover_or_unsafe(name)
    if code:
        return code
    guard, guard_w = _start_guard(name, log)
    record = modules.record_path(name, os.getpid())
    result: dict = {"schema": 1, "binary": "kmod", "module": name, "path": str(module), "args": args}
    held = _Loaded()
    try:
        _write_record(record, name, module, args)
        _load(module, args, pattern, result, held)
    except _Stop as e:
        print(f"ringlab.kmod: stopped by signal {e.args[0]}; unloading {name}", file=sys.stderr)
        code = 128 + int(e.args[0])
    finally:
        why = _unload(name, record, log, guard_w, result, held)
    return code or _outcome(result, name, pattern, why)


def run_guard(name: str, parent: int, log: str | None) -> int:
    """Wait for the trial process to finish; unload the module if it died without doing so."""
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    data = b""
    try:
        while True:
            chunk = os.read(0, 64)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    if b"done" in data:
        return 0
    _log(log, f"guardian: trial pid {parent} ended without unloading {name}; unloading")
    deadline = time.monotonic() + GUARD_LIMIT_S
    while time.monotonic() < deadline:
        if module_state(name) is None:
            break
        if module_state(name) == "Live":
            rmmod(name, tries=1)
            continue
        time.sleep(0.2)   # Loading: init still running; Unloading: on its way out
    ok = module_state(name) is None
    if ok:
        try:
            modules.record_path(name, parent).unlink()
        except OSError:
            pass
    _log(log, f"guardian: {name} {'unloaded' if ok else 'NOT unloaded (still ' + str(module_state(name)) + ')'}")
    return 0 if ok else 1


@click.group(help="one in-kernel test trial (insmod, kernel log, rmmod), or a check",
             context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    pass


@command.command("trial", help="insmod MODULE ARGS..., read the result line, rmmod",
                 options_metavar="[OPTIONS] [-- ARGS ...]")
@click.option("--module", required=True)
@click.option("--name", default=None)
@click.option("--pattern", default=DEFAULT_PATTERN)
@click.option("--log", default=None, help="append unload events to this file")
@click.pass_obj
def _trial_command(extra: list[str], module: str, name: str | None, pattern: str, log: str | None) -> int:
    return run_trial(module, name or module_name(module), extra, pattern, log)


@command.command("guard", help="(internal) unload NAME if the trial process dies first")
@click.option("--name", required=True)
@click.option("--parent", type=int, required=True)
@click.option("--log", default=None)
def _guard_command(name: str, parent: int, log: str | None) -> int:
    return run_guard(name, parent, log)


@command.command("check", help="say why MODULE cannot be loaded here")
@click.argument("module", nargs=-1)
def _check_command(module: tuple[str, ...]) -> int:
    reasons = modules.refusal_reasons(list(module))
    print("kernel modules: " + ("can be loaded" if not reasons else "cannot be loaded: " + "; ".join(reasons)))
    for line in modules.leftover_text(modules.leftovers()):
        print(f"left loaded: {line}")
    return 1 if reasons else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m ringlab.tools.kmod trial|guard|check ...`` (trial's module arguments after --)."""
    return run_command(command, argv, "python -m ringlab.kmod")


if __name__ == "__main__":
    sys.exit(main())
