"""Fixtures of the observability tests: Switchboard with a real a2a-sdk agent registered,
the agent recording the headers of every request it gets."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp.test_utils import TestClient

from router.app import create_app
from tests.support.helpers import AUTH, make_settings
from tests.support.sdk_peers import (
    TaskEchoExecutor,
    echo_card,
    listening_socket,
    sdk_app,
    serve_asgi,
)


@dataclass
class Agent:
    """A running SDK agent and the headers of the requests it received (lower-case names)."""

    url: str
    headers: list[dict[str, str]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def recording_agent() -> AsyncIterator[Agent]:
    """The SDK task echo agent on a random port, recording each request's headers."""
    sock = listening_socket()
    agent = Agent(f"http://127.0.0.1:{sock.getsockname()[1]}")
    app = sdk_app(echo_card(agent.url), executor=TaskEchoExecutor())

    async def recorder(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            agent.headers.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    async with serve_asgi(recorder, sock):
        yield agent


async def register(client: TestClient, url: str, agent_id: str) -> None:
    """Register the agent at ``url`` as ``agent_id``."""
    resp = await client.post("/api/v1/agents", json={"url": url, "id": agent_id}, headers=AUTH)
    assert resp.status == 201, await resp.text()


async def routed(aiohttp_client: Any, sqlite_url: str, **settings: Any) -> TestClient:
    """A running Switchboard on ``sqlite_url`` with ``settings``."""
    return await aiohttp_client(create_app(make_settings(sqlite_url, **settings)))
