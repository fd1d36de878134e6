"""Which binaries exist: the table of built-in targets, the kernel-header variants, and each
binary once per code layout.

* The table :data:`TARGETS` says which sources make which binary: the experiments' binaries
  and sources are ringlab.catalog's (the ring experiment's once per ring variant, with its
  header); optional targets (the other experiments', c2c_latency, trial_launcher) are built
  only if their sources exist.
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

from ringlab import catalog, paths
from ringlab.build.cflags import BuildError
from ringlab.build.layouts import PLAIN, Layout, LayoutCopies, base_name
from ringlab.build.stamps import remove_binary
from ringlab.sources.header_files import KernelHeaderError
from ringlab.sources.header_source import resolve_source
from ringlab.sources.kernel_header import compile_flags

#: Ring headers of the built-in ptr_ring variants (relative to csrc/; ringlab.catalog.variants).
RING_HEADERS = {v.name: v.header for v in catalog.VARIANTS}
_PTR_RING = catalog.experiment(catalog.RING_EXPERIMENT)

_PTR_RING_SOURCES = list(_PTR_RING.sources)
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


def ring_binary(variant: str) -> str:
    """The ring experiment's binary of ``variant`` (a built-in or a kernel-header NAME)."""
    return _PTR_RING.binary_of(variant)


def ring_variant(binary: str) -> str:
    """The variant a ring binary (``ptr_ring_test-NAME[@layout]``) builds; any other binary's
    name without its layout suffix."""
    return _PTR_RING.arm_of_binary(binary) or base_name(binary)


def _ptr_ring_target(variant: str, header: str) -> Target:
    return Target(_PTR_RING.binary_of(variant), tuple(_PTR_RING_SOURCES),
                  (f'-DRINGLAB_RING_HEADER="{header}"', f'-DRINGLAB_VARIANT="{variant}"'))


def _experiment_targets(exp: catalog.Experiment) -> list[Target]:
    """The binaries of an experiment other than the ring one (its catalog entry's binary and
    sources, once per arm when the binary names it): optional."""
    arms = exp.variants if "{variant}" in exp.binary else ("",)
    return [Target(exp.binary_of(v), tuple(src.format(variant=v) for src in exp.sources), optional=True)
            for v in arms]


#: Every built-in binary.  The experiments' sources are in ringlab.catalog; edit here when
#: another tool's source moves.
TARGETS: list[Target] = [
    *(_ptr_ring_target(v, h) for v, h in RING_HEADERS.items()),
    *(t for e in catalog.EXPERIMENTS if e.name != catalog.RING_EXPERIMENT and e.binary and e.sources
      for t in _experiment_targets(e)),
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
            remove_binary(out_dir, _PTR_RING.binary_of(name))
            raise BuildError(str(e)) from None
        srcs = [paths.CSRC / s for s in _PTR_RING_SOURCES]
        out.append(BuildJob(_PTR_RING.binary_of(name), srcs, [*kflags, *base_flags],
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
