"""registry.indexing: the index hook behind the catalog (asked for by a wait, retried after
a failure, stopped at shutdown; a burst of changes let end first, unless somebody waits or
the burst lasts too long), through the registry that owns it. The router's registrations,
which wait for their vectors, are tested with router/modelload.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from registry.catalog import Snapshot
from registry.crawler import Crawler
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
    await registry.indexing.close(1.0)
    await crawler.close()
    await store.close()


async def test_indexed_asks_for_a_change_that_did_not_and_close_stops_the_hook(
    registry: Registry,
) -> None:
    calls: list[int] = []
    entered, release = asyncio.Event(), asyncio.Event()

    async def on_index(snapshot: Snapshot) -> None:
        calls.append(snapshot.version)
        entered.set()
        await release.wait()

    await registry.register_card(card_v1("https://0.example"), "a0")  # no hook yet
    registry.on_index = on_index
    release.set()
    assert await registry.indexed() == registry.catalog.snapshot.version
    assert calls == [registry.catalog.snapshot.version]
    release.clear()
    entered.clear()
    await registry.register_card(card_v1("https://1.example"), "a1")
    await entered.wait()  # the hook runs for a1, and blocks
    assert registry.indexing.busy
    await registry.indexing.close(0.01)  # blocked past the grace: cancelled
    assert not registry.indexing.busy
    await registry.register_card(card_v1("https://2.example"), "a2")
    assert not registry.indexing.busy and len(calls) == 2  # closed: no more calls


async def test_a_failing_hook_is_logged_and_the_next_change_runs_it_again(
    registry: Registry,
) -> None:
    outcomes = [RuntimeError("down"), None]

    async def on_index(snapshot: Snapshot) -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    registry.on_index = on_index
    await registry.register_card(card_v1("https://0.example"), "a0")
    await registry.indexed()
    assert registry.indexing.failure == "RuntimeError: down"
    await registry.register_card(card_v1("https://1.example"), "a1")
    await registry.indexed()
    assert registry.indexing.failure is None and outcomes == []


@pytest.fixture
async def deferring(sqlite_url: str) -> AsyncIterator[Any]:
    """Makes registries whose index hook waits for a quiet period (closed at the end)."""
    store = Store(sqlite_url)
    crawler = Crawler(make_settings(sqlite_url))
    made: list[Registry] = []

    async def make(quiet: float, max_delay: float) -> Registry:
        registry = Registry(store, crawler, index_quiet=quiet, index_max_delay=max_delay)
        await registry.load()
        made.append(registry)
        return registry

    yield make
    for registry in made:
        await registry.indexing.close(1.0)
    await crawler.close()
    await store.close()


def recorder() -> tuple[list[int], asyncio.Event, Any]:
    """A hook recording the versions it was given, and an event set at each call."""
    calls: list[int] = []
    called = asyncio.Event()

    async def on_index(snapshot: Snapshot) -> None:
        calls.append(snapshot.version)
        called.set()

    return calls, called, on_index


async def test_a_burst_of_changes_shares_one_call_which_a_waiter_does_not_wait_for(
    deferring: Any,
) -> None:
    registry = await deferring(quiet=600, max_delay=600)
    calls, _called, registry.on_index = recorder()
    for n in range(3):
        await registry.register_card(card_v1(f"https://{n}.example"), f"a{n}")
    assert calls == [] and registry.indexing.backlog > 0  # due, waiting for the quiet
    async with asyncio.timeout(10):  # a waiter cuts the quiet period short
        assert await registry.indexed() == registry.catalog.snapshot.version
    assert calls == [registry.catalog.snapshot.version]  # the three changes, one call
    assert registry.indexing.backlog == 0


async def test_the_hook_runs_once_the_changes_stop(deferring: Any) -> None:
    registry = await deferring(quiet=0.5, max_delay=600)
    calls, called, registry.on_index = recorder()
    for n in range(3):
        await registry.register_card(card_v1(f"https://{n}.example"), f"a{n}")
    async with asyncio.timeout(10):
        await called.wait()  # nobody waits: the quiet period ended
    assert calls == [registry.catalog.snapshot.version]


async def test_a_burst_that_lasts_waits_no_longer_than_max_delay(deferring: Any) -> None:
    registry = await deferring(quiet=600, max_delay=0.05)
    calls, called, registry.on_index = recorder()
    await registry.register_card(card_v1("https://0.example"), "a0")
    async with asyncio.timeout(10):
        await called.wait()  # changes never went quiet for 600 s: max_delay decided
    assert calls == [registry.catalog.snapshot.version]


async def test_closing_during_the_quiet_period_runs_no_call(deferring: Any) -> None:
    registry = await deferring(quiet=600, max_delay=600)
    calls, _called, registry.on_index = recorder()
    await registry.register_card(card_v1("https://0.example"), "a0")
    assert registry.indexing.busy
    async with asyncio.timeout(10):
        await registry.indexing.close(0.01)
    assert calls == [] and not registry.indexing.busy
