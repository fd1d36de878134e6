"""The built-in ring variants of the ptr_ring experiment: each one's C header, whether ``-b``
sets its consumer batch, and the cache-line layout of its ring struct.

A variant is one entry of :data:`VARIANTS`; its binary (``ptr_ring_test-<name>``, the experiment's
binary pattern), the ``variants`` parameter's default and allowed values, the names a
``--kernel-header NAME`` may not take and the ``perf c2c`` field labels all derive from it.

The layouts (:data:`LAYOUTS`) are the byte ranges of ringlab's ``struct ptr_ring`` (LP64,
``pthread_spinlock_t`` = 4 bytes) from the struct's address: three 64-byte aligned groups as in
the kernel's ``include/linux/ptr_ring.h``; the slot array is a separate allocation (``queue``).
Their names are the two generations of the kernel's header, which a user's header is
classified as (``ringlab.sources.kernel_header.detect_generation``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ringlab.catalog.words import by_name


@dataclass(frozen=True)
class RingLayout:
    """A ring struct's fields as byte ranges [start, end) from its address."""
    name: str
    fields: tuple[tuple[str, int, int], ...]

    def ranges(self) -> dict[str, tuple[int, int]]:
        """{field: (start, end)}."""
        return {f: (s, e) for f, s, e in self.fields}


#: one consumer index (v4.8 - v4.11; csrc/rings/ptr_ring_prebatch.h)
PREBATCH_LAYOUT = RingLayout("prebatch", (
    ("producer", 0, 4), ("producer_lock", 4, 8),
    ("consumer", 64, 68), ("consumer_lock", 68, 72),
    ("size", 128, 132), ("queue", 136, 144)))
#: consumer_head / consumer_tail / batch (v4.12+; csrc/rings/ptr_ring_batch.h, the kernel's layout)
BATCH_LAYOUT = RingLayout("batch", (
    ("producer", 0, 4), ("producer_lock", 4, 8),
    ("consumer_head", 64, 68), ("consumer_tail", 68, 72), ("consumer_lock", 72, 76),
    ("size", 128, 132), ("batch", 132, 136), ("queue", 136, 144)))
LAYOUTS: tuple[RingLayout, ...] = (PREBATCH_LAYOUT, BATCH_LAYOUT)


@dataclass(frozen=True)
class RingVariant:
    """One built-in ring.  ``header``: its C header under csrc/; ``sets_batch``: its header
    defines RINGLAB_HAS_SET_BATCH, so ``-b`` sets its consumer batch (the others run with their
    own batch in a run that sets one); ``layout``: its struct's cache-line layout (None: not a
    ``struct ptr_ring``, no field labels)."""
    name: str
    header: str
    sets_batch: bool = False
    layout: RingLayout | None = None
    description: str = ""


VARIANTS: tuple[RingVariant, ...] = (
    RingVariant("prebatch", "rings/ptr_ring_prebatch.h", layout=PREBATCH_LAYOUT,
                description="the ring before batch zeroing (one consumer index)"),
    RingVariant("batch", "rings/ptr_ring_batch.h", sets_batch=True, layout=BATCH_LAYOUT,
                description="batch zeroing: the consumer clears slots a batch at a time"),
    RingVariant("reorder", "rings/ptr_ring_reorder.h", layout=BATCH_LAYOUT,
                description="batch, with r->queue[] cleared after consumer_head is updated"),
    RingVariant("spsc", "rings/spsc_lamport.h",
                description="a Lamport single-producer single-consumer ring (a reference)"),
)
#: the variant names, in declaration order
VARIANT_NAMES: tuple[str, ...] = tuple(v.name for v in VARIANTS)
#: ringlab's copy of the ring most kernels have (v4.12+): the variant a tool builds when it is
#: given none (the in-process harness, ``ringlab.build.native``) and the one set against a real
#: kernel header (notebook 21)
DEFAULT_VARIANT = "batch"


def variant(name: str) -> RingVariant:
    """The built-in variant ``name``; ParamError naming the built-in variants otherwise."""
    return by_name(VARIANTS, name, "ring variant")


def layout(name: str) -> RingLayout:
    """The ring layout ``name``; ParamError naming the layouts otherwise."""
    return by_name(LAYOUTS, name, "ring layout")
