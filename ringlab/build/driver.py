"""The one compiler driver: every C binary of ringlab is built here.

``build_all()`` compiles the standalone binaries into ``build/bin/`` (or
``out_dir``) and returns a :class:`BuildInfo` describing exactly what was built
(compiler, flags, per-binary sha256 and ``size`` text/data/bss, sha256 of
every source and header that went in), which ``env.json`` records.

This module plans a build: the compiler, the flags (defaults, then the sanitizer, then the
user's, each option checked by ringlab.build.cflags.validate_cflags), the output folder and
the binaries to build, and ties the steps together:

* ringlab.build.targets: which binaries exist (the table of targets, the kernel-header
  variants, each binary once per code layout);
* ringlab.build.stamps: which binaries are up to date, so only a changed one is rebuilt;
* ringlab.build.compile: compile and link, under root as the unprivileged user, in a
  thread pool.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ringlab import paths
from ringlab.build.binutils import compiler_version
from ringlab.build.cflags import BuildError, validate_cflags
from ringlab.build.compile import BinaryInfo, compile_all
from ringlab.build.layouts import Layout, base_name
from ringlab.build.targets import TARGETS, BuildJob, kernel_targets, ring_binary, ring_variant, with_layouts

#: Flags shared by the standalone binaries and the cffi module (ringlab.native
#: reads DEFAULT_CFLAGS).  -O2 like ringtest and ptr_ring_test; -g so perf and
#: callgrind can attribute cycles to source lines.
DEFAULT_CFLAGS = ["-O2", "-g", "-std=gnu11", "-pthread", "-Wall", "-Wextra"]

SANITIZERS = {
    "thread": ["-fsanitize=thread"],
    "address": ["-fsanitize=address", "-fno-omit-frame-pointer"],
    "undefined": ["-fsanitize=undefined", "-fno-sanitize-recover=undefined"],
    "address,undefined": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                          "-fno-sanitize-recover=undefined"],
}


@dataclass
class BuildInfo:
    """What a build made: the compiler, the flags, every binary, what was skipped and why."""
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


# ----------------------------------------------------------------------------- compiler and flags

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


# ----------------------------------------------------------------------------- planning

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
              if only is None or ring_binary(k) in only}
    jobs += kernel_targets(wanted, common, out_dir)
    return with_layouts(jobs, layouts), skipped, {"user": user, "common": common, "out_dir": out_dir}


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
            variant = ring_variant(job.name)
            info.kernel_headers[variant] = str(job.header)
            info.header_sources[variant] = job.header_record

    workers = jobs or min(4, os.cpu_count() or 1)
    for name, binary in compile_all(jobs_list, cc, ccver, out_dir, workers).items():
        info.binaries[name] = binary
        info.source_sha256[name] = binary.source_sha256
    return info
