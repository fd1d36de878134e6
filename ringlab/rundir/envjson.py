"""env.json on disk: the atomic writer (used only by ``RunFolder.write_env``) and the one
typed reader, ``read_env``, which also reads the layouts written before ``ENV_VERSION`` 2.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringlab.errors import DISK_FULL_ERRNOS, DataError, disk_full
from ringlab.names import check_data_name
from ringlab.rundir.inputs import clean, quote, read_input
from ringlab.rundir.rawcsv import decode_utf8

#: version of env.json's layout (see ringlab/rundir/__init__.py)
ENV_VERSION = 2
#: env.json layouts this ringlab reads
KNOWN_ENV_VERSIONS = (1, 2)
#: raw.csv layouts (``ringlab.schema.SCHEMA_VERSION``) this ringlab reads
KNOWN_SCHEMA_VERSIONS = (1, 2, 3, 4)
#: env.json larger than this is refused (a run's env.json is tens of kilobytes)
MAX_ENV_BYTES = 16 << 20
#: env.json nested deeper than this is refused (ringlab writes at most about 6 levels)
MAX_ENV_DEPTH = 32
#: kinds of env.json ("kind")
ENV_KINDS = ("run", "environment", "compare-runs", "explore")
#: top-level fields of env.json and the JSON types they may hold (null is always allowed)
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "env_version": (int,), "schema_version": (int,), "kind": (str,), "ringlab_version": (str,),
    "run_id": (str,), "experiment": (str,), "host": (str,), "pid": (int,), "started_utc": (str,),
    "ended_utc": (str,), "resumed_utc": (list,), "status": (str,), "status_reason": (str,),
    "trials": (dict,), "parameters": (dict,), "command": (list,), "git": (dict,), "build": (dict,),
    "binaries_used": (dict,), "plan": (dict,), "governor": (dict,), "cpu_lock": (dict,), "quiet": (dict,),
    "c2c_latency_ns": (dict,), "warnings": (list,), "skipped_reason": (str,), "environment": (dict,),
    "stopping": (dict,), "baseline": (str,), "measured_commands": (dict,),
    "run_constants": (dict,), "raw_values": (dict,), "rerendered": (dict,),
}
_JSON_NAMES = {int: "an integer", str: "a string", list: "a list", dict: "an object", float: "a number"}


def _finite(v: Any) -> Any:
    """``v`` with every NaN or infinite float replaced by None: env.json holds only JSON."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    if type(v).__module__ == "numpy" and getattr(v, "ndim", 1) == 0:
        return _finite(v.item())
    return v


