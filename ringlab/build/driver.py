"""The one compiler driver: every C binary of ringlab is built here.

``build_all()`` compiles the standalone binaries into ``build/bin/`` (or
``out_dir``) and returns a :class:`BuildInfo` describing exactly what was built
(compiler, flags, per-binary sha256 and ``size`` text/data/bss, sha256 of
every source and header that went in), which ``env.json`` records.

Rules:

* No shell, ever: the compiler is run with argv lists.  User ``cflags`` are
  split at blanks and each option must have one of the shapes of
  :data:`CFLAG_SHAPES` (:func:`validate_cflags`): no option that runs a program,
  loads code or names a file (``-wrapper``, ``-B``, ``-specs``, ``@file``,
  ``-fplugin``, ``-Wl,``), and no shell or make metacharacter, so the same flags
  are safe in argv and in ringtest's ``make`` variable.
* A binary is rebuilt only when its inputs change: a stamp next to it stores
  the compile command and the sha256 of every file the compiler read (taken
  from its own ``-MMD`` dependency output, so it covers the user's kernel
  header too) and every file the assembler read (GNU as's ``--MD`` output: an
  ``.incbin`` or ``.include`` in an ``asm`` statement).
* Under root every compile and link runs as the unprivileged user
  (ringlab.system.privilege) in a folder it owns, on a copy of the kernel header;
  root copies the binary out.  Without root nothing of this happens.
* Each binary's source set (ringlab.sourceset: what it was built from, by
  content) is written next to it as ``NAME.source.json``; a failed build removes
  the binary of that NAME, so no older one can be measured in its place
  (ringlab.binaries checks a binary against what a run asks for).
* ``layouts`` (ringlab.build.layouts) builds a binary K times, each with its pad of unused
  code and function alignment, as ``NAME@p<pad>-a<align>``; the layout's flags are recorded
  under ``layout`` in the source record, not in the source set (they move code, change none).
  Compiler options are checked in ringlab.build.cflags.
* Layout copies (ringlab.build.layouts.LayoutCopies) put several layouts into one binary,
  ``NAME@c<first>-<last>-<digest>``: :data:`COPY_SOURCE` is compiled once per function alignment
  the copies use, its global symbols made local (``objcopy --localize-symbol``), and linked once
  per copy after a pad object of the copy's pad; the other sources are compiled once.
* An object is compiled once for every build into the same folder: it is kept in
  ``<out_dir>/.objects`` with the sha256 of every file its compile read
  (ringlab.build.shared_objects), and used again while they all still match, so a staged run's
  later stages, and the next run, only link.
* The table :data:`TARGETS` says which sources make which binary; optional
  targets (page_frag, syscall_loop, c2c_latency, trial_launcher) are built only if their
  sources exist, so another engineer's layout change is a one-line edit.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ringlab import paths
from ringlab.digest import sha256_file
from ringlab.build.binutils import binary_size, compiler_version
from ringlab.build.cflags import BuildError, validate_cflags
from ringlab.build.layouts import ALIGNS, PLAIN, Layout, LayoutCopies, base_name
from ringlab.build.shared_objects import SharedObjects, write_new
from ringlab.build.sourceset import (hashed_flags, parse_depfile, source_label,
                                     source_record_path, source_set, write_json)
from ringlab.sources.header_files import KernelHeaderError
from ringlab.sources.header_source import resolve_source
from ringlab.sources.kernel_header import compile_flags, first_error
from ringlab.system import privilege

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

_PTR_RING_SOURCES = ["harness/ptr_ring_bench.c", "harness/ptr_ring_main.c", "harness/turns.c", "harness/counters.c"]
#: the source a binary of layout copies holds several times (its entry: csrc/harness/ptr_ring_bench.h)
COPY_SOURCE = "harness/ptr_ring_bench.c"
#: the global symbols of COPY_SOURCE, made local in each copy (objcopy wildcards)
COPY_SYMBOLS = ("rl_bench_*", "rl_measured_*", "rl_layout_pad")


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
    Target("trial_launcher", ("harness/trial_launcher.c",), optional=True),
]


class StaleBinaryError(BuildError):
    """A binary on disk was not built from the source set a run asks for."""


@dataclass
class BuildJob:
    name: str                       # binary name
    sources: list[Path]
    flags: list[str]
    what: str                       # for messages
    header: Path | None = None      # kernel-header variants: the header compiled
    header_record: dict | None = None
    layout: Layout = PLAIN          # code layout (ringlab.build.layouts): flags after all others
    copies: LayoutCopies | None = None  # layout copies in one binary (then layout is PLAIN)

    def layout_record(self) -> dict | None:
        """The source record's ``layout``: None for the plain build."""
        if self.copies is not None:
            return self.copies.record()
        return None if self.layout.plain else self.layout.record()

    def argv_flags(self) -> list[str]:
        """Every compile flag: the job's, then the layout's (not part of the source set)."""
        return [*self.flags, *self.layout.flags()]


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
    source_sha256: str | None = None    # the source set's hash (see source_set)
    source_files: dict[str, str] = field(default_factory=dict)  # label -> sha256 (content)
    source_flags: list[str] = field(default_factory=list)       # flags as hashed
    header: dict | None = None          # kernel-header variants: where the header came from
    layout: dict | None = None          # code layout: Layout.record() (None: the plain build)


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
    header_sources: dict[str, dict] = field(default_factory=dict)  # NAME -> provenance record
    source_sha256: dict[str, str] = field(default_factory=dict)   # binary name -> source set hash
    target: str = ""                # `cc -dumpmachine`: aarch64-linux-gnu for CC=aarch64-linux-gnu-gcc

    def to_dict(self) -> dict:
        return asdict(self)

    def paths(self) -> list[Path]:
        return [Path(b.path) for b in self.binaries.values()]


