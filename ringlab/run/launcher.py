"""The trial launcher: one long-lived process that forks and execs a run's trials.

Spawning a trial from the runner costs a spawn of util-linux ``setpriv`` (the privilege drop
and the parent-death signal) and then the exec of the trial: on a loaded 2-vCPU VM about
2-3 ms a trial more than the trial binary's own start.  ``build/bin/trial_launcher``
(csrc/harness/trial_launcher.c, ringlab's own code) is started once per run instead, through
the same ``setpriv`` drop under root (ringlab.system.privilege.prefix: the user's uid and gid,
no groups, no capabilities, no_new_privs), and forks each trial itself, so every trial runs
with the launcher's credentials, never root's; each trial dies with the launcher
(PR_SET_PDEATHSIG), and the launcher with ringlab.

:class:`Launcher` ``.run(argv, timeout, env)`` returns the same ``TrialOutcome``
(ringlab.run.outcome) as ``ringlab.run.process.run_process``: its own session and process group, the whole group
killed on timeout (by ringlab) and after the trial ends (by the launcher).  Where the launcher
is not built or does not answer as expected, :func:`start` returns None and the runner spawns
each trial itself, as before.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import time

from ringlab import paths
from ringlab.errors import RunnerError
from ringlab.run.outcome import TrialOutcome
from ringlab.system import privilege

#: the binary under build/bin
NAME = "trial_launcher"
#: the first line a launcher of this protocol prints
READY = b"READY trial_launcher 1"
_START_TIMEOUT_S = 10.0


class LauncherError(RunnerError):
    """The launcher died or broke the protocol; the trial's outcome is unknown."""


class Launcher:
    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self._out = proc.stdout.fileno()
        self._buf = bytearray()

    # -- reading with a deadline (never through a buffered reader: select must see every byte)
    def _fill(self, deadline: float | None) -> bool:
        """Read what is there; False when the deadline passed first.  EOF raises LauncherError."""
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([self._out], [], [], wait)
        if not ready:
            return False
        chunk = os.read(self._out, 1 << 20)
        if not chunk:
            raise LauncherError("the trial launcher ended")
        self._buf += chunk
        return True

    def _line(self, deadline: float | None) -> bytes | None:
        while b"\n" not in self._buf:
            if not self._fill(deadline):
                return None
        i = self._buf.index(b"\n")
        line = bytes(self._buf[:i])
        del self._buf[:i + 1]
        return line

    def _exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill(None)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def run(self, argv: list[str], timeout: float, env: dict[str, str] | None):
        t0 = time.perf_counter()
        envs = [f"{k}={v}" for k, v in (os.environ if env is None else env).items()]
        words = [str(a) for a in argv] + envs
        data = b"".join(w.encode() + b"\0" for w in words)
        if any(b"\0" in w.encode() for w in words):
            raise ValueError("an argument or environment value holds a NUL byte")
        try:
            os.write(self.proc.stdin.fileno(), f"RUN {len(argv)} {len(envs)} {len(data)}\n".encode() + data)
        except OSError as e:
            self.kill()
            raise LauncherError(f"cannot reach the trial launcher: {e}") from None
        try:
            line = self._line(None)
        except LauncherError:
            self.kill()
            raise
        if not line or not line.startswith(b"PID "):
            self.kill()
            raise LauncherError(f"trial launcher: {line!r}")
        pid = int(line.split()[1])
        timed_out = False
        try:
            end = self._line(time.monotonic() + timeout)
            if end is None:
                timed_out = True
                _killpg(pid)
                end = self._line(None)
        except BaseException:
            _killpg(pid)    # Ctrl-C, SIGTERM: the trial's group and the launcher are killed
            self.kill()
            raise
        parts = end.split() if end else []
        if len(parts) != 6 or parts[0] != b"END":
            self.kill()
            raise LauncherError(f"trial launcher: {end!r}")
        kind, code, _, nout, nerr = parts[1], int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5])
        out, err = self._exact(nout), self._exact(nerr)
        rc = -code if kind == b"signal" else code
        status = "timeout" if timed_out else ("ok" if rc == 0 else "crash")
        return TrialOutcome(status, rc, out.decode(errors="replace"), err.decode(errors="replace"),
                            time.perf_counter() - t0)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and not self.proc.stdout.closed

    def kill(self) -> None:
        """End the launcher now (its trials die with it)."""
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()

    def close(self) -> None:
        if not self.alive:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start(log=None) -> Launcher | None:
    """A running launcher, or None (not built, or it did not start): the runner then spawns
    each trial itself.  Under root it runs as the unprivileged user (PrivilegeError when the
    drop cannot be had, as for every trial)."""
    exe = paths.bin_dir() / NAME
    if not os.access(exe, os.X_OK):
        return None
    if privilege.dropping():
        privilege.check_readable([exe], "trial launcher")
        argv, env = privilege.wrap([str(exe)]), privilege.env()
    else:
        argv, env = [str(exe), "--parent", str(os.getpid())], None
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, env=env)
    except OSError as e:
        if log:
            log(f"trial launcher not started ({e}); each trial is spawned by the runner")
        return None
    la = Launcher(proc)
    try:
        line = la._line(time.monotonic() + _START_TIMEOUT_S)
    except LauncherError:
        line = None
    if line != READY:
        proc.kill()
        proc.wait()
        if log:
            log(f"trial launcher {exe} did not answer ({line!r}); each trial is spawned by the runner")
        return None
    return la
