"""The one compiler driver: every C binary of ringlab is built here.

``build_all()`` compiles the standalone binaries into ``build/bin/`` (or
``out_dir``) and returns a :class:`BuildInfo` describing exactly what was built
(compiler, flags, per-binary sha256 and ``size`` text/data/bss, sha256 of
every source and header that went in), which ``env.json`` records.

Rules:

* No shell, ever: the compiler is run with argv lists, and user ``cflags`` are
  split with :func:`shlex.split`, so ``;`` or ``$()`` reach the compiler as
  literal arguments.
* A binary is rebuilt only when its inputs change: a stamp next to it stores
  the compile command and the sha256 of every file the compiler read (taken
  from its own ``-MMD`` dependency output, so it covers the user's kernel
  header too).
* The table :data:`TARGETS` says which sources make which binary; optional
  targets (page_frag, syscall_loop, c2c_latency) are built only if their
  sources exist, so another engineer's layout change is a one-line edit.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ringlab import paths

#: Ring headers of the built-in ptr_ring variants (relative to csrc/).
RING_HEADERS = {
    "prebatch": "rings/ptr_ring_prebatch.h",
    "batch": "rings/ptr_ring_batch.h",
    "reorder": "rings/ptr_ring_reorder.h",
    "spsc": "rings/spsc_lamport.h",
}

#: Flags shared by the standalone binaries and the cffi module (ringlab.native
#: reads DEFAULT_CFLAGS).  -O2 like ringtest and ptr_ring_test; -g so perf and
#: callgrind can attribute cycles to source lines.
DEFAULT_CFLAGS = ["-O2", "-g", "-std=gnu11", "-pthread", "-Wall", "-Wextra"]
LDLIBS = ["-lm"]

SANITIZERS = {
    "thread": ["-fsanitize=thread"],
    "address": ["-fsanitize=address", "-fno-omit-frame-pointer"],
    "undefined": ["-fsanitize=undefined", "-fno-sanitize-recover=undefined"],
    "address,undefined": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                          "-fno-sanitize-recover=undefined"],
}

_PTR_RING_SOURCES = ["harness/ptr_ring_bench.c", "harness/ptr_ring_main.c", "harness/counters.c"]


@dataclass(frozen=True)
class Target:
    """One binary: its sources (relative to csrc/) and extra flags."""
    name: str
    sources: tuple[str, ...]
    flags: tuple[str, ...] = ()
    optional: bool = False          # skipped (with a reason) when a source is missing


def _ptr_ring_target(variant: str, header: str) -> Target:
    return Target(f"ptr_ring_test-{variant}", tuple(_PTR_RING_SOURCES),
                  (f'-DRINGLAB_RING_HEADER="{header}"', f'-DRINGLAB_VARIANT="{variant}"'))


#: Every built-in binary.  Edit here when a source moves.
TARGETS: list[Target] = [
    *(_ptr_ring_target(v, h) for v, h in RING_HEADERS.items()),
    *(Target(f"page_frag_test-{v}",
             ("page_frag/page_frag_test.c", f"page_frag/page_frag_{v}.c", "page_frag/page_pool.c",
              "harness/counters.c"), optional=True) for v in ("before", "after")),
    Target("syscall_loop", ("workloads/syscall_loop.c", "harness/counters.c"), optional=True),
    Target("c2c_latency", ("harness/c2c_latency.c",), optional=True),
]


class BuildError(RuntimeError):
    """A compile failed; the message names the file and the first compiler error line."""


@dataclass
class BinaryInfo:
    name: str
    path: str
    sha256: str
    size: dict | None               # {"text":..,"data":..,"bss":..,"dec":..} from `size`
    size_error: str | None          # why size is None
    inputs: dict[str, str]          # every source/header compiled -> sha256
    command: list[str]              # compile argv of the first source (representative)
    rebuilt: bool                   # False when the stamp said nothing changed


@dataclass
class BuildInfo:
    compiler: str                   # absolute path when found on PATH
    compiler_version: str           # first line of `cc --version`
    cflags: list[str]               # DEFAULT_CFLAGS + sanitizer + user flags, in order
    user_cflags: list[str]
    sanitize: str | None
    out_dir: str
    binaries: dict[str, BinaryInfo] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)      # name -> reason
    kernel_headers: dict[str, str] = field(default_factory=dict)  # NAME -> resolved header

    def to_dict(self) -> dict:
        return asdict(self)

    def paths(self) -> list[Path]:
        return [Path(b.path) for b in self.binaries.values()]


# ----------------------------------------------------------------------------- helpers

def compiler() -> str:
    """$CC or gcc (a single program name or path; CC with arguments is not supported)."""
    return os.environ.get("CC") or "gcc"


CC = compiler()


def default_cflags() -> list[str]:
    return list(DEFAULT_CFLAGS)


def binary_path(name: str) -> Path:
    """Where ``ringlab build`` puts binary ``name`` (e.g. ``ptr_ring_test-batch``)."""
    return paths.bin_dir() / name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def compiler_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise BuildError(f"C compiler {cc!r} not found or not runnable ({e}); set $CC") from None
    lines = (out.stdout or out.stderr).splitlines()
    return lines[0].strip() if lines else "unknown"


def split_cflags(cflags: str | list[str] | None) -> list[str]:
    """User flags as an argv list.  A string is split like a POSIX shell would
    split it, but nothing is expanded or executed: ``$(rm -rf /)`` stays text."""
    if not cflags:
        return []
    if isinstance(cflags, str):
        try:
            return shlex.split(cflags)
        except ValueError as e:
            raise BuildError(f"--cflags {cflags!r}: cannot split ({e})") from None
    return [str(c) for c in cflags]


def parse_size_output(text: str) -> dict[str, int]:
    """Parse Berkeley-format ``size FILE`` output into text/data/bss/dec."""
    lines = [ln.split() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) < 2 or lines[0][:3] != ["text", "data", "bss"]:
        raise ValueError(f"unexpected `size` output: {text.strip()[:200]!r}")
    vals = lines[1]
    try:
        return {"text": int(vals[0]), "data": int(vals[1]), "bss": int(vals[2]), "dec": int(vals[3])}
    except (IndexError, ValueError):
        raise ValueError(f"unexpected `size` output: {text.strip()[:200]!r}") from None


def binary_size(path: Path) -> tuple[dict | None, str | None]:
    exe = shutil.which("size")
    if exe is None:
        return None, "`size` (binutils) not found on PATH"
    try:
        out = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"`size` failed: {e}"
    if out.returncode != 0:
        return None, f"`size` failed: {out.stderr.strip()[:200]}"
    try:
        return parse_size_output(out.stdout), None
    except ValueError as e:
        return None, str(e)


def first_error_line(stderr: str) -> str:
    """The first diagnostic marked ``error`` (else the first non-empty line)."""
    lines = [ln.rstrip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\b(fatal )?error\b", ln):
            return ln.strip()
    return lines[0].strip() if lines else "(no compiler output)"


def _depfile_tokens(text: str) -> list[str]:
    """Split the prerequisite part of a make rule, undoing make's escapes.

    The compiler writes ``\\ `` for a space, ``\\#`` for ``#`` and ``$$`` for
    ``$``; an unescaped blank separates two names."""
    toks: list[str] = []
    cur: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in " \t#":
            cur.append(text[i + 1])
            i += 2
            continue
        if ch == "$" and i + 1 < n and text[i + 1] == "$":
            cur.append("$")
            i += 2
            continue
        if ch in " \t":
            if cur:
                toks.append("".join(cur))
                cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    if cur:
        toks.append("".join(cur))
    return toks


def parse_depfile(text: str) -> list[str]:
    """Prerequisites listed in a make-style ``-MMD`` dependency file, as file names
    (make's ``\\ ``, ``\\#`` and ``$$`` escapes undone)."""
    text = text.replace("\\\n", " ")
    deps: list[str] = []
    for line in text.splitlines():
        if ":" not in line:
            continue
        _, _, rest = line.partition(": ")
        if not rest and line.endswith(":"):
            continue
        deps.extend(_depfile_tokens(rest.strip()))
    return list(dict.fromkeys(deps))


def _sanitize_flags(sanitize: str | None) -> list[str]:
    if not sanitize:
        return []
    key = ",".join(s.strip() for s in sanitize.split(","))
    if key == "undefined,address":
        key = "address,undefined"
    if key not in SANITIZERS:
        raise BuildError(f"--sanitize {sanitize!r}: allowed: {', '.join(SANITIZERS)}")
    return list(SANITIZERS[key])


# ----------------------------------------------------------------------------- building

def _stamp_ok(stamp: Path, out: Path, key: str) -> dict | None:
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != key or not out.is_file():
        return None
    try:
        if sha256_file(out) != data.get("sha256"):
            return None
        for f, h in data.get("inputs", {}).items():
            if sha256_file(Path(f)) != h:
                return None
    except OSError:
        return None
    return data


def _compile_target(name: str, sources: list[Path], flags: list[str], cc: str, ccver: str,
                    out_dir: Path, what: str) -> BinaryInfo:
    out = out_dir / name
    obj_dir = out_dir / ".obj" / name
    stamp = out_dir / ".stamps" / f"{name}.json"
    key = hashlib.sha256(json.dumps([cc, ccver, flags, [str(s) for s in sources], LDLIBS]).encode()).hexdigest()
    data = _stamp_ok(stamp, out, key)
    rebuilt = data is None
    if rebuilt:
        obj_dir.mkdir(parents=True, exist_ok=True)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        objs, inputs, first_cmd = [], {}, None
        for i, src in enumerate(sources):
            obj = obj_dir / f"{i}-{src.stem}.o"
            dep = obj.with_suffix(".d")
            argv = [cc, *flags, "-c", str(src), "-o", str(obj), "-MMD", "-MF", str(dep)]
            first_cmd = first_cmd or argv
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                raise BuildError(f"{what}: compiling {src} failed: {first_error_line(proc.stderr)}")
            for d in parse_depfile(dep.read_text()):
                p = Path(d)
                if not p.is_absolute():
                    p = (Path.cwd() / p)
                p = p.resolve()
                inputs[str(p)] = sha256_file(p)
            objs.append(str(obj))
        tmp = out.with_name(f".{name}.tmp")
        argv = [cc, *flags, *objs, "-o", str(tmp), *LDLIBS]
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"{what}: linking {name} failed: {first_error_line(proc.stderr)}")
        os.replace(tmp, out)          # atomic: a concurrent run never sees half a binary
        digest = sha256_file(out)
        data = {"key": key, "sha256": digest, "inputs": dict(sorted(inputs.items())),
                "command": first_cmd}
        stamp.write_text(json.dumps(data, indent=1))
    size, size_err = binary_size(out)
    return BinaryInfo(name=name, path=str(out), sha256=data["sha256"], size=size,
                      size_error=size_err, inputs=data["inputs"], command=data.get("command") or [],
                      rebuilt=rebuilt)


