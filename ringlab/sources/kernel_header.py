"""Kernel-header mode: compile a user's REAL ``include/linux/ptr_ring.h``.

Users A/B their own kernel patch with ``--kernel-header NAME=SOURCE``: SOURCE is a
``ptr_ring.h`` file, or the root of a kernel tree or of a headers package
(``/usr/src/linux-headers-*-common``), ``git:TREE@REV``, or ``BASE+PATCH`` (see
ringlab.sources.header_source, :func:`resolve_source`).  The header is compiled unmodified in
user space through our compat shim (``csrc/compat/``): the stub directory
``csrc/compat/include`` goes first on the include path so the header's
``#include <linux/...>`` lines land on empty stubs, and
``csrc/compat/kernel_ptr_ring.h`` includes ``kernel_shim.h`` (pthread spinlocks,
aligned kmalloc, READ_ONCE, barriers...) before the header itself.  NAME then
builds and benchmarks exactly like a built-in variant.

Two generations exist (v4.8 .. mainline), and the harness must know which
(``RINGLAB_GEN_BATCH``) because only the newer one has ``r->batch``:

* ``prebatch``  a single ``consumer`` index (v4.8 - v4.11)
* ``batch``     ``consumer_head`` / ``consumer_tail`` / ``batch`` (v4.12+)

Everything here builds argv lists; nothing goes through a shell, so paths with
spaces work.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ringlab.paths import expand_user
from ringlab.names import NAME_RULE, name_problem
from ringlab import catalog, paths
from ringlab.paths import CSRC
from ringlab.sources.header_files import IN_TREE, KernelHeaderError, read_header_bytes
from ringlab.sources.header_source import resolve_source
from ringlab.system import privilege

#: the two generations of the kernel's struct ptr_ring, named as their layouts (ringlab.catalog)
PREBATCH, BATCH = catalog.variants.PREBATCH_LAYOUT.name, catalog.variants.BATCH_LAYOUT.name

COMPAT_DIR = CSRC / "compat"
STUB_INCLUDE_DIR = COMPAT_DIR / "include"
WRAPPER = "compat/kernel_ptr_ring.h"       # relative to csrc/, as the harness includes it

#: a NAME is a file name (build/bin/ptr_ring_test_NAME) and a raw.csv variant: one name
#: (ringlab.names: NAME_RULE, at most MAX_NAME_LEN characters)

# A tiny translation unit that includes the wrapper and names every function
# the harness calls, so a header that compiles but lacks the API fails here,
# with a clear message, instead of deep inside the harness build.
_CHECK_TU = r"""
#include RINGLAB_RING_HEADER
void ringlab_kernel_header_check(void);
void ringlab_kernel_header_check(void)
{
	static struct ptr_ring r;
	void *p;
	if (ptr_ring_init(&r, 16, GFP_KERNEL))
		return;
	(void)__ptr_ring_produce(&r, (void *)1);
	(void)__ptr_ring_full(&r);
	(void)__ptr_ring_empty(&r);
	p = __ptr_ring_peek(&r);
	p = __ptr_ring_consume(&r);
	(void)ptr_ring_produce(&r, p);
	p = ptr_ring_consume(&r);
	(void)ptr_ring_consume_batched(&r, &p, 1);
	(void)p;
#if RINGLAB_GEN_BATCH
	(void)r.batch;
#endif
	ptr_ring_cleanup(&r, (void (*)(void *))0);
}
"""

@dataclass(frozen=True)
class KernelVariant:
    """One ``--kernel-header NAME=PATH``, resolved and classified."""
    name: str
    header: Path
    generation: str
    flags: list[str] = field(default_factory=list, compare=False)


def parse_spec(spec: str) -> tuple[str, Path]:
    """``"NAME=PATH"`` -> ``(name, Path(PATH))``.  PATH is not resolved here."""
    if not isinstance(spec, str) or "=" not in spec:
        raise KernelHeaderError(
            f"--kernel-header: expected NAME=PATH (e.g. mine=~/linux), got {spec!r}")
    name, _, path = spec.partition("=")
    name, path = name.strip(), path.strip()
    why = name_problem(name)
    if why is not None:
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise KernelHeaderError(f"--kernel-header: invalid NAME {shown!r} ({why}); allowed: {NAME_RULE}")
    if name in catalog.VARIANT_NAMES:   # a kernel-header NAME may not shadow a built-in variant
        raise KernelHeaderError(
            f"--kernel-header: NAME {name!r} clashes with a built-in variant; "
            f"choose a name other than {', '.join(catalog.VARIANT_NAMES)}")
    if not path:
        raise KernelHeaderError(f"--kernel-header: empty PATH in {spec!r}; expected NAME=PATH")
    return name, expand_user(path, KernelHeaderError)

def resolve_header(path) -> Path:
    """The ptr_ring.h file to compile for any header source (see :func:`resolve_source`):
    a file, a kernel tree or headers package root, ``git:TREE@REV`` or ``BASE+PATCH``."""
    return resolve_source(path).header


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def detect_generation(header) -> str:
    """``"prebatch"`` (one ``consumer`` field) or ``"batch"`` (``consumer_head``)."""
    header = Path(header)
    try:
        text = _strip_comments(read_header_bytes(header).decode(errors="replace"))
    except OSError as e:
        raise KernelHeaderError(f"kernel header {header}: cannot read: {e}") from None
    m = re.search(r"struct\s+ptr_ring\s*\{(.*?)\}\s*;", text, flags=re.S)
    if not m:
        raise KernelHeaderError(f"kernel header {header}: no 'struct ptr_ring {{ ... }};' definition found")
    body = m.group(1)
    if re.search(r"\bconsumer_head\b", body):
        return BATCH
    if re.search(r"\bconsumer\b", body):
        return PREBATCH
    raise KernelHeaderError(
        f"kernel header {header}: struct ptr_ring has neither 'consumer_head' (v4.12+) nor "
        "'consumer' (v4.8-v4.11); cannot tell which generation it is")


def has_consume_batched(header) -> bool:
    """Whether the header defines ptr_ring_consume_batched (added after v4.8).

    When it does not, csrc/compat/kernel_ptr_ring.h supplies one built from the
    header's own __ptr_ring_consume, because the harness contract needs it."""
    text = _strip_comments(read_header_bytes(header).decode(errors="replace"))
    return re.search(r"\bptr_ring_consume_batched\s*\(", text) is not None


