#!/usr/bin/env python3
"""Harness fidelity: do ringlab's own rings run like the kernel's real ptr_ring.h?

Also run as ``ringlab bench fidelity``.  Two parts:

**Instruction counts** (callgrind, mode 0, measured region only: exact and
repeatable, independent of timing noise).  Against the real Debian
``include/linux/ptr_ring.h`` (built through the compat shim as variant
``kernel``) and two variants DERIVED from it at run time by replacing the body
of its ``__ptr_ring_discard_one`` (see :func:`derive_header`; the result goes
under ``build/``, never into the repository):

* ours ``batch`` against ``kernel``: instructions/op within 1 %;
* ours ``reorder`` minus ours ``batch`` against ``kernel-reorder`` minus
  ``kernel`` (the 2021 patch's effect: publish consumer_head/tail first, then
  NULL the batch): the two differences within 0.2 instructions/op;
* ours ``prebatch`` against ``kernel-perentry`` (the header with the pre-2017
  consume, NULL on every entry, as its own comment spells it out; producer,
  peek and layout stay mainline's, so this is not the v4.8 file): within 1 %.

**Timing**, in ONE interleaved run, on the same CPU (mode 0) and the same CPU
pair (mode 1), with fresh processes per trial in a seeded random order:

* ours ``batch``  vs ``kernel``: target ratio 1.00 +- 0.03;
* ours ``prebatch`` vs ours ``batch``: the effect of batch zeroing.

Then **timing across code layouts** (``--layouts K``, default 8; 0 skips it): ``ringlab run
ptr_ring`` of ours and ``kernel`` with K seeded layouts per variant, and ringlab's compare
(design ``layouts``: per layout pair the paired estimate, a t interval across the K pairs).
Target: the CI of ours/real includes a value within 1.00 +- 0.01.  The one-build ratio above
is printed beside it for reference: one binary pair is one sample of the layouts.

It prints the machine, the medians (ns/op) per variant and mode, the ratios of
medians with a bootstrap 95% interval, and the code size of each binary's
measured functions (``nm -S``): a ratio that misses usually shows up there
first (inlining, barriers) before it is worth reading objdump.

Without a real header (no ``linux-headers-*-common`` and no
``--kernel-header``) the lines that need it say so and are skipped.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from types import SimpleNamespace

import click

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:           # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.fidelity_headers import (KERNEL_NAME, KERNEL_PERENTRY, KERNEL_REORDER, DeriveError,  # noqa: E402
                                         write_derived)
from benchmarks.fidelity_timing import one_build_ratio, run_timing  # noqa: E402
from ringlab.build import driver  # noqa: E402
from ringlab.build.cflags import BuildError  # noqa: E402
from ringlab.sources import kernel_header as kh  # noqa: E402
from ringlab.sources.header_files import KernelHeaderError  # noqa: E402
from ringlab.tools import icount  # noqa: E402
from ringlab.lab.commands import options  # noqa: E402

#: instruction-count targets: ours/real within 1 %; reorder effect within 0.2 instructions/op
ICOUNT_RATIO_TOL = 0.01
ICOUNT_DIFF_TOL = 0.2
ICOUNT_SIZE = 1000                      # -s of the instruction counts (the mails' size)


def icount_per_op(exe, ops: int, size: int = ICOUNT_SIZE) -> float:
    """Callgrind instructions per operation of ``exe -s size -m 0 -N ops`` (measured region)."""
    argv = [str(exe), "-s", str(size), "-m", "0", "-N", str(ops), "--counters", "none"]
    return icount.count(argv).instructions / ops


def icount_checks(per_op: dict[str, float]) -> list[dict]:
    """The fidelity checks over instructions/op by variant; a check whose variants are
    missing from ``per_op`` has ``met`` None and a ``skipped`` reason."""
    def have(*vs):
        missing = [v for v in vs if v not in per_op]
        return ("no " + ", ".join(missing)) if missing else ""

    out = []
    for ours, real, label in (("batch", KERNEL_NAME, "batch / real header"),
                              ("prebatch", KERNEL_PERENTRY, "prebatch / real per-entry discard")):
        row = {"check": label, "kind": "ratio", "ours": ours, "real": real,
               "target": f"within {ICOUNT_RATIO_TOL:.0%}"}
        why = have(ours, real)
        if why:
            row.update(met=None, skipped=why)
        else:
            ratio = per_op[ours] / per_op[real]
            row.update(ours_per_op=per_op[ours], real_per_op=per_op[real], value=ratio,
                       met=abs(ratio - 1) <= ICOUNT_RATIO_TOL)
        out.append(row)
    row = {"check": "reorder - batch vs the patch's difference", "kind": "difference",
           "ours": "reorder-batch", "real": f"{KERNEL_REORDER}-{KERNEL_NAME}",
           "target": f"within {ICOUNT_DIFF_TOL} instructions/op"}
    why = have("reorder", "batch", KERNEL_REORDER, KERNEL_NAME)
    if why:
        row.update(met=None, skipped=why)
    else:
        d_ours = per_op["reorder"] - per_op["batch"]
        d_real = per_op[KERNEL_REORDER] - per_op[KERNEL_NAME]
        row.update(ours_per_op=d_ours, real_per_op=d_real, value=d_ours - d_real,
                   met=abs(d_ours - d_real) <= ICOUNT_DIFF_TOL)
    out.insert(1, row)
    return out


def format_icount(per_op: dict[str, float], checks: list[dict], ops: int, size: int,
                  notes: dict[str, str]) -> list[str]:
    lines = [f"instruction counts (callgrind, mode 0, -s {size}, {ops} ops, measured region only; "
             "exact and repeatable, independent of timing noise):",
             f"  {'variant':<16} {'instr/op':>9}"]
    for v, x in per_op.items():
        lines.append(f"  {v:<16} {x:>9.3f}" + (f"  {notes[v]}" if v in notes else ""))
    lines.append("")
    lines.append(f"  {'check':<42} {'ours':>8} {'real':>8}  {'result':<15} target")
    for c in checks:
        if c["met"] is None:
            lines.append(f"  {c['check']:<42} skipped: {c['skipped']}")
            continue
        if c["kind"] == "ratio":
            res = f"ratio {c['value']:.4f}"
            ours, real = f"{c['ours_per_op']:8.3f}", f"{c['real_per_op']:8.3f}"
        else:
            res = f"diff {c['value']:+.3f}"
            ours, real = f"{c['ours_per_op']:+8.3f}", f"{c['real_per_op']:+8.3f}"
        lines.append(f"  {c['check']:<42} {ours} {real}  {res:<15} {c['target']}: "
                     + ("met" if c["met"] else "MISSED"))
    return lines


@click.command(cls=options.Command, help=__doc__.splitlines()[0])
@click.option("--trials", type=int, default=30, help="measured trials per variant and mode (default 30)")
@click.option("--warmup", type=int, default=1, help="discarded warm-up trials per variant and mode (default 1)")
@click.option("--count", type=int, default=20_000_000, help="items per trial, -N (default 2e7)")
@click.option("--size", type=int, default=1000, help="ring size, -s (default 1000, as in the mails)")
@click.option("--kernel-header", default=None, metavar="PATH",
              help="real ptr_ring.h, kernel tree or headers package (default: newest "
                   "/usr/src/linux-headers-*-common)")
@click.option("--cpus", default=None, metavar="P,C",
              help="CPU for mode 0 is P; mode 1 pins producer P and consumer C "
                   "(default: the last two allowed CPUs)")
@click.option("--modes", default="0,1", help="comma list of modes (default 0,1)")
@click.option("--seed", type=int, default=1, help="seed of the interleaved order (default 1)")
@click.option("--layouts", type=int, default=8, metavar="K",
              help="code layouts per variant for the layouts timing comparison, 2..64 (default 8; 0: skip it)")
@click.option("--layout-rounds", type=int, default=20, metavar="R",
              help="rounds per layout pair of the layouts timing comparison (default 20: K x R trials "
                   "per variant and mode)")
@click.option("--json", "json_out", default=None, metavar="FILE", help="also write every trial to FILE")
@click.option("--icount-ops", type=int, default=1_000_000, metavar="N",
              help="operations per callgrind instruction count, 1e5..1e8 (default 1e6)")
@click.option("--icount-only", is_flag=True, help="only the instruction counts, no timing")
@click.option("--no-icount", is_flag=True, help="only the timing, no instruction counts")
def command(**params) -> int:
    both = [o for o in ("--icount-only", "--no-icount") if params[o.lstrip('-').replace('-', '_')]]
    if len(both) > 1:
        raise click.UsageError(f"argument {both[1]}: not allowed with argument {both[0]}")
    return run(SimpleNamespace(**params))


def _fail(msg: str) -> int:
    print(f"ringlab bench fidelity: error: {msg}", file=sys.stderr)
    return 2


def machine() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "nproc": os.cpu_count(), "allowed_cpus": sorted(os.sched_getaffinity(0)),
            "kernel": platform.release(), "machine": platform.machine()}


class Prepared:
    """What :func:`prepare` built: binaries by variant, and the real header when there is one.

    (A plain class: ``ringlab bench`` loads this file without registering it
    in sys.modules, which dataclasses need.)"""

    def __init__(self, exes, header, generation, no_header_reason, notes, info):
        self.exes: dict[str, str] = exes
        self.header: Path | None = header               # the real ptr_ring.h, resolved
        self.generation: str | None = generation        # "batch" / "prebatch"
        self.no_header_reason: str = no_header_reason   # "" when header is set
        self.notes: dict[str, str] = notes              # variant -> what it is
        self.info = info                                # ringlab.build.BuildInfo


def prepare(kernel_header=None, derived_root: Path | None = None, out_dir: Path | None = None) -> Prepared:
    """Build our rings and the real header (plus its derived variants) for the fidelity checks.

    ``kernel_header`` is a header, tree or headers package; None takes the newest
    ``/usr/src/linux-headers-*-common`` and, when there is none, builds only
    our rings.  ``derived_root`` and ``out_dir`` default to build/ (see
    :func:`write_derived`, ringlab.build.driver.build_all).  Raises
    ringlab.sources.header_files.KernelHeaderError, BuildError or DeriveError with a
    message for the user.
    """
    ours = ["batch", "reorder", "prebatch"]
    header = kernel_header if kernel_header is not None else kh.debian_header()
    headers: dict[str, Path] = {}
    notes: dict[str, str] = {}
    gen, why = None, ""
    if header is None:
        why = ("no real header: install Debian's linux-headers-*-common (it has "
               "include/linux/ptr_ring.h) or pass --kernel-header PATH")
    else:
        header = kh.resolve_header(header)
        gen = kh.detect_generation(header)
        headers[KERNEL_NAME] = header
        notes[KERNEL_NAME] = f"real header ({gen} generation)"
        if gen == "batch":
            for form, what in ((KERNEL_REORDER, "real header, discard reordered (publish first, then NULL)"),
                               (KERNEL_PERENTRY, "real header, discard NULLs every entry (pre-2017)")):
                headers[form] = write_derived(header, form, derived_root)
                notes[form] = what + "; derived at run time"
    info = driver.build_all(kernel_headers=headers, out_dir=out_dir,
                           only=[f"ptr_ring_test-{v}" for v in [*ours, *headers]])
    exes = {v: info.binaries[f"ptr_ring_test-{v}"].path for v in [*ours, *headers]}
    return Prepared(exes, header, gen, why, notes, info)


def _check_args(args) -> tuple[str, list[int], int, int]:
    """(the error to print, or ""; the modes; the producer and consumer CPUs)."""
    if args.trials < 1:
        return f"--trials {args.trials}: allowed: an integer >= 1", [], -1, -1
    if args.warmup < 0:
        return f"--warmup {args.warmup}: allowed: an integer >= 0", [], -1, -1
    if args.count < 1:
        return f"--count {args.count}: allowed: an integer > 0", [], -1, -1
    if not 2 <= args.size <= 10_000_000:
        return f"--size {args.size}: allowed: 2..10000000", [], -1, -1
    if args.layout_rounds < 1:
        return f"--layout-rounds {args.layout_rounds}: allowed: an integer >= 1", [], -1, -1
    if args.layouts != 0 and not 2 <= args.layouts <= 64:
        return f"--layouts {args.layouts}: allowed: 0 (skip) or an integer in [2, 64]", [], -1, -1
    if not 100_000 <= args.icount_ops <= 100_000_000:
        return f"--icount-ops {args.icount_ops}: allowed: an integer in [100000, 100000000]", [], -1, -1
    try:
        modes = sorted({int(m) for m in str(args.modes).split(",") if m.strip()})
    except ValueError:
        modes = []
    if not modes or any(m not in (0, 1, 2) for m in modes):
        return f"--modes {args.modes!r}: allowed: a comma list of 0, 1, 2", [], -1, -1
    allowed = sorted(os.sched_getaffinity(0))
    if not args.cpus:
        p_cpu, c_cpu = (allowed[-2], allowed[-1]) if len(allowed) >= 2 else (allowed[0], allowed[0])
        return "", modes, p_cpu, c_cpu
    try:
        p_cpu, c_cpu = (int(x) for x in args.cpus.split(","))
    except ValueError:
        return f"--cpus {args.cpus!r}: allowed: P,C with two CPU numbers", [], -1, -1
    for c in (p_cpu, c_cpu):
        if c not in allowed:
            return f"--cpus: CPU {c} is not online/allowed; allowed: {allowed}", [], -1, -1
    return "", modes, p_cpu, c_cpu


def _print_setup(m: dict, prep: Prepared) -> None:
    print(f"machine: {m['cpu_model']}, nproc {m['nproc']} (allowed {len(m['allowed_cpus'])}), "
          f"{m['machine']}, kernel {m['kernel']}")
    print(f"compiler: {prep.info.compiler_version}; flags: {' '.join(prep.info.cflags)}")
    if prep.header is not None:
        print(f"real header: {prep.header} ({prep.generation} generation)")
    else:
        print(f"real header: none ({prep.no_header_reason}); the lines that need it are skipped")
    sys.stdout.flush()


def _icount_part(args, prep: Prepared) -> tuple[str, dict | None]:
    """Print the instruction counts and their checks: (the error, or ""; the JSON record)."""
    print()
    av = icount.availability()
    if not av.ok:
        print(f"instruction counts: skipped: {av.reason}")
        return "", None
    per_op = {}
    for v in ("batch", KERNEL_NAME, "reorder", KERNEL_REORDER, "prebatch", KERNEL_PERENTRY):
        if v in prep.exes:
            try:
                per_op[v] = icount_per_op(prep.exes[v], args.icount_ops)
            except RuntimeError as e:
                return f"callgrind count of {v}: {e}", None
    checks = icount_checks(per_op)
    if prep.header is not None and prep.generation != "batch":
        for c in checks:
            if c["met"] is None:
                c["skipped"] += (f" (the real header is the {prep.generation} generation: "
                                 "the derived variants need the batch generation)")
    for line in format_icount(per_op, checks, args.icount_ops, ICOUNT_SIZE, prep.notes):
        print(line)
    print(f"  ({av.version}; toggle-collect {icount.TOGGLE})")
    return "", {"ops": args.icount_ops, "size": ICOUNT_SIZE, "per_op": per_op,
                "checks": checks, "valgrind": av.version}


def run(args) -> int:
    why, modes, p_cpu, c_cpu = _check_args(args)
    if why:
        return _fail(why)
    try:
        prep = prepare(args.kernel_header)
    except (KernelHeaderError, BuildError, DeriveError) as e:
        return _fail(str(e))
    m = machine()
    _print_setup(m, prep)
    icount_result = None
    if not args.no_icount:
        why, icount_result = _icount_part(args, prep)
        if why:
            return _fail(why)
        sys.stdout.flush()
    doc = {"machine": m, "icount": icount_result}
    if not args.icount_only:
        variants = ["batch", "prebatch"] + ([KERNEL_NAME] if prep.header is not None else [])
        pairs = [("prebatch", "batch", "prebatch/batch")]
        if prep.header is not None:
            pairs.insert(0, ("batch" if prep.generation == "batch" else "prebatch", KERNEL_NAME, "ours/real"))
        why, rows = run_timing(args, prep.exes, variants, pairs, modes, (p_cpu, c_cpu),
                               prep.no_header_reason if prep.header is None else "")
        if why:
            return _fail(why)
        layouts_result = None
        if prep.header is not None and args.layouts:
            ours = pairs[0][0]
            one_build = {mo: one_build_ratio(rows, mo, ours, KERNEL_NAME) for mo in modes}
            layouts_result = layouts_timing(args, prep, modes, one_build, ours)
        doc = {"machine": m, "rows": rows, "icount": icount_result, "layouts": layouts_result,
               "args": {k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, type(None)))}}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(doc, indent=1))
    return 0


def layouts_timing(args, prep, modes, one_build: dict, ours: str) -> list[dict]:
    """Ours against the real header with ``args.layouts`` layouts per variant (``ringlab run
    ptr_ring`` into the scratch folder), compared by ringlab (design ``layouts``); prints one
    line per mode with the one-build ratio beside it and returns the rows."""
    from ringlab.experiments import get
    from ringlab.run import run_experiment
    from ringlab.studies.harness_compare import RATIO_TOLERANCE, layouts_ratio
    values = get("ptr_ring").resolve({
        "variants": f"{ours},{KERNEL_NAME}", "kernel_headers": f"{KERNEL_NAME}={prep.header}",
        "modes": ",".join(map(str, modes)), "sizes": str(args.size), "count": args.count,
        "trials": args.layouts * args.layout_rounds, "warmup": args.warmup, "layouts": args.layouts, "seed": args.seed,
        "icount": False}, profile="quick")
    print()
    print(f"timing across code layouts: ringlab run ptr_ring, {args.layouts} layouts per variant, "
          f"{args.layout_rounds} rounds per layout pair ({args.layouts * args.layout_rounds} trials per variant "
          "and mode); ours/real from the t interval across the layout pairs")
    sys.stdout.flush()
    res = run_experiment("ptr_ring", values, None, progress=False, log=lambda msg: None)
    table = layouts_ratio(res.out_dir, ours, KERNEL_NAME)
    print(f"  run folder: {res.out_dir}")
    print(f"{'mode':>4}  {'ratio':<15} {'layouts':>7} {'estimate':>8}  {'CI':<15} {'one build':>9}  target")
    out = []
    for _, r in table.iterrows():
        mode = int(r["mode"])
        target = f"CI includes a value within 1.00 +- {RATIO_TOLERANCE:.2f}: " + (
            "n/a (no CI)" if r["within_target"] is None else "met" if r["within_target"] else "MISSED")
        one = one_build.get(mode, float("nan"))
        ci = f"[{r['ratio_ci_low']:.3f}, {r['ratio_ci_high']:.3f}]"
        print(f"{mode:>4}  {'ours/real':<15} {str(r['layouts']):>7} {r['ratio']:>8.3f}  {ci:<15} {one:>9.3f}  {target}")
        out.append({**{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}, "one_build_ratio": one})
    return out


def main(argv=None) -> int:
    return options.run_alone(command, argv, "harness_fidelity.py")


if __name__ == "__main__":
    sys.exit(main())