# ----------------------------------------------------------------------------- helpers

def compiler() -> str:
    """$CC or gcc (a single program name or path; CC with arguments is not supported).

    A cross compiler works the same way: CC=aarch64-linux-gnu-gcc builds arm64 binaries, and the
    build record's ``target`` says so."""
    return os.environ.get("CC") or "gcc"


def compiler_target(cc: str) -> str:
    """The machine ``cc`` builds for (``cc -dumpmachine``), or "" when it does not say."""
    try:
        out = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


CC = compiler()


def default_cflags() -> list[str]:
    return list(DEFAULT_CFLAGS)


def _sanitize_flags(sanitize: str | None) -> list[str]:
    if not sanitize:
        return []
    key = ",".join(s.strip() for s in sanitize.split(","))
    if key == "undefined,address":
        key = "address,undefined"
    if key not in SANITIZERS:
        raise BuildError(f"--sanitize {sanitize!r}: allowed: {', '.join(SANITIZERS)}")
    return list(SANITIZERS[key])


def _remove_binary(out_dir: Path, name: str) -> None:
    """A failed build leaves no binary of that name behind (nor its records)."""
    for p in (out_dir / name, source_record_path(out_dir / name), out_dir / ".stamps" / f"{name}.json"):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


# ----------------------------------------------------------------------------- building

def _stamp_ok(stamp: Path, out: Path, key: str) -> dict | None:
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    if data.get("key") != key or not out.is_file() or "source" not in data:
        return None
    if not source_record_path(out).is_file():
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


def _compile_target(job: BuildJob, cc: str, ccver: str, out_dir: Path,
                    objects: SharedObjects | None = None) -> BinaryInfo:
    # A failed build removes the old binary: it was built from other sources than the
    # ones just asked for.  An interrupted one leaves it, with its still-true record.
    try:
        return _compile(job, cc, ccver, out_dir, objects)
    except Exception:
        _remove_binary(out_dir, job.name)
        raise


#: the name the unprivileged user's work folder has inside a binary
WORK_PREFIX = "/ringlab-unprivileged-build"
#: the folder, under a build's output folder, of the objects kept across builds
#: (ringlab.build.shared_objects)
OBJECT_CACHE = ".objects"


def _dep_inputs(dep_text: str, cwd: Path, skip_dir: Path | None, source: Path) -> dict[str, str]:
    """{absolute path: sha256} of the files one dependency file lists.  Relative names are the
    compile's folder's; the assembler's list also names its own temporary input (in
    ``skip_dir``) and the ``.file`` name of the source, which are left out."""
    out = {}
    for d in parse_depfile(dep_text):
        p = Path(d)
        if not p.is_absolute():
            if skip_dir is not None and d == source.name:
                continue          # the assembler's `.file "NAME"`: the source, already listed
            p = cwd / p
        p = p.resolve()
        if skip_dir is not None and p.is_relative_to(skip_dir.resolve()):
            continue
        if skip_dir is not None and not p.is_file():
            continue
        out[str(p)] = sha256_file(p)
    return out


