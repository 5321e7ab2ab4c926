"""router.cli.status: ``switchboard status`` against a real running server."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from router.app import create_app
from tests.support.cli import run
from tests.support.helpers import AUTH, card_v1, make_settings


async def test_status_prints_a_summary_and_json(
    capsys: pytest.CaptureFixture[str], aiohttp_server: Any, sqlite_url: str
) -> None:
    server: TestServer = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with aiohttp.ClientSession() as http:
        made = await http.post(
            str(server.make_url("/api/v1/agents")),
            json={"card": card_v1("http://127.0.0.1:9"), "id": "cli-status-weather"},
            headers=AUTH,
        )
        assert made.status == 201, await made.text()
        message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "rain?"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        await http.post(
            str(server.make_url("/agents/cli-status-weather")),
            json=body,
            headers={"A2A-Version": "1.0"},
        )  # chosen (pinned), then the agent cannot be reached

    status, out, err = await run(capsys, server, "status", "--minutes", "5")
    assert status == 0, err
    assert "lease holder nobody" in out
    assert "agents       1 (1 routable)" in out
    assert "verification unsigned 1" in out
    assert "routing decisions (last 5 min)" in out

    # the decisions are this process's (other tests' too, in one test run): find ours
    status, out, _ = await run(capsys, server, "status", "--json")
    assert status == 0
    summary = json.loads(out)
    assert summary["agents"]["total"] == 1
    rows = summary["decisions"]["rows"]
    assert {"tier": "pinned", "agent": "cli-status-weather"} in [
        {"tier": row["tier"], "agent": row["agent"]} for row in rows
    ], rows

    status, _, err = await run(capsys, server, "status", "--minutes", "0")
    assert status == 1 and "minutes" in err
