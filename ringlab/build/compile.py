"""Compile and link: a build's binaries, in a thread pool, each from its objects.

* No shell, ever: the compiler is run with argv lists (its flags checked in
  ringlab.build.cflags).
* Under root every compile and link runs as the unprivileged user
  (ringlab.system.privilege) in a folder it owns, on a copy of the kernel header;
  root copies the binary out.  Without root nothing of this happens.
* Each binary's source set (ringlab.build.sourceset: what it was built from, by
  content) is written next to it as ``NAME.source.json``; a binary whose stamp
  (ringlab.build.stamps) says nothing changed is not compiled again.  A failed build
  removes the binary of that NAME, so no older one can be measured in its place
  (ringlab.build.binaries checks a binary against what a run asks for).
* A binary of layout copies (ringlab.build.layouts.LayoutCopies): :data:`COPY_SOURCE` is
  compiled once per function alignment the copies use, its global symbols made local
  (``objcopy --localize-symbol``), and linked once per copy after a pad object of the copy's
  pad; the other sources are compiled once.  The layout's flags are recorded under ``layout``
  in the source record, not in the source set (they move code, change none).
* An object is compiled once for every build into the same folder: it is kept in
  ``<out_dir>/.objects`` with the sha256 of every file its compile read
  (ringlab.build.shared_objects), and used again while they all still match, so a staged run's
  later stages, and the next run, only link.
"""
from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ringlab import paths
from ringlab.digest import sha256_file
from ringlab.build.binutils import binary_size
from ringlab.build.cflags import BuildError
from ringlab.build.layouts import ALIGNS, Layout
from ringlab.build.shared_objects import SharedObjects, write_new
from ringlab.build.sourceset import (hashed_flags, parse_depfile, source_label,
                                     source_record_path, source_set, write_json)
from ringlab.build.stamps import remove_binary, stamp_key, stamp_path, up_to_date, write_stamp
from ringlab.build.targets import COPY_SOURCE, COPY_SYMBOLS, BuildJob
from ringlab.sources.kernel_header import first_error
from ringlab.system import privilege

LDLIBS = ["-lm"]

#: compiler and linker lines that only say that a step failed, not why
_NOISE_RE = re.compile(r"collect2: error: ld returned \d+ exit status|linker command failed with exit code"
                       r"|^compilation terminated\.$|^In file included from|^\s*\|")


def compiler_lines(stderr: str, n: int = 3) -> str:
    """The compiler's last meaningful lines, joined by " | ": its first ``n`` error lines when it
    marks any, else its last ``n`` lines that are not only "ld returned 1" (an undefined
    reference and the function it is in)."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    meaningful = [ln for ln in lines if not _NOISE_RE.search(ln)]
    errors = [ln for ln in meaningful if re.search(r"\b(fatal )?error:", ln, re.I)]
    picked = errors[:n] if errors else meaningful[-n:] or lines[-n:]
    return " | ".join(picked) if picked else "(no compiler output)"

#: the name the unprivileged user's work folder has inside a binary
WORK_PREFIX = "/ringlab-unprivileged-build"
#: the folder, under a build's output folder, of the objects kept across builds
#: (ringlab.build.shared_objects)
OBJECT_CACHE = ".objects"


@dataclass
class BinaryInfo:
    """One binary as built: where it is, its hashes and sizes, what it was built from."""
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


def compile_target(job: BuildJob, cc: str, ccver: str, out_dir: Path,
                   objects: SharedObjects | None = None) -> BinaryInfo:
    """Build ``job`` into ``out_dir`` (or find it up to date) and describe the binary."""
    # A failed build removes the old binary: it was built from other sources than the
    # ones just asked for.  An interrupted one leaves it, with its still-true record.
    try:
        return _compile(job, cc, ccver, out_dir, objects)
    except Exception:
        remove_binary(out_dir, job.name)
        raise


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
    moved: dict[str, str] = {}           # a readable copy of csrc/ -> csrc/ (a private checkout)
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
        if not paths.others_can_reach(paths.CSRC):
            # ringlab's own sources in a checkout the user cannot reach (a clone in /root): a
            # root-owned copy it can read, named back to csrc/ inside the binary (the same bytes)
            here, there = str(paths.CSRC), str(privilege.readable_copy(paths.CSRC, "csrc"))
            moved[there] = here
            flags = [f.replace(here, there) for f in flags] + [f"-ffile-prefix-map={there}={here}"]
        privilege.check_readable([Path(_moved_to(str(s), moved)) for s in sources]
                                 + _include_dirs(flags), job.what)
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
        argv = [cc, *argv_flags, "-c", _moved_to(str(src), moved), "-o", str(obj), "-MMD", "-MF", str(dep),
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
            raise BuildError(f"{job.what}: the compile step failed on {src}: {compiler_lines(proc.stderr)}")
        if not os.path.isfile(obj):
            raise BuildError(f"{job.what}: the compile step wrote no object file {obj.name} for {src} "
                             "(an option stopped the compiler early)"
                             + (f": {compiler_lines(proc.stderr)}" if proc.stderr.strip() else ""))
        found = _dep_inputs(read(dep).decode(errors="replace"), cwd, None, src)
        try:
            as_text = read(asdep).decode(errors="replace")
        except FileNotFoundError:       # an assembler without --MD writes none
            as_text = ""
        found.update(_dep_inputs(as_text, cwd, tmpdir, src))
        mapped = {_moved_from(staged.get(f, f), moved): h for f, h in found.items()}
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
        raise BuildError(f"{job.what}: the link step failed for {out.name}: {compiler_lines(proc.stderr)}")
    if work is not None:
        privilege.copy_out(tmp, out)  # atomic, links not followed
    else:
        os.replace(tmp, out)          # atomic: a concurrent run never sees half a binary
    return inputs, first_cmd


def _moved_to(path: str, moved: dict[str, str]) -> str:
    """``path`` inside the readable copy of the folder it lies in (``moved``: copy -> folder)."""
    for there, here in moved.items():
        if path == here or path.startswith(here + os.sep):
            return there + path[len(here):]
    return path


def _moved_from(path: str, moved: dict[str, str]) -> str:
    """``path`` named by the folder its readable copy stands for (the inverse of ``_moved_to``)."""
    for there, here in moved.items():
        if path == there or path.startswith(there + os.sep):
            return here + path[len(there):]
    return path


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
    stamp = stamp_path(out_dir, name)
    key = stamp_key(cc, ccver, flags, sources, LDLIBS, job.copies)
    data = up_to_date(stamp, out, key)
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
        write_stamp(stamp, data)
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


def compile_all(jobs: list[BuildJob], cc: str, ccver: str, out_dir: Path, workers: int) -> dict[str, BinaryInfo]:
    """{binary name: BinaryInfo} of every job, built by ``workers`` threads that share the objects
    kept in ``out_dir``'s :data:`OBJECT_CACHE`.  Every job is tried; BuildError names the first
    failure and how many more there were."""
    built: dict[str, BinaryInfo] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        objects = SharedObjects(out_dir / OBJECT_CACHE, salt=(cc, ccver))
        futs = {job.name: ex.submit(compile_target, job, cc, ccver, out_dir, objects) for job in jobs}
        errors = []
        for name, fut in futs.items():
            try:
                built[name] = fut.result()
            except BuildError as e:
                errors.append(str(e))
        if errors:
            raise BuildError(errors[0] + (f" (and {len(errors) - 1} more failure(s))" if len(errors) > 1 else ""))
    return built
