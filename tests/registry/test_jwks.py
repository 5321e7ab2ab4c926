"""The JWKS cache's fetches and their redirects, against real JWKS servers on 127.0.0.1.

Lookups through the trust store (the allow-list, key sources, verdicts) are in
``test_trust.py``; here: what :class:`registry.jwks.JwksCache` requests and what it never does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from jwcrypto import jwk
from yarl import URL

from registry.crawler import Crawler
from registry.jwks import FAILURE_TTL, JwksCache
from tests.support.helpers import CardServer, make_settings


class Clock:
    """A monotonic clock the tests move by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def jwks(kid: str) -> dict[str, Any]:
    key = jwk.JWK.generate(kty="EC", crv="P-256", kid=kid)
    return {"keys": [key.export_public(as_dict=True)]}


def under_keys(target: URL) -> str | None:
    """A stricter check, as the trust store gives for a card's jku."""
    return None if target.path.startswith("/keys/") else "which is not under /keys/"


@pytest.fixture
async def cache(sqlite_url: str) -> AsyncIterator[tuple[JwksCache, Clock]]:
    clock = Clock()
    async with Crawler(make_settings(sqlite_url)) as crawler:
        yield JwksCache(crawler, timer=clock), clock


async def test_redirect_to_another_origin_is_never_requested(
    cache: tuple[JwksCache, Clock], card_server: CardServer, aiohttp_server: Any
) -> None:
    jwks_cache, _ = cache
    seen: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response(jwks("k1"))

    app = web.Application()
    app.router.add_get("/{tail:.*}", elsewhere)
    other = await aiohttp_server(app)  # another port on 127.0.0.1: another origin
    away = str(other.make_url("/elsewhere.json"))
    card_server.set("/jwks.json", {}, status=302, Location=away)
    url = URL(card_server.url("/jwks.json"))

    entry = await jwks_cache.download(url)
    assert entry.keys == ()
    assert entry.problem == (
        f"the JWKS at {url} redirected to {away}, another origin "
        "(a JWKS must be served from its own origin)"
    )
    assert entry.ttl == FAILURE_TTL
    assert seen == []


async def test_follow_checks_every_hop_before_it_is_requested(
    cache: tuple[JwksCache, Clock], card_server: CardServer
) -> None:
    jwks_cache, _ = cache
    card_server.set("/keys/a", {}, status=302, Location="/keys/b")
    card_server.set("/keys/b", {}, status=302, Location="/uploads/c.json")
    card_server.set("/uploads/c.json", jwks("k1"))
    url = URL(card_server.url("/keys/a"))

    entry = await jwks_cache.download(url, follow=under_keys)
    assert entry.problem == (
        f"the JWKS at {url} redirected to {card_server.url('/uploads/c.json')}, "
        "which is not under /keys/"
    )
    assert [r.path for r in card_server.requests] == ["/keys/a", "/keys/b"]

    # without the stricter check a redirect within the origin is followed
    entry = await jwks_cache.download(url)
    assert entry.problem is None
    assert entry.final_url == card_server.url("/uploads/c.json")


async def test_lookups_apply_each_urls_own_check(
    cache: tuple[JwksCache, Clock], card_server: CardServer
) -> None:
    jwks_cache, _ = cache
    card_server.set("/keys/moved", {}, status=302, Location="/uploads/jwks.json")
    card_server.set("/trusted", {}, status=302, Location="/uploads/jwks.json")
    card_server.set("/uploads/jwks.json", jwks("k1"))
    jku, trusted = URL(card_server.url("/keys/moved")), URL(card_server.url("/trusted"))

    [refused, followed] = await jwks_cache.lookups([jku, trusted], "k1", 10.0, [under_keys])
    assert refused is not None and followed is not None
    assert refused[0] == [] and "which is not under /keys/" in (refused[1].problem or "")
    assert len(followed[0]) == 1 and followed[1].problem is None
    assert card_server.hits("/uploads/jwks.json") == 1  # for the trusted URL only

    # the refusal is cached like any failure: no new request until it expires
    again = await jwks_cache.lookup(jku, "k1", follow=under_keys)
    assert again[1] is refused[1]
    assert [r.path for r in card_server.requests].count("/keys/moved") == 1
