"""User-facing errors: bad input, bad files, busy folders or CPUs.

Every exception class defined in ringlab derives from ``RinglabError`` (directly or through
one of the classes below), except the signals (``RunInterrupted``, and ringlab.tools.kmod's own
``_Stop``), which must pass through ``except Exception`` like Ctrl-C does
(tests/test_error_hierarchy.py checks this).

``ringlab.cli.main`` maps every ``RinglabError`` to its ``exit_code`` and prints its message,
never a traceback.  The exit code is decided here, by class: 2 when the error is the user's to
fix (a parameter, a file or folder they named, a busy folder or CPU), 1 when the input was fine
and the machine, the build or the disk failed (``RunnerError``, ``DiskFullError``).  Classes
defined elsewhere inherit theirs from these.

Each message names what is wrong (a parameter, a file and line) and what is allowed or expected
instead; messages are contracts (tests and users match them).  ``input``, a keyword of every
``RinglabError``, holds the name of what the error is about, for code that handles it: the
parameter (``"cflags"``, ``"--baseline"``), the file or folder (its path as a string) or the
value; ``None`` where the raise site does not say.
"""
from __future__ import annotations

import errno
import signal
from pathlib import Path

#: errno values of a full disk or quota
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class RinglabError(Exception):
    """Base of every error ringlab raises to a user; the message is the whole story.

    ``input``: the parameter, file or value the error is about (see the module's docstring)."""

    #: exit code of ``ringlab`` when this error ends a command
    exit_code = 2

    def __init__(self, *args, input: str | None = None):
        super().__init__(*args)
        self.input = None if input is None else str(input)


class ParamError(RinglabError, ValueError):
    """A parameter value is invalid.  The message names the parameter and the allowed values."""


class DataError(RinglabError, ValueError):
    """A file ringlab reads (raw.csv, env.json) is corrupt or not what was expected.

    The message names the file, the line (when there is one) and what was expected."""


class RunLockedError(RinglabError):
    """Another ringlab process holds the run folder (a run, or a --resume, in progress)."""

    def __init__(self, message: str, pid: int | None = None, *, input: str | None = None):
        super().__init__(message, input=input)
        self.pid = pid


class CpuBusyError(RinglabError):
    """Another ringlab run measures on the CPUs this run needs."""

    def __init__(self, message: str, pid: int | None = None, *, input: str | None = None):
        super().__init__(message, input=input)
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


class NotBuiltError(RunnerError):
    """Without a build (``--no-build``), a binary on disk is missing, has no source record,
    or was built from another source set than this run asks for (another kernel header,
    other flags, a changed harness).  The user's to fix (build first): exit code 2."""

    exit_code = 2


class PatchError(ParamError):
    """A patch cannot be used: a built-in patch spec (``builtin:NAME:N``) is unknown or
    malformed or its anchor is not in the header, or a patch file cannot be read or holds no
    diff.  The message names the spec or the file and what is allowed."""


class RunInterrupted(KeyboardInterrupt):
    """A signal (SIGTERM, SIGHUP) stopped the run; ``exit_code`` is 128 + the signal number
    (143 for SIGTERM, 129 for SIGHUP).  A ``KeyboardInterrupt``, not a ``RinglabError``: like
    Ctrl-C it must pass every ``except Exception`` (a trial's, a cleanup's) to end the run."""

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
        return DiskFullError(why + "run the command again", input=path)
    if (path.parent / "env.json").is_file():
        return DiskFullError(why + "run again with --resume", input=path)
    return DiskFullError(why + f"run again: {path.parent} holds no env.json, so there is nothing to resume; "
                               "remove it or pick another --out", input=path)


__all__ = ["RunInterrupted", "RinglabError", "ParamError", "DataError", "RunLockedError", "CpuBusyError", "RunnerError",
           "UnsafeDirError", "DiskFullError", "DISK_FULL_ERRNOS", "disk_full", "InputFileError", "NotBuiltError",
           "PatchError"]
