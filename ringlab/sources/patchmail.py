"""Patches as they travel: an mbox (one patch or a series), a ``git format-patch``
file or a plain unified diff, split into messages with their mail headers.

Nothing here applies a patch; ringlab.kernel_header does that, to a copy of a
header, with ``git apply`` (argv only).
"""
from __future__ import annotations

import email
import email.policy
import hashlib
import re
from dataclasses import asdict, dataclass, field

from ringlab.errors import PatchError

#: The line that starts a message in an mbox: "From <sender> <asctime date>" at
#: column 0, at the start of the file or after an empty line (git format-patch:
#: "From <sha> Mon Sep 17 00:00:00 2001"; lore and b4: "From mboxrd@z Thu Jan  1 ...").
_FROM_LINE = re.compile(rb"^From \S+ +\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}[ \t]*$", re.M)
_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)", re.M)
_PLUS_FILE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.M)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class PatchMessage:
    """One patch of a series, with the headers a reviewer cites."""
    index: int                   # 1-based position in the file
    subject: str | None
    author: str | None           # the From: header
    date: str | None
    message_id: str | None
    sha256: str                  # of this message's diff text
    files: list[str] = field(default_factory=list)   # paths the diff touches (b/ side)
    diff: str = field(default="", repr=False)

    def record(self) -> dict:
        d = asdict(self)
        d.pop("diff")
        d["from"] = d.pop("author")
        return d


def _one_line(v) -> str | None:
    if v is None:
        return None
    return " ".join(str(v).split())


def touched_files(diff: str) -> list[str]:
    """Paths a unified diff touches (the new side), in order, without ``b/``."""
    found = [m.group(2) for m in _DIFF_GIT.finditer(diff)]
    if not found:
        found = [m.group(1) for m in _PLUS_FILE.finditer(diff) if m.group(1) != "/dev/null"]
    return list(dict.fromkeys(found))


def _split_mbox(data: bytes) -> list[bytes]:
    starts = [m.start() for m in _FROM_LINE.finditer(data)
              if m.start() == 0 or data[max(0, m.start() - 2):m.start()] == b"\n\n"]
    if not starts or starts[0] != 0:
        return []
    return [data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])]


def _message(index: int, raw: bytes) -> PatchMessage:
    body_raw = raw.split(b"\n", 1)[1] if raw.startswith(b"From ") else raw
    msg = email.message_from_bytes(body_raw, policy=email.policy.default)
    if msg.is_multipart():
        parts = [p for p in msg.walk() if p.get_content_type() in ("text/plain", "text/x-patch",
                                                                     "text/x-diff")]
        body = "\n".join(p.get_content() for p in parts)
    else:
        body = msg.get_content() if msg.get_content_maintype() == "text" else ""
    subj = msg.get("Subject")
    return PatchMessage(index=index, subject=_one_line(subj), author=_one_line(msg.get("From")),
                        date=_one_line(msg.get("Date")), message_id=_one_line(msg.get("Message-ID")),
                        sha256=hashlib.sha256(body.encode()).hexdigest(),
                        files=touched_files(body), diff=body)


def read_patches(data: bytes, where: str = "patch") -> list[PatchMessage]:
    """Messages of an mbox / format-patch file, or one header-less message for a plain diff."""
    chunks = _split_mbox(data)
    if chunks:
        msgs = [_message(i + 1, c) for i, c in enumerate(chunks)]
    else:
        text = data.decode("utf-8", errors="replace")
        if _looks_like_mail(text):
            msgs = [_message(1, data)]
        else:
            msgs = [PatchMessage(index=1, subject=None, author=None, date=None, message_id=None,
                                 sha256=hashlib.sha256(data).hexdigest(), files=touched_files(text),
                                 diff=text)]
    if not any(m.files for m in msgs):
        raise PatchError(f"{where}: no unified diff found (expected an mbox, a git format-patch "
                         "file or a diff with '--- a/...' / '+++ b/...' lines)")
    return msgs


def _looks_like_mail(text: str) -> bool:
    head = text.split("\n\n", 1)[0]
    return bool(re.search(r"^(Subject|From|Message-ID):", head, re.M | re.I))


def hunk_at(diff: str, path: str, line: int | None, limit: int = 40) -> str:
    """The text of the hunk of ``path`` whose old side starts at ``line`` (the first one
    when ``line`` is None or not found), at most ``limit`` lines."""
    blocks = re.split(r"(?m)^(?=diff --git )", diff)
    block = next((b for b in blocks if path in touched_files(b)), diff)
    lines = block.splitlines()
    hunks: list[list[str]] = []
    for ln in lines:
        if ln == "-- ":            # the mail signature separator ends the diff
            break
        if _HUNK.match(ln):
            hunks.append([ln])
        elif hunks and ln[:1] in (" ", "+", "-", "\\") and not ln.startswith(("--- ", "+++ ")):
            hunks[-1].append(ln)
        elif hunks and ln == "":
            hunks[-1].append(ln)
    if not hunks:
        return ""
    pick = hunks[0]
    if line is not None:
        for h in hunks:
            m = _HUNK.match(h[0])
            if m and int(m.group(1)) == line:
                pick = h
                break
    while pick and pick[-1] == "":
        pick.pop()
    text = pick[:limit]
    if len(pick) > limit:
        text.append(f"... ({len(pick) - limit} more lines)")
    return "\n".join(text)
