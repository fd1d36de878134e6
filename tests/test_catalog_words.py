"""The verdict words and stop reasons are declared once, in ``ringlab.catalog``: every attribute
a member states holds, docs/verdicts.md and docs/methods.md list every member (their tables are
the catalog's own), and no module of ringlab spells a verdict word or compares a stop reason
as a literal of its own."""
from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pandas as pd
import pytest

from ringlab.catalog import CALLS, NOT_CALLED, STOP_MODES, UNSETTLED, StopReason, Verdict, is_call
from ringlab.catalog import stops as stops_catalog
from ringlab.catalog import verdicts as verdicts_catalog
from ringlab.catalog.words import Word
from ringlab.errors import DataError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ringlab"

#: modules allowed to hold a verdict word as a literal, and why
VERDICT_LITERAL_ALLOWED = {
    "catalog/verdicts.py": "the declaration itself",
}


def test_a_member_is_its_word_wherever_it_is_written():
    for v in Verdict:
        assert v == v.value and str(v) == v.value and f"{v}" == v.value and type(str(v)) is str
        assert json.dumps(v) == json.dumps(v.value)
        assert v.value in {v} and v in {v.value}
    frame = pd.DataFrame({"verdict": list(Verdict)})
    assert frame.to_csv(index=False).splitlines()[1:] == [v.value for v in Verdict]


def test_the_attributes_of_the_verdicts():
    """What today's words state (a word added later needs no line here), and the sets derived from
    every member."""
    assert CALLS == {v for v in Verdict if v.is_call} and UNSETTLED == {v for v in Verdict if not v.is_settled}
    assert NOT_CALLED == tuple(v for v in Verdict if v.produced and not v.is_call and not v.instructions)
    for v in ("faster", "slower", "fewer instructions", "more instructions"):
        assert v in CALLS and Verdict(v).is_settled
    for v in ("inconclusive", "not significant after Holm"):
        assert v in UNSETTLED and v in NOT_CALLED
    assert "no significant difference" in NOT_CALLED and Verdict.NO_DIFFERENCE.is_settled
    assert "same instructions" not in NOT_CALLED and Verdict.SAME_INSTRUCTIONS.instructions
    for v in Verdict:
        assert (v.direction != 0) == v.is_call
        assert v.meaning and v.meaning == v.meaning.strip()
    assert Verdict.call(+1) is Verdict.FASTER and Verdict.call(-1) is Verdict.SLOWER
    assert Verdict.call(+1, instructions=True) is Verdict.FEWER_INSTRUCTIONS
    assert Verdict.call(-1, instructions=True) is Verdict.MORE_INSTRUCTIONS
    assert not Verdict.STATE_DEPENDENT.produced
    assert is_call("slower") and not is_call("inconclusive") and not is_call(float("nan")) and not is_call(None)


def test_a_member_survives_pickling_and_states_each_declared_field():
    for m in (*Verdict, *StopReason):
        for proto in range(pickle.HIGHEST_PROTOCOL + 1):
            assert pickle.loads(pickle.dumps(m, proto)) is m
        assert all(hasattr(m, name) for name in type(m).__word_fields__)
    assert Verdict("faster") is Verdict.FASTER and "__word_fields__" not in Verdict.__members__


def test_a_word_with_the_wrong_number_of_attributes_is_refused():
    with pytest.raises(TypeError, match="1 attributes"):
        class Short(Word):
            ONE = ("one", True)
            __word_fields__ = ("a", "b")


def test_parse_names_the_allowed_words():
    assert Verdict.parse("no significant difference") is Verdict.NO_DIFFERENCE
    with pytest.raises(DataError) as e:
        Verdict.parse("quicker")
    assert "'quicker'" in str(e.value) and all(repr(v.value) in str(e.value) for v in Verdict)
    with pytest.raises(DataError) as e:
        StopReason.parse("tired")
    assert all(repr(r.value) in str(e.value) for r in StopReason)


def test_the_stop_reasons():
    """What today's reasons state (a reason added later needs no line here)."""
    assert STOP_MODES == tuple(r.value for r in StopReason if r.mode)
    assert STOP_MODES[0] == "decided" and "target" in STOP_MODES      # the parameter's default first
    assert StopReason.BUDGET.limit and StopReason.STAGES.limit and not StopReason.NO_PLAN.limit
    assert StopReason.DECIDED.answered and StopReason.TARGET.answered and not StopReason.BUDGET.answered
    assert StopReason.DECIDED.decided_answers and not StopReason.TARGET.decided_answers
    assert StopReason.mode_of("target") is StopReason.TARGET and StopReason.mode_of(None) is StopReason.DECIDED
    assert StopReason.BUDGET.stopped_head(117.4, 120) == "stopped: budget spent (117 s of 120)"
    assert StopReason.STAGES.stopped_head(max_stages=6) == "stopped: 6 stages ran, the most a run makes"
    assert StopReason.CONTINUE.stopped_head() == "" and not StopReason.CONTINUE.ends_run


def _section_table(doc: Path, first_line: str) -> str:
    text = doc.read_text()
    start = text.index(first_line)
    end = text.find("\n\n", start)
    block = text[start:end + 1 if end >= 0 else len(text)]
    return "".join(line.strip() + "\n" for line in block.splitlines())     # a table in a list item is indented


def test_docs_list_every_verdict_word():
    table = verdicts_catalog.markdown_table()
    assert _section_table(ROOT / "docs" / "verdicts.md", table.splitlines()[0]) == table, (
        "docs/verdicts.md's table of the verdict words must be ringlab.catalog.verdicts.markdown_table():\n" + table)


def test_docs_list_every_stop_reason():
    table = stops_catalog.markdown_table()
    assert _section_table(ROOT / "docs" / "methods.md", table.splitlines()[0]) == table, (
        "docs/methods.md's table of the stop reasons must be ringlab.catalog.stops.markdown_table():\n" + table)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings (of the module, a class or a function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        yield rel, ast.parse(path.read_text(), filename=str(path))


def test_no_verdict_word_is_spelled_outside_the_catalog():
    """A string literal that is a verdict word (a docstring aside) belongs in ringlab.catalog: the
    code names the member (``Verdict.FASTER``) or asks its attributes (``is_call``)."""
    words = {v.value for v in Verdict}
    found = []
    for rel, tree in _modules():
        if rel in VERDICT_LITERAL_ALLOWED:
            continue
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words \
                    and id(node) not in docs:
                found.append(f"ringlab/{rel}:{node.lineno}: {node.value!r}")
    assert not found, "verdict words spelled outside ringlab/catalog/verdicts.py:\n" + "\n".join(found)


def _mentions_stop(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return "stop_reason" in text or text in ("reason", "stop") or text.endswith(".stop")


def test_no_stop_reason_is_compared_as_a_literal():
    """A comparison of a stop reason or stop mode (``stop_reason``, ``reason``, ``.stop``) with a
    literal word: the code names the member (``StopReason.BUDGET``) or asks its attributes."""
    words = {r.value for r in StopReason}
    found = []
    for rel, tree in _modules():
        if rel.startswith("catalog/"):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            literals = [c for s in sides for c in ([s] + list(getattr(s, "elts", [])))
                        if isinstance(c, ast.Constant) and c.value in words]
            if literals and any(_mentions_stop(s) for s in sides):
                found.append(f"ringlab/{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "stop reasons compared as literals outside ringlab/catalog:\n" + "\n".join(found)
