"""A patch under test: built-in test patches, the two arms of its A/B, and what it changed.

* ``builtin_patch`` / ``write_builtin``: test patches generated at run time against
  a user's ``ptr_ring.h`` (below);
* ``plan_ab``: the header sources of the two arms, ``base=BASE`` and
  ``patched=BASE+PATCH``, in the ``kernel_headers`` syntax of ``ringlab run``;
* ``instructions_table`` / ``function_sizes``: instructions per operation of both
  arms (callgrind rows of raw.csv) and ``nm -S`` sizes of the measured functions.

Built-in test patches
---------------------

An A/B of a kernel patch needs a patch.  To show the workflow end to end without
committing kernel code, ringlab writes its own patch against whatever base header
the user names (the Debian headers package by default): it reads the base,
inserts a few lines of our own after a recognisable anchor, and emits a
``git format-patch``-style mail holding a unified diff of
``include/linux/ptr_ring.h``.  Only the inserted lines are ours; the context
lines of the diff come from the user's header at run time and are never stored
in this repository.

Built-ins (``builtin:NAME`` or ``builtin:NAME:N``):

``flush-delay[:N]``
    After each batch flush in ``__ptr_ring_discard_one`` (the statement that
    moves ``consumer_tail`` up to the new head, right after the NULLing loop),
    spin ``N`` iterations (default 64) of an empty asm statement with a memory
    clobber, i.e. the kernel's ``barrier()``.  The ring's behaviour is
    unchanged; every flush costs a fixed extra loop.  With the default batch of
    16 slots and a ring of 1000, a flush happens 63 times per 1000 consumed
    entries, so the expected cost is at least ``N * 2 * 63 / 1000`` extra
    instructions per operation (two per iteration at -O2; ``expected_extra_per_op``),
    plus a few per flush for the loop set-up.

The anchor must be found exactly once inside ``__ptr_ring_discard_one``;
otherwise (a v4.8-v4.11 header has no ``consumer_tail``, a rewritten function may
have several) ``PatchError`` says which anchor was looked for, in which file.
"""
from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ringlab import rundir
from ringlab.rundir import read_raw

PREFIX = "builtin:"
HEADER_IN_TREE = "include/linux/ptr_ring.h"
DEFAULT_SPINS = 64
MAX_SPINS = 100_000
#: instructions of one iteration of the inserted loop at -O2 on x86-64 (gcc counts down:
#: sub, jne); only used for the *expected* figure stated before measuring.  Loop set-up
#: and the reloads forced by the memory clobber add a few more per flush.
INSNS_PER_SPIN = 2

# A fixed author and date make the generated mail byte-identical for the same base.
_FROM = "ringlab <ringlab@ringlab.invalid>"
_DATE = "Thu, 1 Jan 1970 00:00:00 +0000"

_FUNC_RE = re.compile(r"\b__ptr_ring_discard_one\s*\(\s*struct\s+ptr_ring\s*\*\s*\w+\s*\)\s*\{")
# "r->consumer_tail = consumer_head;" - an assignment from a variable (not "= 0").
_ANCHOR_RE = re.compile(r"^([ \t]*)(\w+)->consumer_tail\s*=\s*([A-Za-z_]\w*)\s*;[ \t]*$")
ANCHOR_DESCRIPTION = ("the statement 'R->consumer_tail = VARIABLE;' that ends the batch flush "
                      "inside __ptr_ring_discard_one()")


class PatchError(ValueError):
    """A built-in patch spec is unknown or malformed, or its anchor is not in the header."""


@dataclass(frozen=True)
class BuiltinPatch:
    """A generated patch: the mail text and what it did."""
    spec: str          # normalised, e.g. "builtin:flush-delay:64"
    name: str          # "flush-delay"
    spins: int
    subject: str
    message_id: str
    base_header: Path
    base_sha256: str
    anchor_line: int   # 1-based line of the anchor in the base header
    text: str          # the mail (headers + body + unified diff)

    @property
    def diff(self) -> str:
        return self.text[self.text.index("diff --git "):]


BUILTINS = {
    "flush-delay": "spin N iterations (default 64) of barrier() after every batch flush of the consumer",
}


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
    spins = DEFAULT_SPINS
    if arg:
        if not arg.isdigit() or not 1 <= int(arg) <= MAX_SPINS:
            raise PatchError(f"patch: {spec!r}: N must be an integer in [1, {MAX_SPINS}]; "
                             f"allowed: builtin:{name} or builtin:{name}:N")
        spins = int(arg)
    return name, spins


def _blank_comments(text: str) -> str:
    """``text`` with comments and string literals replaced by spaces (same offsets, same lines)."""
    def blank(m: re.Match) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"", blank, text, flags=re.S)


