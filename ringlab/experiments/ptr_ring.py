"""ptr_ring: the seed-000/003 ring test, one binary per ring variant.

Trials run ``build/bin/ptr_ring_test-<variant>`` (csrc/harness/ptr_ring_main.c) with the
seed's command line.  Mode 0 is one thread alternating produce and consume, so it is
pinned to a single CPU; modes 1 and 2 use a producer and a consumer thread and run on each
CPU pair the ``cpus`` parameter selects (one pair per topology class for ``auto``).

A user's own kernel ``ptr_ring.h`` becomes an extra variant through
``kernel_headers=NAME=SOURCE`` (a file, tree or headers package, ``git:TREE@REV``,
``BASE+PATCH``, ``BASE+lore:MSGID``): ringlab builds ``ptr_ring_test-NAME`` from it, and NAME must
then be listed in ``variants`` (a header no variant uses is refused, not silently dropped).

Code and data layouts: with ``layouts`` K > 1 each variant is built K times (ringlab.build.layouts:
a seeded pad of unused code and function alignment per build, ``ptr_ring_test-<variant>@p<pad>-a<align>``)
and a trial runs the layout its round was given (``spec.extra["layout"]``, ringlab.run.plan);
``layouts`` 1 is one fixed build.  The K layouts of a variant are built as layout copies
(ringlab.build.layouts.LayoutCopies: up to 32 in one binary, ``ptr_ring_test-<variant>@c<first>-<last>-<digest>``)
and a trial picks its layout's copy with ``--copy J``.  Every trial also places the ring at a seeded offset in its
page (``--ring-offset``, ``spec.extra["ring_offset"]``, ringlab.run.process).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ringlab import catalog
from ringlab.build.layouts import MAX_LAYOUTS, Layout, LayoutCopies, arm_layouts, copy_groups
from ringlab.errors import ParamError
from ringlab.experiments.base import (AtMost, Experiment, TrialSpec, harness_rows, last_json_object,
                                      parse_harness_json)
from ringlab.experiments.params import Param, parse_mode_targets
from ringlab.build.driver import validate_cflags
from ringlab.digest import sha256_file
from ringlab.sources import kernel_header as kh

#: this experiment's catalog entry (raw.csv columns, bounds, binaries)
ENTRY = catalog.experiment("ptr_ring")
#: the rings whose consumer batch ``-b`` can set (their header defines RINGLAB_HAS_SET_BATCH); the
#: others, a kernel header among them, run with their own batch in a run that sets one, so that a
#: batch sweep sets the batching ring against the one it replaces at every batch
SETS_BATCH = tuple(v.name for v in catalog.VARIANTS if v.sets_batch)
#: the most arms that take turns in one round (RL_TURNS_MAX_ARMS, csrc/harness/turns.h)
MAX_TURN_ARMS = 8

#: What each ``-m MODE`` of ptr_ring_test does, named as the binary names it (design in
#: csrc/README.md).  The one description: help texts and tables take it from here.
MODE_DESCRIPTIONS = {
    0: "simple: one thread alternates produce and consume",
    1: "spsc: a producer and a consumer thread, free-running",
    2: "near-full: SPSC with the ring kept full, the producer refilling every freed slot at once",
}
MODES = tuple(range(ENTRY.bound("mode").low, ENTRY.bound("mode").high + 1))
_PAIR_RE = re.compile(r"^\d+:\d+$")


def parse_kernel_headers(text: str | None) -> dict[str, str]:
    """``"NAME=PATH,NAME2=PATH2"`` -> {NAME: absolute ptr_ring.h}.

    Each entry goes through ``ringlab.kernel_header`` (the same rules as
    ``ringlab build --kernel-header``): PATH is a ptr_ring.h or the root of a kernel
    tree or headers package.  Paths may hold spaces, ``;`` or ``$()``: they are only
    ever passed as argv elements / opened as files, never through a shell.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    # Split on commas that start a new NAME=; a path may itself contain commas only
    # if the next segment has no '=' (rare; documented).
    parts: list[str] = []
    for seg in text.split(","):
        if parts and "=" not in seg:
            parts[-1] += "," + seg
        else:
            parts.append(seg)
    for part in (p.strip() for p in parts):
        if not part:
            continue
        try:
            name, path = kh.parse_spec(part)
            header = kh.resolve_header(path)
            kh.detect_generation(header)
        except (kh.KernelHeaderError, OSError) as e:
            why = str(e).removeprefix("--kernel-header: ") if isinstance(e, kh.KernelHeaderError) else \
                f"{part[:80]!r}: {e.strerror or e}"
            raise ParamError(f"parameter 'kernel_headers': {why}; allowed: NAME=PATH[,NAME2=PATH2]") from None
        if name in out:
            raise ParamError(f"parameter 'kernel_headers': name {name!r} given twice; "
                             "allowed: distinct NAMEs")
        out[name] = str(Path(header).resolve())
    return out


