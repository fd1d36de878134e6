"""User-facing errors: bad input, bad files, busy folders or CPUs.

``ringlab.cli.main`` maps every ``RinglabError`` to its ``exit_code`` (2, or 1 for
``RunnerError``) and prints its message, never a traceback.  Each message names what is wrong (a parameter, a file and line)
and what is allowed or expected instead.
"""
from __future__ import annotations

import signal


class RinglabError(Exception):
    """Base of the errors a user can cause and fix; the message is the whole story."""

    #: exit code of ``ringlab`` when this error ends a command
    exit_code = 2


class ParamError(RinglabError, ValueError):
    """A parameter value is invalid.  The message names the parameter and the allowed values."""


class DataError(RinglabError, ValueError):
    """A file ringlab reads (raw.csv, env.json) is corrupt or not what was expected.

    The message names the file, the line (when there is one) and what was expected."""


class RunLockedError(RinglabError):
    """Another ringlab process holds the run folder (a run, or a --resume, in progress)."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class CpuBusyError(RinglabError):
    """Another ringlab run measures on the CPUs this run needs."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class RunnerError(RinglabError, RuntimeError):
    """The run cannot start for a reason that is not a parameter (missing binary, failed build).

    Exit code 1: the input was fine, the machine or the build was not."""

    exit_code = 1


class InputFileError(RunnerError, ParamError):
    """A file, folder, tree or module the user named cannot be used (missing, a directory, not
    what it should be, a revision that does not exist).  A RunnerError for the code that
    catches those, but the user's to fix: exit code 2."""

    exit_code = 2


class RunInterrupted(KeyboardInterrupt):
    """A signal (SIGTERM) stopped the run; ``exit_code`` is 128 + the signal number (143)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum} ({signal.Signals(signum).name})")
        self.signum = signum
        self.exit_code = 128 + signum


__all__ = ["RunInterrupted", "RinglabError", "ParamError", "DataError", "RunLockedError", "CpuBusyError", "RunnerError",
           "InputFileError"]