def _compile_link(job: BuildJob, cc: str, flags: list[str], sources: list[Path], obj_dir: Path, out: Path,
                  work: Path | None, objects: SharedObjects | None = None) -> tuple[dict[str, str], list[str]]:
    """Compile and link ``job`` into ``out``; (every file the compiler and assembler read, the
    first compile argv).  ``work``: the unprivileged user's folder when ringlab runs as root
    (ringlab.system.privilege): the compiler runs there as that user, the root parent only
    reads what it wrote."""
    objs: list[str] = []
    inputs: dict[str, str] = {}
    first_cmd = None
    obj_dir.mkdir(parents=True, exist_ok=True)
    tmpdir = obj_dir / ".tmp"
    tmpdir.mkdir(exist_ok=True)
    staged: dict[str, str] = {}          # staged copy -> the header it stands for
    if work is not None:
        privilege.give(tmpdir)
        if job.header is not None:
            # The root parent reads the header (the input it was given, wherever it lies) and
            # hands the compile a copy in the user's folder; the user never needs the original.
            orig = str(Path(job.header).resolve())
            copy = work / "header" / Path(orig).name
            copy.parent.mkdir()
            copy.write_bytes(Path(orig).read_bytes())
            privilege.give(copy.parent)
            privilege.give(copy)
            staged[str(copy.resolve())] = orig
            flags = [f.replace(orig, str(copy)) if f.startswith("-DRINGLAB_KERNEL_HEADER=") else f
                     for f in flags]
        privilege.check_readable([*sources, *_include_dirs(flags)], job.what)
    cwd = work if work is not None else Path.cwd()
    if work is not None:
        # the work folder's random name must not reach the binary (debug info, __FILE__): the
        # same sources and flags give the same bytes, whoever builds them
        flags = [*flags, f"-ffile-prefix-map={work}={WORK_PREFIX}"]
    env = privilege.env(dict(os.environ, TMPDIR=str(tmpdir)), home=work)
    asm_md = assembler_depfile(cc)
    read = privilege.read_bytes if work is not None else (lambda p: Path(p).read_bytes())

    def compile_one(src: Path, obj: Path, argv_flags: list[str]) -> None:
        nonlocal first_cmd
        dep, asdep = obj.with_suffix(".d"), obj.with_suffix(".as.d")
        argv = [cc, *argv_flags, "-c", str(src), "-o", str(obj), "-MMD", "-MF", str(dep),
                *([f"-Wa,--MD,{asdep}"] if asm_md else [])]
        first_cmd = first_cmd or argv
        key = None
        if objects is not None:
            here = str(work) if work is not None else None
            # the header a kernel variant stages into its folder is named by where it came from
            key = (str(src), str(Path(job.header).resolve()) if job.header is not None else None,
                   tuple(f.replace(here, "<work>") if here else f for f in argv_flags))
            hit = objects.get(key)
            if hit is not None:         # compiled for another binary of this build: the same bytes
                write_new(obj, hit[0])
                if work is not None:
                    privilege.give(obj)
                inputs.update(hit[1])
                return
        proc = subprocess.run(privilege.wrap(argv), capture_output=True, text=True, cwd=cwd, env=env)
        if proc.returncode != 0:
            raise BuildError(f"{job.what}: compiling {src} failed: {first_error(proc.stderr)}")
        found = _dep_inputs(read(dep).decode(errors="replace"), cwd, None, src)
        try:
            as_text = read(asdep).decode(errors="replace")
        except FileNotFoundError:       # an assembler without --MD writes none
            as_text = ""
        found.update(_dep_inputs(as_text, cwd, tmpdir, src))
        mapped = {staged.get(f, f): h for f, h in found.items()}
        inputs.update(mapped)
        if key is not None:
            objects.put(key, read(obj), mapped)

    if job.copies is None:
        for i, src in enumerate(sources):
            obj = obj_dir / f"{i}-{src.stem}.o"
            compile_one(src, obj, flags)
            objs.append(str(obj))
    else:
        objs = _compile_copies(job, cc, flags, sources, obj_dir, cwd, env, work, compile_one)
    tmp = (obj_dir / out.name) if work is not None else out.with_name(f".{out.name}.tmp")
    argv = [cc, *flags, *objs, "-o", str(tmp), *LDLIBS]
    proc = subprocess.run(privilege.wrap(argv), capture_output=True, text=True, cwd=cwd, env=env)
    if proc.returncode != 0:
        raise BuildError(f"{job.what}: linking {out.name} failed: {first_error(proc.stderr)}")
    if work is not None:
        privilege.copy_out(tmp, out)  # atomic, links not followed
    else:
        os.replace(tmp, out)          # atomic: a concurrent run never sees half a binary
    return inputs, first_cmd


