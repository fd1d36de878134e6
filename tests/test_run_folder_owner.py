"""ringlab.rundir is the only writer of a run folder.

Every call in ringlab/ that can create or change a file (``open`` with a write mode,
``write_text``, ``write_bytes``, ``savefig``, ``to_csv`` with a path, ``json.dump``, ``os.open``
with write flags) must sit in ringlab/rundir/ or in ``NOT_RUN_FOLDERS`` below: the writers of
files that are not in run folders, each with what it writes.  And the rundir writers refuse
names outside the run folder and symlinks.
"""
from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ringlab import rundir  # noqa: E402
from ringlab.errors import DataError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1] / "ringlab"

#: (module, function) -> what it writes; none of these files is in a run folder
NOT_RUN_FOLDERS = {
    ("build/stamps.py", "write_stamp"): "build/bin/ build stamps",
    ("build/native.py", "_file_lock"): "the lock file of the cffi module cache",
    ("build/sourceset.py", "write_json"): "build/bin/NAME.source.json",
    ("sources/header_cache.py", "store"): "build/ cache of kernel headers",
    ("sources/header_patch.py", "apply_patches"): "a temporary folder where a mail's patch is applied",
    ("sources/kernel_tree.py", "_extract"): "build/ cache: a kernel tree exported from a tarball",
    ("sources/builtin_patches.py", "write_builtin"): "build/patches/: a built-in test patch (keep_patch "
                                                     "copies it into the run folder through rundir.write_bytes)",
    ("system/git.py", "export"): "build/ cache: the files of a git:TREE@REV exported as raw blobs",
    ("lab/bisect/testrepo.py", "_step"): "build/bisect-testrepo/: the files of notebook 13's test repository",
    ("lab/bisect/testrepo.py", "build"): "build/bisect-testrepo/: the test repository's first header",
    ("lab/fleet/submit.py", "_submit_node"): "results/fleet/FLEET-ID/: the sbatch job script of a node",
    ("tools/kernel_tests.py", "_locked"): "the lock file of a ringtest build folder under build/",
    ("tools/kernel_tests.py", "prepare"): "the stamp of build/'s copy of a tree's tools/virtio/ringtest",
    ("tools/kernel_tests.py", "build"): "the make log in build/'s copy of tools/virtio/ringtest",
    ("tools/kmod.py", "_write_record"): "$RINGLAB_STATE_DIR/kmod/ trial records",
    ("system/git.py", "export"): "build/ cache: the files of a kernel tree at one git commit",
    ("system/sysfs.py", "write"): "sysfs knobs (governor, boost), not files",
    ("system/governor.py", "_write_state"): "$RINGLAB_STATE_DIR: the saved governor state",
    ("run/machine.py", "_open_lock"): "CPU lock files cpuN.lock in the lock folder",
    ("lab/results_index.py", "_write"): "results/README.md and results/LOCAL.md, the results indexes",
    ("lab/results_index.py", "mark_local"): "results/<experiment>/<host>/.gitignore of a local host folder",
    ("build/compile.py", "_compile_link"): "build/unprivileged/<job>/header/: the compile's copy of a kernel header",
    ("build/compile.py", "_compile_copies"): "the pad sources of a binary of layout copies, in its build work folder",
    ("build/shared_objects.py", "write_new"): "an object another binary of the same build compiled, into this one's "
                                       "build work folder",
    ("build/shared_objects.py", "_write_atomic"): "build/bin/.objects/: compiled objects and their input hashes, "
                                           "kept across builds",
    ("sources/kernel_header.py", "check_compiles"): "build/unprivileged/<job>/: the check's copy of a kernel header",
    ("system/privilege.py", "copy_out"): "build/bin/ and build/ binaries copied out of the unprivileged user's folder",
    ("lab/kernel_provisioner.py", "install"): "the venv's kernelspec (share/jupyter/kernels/python3/kernel.json)",
    ("lab/cli.py", "main"): "/dev/null as stdout (opened for writing, nothing written)",
    ("lab/commands/mail.py", "run"): "`ringlab mail -o FILE`: a file the user names",
    ("lab/commands/import_perf.py", "run"): "`ringlab import-perf --csv FILE`: a file the user names",
    ("report/c2c.py", "import_c2c"): "`ringlab import-perf --c2c --csv FILE`: FILE and FILE.offsets.csv, "
                                        "files the user names",
}

_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_WRITE_METHODS = {"write_text", "write_bytes", "savefig"}


def _mode(call: ast.Call, pos: int) -> str | None:
    arg = call.args[pos] if len(call.args) > pos else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _names(node: ast.AST) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))}


def _is_write(call: ast.Call) -> str | None:
    """What kind of file write ``call`` is, or None."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
    if owner == "rundir":   # ringlab.rundir's writers: the owner of run folders
        return None
    if name == "open" and owner == "os":
        flags = call.args[1] if len(call.args) > 1 else None
        return "os.open for writing" if flags is not None and _names(flags) & _WRITE_FLAGS else None
    if name in ("open", "fdopen"):
        mode = _mode(call, 0 if isinstance(f, ast.Attribute) and owner not in ("io", "os") else 1)
        return f"{name}(mode={mode!r})" if mode and set(mode) & set("wax+") else None
    if name in _WRITE_METHODS:
        return name
    if name == "to_csv":   # to_csv() without a path returns the text
        return "to_csv to a file" if call.args or any(k.arg == "path_or_buf" for k in call.keywords) else None
    if name == "dump" and owner == "json":
        return "json.dump"
    return None


def writers(root: Path) -> list[tuple[str, str, int, str]]:
    """Every file write under ``root``: (module path, enclosing function, line, kind)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        def visit(node, func):
            for child in ast.iter_child_nodes(node):
                f = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
                if isinstance(child, ast.Call):
                    kind = _is_write(child)
                    if kind:
                        found.append((rel, func, child.lineno, kind))
                visit(child, f)
        visit(tree, "<module>")
    return found


