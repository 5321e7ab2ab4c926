"""router.observe.status: ``GET /api/v1/status`` after real traffic (an a2a-sdk agent, a
refused message, an agent that is gone), and who may read it."""

from __future__ import annotations

from typing import Any

from registry.appkeys import REFRESHER
from tests.router.observe.conftest import recording_agent, register, routed
from tests.router.observe.test_metrics import rpc
from tests.support.helpers import AUTH


async def test_status_shows_lease_agents_failures_and_recent_decisions(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url)
    async with recording_agent() as echo:
        async with recording_agent() as gone:
            await register(client, gone.url, "status-gone")
        await register(client, echo.url, "status-echo")
        refreshed = await client.post("/api/v1/refresh", json={"all": True}, headers=AUTH)
        assert refreshed.status == 200, await refreshed.text()
        for _ in range(2):
            sent = await (await client.post("/", json=rpc("message/send", "say hello back"))).json()
            assert "result" in sent, sent
        refused = await (await client.post("/", json=rpc("message/send", "qqq zzzq"))).json()
        assert refused["error"]["code"] == -32050
        assert await client.app[REFRESHER].renew_lease()

        resp = await client.get("/api/v1/status")
        assert resp.status == 200, await resp.text()
        status = await resp.json()

    replica = status["replica"]
    assert replica["holds_lease"] is True and replica["lease_holder"] == replica["name"]
    assert replica["name"] == client.app[REFRESHER].holder
    agents = status["agents"]
    assert agents["total"] == 2 and agents["by_verification"] == {"unsigned": 2}
    assert sum(agents["by_health"].values()) == 2
    [failure] = status["refresh_failures"]
    assert failure["agent_id"] == "status-gone" and failure["consecutive_failures"] == 1
    assert failure["last_error"] and failure["last_failure"].endswith("Z")
    rows = {(r["tier"], r["agent"]): r["count"] for r in status["decisions"]["rows"]}
    assert rows[("lexical", "status-echo")] >= 2 and rows[("refused", "")] >= 1
    assert status["decisions"]["by_agent"]["status-echo"] >= 2
    assert status["decisions"]["minutes"] == 15 and status["decisions"]["complete"] is True


async def test_status_is_a_guarded_read_with_a_checked_window(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await routed(aiohttp_client, sqlite_url, read_token="status-reader")
    assert (await client.get("/api/v1/status")).status == 401
    reader = {"Authorization": "Bearer status-reader"}
    resp = await client.get("/api/v1/status?minutes=5", headers=reader)
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["decisions"]["minutes"] == 5
    for bad in ("minutes=0", "minutes=61", "minutes=x", "window=5"):
        answer = await client.get(f"/api/v1/status?{bad}", headers=reader)
        assert answer.status == 400, bad
        assert (await answer.json())["error"]["code"] in ("invalid_parameter", "unknown_parameter")