def _copy_flags(lay: Layout) -> list[str]:
    """A copy's compile flags: its layout's, less the pad (a pad object stands for it)."""
    return [f for f in lay.flags() if not f.startswith("-DRINGLAB_LAYOUT_PAD=")]


def _objcopy(cc: str) -> str:
    """binutils' objcopy for ``cc`` (``x86_64-linux-gnu-objcopy`` beside a cross gcc), else
    the one on PATH; BuildError when there is none."""
    name = Path(cc).name
    prefix = name[:-len("gcc")] if name.endswith("gcc") else ""
    for cand in ([prefix + "objcopy"] if prefix else []) + ["objcopy"]:
        found = shutil.which(cand)
        if found:
            return found
    raise BuildError("objcopy not found: a binary of layout copies needs binutils' objcopy "
                     "(or build with layouts 1)")


def _compile_copies(job: BuildJob, cc: str, flags: list[str], sources: list[Path], obj_dir: Path,
                    cwd: Path, env: dict, work: Path | None, compile_one) -> list[str]:
    """The objects of a binary of layout copies, in link order: the shared sources once (with the
    copies' loop alignment), then per copy its pad object and COPY_SOURCE compiled with the copy's
    function alignment (one compile per distinct alignment, its globals made local)."""
    lays = job.copies.layouts
    copy_src = paths.CSRC / COPY_SOURCE
    shared = [f for f in _copy_flags(lays[0]) if f.startswith(("-falign-loops=", "-falign-jumps="))]
    objs: list[str] = []
    for i, src in enumerate(sources):
        if src != copy_src:
            obj = obj_dir / f"{i}-{src.stem}.o"
            compile_one(src, obj, [*flags, *shared])
            objs.append(str(obj))
    objcopy = _objcopy(cc)
    localize = [f"--localize-symbol={s}" for s in COPY_SYMBOLS]
    built: dict[tuple[str, ...], str] = {}
    for lay in lays:
        key = tuple(_copy_flags(lay))
        if key in built:
            continue
        n = len(built)
        raw, local = obj_dir / f"copy{n}-{copy_src.stem}.o", obj_dir / f"copy{n}-local.o"
        compile_one(copy_src, raw, [*flags, *key])
        proc = subprocess.run(privilege.wrap([objcopy, "-w", *localize, str(raw), str(local)]),
                              capture_output=True, text=True, cwd=cwd, env=env)
        if proc.returncode != 0:
            raise BuildError(f"{job.what}: objcopy of {raw.name} failed: {first_error(proc.stderr)}")
        built[key] = str(local)
    # one pad object per copy: PAD bytes of .text that never run, right ahead of its copy.  The
    # first is aligned to the largest function alignment a layout may draw, so .text is aligned
    # alike in every binary of copies (else the copies' largest alignment would move where .text,
    # and so every copy, starts).
    pads = []
    for j, lay in enumerate(lays):
        s = obj_dir / f"pad{j}.s"
        first = f"\t.balign {max(ALIGNS)}\n" if j == 0 else ""
        s.write_text(f"\t.text\n{first}\t.skip {int(lay.pad)}\n\t.section .note.GNU-stack,\"\",@progbits\n")
        pads.append(s)
    if work is not None:
        for s in pads:
            privilege.give(s)
    argv = [cc, "-c", *[s.name for s in pads]]
    proc = subprocess.run(privilege.wrap(argv), capture_output=True, text=True, cwd=obj_dir, env=env)
    if proc.returncode != 0:
        raise BuildError(f"{job.what}: assembling the layout pads failed: {first_error(proc.stderr)}")
    for j, lay in enumerate(lays):
        objs += [str(obj_dir / f"pad{j}.o"), built[tuple(_copy_flags(lay))]]
    return objs


_asm_md: dict[str, bool] = {}


