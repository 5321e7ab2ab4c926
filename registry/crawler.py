"""Fetch agent cards (and other small JSON documents) from agents, safely.

Every fetch goes through one shared aiohttp session whose connector uses the SSRF-guarded
resolver; IP-literal URLs and every redirect hop are checked with the same policy. Bodies are
streamed under a byte limit and parsed with a nesting limit. Every failure is a
:class:`~registry.errors.CrawlError` whose ``code`` says what went wrong and whose message is
one sentence naming the URL; no aiohttp exception escapes. URLs with credentials
(``user:password@``) are refused, and no message or detail ever shows them. With
``SWITCHBOARD_OUTBOUND_PROXY`` every fetch (and every gRPC health probe) goes through the
proxy unless ``SWITCHBOARD_OUTBOUND_NO_PROXY`` lists the host, the guard judging the host
first (:mod:`registry.outbound`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Any

import aiohttp
from yarl import URL

from registry.egress import OutboundProxy, ProxyError, open_tunnel
from registry.errors import CrawlError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.netguard import (
    AddressPolicy,
    AddressRefused,
    GuardedResolver,
    check_host,
    redact_url,
)
from registry.outbound import outbound_connector, outbound_middlewares
from registry.settings import Settings

__all__ = [
    "USER_AGENT",
    "WELL_KNOWN_PATHS",
    "Crawler",
    "Fetched",
    "HopCheck",
    "card_candidates",
    "is_card_url",
]

#: Asked before a redirect is followed, with the target: None to follow it, else why not
#: (a clause such as "another origin"); the target is then never requested.
HopCheck = Callable[[URL], str | None]


def _version() -> str:
    try:
        return metadata.version("a2a-switchboard")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


USER_AGENT = f"switchboard/{_version()}"

# Current name first, then the legacy one (A2A < 0.3).
WELL_KNOWN_PATHS = (".well-known/agent-card.json", ".well-known/agent.json")

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MISSING = {404: "Not Found", 410: "Gone"}
# Discovery moves on to the next well-known URL after these failures (the card may sit at the
# legacy path while the current one answers an SPA's HTML page, a login wall or garbage) ...
_NEXT_CANDIDATE_CODES = frozenset(
    {"remote_not_found", "bad_content_type", "invalid_json", "not_an_object"}
)
# ... and after these remote statuses (``remote_http_error``); any other failure stops it.
_NEXT_CANDIDATE_STATUSES = frozenset({401, 403})
_JSON_TYPES = frozenset({"application/json", "text/json"})
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)
_CHUNK = 64 * 1024
_MAX_DELTA = 2**31


@dataclass(frozen=True)
class Fetched:
    """A fetched JSON document (or a 304 confirming the cached one)."""

    url: str  # final URL after redirects
    status: int  # 200 (or another 2xx), or 304 when not_modified
    raw: bytes  # body as received (b"" on 304)
    data: Any  # parsed JSON (None on 304)
    etag: str | None
    last_modified: str | None
    max_age: int | None  # from Cache-Control max-age, if any
    not_modified: bool = False


def is_card_url(url: str) -> bool:
    """True if ``url`` names a card document (a ``/.well-known/`` path or a ``.json`` file)."""
    try:
        path = URL(url).path.lower()
    except (ValueError, TypeError):
        return False
    return "/.well-known/" in path or path.endswith(".json")


def card_candidates(base_url: str) -> list[str]:
    """The card URLs :meth:`Crawler.discover` tries for ``base_url``, in order.

    Like a2a-sdk's ``A2ACardResolver`` the well-known paths are resolved relative to the base
    path; a base with a non-root path then also tries the origin's root.
    """
    base = URL(base_url).with_query(None).with_fragment(None)
    prefix = base.raw_path.rstrip("/")  # encoded, so "%2F" in a path segment stays one segment
    prefixes = [prefix, ""] if prefix else [""]
    return [
        str(base.with_path(f"{p}/{name}", encoded=True))
        for p in prefixes
        for name in WELL_KNOWN_PATHS
    ]


class Crawler:
    """One shared aiohttp ClientSession (TCPConnector with the guarded resolver, the outbound
    proxy, ``trust_env=False``, no cookies kept).

    Use ``async with Crawler(settings) as crawler:`` or call :meth:`start` / :meth:`close`;
    a fetch on an unstarted crawler starts it.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.policy = AddressPolicy(settings.allow_networks)
        self.proxy = OutboundProxy.from_settings(settings)
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the HTTP session (idempotent)."""
        if self._session is not None:
            return
        s = self.settings
        self._session = aiohttp.ClientSession(
            connector=outbound_connector(self.policy, self.proxy),
            middlewares=outbound_middlewares(self.proxy, self.policy),
            trust_env=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            headers={"User-Agent": USER_AGENT},
            timeout=aiohttp.ClientTimeout(
                total=s.connect_timeout + s.read_timeout,
                connect=s.connect_timeout,
                sock_connect=s.connect_timeout,
                sock_read=s.read_timeout,
            ),
        )

    async def close(self) -> None:
        """Close the HTTP session and its connections."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def __aenter__(self) -> Crawler:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def fetch_json(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        max_bytes: int | None = None,
        accept: str = "application/json",
        follow: HopCheck | None = None,
    ) -> Fetched:
        """GET a JSON document, following at most ``settings.max_redirects`` checked redirects.

        Sends ``If-None-Match`` / ``If-Modified-Since`` when given and returns
        ``not_modified=True`` on 304. ``max_bytes`` defaults to ``settings.max_card_bytes``.
        ``follow`` is asked about every redirect target before it is requested; a reason
        refuses it (``redirect_refused``, ``details.reason``).
        """
        await self.start()
        headers = {"Accept": accept}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        limit = max_bytes if max_bytes is not None else self.settings.max_card_bytes
        current = self.policy.check_url(url)
        chain = [str(current)]
        while True:
            result = await self._get(current, headers, limit)
            if isinstance(result, Fetched):
                return result
            target = self._next_hop(current, result, chain, follow)
            chain.append(str(target))
            current = target

    async def fetch_card(
        self, url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> Fetched:
        """Fetch an exact card URL; the document must be a JSON object (``not_an_object``)."""
        fetched = await self.fetch_json(url, etag=etag, last_modified=last_modified)
        if not fetched.not_modified and not isinstance(fetched.data, dict):
            kind = _json_kind(fetched.data)
            raise CrawlError(
                f"The document at {fetched.url} is a JSON {kind}, not an agent card object.",
                code="not_an_object",
                details={"url": fetched.url, "status": fetched.status, "type": kind},
            )
        return fetched

    async def discover(
        self, base_url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> Fetched:
        """Find the card of the agent at ``base_url`` via its well-known paths.

        Tries :func:`card_candidates` in order. It moves on to the next one when a URL answers
        404/410 (``remote_not_found``), 401/403 (``remote_http_error``), or something that is
        not a JSON object (``bad_content_type``, ``invalid_json``, ``not_an_object``); any other
        failure (refused address, bad URL, timeout, connection, size, depth, redirects, 5xx and
        other statuses) is raised at once. When every URL fails: ``card_not_found``, whose
        ``details.attempts`` lists ``{"url", "code", "status"?, "message"}`` per URL tried.
        """
        base = self.policy.check_url(base_url)
        shown = str(base)
        attempts: list[dict[str, Any]] = []
        for candidate in card_candidates(shown):
            try:
                return await self.fetch_card(candidate, etag=etag, last_modified=last_modified)
            except CrawlError as exc:
                if not _try_next_candidate(exc):
                    raise
                attempts.append(_attempt(candidate, exc))
        first = attempts[0]["message"].rstrip(".")
        others = len(attempts) - 1
        tail = (
            f", and the other {others} well-known URL{'s' if others != 1 else ''} failed too"
            if others
            else ""
        )
        raise CrawlError(
            f"No agent card was found at {shown}: {first[:1].lower()}{first[1:]}{tail}.",
            code="card_not_found",
            details={"url": shown, "attempts": attempts},
        )

    async def probe(self, url: str) -> int:
        """Check that an endpoint answers HTTP at all (the health check of a pushed agent,
        which has no card URL): its status. Any answer below 500 counts, a JSON-RPC
        endpoint's 405 to a GET included; 5xx or no answer raise :class:`CrawlError`."""
        await self.start()
        assert self._session is not None
        target = self.policy.check_url(url)
        with _translate_errors(str(target)):
            async with self._session.get(target, allow_redirects=False) as resp:
                if resp.status >= 500:
                    raise _http_error(str(target), resp.status, f"HTTP {resp.status}")
                return resp.status

    async def probe_connect(self, url: str) -> None:
        """Check that a gRPC endpoint (``host:port``, or ``grpc(s)://``/``http(s)://`` with
        one) accepts a TCP connection, the address checked and resolved as for a fetch: a
        gRPC server does not answer HTTP/1.1. :class:`CrawlError` as :meth:`probe`. Through
        the outbound proxy: a ``CONNECT`` tunnel opened and closed."""
        scheme, _, rest = url.strip().rpartition("://")
        tls = scheme.lower() in ("grpcs", "https")
        target = self.policy.check_url(("https://" if tls else "http://") + rest)
        port = target.explicit_port or (443 if tls else 80)
        if self.proxy is not None and self.proxy.via(target) is not None:
            with _translate_errors(str(target)):
                async with asyncio.timeout(self.settings.connect_timeout):
                    await check_host(self.policy, target.raw_host or "", port)
                    tunnel = await open_tunnel(self.proxy, target.raw_host or "", port)
                tunnel.close()
            return
        with _translate_errors(str(target)):
            found = await GuardedResolver(self.policy).resolve(
                target.host or "", port, socket.AF_UNSPEC
            )
            connecting = asyncio.open_connection(found[0]["host"], port)
            _reader, writer = await asyncio.wait_for(connecting, self.settings.connect_timeout)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    # -- one hop -------------------------------------------------------------------------

    async def _get(self, url: URL, headers: dict[str, str], limit: int) -> Fetched | str:
        """One request without redirects: the result, or the raw Location to follow."""
        assert self._session is not None
        with _translate_errors(str(url)):
            async with self._session.get(url, headers=headers, allow_redirects=False) as resp:
                if resp.status in _REDIRECTS:
                    location = resp.headers.get("Location")
                    if not location:
                        raise _http_error(str(url), resp.status, "a redirect without Location")
                    return location
                return await self._read(resp, str(url), headers, limit)

    async def _read(
        self, resp: aiohttp.ClientResponse, url: str, headers: dict[str, str], limit: int
    ) -> Fetched:
        conditional = "If-None-Match" in headers or "If-Modified-Since" in headers
        if resp.status == 304 and conditional:
            return Fetched(
                url=url,
                status=304,
                raw=b"",
                data=None,
                etag=resp.headers.get("ETag", headers.get("If-None-Match")),
                last_modified=resp.headers.get("Last-Modified", headers.get("If-Modified-Since")),
                max_age=_max_age(resp.headers.get("Cache-Control")),
                not_modified=True,
            )
        if resp.status in _MISSING:
            raise CrawlError(
                f"The server at {url} answered HTTP {resp.status} {_MISSING[resp.status]}.",
                code="remote_not_found",
                details={"url": url, "status": resp.status},
            )
        if not 200 <= resp.status < 300:
            raise _http_error(url, resp.status, f"HTTP {resp.status} {resp.reason or ''}".strip())
        _check_content_type(resp, url)
        raw = await _read_limited(resp, url, limit)
        try:
            data = loads_limited(raw, max_depth=self.settings.max_json_depth)
        except JsonLimitError as exc:
            raise CrawlError(
                f"The document at {url} was refused: {exc.message}.",
                code=exc.code,
                details={"url": url, "status": resp.status, **exc.details},
            ) from None
        return Fetched(
            url=url,
            status=resp.status,
            raw=raw,
            data=data,
            etag=resp.headers.get("ETag"),
            last_modified=resp.headers.get("Last-Modified"),
            max_age=_max_age(resp.headers.get("Cache-Control")),
        )

    def _next_hop(
        self, current: URL, location: str, chain: list[str], follow: HopCheck | None = None
    ) -> URL:
        """Resolve and check a redirect target (the address policy, then ``follow``), enforcing
        the loop and hop limits."""
        try:
            target = current.join(URL(location))
            shown = redact_url(target)
        except (ValueError, TypeError):
            shown = redact_url(location)
            raise CrawlError(
                f"The redirect from {current} points to an invalid URL {shown!r}.",
                code="bad_url",
                details={"url": str(current), "location": shown},
            ) from None
        try:
            target = self.policy.check_url(target)
        except AddressRefused:
            raise
        except CrawlError as exc:
            reason = (exc.details or {}).get("reason", exc.message)
            raise CrawlError(
                f"The redirect from {current} to {shown} was refused: {reason}.",
                code=exc.code,
                details={"url": str(current), "location": shown, "reason": reason},
            ) from None
        refusal = follow(target) if follow is not None else None
        if refusal is not None:
            raise CrawlError(
                f"The redirect from {current} to {shown} was refused: {refusal}.",
                code="redirect_refused",
                details={"url": str(current), "location": shown, "reason": refusal},
            )
        first = chain[0]
        if str(target) in chain:
            raise CrawlError(
                f"Fetching {first} ran into a redirect loop back to {target}.",
                code="redirect_loop",
                details={"url": first, "chain": [*chain, str(target)]},
            )
        if len(chain) > self.settings.max_redirects:
            raise CrawlError(
                f"Fetching {first} was redirected more than {self.settings.max_redirects} times.",
                code="too_many_redirects",
                details={"url": first, "chain": [*chain, str(target)]},
            )
        return target


# -- helpers ----------------------------------------------------------------------------


def _http_error(url: str, status: int, what: str) -> CrawlError:
    return CrawlError(
        f"The server at {url} answered with {what}.",
        code="remote_http_error",
        details={"url": url, "status": status},
    )


def _try_next_candidate(exc: CrawlError) -> bool:
    """Whether discovery should try the next well-known URL after ``exc``."""
    if exc.code in _NEXT_CANDIDATE_CODES:
        return True
    status = exc.details.get("status") if isinstance(exc.details, dict) else None
    return exc.code == "remote_http_error" and status in _NEXT_CANDIDATE_STATUSES


def _attempt(url: str, exc: CrawlError) -> dict[str, Any]:
    """One entry of ``card_not_found``'s ``details.attempts``."""
    attempt: dict[str, Any] = {"url": url, "code": exc.code}
    status = exc.details.get("status") if isinstance(exc.details, dict) else None
    if status is not None:
        attempt["status"] = status
    attempt["message"] = exc.message
    return attempt


def _check_content_type(resp: aiohttp.ClientResponse, url: str) -> None:
    mime = resp.content_type.lower()
    if mime in _JSON_TYPES or (mime.startswith("application/") and mime.endswith("+json")):
        return
    received = resp.headers.get("Content-Type")
    shown = repr(received) if received else "no Content-Type"
    raise CrawlError(
        f"The document at {url} (HTTP {resp.status}) has content type {shown}, expected JSON.",
        code="bad_content_type",
        details={"url": url, "status": resp.status, "content_type": received},
    )


async def _read_limited(resp: aiohttp.ClientResponse, url: str, limit: int) -> bytes:
    """Read the body, refusing it once it exceeds ``limit`` bytes (declared or streamed)."""
    declared = resp.content_length
    if declared is not None and declared > limit:
        raise _too_large(url, limit, declared)
    body = bytearray()
    async for chunk in resp.content.iter_chunked(_CHUNK):
        body += chunk
        if len(body) > limit:
            raise _too_large(url, limit, None)
    return bytes(body)


def _too_large(url: str, limit: int, declared: int | None) -> CrawlError:
    if declared is not None:
        message = f"The document at {url} is too large ({declared} bytes, the limit is {limit})."
    else:
        message = f"The document at {url} is larger than the limit of {limit} bytes."
    return CrawlError(
        message,
        code="too_large",
        details={"url": url, "limit": limit, "content_length": declared},
    )


def _max_age(cache_control: str | None) -> int | None:
    if not cache_control:
        return None
    match = _MAX_AGE.search(cache_control)
    if not match:
        return None
    digits = match.group(1).lstrip("0") or "0"
    # RFC 9111 5.2: a delta-seconds too large to represent means 2**31 (and int() of thousands
    # of digits would raise).
    return _MAX_DELTA if len(digits) > 10 else min(int(digits), _MAX_DELTA)


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


@contextlib.contextmanager
def _translate_errors(url: str) -> Iterator[None]:
    """Turn aiohttp / socket failures of one request into CrawlErrors naming ``url``."""
    try:
        yield
    except AddressRefused as exc:
        if "url" in (exc.details or {}):
            raise
        raise exc.with_url(url) from None
    except CrawlError:
        raise
    except TimeoutError:
        raise CrawlError(
            f"Fetching {url} timed out.", code="timeout", details={"url": url}
        ) from None
    except ProxyError as exc:
        raise _connect_failed(url, exc.reason) from None
    except aiohttp.ClientProxyConnectionError as exc:
        reason = f"the outbound proxy cannot be reached ({_connect_reason(exc.os_error)})"
        raise _connect_failed(url, reason) from None
    except aiohttp.ClientHttpProxyError as exc:
        reason = f"the outbound proxy refused the tunnel (HTTP {exc.status} {exc.message})"
        raise _connect_failed(url, reason) from None
    except aiohttp.ClientConnectorError as exc:
        raise _connect_failed(url, _connect_reason(exc.os_error)) from None
    except aiohttp.InvalidURL as exc:
        raise CrawlError(
            f"Cannot fetch {url}: the URL is invalid ({exc}).",
            code="bad_url",
            details={"url": url},
        ) from None
    except (aiohttp.ClientConnectionError, OSError) as exc:
        raise _connect_failed(url, str(exc) or type(exc).__name__) from None
    except (aiohttp.ClientError, ValueError) as exc:
        # ValueError: aiohttp/yarl refusing a request detail (a host or header it cannot encode)
        reason = str(exc) or type(exc).__name__
        raise CrawlError(
            f"Fetching {url} failed: {reason}.",
            code="fetch_failed",
            details={"url": url, "reason": reason},
        ) from None


def _connect_reason(error: OSError) -> str:
    if isinstance(error, socket.gaierror):
        return f"the host name could not be resolved ({error.strerror or error})"
    return error.strerror or str(error) or type(error).__name__


def _connect_failed(url: str, reason: str) -> CrawlError:
    return CrawlError(
        f"Could not connect to {url}: {reason}.",
        code="connect_failed",
        details={"url": url, "reason": reason},
    )