def _c_string(what: str, value: str) -> str:
    # The value becomes a C string literal inside a -D argument.  No shell is
    # involved, so spaces are fine; a quote, backslash or newline would end or
    # corrupt the literal, so refuse those rather than escape them.
    if any(c in value for c in '"\\\n'):
        raise KernelHeaderError(f"{what} {value!r}: contains a quote, backslash or newline, "
                                "which cannot be passed to the C compiler as a string")
    return f'"{value}"'


def compile_flags(name: str, header) -> list[str]:
    """Compiler arguments that build the harness against this header as variant ``name``.

    The stub directory must precede every other -I so the header's
    ``#include <linux/...>`` resolve to our stubs.
    """
    header = Path(header).resolve()
    gen = detect_generation(header)
    return [
        f"-I{STUB_INCLUDE_DIR}",
        f"-I{CSRC}",
        f"-DRINGLAB_RING_HEADER={_c_string('ring header', WRAPPER)}",
        f"-DRINGLAB_KERNEL_HEADER={_c_string('kernel header path', str(header))}",
        f"-DRINGLAB_GEN_BATCH={1 if gen == BATCH else 0}",
        f"-DRINGLAB_KERNEL_HAS_CONSUME_BATCHED={1 if has_consume_batched(header) else 0}",
        f"-DRINGLAB_VARIANT={_c_string('variant name', name)}",
    ]


