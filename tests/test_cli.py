"""The ``switchboard`` CLI against a real running server (the CLI is sync: run it in a thread)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from router.app import create_app
from router.cli import main
from tests.helpers import ADMIN, CardServer, card_v03, card_v1, make_settings
from tests.sdk_peers import serve_sdk_agent


@pytest.fixture
async def server(aiohttp_server: Any, sqlite_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(sqlite_url)))


async def run(
    capsys: pytest.CaptureFixture[str], server: TestServer, *argv: str
) -> tuple[int, str, str]:
    """Run the CLI with ``--server`` pointing at ``server``; return (status, stdout, stderr)."""
    command, *rest = argv
    args = [command]
    if command == "agents":
        args.append(rest.pop(0))
    args += ["--server", str(server.make_url("")), "--token", ADMIN, *rest]
    status = await asyncio.to_thread(main, args)
    out, err = capsys.readouterr()
    return status, out, err


async def test_add_list_show_search_refresh_remove(
    capsys: pytest.CaptureFixture[str], server: TestServer, card_server: CardServer
) -> None:
    card_server.set("/.well-known/agent-card.json", card_v1(card_server.url()))
    status, out, _ = await run(capsys, server, "agents", "add", card_server.url())
    assert status == 0 and out.strip() == "registered weather-agent: Weather Agent"

    status, out, _ = await run(capsys, server, "agents", "list")
    assert status == 0 and "weather-agent  Weather Agent  [A2A 1.0]" in out

    status, out, _ = await run(capsys, server, "agents", "show", "weather-agent")
    assert "skill forecast: Weather forecast [weather, forecast]" in out
    assert "capabilities: streaming" in out

    status, out, _ = await run(capsys, server, "search", "rain tomorrow", "--skills")
    assert out.splitlines()[0].startswith("weather-agent/forecast  Weather forecast")

    status, out, _ = await run(capsys, server, "search", "--output-mode", "image/*", "--json")
    assert [a["id"] for a in json.loads(out)["agents"]] == ["weather-agent"]

    status, out, _ = await run(capsys, server, "agents", "refresh", "weather-agent")
    assert status == 0 and out.strip() == "refreshed weather-agent: card unchanged"

    status, out, _ = await run(capsys, server, "agents", "remove", "weather-agent")
    assert status == 0
    status, out, _ = await run(capsys, server, "agents", "list")
    assert out.strip() == "no agents found"


async def test_add_card_file(
    capsys: pytest.CaptureFixture[str], server: TestServer, tmp_path: Path
) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card_v03("https://inv.example")))
    status, out, _ = await run(capsys, server, "agents", "add", "--card", str(path), "--id", "inv")
    assert status == 0 and out.startswith("registered inv:")


async def test_sdk_agent_found_by_skill_via_cli(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    async with serve_sdk_agent() as base_url:
        status, _, err = await run(capsys, server, "agents", "add", base_url)
        assert status == 0, err
    status, out, _ = await run(capsys, server, "search", "--skill", "sdk-echo")
    assert out.startswith("sdk-echo-agent  SDK Echo Agent")
    status, out, _ = await run(capsys, server, "search", "--tag", "sdk", "--skills")
    assert out.startswith("sdk-echo-agent/sdk-echo  Echo text  (text/plain,application/json")


async def test_errors_are_one_clear_line(
    capsys: pytest.CaptureFixture[str], server: TestServer
) -> None:
    status, _, err = await run(capsys, server, "agents", "show", "nope")
    assert status == 1
    assert err.strip() == "switchboard: no agent with id 'nope' (not_found, HTTP 404)"

    status, _, err = await run(capsys, server, "agents", "add", "--card", "/does/not/exist")
    assert status == 2 and "cannot read card file" in err

    status, _, err = await run(capsys, server, "agents", "add")
    assert status == 2 and "give an agent URL or --card FILE" in err


async def test_unreachable_server(capsys: pytest.CaptureFixture[str], unused_tcp_port: int) -> None:
    status = await asyncio.to_thread(
        main, ["agents", "list", "--server", f"http://127.0.0.1:{unused_tcp_port}"]
    )
    _, err = capsys.readouterr()
    assert status == 1 and "cannot reach Switchboard" in err


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "serve" in capsys.readouterr().out


def test_serve_rejects_bad_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--allow-networks", "not-a-network"]) == 2
    assert "invalid settings" in capsys.readouterr().err
