"""The files of a run folder besides raw.csv and env.json: summaries, tables, the mail, logs
and figures.  Every write into a run folder goes through this module (or ``RunFolder``).

* ``write_text(run_dir, name, text)``, ``write_bytes(...)``, ``write_csv(run_dir, name, df)``:
  one of ``TEXT_FILES`` (or a patch: ``PATCH_NAME``), written atomically: a temporary file in the
  folder, fsync, rename over the old one.  A reader sees the old file or the new one.
* ``write_figure(run_dir, name, fig)``: ``figures/NAME.png`` and ``figures/NAME.svg`` (and
  ``.pdf`` when asked), deterministic: no timestamp or software version in the metadata, the
  SVG ids salted with the figure's name, so the same data gives the same bytes.
* ``append_line(run_dir, name, line)``: one line at the end of a log (``LOG_FILES``).

The tables of recomputed statistics (``STABLE_TABLES``: compare.csv, summary.csv) hold floats at
full precision (``repr``).  numpy's log and exp give results that differ in the last bits from
one CPU to another (their SIMD code paths: AVX-512 or not), so the same raw.csv summarized on
another machine gives the same table up to those bits.  Such a table is not written again: when
the file in the folder has the same cells, every number within a relative ``TABLE_REL_TOL``
(10^-9) of the new one and every other cell identical, it is kept as it is, byte for byte, and
``ringlab summarize`` on an unchanged run leaves it alone.  Any other change rewrites it.

Names are plain file names, never paths: ``../x``, ``a/b``, absolute paths and unknown names
are refused with ``DataError``.  So is a symlink in the way (the folder's ``figures/`` or the
file itself): files are opened relative to the folder's descriptor with ``O_NOFOLLOW``, so a
link planted in a committed run folder cannot redirect a write elsewhere.
"""
from __future__ import annotations

import csv
import errno
import io
import math
import os
import re
import stat
from pathlib import Path

from ringlab.errors import DISK_FULL_ERRNOS, DataError, disk_full
from ringlab.fmt import printable

