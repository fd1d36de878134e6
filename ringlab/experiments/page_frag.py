"""page_frag: the seed-002 push/pop test of the page_frag cache, before and after Part-1.

Trials run ``build/bin/page_frag_test-<variant>`` (csrc/page_frag/) with the module's
command line: a push thread allocates ``alloc_len``-byte fragments (64-byte aligned when
``align`` is 1) into a 512-slot ptr_ring and a pop thread frees them.  Each CPU pair the
``cpus`` parameter selects is a placement; ``auto`` always includes a same-CPU pair,
because the seed's point is that with push and pop on one CPU the before/after difference
vanishes (the scheduler dominates).

raw.csv parameter columns: variant, align, alloc_len, nr_test.  ``ns_per_op`` is
elapsed / nr_test; ``elapsed_us`` is the seed's unit (the module prints microseconds).
Extra columns explain the mechanism: how often the ring was full (push freed and
yielded) or empty (pop yielded), and how the cache got its pages (refills, order-0
fallbacks, reuses of an idle page, pages abandoned to fragments still in flight).

Code and data layouts, as ptr_ring: with ``layouts`` K > 1 each variant is built K times
(ringlab.build.layouts: a seeded pad of code that never runs ahead of the measured push/pop
functions, ``-DRINGLAB_LAYOUT_PAD``, and a seeded ``-falign-functions``;
``page_frag_test-<variant>@p<pad>-a<align>``), and a trial runs the layout pair of its round
(``spec.extra["layout"]``, ringlab.run.plan; raw.csv ``layout``); ``layouts`` 1 is one fixed
build.  Every trial also places the 512-slot ring at a seeded offset in its page
(``--ring-offset``, a multiple of 64; a spacer of that size moves the slot array through the
heap), recorded in ``ring_offset`` as the binary reports it.  The page_frag cache's pages come
from the pool's size-aligned regions and are not offset: the fragments' place within a page is
what the test measures.  No callgrind counts here (``icount`` is refused: two threads).
"""
from __future__ import annotations

import json
import re
from typing import Any

from ringlab import catalog
from ringlab.build.layouts import MAX_LAYOUTS, Layout, arm_layouts
from ringlab.errors import ParamError
from ringlab.experiments.base import Experiment, TrialSpec, parse_harness_json
from ringlab.experiments.params import Param

#: this experiment's catalog entry (raw.csv columns, bounds, arms, binaries)
ENTRY = catalog.experiment("page_frag")
VARIANTS = ENTRY.variants
PAGE_SIZE = ENTRY.bound("alloc_len").high  # the binary's PAGE_SIZE: the module accepts 0 < alloc_len <= PAGE_SIZE
#: test_align: 0 page_frag_alloc, 1 page_frag_alloc_align(64)
ALIGNS = tuple(range(ENTRY.bound("align").low, ENTRY.bound("align").high + 1))
_PAIR_RE = re.compile(r"^\d+:\d+$")

#: Columns taken from the binary's JSON iteration as they are (counts, NaN if absent).
_EXTRA_FROM_JSON = ENTRY.extra_columns[1:]   # after elapsed_us


