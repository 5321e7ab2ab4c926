"""Synced state: its counter created once (also by two replicas at once), and a reload only
when another replica bumped it."""

from __future__ import annotations

import asyncio

from registry.store import Store, bump
from registry.synced import Synced
from registry.tables import CatalogStateRow
from router.tables import SCHEMA


class Counted(Synced):
    """State that counts its reloads."""

    VERSION_KEY = "test_version"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reloads = 0

    async def _reload(self) -> None:
        async with self.store.session() as session:
            row = await session.get(CatalogStateRow, self.VERSION_KEY)
        self.version = row.value if row is not None else 0
        self.reloads += 1


async def test_a_bump_elsewhere_reloads_here(db_url: str) -> None:
    store = Store(db_url, SCHEMA)
    await store.create_schema()
    try:
        one, two = Counted(store), Counted(store)
        await asyncio.gather(one.create_counter(), two.create_counter())
        await one._reload()
        assert not await one.sync() and one.reloads == 1  # nothing changed
        async with store.session() as session, session.begin():
            await bump(session, Counted.VERSION_KEY)
        assert await one.sync() and one.version == 1 and one.reloads == 2
        assert not await one.sync()
    finally:
        await store.close()