#: text files of a run folder, and who renders them (rundir writes them all)
TEXT_FILES = (
    "summary.md",          # the report (ringlab.report), the studies' summaries
    "summary.csv",         # the report's summary table
    "summary.tex",         # the report's tables as LaTeX
    "compare.csv",         # the report's A/B comparisons
    "mail.txt",            # the run as a mailing-list reply (ringlab.report.mail)
    "runs.csv", "cross_machine.csv", "stale.csv", "random_effects.csv",   # compare-runs (notebook 90)
    "combined.csv",        # ringlab sessions: a comparison's runs combined by random effects
    "bisect.json", "build_error.txt",   # ringlab bisect (ringlab.lab.bisect)
)
#: CSV tables kept as they are when only float rounding noise differs (module docstring)
STABLE_TABLES = ("compare.csv", "summary.csv")
#: the relative difference of two numbers of a ``STABLE_TABLES`` file taken as rounding noise
TABLE_REL_TOL = 1e-9
#: append-only logs of a run folder
LOG_FILES = ("kmod-unload.log",)
#: other files a run folder may hold, by pattern: the patch under test (notebook 12), under the
#: suffixes ringlab.report.mail reads
PATCH_NAME = re.compile(r"[^/\x00.][^/\x00]*\.(patch|diff|mbox|mbx|eml)")
FILE_PATTERNS = (PATCH_NAME,)
#: figure formats and the metadata that would make their bytes differ between renders
FIGURE_FORMATS = {"png": {"Software": None}, "svg": {"Date": None, "Creator": None},
                  "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}}
#: a figure's name, and the name of the folder holding figures
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
FIGURE_DPI = 100


def _check_name(name: str, allowed: tuple[str, ...], patterns=()) -> None:
    if name in allowed or any(p.fullmatch(name) for p in patterns):
        return
    raise DataError(f"run folder file {name!r}: not a file ringlab writes in a run folder; allowed: "
                    + ", ".join(allowed + tuple(p.pattern for p in patterns)))


def _plain(what: str, name: str) -> str:
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or ".." in name:
        raise DataError(f"{what} {name!r}: not a plain name inside the run folder; allowed: letters, "
                        "digits, '_', '-', '.' (no '/', no '..')")
    return name


def _open_dir(path: Path, parent_fd: int | None = None, create: bool = True) -> int:
    """A descriptor of folder ``path`` (relative to ``parent_fd`` when given), never through a
    symlink; created when missing."""
    name = str(path) if parent_fd is None else path.name
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            if parent_fd is None:
                path.mkdir(parents=True, exist_ok=True)
            else:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise DataError(f"{path}: a symlink or not a folder; expected a run folder (ringlab writes "
                            "no file through a link)", input=path) from None
        raise


def _atomic(dir_fd: int, shown: Path, name: str, data: bytes) -> Path:
    """Write ``data`` to ``name`` in the folder ``dir_fd``: temp file, fsync, rename."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise DataError(f"{shown / name}: a symlink or not a regular file; ringlab replaces only its own "
                        "files in a run folder", input=shown / name)
    tmp = f".{name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as e:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
            raise disk_full(shown / name, e) from None
        raise
    return shown / name


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def same_table(old: bytes, new: bytes, rel_tol: float = TABLE_REL_TOL) -> bool:
    """Whether CSV texts ``old`` and ``new`` hold the same table: the same rows and cells, the
    numbers within ``rel_tol`` of each other (NaN equal to NaN), every other cell identical."""
    if old == new:
        return True
    try:
        a = list(csv.reader(io.StringIO(old.decode("utf-8"))))
        b = list(csv.reader(io.StringIO(new.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error):
        return False
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb):
            if x == y:
                continue
            fx, fy = _number(x), _number(y)
            if fx is None or fy is None:
                return False
            if math.isnan(fx) and math.isnan(fy):
                continue
            if not math.isclose(fx, fy, rel_tol=rel_tol, abs_tol=0.0):
                return False
    return True


def _unchanged(dir_fd: int, name: str, data: bytes) -> bool:
    """Whether the regular file ``name`` of the folder holds the table ``data`` (``same_table``)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 4 * len(data) + 4096:
            return False
        return same_table(f.read(), data)


def write_bytes(run_dir, name: str, data: bytes) -> Path:
    """``data`` as file ``name`` of ``run_dir`` (a ``TEXT_FILES`` name or a ``*.patch``), atomically;
    a ``STABLE_TABLES`` file that holds the same table already is left as it is."""
    _check_name(name, TEXT_FILES, FILE_PATTERNS)
    run_dir = Path(run_dir)
    fd = _open_dir(run_dir)
    try:
        if name in STABLE_TABLES and _unchanged(fd, name, bytes(data)):
            return run_dir / name
        return _atomic(fd, run_dir, name, bytes(data))
    finally:
        os.close(fd)


def write_text(run_dir, name: str, text: str) -> Path:
    """``text`` (UTF-8) as file ``name`` of ``run_dir``, atomically; its path.  A .md, .txt or
    .tex file is written without control characters or terminal escapes (``ringlab.fmt.printable``)."""
    if name.endswith((".md", ".txt", ".tex")):
        text = printable(text, multiline=True)
    return write_bytes(run_dir, name, text.encode("utf-8", errors="surrogateescape"))


def write_csv(run_dir, name: str, df) -> Path:
    """A DataFrame as CSV file ``name`` of ``run_dir`` (no index column), atomically."""
    return write_text(run_dir, name, df.to_csv(index=False))


def append_line(run_dir, name: str, line: str) -> Path:
    """Append ``line`` (a newline added) to log ``name`` of ``run_dir`` (one of ``LOG_FILES``)."""
    _check_name(name, LOG_FILES)
    run_dir = Path(run_dir)
    dfd = _open_dir(run_dir)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise DataError(f"{run_dir / name}: a symlink; ringlab writes no file through a link",
                            input=run_dir / name) from None
        raise
    finally:
        os.close(dfd)
    with os.fdopen(fd, "ab") as f:
        f.write((line.rstrip("\n") + "\n").encode("utf-8", errors="replace"))
    return run_dir / name


def render_figure(fig, name: str, fmt: str) -> bytes:
    """The bytes of ``fig`` in format ``fmt``, the same for the same figure on every render."""
    # matplotlib is imported where a figure is written: the run-folder layer is imported by the
    # runner and by the per-trial tool processes (ringlab.tools.kmod), which draw nothing
    import matplotlib
    meta = FIGURE_FORMATS.get(fmt)
    if meta is None:
        raise DataError(f"figure format {fmt!r}: allowed: {', '.join(FIGURE_FORMATS)}")
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": f"ringlab-{name}", "svg.fonttype": "none"}):
        # the PNG's pixels at FIGURE_DPI; SVG and PDF are vector (the figure's own dpi)
        dpi = {"dpi": FIGURE_DPI} if fmt == "png" else {}
        fig.savefig(buf, format=fmt, metadata=dict(meta), **dpi)
    return buf.getvalue()


def write_figure(run_dir, name: str, fig, formats=("png", "svg"), folder: str = "figures",
                 close: bool = True) -> list[Path]:
    """``fig`` as ``run_dir/folder/NAME.png`` and ``.svg`` (``formats``), deterministic and atomic;
    the figure is closed afterwards (``close``).  Returns the paths, in ``formats`` order."""
    _plain("figure", name)
    _plain("figure folder", folder)
    run_dir = Path(run_dir)
    out = []
    try:
        blobs = [(f"{name}.{fmt}", render_figure(fig, name, fmt)) for fmt in formats]
        rfd = _open_dir(run_dir)
        try:
            ffd = _open_dir(run_dir / folder, parent_fd=rfd)
        finally:
            os.close(rfd)
        try:
            for fname, data in blobs:
                out.append(_atomic(ffd, run_dir / folder, fname, data))
        finally:
            os.close(ffd)
    finally:
        if close:
            import matplotlib.pyplot as plt   # as in render_figure: only where a figure is written
            plt.close(fig)
    return out


__all__ = ["TEXT_FILES", "LOG_FILES", "STABLE_TABLES", "TABLE_REL_TOL", "same_table", "FILE_PATTERNS",
           "FIGURE_FORMATS", "write_text", "write_bytes",
           "write_csv", "append_line", "write_figure", "render_figure"]
