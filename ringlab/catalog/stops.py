"""Why a run on a target (``-p target_ci``) stopped: one enum, :class:`StopReason`, whose members
are the words env.json's ``stopping.stop_reason`` (and each stage's ``stop_reason``) holds.

A member is its word (``StopReason.BUDGET == "budget"``; ``str()`` and ``format()`` give the word),
so env.json and the logs hold the same text whether the code wrote a member or a plain string.
Each member says

- ``ends_run``: the run stops on it (False: "continue", a stage's review that went on);
- ``answered``: every judged row is answered (its target reached, or decided), so the run is not
  short of its target;
- ``limit``: a limit of the run stopped it short of its target (the budget, the most stages): the
  record then says what would reach the target;
- ``mode``: ``-p stop`` may ask for it: the run stops when it holds ("decided": every row
  decided or its target reached; "target": every row's target reached);
- ``decided_answers``: as the mode asked for, a decided row (called, or its CI within the
  target) is answered; False: only its target half-width answers it;
- ``staged``: the staged design gives it (False: the two-stage design of older runs only);
- ``head``: how the runner's log and summary.md's first sentence say it, after "stopped: "
  (a ``str.format`` template over ``spent_s``, ``budget_s``, ``max_stages`` and ``error``);
  "" for "continue" and for the two-stage design's words, whose sentences
  ``ringlab.report.stopping_sentences`` writes.

Which reason a stage gives is decided by ``ringlab.stats.sequential`` (``stage_stop_reason``,
``review``); docs/methods.md's table of the reasons is :func:`markdown_table`.
"""
from __future__ import annotations

from ringlab.catalog.words import Word


class StopReason(Word):
    """A stop reason; see the module's docstring for the attributes."""

    # word, ends_run, answered, limit, mode, decided_answers, staged, head
    DECIDED = ("decided", True, True, False, True, True, True, "all rows decided")
    TARGET = ("target", True, True, False, True, False, True, "target reached")
    BUDGET = ("budget", True, False, True, False, False, True, "budget spent ({spent_s:.0f} s of {budget_s:g})")
    STAGES = ("stages", True, False, True, False, False, True, "{max_stages} stages ran, the most a run makes")
    NO_PLAN = ("no plan", True, False, False, False, False, True, "the data could not be analysed ({error})")
    CONTINUE = ("continue", False, False, False, False, False, True, "")
    PILOT_MET_TARGET = ("pilot met target", True, True, False, False, False, False, "")

    __word_fields__ = ("ends_run", "answered", "limit", "mode", "decided_answers", "staged", "head")
    __word_kind__ = "stop reason"

    @classmethod
    def mode_of(cls, text) -> StopReason:
        """The ``-p stop`` mode ``text`` names (env.json ``stopping.stop``); "decided", the
        parameter's default, where it names none."""
        r = cls.lookup(text)
        return r if r is not None and r.mode else cls.DECIDED

    def stopped_head(self, spent_s: float = 0.0, budget_s: float = 0.0, max_stages: int = 0,
                     error: str | None = None) -> str:
        """"stopped: <head>" with the run's figures filled in ("" for a reason without a head)."""
        if not self.head:
            return ""
        return "stopped: " + self.head.format(spent_s=float(spent_s or 0), budget_s=float(budget_s or 0),
                                              max_stages=max_stages, error=error)


#: what ``-p stop`` may ask for, in the enum's order ("decided", "target")
STOP_MODES = tuple(r.value for r in StopReason if r.mode)


def markdown_table() -> str:
    """docs/methods.md's table of the stop reasons of a staged run: one row per member that ends
    one, in the enum's order."""
    lines = ["| `stop_reason` | summary.md and the log say | rows answered | `-p stop` |", "|---|---|---|---|"]
    for r in StopReason:
        if r.staged and r.ends_run:
            head = r.head.replace("{spent_s:.0f}", "N").replace("{budget_s:g}", "M").replace(
                "{max_stages}", "K").replace("{error}", "why")
            lines.append(f"| `{r.value}` | stopped: {head} | {'yes' if r.answered else 'no'} "
                         f"| {r.value if r.mode else ''} |")
    return "\n".join(lines) + "\n"


__all__ = ["STOP_MODES", "StopReason", "markdown_table"]
