"""``ringlab.native``: the ptr_ring harness as an in-process cffi module.

The same C sources as the standalone ``ptr_ring_test-<variant>`` binaries
(``csrc/harness/ptr_ring_bench.c`` + ``counters.c`` + one ring header) are
compiled as a cffi *API-mode, out-of-line* extension, one module per variant:
every ring header defines the same kernel names (``struct ptr_ring``,
``__ptr_ring_produce`` ...), so two rings cannot share one module.

Caching (cffi's ``compile()`` always recompiles and a rebuilt ``.so`` cannot be
re-imported into a live process, see docs/architecture.md and
notebook-conventions §4.2):

* the module is named ``_ringlab_<variant>_<sha12>``, where the hash covers the
  contents of every C source and header it can include, the kernel header (in
  kernel-header mode), the cdef, the flags, the compiler and its version, the
  Python and cffi versions.  Any change gives a new name, so a live process
  never picks up a changed ``.so`` under an old name: it builds and imports a
  new module next to the old one;
* modules live in ``build/cffi/`` (git-ignored; follows ``RINGLAB_BUILD``),
  which is put on ``sys.path``;
* builds take an ``fcntl`` lock per module name and build in a private temp
  folder, then ``os.replace`` the ``.so`` into the cache, so two notebooks or
  pytest workers building the same hash never see a half-written file.

The GIL: cffi API-mode calls release the GIL around every C call by default
("C function calls are done with the GIL released", cffi ref.rst), so a long
``rl_bench_run`` does not stop other Python threads (tested).  The harness is
reentrant (no globals), so that is safe.

Nothing is built at import time; ``load()`` / ``run()`` build on first use.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

from ringlab import paths
from ringlab.errors import RunnerError
from ringlab.build import driver
from ringlab.build.binutils import compiler_version
from ringlab.build.cflags import BuildError
from ringlab.build.targets import RING_HEADERS
from ringlab.catalog.variants import DEFAULT_VARIANT
from ringlab.sources import kernel_header as kh
from ringlab.system import privilege

COUNTER_CHOICES_HELP = '"none", "all", or a comma-separated list of ringlab.schema.COUNTER_EVENTS'

# What Python sees of the harness (csrc/harness/ptr_ring_bench.h).  Structs end
# in "...;" so the compiler, not this text, decides their layout.
CDEF = """
struct rl_bench_opts {
    int size;
    int mode;
    long long count;
    int lock;
    int batch;
    int repeats;
    int cpu_producer;
    int cpu_consumer;
    const char *counters;
    ...;
};
struct rl_bench_iter { ...; };
struct rl_bench_result {
    char variant[64];
    int batch;
    long long ctx_voluntary;
    long long ctx_involuntary;
    int n_iters;
    int iters_cap;
    struct rl_bench_iter *iters;
    ...;
};
int rl_bench_run(const struct rl_bench_opts *o, struct rl_bench_result *res, char *err, size_t errlen);
int rl_bench_check(const struct rl_bench_opts *o, char *err, size_t errlen);
int rl_bench_selftest(char *err, size_t errlen);
char *rl_bench_json(const struct rl_bench_opts *o, const struct rl_bench_result *res);
void rl_bench_free(void *p);
const char *rl_bench_variant(void);
"""
SOURCE = '#include "harness/ptr_ring_bench.h"\n'
HARNESS_SOURCES = ("harness/ptr_ring_bench.c", "harness/counters.c")

# Python's own CFLAGS come first in a cffi build (sysconfig CFLAGS, e.g.
# "-DNDEBUG -g -fwrapv -O3 -Wall"), then ours.  gcc takes the last -O, but
# -fwrapv would silently change signed-overflow code generation relative to
# the standalone binaries, so we cancel it explicitly.
_CANCEL_PYTHON_FLAGS = ["-fno-wrapv"]

_lock = threading.Lock()
_modules: dict[str, Any] = {}                   # module name -> module
_kernel_headers: dict[str, Path] = {}           # kernel variant name -> header


class NativeError(RunnerError):
    """The extension could not be built or a run failed; the message says why."""


# ----------------------------------------------------------------------------- config

def cache_dir() -> Path:
    return paths.build_dir() / "cffi"


def _build_defaults() -> tuple[str, list[str]]:
    """(compiler, flags) shared with the standalone binaries: ringlab.build's."""
    return driver.compiler(), driver.default_cflags()


_cc_version_cache: dict[str, str] = {}


def _cc_version(cc: str) -> str:
    if cc not in _cc_version_cache:
        try:
            _cc_version_cache[cc] = compiler_version(cc)
        except BuildError:
            _cc_version_cache[cc] = "unavailable"
    return _cc_version_cache[cc]


