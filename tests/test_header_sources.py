"""Header sources: git:TREE@REV, BASE+PATCH (mbox series, format-patch, plain diff),
BASE+lore:MESSAGE-ID through a fake b4, and their provenance records."""
from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from ringlab.sources import kernel_header as kh
from ringlab.sources import header_files, header_patch, header_source
from ringlab.sources import patchmail

DATA = Path(__file__).resolve().parent / "data" / "kernel_headers"
V48 = DATA / "team_v4.8" / "include/linux/ptr_ring.h"
MAIN = DATA / "team_mainline" / "include/linux/ptr_ring.h"
IN_TREE = "include/linux/ptr_ring.h"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="Ring Tester", GIT_AUTHOR_EMAIL="rt@example.org",
               GIT_COMMITTER_NAME="Ring Tester", GIT_COMMITTER_EMAIL="rt@example.org",
               GIT_AUTHOR_DATE="2026-01-02T03:04:05Z", GIT_COMMITTER_DATE="2026-01-02T03:04:05Z")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout


def _commit(repo: Path, msg: str, files: dict[str, bytes]) -> str:
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", msg)
    return _git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RINGLAB_BUILD", str(tmp_path / "build"))
    return tmp_path / "build" / "kernel_headers"


@pytest.fixture
def repo(tmp_path):
    """A tree whose first commit holds the v4.8-style header, tagged old; the second the
    mainline-style one, tagged new.  Its path has a space and an '@'."""
    r = tmp_path / "linux tree@x"
    r.mkdir()
    _git(r, "init", "-q")
    _commit(r, "old header", {IN_TREE: V48.read_bytes(), "README": b"ring\n"})
    _git(r, "tag", "old")
    _commit(r, "new header", {IN_TREE: MAIN.read_bytes()})
    _git(r, "tag", "new")
    return r


def _series(repo: Path) -> bytes:
    """Two patches on top of 'new': a ptr_ring.h edit + README, then a second ptr_ring.h edit."""
    text = MAIN.read_text()
    one = text.replace("\tsmp_wmb();\n", "\tsmp_wmb();\n\tcpu_relax();\n", 1)
    assert one != text
    _commit(repo, "ptr_ring: relax after the produce barrier\n\nFirst of two.",
            {IN_TREE: one.encode(), "README": b"ring, relaxed\n"})
    two = one.replace("#endif", "/* ringlab test: second patch */\n#endif", 1)
    assert two != one
    _commit(repo, "ptr_ring: mark the end\n\nSecond of two.", {IN_TREE: two.encode()})
    mbox = _git(repo, "format-patch", "--stdout", "--thread", "new..HEAD").encode()
    _git(repo, "reset", "-q", "--hard", "new")
    return mbox, two.encode()


def test_git_two_revisions(repo, cache):
    a = header_source.resolve_source(f"git:{repo}@old")
    b = header_source.resolve_source(f"git:{repo}@new~0")
    assert a.header.read_bytes() == V48.read_bytes() and b.header.read_bytes() == MAIN.read_bytes()
    assert a.sha256 == hashlib.sha256(V48.read_bytes()).hexdigest() != b.sha256
    sha_old = _git(repo, "rev-parse", "old^{commit}").strip()
    assert a.record["kind"] == "git" and a.record["tree"] == str(repo.resolve())
    assert a.record["rev"] == "old" and a.record["commit"] == sha_old
    assert a.header == (cache / "git" / sha_old / "ptr_ring.h").resolve()   # cached by sha
    assert kh.detect_generation(a.header) == "prebatch" and kh.detect_generation(b.header) == "batch"
    # the cached file keeps its provenance when it is named as a plain path
    again = header_source.resolve_source(a.header)
    assert again.record["commit"] == sha_old and again.record["kind"] == "git"
    assert kh.resolve_header(f"git:{repo}@new") == b.header


@pytest.mark.parametrize("spec_tail, words", [
    ("@nosuchrev", "cannot resolve 'nosuchrev'"),
    ("", "expected git:TREE@REV"),
    ("@--output=/tmp/x", "starts with '-'"),
])
def test_git_errors(repo, cache, spec_tail, words):
    with pytest.raises(header_files.KernelHeaderError, match=words):
        header_source.resolve_source(f"git:{repo}{spec_tail}")