def assembler_depfile(cc: str) -> bool:
    """Whether ``cc -Wa,--MD,FILE`` works (GNU as): the assembler then lists the files its
    ``.incbin`` and ``.include`` read, which the compiler's own dependency output does not."""
    if cc not in _asm_md:
        with tempfile.TemporaryDirectory(prefix="ringlab-asmd-") as d:
            argv = [cc, "-x", "c", "-c", "-", "-o", os.path.join(d, "t.o"), f"-Wa,--MD,{os.path.join(d, 't.d')}"]
            try:
                proc = subprocess.run(argv, input="int ringlab_probe;\n", capture_output=True, text=True,
                                      timeout=60)
                _asm_md[cc] = proc.returncode == 0 and os.path.isfile(os.path.join(d, "t.d"))
            except (OSError, subprocess.TimeoutExpired):
                _asm_md[cc] = False
    return _asm_md[cc]


def _include_dirs(flags: list[str]) -> list[Path]:
    return [Path(f[2:]) for f in flags if f.startswith("-I") and len(f) > 2]


def _compile(job: BuildJob, cc: str, ccver: str, out_dir: Path, objects: SharedObjects | None = None) -> BinaryInfo:
    name, sources, flags, what = job.name, job.sources, job.argv_flags(), job.what
    out = out_dir / name
    obj_dir = out_dir / ".obj" / name
    stamp = out_dir / ".stamps" / f"{name}.json"
    copies = None if job.copies is None else [f"balign {max(ALIGNS)}",
                                              *([lay.pad, *lay.flags()] for lay in job.copies.layouts)]
    key = hashlib.sha256(json.dumps([cc, ccver, flags, [str(s) for s in sources], LDLIBS, *([copies] if copies else [])]
                                    ).encode()).hexdigest()
    data = _stamp_ok(stamp, out, key)
    rebuilt = data is None
    if rebuilt:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        with privilege.workdir(name) as work:
            inputs, first_cmd = _compile_link(job, cc, flags, sources, obj_dir if work is None else work,
                                              out, work, objects)
        # The layout's flags move code, they change none of it: not part of the source set.
        src_set = source_set({source_label(Path(f), job.header): h for f, h in inputs.items()},
                             hashed_flags(job.flags))
        digest = sha256_file(out)
        data = {"key": key, "sha256": digest, "inputs": dict(sorted(inputs.items())),
                "command": first_cmd, "source": src_set}
        stamp.write_text(json.dumps(data, indent=1))
    src_set = data["source"]
    layout = job.layout_record()
    record = {"binary": name, "binary_sha256": data["sha256"], "compiler": cc, "compiler_version": ccver,
              **src_set, "header": job.header_record, "layout": layout}
    write_json(source_record_path(out), record)
    size, size_err = binary_size(out)
    return BinaryInfo(name=name, path=str(out), sha256=data["sha256"], size=size,
                      size_error=size_err, inputs=data["inputs"], command=data.get("command") or [],
                      rebuilt=rebuilt, source_sha256=src_set["source_sha256"],
                      source_files=src_set["files"], source_flags=src_set["flags"],
                      header=job.header_record, layout=layout)


def _kernel_targets(kernel_headers: dict, base_flags: list[str], out_dir: Path) -> list[BuildJob]:
    """One job per --kernel-header NAME=SOURCE (see ringlab.sources.header_source.resolve_source)."""
    if not kernel_headers:
        return []
    out = []
    for name, spec in kernel_headers.items():
        if name in RING_HEADERS:
            raise BuildError(f"--kernel-header {name}=...: NAME clashes with a built-in variant; "
                             f"choose a name other than {', '.join(RING_HEADERS)}")
        try:
            src = resolve_source(spec)
            kflags = compile_flags(name, src.header)
        except KernelHeaderError as e:
            _remove_binary(out_dir, f"ptr_ring_test-{name}")
            raise BuildError(str(e)) from None
        srcs = [paths.CSRC / s for s in _PTR_RING_SOURCES]
        out.append(BuildJob(f"ptr_ring_test-{name}", srcs, [*kflags, *base_flags],
                            f"kernel header {src.header} (--kernel-header {name})", src.header,
                            dict(src.record, name=name)))
    return out


def _with_layouts(jobs: list[BuildJob], layouts: dict[str, list[Layout]] | None) -> list[BuildJob]:
    """Each job whose binary ``layouts`` names, once per layout (``NAME@p<pad>-a<align>``) or once
    per binary of layout copies (``NAME@c<first>-<last>-<digest>``)."""
    out = []
    for job in jobs:
        for lay in (layouts or {}).get(job.name) or [PLAIN]:
            if isinstance(lay, LayoutCopies):
                if not any(s == paths.CSRC / COPY_SOURCE for s in job.sources):
                    raise BuildError(f"{job.name}: layout copies need {COPY_SOURCE} among its sources")
                first, last = lay.layouts[0].index, lay.layouts[-1].index
                out.append(dataclasses.replace(job, name=lay.binary_name(job.name), copies=lay,
                                               what=job.what + f" (layouts {first}-{last}, copies)"))
                continue
            out.append(dataclasses.replace(job, name=lay.binary_name(job.name), layout=lay,
                                           what=job.what + ("" if lay.plain else f" (layout {lay.index})")))
    return out


