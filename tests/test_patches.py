"""Built-in test patches: generated against a header at run time, applied with git apply."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ringlab import kernel_header as kh
from ringlab import patches

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
    r = subprocess.run(["git", "apply", f"--include={patches.HEADER_IN_TREE}", str(pf)], cwd=tree,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return dst


def test_flush_delay_inserts_the_loop_once_after_the_flush(tmp_path):
    p = patches.builtin_patch("builtin:flush-delay", MAINLINE)
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
    p = patches.builtin_patch("builtin:flush-delay:8", MAINLINE)
    kh.check_compiles(_apply(p.text, MAINLINE, tmp_path))


def test_mail_headers_are_fixed_and_output_is_deterministic():
    a = patches.builtin_patch("builtin:flush-delay:32", MAINLINE)
    b = patches.builtin_patch(" builtin:flush-delay:32 ", MAINLINE)
    assert a.text == b.text
    head = a.text.split("\n\n", 1)[0]
    assert "Subject: [PATCH] ptr_ring: spin 32 iterations after each batch flush" in head
    assert "Message-ID: <flush-delay-32." in head and "From: ringlab" in head
    assert a.diff.startswith(f"diff --git a/{patches.HEADER_IN_TREE} b/{patches.HEADER_IN_TREE}\n")
    assert a.base_sha256 in a.text


def test_write_builtin(tmp_path):
    out = tmp_path / "sub" / "flush-delay.patch"
    p = patches.write_builtin("builtin:flush-delay", MAINLINE, out)
    assert out.read_text() == p.text


def test_old_generation_header_says_why_the_anchor_is_missing():
    with pytest.raises(patches.PatchError) as e:
        patches.builtin_patch("builtin:flush-delay", kh.resolve_header(V48))
    msg = str(e.value)
    assert "anchor not found" in msg and "no consumer_tail" in msg and "ptr_ring.h" in msg


def test_anchor_only_inside_discard_one(tmp_path):
    h = tmp_path / "ptr_ring.h"
    h.write_text("struct ptr_ring { int consumer_tail; };\n"
                 "static void other(struct ptr_ring *r)\n{\n\tr->consumer_tail = head;\n}\n")
    with pytest.raises(patches.PatchError, match="no definition of __ptr_ring_discard_one"):
        patches.builtin_patch("builtin:flush-delay", h)
    h.write_text("static inline void __ptr_ring_discard_one(struct ptr_ring *r)\n{\n"
                 "\t/* r->consumer_tail = commented; */\n\tr->consumer_tail = a;\n"
                 "\tr->consumer_tail = b;\n}\n")
    with pytest.raises(patches.PatchError, match=r"found 2 times \(lines 4, 5\)"):
        patches.builtin_patch("builtin:flush-delay", h)


@pytest.mark.parametrize("spec, what", [
    ("builtin:nope", "unknown built-in 'nope'"),
    ("builtin:flush-delay:0", "N must be an integer"),
    ("builtin:flush-delay:x", "N must be an integer"),
    ("flush-delay", "not a built-in patch"),
])
def test_bad_specs_name_the_allowed_forms(spec, what):
    with pytest.raises(patches.PatchError) as e:
        patches.builtin_patch(spec, MAINLINE)
    assert what in str(e.value) and "builtin:flush-delay" in str(e.value) and "allowed:" in str(e.value)


def test_missing_base_header(tmp_path):
    with pytest.raises(patches.PatchError, match="cannot read base header"):
        patches.builtin_patch("builtin:flush-delay", tmp_path / "nope.h")


def test_expected_extra_per_op():
    # 63 flushes per lap of 1000 with batch 16, two instructions per spin
    assert patches.expected_extra_per_op(64, 1000, 16) == pytest.approx(64 * 2 * 63 / 1000)
    assert patches.expected_extra_per_op(10, 64, 16) == pytest.approx(10 * 2 * 4 / 64)


@pytest.mark.skipif(DEBIAN is None, reason="Debian linux-headers-*-common not installed")
def test_flush_delay_against_the_debian_header(tmp_path):
    p = patches.builtin_patch("builtin:flush-delay", DEBIAN)
    patched = _apply(p.text, DEBIAN, tmp_path)
    kh.check_compiles(patched)
    assert kh.detect_generation(patched) == "batch"
