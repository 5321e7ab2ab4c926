"""IssuerKeys through JwtVerifier: the JWKS by discovery or URL, rotation, the refetch limit,
periodic refresh, failures (tests/support/issuer.py on 127.0.0.1; fixtures in conftest.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from registry.access.errors import AuthError
from registry.access.idpkeys import REFETCH_INTERVAL, REFRESH_INTERVAL
from registry.access.jwt import JwtVerifier
from tests.support.helpers import make_settings
from tests.support.issuer import Issuer, Ticker, compact, refused
from tests.support.proxy import running_proxy

Make = Callable[..., Awaitable[JwtVerifier]]


async def test_unknown_kid_refused_then_accepted_after_rotation(
    issuer: Issuer, make: Make, ticker: Ticker
) -> None:
    verifier = await make()
    new = issuer.add_key("ES256", "rotated", publish=False)
    token = issuer.token(key=new)
    message = await refused(verifier, token, "unknown_key")
    assert "'rotated'" in message
    assert issuer.jwks_hits == 1  # fetched at start, too recently to fetch again
    ticker.advance(REFETCH_INTERVAL)
    await refused(verifier, token, "unknown_key")
    assert issuer.jwks_hits == 2
    issuer.publish("rotated")
    await refused(verifier, token, "unknown_key")  # within the interval: not fetched
    assert issuer.jwks_hits == 2
    ticker.advance(REFETCH_INTERVAL)
    assert (await verifier.verify(token)).subject == "alice"
    assert issuer.jwks_hits == 3
    assert (await verifier.verify(token)).subject == "alice"
    assert issuer.jwks_hits == 3
    assert issuer.hits(issuer.discovery_url) == 1  # the jwks_uri is kept


async def test_unknown_kid_fetches_are_limited_and_shared(
    issuer: Issuer, make: Make, ticker: Ticker
) -> None:
    verifier = await make()
    tokens = [issuer.token(header={"kid": f"unknown-{n}"}) for n in range(20)]
    for _ in range(3):
        ticker.advance(REFETCH_INTERVAL)
        results = await asyncio.gather(
            *(verifier.verify(t) for t in tokens), return_exceptions=True
        )
        assert all(isinstance(r, AuthError) and r.reason == "unknown_key" for r in results)
        for token in tokens:  # a flood within the interval fetches nothing
            await refused(verifier, token, "unknown_key")
    assert issuer.jwks_hits == 1 + 3
    # tokens of a new key arriving together all wait for one fetch, and all pass
    issuer.add_key("ES256", "shared")
    ticker.advance(REFETCH_INTERVAL)
    new = [issuer.token(key="shared", sub=f"user-{n}") for n in range(20)]
    principals = await asyncio.gather(*(verifier.verify(t) for t in new))
    assert sorted(p.subject for p in principals) == sorted(f"user-{n}" for n in range(20))
    assert issuer.jwks_hits == 1 + 3 + 1


async def test_periodic_refresh_drops_withdrawn_keys(
    issuer: Issuer, make: Make, ticker: Ticker
) -> None:
    verifier = await make()
    token = issuer.token(key="ec-1")
    await verifier.verify(token)
    assert not verifier.refreshing
    issuer.withdraw("ec-1")
    ticker.advance(REFRESH_INTERVAL)
    assert (await verifier.verify(token)).subject == "alice"  # the keys there are still serve
    assert verifier.refreshing  # ... while they are fetched again in the background
    assert await verifier.refresh()
    assert issuer.jwks_hits == 2
    assert verifier.kids == ["rsa-1"]
    await refused(verifier, token, "unknown_key")


async def test_max_age_sets_the_refresh_interval(
    issuer: Issuer, make: Make, ticker: Ticker
) -> None:
    issuer.jwks_headers = {"Cache-Control": "public, max-age=120"}
    verifier = await make()
    ticker.advance(119)
    await verifier.verify(issuer.token())
    assert not verifier.refreshing
    ticker.advance(1)
    await verifier.verify(issuer.token())
    assert verifier.refreshing
    assert await verifier.refresh()
    issuer.jwks_headers = {"Cache-Control": "max-age=5"}  # below the floor: 60 s
    assert await verifier.refresh()
    ticker.advance(59)
    await verifier.verify(issuer.token())
    assert not verifier.refreshing


async def test_failed_fetches_keep_the_keys(
    issuer: Issuer, make: Make, ticker: Ticker, caplog: pytest.LogCaptureFixture
) -> None:
    verifier = await make()
    token = issuer.token()
    issuer.jwks_status = 500
    caplog.set_level(logging.WARNING, "registry.access.jwt")
    assert not await verifier.refresh()
    assert "answered HTTP 500" in caplog.text
    assert (await verifier.verify(token)).subject == "alice"
    issuer.jwks_extra = [{"kty": "oct", "k": "c2VjcmV0"}]
    issuer.withdraw("rsa-1")
    issuer.withdraw("ec-1")
    issuer.jwks_status = 200
    assert not await verifier.refresh()  # no usable key: a failure too
    assert "no usable signature key" in caplog.text
    assert (await verifier.verify(token)).subject == "alice"


async def test_no_keys_is_unavailable_until_the_jwks_answers(
    issuer: Issuer, make: Make, ticker: Ticker, caplog: pytest.LogCaptureFixture
) -> None:
    issuer.jwks_status = 503
    caplog.set_level(logging.WARNING, "registry.access.jwt")
    verifier = await make()  # start does not raise
    assert not verifier.ready
    assert "bearer tokens are refused" in caplog.text
    token = issuer.token()
    await refused(verifier, token, "unavailable")
    assert issuer.jwks_hits == 1  # not hammered: once per interval
    issuer.jwks_status = 200
    await refused(verifier, token, "unavailable")
    ticker.advance(REFETCH_INTERVAL)
    assert (await verifier.verify(token)).subject == "alice"
    assert issuer.jwks_hits == 2


async def test_redirects_are_not_followed(issuer: Issuer, make: Make) -> None:
    issuer.jwks_redirect = str(issuer.server.make_url("/elsewhere/jwks.json"))
    verifier = await make(discovery=False)
    await refused(verifier, issuer.token(), "unavailable")
    assert issuer.jwks_hits == 1
    assert issuer.hits("/elsewhere/jwks.json") == 0


async def test_discovery_must_name_the_issuer(issuer: Issuer, make: Make) -> None:
    issuer.discovery_extra = {"issuer": "https://evil.example"}
    verifier = await make()
    await refused(verifier, issuer.token(), "unavailable")
    assert issuer.jwks_hits == 0


@pytest.mark.parametrize(
    "jwks_uri", [None, 5, "", "/relative/jwks.json", "ftp://127.0.0.1/jwks.json"]
)
async def test_discovery_needs_a_jwks_uri(issuer: Issuer, make: Make, jwks_uri: Any) -> None:
    issuer.discovery_extra = {"jwks_uri": jwks_uri}
    verifier = await make()
    assert not verifier.ready
    assert issuer.jwks_hits == 0


async def test_an_oversized_jwks_is_refused(issuer: Issuer, make: Make, ticker: Ticker) -> None:
    issuer.jwks_extra = [{"kty": "junk", "pad": "x" * 300_000}]
    verifier = await make(discovery=False)
    assert not verifier.ready
    issuer.jwks_extra = []
    ticker.advance(REFETCH_INTERVAL)
    assert (await verifier.verify(issuer.token())).subject == "alice"


async def test_unreachable_issuer(unused_tcp_port: int, ticker: Ticker) -> None:
    settings = make_settings(
        "sqlite://",
        client_auth="jwt",
        jwt_issuer=f"http://127.0.0.1:{unused_tcp_port}/realms/gone",
        connect_timeout=1.0,
    )
    verifier = JwtVerifier(settings, timer=ticker)
    try:
        await verifier.start()
        assert not verifier.ready
        token = compact({"alg": "RS256", "kid": "k"}, {"sub": "x"}, b"sig")
        await refused(verifier, token, "unavailable")
    finally:
        await verifier.close()


async def test_the_issuer_is_asked_through_the_outbound_proxy(
    issuer: Issuer, make: Make, tmp_path: Path
) -> None:
    """``SWITCHBOARD_OUTBOUND_PROXY``: discovery and the JWKS through it (the issuer is the
    operator's choice: not judged by the address guard); the no-proxy list takes it off."""
    async with running_proxy(tmp_path, user="sb", password="s3cret") as proxy:
        proxied = proxy.url.replace("://", "://sb:s3cret@")
        verifier = await make(outbound_proxy=proxied, allow_networks=[])
        assert (await verifier.verify(issuer.token())).subject == "alice"
        assert proxy.targets() == [issuer.discovery_url, issuer.jwks_url]
        assert {entry["auth"] for entry in proxy.entries()} == {"ok"}
        direct = await make(outbound_proxy=proxied, outbound_no_proxy=["127.0.0.1"])
        assert direct.ready and len(proxy.entries()) == 2