class PageFrag(Experiment):
    name = ENTRY.name
    description = "page_frag cache before/after Part-1: push/pop over a ptr_ring across CPUs (seed 002)"
    params = [
        Param("variants", "str_list", list(VARIANTS), "page_frag implementations to compare",
              choices=VARIANTS, names=True),
        Param("aligns", "int_list", [0, 1], "0: page_frag_alloc; 1: page_frag_alloc_align(64)",
              choices=ALIGNS, column=False),
        Param("alloc_lens", "int_list", [12, 64, 2048], f"fragment sizes in bytes (test_alloc_len), "
              f"1..{PAGE_SIZE}", min=ENTRY.bound("alloc_len").low, max=PAGE_SIZE, column=False),
        Param("nr_test", "int", 2_000_000, "fragments passed from push to pop per trial",
              min=ENTRY.bound("nr_test").low, max=ENTRY.bound("nr_test").high),
        Param("cpus", "str", "auto", "auto (one pair per topology class, same-cpu included) | all (every "
              "ordered pair, plus same-cpu) | none (unpinned) | explicit PUSH:POP pairs like 0:1,0:0",
              column=False),
        Param("layouts", "int", 1, "code layouts per variant: builds with seeded pads and function "
              "alignments, paired by index and cycled over the rounds (1: one fixed build)",
              min=1, max=MAX_LAYOUTS, column=False),
        Param("common_layouts", "bool", False, "common random layouts: layout k of every variant gets the "
              "same pad and alignments (false: each variant draws its own)", column=False),
    ]
    # Sized for the project's 2-CPU VM (2 variants x 2 aligns x 3 lengths x 2 placements
    # = 24 configurations): smoke is seconds (tests), quick about a minute, full a few
    # minutes (the committed run).
    profiles = {
        "smoke": {"trials": 2, "warmup": 0, "nr_test": 20_000, "alloc_lens": [12], "timeout": 30.0,
                  "layouts": 2},
        "quick": {"trials": 5, "warmup": 1, "nr_test": 500_000, "timeout": 60.0, "layouts": 4},
        "full": {"trials": 10, "warmup": 1, "nr_test": 3_000_000, "timeout": 120.0, "layouts": 8},
    }
    binaries = list(ENTRY.binaries())
    extra_columns = list(ENTRY.extra_columns)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        if values.get("repeats", 1) != 1:
            raise ParamError(f"parameter 'repeats': page_frag_test times one loop per process, got "
                             f"{values['repeats']}; allowed: 1 (use trials for more samples)")
        if values.get("icount"):
            raise ParamError("parameter 'icount': page_frag_test is two-threaded and callgrind "
                             "serializes threads; allowed: false")
        cpus = str(values["cpus"]).replace(" ", "")
        if cpus not in ("auto", "all", "none"):
            if not cpus or not all(_PAIR_RE.match(p) for p in cpus.split(",")):
                raise ParamError(f"parameter 'cpus': bad value {values['cpus']!r}; allowed: auto, all, none, "
                                 "or pairs PUSH:POP like 0:1,0:0")
        values["cpus"] = cpus

    @staticmethod
    def layouts_of(values: dict[str, Any]) -> dict[str, list[Layout]]:
        """{page_frag_test-VARIANT: its layouts} (``[PLAIN]`` each when ``layouts`` is 1)."""
        return {ENTRY.binary_of(v): arm_layouts(values["seed"], v, values.get("layouts", 1),
                                                   common=values.get("common_layouts", False))
                for v in values["variants"]}

    def needed_binaries(self, values: dict[str, Any]) -> list[str]:
        return [lay.binary_name(base) for base, lays in self.layouts_of(values).items() for lay in lays]

    def build_args(self, values: dict[str, Any]) -> dict[str, Any]:
        return {"layouts": self.layouts_of(values)}

    def binary_name(self, spec: TrialSpec, values: dict[str, Any]) -> str:
        """The binary of this trial: its variant in the layout of its round (``extra["layout"]``)."""
        variant = str(spec.config["variant"])
        lays = arm_layouts(values["seed"], variant, values.get("layouts", 1),
                           common=values.get("common_layouts", False))
        return lays[int(spec.extra.get("layout", 0))].binary_name(ENTRY.binary_of(variant))

    # -- placement -------------------------------------------------------------------------
    def placements(self, values: dict[str, Any], ctx) -> list[tuple[int, int, str]]:
        """(push CPU, pop CPU, class) list; automatic choices always get a same-CPU pair.

        Unlike ptr_ring's spinning threads, push and pop here yield when the ring is
        full/empty, so sharing one CPU is slow but always makes progress."""
        spec = values["cpus"]
        if spec == "none":
            return [(-1, -1, "unpinned")]
        pairs = [(int(p), int(c), str(cls)) for p, c, cls in ctx.select_pairs(spec)]
        if spec in ("auto", "all") and not any(cls == "same-cpu" for _, _, cls in pairs):
            cpu = ctx.pick_single_cpu()
            pairs.append((cpu, cpu, "same-cpu"))
        if spec == "all":
            # every ordered pair is a lot already; one same-CPU representative is enough
            same = [p for p in pairs if p[2] == "same-cpu"]
            pairs = [p for p in pairs if p[2] != "same-cpu"] + same[:1]
        if not any(cls != "same-cpu" for _, _, cls in pairs) and spec in ("auto", "all"):
            ctx.warn("page_frag: only one CPU online, so push and pop only run on the same CPU")
        return pairs

    def plan(self, values: dict[str, Any], ctx) -> list[TrialSpec]:
        specs = []
        n = values["warmup"] + values["trials"]
        for p, c, cls in self.placements(values, ctx):
            for variant in values["variants"]:
                for align in values["aligns"]:
                    for length in values["alloc_lens"]:
                        config = {"variant": variant, "align": align, "alloc_len": length,
                                  "nr_test": values["nr_test"]}
                        for t in range(n):
                            specs.append(TrialSpec(config=dict(config), trial=t, warmup=t < values["warmup"],
                                                   cpus=(p, c), pair_class=cls))
        return specs

    def command(self, spec: TrialSpec, ctx) -> list[str]:
        cfg = spec.config
        p, c = spec.cpus
        argv = [str(ctx.binary(self.binary_name(spec, ctx.values))),
                f"test_push_cpu={int(p)}", f"test_pop_cpu={int(c)}",
                f"test_alloc_len={int(cfg['alloc_len'])}", f"nr_test={int(cfg['nr_test'])}",
                f"test_align={int(cfg['align'])}", "--json"]
        if not ctx.values.get("counters", True):
            argv += ["--counters", "none"]
        if spec.extra.get("ring_offset") is not None:
            argv += ["--ring-offset", str(int(spec.extra["ring_offset"]))]
        return argv

    def parse(self, spec: TrialSpec, stdout: str, stderr: str, ctx) -> list[dict[str, Any]]:
        rows = parse_harness_json(stdout)
        doc = json.loads(stdout)  # parse_harness_json succeeded, so this is the object
        if doc.get("binary") != "page_frag_test":
            raise ValueError(f"expected page_frag_test JSON, got binary={doc.get('binary')!r}")
        if doc.get("variant") != spec.config["variant"]:
            raise ValueError(f"binary reports variant {doc.get('variant')!r}, trial asked for "
                             f"{spec.config['variant']!r}")
        for row, it in zip(rows, doc["iterations"]):
            row["count"] = int(doc["count"])
            el = it.get("elapsed_ns")
            row["elapsed_us"] = float("nan") if el is None else float(el) / 1e3
            for col in _EXTRA_FROM_JSON:
                v = it.get(col)
                row[col] = float("nan") if v is None else int(v)
            if isinstance(doc.get("ring_offset"), int):   # where the binary placed the ring
                row["ring_offset"] = doc["ring_offset"]
        return rows
