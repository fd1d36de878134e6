"""Which of a ring's fields each cache line of a ``perf c2c`` report holds.

``RingLayout`` maps byte ranges to the ring's fields (by default ringlab's ``struct ptr_ring``
from ``csrc/rings/ptr_ring_batch.h``, which has the kernel's layout) and the slot array;
``label_lines``/``label_offsets`` add the fields each cache line (or offset) holds, and
``ring_summary`` adds up the HITMs per ring cache line, next to a throughput if one is given.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ringlab import catalog
from ringlab.errors import ParamError
from ringlab.tools.perfc2c import LINE_BYTES, C2cReport

#: ringlab's struct ptr_ring (csrc/rings/ptr_ring_batch.h; ringlab.catalog.variants.BATCH_LAYOUT):
#: byte ranges [start, end) from the struct's address.  The slot array is a separate allocation
#: (``queue``).
PTR_RING_FIELDS = catalog.variants.BATCH_LAYOUT.ranges()
#: the pre-2017 ring (csrc/rings/ptr_ring_prebatch.h): one consumer index, no batch
PTR_RING_PREBATCH_FIELDS = catalog.variants.PREBATCH_LAYOUT.ranges()
#: {built-in variant: its struct's fields}, for the variants whose ring is a struct ptr_ring
LAYOUTS = {v.name: v.layout.ranges() for v in catalog.VARIANTS if v.layout is not None}

#: label of a cache line that holds nothing of the ring
OUTSIDE = "outside ring"


@dataclass
class RingLayout:
    """Where the ring lives in the recorded process.

    ``base``: address of the struct; ``fields``: {name: (start, end)} byte ranges from ``base``;
    ``queue``: address of the slot array (None: not labelled); ``slots``: number of slots;
    ``slot_bytes``: size of one slot (a pointer)."""
    base: int
    fields: dict = field(default_factory=lambda: dict(PTR_RING_FIELDS))
    queue: int | None = None
    slots: int | None = None
    slot_bytes: int = 8
    line_bytes: int = LINE_BYTES

    def __post_init__(self):
        for name, rng in self.fields.items():
            if (not isinstance(rng, (tuple, list)) or len(rng) != 2
                    or not all(isinstance(x, int) and x >= 0 for x in rng) or rng[0] >= rng[1]):
                raise ParamError(f"ring field {name!r}: {rng!r} is not a byte range; allowed: [start, end) "
                                 "with 0 <= start < end")
        if (self.queue is None) != (self.slots is None):
            raise ParamError("ring layout: 'queue' and 'size' go together; allowed: both (the slot array's "
                             "address and its number of slots) or neither")
        if self.line_bytes not in (32, 64, 128, 256):
            raise ParamError(f"ring layout: line={self.line_bytes}; allowed: 32, 64, 128 or 256 bytes")
        if self.slots is not None and self.slots < 1:
            raise ParamError(f"ring layout: size={self.slots}; allowed: a number of slots >= 1")

    @classmethod
    def from_spec(cls, spec: str) -> "RingLayout":
        """``base=ADDR[,queue=ADDR,size=N][,layout=VARIANT|FILE.json][,line=BYTES]`` (VARIANT a
        built-in variant whose ring is a struct ptr_ring, :data:`LAYOUTS`).

        FILE.json: {"field": [start, end], ...} byte ranges from base; ``line``: the cache line
        size perf grouped by (64 unless the host's is larger)."""
        allowed = (f"allowed: base=ADDR[,queue=ADDR,size=N][,layout={'|'.join(LAYOUTS)}|FILE.json]"
                   "[,line=BYTES], ADDR in hex (0x...) or decimal")
        kv = {}
        for part in (spec or "").split(","):
            if not part.strip():
                continue
            k, sep, v = part.partition("=")
            k = k.strip()
            if not sep or k not in ("base", "queue", "size", "layout", "line") or k in kv:
                raise ParamError(f"parameter '--ring': {part.strip()!r} in {spec!r}; {allowed}")
            kv[k] = v.strip()
        if "base" not in kv:
            raise ParamError(f"parameter '--ring': {spec!r} has no base=ADDR; {allowed}")

        def num(k):
            try:
                return int(kv[k], 0)
            except ValueError:
                raise ParamError(f"parameter '--ring': {k}={kv[k]!r} is not a number; {allowed}") from None
        fields = dict(PTR_RING_FIELDS)
        lay = kv.get("layout")
        if lay:
            if lay in LAYOUTS:
                fields = dict(LAYOUTS[lay])
            else:
                try:
                    raw = json.loads(Path(lay).read_text())
                except (OSError, ValueError) as e:
                    raise ParamError(f"parameter '--ring': layout={lay!r} is not a known layout or a readable "
                                     f"JSON file ({e}); {allowed}") from None
                if not isinstance(raw, dict) or not raw:
                    raise ParamError(f"parameter '--ring': {lay}: expected a JSON object {{field: [start, end]}}")
                fields = {str(k): tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        return cls(base=num("base"), fields=fields,
                   queue=num("queue") if "queue" in kv else None,
                   slots=num("size") if "size" in kv else None,
                   line_bytes=num("line") if "line" in kv else LINE_BYTES)

    def labels(self, lo: int, hi: int) -> list[str]:
        """Names of what occupies bytes [lo, hi): struct fields, then ``slots[i-j]``."""
        out = [n for n, (s, e) in sorted(self.fields.items(), key=lambda kv: kv[1])
               if self.base + s < hi and self.base + e > lo]
        if self.queue is not None:
            end = self.queue + self.slots * self.slot_bytes
            a, b = max(lo, self.queue), min(hi, end)
            if a < b:
                i = (a - self.queue) // self.slot_bytes
                j = (b - 1 - self.queue) // self.slot_bytes
                out.append(f"slots[{i}]" if i == j else f"slots[{i}-{j}]")
        return out

    def group(self, labels: list[str]) -> str:
        """A cache line's ring group: 'producer', 'consumer', 'size/batch/queue' (the read-mostly
        line), 'slots', OUTSIDE, or the names joined with '+' for any other mix."""
        if not labels:
            return OUTSIDE
        fields = {x for x in labels if not x.startswith("slots[")}
        parts = []
        for name, members in GROUPS:
            if fields & members:
                parts.append(name)
                fields -= members
        parts += sorted(fields, key=lambda n: self.fields[n])
        if len(fields) + len(parts) == 0 or any(x.startswith("slots[") for x in labels):
            parts.append("slots")
        return "+".join(parts)


#: ring groups of ptr_ring's struct fields (its three cache lines)
GROUPS = (("producer", {"producer", "producer_lock"}),
          ("consumer", {"consumer_head", "consumer_tail", "consumer_lock", "consumer"}),
          ("size/batch/queue", {"size", "batch", "queue"}))


def label_lines(report: C2cReport, layout: RingLayout) -> pd.DataFrame:
    """The report's cache lines with ``ring_fields`` (names joined by ' ') and ``ring_group``."""
    df = report.lines.copy()
    labs = [layout.labels(a, a + layout.line_bytes) for a in df["address"]]
    df["ring_fields"] = [" ".join(x) if x else OUTSIDE for x in labs]
    df["ring_group"] = [layout.group(x) for x in labs]
    df["ring_line"] = [_short(layout.group(x), x) for x in labs]
    return df


def label_offsets(report: C2cReport, layout: RingLayout) -> pd.DataFrame:
    """The Pareto's offset rows with the ring field at each accessed address (8 bytes wide)."""
    df = report.offsets.copy()
    if df.empty:
        return df
    labs = [layout.labels(a, a + 1) for a in df["address"]]
    df["ring_fields"] = [" ".join(x) if x else OUTSIDE for x in labs]
    return df


def _short(group: str, labels: list[str]) -> str:
    """The table's "ring fields" cell: the group, with the slot range where the line holds slots."""
    slots = [x for x in labels if x.startswith("slots[")]
    return group.replace("slots", slots[0]) if slots else group


def ring_summary(labelled: pd.DataFrame, throughput: float | None = None) -> pd.DataFrame:
    """HITM total/local/remote, loads and stores per ring group (producer line, consumer line,
    size/batch/queue line, slots, outside ring), with the throughput beside them when given."""
    cols = [c for c in ("hitm_total", "hitm_local", "hitm_remote", "loads", "stores", "records")
            if c in labelled]
    agg = labelled.groupby("ring_group", sort=False)[cols].sum(min_count=1)
    agg.insert(0, "lines", labelled.groupby("ring_group", sort=False).size())
    agg = agg.reset_index()
    total = labelled["hitm_total"].sum()
    agg["hitm_share_pct"] = (100.0 * agg["hitm_total"] / total) if total else float("nan")
    order = {g: i for i, g in enumerate(["producer", "consumer", "size/batch/queue", "slots"])}
    agg["_o"] = agg["ring_group"].map(lambda g: order.get(g, 50 if g != OUTSIDE else 99))
    agg = agg.sort_values(["_o", "ring_group"]).drop(columns="_o").reset_index(drop=True)
    if throughput is not None:
        agg["throughput_mops"] = throughput
    return agg


__all__ = ["LAYOUTS", "OUTSIDE", "PTR_RING_FIELDS", "PTR_RING_PREBATCH_FIELDS", "RingLayout", "label_lines",
           "label_offsets", "ring_summary"]
