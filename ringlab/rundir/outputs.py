"""Where a command's output may go: never over a run's inputs.

A command's output file or folder (``-o``, ``--csv``, ``--out``) that lies inside a run folder
(a folder holding ``env.json``, ``raw.csv`` or ``bisect.json``) is refused, unless it is the
command's own output file of that folder (``mail.txt`` for ``ringlab mail``): ``ringlab mail RUN
-o RUN/env.json`` would otherwise destroy the run.  The target is resolved first, so a symbolic
link to a run's file counts as that file.  :func:`check_output` is the one check.
"""
from __future__ import annotations

import os
from pathlib import Path

from ringlab.errors import ParamError

#: the files that make a folder a run folder (its inputs)
RUN_MARKERS = ("env.json", "raw.csv", "bisect.json")


def run_folder_of(path: str | os.PathLike) -> Path | None:
    """The nearest folder at or above ``path`` that is a run folder, or None."""
    p = Path(path)
    for d in (p, *p.parents):
        if any((d / m).is_file() for m in RUN_MARKERS):
            return d
    return None


def check_output(target: str | os.PathLike, option: str, own: tuple[str, ...] = (),
                 folder: bool = False) -> Path | None:
    """Refuse an output ``target`` (given as ``option``) that could overwrite a run's inputs.

    A file target (``folder=False``) inside a run folder is refused unless its name is one of
    ``own`` directly in that folder; then the run folder is returned (write it through
    ``ringlab.rundir.write_text``).  A directory is refused as a file target.  A folder target
    (``folder=True``: a new run, bisect or calibration folder) is refused inside another run
    folder; the target itself may be a run folder (``--resume``).  None when the target is outside
    every run folder.  ``ParamError`` (exit 2) names the option, the target and the run folder."""
    shown = os.fspath(target)
    p = Path(os.path.abspath(target))
    resolved = Path(os.path.realpath(p))
    if not folder and resolved.is_dir():
        raise ParamError(f"parameter '{option}': {shown} is a directory; allowed: a file path in an existing folder")
    run = run_folder_of(resolved.parent)
    if run is None:
        return None
    if not folder and resolved.parent == run and resolved.name in own:
        return run
    what = ("a new folder is never made inside one" if folder
            else f"in a run folder only {', '.join(own)}" if own else "no file in a run folder")
    raise ParamError(f"parameter '{option}': {shown} is inside the run folder {run}, whose files are a "
                     f"run's inputs; allowed: a path outside run folders ({what})")


__all__ = ["RUN_MARKERS", "check_output", "run_folder_of"]