def test_git_rev_without_header(repo, cache):
    _git(repo, "rm", "-q", IN_TREE)
    _git(repo, "commit", "-q", "-m", "drop")
    with pytest.raises(header_files.KernelHeaderError, match=f"has no {IN_TREE}"):
        header_source.resolve_source(f"git:{repo}@HEAD")


def test_mbox_series_applies_in_order(repo, cache, tmp_path):
    mbox, expect = _series(repo)
    pf = tmp_path / "series.mbox"
    pf.write_bytes(mbox)
    msgs = patchmail.read_patches(mbox)
    assert [m.subject for m in msgs] == ["[PATCH 1/2] ptr_ring: relax after the produce barrier",
                                         "[PATCH 2/2] ptr_ring: mark the end"]
    assert msgs[0].files == ["README", IN_TREE] and msgs[1].files == [IN_TREE]
    src = header_source.resolve_source(f"git:{repo}@new+{pf}")
    assert src.header.read_bytes() == expect          # README hunk left out, both applied
    assert not (src.header.parent / "README").exists()
    rec = src.record
    assert rec["kind"] == "patch" and rec["base"]["kind"] == "git"
    assert rec["patch"]["sha256"] == hashlib.sha256(mbox).hexdigest()
    m1, m2 = rec["patch"]["messages"]
    assert m1["from"] == "Ring Tester <rt@example.org>" and m1["date"]
    assert m1["message_id"] and m2["message_id"] and m1["message_id"] != m2["message_id"]
    assert m1["applied"] and m2["applied"]
    # a plain file base works too, and a plain diff (no mail headers) is a patch
    diff = subprocess.run(["git", "diff", "--no-index", "--", str(MAIN), str(src.header)],
                          capture_output=True, text=True).stdout
    diff = diff.replace(str(MAIN).lstrip("/"), IN_TREE).replace(str(src.header).lstrip("/"), IN_TREE)
    (tmp_path / "plain.diff").write_text(diff)
    plain = header_source.resolve_source(f"{MAIN}+{tmp_path / 'plain.diff'}")
    assert plain.sha256 == src.sha256
    assert plain.record["patch"]["messages"][0]["subject"] is None


def test_patch_that_does_not_apply_shows_hunk(repo, cache, tmp_path):
    mbox, _ = _series(repo)
    pf = tmp_path / "series.mbox"
    pf.write_bytes(mbox)
    with pytest.raises(header_files.KernelHeaderError) as e:
        header_source.resolve_source(f"git:{repo}@old+{pf}")    # made against new, applied to old
    msg = str(e.value)
    assert "patch 1/2" in msg and "does not apply" in msg and "failing hunk:" in msg
    assert "+\tcpu_relax();" in msg


def test_series_not_touching_header(repo, cache, tmp_path):
    _commit(repo, "docs only", {"README": b"only docs\n"})
    pf = tmp_path / "docs.patch"
    pf.write_text(_git(repo, "format-patch", "--stdout", "-1"))
    with pytest.raises(header_files.KernelHeaderError, match=r"does not touch include/linux/ptr_ring.h; it touches: README"):
        header_source.resolve_source(f"{MAIN}+{pf}")
    (tmp_path / "empty.patch").write_text("hello\n")
    with pytest.raises(header_files.KernelHeaderError, match="no unified diff found"):
        header_source.resolve_source(f"{MAIN}+{tmp_path / 'empty.patch'}")


def _fake_b4(bindir: Path, mbox: Path | None) -> None:
    """A b4 that writes MBOX into `am -o DIR` (or fails like b4 offline when mbox is None)."""
    bindir.mkdir(exist_ok=True)
    b4 = bindir / "b4"
    if mbox is None:
        body = 'echo "Grabbing thread from lore.kernel.org: Connection refused" >&2\nexit 1\n'
    else:
        body = (f'[ "$1" = am ] && [ "$2" = -o ] || exit 2\n'
                f'printf "%s\\n" "$4" > "$3/msgid.txt"\n'
                f'cp "{mbox}" "$3/v1_20260102_rt_series.mbx"\n')
    b4.write_text("#!/bin/sh\n" + body)
    b4.chmod(b4.stat().st_mode | stat.S_IEXEC)


