"""The signing keys of the identity provider that issues clients' JWTs: :class:`IssuerKeys`.

The JWKS comes from ``SWITCHBOARD_JWT_JWKS_URL``, else from OIDC discovery
(``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must be the configured one
exactly). It is fetched at start, again every :data:`REFRESH_INTERVAL` (or the ``max-age`` it
is served with, within [:data:`MIN_REFRESH`, :data:`MAX_REFRESH`]) in the background, and when
a token names a key it lacks (a rotation) at most every :data:`REFETCH_INTERVAL`; one fetch at
a time, shared by all who wait for it. A failed fetch keeps the keys there are. Fetches follow
no redirect, read at most :data:`MAX_DOCUMENT_BYTES` and time out
(``SWITCHBOARD_CONNECT_TIMEOUT``, ``SWITCHBOARD_READ_TIMEOUT``). The identity provider is the
operator's choice, so its URLs are not held to the crawler's address policy; they go through
``SWITCHBOARD_OUTBOUND_PROXY`` unless ``SWITCHBOARD_OUTBOUND_NO_PROXY`` lists them. Only
asymmetric public signature keys are kept (:func:`registry.jwkeys.public_jwk`: never ``oct``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from jwcrypto.jwk import JWK
from yarl import URL

from registry.egress import OutboundProxy
from registry.errors import RegistryError
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.jwkeys import public_jwk
from registry.netguard import redact_url
from registry.outbound import outbound_middlewares
from registry.settings import Settings

__all__ = [
    "DISCOVERY_PATH",
    "MAX_DOCUMENT_BYTES",
    "MAX_KEYS",
    "MAX_REFRESH",
    "MIN_REFRESH",
    "REFETCH_INTERVAL",
    "REFRESH_INTERVAL",
    "RETRY_AFTER_FAILURE",
    "IssuerKey",
    "IssuerKeys",
]

log = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 256 * 1024
"""The largest OIDC discovery or JWKS document read."""
MAX_KEYS = 100
"""Keys kept from one JWKS (the rest are skipped)."""
REFETCH_INTERVAL = 10.0
"""The least time between two fetches of the JWKS for tokens naming a key it lacks."""
REFRESH_INTERVAL = 300.0
"""How often the JWKS is fetched again when it is served without ``max-age``."""
MIN_REFRESH, MAX_REFRESH = 60.0, 3600.0
"""The bounds of a JWKS ``Cache-Control: max-age``."""
RETRY_AFTER_FAILURE = 30.0
"""When a failed periodic fetch is tried again (the keys there are stay in use)."""
DISCOVERY_PATH = "/.well-known/openid-configuration"

_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)


@dataclass(frozen=True)
class IssuerKey:
    """One public key of the issuer's JWKS, its ``kid`` (None if it has none) and its RFC 7638
    thumbprint (which names a key without ``kid``)."""

    key: JWK
    kid: str | None
    thumbprint: str

    def named(self, kid: str) -> bool:
        """Whether a token's ``kid`` names this key."""
        return self.kid == kid or (self.kid is None and self.thumbprint == kid)


class _FetchError(Exception):
    """Why the identity provider's keys could not be fetched (one sentence, for the log)."""


