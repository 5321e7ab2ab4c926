"""Pagination of listings with opaque cursors.

A cursor holds the sort key of the last item of a page and the scope it belongs to (the
kind of listing, which names the match mode of a search by meaning, and a fingerprint of the
query, from its ``repr``), so it cannot be replayed elsewhere; a cursor that is not one of
ours, or belongs to another scope, is a 400 ``invalid_cursor``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from registry.errors import RegistryError

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results and the cursor of the next, if any."""

    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True)
class Ordering(Generic[T]):
    """How one kind of listing is sorted: its name, sort key and the key's element types."""

    kind: str
    key: Callable[[T], list[Any]]
    shape: tuple[type, ...]

    def scope(self, query: object) -> str:
        """The scope of a listing: its kind and a fingerprint of its filters."""
        return f"{self.kind}:{hashlib.sha256(repr(query).encode()).hexdigest()[:16]}"


def encode_cursor(scope: str, key: list[Any]) -> str:
    """An opaque cursor for the position after the item whose sort key is ``key``."""
    raw = json.dumps({"s": scope, "k": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, scope: str, shape: Sequence[type]) -> list[Any]:
    """The sort key inside ``cursor``; :class:`RegistryError` (400) unless it is one of ours,
    for this ``scope``, with a key of ``shape`` (the type of each element)."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()), parse_constant=_no_nan)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("k"), list):
        raise _bad_cursor(cursor, "the cursor is not valid; pass next_cursor unchanged")
    if data.get("s") != scope:
        raise _bad_cursor(
            cursor,
            "the cursor belongs to another listing, other filters or the other match mode; "
            "start without it",
        )
    if not _fits(data["k"], shape):
        raise _bad_cursor(cursor, "the cursor is not valid; pass next_cursor unchanged")
    return data["k"]


def _fits(key: list[Any], shape: Sequence[type]) -> bool:
    if len(key) != len(shape):
        return False
    return all(
        type(value) is kind or (kind is float and type(value) is int)
        for value, kind in zip(key, shape, strict=True)
    )


def _no_nan(name: str) -> Any:
    raise ValueError(name)


def _bad_cursor(cursor: str, message: str) -> RegistryError:
    return RegistryError(message, code="invalid_cursor", details={"cursor": cursor})


def paginate(
    items: Sequence[T], ordering: Ordering[T], query: object, limit: int, cursor: str | None
) -> Page[T]:
    """The page of ``items`` (already sorted by ``ordering``) that follows ``cursor``."""
    scope = ordering.scope(query)
    start = 0
    if cursor:
        after = decode_cursor(cursor, scope, ordering.shape)
        start = next((n for n, item in enumerate(items) if ordering.key(item) > after), len(items))
    page = list(items[start : start + limit])
    more = start + limit < len(items)
    next_cursor = encode_cursor(scope, ordering.key(page[-1])) if more and page else None
    return Page(page, next_cursor)
