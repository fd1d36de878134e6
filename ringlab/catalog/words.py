"""What the catalog's word enums and name tables share.

:class:`Word` is the base of an enum whose members are words (the verdict words, the stop
reasons): a member is its word (``str()``, ``format()``, ``==``, JSON and CSV give the word) and
carries the attributes its declaration lists after the word.  :func:`by_name` finds a catalog
entry by its name and, for an unknown name, raises the ParamError that names the allowed ones.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import TypeVar

from ringlab.errors import DataError, ParamError

T = TypeVar("T")


class Word(str, enum.Enum):
    """A member is ``(word, *attributes)``: its value is the word, and each further item is set
    as the attribute the subclass's ``__word_fields__`` names at its place.  ``__word_kind__``
    is what :meth:`parse`'s error calls a word ("verdict", "stop reason").

    Both are dunder names because Enum turns any other plain name in the class body into a
    member and refuses ``_sunder_`` names of its own; a dunder is a class attribute that the
    members' ``__new__`` can read while Enum makes them."""

    __word_fields__: tuple[str, ...] = ()
    __word_kind__ = "word"

    def __new__(cls, word: str, *attributes):
        fields = cls.__word_fields__
        if len(attributes) != len(fields):
            raise TypeError(f"{cls.__name__} {word!r}: {len(attributes)} attributes for the fields {fields}")
        obj = str.__new__(cls, word)
        obj._value_ = word
        for name, value in zip(fields, attributes):
            setattr(obj, name, value)
        return obj

    # the word itself wherever a member is printed (Enum's own str() would say "Verdict.FASTER")
    __str__ = str.__str__
    __format__ = str.__format__

    @classmethod
    def lookup(cls, text):
        """The member whose word is ``text`` (a member, a string, or a frame's cell); None for
        anything else (None, empty, NaN, an unknown word)."""
        try:
            return cls(text)
        except (ValueError, TypeError):
            return None

    @classmethod
    def parse(cls, text):
        """The member whose word is ``text``; DataError naming the allowed words otherwise."""
        w = cls.lookup(text)
        if w is None:
            raise DataError(f"unknown {cls.__word_kind__} {text!r}: allowed: " + ", ".join(repr(m.value) for m in cls),
                            input=str(text))
        return w


def by_name(entries: Iterable[T], name: str, what: str, key: Callable[[T], str] = lambda e: e.name,
            allowed: Iterable[str] | None = None, shown: str | None = None) -> T:
    """The entry of ``entries`` whose ``key`` is ``name``; otherwise ParamError "unknown <what>
    <shown>; allowed: <allowed>" (``shown``: ``repr(name)`` unless given; ``allowed``: the keys
    in order unless given)."""
    entries = tuple(entries)
    for e in entries:
        if key(e) == name:
            return e
    names = allowed if allowed is not None else (key(e) for e in entries)
    raise ParamError(f"unknown {what} {shown if shown is not None else repr(name)}; allowed: {', '.join(names)}",
                     input=name)


__all__ = ["Word", "by_name"]
