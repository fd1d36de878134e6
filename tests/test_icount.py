"""callgrind instruction counts: repeatable, measured region only, clear when unavailable."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from ringlab.tools import icount

pytestmark = pytest.mark.skipif(not icount.availability().ok,
                                reason="valgrind/callgrind not available: " + icount.availability().reason)

PROG = r"""
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) long rl_measured_loop(long n) {
    volatile long acc = 0;
    for (long i = 0; i < n; i++) acc += i;
    return acc;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    /* start-up work outside the measured region must not be counted */
    char *junk = malloc(1 << 20);
    for (int i = 0; i < (1 << 20); i++) junk[i] = (char)i;
    printf("%ld %d\n", rl_measured_loop(n), junk[12345]);
    free(junk);
    return 0;
}
"""


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    d = tmp_path_factory.mktemp("icount")
    src = d / "p.c"
    src.write_text(PROG)
    exe = d / "p"
    subprocess.run([shutil.which("gcc") or "gcc", "-O1", "-g", "-o", str(exe), str(src)], check=True)
    return exe


def test_same_binary_same_count(prog):
    a = icount.count([str(prog), "100000"])
    b = icount.count([str(prog), "100000"])
    assert a.instructions == b.instructions > 0
    assert a.version.startswith("valgrind")


def test_counts_only_measured_region(prog):
    small = icount.count([str(prog), "1000"]).instructions
    big = icount.count([str(prog), "101000"]).instructions
    # the region scales with n; the 1 MiB start-up loop (millions of instructions) is excluded
    per_iter = (big - small) / 100000
    assert 2 <= per_iter <= 20
    assert small < 50 * 1000


def test_missing_function_is_an_error(prog):
    with pytest.raises(RuntimeError, match="0 instructions"):
        icount.count([str(prog), "10"], toggle="no_such_function_xyz")


def test_parse_callgrind_out():
    text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=main\n5 10\nsummary: 4242\ntotals: 4242\n"
    assert icount.parse_callgrind_out(text) == 4242
    with pytest.raises(ValueError):
        icount.parse_callgrind_out("events: Ir\n")


def test_unavailable_says_why():
    av = icount.availability("definitely-not-valgrind-xyz")
    assert not av.ok and "not found" in av.reason