def stray(root: Path) -> list[str]:
    """Writes outside ringlab/rundir/ and ``NOT_RUN_FOLDERS``."""
    return [f"ringlab/{m}:{line} in {fn}(): {kind}" for m, fn, line, kind in writers(root)
            if not m.startswith("rundir/") and (m, fn) not in NOT_RUN_FOLDERS]


def test_only_rundir_writes_into_run_folders():
    bad = stray(ROOT)
    assert not bad, ("these write files outside ringlab.rundir; write run-folder files through "
                     "ringlab.rundir (write_text, write_csv, write_figure, append_line), or add a writer of "
                     "files outside run folders to NOT_RUN_FOLDERS with what it writes:\n" + "\n".join(bad))


def test_the_allow_list_names_only_real_writers():
    seen = {(m, fn) for m, fn, _, _ in writers(ROOT)}
    assert not set(NOT_RUN_FOLDERS) - seen, f"no longer writers, drop them: {set(NOT_RUN_FOLDERS) - seen}"


@pytest.mark.parametrize("stray_line", [
    '    (Path(run_dir) / "summary.md").write_text("x")',
    '    open(Path(run_dir) / "mail.txt", "w").write("x")',
    '    df.to_csv(Path(run_dir) / "compare.csv")',
    '    fig.savefig(Path(run_dir) / "figures" / "box.png")',
    '    json.dump({}, open(Path(run_dir) / "env.json", "x"))',
    '    os.open(Path(run_dir) / "raw.csv", os.O_WRONLY | os.O_APPEND)',
])
def test_a_stray_writer_fails_the_check(tmp_path, stray_line):
    """A copy of the package with one more writer (in report/mail.py) fails the check."""
    copy = tmp_path / "ringlab"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert stray(copy) == []
    mail = copy / "report" / "mail.py"
    mail.write_text(mail.read_text() + "\n\ndef _stray(run_dir, df, fig):\n" + stray_line + "\n")
    bad = stray(copy)
    assert bad and all(b.startswith("ringlab/report/mail.py:") and "_stray()" in b for b in bad), bad


# -- the rundir writers ---------------------------------------------------------------------------
def test_writers_write_known_names_atomically(tmp_path):
    run = tmp_path / "run"
    p = rundir.write_text(run, "summary.md", "# hello\n")
    assert p == run / "summary.md" and p.read_text() == "# hello\n"
    rundir.write_text(run, "summary.md", "# again\n")
    assert p.read_text() == "# again\n"
    rundir.write_csv(run, "compare.csv", pd.DataFrame({"a": [1, 2]}))
    assert (run / "compare.csv").read_text() == "a\n1\n2\n"
    rundir.append_line(run, "kmod-unload.log", "one")
    rundir.append_line(run, "kmod-unload.log", "two\n")
    assert (run / "kmod-unload.log").read_text() == "one\ntwo\n"
    assert sorted(os.listdir(run)) == ["compare.csv", "kmod-unload.log", "summary.md"], "no temporary file left"


@pytest.mark.parametrize("name", ["../summary.md", "/tmp/summary.md", "sub/summary.md", "notes.md", "raw.csv",
                                  "env.json", ".summary.md", ""])
def test_names_outside_the_known_files_are_refused(tmp_path, name):
    with pytest.raises(DataError, match="allowed"):
        rundir.write_text(tmp_path, name, "x")
    assert os.listdir(tmp_path) == []


def test_symlinks_are_refused(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.md").symlink_to(victim)
    with pytest.raises(DataError, match="symlink"):
        rundir.write_text(run, "summary.md", "overwritten")
    (run / "kmod-unload.log").symlink_to(victim)
    with pytest.raises(DataError, match="symlink"):
        rundir.append_line(run, "kmod-unload.log", "appended")
    (run / "figures").symlink_to(tmp_path)
    fig, ax = plt.subplots()
    with pytest.raises(DataError, match="symlink"):
        rundir.write_figure(run, "box", fig)
    linked = tmp_path / "linked-run"
    linked.symlink_to(run)
    with pytest.raises(DataError, match="symlink"):
        rundir.write_text(linked, "mail.txt", "x")
    assert victim.read_text() == "keep me\n" and not (tmp_path / "box.png").exists()


@pytest.mark.parametrize("name", ["../box", "a/b", ".hidden", ""])
def test_figure_names_are_plain(tmp_path, name):
    fig, ax = plt.subplots()
    with pytest.raises(DataError, match="plain name"):
        rundir.write_figure(tmp_path, name, fig)


def test_figures_are_deterministic(tmp_path):
    def draw():
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([1, 2, 3], [3, 1, 2], label="a")
        ax.legend()
        return fig
    a = rundir.write_figure(tmp_path / "a", "line", draw(), formats=("png", "svg", "pdf"))
    b = rundir.write_figure(tmp_path / "b", "line", draw(), formats=("png", "svg", "pdf"))
    assert [p.relative_to(tmp_path / "a").as_posix() for p in a] == ["figures/line.png", "figures/line.svg",
                                                                      "figures/line.pdf"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    svg, pdf = a[1].read_bytes(), a[2].read_bytes()
    assert b"<dc:date>" not in svg and b"CreationDate" not in pdf and b"Software" not in a[0].read_bytes()
