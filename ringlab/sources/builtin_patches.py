"""Built-in test patches: generated at run time against a user's ``ptr_ring.h``.

An A/B of a kernel patch needs a patch.  To show the workflow end to end without
committing kernel code, ringlab writes its own patch against whatever base header
the user names (the Debian headers package by default): it reads the base,
inserts a few lines of our own next to a recognisable anchor, and emits a
``git format-patch``-style mail holding a unified diff of
``include/linux/ptr_ring.h``.  Only the inserted lines are ours; the context
lines of the diff come from the user's header at run time and are never stored
in this repository.

Built-ins (``builtin:NAME`` or ``builtin:NAME:N``), each with the change in executed
instructions it is expected to make, stated before measuring (:func:`expected_extra`):

``flush-delay[:N]``
    After each batch flush in ``__ptr_ring_discard_one`` (the statement that
    moves ``consumer_tail`` up to the new head, right after the NULLing loop),
    spin ``N`` iterations (default 64) of an empty asm statement with a memory
    clobber, i.e. the kernel's ``barrier()``.  The ring's behaviour is
    unchanged; every flush costs a fixed extra loop.  With the default batch of
    16 slots and a ring of 1000, a flush happens 63 times per 1000 consumed
    entries, so the expected cost is at least ``N * 2 * 63 / 1000`` extra
    instructions per operation (two per iteration at -O2; ``expected_extra_per_op``),
    plus a few per flush for the loop set-up.  The anchor must be found exactly
    once inside ``__ptr_ring_discard_one``; otherwise (a v4.8-v4.11 header has no
    ``consumer_tail``, a rewritten function may have several) ``PatchError`` says
    which anchor was looked for, in which file.

``flush-spin[:N]``
    At the same place, ``N`` iterations (default 8) of a loop over a ``volatile`` counter,
    ``for (volatile int i = 0; i < N; i++);``: the compiler must load and store the counter
    in every iteration, so it can neither remove nor unroll the loop, and every N (even 1)
    adds instructions.  At -O2 on x86-64 an iteration is about :data:`INSNS_PER_VSPIN`
    instructions and the set-up about :data:`INSNS_VSPIN_SETUP` more per flush.  This is the
    form for a small, known cost: gcc unrolls flush-delay's loop of empty asm statements
    away for small N (at -O2, gcc 12 counts fewer instructions with flush-delay:4 than without).

``pad[:N]``
    An unused function of ``N`` bytes of code (default 48: ``asm volatile(".skip N")``
    in a static function marked ``used``, ``noinline`` and ``cold``, never called),
    inserted just before ``struct ptr_ring {``.  Cold code goes to ``.text.unlikely``,
    which the linker places ahead of ``.text``, so the measured functions (and the ring
    code inlined into them) land about ``N`` bytes further on while executing exactly
    the same instructions: a layout-only change, expected extra instructions 0.  A
    verdict of ``faster`` or ``slower`` for it is about where the code landed, not
    about the code.
"""
from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ringlab.errors import PatchError

PREFIX = "builtin:"
HEADER_IN_TREE = "include/linux/ptr_ring.h"
DEFAULT_SPINS = 64
MAX_SPINS = 100_000
DEFAULT_PAD = 48
MAX_PAD = 65_536
#: instructions of one iteration of the inserted loop at -O2 on x86-64 (gcc counts down:
#: sub, jne); only used for the *expected* figure stated before measuring.  Loop set-up
#: and the reloads forced by the memory clobber add a few more per flush.
INSNS_PER_SPIN = 2
DEFAULT_VSPINS = 8
#: flush-spin: instructions of one iteration of the volatile-counter loop at -O2 on x86-64 (load,
#: add, store, load, compare, branch) and of its set-up per flush (store 0, load, compare,
#: branch); only used for the *expected* figure stated before measuring
INSNS_PER_VSPIN = 6
INSNS_VSPIN_SETUP = 4

# A fixed author and date make the generated mail byte-identical for the same base.
_FROM = "ringlab <ringlab@ringlab.invalid>"
_DATE = "Thu, 1 Jan 1970 00:00:00 +0000"

_FUNC_RE = re.compile(r"\b__ptr_ring_discard_one\s*\(\s*struct\s+ptr_ring\s*\*\s*\w+\s*\)\s*\{")
# "r->consumer_tail = consumer_head;" - an assignment from a variable (not "= 0").
_ANCHOR_RE = re.compile(r"^([ \t]*)(\w+)->consumer_tail\s*=\s*([A-Za-z_]\w*)\s*;[ \t]*$")
ANCHOR_DESCRIPTION = ("the statement 'R->consumer_tail = VARIABLE;' that ends the batch flush "
                      "inside __ptr_ring_discard_one()")
