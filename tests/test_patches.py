"""Built-in test patches: generated against a header at run time, applied with git apply."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ringlab.sources import kernel_header as kh
from ringlab.report import patch_ab
from ringlab.sources import patches
from ringlab.sources import builtin_patches

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
MAINLINE = DATA / "team_mainline" / "include" / "linux" / "ptr_ring.h"   # our own MIT fixture
V48 = DATA / "team_v4.8"
DEBIAN = kh.debian_header()


def _apply(patch_text: str, header: Path, tmp: Path) -> Path:
    """Apply the patch to a copy of ``header`` laid out as a kernel tree; return the patched file."""
    tree = tmp / "tree"
    dst = tree / "include" / "linux" / "ptr_ring.h"
    dst.parent.mkdir(parents=True)
    shutil.copyfile(header, dst)
    pf = tmp / "p.mbox"
    pf.write_text(patch_text)
    r = subprocess.run(["git", "apply", f"--include={builtin_patches.HEADER_IN_TREE}", str(pf)], cwd=tree,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return dst


def test_flush_delay_inserts_the_loop_once_after_the_flush(tmp_path):
    p = builtin_patches.builtin_patch("builtin:flush-delay", MAINLINE)
    assert p.spec == "builtin:flush-delay:64" and p.spins == 64
    out = _apply(p.text, MAINLINE, tmp_path).read_text().splitlines()
    orig = MAINLINE.read_text().splitlines()
    added = [ln for ln in out if ln not in orig]
    assert len(out) == len(orig) + 7
    assert any("ringlab_spin < 64" in ln for ln in added)
    i = next(k for k, ln in enumerate(out) if "ringlab builtin:flush-delay" in ln)
    assert out[i - 1].strip() == "r->consumer_tail = next;", "inserted right after the flush's tail update"
    assert p.anchor_line == i, "anchor_line is the 1-based line of the anchor"
    # and only once: the wrap-around "r->consumer_tail = 0;" is not an anchor
    assert sum("ringlab builtin:flush-delay" in ln for ln in out) == 1


def test_patched_header_compiles_through_the_shim(tmp_path):
    p = builtin_patches.builtin_patch("builtin:flush-delay:8", MAINLINE)
    kh.check_compiles(_apply(p.text, MAINLINE, tmp_path))


def test_mail_headers_are_fixed_and_output_is_deterministic():
    a = builtin_patches.builtin_patch("builtin:flush-delay:32", MAINLINE)
    b = builtin_patches.builtin_patch(" builtin:flush-delay:32 ", MAINLINE)
    assert a.text == b.text
    head = a.text.split("\n\n", 1)[0]
    assert "Subject: [PATCH] ptr_ring: spin 32 iterations after each batch flush" in head
    assert "Message-ID: <flush-delay-32." in head and "From: ringlab" in head
    assert a.diff.startswith(f"diff --git a/{builtin_patches.HEADER_IN_TREE} b/{builtin_patches.HEADER_IN_TREE}\n")
    assert a.base_sha256 in a.text


def test_write_builtin(tmp_path):
    out = tmp_path / "sub" / "flush-delay.patch"
    p = builtin_patches.write_builtin("builtin:flush-delay", MAINLINE, out)
    assert out.read_text() == p.text


def test_old_generation_header_says_why_the_anchor_is_missing():
    with pytest.raises(builtin_patches.PatchError) as e:
        builtin_patches.builtin_patch("builtin:flush-delay", kh.resolve_header(V48))
    msg = str(e.value)
    assert "anchor not found" in msg and "no consumer_tail" in msg and "ptr_ring.h" in msg


def test_anchor_only_inside_discard_one(tmp_path):
    h = tmp_path / "ptr_ring.h"
    h.write_text("struct ptr_ring { int consumer_tail; };\n"
                 "static void other(struct ptr_ring *r)\n{\n\tr->consumer_tail = head;\n}\n")
    with pytest.raises(builtin_patches.PatchError, match="no definition of __ptr_ring_discard_one"):
        builtin_patches.builtin_patch("builtin:flush-delay", h)
    h.write_text("static inline void __ptr_ring_discard_one(struct ptr_ring *r)\n{\n"
                 "\t/* r->consumer_tail = commented; */\n\tr->consumer_tail = a;\n"
                 "\tr->consumer_tail = b;\n}\n")
    with pytest.raises(builtin_patches.PatchError, match=r"found 2 times \(lines 4, 5\)"):
        builtin_patches.builtin_patch("builtin:flush-delay", h)


@pytest.mark.parametrize("spec, what", [
    ("builtin:nope", "unknown built-in 'nope'"),
    ("builtin:flush-delay:0", "N must be an integer"),
    ("builtin:flush-delay:x", "N must be an integer"),
    ("flush-delay", "not a built-in patch"),
])
def test_bad_specs_name_the_allowed_forms(spec, what):
    with pytest.raises(builtin_patches.PatchError) as e:
        builtin_patches.builtin_patch(spec, MAINLINE)
    assert what in str(e.value) and "builtin:flush-delay" in str(e.value) and "allowed:" in str(e.value)


def test_missing_base_header(tmp_path):
    with pytest.raises(builtin_patches.PatchError, match="cannot read base header"):
        builtin_patches.builtin_patch("builtin:flush-delay", tmp_path / "nope.h")


def test_expected_extra_per_op():
    # 63 flushes per lap of 1000 with batch 16, two instructions per spin
    assert builtin_patches.expected_extra_per_op(64, 1000, 16) == pytest.approx(64 * 2 * 63 / 1000)
    assert builtin_patches.expected_extra_per_op(10, 64, 16) == pytest.approx(10 * 2 * 4 / 64)


@pytest.mark.skipif(DEBIAN is None, reason="Debian linux-headers-*-common not installed")
def test_flush_delay_against_the_debian_header(tmp_path):
    p = builtin_patches.builtin_patch("builtin:flush-delay", DEBIAN)
    patched = _apply(p.text, DEBIAN, tmp_path)
    kh.check_compiles(patched)
    assert kh.detect_generation(patched) == "batch"


# -- the two arms of an A/B ------------------------------------------------------------------
def test_plan_ab_builtin_against_a_tree(tmp_path):
    tree = DATA / "team_mainline"
    plan = patches.plan_ab(str(tree), "builtin:flush-delay:16", workdir=tmp_path)
    assert plan.variants == "base,patched" and plan.baseline == "base" and plan.candidate == "patched"
    assert plan.patch_file.parent == tmp_path and plan.patch_file.is_file()
    assert plan.patch_file.name == f"flush-delay-16-{plan.builtin.base_sha256[:12]}.patch"
    assert plan.kernel_headers == f"base={tree},patched={tree}+{plan.patch_file}"
    run = tmp_path / "run"
    run.mkdir()
    assert patches.keep_patch(plan, run).read_text() == plan.builtin.text


def test_plan_ab_control_arm_is_the_base_again(tmp_path):
    from ringlab.sources.header_source import resolve_source
    tree = DATA / "team_mainline"
    plan = patches.plan_ab(str(tree), "builtin:flush-delay:16", workdir=tmp_path, control=True)
    assert plan.variants == "base,patched,control" and plan.baseline == "base" and plan.candidate == "patched"
    assert plan.kernel_headers == f"base={tree},patched={tree}+{plan.patch_file},control={tree}"
    entries = dict(e.split("=", 1) for e in plan.kernel_headers.split(","))
    assert resolve_source(entries["control"]).sha256 == resolve_source(entries["base"]).sha256
    assert resolve_source(entries["patched"]).sha256 != resolve_source(entries["base"]).sha256


def test_plan_ab_patch_file_and_lore(tmp_path):
    pf = tmp_path / "x.mbox"
    pf.write_text("From: a\n")
    plan = patches.plan_ab(str(MAINLINE), str(pf))
    assert plan.builtin is None and plan.kernel_headers.endswith(f"+{pf.resolve()}")
    plan = patches.plan_ab(str(MAINLINE), "lore:20210625.1@example.org")
    assert plan.patch_file is None and plan.kernel_headers.endswith("+lore:20210625.1@example.org")


@pytest.mark.parametrize("base, patch, msg", [
    ("MAINLINE", "", "parameter 'patch': empty"),
    ("MAINLINE", "/no/such.patch", "parameter 'patch': no such file"),
    ("/no/such/tree", "builtin:flush-delay", "parameter 'base': kernel header: /no/such/tree does not exist"),
])
def test_plan_ab_bad_input(base, patch, msg, tmp_path):
    with pytest.raises(builtin_patches.PatchError) as e:
        patches.plan_ab(str(MAINLINE) if base == "MAINLINE" else base, patch, workdir=tmp_path)
    assert msg in str(e.value) and "allowed:" in str(e.value)


def test_default_base_without_headers_package_says_what_to_pass(monkeypatch):
    monkeypatch.setattr(kh, "debian_header", lambda: None)
    with pytest.raises(builtin_patches.PatchError) as e:
        patches.plan_ab("", "builtin:flush-delay")
    assert "parameter 'base': empty, and no distro kernel headers package" in str(e.value)
    assert "a kernel tree" in str(e.value)


def test_default_base_is_the_headers_package_root(monkeypatch, tmp_path):
    h = tmp_path / "linux-headers-9.9-common" / "include" / "linux" / "ptr_ring.h"
    h.parent.mkdir(parents=True)
    h.write_text(MAINLINE.read_text())
    monkeypatch.setattr(kh, "debian_header", lambda: h)
    plan = patches.plan_ab("", "builtin:flush-delay", workdir=tmp_path / "p")
    assert plan.base == str(tmp_path / "linux-headers-9.9-common")


def test_function_sizes_from_nm(tmp_path):
    if shutil.which("nm") is None or shutil.which("gcc") is None:
        pytest.skip("nm or gcc missing")
    bins = {}
    for name, body in (("a", "return x + 1;"), ("b", "return x * x * x + 3 * x + 7;")):
        src = tmp_path / f"{name}.c"
        src.write_text("int rl_measured_f(int x);\nint rl_measured_f(int x) { " + body + " }\n"
                       "int rl_measured_g(int x);\nint rl_measured_g(int x) { return x; }\n"
                       "int main(void) { return rl_measured_f(1) + rl_measured_g(2); }\n")
        out = tmp_path / name
        subprocess.run(["gcc", "-O0", str(src), "-o", str(out)], check=True)
        bins[name] = out
    t = patch_ab.function_sizes(bins).set_index("function")
    assert list(t.index) == ["f", "g"]
    assert t.loc["g", "difference"] == 0 and t.loc["f", "difference"] > 0
    t = patch_ab.function_sizes({"a": bins["a"], "gone": tmp_path / "nope"})
    assert "no rl_measured_* symbols" in t.loc[0, "note"] and "gone" in t.loc[0, "note"]


def test_instructions_table(tmp_path):
    import pandas as pd
    rows = [{"variant": v, "mode": 0, "size": 1000, "batch": 0, "status": "ok", "icount_source": "callgrind",
             "instructions_per_op": x} for v, x in (("base", 43.5), ("base", 43.5), ("patched", 52.0),
                                                    ("patched", 52.0))]
    rows.append({"variant": "base", "mode": 1, "size": 1000, "batch": 0, "status": "ok", "ns_per_op": 5.0})
    pd.DataFrame(rows).to_csv(tmp_path / "raw.csv", index=False)
    plan = patches.plan_ab(str(MAINLINE), "builtin:flush-delay", workdir=tmp_path)
    t = patch_ab.instructions_table(tmp_path, plan)
    assert len(t) == 1
    r = t.iloc[0]
    assert r["difference"] == pytest.approx(8.5) and r["expected difference"] == ">= +8.06"
    assert r["source"] == "callgrind, identical counts"


# -- builtin:pad: a layout-only change ---------------------------------------------------------
def test_pad_inserts_an_unused_function_before_the_ring(tmp_path):
    p = builtin_patches.builtin_patch("builtin:pad", MAINLINE)
    assert p.spec == "builtin:pad:48" and p.name == "pad" and p.spins == builtin_patches.DEFAULT_PAD == 48
    assert "Subject: [PATCH] ptr_ring: 48 bytes of unused code ahead of the ring" in p.text
    out = _apply(p.text, MAINLINE, tmp_path).read_text().splitlines()
    i = next(k for k, ln in enumerate(out) if '.skip 48"' in ln)
    j = next(k for k, ln in enumerate(out) if ln.startswith("struct ptr_ring {"))
    assert i < j and "ringlab_builtin_pad" in out[i - 2] and "used" in out[i - 2]
    assert sum("ringlab_builtin_pad" in ln for ln in out) == 1, "defined once, never called"
    assert builtin_patches.builtin_patch("builtin:pad:4000", MAINLINE).text.count(".skip 4000") == 2  # diff + body


def test_pad_compiles_through_the_shim(tmp_path):
    kh.check_compiles(_apply(builtin_patches.builtin_patch("builtin:pad:96", MAINLINE).text, MAINLINE, tmp_path))


def test_pad_anchor_missing_names_it(tmp_path):
    h = tmp_path / "ptr_ring.h"
    h.write_text("/* struct ptr_ring { in a comment */\nstruct other {\n\tint x;\n};\n")
    with pytest.raises(builtin_patches.PatchError, match=r"builtin:pad: .*anchor not found.*struct ptr_ring \{"):
        builtin_patches.builtin_patch("builtin:pad", h)


@pytest.mark.parametrize("spec", ["builtin:pad:0", "builtin:pad:70000", "builtin:pad:-3"])
def test_bad_pad_specs(spec):
    with pytest.raises(builtin_patches.PatchError, match=r"N must be an integer in \[1, 65536\]"):
        builtin_patches.parse_builtin(spec)


def test_expected_extra_is_stated_per_builtin():
    assert builtin_patches.expected_extra("builtin:pad:2000") == 0
    assert builtin_patches.expected_extra("builtin:flush-delay:10") == builtin_patches.expected_extra_per_op(10)
    assert builtin_patches.builtin_patch("builtin:pad", MAINLINE).expected_extra() == 0
    # spins_for inverts expected_extra_per_op (to the nearest whole iteration)
    for want in (1.1, 3.4, 10.0):
        n = builtin_patches.spins_for(want)
        assert abs(builtin_patches.expected_extra_per_op(n) - want) <= builtin_patches.expected_extra_per_op(1) / 2
    assert builtin_patches.spins_for(0) == 1


def test_flush_spin_is_a_volatile_loop_after_the_flush():
    p = builtin_patches.builtin_patch("builtin:flush-spin", MAINLINE)
    assert p.spec == f"builtin:flush-spin:{builtin_patches.DEFAULT_VSPINS}" and p.name == "flush-spin"
    added = [ln[1:] for ln in p.diff.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    assert any("volatile int ringlab_spin;" in ln for ln in added)
    assert any(f"ringlab_spin < {builtin_patches.DEFAULT_VSPINS}" in ln for ln in added)
    assert "Subject: [PATCH] ptr_ring: count a volatile to 8 after each batch flush" in p.text
    delay = builtin_patches.builtin_patch("builtin:flush-delay:8", MAINLINE)
    assert p.anchor_line == delay.anchor_line, "both go after the same flush statement"


def test_flush_spin_states_a_fixed_and_a_per_iteration_cost():
    one, two = (builtin_patches.expected_extra(f"builtin:flush-spin:{n}") for n in (1, 2))
    per = two - one
    assert per == pytest.approx(builtin_patches.INSNS_PER_VSPIN * 63 / 1000)
    assert one - per == pytest.approx(builtin_patches.INSNS_VSPIN_SETUP * 63 / 1000)
    for want in (1.09, 3.35):
        n = builtin_patches.spins_for(want, name="flush-spin")
        assert abs(builtin_patches.expected_extra(f"builtin:flush-spin:{n}") - want) <= per / 2
    with pytest.raises(builtin_patches.PatchError, match=r"builtin:flush-spin: .*no definition"):
        builtin_patches.find_anchor("int x;", "x.h", "flush-spin")


def test_pad_plan_names_the_file_by_builtin(tmp_path):
    plan = patches.plan_ab(str(MAINLINE), "builtin:pad:24", workdir=tmp_path)
    assert plan.builtin.name == "pad" and plan.patch_file.name.startswith("pad-24-")
    assert plan.kernel_headers == f"base={MAINLINE},patched={MAINLINE}+{plan.patch_file}"


@pytest.fixture(scope="module")
def pad_binaries(tmp_path_factory):
    from ringlab.build import driver
    if shutil.which(driver.compiler()) is None:
        pytest.skip(f"no C compiler ({driver.compiler()}) on PATH")
    tmp = tmp_path_factory.mktemp("pad")
    patched = _apply(builtin_patches.builtin_patch("builtin:pad:48", MAINLINE).text, MAINLINE, tmp)
    info = driver.build_all(kernel_headers={"base": MAINLINE, "pad": patched}, out_dir=tmp / "bin", jobs=2,
                            only=["ptr_ring_test-base", "ptr_ring_test-pad"])
    return [Path(info.binaries[f"ptr_ring_test-{n}"].path) for n in ("base", "pad")]


def _address(binary: Path, symbol: str) -> int:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not on PATH")
    out = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return next(int(line.split()[0], 16) for line in out.splitlines() if line.split()[-1] == symbol)


def test_pad_moves_the_measured_code(pad_binaries):
    base, pad = (_address(p, "rl_measured_simple") for p in pad_binaries)
    assert pad - base >= 48, "the measured code lands at least the pad further on"


def test_pad_executes_the_same_instructions(pad_binaries, tmp_path):
    from ringlab.tools import icount
    av = icount.availability()
    if not av.ok:
        pytest.skip(f"callgrind: {av.reason}")
    counts = []
    for i, exe in enumerate(pad_binaries):
        cg = tmp_path / f"cg{i}.out"
        argv = [str(exe), "-m", "0", "-s", "64", "-N", "20000", "--counters", "none", "--json"]
        subprocess.run(icount.callgrind_argv(argv, cg), capture_output=True, check=True, timeout=300)
        counts.append(icount.parse_callgrind_out(cg.read_text()))
    assert counts[0] > 0 and counts[0] == counts[1]
