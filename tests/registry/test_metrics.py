"""The registry's metrics: checks of agents counted by outcome (``POST /api/v1/refresh``
runs the same checks as the scheduler)."""

from __future__ import annotations

from typing import Any

from registry.metrics import REFRESHES
from tests.router.observe.conftest import recording_agent, register, routed
from tests.support.helpers import AUTH


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