class IssuerKeys:
    """The JWKS of the issuer ``settings.jwt_issuer``, fetched and kept fresh.

    ``session`` is used instead of a session of its own (and not closed); ``timer`` is a
    monotonic clock in seconds (tests move it).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        session: aiohttp.ClientSession | None = None,
        timer: Callable[[], float] = time.monotonic,
        refetch_interval: float = REFETCH_INTERVAL,
        refresh_interval: float = REFRESH_INTERVAL,
    ) -> None:
        if not settings.jwt_issuer:
            raise ValueError("JWT verification needs jwt_issuer (SWITCHBOARD_JWT_ISSUER)")
        self.settings = settings
        self.issuer: str = settings.jwt_issuer
        self.keys: tuple[IssuerKey, ...] = ()
        self._session = session
        self._own_session = session is None
        self._timer = timer
        self._refetch_interval = refetch_interval
        self._refresh_interval = refresh_interval
        self._jwks_url: str | None = settings.jwt_jwks_url
        self._inflight: asyncio.Task[bool] | None = None
        self._last_attempt: float | None = None
        self._next_refresh = 0.0
        self._open = False

    @property
    def ready(self) -> bool:
        """Whether there are keys (tokens can be verified)."""
        return bool(self.keys)

    @property
    def refreshing(self) -> bool:
        """Whether a fetch of the JWKS is under way."""
        return self._inflight is not None

    @property
    def started(self) -> bool:
        """Whether :meth:`start` or :meth:`refresh` was called (and :meth:`close` not since)."""
        return self._open

    async def start(self) -> None:
        """Open the HTTP session and fetch the keys once (idempotent). A failed fetch is
        logged, not raised."""
        if self._open:
            return
        if not await self.refresh():
            log.warning(
                "JWT verification has no keys of issuer %s yet: bearer tokens are refused "
                "until its JWKS can be fetched",
                redact_url(self.issuer),
            )

    async def close(self) -> None:
        """Stop a fetch under way and close the session (if it is this object's own)."""
        self._open = False
        task, self._inflight = self._inflight, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._own_session and self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def refresh(self) -> bool:
        """Fetch the JWKS now, or wait for the fetch under way; whether it succeeded."""
        if not self._open:
            self._open = True
            if self._session is None:  # this object's own (closed by close)
                proxy = OutboundProxy.from_settings(self.settings)
                self._session = aiohttp.ClientSession(
                    middlewares=outbound_middlewares(proxy, None),
                    trust_env=False,
                    cookie_jar=aiohttp.DummyCookieJar(),
                )
        return await asyncio.shield(self._fetch_task())

    def tick(self) -> None:
        """Start fetching the JWKS in the background if it is due (the keys there are still
        serve meanwhile)."""
        if self.keys and self._inflight is None and self._timer() >= self._next_refresh:
            self._fetch_task()

    async def refetch(self, why: str) -> bool:
        """For a token naming a key there is not (``why``, for the log): fetch the JWKS
        again, or join the fetch under way, unless the last fetch began less than
        ``refetch_interval`` ago. Whether keys were fetched."""
        if self._inflight is None:
            last = self._last_attempt
            if last is not None and self._timer() - last < self._refetch_interval:
                return False
            if self.keys:
                log.info("fetching the JWKS of issuer %s again: %s", redact_url(self.issuer), why)
        return await self.refresh()

    def _fetch_task(self) -> asyncio.Task[bool]:
        """The fetch under way, or a new one."""
        if self._inflight is None:
            self._last_attempt = self._timer()
            task = asyncio.ensure_future(self._fetch())
            self._inflight = task
            task.add_done_callback(self._fetched)
        return self._inflight

    def _fetched(self, task: asyncio.Task[bool]) -> None:
        if self._inflight is task:
            self._inflight = None

    async def _fetch(self) -> bool:
        try:
            url = await self._jwks_location()
            data, max_age = await self._get_json(url, "the JWKS")
            keys, skipped = _parse_jwks(data, url)
        except _FetchError as exc:
            log.warning("JWKS of issuer %s not fetched: %s", redact_url(self.issuer), exc)
            if self.settings.jwt_jwks_url is None:
                self._jwks_url = None  # discover it again next time
            self._next_refresh = self._timer() + RETRY_AFTER_FAILURE
            return False
        if skipped:
            log.info("JWKS %s: %d unusable entries skipped", redact_url(url), skipped)
        self.keys = keys
        ttl = self._refresh_interval if max_age is None else max_age
        self._next_refresh = self._timer() + min(max(ttl, MIN_REFRESH), MAX_REFRESH)
        return True

    async def _jwks_location(self) -> str:
        """The JWKS URL: configured, or from the issuer's OIDC discovery document."""
        if self._jwks_url is not None:
            return self._jwks_url
        url = self.issuer.rstrip("/") + DISCOVERY_PATH
        doc, _ = await self._get_json(url, "the OpenID configuration")
        shown = redact_url(url)
        if not isinstance(doc, dict):
            raise _FetchError(f"the OpenID configuration at {shown} is not a JSON object")
        if doc.get("issuer") != self.issuer:
            raise _FetchError(
                f"the OpenID configuration at {shown} names another issuer than "
                f"{redact_url(self.issuer)} (its issuer must be the configured one exactly)"
            )
        jwks_uri = doc.get("jwks_uri")
        problem = _jwks_uri_problem(jwks_uri, self.issuer)
        if problem:
            raise _FetchError(f"the OpenID configuration at {shown}: {problem}")
        assert isinstance(jwks_uri, str)
        self._jwks_url = jwks_uri
        return jwks_uri

    async def _get_json(self, url: str, what: str) -> tuple[Any, float | None]:
        """GET one JSON document (no redirects, size and time limits) and its max-age."""
        if self._session is None or not self._open:
            raise _FetchError("closed (the verifier was closed)")
        s = self.settings
        timeout = aiohttp.ClientTimeout(
            total=s.connect_timeout + s.read_timeout,
            connect=s.connect_timeout,
            sock_connect=s.connect_timeout,
            sock_read=s.read_timeout,
        )
        shown = redact_url(url)
        headers = {"Accept": "application/json, application/jwk-set+json"}
        try:
            async with self._session.get(
                url, allow_redirects=False, timeout=timeout, headers=headers
            ) as resp:
                if resp.status != 200:
                    moved = " (a redirect, not followed)" if 300 <= resp.status < 400 else ""
                    raise _FetchError(f"{what} at {shown} answered HTTP {resp.status}{moved}")
                raw = await _read_limited(resp, MAX_DOCUMENT_BYTES)
                if raw is None:
                    raise _FetchError(f"{what} at {shown} is over {MAX_DOCUMENT_BYTES} bytes")
                max_age = _max_age(resp.headers.get("Cache-Control"))
        except _FetchError:
            raise
        except TimeoutError:
            raise _FetchError(f"{what} at {shown} did not answer in time") from None
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            reason = str(exc) or type(exc).__name__
            raise _FetchError(f"{what} at {shown} could not be fetched: {reason}") from None
        try:
            return loads_limited(raw, max_depth=s.max_json_depth), max_age
        except JsonLimitError as exc:
            raise _FetchError(f"{what} at {shown} is not valid JSON: {exc.message}") from None


def _parse_jwks(data: Any, url: str) -> tuple[tuple[IssuerKey, ...], int]:
    """The usable signature keys of a JWKS document and how many entries were skipped."""
    shown = redact_url(url)
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise _FetchError(f'the document at {shown} is not a JWKS (an object with a "keys" list)')
    keys: list[IssuerKey] = []
    skipped = 0
    for entry in data["keys"]:
        if len(keys) >= MAX_KEYS:
            skipped += 1
            continue
        try:
            key, public = public_jwk(entry)  # refuses oct keys, private members, bad keys
        except RegistryError:
            skipped += 1
            continue
        keys.append(IssuerKey(key, public.get("kid"), key.thumbprint()))
    if not keys:
        raise _FetchError(f"the JWKS at {shown} has no usable signature key")
    return tuple(keys), skipped


def _jwks_uri_problem(value: object, issuer: str) -> str | None:
    if not isinstance(value, str) or not value:
        return "it has no jwks_uri"
    try:
        url = URL(value)
    except (ValueError, TypeError):
        return "its jwks_uri is not a URL"
    if not url.is_absolute() or url.scheme not in ("http", "https"):
        return "its jwks_uri is not an absolute http(s) URL"
    if url.scheme == "http" and issuer.lower().startswith("https:"):
        return "its jwks_uri is plain http while the issuer is https"
    return None


async def _read_limited(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, or None when it is over ``limit`` bytes (declared or streamed)."""
    if resp.content_length is not None and resp.content_length > limit:
        return None
    body = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _max_age(cache_control: str | None) -> float | None:
    match = _MAX_AGE.search(cache_control or "")
    return float(match.group(1)) if match else None