def find_anchor(text: str, header: Path | str = "ptr_ring.h") -> tuple[int, str, str]:
    """(0-based line index, indentation, ring pointer name) of the flush anchor, or PatchError."""
    code = _blank_comments(text)
    m = _FUNC_RE.search(code)
    if not m:
        raise PatchError(f"patch builtin:flush-delay: {header}: no definition of "
                         "__ptr_ring_discard_one(struct ptr_ring *) found; the anchor is "
                         f"{ANCHOR_DESCRIPTION}")
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
        raise PatchError(f"patch builtin:flush-delay: {header}: __ptr_ring_discard_one has no closing brace")
    first = code.count("\n", 0, m.end())
    last = code.count("\n", 0, end)
    code_lines = code.splitlines()
    hits = [(i, mm) for i in range(first, last + 1)
            if (mm := _ANCHOR_RE.match(code_lines[i])) and mm.group(3) != "0"]
    if len(hits) != 1:
        why = ("not found" if not hits else
               f"found {len(hits)} times (lines {', '.join(str(i + 1) for i, _ in hits)}); expected once")
        gen = ""
        if not hits and not re.search(r"\bconsumer_tail\b", code):
            gen = " (this header has no consumer_tail: a v4.8-v4.11 header, before batched zeroing)"
        raise PatchError(f"patch builtin:flush-delay: {header}: anchor {why}{gen}; the anchor is "
                         f"{ANCHOR_DESCRIPTION}")
    i, mm = hits[0]
    return i, mm.group(1), mm.group(2)


def _delay_lines(indent: str, spins: int) -> list[str]:
    step = "\t" if "\t" in indent or not indent else "    "
    return [f"{indent}/* ringlab builtin:flush-delay: a fixed delay on every batch flush */",
            f"{indent}{{",
            f"{indent}{step}int ringlab_spin;",
            "",
            f"{indent}{step}for (ringlab_spin = 0; ringlab_spin < {spins}; ringlab_spin++)",
            f"{indent}{step}{step}__asm__ __volatile__(\"\" ::: \"memory\");",
            f"{indent}}}"]


def expected_extra_per_op(spins: int = DEFAULT_SPINS, size: int = 1000, batch: int = 16) -> float:
    """Expected extra instructions per operation in mode 0: flushes per op x loop cost.

    A flush happens every ``batch`` consumes and at the end of the array (ring sizes
    that are not a multiple of ``batch`` get one short batch per lap)."""
    flushes_per_lap = -(-size // batch)
    return spins * INSNS_PER_SPIN * flushes_per_lap / size


def builtin_patch(spec: str, base_header) -> BuiltinPatch:
    """Generate the built-in patch ``spec`` against ``base_header`` (a ptr_ring.h file)."""
    name, spins = parse_builtin(spec)
    base_header = Path(base_header)
    try:
        raw = base_header.read_bytes()
    except OSError as e:
        raise PatchError(f"patch {spec}: cannot read base header {base_header}: {e}") from None
    text = raw.decode("utf-8", errors="surrogateescape")
    idx, indent, ring = find_anchor(text, base_header)
    lines = text.splitlines(keepends=True)
    eol = "\r\n" if lines[idx].endswith("\r\n") else "\n"
    new = lines[:idx + 1] + [ln + eol for ln in _delay_lines(indent, spins)] + lines[idx + 1:]
    diff = "".join(difflib.unified_diff(lines, new, f"a/{HEADER_IN_TREE}", f"b/{HEADER_IN_TREE}", n=3))
    norm = f"{PREFIX}{name}:{spins}"
    sha = hashlib.sha256(raw).hexdigest()
    subject = f"[PATCH] ptr_ring: spin {spins} iterations after each batch flush"
    msgid = f"<{name}-{spins}.{sha[:12]}@ringlab.invalid>"
    added = len(_delay_lines(indent, spins))
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
        f"After the batch flush in __ptr_ring_discard_one() (after line {idx + 1},",
        f"'{ring}->consumer_tail = ...;'), spin {spins} iterations of an empty asm",
        "statement with a memory clobber (the kernel's barrier()).  Nothing",
        "else changes.  Expected: more instructions per operation, at least",
        f"{spins} x {INSNS_PER_SPIN} per flush (+{expected_extra_per_op(spins):.1f}/op for a ring of 1000 with the",
        "default batch of 16; loop set-up adds a little), and a slower ring",
        "in every mode.",
        "---",
        f" {HEADER_IN_TREE} | {added} {'+' * min(added, 60)}",
        f" 1 file changed, {added} insertions(+)",
        "",
        f"diff --git a/{HEADER_IN_TREE} b/{HEADER_IN_TREE}",
    ]
    text_out = "\n".join(body) + "\n" + diff + "-- \nringlab\n"
    return BuiltinPatch(spec=norm, name=name, spins=spins, subject=subject, message_id=msgid,
                        base_header=base_header, base_sha256=sha, anchor_line=idx + 1, text=text_out)


