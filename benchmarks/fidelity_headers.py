"""The kernel-header variants of ``ringlab bench fidelity`` (benchmarks/harness_fidelity.py):
the real ptr_ring.h as ``kernel``, and two variants DERIVED from it at run time by replacing
the body of its ``__ptr_ring_discard_one`` (:func:`derive_header`), written under build/.
"""
from __future__ import annotations

import re
from pathlib import Path

from ringlab import paths

KERNEL_NAME = "kernel"                  # the variant name of the real header
KERNEL_REORDER = "kernel-reorder"       # real header + the 2021 reorder change (derived)
KERNEL_PERENTRY = "kernel-perentry"     # real header + NULL-on-every-consume (derived)


class DeriveError(ValueError):
    """The header's __ptr_ring_discard_one is not the mainline form the derivation expects."""


# Bodies that replace __ptr_ring_discard_one's, written for ringlab from the
# descriptions in shared/reference/kernel-rings.md (sections 1.3 and 1.5) and
# the header's own comment, in the header's idiom (plain NULL stores,
# WRITE_ONCE of consumer_head) so that only the order of the steps changes.
_DISCARD_BODIES = {
    # 2021 "move r->queue[] clearing after r->consumer_head updating" (v2, v3
    # 2/3 without the 3/3 barriers): new head = head + 1; if a flush is due
    # (batch reached or end of array) remember the tail, publish the tail and
    # the head first (both 0 on wrap), then NULL new_head-1 down to the old
    # tail and return; otherwise only publish the head.
    KERNEL_REORDER: """
\tint consumer_head = r->consumer_head + 1;

\tif (unlikely(consumer_head - r->consumer_tail >= r->batch ||
\t\t     consumer_head >= r->size)) {
\t\tint tail = r->consumer_tail;

\t\tif (unlikely(consumer_head >= r->size)) {
\t\t\tr->consumer_tail = 0;
\t\t\tWRITE_ONCE(r->consumer_head, 0);
\t\t} else {
\t\t\tr->consumer_tail = consumer_head;
\t\t\tWRITE_ONCE(r->consumer_head, consumer_head);
\t\t}
\t\twhile (likely(--consumer_head >= tail))
\t\t\tr->queue[consumer_head] = NULL;
\t\treturn;
\t}
\tWRITE_ONCE(r->consumer_head, consumer_head);
""",
    # Pre-2017 consume: NULL the slot at once, advance, wrap at size.  The
    # single index is consumer_head (consumer_tail stays 0, batch is unused).
    KERNEL_PERENTRY: """
\tint consumer_head = r->consumer_head;

\tr->queue[consumer_head++] = NULL;
\tif (unlikely(consumer_head >= r->size))
\t\tconsumer_head = 0;
\tWRITE_ONCE(r->consumer_head, consumer_head);
""",
}
DERIVED = tuple(_DISCARD_BODIES)

_DISCARD_SIG = re.compile(r"\bstatic\s+inline\s+void\s+__ptr_ring_discard_one\s*\(\s*struct\s+ptr_ring\s*\*\s*r\s*\)\s*\{")


def _body_span(text: str, open_brace: int) -> int:
    """Index of the brace that closes the one at ``open_brace`` (comments skipped)."""
    depth, i, n = 0, open_brace, len(text)
    while i < n:
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                break
            i = end + 2
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise DeriveError("__ptr_ring_discard_one: no closing brace")


def derive_header(text: str, form: str) -> str:
    """The header ``text`` with the body of ``__ptr_ring_discard_one`` replaced.

    ``form`` is ``"kernel-reorder"`` or ``"kernel-perentry"``.  Everything else
    (struct, producer, peek, empty, init, locked wrappers) is the header's own.
    The original body must be the mainline order, NULLs before the
    ``WRITE_ONCE(r->consumer_head, ...)``, or DeriveError says why not.
    """
    if form not in _DISCARD_BODIES:
        raise DeriveError(f"derive_header: form {form!r}; allowed: {', '.join(DERIVED)}")
    m = _DISCARD_SIG.search(text)
    if not m:
        raise DeriveError("no 'static inline void __ptr_ring_discard_one(struct ptr_ring *r)' definition")
    open_brace = m.end() - 1
    close = _body_span(text, open_brace)
    body = re.sub(r"/\*.*?\*/", " ", text[open_brace + 1:close], flags=re.S)
    publish = re.search(r"WRITE_ONCE\s*\(\s*r->consumer_head", body)
    null = re.search(r"\bNULL\b", body)
    if "consumer_tail" not in body or not publish or not null or null.start() > publish.start():
        raise DeriveError("__ptr_ring_discard_one is not the mainline form (batched NULLs with "
                          "consumer_tail, then WRITE_ONCE(r->consumer_head, ...) last)")
    return text[:open_brace + 1] + _DISCARD_BODIES[form] + text[close:]


def write_derived(header: Path, form: str, root: Path | None = None) -> Path:
    """Write ``derive_header(header, form)`` to ``root/form/include/linux/ptr_ring.h``.

    ``root`` defaults to ``build/fidelity-headers`` (git-ignored): the file is
    rewritten only when its text changes, so the build stamps stay valid.
    """
    root = Path(root) if root is not None else paths.build_dir() / "fidelity-headers"
    out = root / form / "include" / "linux" / "ptr_ring.h"
    text = derive_header(Path(header).read_text(errors="replace"), form)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text(errors="replace") != text:
        out.write_text(text)
    return out
