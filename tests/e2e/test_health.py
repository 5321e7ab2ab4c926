"""Passive and active health in routing: an agent that goes down leaves routing after the
router's failed calls, the router routes around it, and it comes back on its first good check.

Real servers on 127.0.0.1: two minimal A2A 1.0 agents (plain aiohttp) that the test stops and
restarts on the same port, and the Switchboard app with a fake clock.
"""

from __future__ import annotations

import socket
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from registry.api import PASSIVE_HEALTH, REFRESHER, REGISTRY
from router.app import create_app
from tests.support.clock import FakeClock
from tests.support.helpers import AUTH, make_settings


class Agent:
    """A minimal A2A 1.0 agent answering ``SendMessage`` with ``<name>: <text>``."""

    def __init__(self, name: str, skill: dict[str, Any]) -> None:
        self.name = name
        self.skill = skill
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._runner: web.AppRunner | None = None

    def card(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": f"The {self.name} agent.",
            "version": "1",
            "supportedInterfaces": [
                {"url": f"{self.url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [self.skill],
        }

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/agent-card.json", self._card)
        app.router.add_post("/a2a", self._rpc)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _card(self, request: web.Request) -> web.Response:
        return web.json_response(self.card())

    async def _rpc(self, request: web.Request) -> web.Response:
        body = await request.json()
        text = body["params"]["message"]["parts"][0]["text"]
        message = {
            "messageId": "r1",
            "role": "ROLE_AGENT",
            "parts": [{"text": f"{self.name}: {text}"}],
        }
        return web.json_response(
            {"jsonrpc": "2.0", "id": body["id"], "result": {"message": message}}
        )


async def _send(sb: TestClient, text: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    resp = await sb.post("/", json=body, headers={"A2A-Version": "1.0"})
    answer = await resp.json()
    await sb.app[PASSIVE_HEALTH].drain()  # the reports the call made are recorded
    return answer


def _answered_by(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return answer["result"]["message"]["parts"][0]["text"].split(":")[0]


async def test_a_stopped_agent_leaves_routing_and_comes_back(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    clock = FakeClock()
    settings = make_settings(sqlite_url, refresh_jitter=0, health_unreachable_after=2)
    app = create_app(settings)
    app[REGISTRY].policy.clock = clock
    sb = await aiohttp_client(app)
    forecast = {
        "id": "forecast",
        "name": "Weather forecast",
        "description": "Seven-day weather forecast for a city.",
        "tags": ["weather", "forecast"],
    }
    alpha = Agent("alpha", forecast)
    beta = Agent("beta", {**forecast, "description": "Forecasts.", "tags": ["forecast"]})
    for agent in (alpha, beta):
        await agent.start()
        resp = await sb.post(
            "/api/v1/agents", json={"url": agent.url, "id": agent.name}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
    try:
        question = "seven-day weather forecast for Paris"
        assert _answered_by(await _send(sb, question)) == "alpha"

        await alpha.stop()
        for failures in (1, 2):  # failed calls are reported: degraded, then unreachable
            answer = await _send(sb, question)
            if failures == 1:  # a second failed call within retry_base is the same failure
                assert (await _send(sb, question))["error"]["code"] == -32052
            assert answer["error"]["code"] == -32052 and "alpha" in answer["error"]["message"]
            health = app[REGISTRY].health_of("alpha")
            assert health.consecutive_failures == failures
            clock.advance(5)
        assert health.status == "unreachable"
        assert _answered_by(await _send(sb, question)) == "beta"  # routed around alpha

        await alpha.start()
        refresher = app[REFRESHER]
        clock.advance((health.next_check_at - clock.now).total_seconds())
        assert await refresher.renew_lease()
        assert (await refresher.run_due()).checked == ["alpha"]
        assert app[REGISTRY].health_of("alpha").status == "healthy"
        assert _answered_by(await _send(sb, question)) == "alpha"
    finally:
        await alpha.stop()
        await beta.stop()


async def test_an_answer_makes_a_degraded_agent_healthy_without_waiting_for_a_check(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    sb = await aiohttp_client(create_app(make_settings(sqlite_url)))
    agent = Agent("alpha", {"id": "echo", "name": "Echo", "description": "Echoes text."})
    await agent.start()
    try:
        resp = await sb.post("/api/v1/agents", json={"url": agent.url, "id": "alpha"}, headers=AUTH)
        assert resp.status == 201
        registry = sb.app[REGISTRY]
        await registry.report_failure("alpha", "connection refused")
        assert registry.health_of("alpha").status == "degraded"
        assert _answered_by(await _send(sb, "echo this")) == "alpha"
        assert registry.health_of("alpha").status == "healthy"
        assert registry.health_of("alpha").last_error == "connection refused"
    finally:
        await agent.stop()