def write_builtin(spec: str, base_header, out_path) -> BuiltinPatch:
    """Generate ``spec`` against ``base_header`` and write the mail to ``out_path``."""
    p = builtin_patch(spec, base_header)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(p.text, encoding="utf-8", errors="surrogateescape")
    return p


# -- the two arms of an A/B --------------------------------------------------------------------
ARM_NAMES = ("base", "patched")
_SOURCE_HELP = ("a ptr_ring.h, a kernel tree or a headers package root (or another header source "
                "that `ringlab build --kernel-header` accepts)")
_PATCH_HELP = "a patch file, an mbox, lore:MESSAGE-ID, or builtin:flush-delay[:N]"


@dataclass(frozen=True)
class ABPlan:
    """What a patch A/B runs: two kernel-header variants of the same base."""
    base: str                        # header source of the unpatched arm
    patch: str                       # as given
    patch_file: Path | None          # the file handed to BASE+PATCH (generated for builtin:)
    builtin: BuiltinPatch | None
    names: tuple[str, str]
    kernel_headers: str              # "base=BASE,patched=BASE+PATCH[,control=BASE]"
    control: str | None = None       # the base again under another name: an A/A arm (same code)

    @property
    def variants(self) -> str:
        return ",".join(self.names + ((self.control,) if self.control else ()))

    @property
    def baseline(self) -> str:
        return self.names[0]

    @property
    def candidate(self) -> str:
        return self.names[1]


def default_base() -> str:
    """The distro kernel headers package root (Debian ``linux-headers-*-common``), or PatchError."""
    from ringlab.sources import kernel_header as kh
    h = kh.debian_header()
    if h is None:
        raise PatchError("parameter 'base': empty, and no distro kernel headers package is installed "
                         "(looked for /usr/src/linux-headers-*-common/include/linux/ptr_ring.h); allowed: "
                         f"{_SOURCE_HELP}; on Debian, `apt-get install linux-headers-<version>-common` "
                         "provides the default")
    return str(h.parents[2])


def base_header_file(base: str) -> Path:
    """The ``ptr_ring.h`` file of a base header source (needed to generate a built-in patch)."""
    from ringlab.sources import kernel_header as kh
    plain = not base.startswith("git:") and "+" not in base
    try:
        if plain:
            return kh.resolve_header(base)
        resolver = getattr(kh, "resolve_source", None)
        if resolver is None:
            raise kh.KernelHeaderError(f"{base!r} is not a file, tree or headers package")
        return Path(resolver(base))
    except kh.KernelHeaderError as e:
        raise PatchError(f"parameter 'base': {e}; allowed: {_SOURCE_HELP}") from None


#: Name of the optional A/A arm (the base header built again under another name).
CONTROL_NAME = "control"


def plan_ab(base: str = "", patch: str = "builtin:flush-delay", workdir=None,
            names: tuple[str, str] = ARM_NAMES, control: bool = False) -> ABPlan:
    """Validate ``base`` and ``patch`` and spell the two arms as ``kernel_headers``.

    ``control`` adds a third arm, ``control``: the base header again under another name.  It is
    built from the same source set (``ringlab provenance`` says "same code"), so its verdict
    against the baseline must not be faster or slower: an A/A check of the whole pipeline.

    ``base`` empty means the distro headers package.  A ``builtin:`` patch is generated
    against the base header into ``workdir`` (default ``build/patches``), named by the
    built-in and the base's sha256 so that the same base gives the same file."""
    from ringlab import paths
    base = (base or "").strip() or default_base()
    patch = (patch or "").strip()
    if not patch:
        raise PatchError(f"parameter 'patch': empty; allowed: {_PATCH_HELP}")
    if "," in base or "," in patch:
        raise PatchError("parameter 'base'/'patch': a comma would split the kernel_headers list; "
                         "allowed: paths without commas")
    builtin, pfile = None, None
    if is_builtin(patch):
        header = base_header_file(base)
        name, spins = parse_builtin(patch)
        bp = builtin_patch(patch, header)
        workdir = Path(workdir) if workdir else paths.build_dir() / "patches"
        pfile = workdir / f"{name}-{spins}-{bp.base_sha256[:12]}.patch"
        builtin = write_builtin(patch, header, pfile)
        ref = str(pfile)
    elif patch.startswith("lore:"):
        ref = patch
    else:
        pfile = Path(patch).expanduser()
        if not pfile.is_file():
            raise PatchError(f"parameter 'patch': no such file {patch!r}; allowed: {_PATCH_HELP}")
        pfile = pfile.resolve()
        ref = str(pfile)
    a, b = names
    c = CONTROL_NAME if control else None
    return ABPlan(base=base, patch=patch, patch_file=pfile, builtin=builtin, names=(a, b),
                  kernel_headers=f"{a}={base},{b}={base}+{ref}" + (f",{c}={base}" if c else ""), control=c)


