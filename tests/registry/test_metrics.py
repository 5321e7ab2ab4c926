"""The registry's metrics: checks of agents counted by outcome (``POST /api/v1/refresh``
runs the same checks as the scheduler); crawls at registration, card changes, verification
failures and database statements, scraped from ``GET /metrics``."""

from __future__ import annotations

from typing import Any

from registry.metrics import REFRESHES
from tests.router.observe.conftest import recording_agent, register, routed
from tests.router.observe.test_metrics import moved, scrape
from tests.support.helpers import AUTH, card_v1


def counts() -> dict[str, float]:
    return {o: REFRESHES.labels(o)._value.get() for o in ("unchanged", "failed")}


async def test_checks_are_counted_by_outcome(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:
        async with recording_agent() as gone:
            await register(client, gone.url, "gone")
        await register(client, echo.url, "echo")
        before = counts()
        resp = await client.post("/api/v1/refresh", json={"all": True}, headers=AUTH)
        report = await resp.json()
        assert resp.status == 200, report
    after = counts()
    assert after["unchanged"] - before["unchanged"] == 1
    assert after["failed"] - before["failed"] == 1


async def test_crawls_card_changes_and_verification_failures_are_counted(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as gone:
        pass  # its port no longer answers
    before = await scrape(client)
    async with recording_agent() as echo:
        await register(client, echo.url, "echo")
    refused = await client.post("/api/v1/agents", json={"url": gone.url}, headers=AUTH)
    assert refused.status == 422, await refused.text()

    forged = card_v1("http://127.0.0.1:9", name="Forged")
    forged["signatures"] = [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "AAAA"}]
    made = await client.post("/api/v1/agents", json={"card": forged, "id": "forged"}, headers=AUTH)
    assert made.status == 201, await made.text()
    assert (await made.json())["verification"]["status"] == "invalid"
    changed = card_v1("http://127.0.0.1:9", name="Forged", description="now unsigned")
    put = await client.put("/api/v1/agents/forged/card", json=changed, headers=AUTH)
    assert put.status == 200, await put.text()
    after = await scrape(client)

    assert moved(before, after, "switchboard_crawls_total", outcome="ok") == 1
    assert moved(before, after, "switchboard_crawls_total", outcome="connect_failed") == 1
    assert moved(before, after, "switchboard_verification_failures_total", reason="invalid") == 1
    assert moved(before, after, "switchboard_card_changes_total", change="card") == 1
    selects = "switchboard_db_operation_seconds_count"
    assert moved(before, after, selects, operation="select") > 0
    assert moved(before, after, selects, operation="insert") >= 2  # two agents and their rows
    assert moved(before, after, selects, operation="update") > 0
    assert moved(before, after, selects, operation="delete") > 0  # the replaced index rows
    db = [labels for name, labels in after if name.startswith("switchboard_db")]
    db_labels = {key for labels in db for key, _ in labels}
    assert db_labels == {"operation", "le"}