def atomic_write_json(path: Path, doc: dict) -> None:
    """temp + fsync + rename: a reader (or a crash) never sees half a file.  On any failure
    the temporary file is removed and ``path`` keeps its old content; a full disk (ENOSPC,
    EDQUOT) raises ``DiskFullError``."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(_finite(doc), f, indent=2, sort_keys=False, default=str, allow_nan=False)
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
def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


@dataclass(frozen=True)
class GitRecord:
    """env.json's ``git``: the ringlab checkout a run was made in (``commit``, ``dirty``; None
    when not recorded); ``doc`` is the field as written."""
    commit: str | None = None
    dirty: bool | None = None
    doc: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, doc: Any) -> "GitRecord":
        d = _dict(doc)
        return cls(d.get("commit"), d.get("dirty"), d)


@dataclass(frozen=True)
class BuildRecord:
    """env.json's ``build``: how the run's binaries were built.  ``out_dir`` (the build folder),
    ``compiler`` (a string or a dict with ``version``), ``cflags`` / ``flags`` (older runs wrote
    ``flags``), ``header_sources`` (per arm) and ``binaries`` (per binary name, a free-form dict);
    ``doc`` is the field as written."""
    out_dir: str | None = None
    compiler: Any = None
    cflags: list | None = None
    flags: list | None = None
    header_sources: dict[str, Any] = field(default_factory=dict, compare=False)
    binaries: dict[str, Any] = field(default_factory=dict, compare=False)
    doc: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, doc: Any) -> "BuildRecord":
        d = _dict(doc)
        return cls(d.get("out_dir"), d.get("compiler"), d.get("cflags"), d.get("flags"),
                   d.get("header_sources") or {}, d.get("binaries") or {}, d)


@dataclass(eq=False)
class RunEnv(Mapping):
    """env.json of a run folder in the current layout (older layouts converted).

    Read its fields as typed properties: ``env.experiment``, ``env.git.commit``,
    ``env.parameters``, ``env.topology`` ...; each gives the default an older file without the
    field implies (None, ``{}`` or ``[]``).  It is also a read-only mapping of env.json's
    top-level keys (``env["host"]``, ``"host" in env``, ``dict(env)``) for old callers; ``doc``
    is the dict itself.  ``RunEnv.of(doc)`` wraps a dict made in memory (``path`` None)."""
    path: Path | None
    version: int
    kind: str
    doc: dict[str, Any]

    @classmethod
    def of(cls, doc: "Mapping[str, Any] | None" = None) -> "RunEnv":
        """``doc`` as a RunEnv (itself when it is one; an empty RunEnv for None or {})."""
        if isinstance(doc, RunEnv):
            return doc
        d = dict(doc or {})
        return cls(None, int(d.get("env_version") or ENV_VERSION), str(d.get("kind") or "run"), d)

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

    # -- what ran, where, when ---------------------------------------------------------------------
    @property
    def experiment(self) -> str | None:
        """The experiment's name (None: a compare-runs or environment file)."""
        return self.doc.get("experiment")

    @property
    def host(self) -> str | None:
        """The host's name (the folder's place in results/<experiment>/<host>/)."""
        return self.doc.get("host")

    @property
    def hostname(self) -> str | None:
        """The host's name in the oldest files (before ``host``)."""
        return self.doc.get("hostname")

    @property
    def run_id(self) -> str | None:
        return self.doc.get("run_id")

    @property
    def status(self) -> str | None:
        """"running", "complete", "failed", "interrupted", "skipped" as written (None: not recorded)."""
        return self.doc.get("status")

    @property
    def status_reason(self) -> str | None:
        return self.doc.get("status_reason")

    @property
    def skipped_reason(self) -> str | None:
        return self.doc.get("skipped_reason")

    @property
    def started_utc(self) -> str | None:
        return self.doc.get("started_utc")

    @property
    def ended_utc(self) -> str | None:
        return self.doc.get("ended_utc")

    @property
    def baseline(self) -> str | None:
        """The arm a staged run planned against (None: the baseline rule picks it)."""
        return self.doc.get("baseline")

    @property
    def parameters(self) -> dict[str, Any]:
        """The run's parameters by name ({} when not recorded)."""
        return self.doc.get("parameters") or {}

    @property
    def command(self) -> list[str]:
        """The command line the run was started with ([] when not recorded)."""
        return self.doc.get("command") or []

    @property
    def plan(self) -> dict[str, Any]:
        """The trial plan (``trials_total``, ``rounds``, ``seed_source`` ...; {} when not recorded)."""
        return _dict(self.doc.get("plan"))

    @property
    def governor(self) -> dict[str, Any]:
        """What the run did with the CPU frequency governor ({} when not recorded)."""
        return self.doc.get("governor") or {}

    @property
    def warnings(self) -> list[str]:
        return self.doc.get("warnings") or []

    @property
    def rerendered(self) -> dict[str, Any]:
        """When the reports were re-rendered after the run from its own files (commit, utc, files;
        nothing re-measured); {} when they are those the run wrote."""
        return _dict(self.doc.get("rerendered"))

    @property
    def report(self) -> dict[str, Any]:
        """How the run's notebook asked for its report (``rundir.annotate``; {} when not)."""
        return _dict(self.doc.get("report"))

    @property
    def mail_notebook(self) -> dict[str, Any]:
        """The notebook that wrote the run's mail and its parameters (``name``, ``parameters``;
        {} when the mail was not written by a notebook)."""
        return _dict(self.doc.get("mail_notebook"))

    # -- what was measured -------------------------------------------------------------------------
    @property
    def git(self) -> GitRecord:
        """The ringlab checkout the run was made in."""
        return GitRecord.from_json(self.doc.get("git"))

    @property
    def build(self) -> BuildRecord:
        return BuildRecord.from_json(self.doc.get("build"))

    @property
    def binaries_used(self) -> dict[str, Any]:
        """Per binary name: ``path`` and ``sha256`` of the binary that ran ({} when not recorded)."""
        return self.doc.get("binaries_used") or {}

    @property
    def measured_commands(self) -> Any:
        """Per variant, the measured commands recorded as the trials ran (None when not recorded)."""
        return self.doc.get("measured_commands")

    @property
    def c2c_latency_ns(self) -> dict[str, Any]:
        """The cache-to-cache latency probe's result per CPU pair ({} when not measured)."""
        return self.doc.get("c2c_latency_ns") or {}

    @property
    def stopping(self) -> dict[str, Any] | None:
        """env.json's ``stopping`` as written (None: the run had no target)."""
        return self.doc.get("stopping")

    @property
    def stopping_record(self):
        """``stopping`` as a :class:`ringlab.stats.stopping_record.Stopping` (None: no target)."""
        from ringlab.stats.stopping_record import Stopping
        return Stopping.from_json(self.doc.get("stopping"))

    # -- the machine (env.json's ``environment``: ringlab.system.envinfo.collect()) ------------------
    @property
    def has_environment(self) -> bool:
        """Whether env.json holds an ``environment`` object (notebook 00's oldest files were flat)."""
        return isinstance(self.doc.get("environment"), dict)

    @property
    def environment(self) -> dict[str, Any]:
        """The machine as ``ringlab env`` saw it ({} when not recorded)."""
        e = self.doc.get("environment")
        return e if isinstance(e, dict) else {}

    @property
    def machine(self) -> dict[str, Any]:
        """``environment.host``: the machine's kernel, architecture, memory, virtualization
        ({} when not recorded, and when a string)."""
        return _dict(self.environment.get("host"))

    @property
    def cpu(self) -> dict[str, Any]:
        return self.environment.get("cpu") or {}

    @property
    def cpu_model(self) -> str | None:
        return self.cpu.get("model")

    @property
    def topology(self) -> dict[str, Any]:
        """``environment.topology``: ``n_cpus``, ``classes_present``, ``cpus`` ..."""
        return self.environment.get("topology") or {}

    @property
    def machine_governor(self) -> dict[str, Any]:
        """``environment.governor``: whether the frequency governor can be set on this machine."""
        return self.environment.get("governor") or {}

    @property
    def perf_counters(self) -> dict[str, Any]:
        """``environment.perf.counters``: per event, whether the PMU counts it here."""
        return (self.environment.get("perf") or {}).get("counters") or {}


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


