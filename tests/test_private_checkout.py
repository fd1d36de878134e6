"""A checkout the unprivileged user cannot reach (a clone in /root, a home folder of mode 0700):
under root, ringlab's own sources are compiled from a root-owned copy that user can read, into
the same bytes, and the build folder lies where that user can run what it holds."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from ringlab import paths
from ringlab.build import driver
from ringlab.system import privilege

needs_cc = pytest.mark.skipif(shutil.which(os.environ.get("CC") or "gcc") is None, reason="no C compiler")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: a compile leaves root only under root "
                                "(run the suite as root, as the CI does)")


def test_others_can_reach_a_folder_only_through_searchable_folders(tmp_path):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    os.chmod(tmp_path / "a", 0o711)
    assert paths.others_can_reach(deep) == paths.others_can_reach(tmp_path)
    os.chmod(tmp_path / "a", 0o700)
    assert not paths.others_can_reach(deep) and not paths.others_can_reach(deep / "file.c")
    assert not paths.others_can_reach(tmp_path / "nonexistent" / "x")


def test_a_private_checkout_under_root_builds_outside_it(tmp_path, monkeypatch):
    home = tmp_path / "root"
    (home / "ringlab").mkdir(parents=True)
    (home / "other" / "ringlab").mkdir(parents=True)
    os.chmod(home, 0o700)
    monkeypatch.setattr(paths, "ROOT", home / "ringlab")
    monkeypatch.delenv("RINGLAB_BUILD", raising=False)
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    monkeypatch.setattr(paths.os, "geteuid", lambda: 0)
    build = paths.build_dir()
    assert build.is_relative_to(paths.PRIVATE_CHECKOUT_BUILDS) and build.name == "build"
    assert build.parent.name.startswith("ringlab-")
    # a second checkout of the same name elsewhere gets a folder of its own
    monkeypatch.setattr(paths, "ROOT", home / "other" / "ringlab")
    assert paths.build_dir() != build
    # where compiles and trials keep root, or the checkout is reachable, the build stays in it
    monkeypatch.setenv(privilege.USER_VAR, privilege.KEEP_ROOT)
    assert paths.build_dir() == home / "other" / "ringlab" / "build"
    monkeypatch.delenv(privilege.USER_VAR)
    os.chmod(home, 0o711)
    assert paths.build_dir() == home / "other" / "ringlab" / "build"
    monkeypatch.setattr(paths.os, "geteuid", lambda: 1000)
    os.chmod(home, 0o700)
    assert paths.build_dir() == home / "other" / "ringlab" / "build"


@needs_root
@needs_cc
def test_sources_the_user_cannot_read_compile_from_a_readable_copy_into_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.delenv(privilege.USER_VAR, raising=False)
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    csrc = home / "ringlab" / "csrc"
    shutil.copytree(paths.CSRC, csrc)
    monkeypatch.setattr(paths, "CSRC", csrc)
    only = ["ptr_ring_test-batch"]

    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "private-build"))
    private = driver.build_all(only=only).binaries["ptr_ring_test-batch"]
    copies = list((tmp_path / "private-build" / privilege.WORK_SUBDIR).glob("csrc-*"))
    assert len(copies) == 1, "ringlab's sources were compiled from one readable copy"
    copy = copies[0]
    assert any(str(copy) in a for a in private.command)
    for p in [copy, *copy.rglob("*")]:
        st = os.lstat(p)
        assert st.st_uid == 0 and not st.st_mode & 0o022, f"{p}: the user must not change the copy"
    # the build record names csrc/ itself, never the copy
    assert all(not f.startswith(str(copy)) for f in private.inputs)
    assert any(f.startswith(str(csrc)) for f in private.inputs)

    os.chmod(home, 0o711)        # now the user reaches the sources themselves
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "reachable-build"))
    reachable = driver.build_all(only=only).binaries["ptr_ring_test-batch"]
    assert not list((tmp_path / "reachable-build" / privilege.WORK_SUBDIR).glob("csrc-*"))
    assert reachable.sha256 == private.sha256, "the copy is named back to csrc/ inside the binary"
    assert stat.S_IMODE(os.stat(home).st_mode) == 0o711
