"""env.json on disk: the atomic writer (used only by ``RunFolder.write_env``) and the one
typed reader, ``read_env``, which also reads the layouts written before ``ENV_VERSION`` 2.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringlab.errors import DISK_FULL_ERRNOS, DataError, disk_full
from ringlab.rundir.rawcsv import _decode

#: version of env.json's layout (see ringlab/rundir/__init__.py)
ENV_VERSION = 2


def atomic_write_json(path: Path, doc: dict) -> None:
    """temp + fsync + rename: a reader (or a crash) never sees half a file.  On any failure
    the temporary file is removed and ``path`` keeps its old content; a full disk (ENOSPC,
    EDQUOT) raises ``DiskFullError``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
            raise disk_full(path, e) from None
        raise


# -- env.json: reading ----------------------------------------------------------------------------
@dataclass(eq=False)
class RunEnv(Mapping):
    """env.json of a run folder in the current layout (older layouts converted).

    A read-only mapping of env.json's top-level keys: ``env["host"]``, ``"host" in env``,
    ``dict(env)``, ``env.keys()``; ``doc`` is the dict itself."""
    path: Path
    version: int
    kind: str
    doc: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.doc)

    def __len__(self) -> int:
        return len(self.doc)

    def __contains__(self, key: object) -> bool:
        return key in self.doc

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RunEnv):
            return (self.path, self.version, self.kind, self.doc) == (other.path, other.version, other.kind, other.doc)
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    @property
    def status(self) -> str | None:
        return self.doc.get("status")

    @property
    def environment(self) -> dict[str, Any]:
        e = self.doc.get("environment")
        return e if isinstance(e, dict) else {}

    @property
    def parameters(self) -> dict[str, Any]:
        return self.doc.get("parameters") or {}


def _normalize(doc: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    if "env_version" in doc:
        return int(doc["env_version"]), str(doc.get("kind") or "run"), doc
    if "environment" not in doc and ("cpu" in doc or "topology" in doc):
        # the environment run before version 2: envinfo.collect() at the top
        env = dict(doc)
        git = env.pop("git", None)
        host = env.get("host") if isinstance(env.get("host"), dict) else {}
        return 1, "environment", {"env_version": 1, "kind": "environment", "host": host.get("host_id"),
                                  "status": "complete", "git": git, "environment": env}
    kind = "run" if "run_id" in doc or "experiment" in doc else "compare-runs" if "inputs" in doc else "run"
    return 1, kind, dict(doc, env_version=1, kind=kind)


def read_env(run_dir: str | os.PathLike) -> RunEnv:
    """The one reader of env.json; ``DataError`` naming the file and line when it is not one."""
    p = Path(run_dir)
    if p.is_dir() or not p.name.endswith(".json"):
        p = p / "env.json"
    try:
        text = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; expected the env.json of a run folder written by "
                        "`ringlab run`") from None
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror})") from None
    try:
        doc = json.loads(_decode(p, text))
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: line {e.lineno}, column {e.colno}: {e.msg}; expected a JSON object") from None
    if not isinstance(doc, dict):
        raise DataError(f"{p}: line 1: a JSON {type(doc).__name__}; expected a JSON object")
    version, kind, doc = _normalize(doc)
    return RunEnv(p, version, kind, doc)
