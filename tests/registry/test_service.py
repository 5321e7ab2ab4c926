"""The registry service's own coordination: the index hook, run behind the writes and shared
by the changes made while it runs (registry/indexing.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from registry.catalog import Snapshot
from registry.crawler import Crawler
from registry.service import Registry
from registry.store import Store
from tests.support.helpers import card_v1, make_record, make_settings


@pytest.fixture
async def registry(sqlite_url: str) -> AsyncIterator[Registry]:
    store = Store(sqlite_url)
    crawler = Crawler(make_settings(sqlite_url))
    registry = Registry(store, crawler)
    await registry.load()
    yield registry
    await crawler.close()
    await store.close()


async def test_registrations_answer_before_the_index_hook_and_share_its_next_call(
    registry: Registry,
) -> None:
    seen: list[list[str]] = []
    entered = asyncio.Event()
    release = asyncio.Event()

    async def on_index(snapshot: Snapshot) -> None:
        seen.append(sorted(snapshot.agents))
        entered.set()
        await release.wait()

    registry.on_index = on_index
    first = await registry.register_card(card_v1("https://0.example"), "a0")
    await entered.wait()  # the hook runs behind the answered registration, and blocks
    rest = [
        await registry.register_card(card_v1(f"https://{n}.example"), f"a{n}") for n in range(1, 5)
    ]  # each answers while the hook is still blocked
    assert [r.id for r in [first, *rest]] == ["a0", "a1", "a2", "a3", "a4"]
    assert seen == [["a0"]]
    assert registry.indexing.busy and registry.indexing.backlog > 0
    waiting = asyncio.ensure_future(registry.indexed())
    release.set()
    assert await waiting == registry.catalog.snapshot.version
    assert seen == [["a0"], ["a0", "a1", "a2", "a3", "a4"]]  # one call for the four
    assert registry.indexing.calls == 2 and registry.indexing.backlog == 0


async def _replica(url: str) -> Registry:
    registry = Registry(Store(url), Crawler(make_settings(url)))
    await registry.load()
    return registry


async def test_another_replicas_changes_arrive_without_a_full_reload(db_url: str) -> None:
    one, two = await _replica(db_url), await _replica(db_url)
    reloads: list[int] = []
    full_reload = two.reload

    async def counted() -> None:
        reloads.append(1)
        await full_reload()

    two.reload = counted  # type: ignore[method-assign]
    try:
        await one.register_card(card_v1("https://a.example", name="Alpha"), "a")
        await one.register_card(card_v1("https://b.example", name="Beta"), "b")
        assert await two.sync()
        assert sorted(two.catalog.snapshot.agents) == ["a", "b"]
        assert two.catalog.snapshot.version == one.catalog.snapshot.version == 2
        await one.replace_card("a", card_v1("https://a.example", name="Alpha Two"))
        await one.remove("b")
        assert await two.sync()
        assert two.catalog.snapshot.agents == one.catalog.snapshot.agents
        assert two.get("a").card.name == "Alpha Two"
        assert two.health_of("a") == one.health_of("a")
        # the second replica writes after missing a write: it installs both
        await one.register_card(card_v1("https://c.example"), "c")
        record, raw = make_record("d", card_v1("https://d.example"))
        await two.install(record, await two.store.insert(record, raw))
        assert sorted(two.catalog.snapshot.agents) == ["a", "c", "d"]
        assert reloads == []
        assert not await two.sync()
    finally:
        for registry in (one, two):
            await registry.crawler.close()
            await registry.store.close()


async def test_a_gap_in_the_change_log_means_a_full_reload(db_url: str) -> None:
    from sqlmodel import delete

    from registry.tables import CatalogChangeRow

    one, two = await _replica(db_url), await _replica(db_url)
    try:
        await one.register_card(card_v1("https://a.example"), "a")
        await one.register_card(card_v1("https://b.example"), "b")
        async with one.store.session() as session, session.begin():  # pruned, or an old writer
            await session.exec(delete(CatalogChangeRow).where(CatalogChangeRow.version == 1))
        assert await one.store.changes_since(0) is None
        assert (await one.store.changes_since(1))[0] == 2  # type: ignore[index]
        assert await two.sync()
        assert sorted(two.catalog.snapshot.agents) == ["a", "b"]
    finally:
        for registry in (one, two):
            await registry.crawler.close()
            await registry.store.close()