_STRUCT_RE = re.compile(r"^struct\s+ptr_ring\s*\{")
PAD_ANCHOR_DESCRIPTION = "the line 'struct ptr_ring {' that opens the ring's definition"


@dataclass(frozen=True)
class BuiltinPatch:
    """A generated patch: the mail text and what it did."""
    spec: str          # normalised, e.g. "builtin:flush-delay:64"
    name: str          # "flush-delay", "flush-spin" or "pad"
    spins: int         # N: loop iterations (flush-delay, flush-spin) or bytes of unused code (pad)
    subject: str
    message_id: str
    base_header: Path
    base_sha256: str
    anchor_line: int   # 1-based line of the anchor in the base header
    text: str          # the mail (headers + body + unified diff)

    @property
    def diff(self) -> str:
        return self.text[self.text.index("diff --git "):]

    def expected_extra(self, size: int = 1000, batch: int = 16) -> float:
        """Expected extra instructions per operation in mode 0 (0 for a layout-only patch)."""
        return expected_extra(self.spec, size, batch)


BUILTINS = {
    "flush-delay": "spin N iterations (default 64) of barrier() after every batch flush of the consumer",
    "flush-spin": f"N iterations (default {DEFAULT_VSPINS}) of a volatile-counter loop after every batch flush "
                  "(a small cost the compiler cannot remove)",
    "pad": f"N bytes (default {DEFAULT_PAD}) of never-called code ahead of the ring: a layout-only change",
}
#: (default N, largest N) per built-in
_LIMITS = {"flush-delay": (DEFAULT_SPINS, MAX_SPINS), "flush-spin": (DEFAULT_VSPINS, MAX_SPINS), "pad": (DEFAULT_PAD, MAX_PAD)}


def is_builtin(spec: str) -> bool:
    return isinstance(spec, str) and spec.strip().startswith(PREFIX)


def parse_builtin(spec: str) -> tuple[str, int]:
    """``"builtin:flush-delay:32"`` -> ``("flush-delay", 32)``; errors name the allowed forms."""
    allowed = ", ".join(f"builtin:{n}[:N] ({h})" for n, h in BUILTINS.items())
    if not is_builtin(spec):
        raise PatchError(f"patch: {spec!r} is not a built-in patch; allowed: {allowed}")
    rest = spec.strip()[len(PREFIX):]
    name, _, arg = rest.partition(":")
    if name not in BUILTINS:
        raise PatchError(f"patch: unknown built-in {name!r}; allowed: {allowed}")
    n, top = _LIMITS[name]
    if arg:
        if not arg.isdigit() or not 1 <= int(arg) <= top:
            raise PatchError(f"patch: {spec!r}: N must be an integer in [1, {top}]; "
                             f"allowed: builtin:{name} or builtin:{name}:N")
        n = int(arg)
    return name, n


