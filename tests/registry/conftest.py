"""Fixtures of the registry's tests (see tests/README.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp.test_utils import TestServer

from registry.store import Store

ServerFactory = Callable[..., Awaitable[TestServer]]


@pytest.fixture
async def never(aiohttp_server: ServerFactory) -> AsyncIterator[asyncio.Event]:
    """An event no handler sees set during the test (set at teardown, before servers close)."""
    event = asyncio.Event()
    yield event
    event.set()


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    """A store on a fresh database (SQLite, and PostgreSQL when configured), its schema made."""
    store = Store(db_url)
    await store.create_schema()
    yield store
    await store.close()