def plan_jobs(kernel_headers, cflags, sanitize, out_dir, only, layouts=None) -> tuple[list[BuildJob], dict, dict]:
    """(jobs, skipped, settings) shared by build_all and check_binaries.  ``only`` names binaries
    with or without their layout suffix; ``layouts`` {binary name: [Layout]} builds those K times."""
    only = None if only is None else {base_name(n) for n in only}
    user = validate_cflags(cflags, "--cflags")
    san = _sanitize_flags(sanitize)
    if out_dir is None:
        out_dir = paths.bin_dir() if not san else paths.build_dir() / (
            "bin-" + re.sub(r"[^a-z]+", "-", sanitize))
    out_dir = Path(out_dir)
    # Order matters: defaults, then the sanitizer, then the user (last -O wins).
    common = [*DEFAULT_CFLAGS, *san, *user]
    jobs: list[BuildJob] = []
    skipped: dict[str, str] = {}
    for t in TARGETS:
        if only is not None and t.name not in only:
            continue
        srcs = [paths.CSRC / s for s in t.sources]
        missing = [str(s.relative_to(paths.ROOT)) for s in srcs if not s.is_file()]
        if missing:
            if t.optional:
                skipped[t.name] = "source not present: " + ", ".join(missing)
                continue
            raise BuildError(f"{t.name}: missing source {missing[0]}")
        jobs.append(BuildJob(t.name, srcs, [f"-I{paths.CSRC}", *t.flags, *common], t.name))
    wanted = {k: v for k, v in dict(kernel_headers or {}).items()
              if only is None or f"ptr_ring_test-{k}" in only}
    jobs += _kernel_targets(wanted, common, out_dir)
    return _with_layouts(jobs, layouts), skipped, {"user": user, "common": common, "out_dir": out_dir}


def build_all(kernel_headers: dict[str, str | Path] | None = None, cflags: str | list[str] = "",
              sanitize: str | None = None, out_dir: Path | None = None,
              only: list[str] | None = None, jobs: int | None = None,
              layouts: dict[str, list[Layout]] | None = None) -> BuildInfo:
    """Build every binary (only the ones named in ``only``, if given); a binary that
    ``layouts`` names is built once per layout (ringlab.build.layouts), in parallel too.

    ``out_dir`` defaults to ``build/bin`` (``build/bin-<sanitizer>`` for
    sanitizer builds, so they never replace the benchmark binaries).
    Raises :class:`BuildError` naming the file and the first compiler error.
    """
    cc = compiler()
    ccver = compiler_version(cc)
    jobs_list, skipped, st = plan_jobs(kernel_headers, cflags, sanitize, out_dir, only, layouts)
    out_dir = st["out_dir"]
    out_dir.mkdir(parents=True, exist_ok=True)
    info = BuildInfo(compiler=shutil.which(cc) or cc, compiler_version=ccver, cflags=st["common"],
                     user_cflags=st["user"], sanitize=sanitize or None, out_dir=str(out_dir),
                     skipped=skipped, target=compiler_target(cc))
    for job in jobs_list:
        if job.header is not None:
            variant = base_name(job.name).removeprefix("ptr_ring_test-")
            info.kernel_headers[variant] = str(job.header)
            info.header_sources[variant] = job.header_record

    workers = jobs or min(4, os.cpu_count() or 1)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        objects = SharedObjects(out_dir / OBJECT_CACHE, salt=(cc, ccver))
        futs = {job.name: ex.submit(_compile_target, job, cc, ccver, out_dir, objects) for job in jobs_list}
        errors = []
        for name, fut in futs.items():
            try:
                info.binaries[name] = fut.result()
                info.source_sha256[name] = info.binaries[name].source_sha256
            except BuildError as e:
                errors.append(str(e))
        if errors:
            raise BuildError(errors[0] + (f" (and {len(errors) - 1} more failure(s))" if len(errors) > 1 else ""))
    return info