def describe() -> dict:
    """Compiler, flags and cache folder of the extension (``ringlab build`` prints it)."""
    import cffi  # optional: pip install cffi
    cc, flags = _build_defaults()
    return {
        "compiler": cc,
        "compiler_version": _cc_version(cc),
        "flags": flags + _CANCEL_PYTHON_FLAGS + ["-fPIC"],
        "python_cflags": sysconfig.get_config_var("CFLAGS") or "",
        "note": "Python's CFLAGS come first, then flags (last -O wins; -fno-wrapv cancels -fwrapv)",
        "cache_dir": str(cache_dir()),
        "cffi": cffi.__version__,
        "python": sys.version.split()[0],
        "gil_released": True,
    }


# ----------------------------------------------------------------------------- build

def _variant_flags(variant: str, kernel_header) -> tuple[list[str], list[Path]]:
    """(-I/-D flags, extra files to hash) for a built-in or kernel-header variant."""
    csrc = paths.CSRC
    if kernel_header is not None:
        header = kh.resolve_header(kernel_header)
        return kh.compile_flags(variant, header), [header]
    if variant not in RING_HEADERS:
        known = sorted(RING_HEADERS) + sorted(_kernel_headers)
        raise NativeError(f"variant '{variant}': unknown; allowed: {', '.join(known)} "
                          "(or pass kernel_header=PATH for a kernel-header variant)")
    return [f"-I{csrc}", f'-DRINGLAB_RING_HEADER="{RING_HEADERS[variant]}"',
            f'-DRINGLAB_VARIANT="{variant}"'], []


def _hashed_files(extra: list[Path]) -> list[Path]:
    csrc = paths.CSRC
    files = [p for d in ("harness", "rings", "compat") for p in sorted((csrc / d).rglob("*"))
             if p.is_file() and p.suffix in (".c", ".h")]
    return files + list(extra)


def module_name(variant: str = DEFAULT_VARIANT, kernel_header=None) -> str:
    """``_ringlab_<variant>_<sha12>`` for the current sources and flags."""
    import cffi  # optional: pip install cffi
    cc, flags = _build_defaults()
    vflags, extra = _variant_flags(variant, kernel_header)
    h = hashlib.sha256()
    for part in (CDEF, SOURCE, cc, _cc_version(cc), sys.version, cffi.__version__,
                 sysconfig.get_config_var("CFLAGS") or "", *flags, *_CANCEL_PYTHON_FLAGS, *vflags):
        h.update(part.encode() + b"\0")
    for p in _hashed_files(extra):
        h.update(str(p.relative_to(paths.CSRC) if p.is_relative_to(paths.CSRC) else p).encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    safe = re.sub(r"[^A-Za-z0-9_]", "_", variant)      # kernel names may have '.' or '-'
    return f"_ringlab_{safe}_{h.hexdigest()[:12]}"


@contextlib.contextmanager
def _file_lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _built(name: str) -> Path | None:
    for p in cache_dir().glob(name + ".*"):
        if p.suffix in (".so", ".pyd") or ".so" in p.name:
            return p
    return None


def _compile(name: str, variant: str, kernel_header, verbose: bool) -> None:
    import cffi  # optional: pip install cffi
    for rel in HARNESS_SOURCES:
        if not (paths.CSRC / rel).is_file():
            raise NativeError(f"cannot build {name}: csrc/{rel} is missing")
    cc, flags = _build_defaults()
    vflags, _ = _variant_flags(variant, kernel_header)
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    # Absolute paths only: cffi chdirs into tmpdir while compiling.
    ffi.set_source(name, SOURCE,
                   sources=[str(paths.CSRC / rel) for rel in HARNESS_SOURCES],
                   extra_compile_args=vflags + flags + _CANCEL_PYTHON_FLAGS,
                   extra_link_args=["-pthread"])
    dest = cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=dest))
    old_cc = os.environ.get("CC")
    os.environ["CC"] = cc        # distutils' customize_compiler honours $CC (and LDSHARED follows it)
    try:
        try:
            so = ffi.compile(tmpdir=str(tmp), verbose=verbose)
        except Exception as e:  # cffi.VerificationError, distutils errors
            raise NativeError(f"building {name} ({variant}) failed: {e}") from None
        so = Path(so)
        os.replace(so, dest / so.name)     # atomic: readers see the whole file or none
    finally:
        if old_cc is None:
            os.environ.pop("CC", None)
        else:
            os.environ["CC"] = old_cc
        shutil.rmtree(tmp, ignore_errors=True)


