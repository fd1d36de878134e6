"""Small git trees holding a ptr_ring.h, and fake step timings from known per-commit effects."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from ringlab.sources import kernel_header as kh

HEADER = "include/linux/ptr_ring.h"


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "A U Thor", "GIT_AUTHOR_EMAIL": "author@example.org",
           "GIT_COMMITTER_NAME": "A U Thor", "GIT_COMMITTER_EMAIL": "author@example.org",
           "GIT_AUTHOR_DATE": "2024-01-02T03:04:05+00:00", "GIT_COMMITTER_DATE": "2024-01-02T03:04:05+00:00",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def base_header() -> str:
    return kh.debian_header().read_text()


def make_repo(path: Path, edits: list[tuple[str, str | None]]) -> list[str]:
    """A repository whose first commit holds Debian's ptr_ring.h, then one commit per edit
    ``(subject, new header text or None for an unrelated file)``; the commit ids, first first."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / HEADER).parent.mkdir(parents=True)
    (path / HEADER).write_text(base_header())
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    shas = [git(path, "rev-parse", "HEAD")]
    for i, (subject, text) in enumerate(edits):
        if text is None:
            (path / f"other{i}.txt").write_text(subject)
        else:
            (path / HEADER).write_text(text)
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", subject)
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


def comment_edit(text: str, i: int) -> str:
    return text + f"\n/* note {i} */\n"


def arms_of(params: dict) -> dict[str, str]:
    """{arm: sha} from a step's kernel_headers parameter."""
    out = {}
    for part in params["kernel_headers"].split(","):
        name, _, spec = part.partition("=")
        out[name] = spec.rpartition("@")[2]
    return out


def fake_frame(params: dict, effects: dict[str, float], rounds: int = 12, layouts: int = 4,
               noise_sd: float = 0.01, sigma_layout: float = 0.005) -> pd.DataFrame:
    """Rows of a three-arm (or two-arm) run: ns_per_op = 4 * exp(effect(arm's commit) + layout
    offset + noise), every arm in every round, seeded by the step's seed."""
    rng = np.random.default_rng(int(params["seed"]))
    arms = arms_of(params)
    offsets = {a: rng.normal(0, sigma_layout, layouts) for a in arms}
    rows = []
    for r in range(rounds):
        for a, sha in arms.items():
            lay = r % layouts
            y = 4.0 * math.exp(effects.get(sha, 0.0) + offsets[a][lay] + rng.normal(0, noise_sd))
            rows.append({"run_id": f"run-{params['seed']}", "experiment": "ptr_ring", "variant": a, "mode": 0,
                         "size": 1000, "batch": 0, "lock": False, "trial": r, "round": r, "layout": lay,
                         "warmup": False, "status": "ok", "ns_per_op": y})
    return pd.DataFrame(rows)