def first_error(stderr: str) -> str:
    """The first compiler diagnostic that is an error (or the first line, if none is marked)."""
    lines = [ln.rstrip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\b(fatal )?error:", ln, re.I):
            return ln.strip()
    return lines[0].strip() if lines else "(no compiler output)"


def check_compiles(header, cc: str = "gcc", extra_flags: list[str] | None = None) -> None:
    """Compile a tiny TU through the shim (-fsyntax-only); raise KernelHeaderError if it fails."""
    header = resolve_header(header)
    with privilege.workdir("check") as work:
        compiled = header
        if work is not None:
            # under root the check runs as the unprivileged user, on a copy in its own folder
            compiled = work / header.name
            compiled.write_bytes(read_header_bytes(header))
            privilege.give(compiled)
        flags = compile_flags("check", header)
        flags = [f.replace(str(Path(header).resolve()), str(compiled)) if f.startswith("-DRINGLAB_KERNEL_HEADER=") else f
                 for f in flags]
        if work is not None and not paths.others_can_reach(paths.CSRC):
            # the shim in a checkout the user cannot reach (a clone in /root): its readable copy
            here, there = str(paths.CSRC), str(privilege.readable_copy(paths.CSRC, "csrc"))
            flags = [f.replace(here, there) for f in flags]
        # implicit declarations are errors so that a header lacking part of the API
        # is reported here, not as a link error deep in the harness build.
        argv = [cc, "-std=gnu11", "-fsyntax-only", "-Werror=implicit-function-declaration",
                *flags, *(extra_flags or []), "-x", "c", "-"]
        proc = _run_check(argv, work, header, cc)
    if proc.returncode != 0:
        raise KernelHeaderError(
            f"kernel header {header} does not compile through the ringlab shim "
            f"(csrc/compat/kernel_shim.h): {first_error(proc.stderr)}")


def _run_check(argv: list[str], work, header: Path, cc: str) -> subprocess.CompletedProcess:
    if work is not None and shutil.which(cc) is None:   # setpriv would report it less clearly
        raise KernelHeaderError(f"kernel header {header}: C compiler {cc!r} not found")
    try:
        return subprocess.run(privilege.wrap(argv), input=_CHECK_TU, capture_output=True, text=True,
                              timeout=120, cwd=None if work is None else str(work),
                              env=privilege.env(home=work))
    except FileNotFoundError:
        raise KernelHeaderError(f"kernel header {header}: C compiler {cc!r} not found") from None


def kernel_variant(spec: str, check: bool = True, cc: str = "gcc") -> KernelVariant:
    """Parse ``NAME=PATH``, find the header, classify it and (optionally) check that it compiles."""
    name, path = parse_spec(spec)
    header = resolve_header(path)
    gen = detect_generation(header)
    if check:
        check_compiles(header, cc=cc)
    return KernelVariant(name=name, header=header, generation=gen, flags=compile_flags(name, header))


#: where distributions install kernel header trees and sources
USR_SRC = Path("/usr/src")


def _natural(p: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))]


def header_trees(root: Path | None = None) -> list[Path]:
    """The kernel header trees on this machine (each a ``/usr/src/*`` folder holding
    ``include/linux/ptr_ring.h``), newest version first: what ``ringlab env --headers`` prints
    and what a ``PATH`` header source may name."""
    root = Path(root) if root is not None else USR_SRC
    found = [p.parents[2] for p in root.glob(f"*/{IN_TREE}")]
    return sorted(found, key=_natural, reverse=True)


def debian_header() -> Path | None:
    """The newest Debian ``linux-headers-*-common`` ptr_ring.h on this machine, if any."""
    found = sorted(Path("/usr/src").glob(f"linux-headers-*-common/{IN_TREE}"), key=_natural)
    return found[-1] if found else None
