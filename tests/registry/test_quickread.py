"""registry.quickread: one row read at once on a SQLite file (committed writes of the async
engine seen by the next read, the reader unable to write), through the async engine on
PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import bindparam, select, text, update
from sqlalchemy.exc import OperationalError

from registry.store import Store
from registry.tables import CatalogStateRow

_STATE = CatalogStateRow.__table__  # type: ignore[attr-defined]
_BY_KEY = select(_STATE.c.value).where(_STATE.c.key == bindparam("key"))


async def test_a_read_sees_what_the_engine_committed_last(store: Store, db_url: str) -> None:
    assert store.quick.immediate == db_url.startswith("sqlite")
    assert (await store.quick.first(_BY_KEY, {"key": "catalog_version"})).value == 0
    async with store.engine.begin() as conn:
        await conn.execute(update(_STATE).where(_STATE.c.key == "catalog_version").values(value=7))
    assert (await store.quick.first(_BY_KEY, {"key": "catalog_version"})).value == 7
    assert await store.quick.first(_BY_KEY, {"key": "no such key"}) is None


async def test_the_sqlite_reader_cannot_write(sqlite_url: str) -> None:
    store = Store(sqlite_url)
    await store.create_schema()
    try:
        assert store.quick.reader is not None
        reader = store.quick.reader
        with reader.connect() as conn, pytest.raises(OperationalError, match="readonly"):
            conn.execute(text("UPDATE catalog_state SET value = 1"))
    finally:
        await store.close()


async def test_several_reads_at_once_on_sqlite_none_elsewhere(store: Store, db_url: str) -> None:
    every = select(_STATE.c.key, _STATE.c.value).order_by(_STATE.c.key)
    read = store.quick.all_now([every, _BY_KEY.params(key="catalog_version")])
    if not db_url.startswith("sqlite"):
        assert read is None  # PostgreSQL: the caller takes the engine
        return
    assert read is not None
    assert dict(read[0])["catalog_version"] == 0 and read[1][0].value == 0
    async with store.engine.begin() as conn:
        await conn.execute(update(_STATE).where(_STATE.c.key == "catalog_version").values(value=3))
    assert (await store.counters())["catalog_version"] == 3  # what the next sync reads