def _depth(doc: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar: 0), without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            if d <= MAX_ENV_DEPTH:
                stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _json_type(v: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer",
            float: "number"}.get(type(v), type(v).__name__)


def check_env_doc(p: Path, doc: Any, experiment: str | None = None) -> None:
    """The schema of env.json: an object with the known versions and fields of the right types,
    of ``experiment`` when given; ``DataError`` naming the file and the field otherwise."""
    if not isinstance(doc, dict):
        raise DataError(f"{p}: line 1: a JSON {_json_type(doc)}; expected a JSON object", input=p)
    if _depth(doc) > MAX_ENV_DEPTH:
        raise DataError(f"{p}: nested deeper than {MAX_ENV_DEPTH} levels; expected the env.json of a run "
                        "folder written by `ringlab run`", input=p)
    if "env_version" not in doc and "environment" not in doc and ("cpu" in doc or "topology" in doc):
        return   # the flat environment layout before version 2 (envinfo.collect() at the top)
    for key, types in FIELD_TYPES.items():
        v = doc.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, types):
            raise DataError(f"{p}: field '{key}' is a JSON {_json_type(v)} ({quote(v)}); expected "
                            f"{_JSON_NAMES[types[0]]} or null", input=p)
    for key, known in (("env_version", KNOWN_ENV_VERSIONS), ("schema_version", KNOWN_SCHEMA_VERSIONS)):
        if doc.get(key) is not None and doc[key] not in known:
            raise DataError(f"{p}: field '{key}' is {doc[key]}; expected one of "
                            f"{', '.join(map(str, known))} (written by another ringlab version?)", input=p)
    if doc.get("kind") is not None and doc["kind"] not in ENV_KINDS:
        raise DataError(f"{p}: field 'kind' is {quote(doc['kind'])}; expected one of {', '.join(ENV_KINDS)}", input=p)
    st = doc.get("status")
    if st is not None and st not in _RUN_STATUSES and not st.startswith("failed"):
        raise DataError(f"{p}: field 'status' is {quote(st)}; expected one of {', '.join(_RUN_STATUSES)}", input=p)
    check_env_names(p, doc)
    if experiment is not None and doc.get("experiment") not in (None, experiment):
        raise DataError(f"{p}: field 'experiment' is {quote(doc['experiment'])}; expected '{experiment}' "
                        "(the experiment of this run's raw.csv)", input=p)


