"""Kernel-header mode: compile a user's REAL ``include/linux/ptr_ring.h``.

Users A/B their own kernel patch with ``--kernel-header NAME=SOURCE``: SOURCE is a
``ptr_ring.h`` file, or the root of a kernel tree or of a headers package
(``/usr/src/linux-headers-*-common``), ``git:TREE@REV``, or ``BASE+PATCH`` (see
"header sources" below, :func:`resolve_source`).  The header is compiled unmodified in
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

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ringlab import paths
from ringlab.sources import git_source, patchmail
from ringlab.paths import CSRC
from ringlab.system import git as hgit

#: Built-in ring variants; a kernel-header NAME may not shadow one of them.
BUILTIN_VARIANTS = ("prebatch", "batch", "reorder", "spsc")
GENERATIONS = ("prebatch", "batch")

COMPAT_DIR = CSRC / "compat"
STUB_INCLUDE_DIR = COMPAT_DIR / "include"
WRAPPER = "compat/kernel_ptr_ring.h"       # relative to csrc/, as the harness includes it

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
#: a NAME is a file name (build/bin/ptr_ring_test_NAME) and a raw.csv variant: short
MAX_NAME_LEN = 64
# Where the header lives below a tree root, in the order we try them.
_TREE_CANDIDATES = ("include/linux/ptr_ring.h", "linux/ptr_ring.h", "ptr_ring.h")

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


class KernelHeaderError(Exception):
    """A kernel header could not be found, recognised or compiled.  The message names the file."""


#: The largest ptr_ring.h read (mainline's is about 17 KiB).
MAX_HEADER_BYTES = 4 << 20


#: The largest patch or mbox read.
MAX_PATCH_BYTES = 64 << 20


def read_header_bytes(p, follow: bool = True) -> bytes:
    """The bytes of a header file: a regular file of at most MAX_HEADER_BYTES, read with a
    bounded read.  ``follow=False`` refuses a symlink (O_NOFOLLOW) instead of following it.

    A device, FIFO, folder or oversized file raises KernelHeaderError naming the file."""
    return read_regular(p, MAX_HEADER_BYTES, "kernel header", follow)


def read_regular(p, limit: int, what: str, follow: bool = True) -> bytes:
    """At most ``limit`` bytes of the regular file ``p`` (bounded read), else KernelHeaderError
    naming ``what`` and the file."""
    p = Path(p)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        if p.is_symlink():
            raise KernelHeaderError(f"{what} {p}: is a symlink (to {os.readlink(p)}); "
                                    "allowed: a regular file")
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what} {p}: does not exist") from None
    except OSError as e:
        raise KernelHeaderError(f"{what} {p}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelHeaderError(f"{what} {p}: not a regular file ({_file_kind(st.st_mode)})")
        if st.st_size > limit:
            raise KernelHeaderError(f"{what} {p}: {st.st_size} bytes, more than the {limit} allowed")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    except OSError as e:
        raise KernelHeaderError(f"{what} {p}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise KernelHeaderError(f"{what} {p}: more than the {limit} bytes allowed")
    return data


def _file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return f"mode {mode:o}"


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
    if len(name) > MAX_NAME_LEN or not _NAME_RE.match(name) or name in (".", ".."):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise KernelHeaderError(
            f"--kernel-header: invalid NAME {shown!r} ({len(name)} characters); allowed: 1 to {MAX_NAME_LEN} "
            "letters, digits, '_', '.', '-' ([A-Za-z0-9_.-]+, not '.' or '..')")
    if name in BUILTIN_VARIANTS:
        raise KernelHeaderError(
            f"--kernel-header: NAME {name!r} clashes with a built-in variant; "
            f"choose a name other than {', '.join(BUILTIN_VARIANTS)}")
    if not path:
        raise KernelHeaderError(f"--kernel-header: empty PATH in {spec!r}; expected NAME=PATH")
    return name, Path(path).expanduser()


def _find_in_tree(p: Path) -> Path:
    """The absolute path of ptr_ring.h given a file, a kernel tree or a headers package root."""
    if p.exists() and not p.is_dir():
        read_header_bytes(p)          # a regular file of a sane size, or KernelHeaderError
        return p.resolve()
    if p.is_dir():
        for rel in _TREE_CANDIDATES:
            cand = p / rel
            if cand.is_file():
                return cand.resolve()
        raise KernelHeaderError(
            f"kernel header: no ptr_ring.h under {p} (looked for "
            + ", ".join(_TREE_CANDIDATES)
            + "); pass the header file itself, a kernel tree root, or a headers package root "
              "such as /usr/src/linux-headers-<version>-common")
    raise KernelHeaderError(f"kernel header: {p} does not exist; allowed: a ptr_ring.h, a kernel "
                            "tree or headers package root, git:TREE@REV, BASE+PATCH, "
                            "BASE+lore:MESSAGE-ID")


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
        return "batch"
    if re.search(r"\bconsumer\b", body):
        return "prebatch"
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
        f"-DRINGLAB_GEN_BATCH={1 if gen == 'batch' else 0}",
        f"-DRINGLAB_KERNEL_HAS_CONSUME_BATCHED={1 if has_consume_batched(header) else 0}",
        f"-DRINGLAB_VARIANT={_c_string('variant name', name)}",
    ]


def first_error(stderr: str) -> str:
    """The first compiler diagnostic that is an error (or the first line, if none is marked)."""
    lines = [ln.rstrip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\b(fatal )?error:", ln):
            return ln.strip()
    return lines[0].strip() if lines else "(no compiler output)"


def check_compiles(header, cc: str = "gcc", extra_flags: list[str] | None = None) -> None:
    """Compile a tiny TU through the shim (-fsyntax-only); raise KernelHeaderError if it fails."""
    header = resolve_header(header)
    flags = compile_flags("check", header)
    # implicit declarations are errors so that a header lacking part of the API
    # is reported here, not as a link error deep in the harness build.
    argv = [cc, "-std=gnu11", "-fsyntax-only", "-Werror=implicit-function-declaration",
            *flags, *(extra_flags or []), "-x", "c", "-"]
    try:
        proc = subprocess.run(argv, input=_CHECK_TU, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise KernelHeaderError(f"kernel header {header}: C compiler {cc!r} not found") from None
    if proc.returncode != 0:
        raise KernelHeaderError(
            f"kernel header {header} does not compile through the ringlab shim "
            f"(csrc/compat/kernel_shim.h): {first_error(proc.stderr)}")


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
    found = sorted(Path("/usr/src").glob("linux-headers-*-common/include/linux/ptr_ring.h"),
                   key=lambda p: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p))])
    return found[-1] if found else None


# ----------------------------------------------------------------------------- header sources
#
# A header source names the bytes of one ptr_ring.h:
#
#   PATH                 a ptr_ring.h, a kernel tree or a headers package root
#   git:TREE@REV         include/linux/ptr_ring.h at commit REV of the git repository TREE
#   BASE+PATCH           BASE (any source) with the ptr_ring.h hunks of PATCH applied, in order;
#                        PATCH is an mbox (one patch or a series), a git format-patch file,
#                        a plain diff, or lore:MESSAGE-ID (fetched with `b4 am`)
#
# Headers taken from git or patched are written under build/kernel_headers/ (by commit
# sha, or by the hash of base and patch) with a source.json next to them that records
# where they came from; a later resolve of that cached file returns the same record,
# so a NAME resolved once (ringlab run's parameter check) keeps its provenance in the
# build.  git, b4 and the patch files only ever appear as argv elements.

IN_TREE = "include/linux/ptr_ring.h"
SOURCE_RECORD = "source.json"


@dataclass
class HeaderSource:
    """One resolved header source: the file to compile and where its bytes came from."""
    spec: str
    header: Path
    sha256: str                   # of the header's content
    record: dict                  # provenance: kind, spec, header, sha256 and the kind's fields


def header_cache_dir() -> Path:
    return paths.build_dir() / "kernel_headers"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha256_path(p: Path) -> str:
    return sha256_bytes(read_header_bytes(p))


def _cached_record(header: Path) -> dict | None:
    side = header.with_name(SOURCE_RECORD)
    try:
        header.relative_to(header_cache_dir().resolve())
    except ValueError:
        return None
    try:
        rec = json.loads(side.read_text())
    except (OSError, ValueError):
        return None
    try:
        return rec if rec.get("sha256") == _sha256_path(header) else None
    except KernelHeaderError:
        return None


def _store(dirname: Path, data: bytes, record: dict) -> Path:
    """Write header bytes and their record into the cache (atomically); return the header path."""
    dirname.mkdir(parents=True, exist_ok=True)
    header = dirname / "ptr_ring.h"
    record = dict(record, header=str(header.resolve()), sha256=sha256_bytes(data))
    for path, payload in ((header, data), (dirname / SOURCE_RECORD,
                                           json.dumps(record, indent=1, sort_keys=True).encode())):
        fd, tmp = tempfile.mkstemp(dir=dirname, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    return header.resolve()


def resolve_source(spec) -> HeaderSource:
    """Resolve any header source (see the table above) to a file plus its provenance record."""
    s = str(spec).strip()
    if not s:
        raise KernelHeaderError("kernel header: empty source")
    p = Path(s).expanduser()
    if p.exists():
        header = _find_in_tree(p)
        rec = _cached_record(header) or {"kind": "path", "spec": s, "header": str(header),
                                         "sha256": _sha256_path(header)}
        return HeaderSource(s, header, rec["sha256"], rec)
    plus = [i for i, c in enumerate(s) if c == "+"]
    for i in reversed(plus):
        base, patch = s[:i], s[i + 1:]
        if base and (patch.startswith("lore:") or Path(patch).expanduser().is_file()):
            return _patched(s, base, patch)
    if s.startswith("git:"):
        return _from_git(s)
    if plus:
        raise KernelHeaderError(
            f"kernel header {s!r}: not a file, and no BASE+PATCH split names an existing patch "
            f"file (last PATCH tried: {s[plus[-1] + 1:]!r}); allowed: BASE+PATCH_FILE or "
            "BASE+lore:MESSAGE-ID")
    return HeaderSource(s, _find_in_tree(p), "", {})   # raises "does not exist"


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, timeout=kw.pop("timeout", 120), **kw)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what}: {argv[0]!r} is not installed") from None
    except subprocess.TimeoutExpired:
        raise KernelHeaderError(f"{what}: {argv[0]} timed out") from None


def _err(proc: subprocess.CompletedProcess) -> str:
    text = proc.stderr.decode(errors="replace") if isinstance(proc.stderr, bytes) else proc.stderr
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return "; ".join(lines[-3:]) or f"exit {proc.returncode}"


def _from_git(s: str) -> HeaderSource:
    """include/linux/ptr_ring.h at REV of TREE (see ringlab.git_source), cached by commit."""
    what = f"kernel header {s!r}"
    try:
        src = git_source.parse(s)
        sha = git_source.resolve_commit(src)
    except git_source.GitError as e:
        raise KernelHeaderError(f"kernel header {e}") from None
    tree = src.tree.resolve()
    rec = {"kind": "git", "spec": s, "tree": str(tree), "rev": src.rev, "commit": sha, "path": IN_TREE}
    cached = header_cache_dir() / "git" / sha / "ptr_ring.h"
    old = _cached_record(cached.resolve()) if cached.is_file() else None
    if old is not None and old.get("commit") == sha:
        # the bytes of a commit never change: keep them, but record this TREE and REV
        rec = dict(old, **rec)
        return HeaderSource(s, cached.resolve(), old["sha256"], rec)
    try:
        data = git_source.read_file(src, sha, IN_TREE, MAX_HEADER_BYTES)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what}: commit {sha[:12]} ({src.rev}) has no {IN_TREE}") from None
    except git_source.GitError as e:
        raise KernelHeaderError(f"kernel header {e}") from None
    header = _store(cached.parent, data, rec)
    rec = json.loads((cached.parent / SOURCE_RECORD).read_text())
    return HeaderSource(s, header, rec["sha256"], rec)


def fetch_lore(msgid: str) -> Path:
    """The series of lore message ``msgid`` as an mbox, fetched with ``b4 am`` (cached by id)."""
    mid = msgid.strip().strip("<>")
    if not mid or mid.startswith("-"):
        raise KernelHeaderError(f"lore:{msgid}: expected a Message-ID such as "
                                "20210101120000.1234-1-someone@example.org")
    dest = header_cache_dir() / "lore" / sha256_bytes(mid.encode())[:20]
    have = sorted(dest.glob("*.mbx")) if dest.is_dir() else []
    if have:
        return have[0]
    exe = shutil.which("b4")
    if exe is None:
        raise KernelHeaderError(f"lore:{mid}: b4 is not installed, so the series cannot be fetched "
                                "(install it with `pip install b4`, or save the series as an mbox "
                                "and give its path as PATCH)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        proc = _run([exe, "am", "-o", tmp, mid], f"lore:{mid}", timeout=300)
        mbx = sorted(Path(tmp).glob("*.mbx"))
        if proc.returncode != 0 or not mbx:
            raise KernelHeaderError(
                f"lore:{mid}: `b4 am` could not fetch the series (offline, or an unknown "
                f"Message-ID?): {_err(proc) if proc.returncode != 0 else 'b4 wrote no .mbx file'}")
        dest.mkdir(exist_ok=True)
        out = dest / mbx[0].name
        shutil.copyfile(mbx[0], out)
    return out


def _patched(s: str, base_spec: str, patch_spec: str) -> HeaderSource:
    base = resolve_source(base_spec)
    if patch_spec.startswith("lore:"):
        patch_file = fetch_lore(patch_spec[len("lore:"):])
    else:
        patch_file = Path(patch_spec).expanduser().resolve()
    data = read_regular(patch_file, MAX_PATCH_BYTES, f"kernel header {s!r}: patch")
    try:
        msgs = patchmail.read_patches(data, str(patch_file))
    except patchmail.PatchError as e:
        raise KernelHeaderError(f"kernel header {s!r}: {e}") from None
    touching = [m for m in msgs if IN_TREE in m.files]
    if not touching:
        files = sorted({f for m in msgs for f in m.files})
        raise KernelHeaderError(
            f"kernel header {s!r}: the patch{'es' if len(msgs) > 1 else ''} in {patch_spec} "
            f"({len(msgs)} message{'s' if len(msgs) > 1 else ''}) do{'' if len(msgs) > 1 else 'es'} "
            f"not touch {IN_TREE}; {'they touch' if len(msgs) > 1 else 'it touches'}: "
            + ", ".join(files[:8]) + (" ..." if len(files) > 8 else ""))
    key = sha256_bytes(f"{base.sha256}\n{sha256_bytes(data)}".encode())
    cached = header_cache_dir() / "patched" / key[:32] / "ptr_ring.h"
    rec = {"kind": "patch", "spec": s, "base": base.record,
           "patch": {"source": patch_spec, "path": str(patch_file), "sha256": sha256_bytes(data),
                     "messages": [dict(m.record(), applied=m in touching) for m in msgs]}}
    if cached.is_file() and _cached_record(cached.resolve()) is not None:
        return HeaderSource(s, cached.resolve(), _sha256_path(cached), dict(rec, header=str(cached.resolve()),
                                                                           sha256=_sha256_path(cached)))
    result = _apply(s, base, touching, len(msgs))
    header = _store(cached.parent, result, rec)
    return HeaderSource(s, header, sha256_bytes(result), json.loads((cached.parent / SOURCE_RECORD).read_text()))


_MODE_LINE = re.compile(r"^(?:new file mode|new mode|old mode|deleted file mode|index [0-9a-f]+\.\.[0-9a-f]+)"
                        r"\s+(\d{6})\s*$", re.M)
_PATH_LINE = re.compile(r"^(?:diff --git a/(\S+) b/(\S+)|--- (?:a/)?(\S+)|\+\+\+ (?:b/)?(\S+)|"
                        r"rename (?:from|to) (\S+)|copy (?:from|to) (\S+))\s*$", re.M)


def _check_patch(s: str, m, total: int) -> None:
    """Refuse a patch that makes a symlink or names a path outside the tree it applies to."""
    title = m.subject or "(no subject)"
    where = f"kernel header {s!r}: patch {m.index}/{total} {title!r}"
    for mm in _MODE_LINE.finditer(m.diff):
        if mm.group(1) == "120000":
            raise KernelHeaderError(f"{where}: makes a symlink (mode 120000); allowed: changes "
                                    f"to the regular file {IN_TREE}")
    for mm in _PATH_LINE.finditer(m.diff):
        path = next(g for g in mm.groups() if g)
        if path == "/dev/null":
            continue
        if path.startswith("/") or ".." in path.split("/"):
            raise KernelHeaderError(f"{where}: names the path {path!r}, outside the kernel tree; "
                                    "allowed: paths relative to the tree root")


def _apply(s: str, base: HeaderSource, msgs: list, total: int) -> bytes:
    """Apply the ptr_ring.h hunks of each message, in order, to a copy of the base header.

    The result must be the regular file include/linux/ptr_ring.h (not a symlink, not
    deleted) of at most MAX_HEADER_BYTES; anything else is refused naming the patch."""
    for m in msgs:
        _check_patch(s, m, total)
    with tempfile.TemporaryDirectory(prefix="ringlab-patch-") as tmp:
        work = Path(tmp) / "tree"
        (work / IN_TREE).parent.mkdir(parents=True)
        (work / IN_TREE).write_bytes(read_header_bytes(base.header))
        for m in msgs:
            title = m.subject or "(no subject)"
            where = f"kernel header {s!r}: patch {m.index}/{total} {title!r}"
            pf = Path(tmp) / f"{m.index:04d}.patch"
            pf.write_text(m.diff)
            try:
                proc = hgit.apply(pf, work, include=IN_TREE, what=where)
            except hgit.GitError as e:
                raise KernelHeaderError(str(e)) from None
            if proc.returncode != 0:
                err = proc.stderr.decode(errors="replace")
                mm = re.search(r"patch failed: (\S+):(\d+)", err)
                hunk = patchmail.hunk_at(m.diff, IN_TREE, int(mm.group(2)) if mm else None)
                raise KernelHeaderError(
                    f"{where} does not apply to "
                    f"{base.spec} (sha256 {base.sha256[:12]}): "
                    + "; ".join(ln.strip() for ln in err.splitlines() if ln.startswith("error") and "while searching" not in ln)
                    + ("\nfailing hunk:\n" + hunk if hunk else ""))
            try:
                st = os.lstat(work / IN_TREE)
            except FileNotFoundError:
                raise KernelHeaderError(f"{where}: deletes {IN_TREE} (or renames it away); allowed: "
                                        f"patches that change {IN_TREE}") from None
            if not stat.S_ISREG(st.st_mode):
                raise KernelHeaderError(f"{where}: turns {IN_TREE} into {_file_kind(st.st_mode)}; "
                                        "allowed: patches that keep it a regular file")
        try:
            return read_header_bytes(work / IN_TREE, follow=False)
        except KernelHeaderError as e:
            raise KernelHeaderError(f"kernel header {s!r}: the patched {IN_TREE}: "
                                    f"{str(e).split(': ', 1)[-1]}") from None
