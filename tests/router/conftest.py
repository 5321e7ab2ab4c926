"""Fixtures of the router's tests (see tests/README.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from registry.store import Store
from router.ids.idmap import IdMap
from router.tables import SCHEMA


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    """The router's tables in a fresh database (SQLite, and PostgreSQL when configured)."""
    store = Store(db_url, SCHEMA)
    await store.create_schema()
    yield store
    await store.close()


@pytest.fixture
async def ids(store: Store) -> AsyncIterator[IdMap]:
    """An ID map on :func:`store`, started."""
    ids = IdMap(store)
    await ids.start()
    yield ids
    await ids.close()
