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
    assert any("pinned" in line and "cli-status-weather" in line for line in out.splitlines())

    status, out, _ = await run(capsys, server, "status", "--json")
    assert status == 0
    assert json.loads(out)["agents"]["total"] == 1

    status, _, err = await run(capsys, server, "status", "--minutes", "0")
    assert status == 1 and "minutes" in err
