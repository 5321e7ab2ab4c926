"""``serve --demo``'s demo agents in-process: registered at their real URLs, their signing keys
trusted there, so their cards are verified; the keys never reach the disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import seeds.demo_agents
from router.app import create_app
from router.cli.demo import DEMO_NAMES, DEMO_URLS, demo_agents
from seeds.demo_agents import DemoAgents
from seeds.demo_server import JWKS_PATH
from tests.support.helpers import AUTH, make_settings


async def _run(
    tmp_path: Path, ports: dict[str, int], started: list[DemoAgents]
) -> tuple[dict[str, str], dict[str, dict[str, Any]], list[str]]:
    """Start Switchboard with the demo agents on ``ports`` (database in ``tmp_path``), stop it;
    return the agents' URLs, their verification and the trusted JWKS URLs."""
    app = create_app(make_settings(f"sqlite:///{tmp_path / 'demo.db'}"))
    app.cleanup_ctx.append(demo_agents(ports))
    async with TestClient(TestServer(app)) as client:
        urls = app[DEMO_URLS]
        verification = {}
        for name in DEMO_NAMES:
            resp = await client.get(f"/api/v1/agents/{name}", headers=AUTH)
            verification[name] = (await resp.json())["verification"]
        keys = (await (await client.get("/api/v1/keys", headers=AUTH)).json())["keys"]
    assert started[-1].urls == urls
    return urls, verification, sorted(k["jwks_url"] for k in keys)


async def test_demo_agents_are_verified_at_every_start_and_keep_their_keys_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First start (free ports), a restart on the same ports (registered already, new keys)
    and one on other ports (registered again, the old ports' keys no longer trusted)."""
    monkeypatch.chdir(tmp_path)
    started: list[DemoAgents] = []
    start = seeds.demo_agents.start_demo_agents

    async def recorded(**kwargs: Any) -> DemoAgents:
        started.append(await start(**kwargs))
        return started[-1]

    monkeypatch.setattr(seeds.demo_agents, "start_demo_agents", recorded)
    first, _, _ = await _run(tmp_path, dict.fromkeys(DEMO_NAMES, 0), started)
    same = {name: int(url.rsplit(":", 1)[1]) for name, url in first.items()}
    for ports in (same, dict.fromkeys(DEMO_NAMES, 0)):
        urls, verification, trusted = await _run(tmp_path, ports, started)
        assert trusted == sorted(f"{url}{JWKS_PATH}" for url in urls.values())
        for name, agent in started[-1].agents.items():
            assert verification[name] == {
                "status": "verified",
                "kid": agent.key["kid"],
                "reason": None,
                "key_source": f"jwks:{urls[name]}{JWKS_PATH}",
                "payload_form": "rfc8785",
                "uncovered_fields": [],
            }
    assert urls != first
    private = {agent.key["d"].encode() for run in started for agent in run.agents.values()}
    assert len(private) == 9  # a fresh key for each agent at each start
    assert _files_holding(tmp_path, private) == []


def _files_holding(root: Path, secrets: set[bytes]) -> list[Path]:
    """The files under ``root`` (the database included) that contain any of ``secrets``."""
    files = [path for path in root.rglob("*") if path.is_file()]
    assert any(path.name == "demo.db" for path in files)
    return [path for path in files if any(s in path.read_bytes() for s in secrets)]
