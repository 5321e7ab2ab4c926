"""The registry service's own coordination: the index hook shared by concurrent changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from registry.catalog import Snapshot
from registry.crawler import Crawler
from registry.records import AgentRecord
from registry.service import Registry
from registry.store import Store
from tests.support.helpers import card_v1, make_settings


@pytest.fixture
async def registry(sqlite_url: str) -> AsyncIterator[Registry]:
    store = Store(sqlite_url)
    crawler = Crawler(make_settings(sqlite_url))
    registry = Registry(store, crawler)
    await registry.load()
    yield registry
    await crawler.close()
    await store.close()


async def test_changes_made_during_an_index_call_share_the_next_one(registry: Registry) -> None:
    seen: list[list[str]] = []
    entered = asyncio.Event()
    release = asyncio.Event()

    async def on_index(snapshot: Snapshot) -> None:
        seen.append(sorted(snapshot.agents))
        entered.set()
        await release.wait()

    registry.on_index = on_index
    all_in = asyncio.Event()
    upsert = registry.catalog.upsert

    def counted(record: AgentRecord, version: int) -> bool:
        installed = upsert(record, version)  # the writer asks for its index call right after
        if len(registry.catalog.snapshot.agents) == 5:
            all_in.set()
        return installed

    registry.catalog.upsert = counted  # type: ignore[method-assign]
    first = asyncio.ensure_future(registry.register_card(card_v1("https://0.example"), "a0"))
    await entered.wait()  # the first registration's index call runs: the others queue
    rest = [
        asyncio.ensure_future(registry.register_card(card_v1(f"https://{n}.example"), f"a{n}"))
        for n in range(1, 5)
    ]
    await all_in.wait()  # each is written and in the catalog, waiting for its index call
    release.set()
    done = await asyncio.gather(first, *rest)
    assert [r.id for r in done] == ["a0", "a1", "a2", "a3", "a4"]
    assert seen == [["a0"], ["a0", "a1", "a2", "a3", "a4"]]  # one call for the four
