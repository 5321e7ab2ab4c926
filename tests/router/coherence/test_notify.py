"""Writes announced between replicas on PostgreSQL (LISTEN/NOTIFY): two apps on one database,
the poll turned off (a minute), so only the announcement can bring one's writes to the other;
each replica skips its own; a listening connection that drops is opened again."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

from registry.api import REGISTRY
from router.app import ANNOUNCER, create_app
from router.coherence.notify import libpq_url
from router.transport.fresh import COHERENCE
from tests.support.helpers import AUTH, card_v1, make_settings


@pytest.fixture
def pg_url(db_url: str) -> str:
    """The PostgreSQL case of ``db_url`` only."""
    if not db_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    return db_url


async def _replica(aiohttp_client: Any, url: str) -> TestClient:
    client = await aiohttp_client(create_app(make_settings(url, catalog_sync_interval=60)))
    await asyncio.wait_for(client.app[ANNOUNCER].listening.wait(), 10)
    return client


async def _until(replica: TestClient, seen: Any) -> None:
    """Wait (syncs, not time) until ``seen()`` holds on ``replica``."""
    coherence = replica.app[COHERENCE]
    while not seen():
        await asyncio.wait_for(coherence.next_sync(), 10)


async def test_a_write_on_one_replica_reaches_the_other(aiohttp_client: Any, pg_url: str) -> None:
    a, b = await _replica(aiohttp_client, pg_url), await _replica(aiohttp_client, pg_url)
    catalog = b.app[REGISTRY].catalog
    for n in range(20):
        body = {"card": card_v1(f"http://127.0.0.1:9/{n}", name=f"A{n}"), "id": f"a{n}"}
        assert (await a.post("/api/v1/agents", json=body, headers=AUTH)).status == 201
        await _until(b, lambda n=n: f"a{n}" in catalog.snapshot.agents)
        assert (await a.delete(f"/api/v1/agents/a{n}", headers=AUTH)).status == 204
        await _until(b, lambda n=n: f"a{n}" not in catalog.snapshot.agents)
    assert b.app[ANNOUNCER].heard > 0  # (one sync may bring two writes: not one each)
    assert a.app[ANNOUNCER].heard == 0  # its own announcements are skipped


async def test_a_dropped_connection_is_opened_again(aiohttp_client: Any, pg_url: str) -> None:
    a, b = await _replica(aiohttp_client, pg_url), await _replica(aiohttp_client, pg_url)
    announcer = b.app[ANNOUNCER]
    with psycopg.connect(libpq_url(pg_url), autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
        )
    async with announcer.changed:  # it notices the drop and listens again
        await asyncio.wait_for(announcer.changed.wait_for(lambda: announcer.opened >= 2), 10)
    body = {"card": card_v1("http://127.0.0.1:9/z", name="Z"), "id": "z"}
    assert (await a.post("/api/v1/agents", json=body, headers=AUTH)).status == 201
    await _until(b, lambda: "z" in b.app[REGISTRY].catalog.snapshot.agents)
