"""Fixtures of the router's tests (see tests/README.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from registry.store import Store
from router.tables import SCHEMA


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    """The router's tables in a fresh database (SQLite, and PostgreSQL when configured)."""
    store = Store(db_url, SCHEMA)
    await store.create_schema()
    yield store
    await store.close()
