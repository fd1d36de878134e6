"""Which binary on disk was built from what: refuse a stale one.

``check_binaries`` is what a run that does not build calls before measuring: each
binary must have been built from the source set the run asks for (its kernel
header by content, this checkout's harness and shim, its flags), and still be the
file that was built.  ``declare_built`` records binaries that ringlab did not
compile (test doubles, a packager's build).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ringlab import paths
from ringlab.digest import sha256_file
from ringlab.build.binutils import binary_size
from ringlab.build.cflags import BuildError
from ringlab.build.compile import BinaryInfo
from ringlab.build.driver import BuildInfo, plan_jobs
from ringlab.build.layouts import Layout, base_name
from ringlab.build.sourceset import (hashed_flags, label_path, source_label, source_record_path, source_set,
                               write_json)
from ringlab.build.targets import BuildJob, ring_variant


class StaleBinaryError(BuildError):
    """A binary on disk was not built from the source set a run asks for."""


def check_binaries(kernel_headers: dict[str, str | Path] | None = None, cflags: str | list[str] = "",
                   sanitize: str | None = None, out_dir: Path | None = None,
                   only: list[str] | None = None,
                   layouts: dict[str, list[Layout]] | None = None) -> BuildInfo:
    """Without building: check that each binary on disk was built from the source set
    this request names (same arguments as :func:`build_all`), and describe them.

    For each binary, the labels of its recorded source set are hashed again from this
    checkout, with the kernel header of the request in place of the one it was built
    from, and the flags of the request; the result must equal the recorded
    source_sha256, and the binary must still be the one recorded.  Raises
    :class:`StaleBinaryError` naming the variant and both hashes otherwise, and
    :class:`BuildError` when a binary or its record is missing.  No compiler is run.
    A binary of a code layout (``layouts``) must also record the pad and alignment asked for.
    """
    jobs_list, skipped, st = plan_jobs(kernel_headers, cflags, sanitize, out_dir, only, layouts)
    out_dir = st["out_dir"]
    info = BuildInfo(compiler="", compiler_version="", cflags=st["common"], user_cflags=st["user"],
                     sanitize=sanitize or None, out_dir=str(out_dir), skipped=skipped)
    for job in jobs_list:
        _check_one(job, out_dir / job.name, info)
    return info


def _hint(job: BuildJob) -> str:
    variant = ring_variant(job.name)
    return ("rebuild it: run without --no-build, or `ringlab build"
            + (f" --kernel-header {variant}=...`" if job.header is not None else "`"))


def _read_record(job: BuildJob, out: Path) -> dict:
    """The source record next to binary ``out``: BuildError without the binary, StaleBinaryError
    without a readable record."""
    if not out.is_file():
        raise BuildError(f"{job.name}: {out} does not exist (never built, or its last build "
                         f"failed); {_hint(job)}")
    try:
        rec = json.loads(source_record_path(out).read_text())
    except (OSError, ValueError):
        rec = None
    if not isinstance(rec, dict) or "source_sha256" not in rec:
        raise StaleBinaryError(f"{job.name}: no source record ({source_record_path(out)}), so "
                               f"what it was built from is unknown; {_hint(job)}")
    return rec


def _check_sources(job: BuildJob, rec: dict, out: Path) -> None:
    """The recorded source set, hashed again from this checkout with the request's kernel header
    and flags, must equal the recorded source_sha256 (StaleBinaryError otherwise)."""
    recorded = rec["source_sha256"]
    files = {}
    for label in rec.get("files") or {}:
        try:
            files[label] = sha256_file(label_path(label, job.header))
        except (OSError, BuildError):
            files[label] = "missing"
    wanted = source_set(files, hashed_flags(job.flags))["source_sha256"]
    if wanted == recorded:
        return
    changed = [k for k in files if files[k] != rec["files"].get(k)]
    if hashed_flags(job.flags) != rec.get("flags"):
        changed.append("compile flags")
    built_from = (rec.get("header") or {}).get("spec") or (rec.get("header") or {}).get("header")
    variant = ring_variant(job.name)
    raise StaleBinaryError(
        f"variant {variant}: {out} was built from source set {recorded}"
        + (f" (kernel header {built_from})" if built_from else "")
        + f", but this run asks for source set {wanted}"
        + (f" (kernel header {job.header_record.get('spec')})" if job.header_record else "")
        + (f"; differing: {', '.join(changed[:6])}" if changed else "") + f"; {_hint(job)}")


def _check_one(job: BuildJob, out: Path, info: BuildInfo) -> None:
    """Check one binary against the request and describe it in ``info``."""
    rec = _read_record(job, out)
    _check_sources(job, rec, out)
    _check_layout(job, rec, out, _hint(job))
    variant = ring_variant(job.name)
    digest = sha256_file(out)
    if digest != rec.get("binary_sha256"):
        raise StaleBinaryError(f"variant {variant}: {out} (sha256 {digest}) is not the binary "
                               f"its source record names ({rec.get('binary_sha256')}); {_hint(job)}")
    info.compiler = info.compiler or rec.get("compiler", "")
    info.compiler_version = info.compiler_version or rec.get("compiler_version", "")
    size, size_err = binary_size(out)
    recorded = rec["source_sha256"]
    info.binaries[job.name] = BinaryInfo(
        name=job.name, path=str(out), sha256=digest, size=size, size_error=size_err, inputs={},
        command=[], rebuilt=False, source_sha256=recorded, source_files=rec.get("files") or {},
        source_flags=rec.get("flags") or [], header=job.header_record, layout=rec.get("layout"))
    info.source_sha256[job.name] = recorded
    if job.header is not None:
        info.kernel_headers[variant] = str(job.header)
        info.header_sources[variant] = job.header_record


def _check_layout(job: BuildJob, rec: dict, out: Path, hint: str) -> None:
    """StaleBinaryError unless the record's layout (pad, alignment, flags) is the job's."""
    want = job.layout_record()
    got = rec.get("layout") if isinstance(rec.get("layout"), dict) else None
    keys = ("pad", "align", "flags")

    def same(w: dict, g: dict) -> bool:
        if "copies" in w or "copies" in g:   # layout copies: every copy's, in order
            wc, gc = w.get("copies") or [], g.get("copies") or []
            return len(wc) == len(gc) and all(same(a, b) for a, b in zip(wc, gc))
        return all(w.get(k) == g.get(k) for k in keys)

    def show(d):
        if not d:
            return "the plain build"
        if "copies" in d:
            return f"{len(d['copies'])} layout copies"
        return f"pad {d.get('pad')}, align {d.get('align')}"
    if (want is None) != (got is None) or (want and not same(want, got)):
        raise StaleBinaryError(f"{job.name}: {out} was built as {show(got)}, but this run asks for "
                               f"{show(want)}; {hint}")


def declare_built(names: list[str], kernel_headers: dict[str, str | Path] | None = None,
                  cflags: str | list[str] = "", out_dir: Path | None = None,
                  layouts: dict[str, list[Layout]] | None = None) -> None:
    """Write source records for binaries that ringlab did not compile (test doubles, a
    packager's build), so that :func:`check_binaries` accepts them.

    The record lists the target's declared sources (not every header the compiler
    would read) and says ``"declared": true``; provenance shows it as such."""
    jobs_list, _, st = plan_jobs(kernel_headers, cflags, None, out_dir, names, layouts)
    for job in jobs_list:
        out = st["out_dir"] / job.name
        if not out.is_file():
            raise BuildError(f"{job.name}: {out} does not exist")
        ring = [paths.CSRC / m.group(1) for f in job.flags
                for m in [re.match(r'-DRINGLAB_RING_HEADER="(.+)"$', f)] if m]
        extra = [job.header] if job.header is not None else [r for r in ring if r.is_file()]
        files = {source_label(p, job.header): sha256_file(p) for p in [*job.sources, *extra]}
        rec = {"binary": job.name, "binary_sha256": sha256_file(out), "compiler": None,
               "compiler_version": None, "declared": True, **source_set(files, hashed_flags(job.flags)),
               "header": job.header_record, "layout": job.layout_record()}
        write_json(source_record_path(out), rec)
