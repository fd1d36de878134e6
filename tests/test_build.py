"""ringlab.build: BuildInfo, `size` parsing, no-shell cflags, rebuild-on-change."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ringlab.build import binutils, cflags, sourceset
from ringlab.sources.kernel_header import first_error
from ringlab.build import driver as B
from ringlab.build.targets import RING_HEADERS
from ringlab.digest import sha256_file
from ringlab import paths


def test_parse_size_output():
    text = ("   text\t   data\t    bss\t    dec\t    hex\tfilename\n"
            "  12345\t    680\t     16\t  13041\t   32f1\tbuild/bin/ptr_ring_test-batch\n")
    assert binutils.parse_size_output(text) == {"text": 12345, "data": 680, "bss": 16, "dec": 13041}
    with pytest.raises(ValueError):
        binutils.parse_size_output("garbage")


def test_parse_depfile():
    d = "obj.o: /a/x.c /a/y.h \\\n /b/with\\ space.h\n/a/y.h:\n"
    assert sourceset.parse_depfile(d) == ["/a/x.c", "/a/y.h", "/b/with space.h"]


def test_parse_depfile_undoes_make_escapes():
    # gcc -MMD writes '$' as '$$', '#' as '\\#' and a space as '\\ '
    d = "m.o: m.c a$$b\\#c\\ d/h.h \\\n /x/$$HOME#/y.h\n"
    assert sourceset.parse_depfile(d) == ["m.c", "a$b#c d/h.h", "/x/$HOME#/y.h"]


def test_kernel_header_path_with_dollar_and_hash(tmp_path):
    odd = tmp_path / "hdr $HOME #1 x" / "include" / "linux"
    odd.mkdir(parents=True)
    src = Path(__file__).resolve().parent / "data/kernel_headers/team_mainline/include/linux/ptr_ring.h"
    shutil.copyfile(src, odd / "ptr_ring.h")
    info = B.build_all(kernel_headers={"odd": odd.parent.parent}, out_dir=tmp_path / "bin",
                       only=["ptr_ring_test-odd"])
    b = info.binaries["ptr_ring_test-odd"]
    assert str((odd / "ptr_ring.h").resolve()) in b.inputs
    assert b.source_files[sourceset.KERNEL_HEADER_LABEL] == sha256_file(src)


def test_first_error():
    err = "x.c: In function 'f':\nx.c:3:5: warning: unused\nx.c:4:1: error: expected ';'\nmore\n"
    assert first_error(err) == "x.c:4:1: error: expected ';'"


def test_split_cflags_is_literal():
    assert cflags.split_cflags('-DX="a b" -DY=1;rm -DZ=$(id)') == ['-DX=a b', '-DY=1;rm', '-DZ=$(id)']
    assert cflags.split_cflags(["-O3"]) == ["-O3"]
    assert cflags.split_cflags("") == []


def test_bad_sanitizer(tmp_path):
    with pytest.raises(cflags.BuildError, match="allowed: thread"):
        B.build_all(sanitize="memory", out_dir=tmp_path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("bin")
    # user flags of the allowed shapes reach gcc after the defaults (hostile ones: test_security_code)
    info = B.build_all(cflags="-DRL_TEST_MACRO=1 -fno-inline", out_dir=d,
                       only=["ptr_ring_test-batch", "ptr_ring_test-prebatch"])
    return d, info


def test_buildinfo_fields(built):
    d, info = built
    assert Path(info.compiler).name.startswith(Path(B.compiler()).name)
    assert info.compiler_version
    assert info.cflags[:len(B.DEFAULT_CFLAGS)] == B.DEFAULT_CFLAGS
    assert info.user_cflags == ["-DRL_TEST_MACRO=1", "-fno-inline"]
    assert info.cflags[-2:] == ["-DRL_TEST_MACRO=1", "-fno-inline"]
    b = info.binaries["ptr_ring_test-batch"]
    assert Path(b.path) == d / "ptr_ring_test-batch" and Path(b.path).is_file()
    assert len(b.sha256) == 64 and b.sha256 == sha256_file(Path(b.path))
    if shutil.which("size"):
        assert b.size["text"] > 0 and b.size_error is None
    else:
        assert b.size is None and "not found" in b.size_error
    names = {Path(p).name for p in b.inputs}
    assert {"ptr_ring_bench.c", "ptr_ring_main.c", "counters.c", "ptr_ring_batch.h",
            "ring_common.h", "ring_api.h", "counters.h"} <= names
    assert all(len(h) == 64 for h in b.inputs.values())
    assert "ptr_ring_prebatch.h" in {Path(p).name for p in info.binaries["ptr_ring_test-prebatch"].inputs}
    assert not Path("/tmp/ringlab-pwned").exists()
    d2 = json.loads(json.dumps(info.to_dict()))
    assert d2["binaries"]["ptr_ring_test-batch"]["sha256"] == b.sha256


def test_no_rebuild_then_rebuild_on_change(built, tmp_path, monkeypatch):
    # a private copy of csrc so that touching a header does not disturb anyone
    csrc = tmp_path / "csrc"
    shutil.copytree(paths.CSRC, csrc, ignore=shutil.ignore_patterns("*.o"))
    monkeypatch.setattr(paths, "CSRC", csrc)
    out = tmp_path / "bin"
    only = ["ptr_ring_test-batch"]
    i1 = B.build_all(out_dir=out, only=only)
    assert i1.binaries["ptr_ring_test-batch"].rebuilt
    i2 = B.build_all(out_dir=out, only=only)
    assert not i2.binaries["ptr_ring_test-batch"].rebuilt
    # a header change rebuilds
    h = csrc / "rings" / "ptr_ring_batch.h"
    h.write_text(h.read_text() + "\n/* changed */\n")
    i3 = B.build_all(out_dir=out, only=only)
    assert i3.binaries["ptr_ring_test-batch"].rebuilt
    assert i3.binaries["ptr_ring_test-batch"].inputs[str(h.resolve())] == sha256_file(h)
    # a flag change rebuilds
    i4 = B.build_all(out_dir=out, only=only, cflags="-DRL_X=1")
    assert i4.binaries["ptr_ring_test-batch"].rebuilt


def test_compile_error_names_file(tmp_path, monkeypatch):
    csrc = tmp_path / "csrc"
    shutil.copytree(paths.CSRC, csrc)
    monkeypatch.setattr(paths, "CSRC", csrc)
    (csrc / "rings" / "ptr_ring_batch.h").write_text("#error broken on purpose\n")
    with pytest.raises(cflags.BuildError) as e:
        B.build_all(out_dir=tmp_path / "bin", only=["ptr_ring_test-batch"])
    assert "ptr_ring_batch.h" in str(e.value) and "broken on purpose" in str(e.value)


def test_kernel_header_error_names_file(tmp_path):
    bad = tmp_path / "ptr_ring.h"
    bad.write_text("#include <linux/does_not_exist.h>\nstruct ptr_ring { int consumer_head; };\n")
    with pytest.raises(cflags.BuildError) as e:
        B.build_all(kernel_headers={"mine": bad}, out_dir=tmp_path / "bin", only=["ptr_ring_test-mine"])
    assert str(bad) in str(e.value) and "does_not_exist.h" in str(e.value)


def test_kernel_header_name_clash(tmp_path):
    with pytest.raises(cflags.BuildError, match="clashes"):
        B.build_all(kernel_headers={"batch": "/nonexistent"}, out_dir=tmp_path)


def test_cli_build_prints_paths_and_flags(tmp_path):
    env = dict(os.environ, RINGLAB_BUILD=str(tmp_path / "build"))
    p = subprocess.run([sys.executable, "-m", "ringlab", "build"], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for v in RING_HEADERS:
        assert str(tmp_path / "build" / "bin" / f"ptr_ring_test-{v}") in lines
    assert any(ln.startswith("compiler: ") for ln in lines)
    assert any(ln.startswith("flags: -O2") for ln in lines)


def test_cli_bad_sanitize():
    p = subprocess.run([sys.executable, "-m", "ringlab", "build", "--sanitize", "bogus"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--sanitize" in p.stderr and "allowed" in p.stderr


# -- one rule for compiler options that write files --------------------------------------------
def _kit_flags() -> list[str]:
    """Every flag the kit itself passes to the compiler: the defaults, the sanitizers, the layouts'
    alignments, the cffi module's and the verdict check's."""
    from ringlab.build import layouts, native
    from ringlab.studies.verdict_check import ALIGN_CFLAGS
    flags = list(B.DEFAULT_CFLAGS) + [f for v in B.SANITIZERS.values() for f in v]
    flags += ALIGN_CFLAGS.split() + list(layouts.UNALIGNED_LOOP_FLAGS)
    flags += [f for a in layouts.ALIGNS for f in layouts.Layout(1, 64, a, 7, 1).flags()]
    flags += native.describe()["flags"]
    return flags


def test_kit_default_flags_pass_the_rule():
    flags = _kit_flags()
    assert "-pthread" in flags and "-falign-functions=64" in flags and "-fsanitize=thread" in flags
    assert [f for f in flags if cflags.writes_files(f)] == []
    assert cflags.validate_cflags(flags) == flags
    # what `ringlab build` prints as its flags, given back as -p cflags
    assert cflags.validate_cflags("-O2 -g -pthread -falign-functions=64") == ["-O2", "-g", "-pthread",
                                                                              "-falign-functions=64"]
    assert cflags.validate_cflags(" ".join(B.DEFAULT_CFLAGS)) == B.DEFAULT_CFLAGS


@pytest.mark.parametrize("opt", [
    "-fopt-info", "-fopt-info-all=FILE", "-fopt-info-vec-optimized=victim.txt", "-fopt-info-missed",
    "-fdump-tree-all", "-fdump-rtl-expand=x", "-fdump-ipa-all", "-fdump-final-insns=x", "-fdump-go-spec=x",
    "-fcallgraph-info", "-fcallgraph-info=su,da", "-fstack-usage", "-fno-stack-usage",
    "-fsave-optimization-record", "-fprofile-arcs", "-fprofile-generate", "-fprofile-use=x", "-fprofile-dir=x",
    "-fauto-profile=x", "-ftest-coverage", "-fdiagnostics-format=sarif-file", "-fdiagnostics-format=json-file",
    "-fdiagnostics-add-output=sarif", "-fdebug-prefix-map=a=b", "-ffile-prefix-map=a=b", "-flto-incremental=x",
    "-fcompare-debug", "-fcompare-debug=-O1", "-gsplit-dwarf", "-fplugin=x", "-fplugin-arg-x-y=1",
    "-ftime-trace", "-fcrash-diagnostics-dir=x", "-fmodules-cache-path=x", "-fsanitize-ignorelist=x",
    "-fbasic-block-sections=list=x", "-fdeps-file=x", "-mfoo-file=x",
    "-save-temps", "-save-temps=obj", "-aux-info", "-MD", "-MMD", "-MF", "-M", "-o", "-ox", "-dumpdir",
    "-Wa,-adhln=x", "-Wl,-Map=x", "-Wp,-MD,x", "-Xassembler", "-Xlinker", "-p", "-pg", "--coverage",
])
def test_writing_options_are_refused_by_the_one_rule(opt):
    assert cflags.writes_files(opt)
    with pytest.raises(cflags.ParamError) as e:
        cflags.validate_cflags(opt)
    msg = str(e.value)
    assert msg.startswith(f"parameter 'cflags': option {opt!r} ") and "\n" not in msg and "allowed:" in msg


@pytest.mark.parametrize("opt", ["-fcompare-elim", "-fsplit-stack", "-ftracer", "-fvisibility=hidden", "-fPIC",
                                 "-fcf-protection=full", "-ffunction-sections", "-march=native",
                                 "-gdwarf-4", "-fno-omit-frame-pointer", "-fstack-protector-strong"])
def test_codegen_options_are_not_taken_for_writing_ones(opt):
    assert cflags.writes_files(opt) is None and cflags.validate_cflags(opt) == [opt]
