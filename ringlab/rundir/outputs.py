"""Where a command's output may go: never over a run's inputs.

A command's output file or folder (``-o``, ``--csv``, ``--out``) that lies inside a run folder
(a folder holding ``env.json``, ``raw.csv`` or ``bisect.json``) is refused, unless it is the
command's own output file of that folder (``mail.txt`` for ``ringlab mail``): ``ringlab mail RUN
-o RUN/env.json`` would otherwise destroy the run.  The target is resolved first, so a symbolic
link to a run's file counts as that file.  :func:`check_output` is the one check.

A run's folder (``ringlab run --out``, with or without ``--resume``) is also refused inside
results/ (``paths.results_dir()``, and the checkout's own results/), directly or through a
link (:func:`check_run_out`): results/ holds the committed runs, written only by ``ringlab
reproduce`` (through the library, not ``--out``), and by the jobs of ``ringlab fleet submit``,
whose fleet record (``results/fleet/<id>/fleet.json``) names the very folder the job runs in.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from ringlab import paths
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


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _fleet_run(resolved: Path, results: Path) -> bool:
    """Whether a fleet record under ``results`` names ``resolved`` as a node's run folder."""
    for record in sorted((results / "fleet").glob("*/fleet.json")):
        try:
            nodes = json.loads(record.read_text(encoding="utf-8")).get("nodes")
        except (OSError, ValueError, AttributeError):
            continue
        for entry in (nodes.values() if isinstance(nodes, dict) else ()):
            run_dir = entry.get("run_dir") if isinstance(entry, dict) else None
            if isinstance(run_dir, str) and Path(os.path.realpath(run_dir)) == resolved:
                return True
    return False


def check_run_out(target: str | os.PathLike, option: str = "--out") -> None:
    """Refuse a run folder ``target`` (given as ``option``) that ``check_output(folder=True)``
    refuses, or that lies inside results/ once resolved (module docstring); ``ParamError``
    (exit 2) names the option and says where a run goes instead."""
    check_output(target, option, folder=True)
    resolved = Path(os.path.realpath(os.path.abspath(target)))
    for results in dict.fromkeys(Path(os.path.realpath(p)) for p in (paths.results_dir(), paths.ROOT / "results")):
        if _inside(resolved, results) and not _fleet_run(resolved, results):
            raise ParamError(f"parameter '{option}': {os.fspath(target)} is inside {results}, the results/ folder, "
                             "which only `ringlab reproduce` writes (the committed runs); allowed: a folder "
                             "outside results/, such as scratch/EXPERIMENT/NAME (--out left out writes under "
                             "scratch/) or any other folder", input=option)


__all__ = ["RUN_MARKERS", "check_output", "check_run_out", "run_folder_of"]
