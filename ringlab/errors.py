"""User-facing errors: bad input, bad files, busy folders or CPUs.

``ringlab.cli.main`` maps every ``RinglabError`` to its ``exit_code`` (2, or 1 for
``RunnerError``) and prints its message, never a traceback.  Each message names what is wrong (a parameter, a file and line)
and what is allowed or expected instead.
"""
from __future__ import annotations

import errno
import signal
from pathlib import Path

#: errno values of a full disk or quota
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


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


class UnsafeDirError(RinglabError):
    """A folder ringlab writes into (CPU locks, tuning state) is a symbolic link, not a
    directory, owned by another user or writable by group or others.  The message names the
    folder, its owner and mode, and how to fix it."""


class RunnerError(RinglabError, RuntimeError):
    """The run cannot start for a reason that is not a parameter (missing binary, failed build).

    Exit code 1: the input was fine, the machine or the build was not."""

    exit_code = 1


class DiskFullError(RinglabError):
    """The disk (or the user's quota) filled up while a run wrote raw.csv or env.json.

    The run ends ``interrupted`` with no torn row and no temporary file left; exit code 1
    (the input was fine, the disk was not).  The message names the file and says to free
    space and run again (with --resume where the run folder holds an env.json: ``disk_full``)."""

    exit_code = 1


class InputFileError(RunnerError, ParamError):
    """A file, folder, tree or module the user named cannot be used (missing, a directory, not
    what it should be, a revision that does not exist).  A RunnerError for the code that
    catches those, but the user's to fix: exit code 2."""

    exit_code = 2


class RunInterrupted(KeyboardInterrupt):
    """A signal (SIGTERM, SIGHUP) stopped the run; ``exit_code`` is 128 + the signal number
    (143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum} ({signal.Signals(signum).name})")
        self.signum = signum
        self.exit_code = 128 + signum


#: the files of a run that ``ringlab run --resume`` continues
RUN_FILES = ("raw.csv", "env.json")


def disk_full(path, e: OSError) -> DiskFullError:
    """The one message of a full disk: the file, the error, and what to do.  Only a run's own
    files (raw.csv, env.json) in a folder that holds an env.json are continued with --resume;
    a run whose env.json was never written has nothing to resume, and any other output
    (summary, figures, mail) is written again by running its command again."""
    path = Path(path)
    why = f"disk full while writing {path}: {e.strerror or e}; free space and "
    if path.name not in RUN_FILES:
        return DiskFullError(why + "run the command again")
    if (path.parent / "env.json").is_file():
        return DiskFullError(why + "run again with --resume")
    return DiskFullError(why + f"run again: {path.parent} holds no env.json, so there is nothing to resume; "
                               "remove it or pick another --out")


__all__ = ["RunInterrupted", "RinglabError", "ParamError", "DataError", "RunLockedError", "CpuBusyError", "RunnerError",
           "UnsafeDirError", "DiskFullError", "DISK_FULL_ERRNOS", "disk_full", "InputFileError"]
