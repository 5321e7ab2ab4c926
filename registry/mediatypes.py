"""Media type matching with wildcards, as skills' input and output modes need it.

``image/*`` matches ``image/png`` and the reverse; ``*/*`` matches everything; parameters
(``; charset=utf-8``) and case are ignored. Old cards use bare words (``text``, ``file``,
``data``): they read as the families they stand for.
"""

from __future__ import annotations

from collections.abc import Iterable

_ALIASES = {
    "text": "text/*",
    "file": "*/*",
    "data": "application/json",
    "json": "application/json",
    "image": "image/*",
    "audio": "audio/*",
    "video": "video/*",
}


def normalize(media_type: str) -> str:
    """Lower-case ``type/subtype`` without parameters; bare aliases expanded."""
    base = media_type.split(";", 1)[0].strip().lower()
    if "/" not in base:
        return _ALIASES.get(base, f"{base}/*" if base else "*/*")
    return base


def matches(a: str, b: str) -> bool:
    """True if media types ``a`` and ``b`` overlap (either side may hold wildcards)."""
    a_type, _, a_sub = normalize(a).partition("/")
    b_type, _, b_sub = normalize(b).partition("/")
    if "*" in (a_type, b_type):
        return True
    if a_type != b_type:
        return False
    return "*" in (a_sub, b_sub) or a_sub == b_sub


def any_match(wanted: str, offered: Iterable[str]) -> bool:
    """True if ``wanted`` overlaps any media type in ``offered``."""
    return any(matches(wanted, media_type) for media_type in offered)
