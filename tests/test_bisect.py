"""ringlab bisect on small git trees with fake step timings (no measurement runs)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ringlab.lab.bisect import steps
from ringlab.lab.cli import main
from ringlab.sources import kernel_header as kh

from bisect_fakes import HEADER, base_header, comment_edit, fake_frame, make_repo

pytestmark = pytest.mark.skipif(kh.debian_header() is None or shutil.which("git") is None
                                or shutil.which("gcc") is None,
                                reason="needs git, gcc and Debian's linux-headers ptr_ring.h")
DATA = Path(__file__).parent / "data" / "bisect"
COST = 0.10   # log effect of the commit that adds the cost


class FakeRuns:
    """steps.run_step replaced: frames from per-commit effects; records every call."""

    def __init__(self, effects: dict[str, float], kill_at: int | None = None):
        self.effects, self.kill_at, self.calls = effects, kill_at, []

    def __call__(self, out_dir, experiment, params, resume, log=None):
        self.calls.append((Path(out_dir).name, resume))
        if self.kill_at is not None and len(self.calls) == self.kill_at:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            raise KeyboardInterrupt
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return fake_frame(params, self.effects)


def _series(tmp_path, n_before=3, n_after=2, extra=()):
    """base; n_before comment edits (one unrelated file among them); the cost; n_after comments."""
    text, edits = base_header(), []
    for i in range(n_before):
        text = comment_edit(text, i)
        edits.append((f"ptr_ring: comment {i}", text))
    edits.insert(1, ("docs: unrelated file", None))
    text = comment_edit(text, 100) + "\n/* cost */\n"
    edits.append(("ptr_ring: spin after the batch flush", text))
    for i in range(n_after):
        text = comment_edit(text, 200 + i)
        edits.append((f"ptr_ring: comment {200 + i}", text))
    shas = make_repo(tmp_path / "tree", edits)
    cost_sha = shas[1 + [s for s, _ in edits].index("ptr_ring: spin after the batch flush")]
    effects = {}
    on = False
    for sha in shas:
        on = on or sha == cost_sha
        effects[sha] = COST if on else 0.0
    return tmp_path / "tree", shas, cost_sha, effects


def _bisect(tree, out, good, bad, *more):
    return main(["bisect", "ptr_ring", "-p", "tree", str(tree), "-p", "good", good, "-p", "bad", bad,
                 "-p", "layouts", "4", *more, "--out", str(out)])


def test_finds_the_first_bad_commit(tmp_path, monkeypatch, capsys):
    tree, shas, cost, effects = _series(tmp_path)
    fake = FakeRuns(effects)
    monkeypatch.setattr(steps, "run_step", fake)
    out = tmp_path / "b"
    assert _bisect(tree, out, shas[0], shas[-1]) == 0
    state = json.loads((out / "bisect.json").read_text())
    assert state["result"]["status"] == "found"
    assert state["result"]["first_bad"]["sha"] == cost
    assert state["result"]["first_bad"]["subject"] == "ptr_ring: spin after the batch flush"
    assert state["skipped_commits"] == 1 and state["commits_in_range"] == len(shas) - 1
    eff = state["result"]["effect"]
    assert eff["ci_low_pct"] > 0 and eff["ci_low_pct"] <= eff["delta_pct"] <= eff["ci_high_pct"]
    for s in state["steps"]:
        assert (out / s["dir"]).is_dir() and s["dir"] == f"steps/{s['n']:02d}-{s['sha'][:12]}"
        assert s["status"] == ("bad" if effects[s["sha"]] else "good")
    assert (out / "summary.md").read_text().count(cost[:12]) >= 1
    assert (out / "figures" / "effect.png").is_file()
    assert "1 of" in capsys.readouterr().out
    # the effect plot names every commit by hash and subject, in history order, + = better
    from ringlab.lab.bisect.report import effect_figure
    ax = effect_figure(state).axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith(state["good_commit"]["sha"][:8]) and labels[0].endswith("[good]")
    assert labels[-1].startswith(state["bad_commit"]["sha"][:8]) and labels[-1].endswith("[bad]")
    assert any(t.startswith(cost[:8]) and "spin after the batch flush" in t and "[first bad]" in t for t in labels)
    assert len(labels) == len(set(labels)) and "+ = better" in ax.get_xlabel()
    again = out.parent / "again"
    from ringlab import rundir
    a = rundir.write_figure(again, "effect", effect_figure(state))
    b = rundir.write_figure(again / "b", "effect", effect_figure(state))
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b], "same state, same bytes"


def test_nothing_to_bisect(tmp_path, monkeypatch, capsys):
    tree, shas, _, effects = _series(tmp_path)
    monkeypatch.setattr(steps, "run_step", FakeRuns({s: 0.0 for s in effects}))
    assert _bisect(tree, tmp_path / "b", shas[0], shas[-1]) == 0
    assert "nothing to bisect" in capsys.readouterr().out
    state = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert state["result"]["status"] == "nothing to bisect" and state["steps"] == []


def test_below_threshold_is_nothing_to_bisect(tmp_path, monkeypatch):
    tree, shas, _, effects = _series(tmp_path)
    monkeypatch.setattr(steps, "run_step", FakeRuns(effects))
    assert _bisect(tree, tmp_path / "b", shas[0], shas[-1], "-p", "threshold", "50") == 0
    state = json.loads((tmp_path / "b" / "bisect.json").read_text())
    assert state["result"]["status"] == "nothing to bisect"


def test_commit_that_does_not_build_is_skipped(tmp_path, monkeypatch):
    text = base_header()
    good1 = comment_edit(text, 1)
    edits = [("ptr_ring: comment 1", good1), ("ptr_ring: break the build", good1 + "\nint broken(\n"),
             ("ptr_ring: fix the build", comment_edit(good1, 2)),
             ("ptr_ring: spin after the batch flush", comment_edit(good1, 3)),
             ("ptr_ring: comment 4", comment_edit(good1, 4))]
    shas = make_repo(tmp_path / "tree", edits)
    effects = {s: (COST if i >= 4 else 0.0) for i, s in enumerate(shas)}
    monkeypatch.setattr(steps, "run_step", FakeRuns(effects))
    out = tmp_path / "b"
    assert _bisect(tmp_path / "tree", out, shas[0], shas[-1]) == 0
    state = json.loads((out / "bisect.json").read_text())
    broken = [s for s in state["steps"] if s["sha"] == shas[2]]
    assert broken and broken[0]["status"] == "build-error"
    assert "error" in (out / broken[0]["dir"] / "build_error.txt").read_text()
    assert state["result"]["status"] == "found" and state["result"]["first_bad"]["sha"] == shas[4]


def test_all_unclear_ends_in_a_range(tmp_path, monkeypatch):
    tree, shas, cost, effects = _series(tmp_path)
    half = {s: (COST / 2 if 0 < i < len(shas) - 1 else effects[s]) for i, s in enumerate(shas)}
    half[shas[-1]] = COST
    fake = FakeRuns(half)
    monkeypatch.setattr(steps, "run_step", fake)
    out = tmp_path / "b"
    assert _bisect(tree, out, shas[0], shas[-1], "-p", "step_budget", "24") == 0
    state = json.loads((out / "bisect.json").read_text())
    assert state["result"]["status"] == "range"
    assert all(s["status"] == "unclear" for s in state["steps"])
    assert all(len(s["runs"]) == 2 and s["rounds"] == 24 for s in state["steps"])   # 12 rounds, then 12 more
    cands = [c["sha"] for c in state["candidates"]]
    assert [c["sha"] for c in state["result"]["range"]] == cands
    assert "skipped" in (out / "summary.md").read_text()


def test_resume_after_a_kill(tmp_path, monkeypatch):
    tree, shas, cost, effects = _series(tmp_path)
    out = tmp_path / "b"
    monkeypatch.setattr(steps, "run_step", FakeRuns(effects, kill_at=3))
    with pytest.raises(KeyboardInterrupt):   # the third run is killed: step 02 is left running
        _bisect_raw(tree, out, shas)
    state = json.loads((out / "bisect.json").read_text())
    assert [s["status"] for s in state["steps"]][-1] == "running"
    again = FakeRuns(effects)
    monkeypatch.setattr(steps, "run_step", again)
    assert _bisect(tree, out, shas[0], shas[-1]) != 0   # a folder with a bisect needs --resume
    assert _bisect(tree, out, shas[0], shas[-1], "--resume") == 0
    done = json.loads((out / "bisect.json").read_text())
    assert done["result"]["first_bad"]["sha"] == cost
    names = [c[0] for c in again.calls]
    assert names[0] == state["steps"][-1]["dir"].split("/")[1]   # the interrupted step, resumed first
    assert all(n != state["steps"][0]["dir"].split("/")[1] for n in names)   # finished steps reused


def _bisect_raw(tree, out, shas):
    from ringlab.lab.bisect import Config, start
    cfg = Config("ptr_ring", str(tree), shas[0], shas[-1], out, params={"layouts": "4"})
    start(cfg, resume=False).run()


def test_range_without_candidates(tmp_path, monkeypatch, capsys):
    shas = make_repo(tmp_path / "tree", [("docs: a", None), ("docs: b", None)])
    monkeypatch.setattr(steps, "run_step", FakeRuns({}))
    assert _bisect(tmp_path / "tree", tmp_path / "b", shas[0], shas[-1]) == 0
    assert "changes include/linux/ptr_ring.h: nothing to bisect" in capsys.readouterr().out


@pytest.mark.parametrize("which", ["order", "unknown"])
def test_bad_revisions_exit_2(tmp_path, monkeypatch, capsys, which):
    tree, shas, _, effects = _series(tmp_path)
    monkeypatch.setattr(steps, "run_step", FakeRuns(effects))
    good, bad = (shas[-1], shas[0]) if which == "order" else ("no-such-rev", shas[-1])
    assert _bisect(tree, tmp_path / "b", good, bad) == 2
    err = capsys.readouterr().err
    assert "parameter 'good'" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_mail_matches_golden(tmp_path, capsys):
    shutil.copy(DATA / "bisect.json", tmp_path / "bisect.json")
    assert main(["mail", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert text == (DATA / "mail.txt").read_text()
    assert text.startswith("Subject: [ringlab] 0123456789ab ptr_ring: spin after the batch flush: "
                           "ptr_ring ns_per_op +10.5% regression\n")
    assert max(len(ln) for ln in text.splitlines()[1:]) <= 72   # the Subject: header may be longer


@pytest.mark.slow
def test_real_smoke_bisect_finds_the_flush_delay(tmp_path):
    """End to end on three commits (profile smoke, layouts 4: with 2 the t interval has 1 df): the built-in flush-delay commit."""
    from bisect_fakes import git
    from ringlab.sources import patches
    from ringlab.sources import builtin_patches
    shas = make_repo(tmp_path / "tree", [("ptr_ring: comment 1", comment_edit(base_header(), 1))])
    (tmp_path / "p.diff").write_text(builtin_patches.builtin_patch("builtin:flush-delay:256", kh.debian_header()).diff)
    git(tmp_path / "tree", "apply", str(tmp_path / "p.diff"))
    git(tmp_path / "tree", "commit", "-qam", "ptr_ring: spin after the batch flush")
    cost = git(tmp_path / "tree", "rev-parse", "HEAD")
    (tmp_path / "tree" / HEADER).write_text(comment_edit((tmp_path / "tree" / HEADER).read_text(), 2))
    git(tmp_path / "tree", "commit", "-qam", "ptr_ring: comment 2")
    out = tmp_path / "b"
    assert _bisect(tmp_path / "tree", out, shas[0], "HEAD", "-p", "profile", "smoke", "-p", "modes", "0",
                   "-p", "trials", "8") == 0
    state = json.loads((out / "bisect.json").read_text())
    assert state["result"]["status"] in ("found", "range")
    if state["result"]["status"] == "found":
        assert state["result"]["first_bad"]["sha"] == cost
    assert (out / state["endpoints"]["dir"] / "raw.csv").is_file()


def test_a_small_significant_change_is_not_called_bad_for_a_large_regression():
    small = {"delta_pct": 2.0, "ci_low_pct": 0.1, "ci_high_pct": 3.9}
    not_sig = {"delta_pct": -8.0, "ci_low_pct": -20.0, "ci_high_pct": 4.0}
    assert steps.classify(small, not_sig, +1) == "bad"            # without the endpoints' effect
    assert steps.classify(small, not_sig, +1, 10.0) == "unclear"  # 2 of 10 points: not the regression
    near = {"delta_pct": 9.0, "ci_low_pct": 6.0, "ci_high_pct": 12.0}
    assert steps.classify(near, not_sig, +1, 10.0) == "bad"


class NoisyRuns(FakeRuns):
    """Step frames with large round noise: one run of the endpoints cannot decide them."""

    def __init__(self, effects, noise_sd):
        super().__init__(effects)
        self.noise_sd = noise_sd

    def __call__(self, out_dir, experiment, params, resume, log=None):
        self.calls.append((Path(out_dir).name, resume))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return fake_frame(params, self.effects, noise_sd=self.noise_sd)


def test_endpoints_measure_until_decided(tmp_path, monkeypatch):
    """A real regression under noise that one run cannot resolve: the endpoints run again, then
    the bisection finds the commit."""
    tree, shas, cost, effects = _series(tmp_path)
    effects = {s: (0.12 if e else 0.0) for s, e in effects.items()}
    fake = NoisyRuns(effects, noise_sd=0.08)
    monkeypatch.setattr(steps, "run_step", fake)
    out = tmp_path / "b"
    assert _bisect(tree, out, shas[0], shas[-1]) == 0
    state = json.loads((out / "bisect.json").read_text())
    ep_runs = [c for c, _ in fake.calls if c.startswith("00-")]
    assert len(ep_runs) > 1, fake.calls                      # one run did not decide the endpoints
    ep = state["endpoints"]
    assert ep["regression"], ep
    # every run is a look at the pooled rounds, at its share of alpha (sequential.look_alpha):
    # up to ENDPOINT_BUDGET_FACTOR looks at 0.05 / 8 each
    assert ep["looks"] == len(ep_runs) and ep["max_looks"] == 8 and ep["alpha"] == pytest.approx(0.05 / 8)
    assert ep["holm_ci_level"] >= 1 - 0.05 / 8 - 1e-12
    for s in state["steps"]:
        assert s["max_looks"] == 3 and s["alpha"] == pytest.approx(0.05 / 3) and 1 <= s["looks"] <= 3
    assert state["result"]["status"] == "found" and state["result"]["first_bad"]["sha"] == cost


def test_endpoints_decided():
    big = {"delta_pct": 3.0, "ci_low_pct": 1.0, "ci_high_pct": 5.0, "verdict": "slower"}
    wide = {"delta_pct": 3.0, "ci_low_pct": -1.0, "ci_high_pct": 7.0, "verdict": "inconclusive"}
    flat = {"delta_pct": 0.1, "ci_low_pct": -0.5, "ci_high_pct": 0.6, "verdict": "no significant difference"}
    small = {"delta_pct": 1.0, "ci_low_pct": 0.2, "ci_high_pct": 1.8, "verdict": "slower"}
    assert steps.endpoints_decided([big], 2.0) and steps.endpoints_decided([flat], 2.0)
    assert not steps.endpoints_decided([wide], 2.0) and not steps.endpoints_decided([flat, wide], 2.0)
    assert not steps.endpoints_decided([{"error": "x"}], 2.0)
    # called but smaller than the threshold, its CI within it: no change that large, decided
    assert steps.endpoints_decided([small, flat], 2.0) and not steps.endpoints_decided([small, wide], 2.0)


def test_a_step_takes_its_share_of_its_own_endpoints_effect():
    """A noisy endpoint check (+16%) must not make the commit that carries the whole +8% unclear:
    the step's own bad-vs-good (+8.5%, called) is what its share is of."""
    step0 = {"delta_pct": 16.4, "ci_low_pct": 5.0, "ci_high_pct": 29.2}
    own = {"delta_pct": 8.5, "ci_low_pct": 7.2, "ci_high_pct": 9.8, "holm_ci_low_pct": 7.0, "holm_ci_high_pct": 10.0}
    vs_good = {"delta_pct": 8.0, "ci_low_pct": 6.8, "ci_high_pct": 9.1}
    vs_bad = {"delta_pct": -0.5, "ci_low_pct": -1.6, "ci_high_pct": 0.6}
    assert steps.classify(vs_good, vs_bad, 1, step0["delta_pct"]) == "unclear"      # 8.0 / 16.4 < 1/2
    assert steps.endpoint_effect(own, step0, 1) == 8.5
    assert steps.classify(vs_good, vs_bad, 1, steps.endpoint_effect(own, step0, 1)) == "bad"
    # the step's own estimate not called (or an error): step 0's is kept
    wide = {"delta_pct": 3.0, "ci_low_pct": -2.0, "ci_high_pct": 8.0}
    assert steps.endpoint_effect(wide, step0, 1) == 16.4
    assert steps.endpoint_effect({"error": "x"}, step0, 1) == 16.4
