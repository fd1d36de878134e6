"""Reading kernel header and patch files safely, and finding ptr_ring.h in a tree.

Every header or patch byte ringlab reads goes through :func:`read_regular`: a bounded read of a
regular file (no device, FIFO or folder; ``follow=False`` refuses a symlink), so a hostile
path cannot hang or exhaust a build.  :class:`KernelHeaderError` is the one error of the
kernel-header sources; its message names the file.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from ringlab.errors import InputFileError

#: Where ptr_ring.h lives in a kernel tree.
IN_TREE = "include/linux/ptr_ring.h"
# Where the header lives below a tree root, in the order we try them.
_TREE_CANDIDATES = (IN_TREE, "linux/ptr_ring.h", "ptr_ring.h")


class KernelHeaderError(InputFileError):
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
                                    "allowed: a regular file", input=p)
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(p, flags)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what} {p}: does not exist", input=p) from None
    except OSError as e:
        raise KernelHeaderError(f"{what} {p}: cannot read: {e.strerror or e}", input=p) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise KernelHeaderError(f"{what} {p}: not a regular file ({file_kind(st.st_mode)})", input=p)
        if st.st_size > limit:
            raise KernelHeaderError(f"{what} {p}: {st.st_size} bytes, more than the {limit} allowed", input=p)
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
    except OSError as e:
        raise KernelHeaderError(f"{what} {p}: cannot read: {e.strerror or e}", input=p) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise KernelHeaderError(f"{what} {p}: more than the {limit} bytes allowed", input=p)
    return data


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink")):
        if test(mode):
            return name
    return f"mode {mode:o}"


def find_in_tree(p: Path) -> Path:
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
