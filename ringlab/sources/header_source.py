"""Header sources: what bytes of ptr_ring.h a ``--kernel-header NAME=SOURCE`` names.

A header source names the bytes of one ptr_ring.h:

  PATH                 a ptr_ring.h, a kernel tree or a headers package root
  git:TREE@REV         include/linux/ptr_ring.h at commit REV of the git repository TREE
  BASE+PATCH           BASE (any source) with the ptr_ring.h hunks of PATCH applied, in order;
                       PATCH is an mbox (one patch or a series), a git format-patch file,
                       a plain diff, or lore:MESSAGE-ID (fetched with `b4 am`)

Headers taken from git or patched are written under build/kernel_headers/ (by commit
sha, or by the hash of base and patch) with a source.json next to them that records
where they came from; a later resolve of that cached file returns the same record,
so a NAME resolved once (ringlab run's parameter check) keeps its provenance in the
build.  git, b4 and the patch files only ever appear as argv elements.
"""
from __future__ import annotations

import json
from pathlib import Path

from ringlab.paths import expand_user
from ringlab.sources import git_source, patchmail
from ringlab.sources.header_cache import (SOURCE_RECORD, HeaderSource, cached_record, header_cache_dir,
                                          sha256_bytes, sha256_path, store)
from ringlab.sources.header_files import (IN_TREE, MAX_HEADER_BYTES, MAX_PATCH_BYTES, KernelHeaderError,
                                          find_in_tree, read_regular)
from ringlab.sources.header_patch import apply_patches, fetch_lore


def resolve_source(spec) -> HeaderSource:
    """Resolve any header source (see the table above) to a file plus its provenance record."""
    s = str(spec).strip()
    if not s:
        raise KernelHeaderError("kernel header: empty source")
    p = expand_user(s, KernelHeaderError)
    if p.exists():
        header = find_in_tree(p)
        rec = cached_record(header) or {"kind": "path", "spec": s, "header": str(header),
                                         "sha256": sha256_path(header)}
        return HeaderSource(s, header, rec["sha256"], rec)
    plus = [i for i, c in enumerate(s) if c == "+"]
    for i in reversed(plus):
        base, patch = s[:i], s[i + 1:]
        if base and (patch.startswith("lore:") or expand_user(patch, KernelHeaderError).is_file()):
            return _patched(s, base, patch)
    if s.startswith("git:"):
        return _from_git(s)
    if plus:
        raise KernelHeaderError(
            f"kernel header {s!r}: not a file, and no BASE+PATCH split names an existing patch "
            f"file (last PATCH tried: {s[plus[-1] + 1:]!r}); allowed: BASE+PATCH_FILE or "
            "BASE+lore:MESSAGE-ID")
    return HeaderSource(s, find_in_tree(p), "", {})   # raises "does not exist"


def _from_git(s: str) -> HeaderSource:
    """include/linux/ptr_ring.h at REV of TREE (see ringlab.sources.git_source), cached by commit."""
    what = f"kernel header {s!r}"
    try:
        src = git_source.parse(s)
        sha = git_source.resolve_commit(src)
    except git_source.GitError as e:
        raise KernelHeaderError(f"kernel header {e}") from None
    tree = src.tree.resolve()
    rec = {"kind": "git", "spec": s, "tree": str(tree), "rev": src.rev, "commit": sha, "path": IN_TREE}
    cached = header_cache_dir() / "git" / sha / "ptr_ring.h"
    old = cached_record(cached.resolve()) if cached.is_file() else None
    if old is not None and old.get("commit") == sha:
        # the bytes of a commit never change: keep them, but record this TREE and REV
        rec = dict(old, **rec)
        return HeaderSource(s, cached.resolve(), old["sha256"], rec)
    try:
        data = git_source.read_file(src, sha, IN_TREE, MAX_HEADER_BYTES)
    except FileNotFoundError:
        raise KernelHeaderError(f"{what}: commit {sha[:12]} ({src.rev}) has no {IN_TREE}") from None
    except git_source.GitError as e:
        raise KernelHeaderError(f"kernel header {e}") from None
    header = store(cached.parent, data, rec)
    rec = json.loads((cached.parent / SOURCE_RECORD).read_text())
    return HeaderSource(s, header, rec["sha256"], rec)


def _patched(s: str, base_spec: str, patch_spec: str) -> HeaderSource:
    base = resolve_source(base_spec)
    if patch_spec.startswith("lore:"):
        patch_file = fetch_lore(patch_spec[len("lore:"):])
    else:
        patch_file = expand_user(patch_spec, KernelHeaderError).resolve()
    data = read_regular(patch_file, MAX_PATCH_BYTES, f"kernel header {s!r}: patch")
    try:
        msgs = patchmail.read_patches(data, str(patch_file))
    except patchmail.PatchError as e:
        raise KernelHeaderError(f"kernel header {s!r}: {e}") from None
    touching = [m for m in msgs if IN_TREE in m.files]
    if not touching:
        files = sorted({f for m in msgs for f in m.files})
        raise KernelHeaderError(
            f"kernel header {s!r}: the patch{'es' if len(msgs) > 1 else ''} in {patch_spec} "
            f"({len(msgs)} message{'s' if len(msgs) > 1 else ''}) do{'' if len(msgs) > 1 else 'es'} "
            f"not touch {IN_TREE}; {'they touch' if len(msgs) > 1 else 'it touches'}: "
            + ", ".join(files[:8]) + (" ..." if len(files) > 8 else ""))
    key = sha256_bytes(f"{base.sha256}\n{sha256_bytes(data)}".encode())
    cached = header_cache_dir() / "patched" / key[:32] / "ptr_ring.h"
    rec = {"kind": "patch", "spec": s, "base": base.record,
           "patch": {"source": patch_spec, "path": str(patch_file), "sha256": sha256_bytes(data),
                     "messages": [dict(m.record(), applied=m in touching) for m in msgs]}}
    if cached.is_file() and cached_record(cached.resolve()) is not None:
        return HeaderSource(s, cached.resolve(), sha256_path(cached), dict(rec, header=str(cached.resolve()),
                                                                           sha256=sha256_path(cached)))
    result = apply_patches(s, base, touching, len(msgs))
    header = store(cached.parent, result, rec)
    return HeaderSource(s, header, sha256_bytes(result), json.loads((cached.parent / SOURCE_RECORD).read_text()))
