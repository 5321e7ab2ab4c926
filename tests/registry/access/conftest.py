"""Fixtures of the access tests: a store on each test database, closed at teardown."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from registry.store import Store
from registry.tables import TABLES

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
