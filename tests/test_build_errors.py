"""A failed build says which step failed (compile or link) with the compiler's own lines."""
from __future__ import annotations

import os
import shutil

import pytest

from ringlab.build import compile as compile_mod
from ringlab.build import driver
from ringlab.build.cflags import BuildError


LINK_STDERR = ("/usr/bin/ld: /usr/lib/x86_64-linux-gnu/Scrt1.o: in function `_start':\n"
               "(.text+0x17): undefined reference to `main'\n"
               "collect2: error: ld returned 1 exit status\n")


def test_compiler_lines_keep_the_reason_not_only_ld_returned_1():
    assert compile_mod.compiler_lines(LINK_STDERR) == (
        "/usr/bin/ld: /usr/lib/x86_64-linux-gnu/Scrt1.o: in function `_start': | "
        "(.text+0x17): undefined reference to `main'")
    assert compile_mod.compiler_lines("x.c:3:1: error: expected ';'\nx.c:9:2: error: unknown type\n"
                                      "compilation terminated.\n") == \
        "x.c:3:1: error: expected ';' | x.c:9:2: error: unknown type"
    assert compile_mod.compiler_lines("") == "(no compiler output)"


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    if shutil.which(os.environ.get("CC", "gcc")) is None:
        pytest.skip("no C compiler (gcc)")
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("RINGLAB_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "build"


def test_a_link_failure_names_the_link_step_and_the_undefined_symbol(build_dir):
    with pytest.raises(BuildError) as e:
        driver.build_all(cflags="-Dmain=not_main", only=["syscall_loop"])
    msg = str(e.value)
    assert msg.startswith("syscall_loop: the link step failed for syscall_loop: ")
    assert "undefined reference to `main'" in msg and "ld returned 1" not in msg


def test_a_compile_failure_names_the_compile_step_and_the_error(build_dir):
    with pytest.raises(BuildError) as e:
        driver.build_all(cflags="-Dint=float", only=["syscall_loop"])
    msg = str(e.value)
    assert msg.startswith("syscall_loop: the compile step failed on ") and "syscall_loop.c: " in msg
    assert "error: " in msg
