"""The jku policy: which ``jku`` URLs of cards are followed (``SWITCHBOARD_TRUSTED_JKU``).

A card's own ``jku`` is followed only when it is on the allow-list: it must be a plain
http(s) URL in normal form (what is checked is exactly what is fetched) under one of the
prefixes, compared by scheme, host, port and path segment.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from yarl import URL

from registry.netguard import redact_url

log = logging.getLogger("registry.trust")  # the logger operators know (docs/operations.md)

MAX_URL = 2048  # the longest jku or trusted JWKS URL
# what a jku must not contain: control characters, backslashes, ";" (path parameters, which
# some servers strip: "..;/"), encoded slashes and backslashes (decoded by some servers)
_JKU_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\;]|%2[fF]|%5[cC]")
_JKU_FORBIDDEN_WHY = "control characters, '\\', ';', '%2F' or '%5C'"

Origin = tuple[str, str | None, int | None]


def origin(url: URL) -> Origin:
    """The scheme (lower case), host (as written) and port of ``url``."""
    return (url.scheme.lower(), url.raw_host, url.port)


class TrustedJku:
    """The ``SWITCHBOARD_TRUSTED_JKU`` allow-list, parsed once; unusable prefixes are logged
    and ignored."""

    def __init__(self, prefixes: list[str]) -> None:
        self.prefixes = [prefix for prefix in prefixes if prefix]
        parsed = (_Prefix.parse(prefix) for prefix in self.prefixes)
        self._parsed = [prefix for prefix in parsed if prefix is not None]

    def check(self, jku: str) -> URL | str:
        """The URL to fetch for an allowed ``jku``, or a note saying why it is not followed.

        The jku must be a plain http(s) URL in normal form: yarl sends exactly its text (no dot
        segments, no needless percent-encoding, no default port...), and it has no query or
        fragment, control characters, ``\\``, ``;``, ``%2F`` or ``%5C``. It is then compared
        with each prefix by scheme, host and port, and path segment by segment: a prefix
        ending in "/" matches URLs below it; any other prefix matches itself or URLs below
        it (so ``https://keys.example.com`` does not match ``https://keys.example.com.evil.net/``
        and ``https://a.example/team`` does not match ``https://a.example/teams``).
        """
        url, problem = _jku_shape_problem(jku)
        if url is None:
            return f"the card's jku {jku!r} is refused: {problem}"
        if not any(prefix.covers(url) for prefix in self._parsed):
            return f"the card's jku {jku} is not on SWITCHBOARD_TRUSTED_JKU"
        return url


@dataclass(frozen=True)
class _Prefix:
    """One ``SWITCHBOARD_TRUSTED_JKU`` prefix, parsed: an origin and leading path segments.

    ``directory`` (the prefix ends in "/"): a URL must have more segments than ``segments``
    (``/team/`` matches ``/team/`` and ``/team/x``, not ``/team``); otherwise a URL may also
    end where the prefix does (``/team`` matches ``/team`` and ``/team/x``, not ``/teams``).
    """

    origin: Origin
    segments: tuple[str, ...]
    directory: bool

    @classmethod
    def parse(cls, text: str) -> _Prefix | None:
        try:
            url = URL(text)
            usable = (
                url.scheme.lower() in ("http", "https")
                and bool(url.raw_host)
                and url.raw_user is None
                and url.raw_password is None
                and not url.raw_query_string
                and not url.raw_fragment
                and "?" not in text
                and "#" not in text
            )
        except (ValueError, TypeError):
            usable = False
        if not usable:
            shown = redact_url(text)
            log.warning("SWITCHBOARD_TRUSTED_JKU: %r is not a plain http(s) URL; ignored", shown)
            return None
        segments = url.raw_path.split("/")
        directory = segments[-1] == ""
        if directory:
            segments = segments[:-1]
        return cls(origin(url), tuple(segments), directory)

    def covers(self, url: URL) -> bool:
        segments = url.raw_path.split("/")
        n = len(self.segments)
        return (
            origin(url) == self.origin
            and tuple(segments[:n]) == self.segments
            and (len(segments) > n if self.directory else len(segments) >= n)
        )


def _jku_shape_problem(text: str) -> tuple[URL | None, str | None]:
    """``text`` parsed, if it is a jku that may be checked against the allow-list, else why not.

    What is compared must be what is fetched: a jku is refused when yarl would send anything
    else than its exact text (``str(URL(jku)) != jku``: dot segments, percent-encoding of
    unreserved characters, a default port, upper-case host, whitespace...), and when it holds
    characters that some servers decode or strip (control characters, ``\\``, ``;``, ``%2F``,
    ``%5C``), a query or a fragment (each variant would be its own fetch and cache entry).
    """
    if not isinstance(text, str):
        return None, "it is not a string"
    if len(text) > MAX_URL:
        return None, f"it is longer than {MAX_URL} characters"
    forbidden = _JKU_FORBIDDEN.search(text)
    if forbidden:
        found = forbidden.group()
        what = f"U+{ord(found):04X}" if len(found) == 1 and found not in "\\;" else repr(found)
        return None, f"it contains {what} (a jku must not contain {_JKU_FORBIDDEN_WHY})"
    if "?" in text or "#" in text:
        return None, "it has a query or a fragment"
    try:
        url = URL(text)
        normal = str(url)
        host = url.raw_host
    except (ValueError, TypeError):
        return None, "it is not a valid URL"
    if url.scheme.lower() not in ("http", "https") or not host:
        return None, "it is not an absolute http(s) URL"
    if url.raw_user is not None or url.raw_password is not None:
        return None, "it carries credentials"
    if normal != text:
        return None, f"it is not in normal form (it would be fetched as {normal})"
    if any(segment in (".", "..") for segment in url.raw_path.split("/")):
        return None, "it has '.' or '..' path segments"  # pragma: no cover - yarl resolves them
    return url, None
