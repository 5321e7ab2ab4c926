"""Event shapes: recognizing, without parsing it, a JSON text built like one already checked.

An agent streaming tokens sends thousands of events that differ only in their texts. The byte
relay (:mod:`router.forward.fastrelay`) checks one such event on the parsed path; this module
lets it relay the following ones by comparing text instead of parsing JSON.

:func:`split` cuts a JSON text at its strings: ``parts[0::2]`` is everything between them
(brackets, colons, commas, numbers, ``true``/``false``/``null``, whitespace), ``parts[1::2]``
the strings, quotes and escapes kept. Only well-formed JSON strings count as strings, so in
valid JSON every ``"`` is inside one. A :class:`Shape` remembers a checked event's parts: the
text between strings, every key, and the values that decide what the relay does (those of
the keys in :data:`DECIDING`); the other string values are free. A text matches the shape
when it has the same text between its strings and the same strings everywhere but at the free
places, which hold any well-formed JSON string. Such a text is valid JSON (there is no ``"``
between its strings, so its strings are exactly the ones found), with the same structure,
keys and deciding values as the checked event: only free texts differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["DECIDING", "Shape", "split"]

# a JSON string: no raw control character, quote or backslash but in a valid escape
_STRING = r'"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"'
_SPLIT = re.compile(f"({_STRING})").split
_STRING_AT = re.compile(_STRING).match
_SPACE = " \t\n\r"

_DECIDING = ("jsonrpc", "id", "kind", "taskId", "contextId", "state", "final", "referenceTaskIds")
DECIDING = frozenset(f'"{key}"' for key in _DECIDING)
"""The keys (as JSON strings) whose string values must stay what they were in the checked
event: the ones the byte relay reads to decide, and the IDs it swaps."""

split: Callable[[str], list[str]] = _SPLIT
"""``text`` cut at its JSON strings (see the module docstring)."""


class Shape:
    """The shape of a checked event's text; :meth:`matches` tells whether another text has it.

    It is the text cut at its free strings: the literal pieces between them, each free string
    standing for any JSON string.
    """

    __slots__ = ("_first", "_rest", "_size")

    def __init__(self, pieces: list[str]) -> None:
        self._first = pieces[0]
        self._rest = tuple(pieces[1:])
        self._size = len(self._first)

    @classmethod
    def of(cls, parts: list[str]) -> Shape | None:
        """The shape of a checked event's text cut by :func:`split`, or None when a key is
        written with an escape (its spelling would not say which key it is)."""
        pieces = [parts[0]]
        for at in range(1, len(parts), 2):
            token, after = parts[at], parts[at + 1]
            if after.lstrip(_SPACE).startswith(":"):  # a key
                if "\\" in token:
                    return None
                pieces[-1] += token + after
            elif parts[at - 1].strip(_SPACE) == ":" and parts[at - 2] in DECIDING:
                pieces[-1] += token + after  # the value of a deciding key
            else:
                pieces.append(after)  # a free string, then what follows it
        return cls(pieces)

    def matches(self, text: str) -> bool:
        """``text`` has this shape: only free strings differ."""
        if not text.startswith(self._first):
            return False
        at = self._size
        for piece in self._rest:
            string = _STRING_AT(text, at)
            if string is None:
                return False
            at = string.end()
            if not text.startswith(piece, at):
                return False
            at += len(piece)
        return at == len(text)
