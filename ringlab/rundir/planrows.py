"""The rows a resumed run finds in raw.csv, checked against the run's own plan.

``--resume`` keeps the rows already in raw.csv and runs the trials they do not cover.  It keeps
only rows it could have written itself: each row must be a trial of the plan the run makes from
its stored parameters (variants, modes, sizes, CPUs, trial indexes: the keys of
``TrialSpec.key()``, arms that take turns included), and no two rows may be the same trial
(the same key and ``iteration``).  A row of a variant the run does not measure, or a trial
copied twice, is refused with ``DataError`` naming raw.csv, the line, the column and the value
(``quote``: sanitised and bounded), so that the counts and statistics of the resumed run are
those of the trials it ran.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ringlab.errors import DataError
from ringlab.rundir.inputs import quote

#: how many of the plan's values an error lists
_SHOWN = 8


def _flat(plan: Iterable[Any]) -> Iterable[Any]:
    """Every spec of ``plan``, the arms that take turns with a block's first arm included."""
    for s in plan:
        yield s
        yield from (getattr(s, "extra", None) or {}).get("partners") or ()


def _listed(values: Iterable[str]) -> str:
    vals = sorted(values, key=lambda v: (len(v), v))
    return ", ".join(vals[:_SHOWN]) + (", ..." if len(vals) > _SHOWN else "")


class PlanRows:
    """The trial keys a run's plan holds (``plan``: its ``TrialSpec``s), and what each column of
    them may hold, to name the column of a row that is not one of them."""

    def __init__(self, plan: Iterable[Any]):
        self.keys: set[tuple] = set()
        self.values: dict[str, set[str]] = {}
        self.cpus: set[str] = set()
        self.trials: set[int] = set()
        self.icount = False
        for s in _flat(plan):
            self.keys.add(s.key())
            for c, v in s.config.items():
                self.values.setdefault(c, set()).add(str(v))
            self.cpus.add(f"{s.cpus[0]}:{s.cpus[1]}")
            self.trials.add(int(s.trial))
            self.icount |= getattr(s, "kind", "timing") == "icount"

    def refuse(self, path: Path, lineno: int, row: list[str], idx: dict[str, int], key: tuple) -> None:
        """DataError naming the column of line ``lineno`` whose value the plan does not hold,
        unless ``key`` (the row's trial key) is one of the plan's."""
        if key in self.keys:
            return
        why = "a trial of this run's plan (--resume keeps only rows of the trials it runs)"
        for c, allowed in self.values.items():
            v = row[idx[c]]
            if v not in allowed:
                raise DataError(f"{path}: line {lineno}: column '{c}' is {quote(v)}; expected one of "
                                f"{_listed(allowed)}: {why}", input=path)
        pc = f"{row[idx['cpu_req_producer']]}:{row[idx['cpu_req_consumer']]}"
        if pc not in self.cpus:
            raise DataError(f"{path}: line {lineno}: columns 'cpu_req_producer':'cpu_req_consumer' are "
                            f"{quote(pc)}; expected one of {_listed(self.cpus)}: {why}", input=path)
        trial = row[idx["trial"]]
        if dict(key).get("kind") == "icount" and not self.icount:
            raise DataError(f"{path}: line {lineno}: column 'icount_source' is 'callgrind'; expected no "
                            f"instruction-count trial (the plan holds none): {why}", input=path)
        if int(trial) not in self.trials:
            raise DataError(f"{path}: line {lineno}: column 'trial' is {quote(trial)}; expected a trial index "
                            f"from {min(self.trials)} to {max(self.trials)}: {why}", input=path)
        raise DataError(f"{path}: line {lineno}: column 'trial' is {quote(trial)}; expected {why}: this "
                        "configuration plans no such trial", input=path)


def duplicate(path: Path, lineno: int, first: int, row: list[str], idx: dict[str, int],
              config_keys: list[str]) -> DataError:
    """The error for line ``lineno``: the same trial (key and iteration) as line ``first``."""
    of = "".join(f" of {c} {quote(row[idx[c]])}" for c in config_keys[:1] if c in idx)
    it = f", iteration {quote(row[idx['iteration']])}" if "iteration" in idx else ""
    return DataError(f"{path}: line {lineno}: column 'trial' is {quote(row[idx['trial']])}{of}{it}: the same "
                     f"trial as line {first}; expected each trial once (--resume keeps only the rows it wrote)",
                     input=path)


__all__ = ["PlanRows", "duplicate"]