def load(variant: str = DEFAULT_VARIANT, kernel_header=None, verbose: bool = False):
    """The compiled module for ``variant`` (``module.ffi``, ``module.lib``), built if needed.

    ``kernel_header``: a ptr_ring.h / kernel tree / headers package; ``variant``
    is then the NAME it is benchmarked under (not one of the built-in names).
    """
    if kernel_header is not None:
        kh.parse_spec(f"{variant}=x")                  # validates the NAME
        _kernel_headers[variant] = kh.resolve_header(kernel_header)
    elif variant in _kernel_headers:
        kernel_header = _kernel_headers[variant]
    if kernel_header is not None and privilege.dropping():
        # A loaded module runs in this process: a header's constructor would run as root.
        raise NativeError(f"variant '{variant}': a kernel header is not built into an in-process "
                          "module while ringlab runs as root (its code would run as root); use the "
                          "standalone binary (ringlab build --kernel-header, ringlab run ptr_ring), "
                          "which is built and run as the unprivileged user, or run as a user")
    name = module_name(variant, kernel_header)
    with _lock:
        if name in _modules:
            return _modules[name]
        d = str(cache_dir())
        if d not in sys.path:
            sys.path.insert(0, d)
        if _built(name) is None:
            with _file_lock(cache_dir() / f".{name}.lock"):
                if _built(name) is None:            # someone else may have built it meanwhile
                    _compile(name, variant, kernel_header, verbose)
            importlib.invalidate_caches()
        mod = importlib.import_module(name)
        _modules[name] = mod
        return mod


# ----------------------------------------------------------------------------- run

def run(variant: str = DEFAULT_VARIANT, mode: int = 0, size: int = 1000, count: int = 1_000_000,
        producer_cpu: int = -1, consumer_cpu: int = -1, repeats: int = 1, lock: bool = False,
        counters: str = "none", batch: int = 0, kernel_header=None) -> dict:
    """One in-process call of the harness; returns the binary's ``--json`` object as a dict.

    Bad values raise ``ValueError`` naming the parameter and the allowed values
    (the harness's own validation).  The GIL is released while it runs.
    """
    for pname, v in (("mode", mode), ("size", size), ("count", count), ("producer_cpu", producer_cpu),
                     ("consumer_cpu", consumer_cpu), ("repeats", repeats), ("batch", batch)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"parameter '{pname}': not an integer: {v!r}")
    if not isinstance(counters, str):
        raise ValueError(f"parameter 'counters': {counters!r}; allowed: {COUNTER_CHOICES_HELP}")
    if repeats < 1:
        raise ValueError(f"parameter 'repeats': {repeats}; allowed: an integer >= 1")
    mod = load(variant, kernel_header)
    ffi, lib = mod.ffi, mod.lib
    keep = ffi.new("char[]", counters.encode())
    opts = ffi.new("struct rl_bench_opts *")
    opts.size, opts.mode, opts.count = size, mode, count
    opts.lock, opts.batch, opts.repeats = int(bool(lock)), batch, repeats
    opts.cpu_producer, opts.cpu_consumer = producer_cpu, consumer_cpu
    opts.counters = keep
    err = ffi.new("char[]", 512)
    if lib.rl_bench_check(opts, err, len(err)) != 0:
        raise ValueError(ffi.string(err).decode(errors="replace"))
    iters = ffi.new("struct rl_bench_iter[]", repeats)
    res = ffi.new("struct rl_bench_result *")
    res.iters, res.iters_cap = iters, repeats
    rc = lib.rl_bench_run(opts, res, err, len(err))      # GIL released here (cffi default)
    if rc != 0:
        msg = ffi.string(err).decode(errors="replace")
        if rc == 2:
            raise ValueError(msg)
        raise NativeError(f"{variant}: run failed: {msg}")
    js = lib.rl_bench_json(opts, res)
    if js == ffi.NULL:
        raise MemoryError("rl_bench_json")
    try:
        out = json.loads(ffi.string(js).decode())
    finally:
        lib.rl_bench_free(js)
    out["native_module"] = mod.__name__
    return out


def selftest(variant: str = DEFAULT_VARIANT, kernel_header=None) -> None:
    """The harness's full/empty/FIFO/wrap/batch unit test, in process; raises NativeError."""
    mod = load(variant, kernel_header)
    err = mod.ffi.new("char[]", 512)
    if mod.lib.rl_bench_selftest(err, len(err)) != 0:
        raise NativeError(f"{variant}: selftest failed: {mod.ffi.string(err).decode(errors='replace')}")
