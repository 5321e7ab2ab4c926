"""Fixtures of the access tests: an identity provider and verifiers of its tokens, and a
store on each test database, closed at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from registry.access.jwt import JwtVerifier
from registry.store import Store
from registry.tables import TABLES
from tests.support.helpers import make_settings
from tests.support.issuer import Issuer, Ticker, serve_issuer

ServerFactory = Callable[..., Awaitable[TestServer]]
MakeVerifier = Callable[..., Awaitable[JwtVerifier]]


@pytest.fixture
async def issuer(aiohttp_server: ServerFactory) -> Issuer:
    """An identity provider on 127.0.0.1 with the keys ``rsa-1`` (RS256) and ``ec-1`` (ES256)."""
    return await serve_issuer(aiohttp_server)


@pytest.fixture
def ticker() -> Ticker:
    """The monotonic clock of the verifiers ``make`` builds."""
    return Ticker()


@pytest.fixture
async def make(issuer: Issuer, ticker: Ticker) -> AsyncIterator[MakeVerifier]:
    """Build verifiers of ``issuer``'s tokens (through OIDC discovery unless
    ``discovery=False``; settings ``overrides``), started unless ``start=False``, closed at
    teardown."""
    made: list[JwtVerifier] = []

    async def factory(
        *, discovery: bool = True, start: bool = True, **overrides: Any
    ) -> JwtVerifier:
        settings = make_settings("sqlite://", **issuer.settings(discovery=discovery, **overrides))
        verifier = JwtVerifier(settings, timer=ticker)
        made.append(verifier)
        if start:
            await verifier.start()
        return verifier

    yield factory
    for verifier in made:
        await verifier.close()


OpenStore = Callable[[str], Awaitable[Store]]


@pytest.fixture
async def open_store() -> AsyncIterator[OpenStore]:
    """Open stores (each one a replica's connection) with the registry's schema."""
    opened: list[Store] = []

    async def factory(url: str) -> Store:
        store = Store(url, TABLES)
        await store.create_schema()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.close()