def _kernel_targets(kernel_headers: dict, cc: str, base_flags: list[str]) -> list[tuple]:
    """(name, sources, flags, what, header) per --kernel-header NAME=PATH."""
    if not kernel_headers:
        return []
    try:
        from ringlab import kernel_header as kh
    except ImportError as e:
        raise BuildError(f"--kernel-header needs ringlab.kernel_header, which is not available ({e})") from None
    out = []
    for name, path in kernel_headers.items():
        if name in RING_HEADERS:
            raise BuildError(f"--kernel-header {name}=...: NAME clashes with a built-in variant; "
                             f"choose a name other than {', '.join(RING_HEADERS)}")
        try:
            header = kh.resolve_header(path)
            kflags = kh.compile_flags(name, header)
        except kh.KernelHeaderError as e:
            raise BuildError(str(e)) from None
        srcs = [paths.CSRC / s for s in _PTR_RING_SOURCES]
        out.append((f"ptr_ring_test-{name}", srcs, [*kflags, *base_flags],
                    f"kernel header {header} (--kernel-header {name})", header))
    return out


def build_all(kernel_headers: dict[str, str | Path] | None = None, cflags: str | list[str] = "",
              sanitize: str | None = None, out_dir: Path | None = None,
              only: list[str] | None = None, jobs: int | None = None) -> BuildInfo:
    """Build every binary (only the ones named in ``only``, if given).

    ``out_dir`` defaults to ``build/bin`` (``build/bin-<sanitizer>`` for
    sanitizer builds, so they never replace the benchmark binaries).
    Raises :class:`BuildError` naming the file and the first compiler error.
    """
    cc = compiler()
    ccver = compiler_version(cc)
    user = split_cflags(cflags)
    san = _sanitize_flags(sanitize)
    if out_dir is None:
        out_dir = paths.bin_dir() if not san else paths.build_dir() / (
            "bin-" + re.sub(r"[^a-z]+", "-", sanitize))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Order matters: defaults, then the sanitizer, then the user (last -O wins).
    common = [*DEFAULT_CFLAGS, *san, *user]
    info = BuildInfo(compiler=shutil.which(cc) or cc, compiler_version=ccver, cflags=common,
                     user_cflags=user, sanitize=sanitize or None, out_dir=str(out_dir))

    jobs_list: list[tuple] = []
    for t in TARGETS:
        if only is not None and t.name not in only:
            continue
        srcs = [paths.CSRC / s for s in t.sources]
        missing = [str(s.relative_to(paths.ROOT)) for s in srcs if not s.is_file()]
        if missing:
            if t.optional:
                info.skipped[t.name] = "source not present: " + ", ".join(missing)
                continue
            raise BuildError(f"{t.name}: missing source {missing[0]}")
        jobs_list.append((t.name, srcs, [f"-I{paths.CSRC}", *t.flags, *common], t.name, None))
    for job in _kernel_targets(dict(kernel_headers or {}), cc, common):
        if only is None or job[0] in only:
            jobs_list.append(job)
            info.kernel_headers[job[0].removeprefix("ptr_ring_test-")] = str(job[4])

    workers = jobs or min(4, os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {job[0]: ex.submit(_compile_target, job[0], job[1], job[2], cc, ccver, out_dir, job[3])
                for job in jobs_list}
        errors = []
        for name, fut in futs.items():
            try:
                info.binaries[name] = fut.result()
            except BuildError as e:
                errors.append(str(e))
        if errors:
            raise BuildError(errors[0] + (f" (and {len(errors) - 1} more failure(s))" if len(errors) > 1 else ""))
    return info