#: ops per timed loop of a fixed design (and of a staged run on a host with no trial-length calibration)
DEFAULT_COUNT = 10_000_000

class PtrRing(Experiment):
    name = ENTRY.name
    description = f"ptr_ring variants ({'/'.join(ENTRY.variants)} + your kernel header), seed 000/003"
    params = [
        Param("variants", "str_list", list(ENTRY.variants),
              f"ring variants to compare: {', '.join(ENTRY.variants)}, or a NAME from kernel_headers",
              names=True),
        Param("modes", "int_list", [0, 1], "; ".join(f"{m} {d}" for m, d in MODE_DESCRIPTIONS.items()),
              choices=MODES, column=False),
        Param("sizes", "int_list", [1000], "ring sizes (entries)", min=ENTRY.bound("size").low,
              max=ENTRY.bound("size").high, column=False),
        Param("count", "int", None, "operations per timed loop (-N); unset: planned (a run with target_ci takes "
              "the unbiased trial length of this host's calibration that plans narrowest, else "
              f"{DEFAULT_COUNT}; a fixed design {DEFAULT_COUNT})", min=ENTRY.bound("count").low,
              max=ENTRY.bound("count").high),
        Param("batch", "int", 0, f"consumer zeroing batch of the rings that have one to set ({', '.join(SETS_BATCH)}; "
              "the others run as they are); 0 = the ring's default", min=ENTRY.bound("batch").low,
              max=ENTRY.bound("batch").high),
        Param("lock", "bool", False, "use the spinlocked ptr_ring_produce/consume (-l)"),
        Param("target_ci_by_mode", "str", "", "a half-width per mode that replaces target_ci there, "
              "MODE:PCT comma-separated (1:1.0: mode 1's rows at +-1%); empty: target_ci in every mode",
              column=False),
        Param("cpus", "str", "auto", "auto (one pair per topology class) | all (every ordered pair) | "
              "none (unpinned) | explicit pairs like 1:2,3:4", column=False),
        Param("cflags", "str", "", "extra compiler options for the ring binaries, blank-separated, each "
              "shaped -O*, -f*, -m*, -D*, -U*, -g*, -W* or -std=* (no paths, no shell characters)",
              column=False),
        Param("kernel_headers", "str", "", "extra variants from real kernel headers: NAME=SOURCE[,NAME2=SOURCE2], "
              "SOURCE a file, tree or headers package, git:TREE@REV, BASE+PATCH or BASE+lore:MSGID; "
              "each NAME must also be listed in variants", column=False),
        Param("layouts", "int", 1, "code layouts per variant: builds with seeded pads and function "
              "alignments, paired by index and cycled over the rounds (1: one fixed build)",
              min=1, max=MAX_LAYOUTS, column=False),
        Param("common_layouts", "bool", False, "common random layouts: layout k of every variant gets the "
              "same pad and alignments (false: each variant draws its own)", column=False),
        Param("interleave", "bool", False, "the arms of a round take turns loop by loop, each in its own "
              "process (--with): loop k of every arm is timed next to the others' (repeats loops each)",
              column=False),
    ]
    # Sized for this project's 2-CPU VM.  smoke is a fixed design of seconds (tests).  quick and
    # full are questions, not counts: a target half-width and a budget, measured in stages
    # (ringlab.run.stopping); their trials and layouts apply only when -p trials or -p layouts
    # is given (a fixed design then) or with a single variant.  A thread pair (modes 1, 2) is
    # noisier than one thread, so its rows ask for a wider half-width (target_ci_by_mode).  quick
    # measures on to its half-widths (stop target): its question is the width, which a row that is
    # already decided has not reached; within a notebook's 90 s.
    profiles = {
        "smoke": {"trials": 2, "warmup": 1, "count": 100_000, "modes": [0, 1], "sizes": [1000],
                  "timeout": 30.0, "layouts": 2},
        "quick": {"trials": 8, "warmup": 1, "modes": [0, 1], "sizes": [1000],
                  "layouts": 4, "target_ci": 0.5, "target_ci_by_mode": "1:1,2:1", "budget": 60.0,
                  "stop": "target"},
        # many short trials beat a few long ones: the CI narrows with processes and layouts, not with
        # N, so a staged run plans N (count unset) from the calibration's trial-length probe
        "full": {"trials": 30, "warmup": 2, "modes": [0, 1, 2], "sizes": [64, 1000],
                 "layouts": 8, "target_ci": 0.25, "target_ci_by_mode": "1:0.75,2:0.75", "budget": 300.0},
    }
    binaries = list(ENTRY.binaries())
    code_params = ("kernel_headers",)
    # ptr_ring_test refuses -b BATCH above -s SIZE (csrc/harness/ptr_ring_bench.c); -b reaches only
    # the variants that set their batch (SETS_BATCH, ``command``).  Its other cross-option checks
    # (-c only with a consumer thread, --with only with --json, at most 7 --with) ``command`` and
    # ``check`` (interleave) keep.
    constraints = [
        AtMost("batch", "sizes", "the ring size", "size", zero="the ring's default",
               applies=lambda v: any(a in SETS_BATCH for a in v.get("variants") or ()),
               why="ptr_ring_test refuses -b above -s: every trial of variant batch would fail"),
    ]

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        validate_cflags(values.get("cflags"), "cflags")
        headers = parse_kernel_headers(values.get("kernel_headers"))
        allowed = list(ENTRY.variants) + sorted(headers)
        for v in values["variants"]:
            if v not in allowed:
                raise ParamError(f"parameter 'variants': unknown variant {v!r}; allowed: {', '.join(allowed)}"
                                 + ("" if headers else " (or a NAME given through kernel_headers=NAME=PATH)"))
        # A header that no variant uses would be built and never measured: say so instead.
        unused = [n for n in headers if n not in values["variants"]]
        if unused:
            raise ParamError(f"parameter 'kernel_headers': NAME {unused[0]!r} is not in variants "
                             f"({','.join(values['variants'])}); allowed: NAMEs listed in variants "
                             f"(add it: variants={','.join([*values['variants'], unused[0]])})")
        if values.get("interleave") and not 2 <= len(values["variants"]) <= MAX_TURN_ARMS:
            raise ParamError(f"parameter 'interleave': the arms take turns, so it needs 2..{MAX_TURN_ARMS} variants "
                             f"(this plan has {len(values['variants'])}); allowed: false, or more variants",
                             input="interleave")
        cpus = values["cpus"].replace(" ", "")
        if cpus not in ("auto", "all", "none"):
            if not cpus or not all(_PAIR_RE.match(p) for p in cpus.split(",")):
                raise ParamError(f"parameter 'cpus': bad value {values['cpus']!r}; allowed: auto, all, none, "
                                 "or pairs PRODUCER:CONSUMER like 1:2,3:4")
        values["cpus"] = cpus
        parse_mode_targets(values.get("target_ci_by_mode"), MODES)
        if not values.get("count") and not float(values.get("target_ci") or 0) > 0:
            values["count"] = DEFAULT_COUNT      # an unset count is planned by a staged run only

    @staticmethod
    def _arm_layouts(values, variant: str) -> list[Layout]:
        return arm_layouts(values["seed"], variant, values.get("layouts", 1), values.get("cflags"),
                           values.get("common_layouts", False))

    @classmethod
    def layouts_of(cls, values) -> dict[str, list[Layout | LayoutCopies]]:
        """{ptr_ring_test-VARIANT: what it is built as}: ``[PLAIN]`` when ``layouts`` is 1, else its
        layouts in binaries of layout copies (ringlab.build.layouts.copy_groups)."""
        out = {}
        for v in values["variants"]:
            lays = cls._arm_layouts(values, v)
            out[ENTRY.binary_of(v)] = lays if len(lays) == 1 else copy_groups(lays)
        return out

    def _copy_of(self, spec, values) -> tuple[str, int | None]:
        """(the binary of this trial, its ``--copy``; None for a binary of one layout)."""
        base = ENTRY.binary_of(str(spec.config["variant"]))
        lays = self._arm_layouts(values, str(spec.config["variant"]))
        k = int(spec.extra.get("layout", 0))
        if len(lays) == 1:
            return lays[k].binary_name(base), None
        for group in copy_groups(lays):
            if any(lay.index == k for lay in group.layouts):
                return group.binary_name(base), group.position(k)
        raise ParamError(f"layout {k}: allowed: 0..{len(lays) - 1}")

    def needed_binaries(self, values):
        return [lay.binary_name(base) for base, lays in self.layouts_of(values).items() for lay in lays]

    def build_args(self, values):
        return {"kernel_headers": parse_kernel_headers(values.get("kernel_headers")) or None,
                "cflags": values.get("cflags", ""), "layouts": self.layouts_of(values)}

    def binary_name(self, spec, values) -> str:
        """The binary of this trial: the one holding its variant in the layout of its round
        (``extra["layout"]``); ``command`` adds the copy."""
        return self._copy_of(spec, values)[0]

    # -- placement -------------------------------------------------------------------------
    def _placements(self, values, ctx) -> tuple[list, list]:
        """(single-CPU placements for mode 0, pair placements for modes 1/2) as (p, c, class)."""
        spec = values["cpus"]
        if spec == "none":
            return [(-1, -1, "unpinned")], [(-1, -1, "unpinned")]
        pairs = ctx.select_pairs(spec)   # validates offline CPUs (ParamError)
        if spec in ("auto", "all"):
            # Two spinning threads on one CPU only progress when the scheduler preempts
            # a spinner, so the automatic choices leave same-cpu out; an explicit
            # "3:3" is still honoured (with a warning) for seed 002's same-CPU case.
            pairs = [p for p in pairs if p[2] != "same-cpu"]
            if not pairs:
                ctx.warn("ptr_ring: only one CPU online, so modes 1/2 run unpinned")
                pairs = [(-1, -1, "unpinned")]
            cpu = ctx.pick_single_cpu()
            singles = [(cpu, cpu, "same-cpu")]
        else:
            seen = []
            for p, _, _ in pairs:
                if p not in seen:
                    seen.append(p)
            singles = [(p, p, "same-cpu") for p in seen]
        return singles, [(int(p), int(c), cls) for p, c, cls in pairs]

    def plan(self, values, ctx) -> list[TrialSpec]:
        singles, pairs = self._placements(values, ctx)
        specs = []
        n = values["warmup"] + values["trials"]
        # a staged run plans each mode's trial length (ringlab.run.stopping.planned_counts)
        per_mode = values.get("count_by_mode") or {}
        for variant in values["variants"]:
            for mode in values["modes"]:
                places = singles if mode == 0 else pairs
                for size in values["sizes"]:
                    for p, c, cls in places:
                        if mode != 0 and cls == "same-cpu":
                            ctx.warn(f"ptr_ring mode {mode} on same-cpu pair {p}:{c}: both spinning threads "
                                     "share one CPU; progress relies on the scheduler preempting a spinner "
                                     "(expect very slow, timeout-prone trials)")
                        count = per_mode.get(str(mode), values["count"])
                        config = {"variant": variant, "mode": mode, "size": size, "count": count,
                                  "batch": values["batch"], "lock": values["lock"]}
                        for t in range(n):
                            specs.append(TrialSpec(config=dict(config), trial=t, warmup=t < values["warmup"],
                                                   cpus=(p, c), pair_class=cls))
        return specs

    def single_threaded(self, spec) -> bool:
        return int(spec.config["mode"]) == 0

    def command(self, spec, ctx) -> list[str]:
        cfg, values = spec.config, ctx.values
        name, copy = self._copy_of(spec, values)
        argv = [str(ctx.binary(name)), *(["--copy", str(copy)] if copy is not None else []),
                "-s", str(cfg["size"]), "-m", str(cfg["mode"]), "-N", str(spec.extra.get("ops", cfg["count"]))]
        p, c = spec.cpus
        if p >= 0:
            argv += ["-p", str(p)]
        if c >= 0 and cfg["mode"] != 0:
            argv += ["-c", str(c)]
        if cfg["batch"] and cfg["variant"] in SETS_BATCH:
            argv += ["-b", str(cfg["batch"])]
        if cfg["lock"]:
            argv.append("-l")
        if values.get("repeats", 1) > 1:
            argv += ["-r", str(values["repeats"])]
        if not values.get("counters", True):
            argv += ["--counters", "none"]
        if spec.extra.get("ring_offset") is not None:
            argv += ["--ring-offset", str(int(spec.extra["ring_offset"]))]
        for other in spec.extra.get("partners") or ():   # the round's other arms take turns with this one
            oname, ocopy = self._copy_of(other, values)
            argv += ["--with", str(ctx.binary(oname)), *(["--with-copy", str(ocopy)] if ocopy is not None else [])]
        argv.append("--json")
        return argv

    def parse(self, spec, stdout, stderr, ctx) -> list[dict[str, Any]]:
        """The trial's rows; with partners (arms that took turns with it), theirs too, each with
        its own variant, binary hash and placement."""
        doc = last_json_object(stdout) or {}
        rows = self._arm_rows(doc, parse_harness_json(stdout))
        partners = list(spec.extra.get("partners") or ())
        others = doc.get("interleaved") if partners else None
        if partners and (not isinstance(others, list) or len(others) != len(partners)):
            raise ValueError(f"the binary reported {len(others or [])} interleaved arms, "
                             f"{len(partners)} were started")
        for other, odoc in zip(partners, others or ()):
            variant = str(other.config["variant"])
            got = odoc.get("variant") if isinstance(odoc, dict) else odoc
            if str(got) != variant:
                raise ValueError(f"an interleaved arm reported variant {got!r}, not {variant!r}")
            sha = sha256_file(ctx.binary(self._copy_of(other, ctx.values)[0]))
            rows += [dict(r, variant=variant, binary_sha256=sha) for r in self._arm_rows(odoc, harness_rows(odoc))]
        return rows

    @staticmethod
    def _arm_rows(doc: dict, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``rows`` of one arm with the ring offset its JSON object reports."""
        if isinstance(doc.get("ring_offset"), int):   # where the binary placed the ring
            for row in rows:
                row["ring_offset"] = doc["ring_offset"]
        return rows