#: env.json fields that hold a name (ringlab.names): they become paths, mail lines and table cells
NAME_FIELDS = ("run_id", "experiment", "host", "baseline")


def check_env_names(p: Path, doc: dict) -> None:
    """``BadDataNameError`` (a DataError) naming the file and the field when a name field
    (:data:`NAME_FIELDS`, ``parameters.variants``) of env.json is not a name."""
    for key in NAME_FIELDS:
        if isinstance(doc.get(key), str):
            check_data_name(doc[key], p, f"field '{key}':")
    params = doc.get("parameters")
    variants = params.get("variants") if isinstance(params, dict) else None
    if isinstance(variants, str):
        variants = [v.strip(" ") for v in variants.split(",")]
    if isinstance(variants, list):
        for v in variants:
            check_data_name(v, p, "field 'parameters.variants':")


#: statuses of a run (env.json "status"; the same as ringlab.rundir.RUN_STATUSES)
_RUN_STATUSES = ("running", "complete", "failed", "interrupted", "skipped")


def _no_duplicates(p: Path):
    """json object_pairs_hook: a key twice in one object is refused (JSON readers disagree on
    which value wins)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        doc: dict[str, Any] = {}
        for k, v in pairs:
            if k in doc:
                raise DataError(f"{p}: key {quote(k)} appears twice in one object; expected each key once", input=p)
            doc[k] = v
        return doc
    return hook


def _no_constant(p: Path):
    """json parse_constant: NaN, Infinity and -Infinity are not JSON (ringlab writes null)."""
    def hook(name: str) -> Any:
        raise DataError(f"{p}: {name} is not a JSON number; expected finite numbers (or null) as "
                        "`ringlab run` writes them", input=p)
    return hook


def _finite_float(p: Path):
    """json parse_float: a number too large for a float (1e309) is refused, not read as inf."""
    def hook(text: str) -> float:
        f = float(text)
        if not math.isfinite(f):
            raise DataError(f"{p}: the number {clean(text)} is out of range; expected finite numbers as "
                            "`ringlab run` writes them", input=p)
        return f
    return hook


def read_env(run_dir: str | os.PathLike, experiment: str | None = None) -> RunEnv:
    """The one reader of env.json; ``DataError`` naming the file and line when it is not one:
    not UTF-8, not JSON, not an object, larger than ``MAX_ENV_BYTES``, nested deeper than
    ``MAX_ENV_DEPTH``, an unknown env/schema version, a field of the wrong type
    (``FIELD_TYPES``), or another experiment than ``experiment`` (when given)."""
    p = Path(run_dir)
    if not p.name.endswith(".json"):   # a run folder; an env.json that is a folder or a link is refused
        p = p / "env.json"
    try:   # never through a link, only a regular file (rundir.inputs)
        text = read_input(p, "the env.json of a run folder written by `ringlab run`", MAX_ENV_BYTES)
    except FileNotFoundError:
        raise DataError(f"{p}: no such file; expected the env.json of a run folder written by "
                        "`ringlab run`", input=p) from None
    except OSError as e:
        raise DataError(f"{p}: cannot read ({e.strerror}); expected a readable env.json", input=p) from None
    if len(text) > MAX_ENV_BYTES:
        raise DataError(f"{p}: larger than {MAX_ENV_BYTES >> 20} MiB; expected the env.json of a run folder", input=p)
    if not text.strip():
        raise DataError(f"{p}: line 1: empty file; expected a JSON object", input=p)
    try:
        doc = json.loads(decode_utf8(p, text), object_pairs_hook=_no_duplicates(p), parse_constant=_no_constant(p),
                         parse_float=_finite_float(p))
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: line {e.lineno}, column {e.colno}: {e.msg}; expected a JSON object", input=p) from None
    except ValueError as e:   # an integer of more digits than Python converts
        raise DataError(f"{p}: {clean(e, 80)}; expected the env.json of a run folder written by "
                        "`ringlab run`", input=p) from None
    except RecursionError:
        raise DataError(f"{p}: nested deeper than {MAX_ENV_DEPTH} levels; expected the env.json of a run "
                        "folder written by `ringlab run`", input=p) from None
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataError(f"{p}: a string holds the lone surrogate \\u{ord(e.object[e.start]):04x}; expected "
                        "text that is UTF-8 (as `ringlab run` writes it)", input=p) from None
    check_env_doc(p, doc, experiment)
    version, kind, doc = _normalize(doc)
    return RunEnv(p, version, kind, doc)
