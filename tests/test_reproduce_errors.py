"""`ringlab reproduce` reports a notebook stopped by a bad parameter in one line: the
ParamError's message, not papermill's traceback."""
from __future__ import annotations

from papermill.exceptions import PapermillExecutionError

from ringlab.lab.reproduce import error_line


def _failed(ename: str, evalue: str) -> PapermillExecutionError:
    tb = ["Traceback (most recent call last):", '  File "<cell>", line 3', f"{ename}: {evalue}"]
    return PapermillExecutionError(cell_index=3, exec_count=3, source="check()", ename=ename,
                                   evalue=evalue, traceback=tb)


def test_param_error_is_its_message_alone():
    msg = "parameter 'modes': 7 is not a mode; allowed: 0, 1, 2"
    line = error_line(_failed("ParamError", msg))
    assert line == f"ParamError: {msg}"
    assert "\n" not in line and "Traceback" not in line and "PapermillExecutionError" not in line


def test_other_errors_keep_their_type_and_last_line():
    line = error_line(_failed("ZeroDivisionError", "division by zero"))
    assert line.startswith("PapermillExecutionError: ") and "\n" not in line
    assert error_line(TimeoutError("cell timed out\nafter 600 s")) == "TimeoutError: after 600 s"
