"""Strict, bounded JSON parsing for documents that come from outside (agent cards, request bodies).

:func:`loads_limited` accepts only UTF-8 text holding standard JSON (no ``NaN``/``Infinity``)
nested at most ``max_depth`` containers deep. It raises :class:`JsonLimitError`, a plain
``ValueError`` carrying a stable ``code`` and ``details``; callers turn it into their own error
type (the crawler into a ``CrawlError`` naming the URL, the API into a 400/413 answer).

Also refused, because they make one document mean different things to different readers:

- numbers that overflow a double (``1e400`` would parse to ``inf``, which no canonical JSON form,
  database or strict client accepts);
- an object with the same member twice (``{"url": "a", "url": "b"}``): Python keeps the last
  value, other parsers the first, so a signature checked on one reading would vouch for content
  a client reads differently from the stored bytes;
- strings holding NUL or an unpaired surrogate (no database stores them). With
  ``allow_nul`` (A2A bodies, whose content passes through) NUL is accepted, and the caller
  keeps it out of what it stores.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["JsonLimitError", "json_depth", "loads_limited"]


class JsonLimitError(ValueError):
    """A document that is not acceptable JSON.

    ``code`` is ``"invalid_json"`` (bad UTF-8, bad syntax, non-standard constants, numbers beyond
    the range of a double, oversized integers, duplicate object members) or ``"json_too_deep"``;
    ``message`` is one sentence without a trailing period, so callers can prefix the source
    ("The card at URL is not valid JSON: ...").
    """

    def __init__(self, code: str, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class _BadConstant(ValueError):
    pass


class _NotFinite(ValueError):
    pass


class _DuplicateMember(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _BadConstant(name)


_INF = float("inf")


def _finite_float(text: str) -> float:
    value = float(text)
    if value == _INF or value == -_INF:  # NaN cannot come from a JSON number literal
        raise _NotFinite(text)
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # the common case costs one length comparison
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateMember(key)
            seen.add(key)
    return obj


def loads_limited(
    data: bytes | str, *, max_depth: int, allow_nul: bool = False, finite: bool = True
) -> Any:
    """Parse ``data`` as strict JSON nested at most ``max_depth`` levels (a scalar is level 0).

    ``allow_nul``: strings may hold NUL (unpaired surrogates are still refused). ``finite``
    False: a number beyond a double's range parses to an infinity instead of being refused,
    for a caller that judges where it is (a JSON-RPC ``id``)."""
    text = _decode(data)
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float if finite else float,
            object_pairs_hook=_unique_object,
        )
    except _BadConstant as exc:
        raise JsonLimitError(
            "invalid_json", f"{exc} is not allowed in JSON", {"constant": str(exc)}
        ) from None
    except _NotFinite as exc:
        number = str(exc)
        shown = number if len(number) <= 40 else f"{number[:37]}..."
        raise JsonLimitError(
            "invalid_json",
            f"the number {shown} is beyond the range of a double (non-finite numbers are "
            "not allowed)",
            {"problem": "non-finite number", "number": shown},
        ) from None
    except _DuplicateMember as exc:
        member = str(exc)
        member = member if member.isprintable() else ascii(member)[1:-1]
        shown = member if len(member) <= 64 else f"{member[:61]}..."
        raise JsonLimitError(
            "invalid_json",
            f"an object has the member {shown!r} more than once",
            {"problem": "duplicate member", "member": shown},
        ) from None
    except json.JSONDecodeError as exc:
        raise JsonLimitError(
            "invalid_json",
            f"{exc.msg} at line {exc.lineno}, column {exc.colno}",
            {"line": exc.lineno, "column": exc.colno, "problem": exc.msg},
        ) from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:  # e.g. an integer beyond sys.get_int_max_str_digits()
        raise JsonLimitError("invalid_json", str(exc), {"problem": str(exc)}) from None
    if json_depth(value, stop_after=max_depth) > max_depth:
        raise _too_deep(max_depth)
    if (_SURROGATE_ESCAPE if allow_nul else _SUSPECT_ESCAPE).search(text):
        _check_strings(value, allow_nul)
    return value


# Escapes that decode to text no database can store: NUL, and UTF-16 surrogates (a pair is
# decoded to one character by json; a lone one survives as an unencodable code point).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _check_strings(value: Any, allow_nul: bool = False) -> None:
    """Refuse strings (keys included) holding NUL (unless ``allow_nul``) or an unpaired
    surrogate."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            if not allow_nul and "\x00" in node:
                raise JsonLimitError(
                    "invalid_json", "strings must not contain NUL (\\u0000)", {"problem": "NUL"}
                )
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonLimitError(
                    "invalid_json",
                    "strings must not contain an unpaired UTF-16 surrogate escape",
                    {"problem": "unpaired surrogate"},
                ) from None


def json_depth(value: Any, *, stop_after: int | None = None) -> int:
    """Nesting depth of a parsed JSON value, computed without recursion.

    A scalar has depth 0, ``[]`` and ``{}`` depth 1, ``[[1]]`` depth 2. With ``stop_after``
    the walk stops as soon as that depth is exceeded and returns ``stop_after + 1``.
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if stop_after is not None and deepest > stop_after:
            return stop_after + 1
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _decode(data: bytes | str) -> str:
    if isinstance(data, str):
        return data
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonLimitError(
            "invalid_json",
            f"the document is not valid UTF-8 (bad byte at offset {exc.start})",
            {"problem": "invalid UTF-8", "offset": exc.start},
        ) from None


def _too_deep(max_depth: int) -> JsonLimitError:
    return JsonLimitError(
        "json_too_deep",
        f"the document nests objects and arrays deeper than {max_depth} levels",
        {"max_depth": max_depth},
    )
