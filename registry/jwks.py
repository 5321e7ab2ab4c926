"""The JWKS cache: the JWKS documents of trusted JWKS URLs and of allowed card ``jku`` URLs.

JWKS documents are fetched with the crawler (SSRF guard, redirect, size and time limits), at
most :data:`HOST_CONCURRENCY` at a time per host. Every redirect is checked before it is
followed: one to another origin is never requested (the JWKS is unusable), nor one refused by
the lookup's own check (a card's ``jku`` must stay on the allow-list). Documents are cached
per URL for their ``Cache-Control: max-age`` clamped to [60 s, 24 h] (300 s without one);
failures are cached for 30 s so a dead endpoint is not hammered. A lookup whose kid is
missing from a JWKS fetched more than 60 s ago fetches it again once (key rotation). The
JWKS of a lookup are fetched concurrently and waited for at most a given time (a fetch still
under way goes on and fills the cache for the next lookup).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from cachetools import TLRUCache
from jwcrypto.jwk import JWK
from yarl import URL

from registry.crawler import Crawler, HopCheck
from registry.errors import CrawlError, RegistryError
from registry.jku import origin
from registry.jwkeys import public_jwk

log = logging.getLogger("registry.trust")  # the logger operators know (docs/operations.md)

JWKS_MAX_BYTES = 256 * 1024
JWKS_ACCEPT = "application/jwk-set+json, application/json"
MIN_TTL = 60.0  # also: the least age of a JWKS before a missing kid fetches it again
MAX_TTL = 24 * 3600.0
DEFAULT_TTL = 300.0
FAILURE_TTL = 30.0
CACHE_SIZE = 1024
HOST_CONCURRENCY = 4  # JWKS fetches under way at once per host


@dataclass(frozen=True)
class _JwksKey:
    key: JWK
    kid: str | None
    thumbprint: str


@dataclass(frozen=True)
class Jwks:
    """A fetched JWKS (or why it is unusable), cached per URL for ``ttl`` seconds."""

    url: str
    keys: tuple[_JwksKey, ...]
    problem: str | None
    skipped: int
    ttl: float
    fetched_at: float
    final_url: str  # where the keys came from, after same-origin redirects

    def matching(self, kid: str) -> list[JWK]:
        """The keys with ``kid`` (or, for a key without one, with that thumbprint)."""
        return [k.key for k in self.keys if k.kid == kid or (k.kid is None and k.thumbprint == kid)]


class JwksCache:
    """JWKS documents by URL: fetched once at a time per URL, cached, at most
    ``host_concurrency`` fetches at once per host. ``timer`` is a monotonic clock in seconds
    (tests move it)."""

    def __init__(
        self,
        crawler: Crawler,
        *,
        timer: Callable[[], float],
        cache_size: int = CACHE_SIZE,
        host_concurrency: int = HOST_CONCURRENCY,
    ) -> None:
        self.crawler = crawler
        self._timer = timer
        self._cache: TLRUCache[str, Jwks] = TLRUCache(cache_size, _expires, timer=timer)
        self._inflight: dict[str, asyncio.Future[Jwks]] = {}
        self._hosts = _HostLimiter(host_concurrency)

    def host_fetches(self, host: str) -> tuple[int, int]:
        """JWKS fetches for ``host`` (as in the URL): (under way, queued behind the limit)."""
        return self._hosts.holding(host), self._hosts.waiting(host)

    def remember(self, url: URL, entry: Jwks) -> None:
        """Cache ``entry`` as the JWKS at ``url`` (fetched by :meth:`download`)."""
        self._cache[str(url)] = entry

    async def lookups(
        self,
        urls: list[URL],
        kid: str,
        within: float,
        follow: Sequence[HopCheck | None] = (),
    ) -> list[tuple[list[JWK], Jwks] | None]:
        """:meth:`lookup` for each URL at once (``follow[i]``, if given, checks the redirects
        of ``urls[i]``); None for those not done within ``within`` seconds.

        A fetch that is not done in time goes on (it is shielded) and fills the cache.
        """
        if not urls:
            return []
        checks = [*follow, *[None] * (len(urls) - len(follow))]
        tasks = [
            asyncio.ensure_future(self.lookup(url, kid, follow=check))
            for url, check in zip(urls, checks, strict=True)
        ]
        try:
            done, _ = await asyncio.wait(tasks, timeout=within)
        finally:
            for task in tasks:
                task.cancel()  # only the waiting: the fetches themselves are shielded
        return [task.result() if task in done else None for task in tasks]

    async def lookup(
        self, url: URL, kid: str, *, follow: HopCheck | None = None
    ) -> tuple[list[JWK], Jwks]:
        """The keys with ``kid`` of the JWKS at ``url``, and the (cached) JWKS; a fetch checks
        its redirects with ``follow`` too (:meth:`download`)."""
        entry = await self._jwks(url, follow=follow)
        keys = entry.matching(kid)
        if not keys and entry.problem is None:
            # a new kid may mean a rotated key: fetch again once the copy is MIN_TTL old
            entry = await self._jwks(url, stale_before=self._timer() - MIN_TTL, follow=follow)
            keys = entry.matching(kid)
        return keys, entry

    async def _jwks(
        self, url: URL, *, stale_before: float | None = None, follow: HopCheck | None = None
    ) -> Jwks:
        """The JWKS at ``url`` from the cache, or fetched (one fetch per URL at a time).

        The cache is per URL, whatever ``follow`` was: a caller with a stricter check looks at
        :attr:`Jwks.final_url` of what it is given.
        """
        key = str(url)
        entry = self._cache.get(key)
        if entry is not None and (stale_before is None or entry.fetched_at > stale_before):
            return entry
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._refresh(url, follow))
            self._inflight[key] = task
            task.add_done_callback(partial(self._done, key))
        return await asyncio.shield(task)

    def _done(self, key: str, task: asyncio.Future[Jwks]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]

    async def _refresh(self, url: URL, follow: HopCheck | None) -> Jwks:
        try:
            entry = await self.download(url, follow=follow)
        except CrawlError as exc:
            log.info("JWKS %s could not be fetched: %s", url, exc.message)
            entry = self._failure(
                url, f"the JWKS at {url} could not be fetched: {_clause(exc.message)}"
            )
        self._cache[str(url)] = entry
        return entry

    def _failure(self, url: URL, problem: str) -> Jwks:
        return Jwks(
            url=str(url),
            keys=(),
            problem=problem,
            skipped=0,
            ttl=FAILURE_TTL,
            fetched_at=self._timer(),
            final_url=str(url),
        )

    async def download(self, url: URL, *, follow: HopCheck | None = None) -> Jwks:
        """Fetch and parse a JWKS (not cached); :class:`CrawlError` if it cannot be fetched.

        Fetches exactly ``url`` (the crawler takes the URL object as it is), at most
        :data:`HOST_CONCURRENCY` at a time per host. A redirect is followed only to the same
        origin and when ``follow`` (if given) does not refuse it; a refused one is never
        requested and makes the document unusable (a :class:`Jwks` with a ``problem``).
        """
        shown = str(url)

        def check(target: URL) -> str | None:
            if origin(target) != origin(url):
                return "another origin (a JWKS must be served from its own origin)"
            return follow(target) if follow is not None else None

        try:
            async with self._hosts.hold(url.raw_host or ""):
                fetched = await self.crawler.fetch_json(
                    url,  # type: ignore[arg-type]  # the crawler's check_url takes a URL as is
                    max_bytes=JWKS_MAX_BYTES,
                    accept=JWKS_ACCEPT,
                    follow=check,
                )
        except CrawlError as exc:
            if exc.code != "redirect_refused":
                raise
            location, reason = exc.details["location"], exc.details["reason"]
            log.info("JWKS %s: the redirect to %s was not followed: %s", shown, location, reason)
            return self._failure(url, f"the JWKS at {shown} redirected to {location}, {reason}")
        keys, skipped, problem = _parse_jwks(shown, fetched.data)
        return Jwks(
            url=shown,
            keys=tuple(keys),
            problem=problem,
            skipped=skipped,
            ttl=FAILURE_TTL if problem else _ttl(fetched.max_age),
            fetched_at=self._timer(),
            final_url=fetched.url,
        )


def _parse_jwks(url: str, data: Any) -> tuple[list[_JwksKey], int, str | None]:
    """The usable keys of a JWKS document, how many entries were skipped, and any problem."""
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        return [], 0, f'the document at {url} is not a JWKS (a JSON object with a "keys" list)'
    keys: list[_JwksKey] = []
    reasons: list[str] = []
    for entry in data["keys"]:
        try:
            key, public = public_jwk(entry)
        except RegistryError as exc:
            reasons.append(exc.message)
            continue
        keys.append(_JwksKey(key, public.get("kid"), key.thumbprint()))
    if not keys:
        if not reasons:
            return [], 0, f"the JWKS at {url} has no keys"
        return (
            [],
            len(reasons),
            f"the JWKS at {url} has no usable key ({len(reasons)} "
            f"entr{'y' if len(reasons) == 1 else 'ies'} skipped; the first: {reasons[0]})",
        )
    return keys, len(reasons), None


def _ttl(max_age: int | None) -> float:
    return DEFAULT_TTL if max_age is None else min(max(float(max_age), MIN_TTL), MAX_TTL)


def _expires(_url: str, entry: Jwks, now: float) -> float:
    return now + entry.ttl


def _clause(message: str) -> str:
    """A crawler sentence as a clause: no final period, lower-case first letter."""
    message = message.rstrip(".")
    return message[:1].lower() + message[1:]


@dataclass
class _Host:
    semaphore: asyncio.Semaphore
    users: int = 0  # holding or queued
    holding: int = 0


class _HostLimiter:
    """At most ``limit`` holders at once per host; a host's entry lives while it is in use."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._hosts: dict[str, _Host] = {}

    @asynccontextmanager
    async def hold(self, host: str) -> AsyncIterator[None]:
        entry = self._hosts.get(host)
        if entry is None:
            entry = self._hosts[host] = _Host(asyncio.Semaphore(self.limit))
        entry.users += 1
        try:
            async with entry.semaphore:
                entry.holding += 1
                try:
                    yield
                finally:
                    entry.holding -= 1
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._hosts[host]

    def holding(self, host: str) -> int:
        """How many hold ``host`` now."""
        entry = self._hosts.get(host)
        return 0 if entry is None else entry.holding

    def waiting(self, host: str) -> int:
        """How many are queued for ``host``."""
        entry = self._hosts.get(host)
        return 0 if entry is None else entry.users - entry.holding
