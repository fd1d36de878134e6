"""Which binaries exist: the table of built-in targets, the kernel-header variants, and each
binary once per code layout.

* The table :data:`TARGETS` says which sources make which binary; optional
  targets (page_frag, syscall_loop, c2c_latency, trial_launcher) are built only if their
  sources exist, so another engineer's layout change is a one-line edit.
* A ``--kernel-header NAME=SOURCE`` adds ``ptr_ring_test-NAME``: the ptr_ring harness compiled
  with that header (ringlab.sources.header_source.resolve_source, through csrc/compat/).
* ``layouts`` (ringlab.build.layouts) builds a binary K times, each with its pad of unused
  code and function alignment, as ``NAME@p<pad>-a<align>``; layout copies
  (ringlab.build.layouts.LayoutCopies) put several layouts into one binary,
  ``NAME@c<first>-<last>-<digest>``, which needs :data:`COPY_SOURCE` among its sources.

A :class:`BuildJob` is one binary to build: its sources, flags and layout.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ringlab import paths
from ringlab.build.cflags import BuildError
from ringlab.build.layouts import PLAIN, Layout, LayoutCopies
from ringlab.build.stamps import remove_binary
from ringlab.sources.header_files import KernelHeaderError
from ringlab.sources.header_source import resolve_source
from ringlab.sources.kernel_header import compile_flags

#: Ring headers of the built-in ptr_ring variants (relative to csrc/).
RING_HEADERS = {
    "prebatch": "rings/ptr_ring_prebatch.h",
    "batch": "rings/ptr_ring_batch.h",
    "reorder": "rings/ptr_ring_reorder.h",
    "spsc": "rings/spsc_lamport.h",
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


@dataclass
class BuildJob:
    """One binary to build: its sources, flags and code layout."""
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


def kernel_targets(kernel_headers: dict, base_flags: list[str], out_dir: Path) -> list[BuildJob]:
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
            remove_binary(out_dir, f"ptr_ring_test-{name}")
            raise BuildError(str(e)) from None
        srcs = [paths.CSRC / s for s in _PTR_RING_SOURCES]
        out.append(BuildJob(f"ptr_ring_test-{name}", srcs, [*kflags, *base_flags],
                            f"kernel header {src.header} (--kernel-header {name})", src.header,
                            dict(src.record, name=name)))
    return out


def with_layouts(jobs: list[BuildJob], layouts: dict[str, list[Layout]] | None) -> list[BuildJob]:
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