def keep_patch(plan: ABPlan, run_dir) -> Path | None:
    """Copy the patch file into the run folder (committed with the results); its path."""
    if plan.patch_file is None:
        return None
    name = f"{plan.builtin.name}.patch" if plan.builtin else plan.patch_file.name
    name = name if rundir.files.PATCH_NAME.fullmatch(name) else f"{name}.patch"
    return rundir.write_bytes(run_dir, name, plan.patch_file.read_bytes())


# -- what the patch changed ----------------------------------------------------------------
def instructions_table(run_dir, plan: ABPlan):
    """Instructions per operation of both arms per configuration (callgrind rows of raw.csv).

    ``expected extra`` is the built-in patch's prediction (NaN for other patches)."""
    import pandas as pd

    from ringlab.report.vs_published import effective_batch
    df = read_raw(Path(run_dir) / "raw.csv")
    cols = ["mode", "size", "instructions/op " + plan.baseline, "instructions/op " + plan.candidate,
            "difference", "expected difference", "runs", "source"]
    if "icount_source" not in df.columns or not (df["icount_source"] == "callgrind").any():
        return pd.DataFrame([{c: ("no callgrind rows in this run (icount=false or valgrind missing)"
                                  if c == "source" else "") for c in cols}])
    ic = df[(df["icount_source"] == "callgrind") & (df["status"] == "ok")]
    rows = []
    for (mode, size), g in ic.groupby(["mode", "size"], sort=True):
        med = g.groupby(g["variant"].astype(str))["instructions_per_op"].median()
        a, b = med.get(plan.baseline, float("nan")), med.get(plan.candidate, float("nan"))
        batch = int(g["batch"].iloc[0]) if "batch" in g.columns else 0
        exp = (expected_extra_per_op(plan.builtin.spins, int(size), effective_batch(int(size), batch))
               if plan.builtin else float("nan"))
        same = all(v.nunique() == 1 for _, v in g.groupby("variant")["instructions_per_op"])
        rows.append(dict(zip(cols, [mode, size, round(a, 3), round(b, 3), round(b - a, 3),
                                    (f">= {exp:+.2f}" if exp == exp else "n/a"),
                                    len(g), "callgrind" + (", identical counts" if same else "")])))
    return pd.DataFrame(rows, columns=cols)


def nm_sizes(binary) -> dict[str, int]:
    """Bytes of each ``rl_measured_*`` function of ``binary`` (``nm -S``); {} when nm fails."""
    import subprocess
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", str(binary)], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    sizes = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[3].startswith("rl_measured_"):
            sizes[parts[3]] = int(parts[1], 16)
    return sizes


def function_sizes(binaries: dict[str, Path | str]):
    """One row per measured function, one column per arm (bytes), plus the difference."""
    import pandas as pd
    names = list(binaries)
    sizes = {n: nm_sizes(p) for n, p in binaries.items()}
    missing = [n for n in names if not sizes[n]]
    if missing:
        return pd.DataFrame([{"function": "n/a", "note": "no rl_measured_* symbols read from "
                              + ", ".join(f"{n} ({binaries[n]})" for n in missing)
                              + " (nm missing, or the binary is gone)"}])
    funcs = sorted(set().union(*[set(s) for s in sizes.values()]))
    rows = []
    for f in funcs:
        r = {"function": f.removeprefix("rl_measured_")}
        r.update({n: sizes[n].get(f) for n in names})
        if len(names) == 2 and all(sizes[n].get(f) is not None for n in names):
            r["difference"] = sizes[names[1]][f] - sizes[names[0]][f]
        rows.append(r)
    return pd.DataFrame(rows)


def run_binaries(run_dir, plan: ABPlan) -> dict[str, str]:
    """Paths of both arms' binaries as the run recorded them (env.json binaries_used)."""
    from ringlab.report.mail import read_env
    used = read_env(run_dir).get("binaries_used") or {}
    out = {}
    for n in plan.names:
        d = next((v for k, v in sorted(used.items()) if k.split("@")[0] == f"ptr_ring_test-{n}"), {})
        if d.get("path"):
            out[n] = d["path"]
    return out


__all__ = ["PatchError", "BuiltinPatch", "BUILTINS", "DEFAULT_SPINS", "is_builtin", "parse_builtin",
           "find_anchor", "builtin_patch", "write_builtin", "expected_extra_per_op", "ABPlan", "ARM_NAMES",
           "default_base", "base_header_file", "plan_ab", "keep_patch", "instructions_table", "nm_sizes",
           "function_sizes", "run_binaries"]
