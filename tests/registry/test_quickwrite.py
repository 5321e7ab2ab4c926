"""registry.quickwrite: batches written on a SQLite file in the writer's own thread (stored as
the engine stores them, waiting for the engine's write lock, all or nothing, SQLAlchemy's
errors), through the async engine on PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError

from registry.store import Store
from registry.tables import LeaseRow

_LEASES = LeaseRow.__table__  # type: ignore[attr-defined]
_WHEN = datetime(2026, 11, 29, 12, 30, 15, 123456, tzinfo=UTC)


def _rows(*names: str) -> list[dict[str, object]]:
    return [
        {"name": name, "holder": f"holder of {name}", "expires_at": _WHEN + timedelta(seconds=i)}
        for i, name in enumerate(names)
    ]


async def _stored(store: Store) -> list[tuple[object, ...]]:
    async with store.engine.connect() as conn:
        result = await conn.execute(
            text("SELECT name, holder, expires_at FROM leases ORDER BY name")
        )
        return [tuple(row) for row in result]


async def test_a_batch_is_stored_as_the_engine_stores_it(store: Store, db_url: str) -> None:
    assert store.behind.immediate == db_url.startswith("sqlite")
    await store.behind.execute_many(insert(_LEASES), _rows("a", "b"))
    async with store.engine.begin() as conn:
        await conn.execute(insert(_LEASES), _rows("c"))
    stored = await _stored(store)
    assert [row[0] for row in stored] == ["a", "b", "c"]
    assert stored[0][2] == stored[2][2]  # the same time stored in the same form (text on SQLite)
    async with store.engine.connect() as conn:
        read = (await conn.execute(select(_LEASES).order_by(_LEASES.c.name))).all()
    assert [row.expires_at.replace(tzinfo=UTC) for row in read[:2]] == [
        _WHEN,
        _WHEN + timedelta(seconds=1),
    ]
    assert store.behind.batches == 1


async def test_a_failed_batch_writes_none_of_its_rows(store: Store) -> None:
    await store.behind.execute_many(insert(_LEASES), _rows("a"))
    with pytest.raises(IntegrityError):
        await store.behind.execute_many(insert(_LEASES), _rows("b", "a"))
    assert [row[0] for row in await _stored(store)] == ["a"]
    await store.behind.execute_many(insert(_LEASES), _rows("c"))  # the writer still works
    assert [row[0] for row in await _stored(store)] == ["a", "c"]


async def test_a_batch_waits_for_the_engines_write_lock(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        assert store.behind.immediate
        async with store.engine.begin() as conn:  # BEGIN IMMEDIATE: the write lock
            await conn.execute(insert(_LEASES), _rows("first"))
            batch = asyncio.ensure_future(store.behind.execute_many(insert(_LEASES), _rows("x")))
            done, _ = await asyncio.wait([batch], timeout=0.2)
            assert not done, "the batch waits while the engine holds the lock"
        await batch
        assert [row[0] for row in await _stored(store)] == ["first", "x"]
    finally:
        await store.close()


async def test_closing_waits_for_the_batch_and_a_later_batch_reopens(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        await store.behind.execute_many(insert(_LEASES), _rows("a"))
        store.behind.close()
        await store.behind.execute_many(insert(_LEASES), _rows("b"))
        assert [row[0] for row in await _stored(store)] == ["a", "b"]
        await store.behind.execute_many(insert(_LEASES), [])  # nothing to write: no batch
        assert store.behind.batches == 2
    finally:
        await store.close()