def _blank_comments(text: str) -> str:
    """``text`` with comments and string literals replaced by spaces (same offsets, same lines)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"", blank, text, flags=re.S)


def _function_span(code: str, m: re.Match, header, name: str = "flush-delay") -> tuple[int, int]:
    """First and last line index of the function whose opening brace ends ``m``."""
    depth, end = 0, None
    for i in range(m.end() - 1, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end is None:
        raise PatchError(f"patch builtin:{name}: {header}: __ptr_ring_discard_one has no closing brace")
    return code.count("\n", 0, m.end()), code.count("\n", 0, end)


def find_anchor(text: str, header: Path | str = "ptr_ring.h", name: str = "flush-delay") -> tuple[int, str, str]:
    """(0-based line index, indentation, ring pointer name) of the flush anchor, or PatchError."""
    code = _blank_comments(text)
    m = _FUNC_RE.search(code)
    if not m:
        raise PatchError(f"patch builtin:{name}: {header}: no definition of "
                         "__ptr_ring_discard_one(struct ptr_ring *) found; the anchor is "
                         f"{ANCHOR_DESCRIPTION}")
    first, last = _function_span(code, m, header, name)
    code_lines = code.splitlines()
    hits = [(i, mm) for i in range(first, last + 1)
            if (mm := _ANCHOR_RE.match(code_lines[i])) and mm.group(3) != "0"]
    if len(hits) != 1:
        why = ("not found" if not hits else
               f"found {len(hits)} times (lines {', '.join(str(i + 1) for i, _ in hits)}); expected once")
        gen = ""
        if not hits and not re.search(r"\bconsumer_tail\b", code):
            gen = " (this header has no consumer_tail: a v4.8-v4.11 header, before batched zeroing)"
        raise PatchError(f"patch builtin:{name}: {header}: anchor {why}{gen}; the anchor is "
                         f"{ANCHOR_DESCRIPTION}")
    i, mm = hits[0]
    return i, mm.group(1), mm.group(2)


def find_pad_anchor(text: str, header: Path | str = "ptr_ring.h") -> int:
    """0-based line index of ``struct ptr_ring {`` (outside comments), or PatchError."""
    hits = [i for i, ln in enumerate(_blank_comments(text).splitlines()) if _STRUCT_RE.match(ln)]
    if len(hits) != 1:
        why = "not found" if not hits else f"found {len(hits)} times; expected once"
        raise PatchError(f"patch builtin:pad: {header}: anchor {why}; the anchor is {PAD_ANCHOR_DESCRIPTION}")
    return hits[0]


#: the flush built-ins' loops: name -> (comment, counter declaration, loop body)
_LOOPS = {
    "flush-delay": ("a fixed delay on every batch flush", "int ringlab_spin;", '__asm__ __volatile__("" ::: "memory");'),
    "flush-spin": ("a small fixed cost on every batch flush", "volatile int ringlab_spin;", ";"),
}


def _loop_lines(name: str, indent: str, spins: int) -> list[str]:
    """The block that built-in ``name`` inserts after the flush: a loop of ``spins`` iterations."""
    comment, decl, body = _LOOPS[name]
    step = "\t" if "\t" in indent or not indent else "    "
    return [f"{indent}/* ringlab builtin:{name}: {comment} */",
            f"{indent}{{",
            f"{indent}{step}{decl}",
            "",
            f"{indent}{step}for (ringlab_spin = 0; ringlab_spin < {spins}; ringlab_spin++)",
            f"{indent}{step}{step}{body}",
            f"{indent}}}"]


def _pad_lines(nbytes: int) -> list[str]:
    return [f"/* ringlab builtin:pad: {nbytes} bytes of code that never runs, ahead of the ring code */",
            "static void __attribute__((used, noinline, cold)) ringlab_builtin_pad(void)",
            "{",
            f"\t__asm__ __volatile__(\".skip {nbytes}\");",
            "}",
            ""]


def effective_batch(size: int, batch: int = 0) -> int:
    """The batch the ptr_ring uses: the requested one, else 16 (2 lines of 8-byte
    pointers), or 1 when that is more than half the ring."""
    if batch:
        return batch
    b = 2 * 64 // 8
    return 1 if b > size // 2 else b


def expected_extra_per_op(spins: int = DEFAULT_SPINS, size: int = 1000, batch: int = 16,
                          name: str = "flush-delay") -> float:
    """Expected extra instructions per operation of ``flush-delay:spins`` (or ``flush-spin``)
    in mode 0: flushes per op x loop cost.

    A flush happens every ``batch`` consumes and at the end of the array (ring sizes
    that are not a multiple of ``batch`` get one short batch per lap)."""
    flushes_per_lap = -(-size // batch)
    per_flush = (INSNS_VSPIN_SETUP + spins * INSNS_PER_VSPIN if name == "flush-spin"
                 else spins * INSNS_PER_SPIN)
    return per_flush * flushes_per_lap / size


def expected_extra(spec: str, size: int = 1000, batch: int = 16) -> float:
    """Expected extra instructions per operation of the built-in ``spec`` in mode 0, stated
    before measuring: ``expected_extra_per_op`` for flush-delay, 0 for pad (layout only)."""
    name, n = parse_builtin(spec)
    return 0.0 if name == "pad" else expected_extra_per_op(n, size, batch, name)


def spins_for(extra_per_op: float, size: int = 1000, batch: int = 16, name: str = "flush-delay") -> int:
    """The flush-delay (or flush-spin) N whose expected extra instructions per operation is
    closest to ``extra_per_op`` (at least 1)."""
    fixed = expected_extra_per_op(0, size, batch, name)
    return nearest_spins(extra_per_op, fixed, expected_extra_per_op(1, size, batch, name) - fixed)


def nearest_spins(extra_per_op: float, fixed: float, per_spin: float) -> int:
    """The N (1..MAX_SPINS) whose ``fixed + N * per_spin`` is closest to ``extra_per_op``."""
    return max(1, min(MAX_SPINS, round((extra_per_op - fixed) / per_spin)))


def _description(name: str, n: int, idx: int, ring: str) -> tuple[str, list[str]]:
    """(subject, body lines) of the mail of built-in ``name`` with argument ``n``."""
    if name == "pad":
        return (f"[PATCH] ptr_ring: {n} bytes of unused code ahead of the ring",
                [f"Before 'struct ptr_ring {{' (line {idx + 1}), add a static function",
                 f"of {n} bytes of code ('.skip {n}') that is never called.  The",
                 "executed instructions are exactly the same; only the addresses of",
                 "the code after it change.  Expected: +0 instructions per operation",
                 "(identical callgrind counts), and no difference in time other than",
                 "what the new code layout makes."])
    if name == "flush-spin":
        return (f"[PATCH] ptr_ring: count a volatile to {n} after each batch flush",
                [f"After the batch flush in __ptr_ring_discard_one() (after line {idx + 1},",
                 f"'{ring}->consumer_tail = ...;'), run {n} iterations of a loop over a",
                 "volatile counter, which the compiler can neither remove nor unroll.",
                 "Nothing else changes.  Expected: about",
                 f"{INSNS_VSPIN_SETUP} + {n} x {INSNS_PER_VSPIN} more instructions per flush "
                 f"(+{expected_extra_per_op(n, name=name):.2f}/op for a ring of 1000",
                 "with the default batch of 16), and a slightly slower ring."])
    return (f"[PATCH] ptr_ring: spin {n} iterations after each batch flush",
            [f"After the batch flush in __ptr_ring_discard_one() (after line {idx + 1},",
             f"'{ring}->consumer_tail = ...;'), spin {n} iterations of an empty asm",
             "statement with a memory clobber (the kernel's barrier()).  Nothing",
             "else changes.  Expected: more instructions per operation, at least",
             f"{n} x {INSNS_PER_SPIN} per flush (+{expected_extra_per_op(n):.1f}/op for a ring of 1000 with the",
             "default batch of 16; loop set-up adds a little), and a slower ring",
             "in every mode."])


def builtin_patch(spec: str, base_header) -> BuiltinPatch:
    """Generate the built-in patch ``spec`` against ``base_header`` (a ptr_ring.h file)."""
    name, n = parse_builtin(spec)
    base_header = Path(base_header)
    try:
        raw = base_header.read_bytes()
    except OSError as e:
        raise PatchError(f"patch {spec}: cannot read base header {base_header}: {e}") from None
    text = raw.decode("utf-8", errors="surrogateescape")
    lines = text.splitlines(keepends=True)
    if name == "pad":
        idx, ring = find_pad_anchor(text, base_header), ""
        eol = "\r\n" if lines[idx].endswith("\r\n") else "\n"
        ins = _pad_lines(n)
        new = lines[:idx] + [ln + eol for ln in ins] + lines[idx:]
    else:
        idx, indent, ring = find_anchor(text, base_header, name)
        eol = "\r\n" if lines[idx].endswith("\r\n") else "\n"
        ins = _loop_lines(name, indent, n)
        new = lines[:idx + 1] + [ln + eol for ln in ins] + lines[idx + 1:]
    diff = "".join(difflib.unified_diff(lines, new, f"a/{HEADER_IN_TREE}", f"b/{HEADER_IN_TREE}", n=3))
    norm = f"{PREFIX}{name}:{n}"
    sha = hashlib.sha256(raw).hexdigest()
    subject, what = _description(name, n, idx, ring)
    msgid = f"<{name}-{n}.{sha[:12]}@ringlab.invalid>"
    added = len(ins)
    body = [
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001",
        f"From: {_FROM}",
        f"Date: {_DATE}",
        f"Subject: {subject}",
        f"Message-ID: {msgid}",
        "",
        f"A ringlab test patch ({norm}), generated at run time",
        f"against {base_header}",
        f"(sha256 {sha}).",
        "Not for merging: it only makes the effect of a patch predictable.",
        "",
        *what,
        "---",
        f" {HEADER_IN_TREE} | {added} {'+' * min(added, 60)}",
        f" 1 file changed, {added} insertions(+)",
        "",
        f"diff --git a/{HEADER_IN_TREE} b/{HEADER_IN_TREE}",
    ]
    text_out = "\n".join(body) + "\n" + diff + "-- \nringlab\n"
    return BuiltinPatch(spec=norm, name=name, spins=n, subject=subject, message_id=msgid,
                        base_header=base_header, base_sha256=sha, anchor_line=idx + 1, text=text_out)


def write_builtin(spec: str, base_header, out_path) -> BuiltinPatch:
    """Generate ``spec`` against ``base_header`` and write the mail to ``out_path``."""
    p = builtin_patch(spec, base_header)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(p.text, encoding="utf-8", errors="surrogateescape")
    return p


__all__ = ["PatchError", "BuiltinPatch", "BUILTINS", "DEFAULT_SPINS", "DEFAULT_PAD", "HEADER_IN_TREE",
           "is_builtin", "parse_builtin", "find_anchor", "find_pad_anchor", "builtin_patch", "write_builtin",
           "expected_extra_per_op", "expected_extra", "effective_batch", "spins_for", "nearest_spins"]