def test_lore_with_fake_b4(repo, cache, tmp_path, monkeypatch):
    mbox, expect = _series(repo)
    (tmp_path / "s.mbox").write_bytes(mbox)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    _fake_b4(tmp_path / "bin", tmp_path / "s.mbox")
    src = header_source.resolve_source(f"git:{repo}@new+lore:<20260102-1-rt@example.org>")
    assert src.header.read_bytes() == expect
    assert src.record["patch"]["source"] == "lore:<20260102-1-rt@example.org>"
    assert len(src.record["patch"]["messages"]) == 2


def test_lore_b4_missing_or_offline(repo, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    with pytest.raises(header_files.KernelHeaderError, match="b4 is not installed"):
        header_patch.fetch_lore("abc@example.org")
    _fake_b4(tmp_path / "bin", None)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}/usr/bin:/bin")
    with pytest.raises(header_files.KernelHeaderError, match="could not fetch.*offline.*Connection refused"):
        header_patch.fetch_lore("abc@example.org")


def test_missing_patch_file(cache, tmp_path):
    with pytest.raises(header_files.KernelHeaderError, match="no BASE\\+PATCH split"):
        header_source.resolve_source(f"{MAIN}+{tmp_path / 'nope.patch'}")


DEBIAN = kh.debian_header()


@pytest.mark.skipif(DEBIAN is None, reason="Debian linux-headers-*-common not installed "
                                           "(apt-get install linux-headers-$(uname -r))")
def test_debian_header_plus_own_patch(cache, tmp_path):
    """Our own one-line patch, made in the test, applied to Debian's real header."""
    text = DEBIAN.read_text()
    mine = tmp_path / "b" / IN_TREE
    mine.parent.mkdir(parents=True)
    mine.write_text(text.replace("#define _LINUX_PTR_RING_H 1",
                                 "#define _LINUX_PTR_RING_H 1\n/* ringlab: no-op test patch */", 1))
    (tmp_path / "a" / IN_TREE).parent.mkdir(parents=True)
    shutil.copyfile(DEBIAN, tmp_path / "a" / IN_TREE)
    diff = subprocess.run(["git", "diff", "--no-index", "--no-prefix", "--", f"a/{IN_TREE}", f"b/{IN_TREE}"],
                          cwd=tmp_path, capture_output=True, text=True).stdout
    assert IN_TREE in diff
    (tmp_path / "mine.diff").write_text(diff)
    src = header_source.resolve_source(f"{DEBIAN.parent.parent.parent}+{tmp_path / 'mine.diff'}")
    assert src.header.read_bytes() == mine.read_bytes()
    assert src.record["base"]["sha256"] == hashlib.sha256(DEBIAN.read_bytes()).hexdigest()


def test_lore_style_mbox_with_cover_letter():
    diff = (f"diff --git a/{IN_TREE} b/{IN_TREE}\n--- a/{IN_TREE}\n+++ b/{IN_TREE}\n"
            "@@ -1,1 +1,2 @@\n x\n+y\n")
    mbox = ("From mboxrd@z Thu Jan  1 00:00:00 1970\nSubject: [PATCH 0/1] cover\n"
            "From: A <a@x>\nMessage-ID: <c@x>\n\nFrom here on, a line that is no separator.\n\n"
            "From mboxrd@z Thu Jan  1 00:00:00 1970\nSubject: [PATCH 1/1] ptr_ring:\n  folded subject\n"
            "From: A <a@x>\nDate: Fri, 2 Jan 2026 03:04:05 +0000\nMessage-ID: <1@x>\n\nbody\n---\n"
            + diff)
    cover, patch = patchmail.read_patches(mbox.encode())
    assert cover.files == [] and cover.message_id == "<c@x>"
    assert patch.subject == "[PATCH 1/1] ptr_ring: folded subject" and patch.files == [IN_TREE]
    assert patch.record()["from"] == "A <a@x>" and "diff" not in patch.record()
    assert "+y" in patchmail.hunk_at(patch.diff, IN_TREE, 1)
