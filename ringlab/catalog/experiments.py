"""The experiments and the notebooks that run them.

Each :class:`Experiment` entry says what the rest of ringlab needs to know of an experiment
without importing it: the class that implements it (``ringlab.experiments``' registry), its
raw.csv parameter and extra columns, the bounds of its integer parameter columns (its
parameters' ``min``/``max`` and raw.csv's row checks), its built-in arms and binaries, the
code its arms are in (the mail's "tested:" line), whether callgrind can count its trials, and
the published figures of the study it reproduces.  :data:`NOTEBOOKS` lists the notebooks
``ringlab reproduce`` executes, in order, with the results folder of each.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ringlab.errors import ParamError
from ringlab.catalog.variants import VARIANT_NAMES
from ringlab.catalog.words import by_name

#: the most operations one timed loop may run: the C binaries refuse more (ptr_ring_test and
#: syscall_loop ``-N``, page_frag_test ``nr_test``)
MAX_OPS = 10**12
#: ringtest's int arguments (it parses them with atoi into an int and refuses negative ones)
_RINGTEST_INT = 2**31 - 2


class Bound(NamedTuple):
    """An integer parameter column of raw.csv and its inclusive bounds (column, low, high)."""
    column: str
    low: int
    high: int


@dataclass(frozen=True)
class PublishedCounts:
    """A study's published instruction counts per operation of its two arms, set beside the
    callgrind counts of a run that measured both (the mail's "Published counts" paragraph).

    ``tool``: how they were counted; ``per_op``: {arm: instructions per operation}, the
    baseline's first; ``how``: the published figure each comes from; ``mode``: the mode whose
    rows hold comparable counts ("" for every row); ``loop``: the measured loop callgrind
    counted, as the mail names it."""
    tool: str
    per_op: tuple[tuple[str, float], ...]
    how: tuple[tuple[str, str], ...]
    mode: str
    loop: str

    def counts(self) -> dict[str, float]:
        """{arm: instructions per operation}."""
        return dict(self.per_op)


@dataclass(frozen=True)
class Study:
    """A published comparison that a notebook reproduces: who published it (``name``), the
    experiment that measures it, its two arms, the notebook (its number) and, where the study
    published instruction counts, those."""
    name: str
    experiment: str
    baseline: str
    patched: str
    notebook: str
    counts: PublishedCounts | None = None

    @property
    def arms(self) -> tuple[str, str]:
        """(baseline, patched)."""
        return self.baseline, self.patched


@dataclass(frozen=True)
class Experiment:
    """One experiment.  ``implementation``: "module:Class"; ``param_columns``: its raw.csv
    parameter columns after ``variant``; ``extra_columns``: the measurement columns it adds after
    ringlab.schema's; ``bounds``: its integer parameter columns' bounds; ``variants``: its
    built-in arms; ``binary``: its binary under build/bin, ``{variant}`` standing for the arm
    ("" when it builds none of ringlab's); ``own_code``: where an arm's code is, ``{}`` standing
    for the arm; ``arms_text``: what its arms are, when no code names them; ``callgrind``: whether
    it has single-threaded trials that callgrind can count; ``slot_bytes``: the bytes of one ring
    slot when the ring moves one pointer per item (the core-to-core references of the SPSC
    figure), else 0; ``kernel_paths``: the kernel tree's paths whose code it measures (a bisect
    of a tree's history tests only the commits that touch them); ``sources``: the C sources
    under csrc/ of its binary (``{variant}`` standing for the arm), built when they exist
    (the ring experiment's are built once per ring variant, with the variant's header)."""
    name: str
    implementation: str
    param_columns: tuple[str, ...]
    extra_columns: tuple[str, ...] = ()
    bounds: tuple[Bound, ...] = ()
    variants: tuple[str, ...] = ()
    binary: str = ""
    own_code: str = "{}"
    arms_text: str = ""
    callgrind: bool = False
    slot_bytes: int = 0
    kernel_paths: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def bound(self, column: str) -> Bound:
        """The bounds of integer parameter column ``column``; ParamError naming those it has."""
        for b in self.bounds:
            if b.column == column:
                return b
        raise ParamError(f"experiment {self.name!r} has no integer parameter column {column!r}; allowed: "
                         + (", ".join(b.column for b in self.bounds) or "none"), input=column)

    def binary_of(self, variant: str) -> str:
        """The binary of arm ``variant`` (its layouts' builds add ``@...``)."""
        return self.binary.format(variant=variant)

    def binaries(self) -> tuple[str, ...]:
        """The binaries of its built-in arms ("" builds none)."""
        if not self.binary:
            return ()
        if "{variant}" not in self.binary:
            return (self.binary,)
        return tuple(self.binary_of(v) for v in self.variants)

    def arm_of_binary(self, binary: str) -> str | None:
        """The arm whose binary ``binary`` is (a layout's ``@...`` suffix ignored), or None."""
        prefix, sep, suffix = self.binary.partition("{variant}")
        name = binary.split("@")[0]
        if not sep or not name.startswith(prefix) or not name.endswith(suffix) or len(name) <= len(prefix + suffix):
            return None
        return name[len(prefix):len(name) - len(suffix)]


@dataclass(frozen=True)
class Notebook:
    """A notebook ``ringlab reproduce`` executes: its file stem under notebooks/, the results
    folder it writes (results/<folder>/<host>/<run-id>/) and the experiments it runs."""
    stem: str
    folder: str
    experiments: tuple[str, ...] = ()


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment(
        "ptr_ring", "ringlab.experiments.ptr_ring:PtrRing",
        param_columns=("mode", "size", "count", "batch", "lock"),
        bounds=(Bound("mode", 0, 2), Bound("size", 2, 10_000_000), Bound("count", 1, MAX_OPS),
                Bound("batch", 0, 1_000_000)),
        variants=VARIANT_NAMES, binary="ptr_ring_test-{variant}", own_code="csrc/rings/ptr_ring_{}.h",
        callgrind=True, slot_bytes=8, kernel_paths=("include/linux/ptr_ring.h",),
        sources=("harness/ptr_ring_bench.c", "harness/ptr_ring_main.c", "harness/turns.c", "harness/counters.c")),
    Experiment(
        "page_frag", "ringlab.experiments.page_frag:PageFrag",
        param_columns=("align", "alloc_len", "nr_test"),
        extra_columns=("elapsed_us", "ring_full", "ring_empty", "page_refills", "page_refills_order0",
                       "page_reuses", "page_abandons"),
        bounds=(Bound("align", 0, 1), Bound("alloc_len", 1, 4096), Bound("nr_test", 1, MAX_OPS)),
        variants=("before", "after"), binary="page_frag_test-{variant}", own_code="csrc/page_frag ({})",
        sources=("page_frag/page_frag_test.c", "page_frag/page_frag_{variant}.c", "page_frag/page_pool.c",
                 "harness/counters.c")),
    Experiment(
        "perf_rb", "ringlab.experiments.perf_rb:PerfRb",
        param_columns=("placement", "count"),
        extra_columns=("elapsed_us", "perf_wakeups", "perf_captured_mb", "perf_samples", "perf_lost", "perf_cpu"),
        bounds=(Bound("count", 1, MAX_OPS),),
        variants=("base", "forward", "backward"), binary="syscall_loop",
        sources=("workloads/syscall_loop.c", "harness/counters.c"),
        arms_text=("close(-1) loop alone (base) and under perf record on the running kernel "
                   "(forward; backward: --overwrite)")),
    Experiment(
        "ringtest", "ringlab.experiments.ringtest:Ringtest",
        param_columns=("ring", "ring_size", "run_cycles", "batch", "outstanding", "param", "sleep", "relax"),
        extra_columns=("cpu_user_s", "cpu_sys_s", "cpu_util", "source_sha256"),
        bounds=(Bound("ring_size", 1, 1 << 30), Bound("run_cycles", 1, _RINGTEST_INT),
                Bound("batch", 1, _RINGTEST_INT), Bound("outstanding", 0, _RINGTEST_INT),
                Bound("param", 0, _RINGTEST_INT)),
        own_code="tools/virtio/ringtest ({})", kernel_paths=("tools/virtio/ringtest/", "include/linux/ptr_ring.h")),
    Experiment(
        "kmod", "ringlab.experiments.kmod:Kmod",
        param_columns=("args",),
        extra_columns=("elapsed_us", "kmod_label", "insmod_exit", "insmod_wall_s")),
)
#: the experiment names, in declaration order
EXPERIMENT_NAMES: tuple[str, ...] = tuple(e.name for e in EXPERIMENTS)
#: the experiment whose arms are the built-in ring variants (the calibration, drift, bisect and
#: patch studies run it)
RING_EXPERIMENT = EXPERIMENTS[0].name

#: seed 000: moving r->queue[] clearing after the consumer_head update (notebook 10)
SEED000 = Study("seed 000", RING_EXPERIMENT, "batch", "reorder", "10", PublishedCounts(
    "perf stat", (("batch", 17424187640 / 1e8), ("reorder", 16124164124 / 1e8)),
    (("batch", "17.42e9 / 1e8"), ("reorder", "16.12e9 / 1e8")), mode="0", loop="rl_measured_simple, no locks"))
#: seed 003: batch ring zeroing (notebook 11)
SEED003 = Study("seed 003", RING_EXPERIMENT, "prebatch", "batch", "11")
STUDIES: tuple[Study, ...] = (SEED000, SEED003)

NOTEBOOKS: tuple[Notebook, ...] = (
    Notebook("00-environment", "environment"),
    Notebook("10-ptr-ring-reorder", "ptr-ring-reorder", ("ptr_ring",)),
    Notebook("11-ptr-ring-batch-zeroing", "ptr-ring-batch-zeroing", ("ptr_ring",)),
    Notebook("12-patch-ab", "patch-ab", ("ptr_ring",)),
    Notebook("13-bisect", "bisect", ("ptr_ring",)),
    Notebook("14-verdict-check", "verdict-check", ("ptr_ring",)),
    Notebook("20-page-frag", "page-frag", ("page_frag",)),
    Notebook("21-kernel-tests", "kernel-tests", ("ringtest", "ptr_ring", "kmod")),
    Notebook("30-perf-ring-buffer", "perf-ring-buffer", ("perf_rb",)),
    # 90 merges what the others wrote: it runs last
    Notebook("90-compare-runs", "compare-runs"),
    Notebook("95-explore", "explore"),
)


def experiment(name: str) -> Experiment:
    """The experiment ``name``; ParamError naming the experiments otherwise."""
    return by_name(EXPERIMENTS, name, "experiment", allowed=sorted(EXPERIMENT_NAMES), shown=f"'{name}'")


def notebook(stem: str) -> Notebook:
    """The notebook ``stem``; ParamError naming the notebooks otherwise."""
    return by_name(NOTEBOOKS, stem, "notebook", key=lambda n: n.stem)


def all_extra_columns() -> tuple[str, ...]:
    """Every experiment's extra columns, each once, in declaration order."""
    return tuple(dict.fromkeys(c for e in EXPERIMENTS for c in e.extra_columns))
