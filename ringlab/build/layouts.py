"""Code layouts: K seeded builds of one arm, so that a verdict is about the code, not one binary.

A compiled binary is one sample from the space of program layouts (Curtsinger & Berger 2013):
the same source with its functions a few bytes further on can run several percent faster or
slower.  An A/B run with ``layouts`` K > 1 therefore builds every arm K times, each build
(``Layout``) with

* ``pad``: bytes of code that never runs, emitted ahead of the measured functions
  (``-DRINGLAB_LAYOUT_PAD=N``, csrc/harness/ptr_ring_bench.c), drawn uniformly from 0..4095,
  any size, not only multiples of 64, so the measured code lands at every cache-line and
  page offset;
* ``align``: the function alignment ``-falign-functions=N``, N drawn from :data:`ALIGNS`;
* ``loops``: loop and jump heads left unaligned (``-falign-loops=1 -falign-jumps=1``), so that
  the random pad and function alignment move every loop to a random offset within its cache
  line and page too, 64-byte-aligned among them.  gcc's default alignment (loops padded to 16
  bytes) would keep loops on a few offsets that no layout leaves, and drawing the alignment per
  layout would not do: the padding before a loop head is NOPs that run each time the loop is
  entered, so the executed instructions would differ between layouts.

None of these changes one executed instruction between the layouts of an arm, so callgrind's
instruction counts of an arm are the same in all its layouts (tests/test_layouts_build.py
checks it with real gcc and valgrind).  They may differ from the plain build's (``layouts`` 1),
which keeps gcc's loop padding.  Where the user's cflags pin ``-falign-functions``,
``-falign-loops`` or ``-falign-jumps``, that choice stands and the layouts leave it alone.

What is not randomized, and why:

* function order: GNU ld cannot reorder the functions of an object without a linker script,
  so the order stays the compiler's.

Layout copies: an arm's K layouts need not be K binaries.  :func:`copy_groups` puts up to
:data:`COPIES_PER_BINARY` of them into one binary (:class:`LayoutCopies`,
``ptr_ring_test-batch@c0-31-<digest>``): the measured object (csrc/harness/ptr_ring_bench.c) is
compiled once per function alignment the group uses, its global symbols made local, and linked
once per layout, each instance after a pad object of that layout's ``pad`` bytes in ``.text``, so
copy k's measured functions sit at their own offset and alignment (``nm`` lists one
``rl_measured_simple`` per copy, at different addresses).  A trial picks its layout's copy with
``--copy J``.  The rest of the binary (main, counters) is shared by the copies and does not move
between them; it runs outside the timed region.  Compiles per arm: one per distinct alignment
(at most ``len(ALIGNS)``) instead of one per layout.

With ``common_layouts`` (common random layouts) every arm's layout k is drawn from (run seed, k)
alone, so both arms of layout pair k get the same pad and alignments and a pair's difference
carries one arm's layout effect less (only as much as the arms' code-size difference moves it).

Each layout is derived from (run seed, arm name, k) with sha256 (never Python's ``hash()``,
which changes between processes), so the same seed gives the same layouts, hence the same
binaries.  With ``layouts`` 1 the one layout is :data:`PLAIN`: today's build, no pad, no flag.
A layout's binary is named by what it holds (``ptr_ring_test-batch@p1234-a16-l1``), so the
builds of two seeds never overwrite each other, and the same build is reused across runs.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from dataclasses import dataclass

#: function alignments a layout draws from (bytes; ``-falign-functions=N``)
ALIGNS = (1, 2, 4, 8, 16, 32, 64)
#: pads are drawn from 0..PAD_RANGE-1 bytes
PAD_RANGE = 4096
#: ``loops`` of a drawn layout: loop and jump heads unaligned (``-falign-loops=1 -falign-jumps=1``)
UNALIGNED = 1


def _loop_flags(loops: int) -> list[str]:
    """``-falign-loops/-jumps`` of a layout's ``loops`` (none for 0, the compiler's default)."""
    return [f"-falign-loops={loops}", f"-falign-jumps={loops}"] if loops else []


#: the loop flags of every drawn layout (what a count of an arm's layouts must be built with)
UNALIGNED_LOOP_FLAGS = tuple(_loop_flags(UNALIGNED))
#: the most layouts per arm (``-p layouts``)
MAX_LAYOUTS = 256
#: what separates a binary's name from its layout (a variant name never holds it)
SEPARATOR = "@"


@dataclass(frozen=True)
class Layout:
    """One build of an arm: layout index ``index``, ``pad`` bytes of unused code ahead of the
    measured functions, function alignment ``align`` (0: the compiler's default), loop and jump
    alignment ``loops`` (1: none; 0: the compiler's default) and the seed it was drawn from (0
    for :data:`PLAIN`)."""
    index: int
    pad: int
    align: int
    seed: int
    loops: int = 0

    @property
    def plain(self) -> bool:
        return self.pad == 0 and self.align == 0 and self.loops == 0

    def flags(self) -> list[str]:
        """Compiler options of this layout, added after the user's cflags."""
        if self.plain:
            return []
        return ([f"-DRINGLAB_LAYOUT_PAD={self.pad}"] + ([f"-falign-functions={self.align}"] if self.align else [])
                + _loop_flags(self.loops))

    def suffix(self) -> str:
        """``@p<pad>-a<align>`` (``-l<loops>`` added when loops are unaligned); empty for the plain build."""
        if self.plain:
            return ""
        return f"{SEPARATOR}p{self.pad}-a{self.align}" + (f"-l{self.loops}" if self.loops else "")

    def binary_name(self, base: str) -> str:
        """``ptr_ring_test-batch`` -> ``ptr_ring_test-batch@p1234-a16-l1``."""
        return base + self.suffix()

    def record(self) -> dict:
        """What the build record (``NAME.source.json`` ``layout``) says of this layout."""
        return {"index": self.index, "pad": self.pad, "align": self.align, "loops": self.loops,
                "seed": self.seed, "flags": self.flags()}


#: The one build of ``layouts`` 1: no pad, no extra flag.
PLAIN = Layout(index=0, pad=0, align=0, seed=0)


def layout_seed(seed: int, arm: str, k: int) -> int:
    """A 64-bit seed for layout ``k`` of ``arm`` in a run with ``seed`` (sha256, stable)."""
    text = f"ringlab-layout\0{int(seed)}\0{arm}\0{int(k)}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def layout_spec(seed: int, arm: str, k: int) -> Layout:
    """Layout ``k`` of ``arm`` (a variant name) in a run with ``seed``: the same arguments
    always give the same layout; each arm's layouts are drawn independently."""
    s = layout_seed(seed, arm, k)
    rng = random.Random(s)
    return Layout(index=int(k), pad=rng.randrange(PAD_RANGE), align=rng.choice(ALIGNS), seed=s, loops=UNALIGNED)


def _pins(cflags, *options: str) -> bool:
    words = cflags.split() if isinstance(cflags, str) else list(cflags or [])
    return any(str(w).startswith(o) for w in words for o in options)


def pins_function_alignment(cflags) -> bool:
    """True when the user's cflags set ``-falign-functions``: their choice then stands, and the
    layouts vary only the pad (the compiler takes the last of two such options)."""
    return _pins(cflags, "-falign-functions")


def pins_loop_alignment(cflags) -> bool:
    """True when the user's cflags set ``-falign-loops`` or ``-falign-jumps``: their choice then
    stands, and the layouts keep it."""
    return _pins(cflags, "-falign-loops", "-falign-jumps")


#: what common random layouts draw from in place of an arm's name (a name never holds NUL): with
#: ``common_layouts`` every arm's layout k has the same pad and alignments
COMMON_ARM = "\0common"


def arm_layouts(seed: int, arm: str, count: int, cflags=None, common: bool = False) -> list[Layout]:
    """The ``count`` layouts of one arm: ``[PLAIN]`` for 1, else ``layout_spec(seed, arm, k)``
    (``layout_spec(seed, COMMON_ARM, k)`` for every arm when ``common``: common random layouts),
    without a function (or loop) alignment of their own when ``cflags`` pin one."""
    count = int(count)
    if not 1 <= count <= MAX_LAYOUTS:
        raise ValueError(f"layouts {count}: allowed: 1..{MAX_LAYOUTS}")
    if count == 1:
        return [PLAIN]
    words = tuple(cflags.split()) if isinstance(cflags, str) else tuple(str(w) for w in cflags or ())
    return list(_drawn(int(seed), COMMON_ARM if common else str(arm), count, words))


@functools.lru_cache(maxsize=1024)
def _drawn(seed: int, arm: str, count: int, cflags: tuple[str, ...]) -> tuple[Layout, ...]:
    """arm_layouts' draw, computed once per run and arm (a trial asks for its binary's name)."""
    out = [layout_spec(seed, arm, k) for k in range(count)]
    if pins_function_alignment(cflags):
        out = [dataclasses.replace(lay, align=0) for lay in out]
    if pins_loop_alignment(cflags):
        out = [dataclasses.replace(lay, loops=0) for lay in out]
    return tuple(out)


#: the most layouts one binary holds as copies (a bound on its compile and link time and size)
COPIES_PER_BINARY = 32


@dataclass(frozen=True)
class LayoutCopies:
    """Several layouts of one arm in one binary (the module's "layout copies"); copy ``j`` is
    ``layouts[j]`` and runs with ``--copy j``."""
    layouts: tuple[Layout, ...]

    @property
    def plain(self) -> bool:
        return False

    @property
    def index(self) -> int:
        return self.layouts[0].index

    def suffix(self) -> str:
        """``@c<first>-<last>-<digest>``: the layout indices it holds and a digest of their pads,
        alignments and loop alignments (two seeds never share a name)."""
        text = ";".join(f"{l.index},{l.pad},{l.align},{l.loops}" for l in self.layouts)
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        return f"{SEPARATOR}c{self.layouts[0].index}-{self.layouts[-1].index}-{digest}"

    def binary_name(self, base: str) -> str:
        return base + self.suffix()

    def position(self, index: int) -> int:
        """The copy (``--copy``) that holds layout ``index``."""
        for j, lay in enumerate(self.layouts):
            if lay.index == index:
                return j
        raise ValueError(f"layout {index} is not in {self.suffix()}")

    def record(self) -> dict:
        """The build record's ``layout``: every copy's layout, in ``--copy`` order."""
        return {"copies": [dict(lay.record(), copy=j) for j, lay in enumerate(self.layouts)]}


def copy_groups(layouts: list[Layout], size: int = COPIES_PER_BINARY) -> list[LayoutCopies]:
    """``layouts`` in binaries of at most ``size`` copies each, by index: layout k goes to block
    k // size (40 layouts at 16: 16 + 16 + 8).  A run that adds layouts (a stage of the staged
    design) keeps every full block it built and rebuilds only its last, partial one.  A binary
    compiles the measured object once per function alignment its copies use, whatever their number,
    so fewer binaries mean fewer compiles; the bound keeps one binary's link and size small (about
    17 kB of code a copy)."""
    size = max(1, int(size))
    out: list[LayoutCopies] = []
    for lay in sorted(layouts, key=lambda x: x.index):
        if out and out[-1].layouts[0].index // size == lay.index // size:
            out[-1] = LayoutCopies(out[-1].layouts + (lay,))
        else:
            out.append(LayoutCopies((lay,)))
    return out


def base_name(name: str) -> str:
    """A binary's name without its layout suffix (``ptr_ring_test-batch@p12-a4`` -> ``ptr_ring_test-batch``)."""
    return name.split(SEPARATOR, 1)[0]


def per_trial_seed(seed: int, order: int, what: str) -> int:
    """A 64-bit seed for one trial's data layout (``what``: ring_offset, env_pad), from the run's
    seed and the trial's place in the plan, so a resumed run draws the same values."""
    text = f"ringlab-trial\0{int(seed)}\0{int(order)}\0{what}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


#: ``--ring-offset`` of the ptr_ring harness: a multiple of 64 in [0, RING_OFFSET_MAX]
RING_OFFSET_MAX = 4032
#: RINGLAB_ENV_PAD holds 0..ENV_PAD_RANGE-1 characters
ENV_PAD_RANGE = 4096


def ring_offset(seed: int, order: int) -> int:
    """The trial's ring offset: a multiple of 64 in [0, 4032], uniform."""
    return 64 * (per_trial_seed(seed, order, "ring_offset") % (RING_OFFSET_MAX // 64 + 1))


def env_pad(seed: int, order: int) -> int:
    """The trial's environment pad length: 0..4095 characters, uniform (moves the initial
    stack; Mytkowicz et al. 2009)."""
    return per_trial_seed(seed, order, "env_pad") % ENV_PAD_RANGE
