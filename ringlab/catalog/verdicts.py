"""The verdict words of a compare() row: one enum, :class:`Verdict`, whose members say what each
word claims.

A member is its word: ``Verdict.FASTER == "faster"``, ``str()`` and ``format()`` give the word, so
summary.csv, compare.csv, ``compare --json`` and the mail write the same text whether a row holds a
member or the plain string.  Each member says

- ``is_call``: the word calls a difference (the CI the verdict rests on excludes 0);
- ``is_settled``: the word answers the row's question (False: more rounds would decide it, and the
  row's ``trials_needed`` says how many);
- ``direction``: +1 when the call favours the candidate (faster, fewer instructions), -1 when it
  favours the baseline, 0 for a word that is not a call;
- ``instructions``: the word is about instruction counts (never said of times);
- ``produced``: compare() gives it (False: a word of older result files, read but never made);
- ``meaning``: what the word says, in one line (docs/verdicts.md's table of the words is
  :func:`markdown_table`).

Which word a row gets is decided by ``ringlab.stats.decide`` (and recomputed by
``ringlab.report.verify``); everything else reads these attributes instead of lists of words.
"""
from __future__ import annotations

from ringlab.catalog.words import Word


class Verdict(Word):
    """A verdict word; see the module's docstring for the attributes."""

    # word, is_call, is_settled, direction, instructions, produced, meaning
    FASTER = ("faster", True, True, +1, False, True,
              "the CI excludes 0 on the candidate's side: the candidate is faster (or better, for other metrics)")
    SLOWER = ("slower", True, True, -1, False, True,
              "the CI excludes 0 on the baseline's side: the candidate is slower (or worse)")
    FEWER_INSTRUCTIONS = ("fewer instructions", True, True, +1, True, True,
                          "the candidate executes fewer instructions per operation")
    MORE_INSTRUCTIONS = ("more instructions", True, True, -1, True, True,
                         "the candidate executes more instructions per operation")
    SAME_INSTRUCTIONS = ("same instructions", False, True, 0, True, True,
                         "exact instruction counts that are equal")
    NO_DIFFERENCE = ("no significant difference", False, True, 0, False, True,
                     "the CI includes 0 and lies within the equivalence margin: any change is smaller than it")
    INCONCLUSIVE = ("inconclusive", False, False, 0, False, True,
                    "the CI includes 0 and reaches beyond the equivalence margin: too few rounds or layouts to tell")
    NOT_AFTER_HOLM = ("not significant after Holm", False, False, 0, False, True,
                      "the 95% CI excludes 0, but Holm over the run's comparisons does not reject it")
    STATE_DEPENDENT = ("depends on machine state", False, True, 0, False, False,
                       "per-state CIs on opposite sides of 0 (older result files only)")

    __word_fields__ = ("is_call", "is_settled", "direction", "instructions", "produced", "meaning")
    __word_kind__ = "verdict"

    @classmethod
    def call(cls, direction: int, instructions: bool = False) -> Verdict:
        """The call of ``direction`` (+1: in the candidate's favour, -1: against it) for instruction
        counts (``instructions``) or for any other metric."""
        for v in cls:
            if v.is_call and v.produced and v.direction == direction and v.instructions == instructions:
                return v
        raise ValueError(f"no verdict calls direction {direction!r} (instructions={instructions})")


#: the words that call a difference (faster, slower, fewer / more instructions)
CALLS = frozenset(v for v in Verdict if v.is_call)
#: the words that leave the row's question open: ``trials_needed`` says how many rounds would decide it
UNSETTLED = frozenset(v for v in Verdict if not v.is_settled)
#: the words compare() gives a row of times (or any metric but instruction counts) that it does not call
NOT_CALLED = tuple(v for v in Verdict if v.produced and not v.is_call and not v.instructions)


def is_call(text) -> bool:
    """Whether a row's verdict (a word, a member, or a missing cell) calls a difference."""
    v = Verdict.lookup(text)
    return v is not None and v.is_call


def markdown_table() -> str:
    """docs/verdicts.md's table of the words: one row per member, in the enum's order."""
    lines = ["| verdict | a call | settled | meaning |", "|---|---|---|---|"]
    for v in Verdict:
        lines.append(f"| `{v.value}` | {'yes' if v.is_call else 'no'} | {'yes' if v.is_settled else 'no'} "
                     f"| {v.meaning} |")
    return "\n".join(lines) + "\n"


__all__ = ["CALLS", "NOT_CALLED", "UNSETTLED", "Verdict", "is_call", "markdown_table"]
