"""Outbound credentials end to end: a real A2A agent (plain aiohttp) that wants a bearer token
from a real OAuth2 token endpoint, or a static X-API-Key, registered in the whole app; a
client calls ``POST /`` and the agent gets the right header, never the client's own
Authorization unless the agent is configured with ``forward_client_auth``."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.access.secrets import generate_key
from tests.support.helpers import AUTH
from tests.support.served import everywhere

CLIENT_TOKEN = "the-client-s-own-token"
CLIENT = {"Authorization": f"Bearer {CLIENT_TOKEN}", "A2A-Version": "1.0"}
API_KEY = "sk-agent-0123456789"
CLIENT_SECRET = "oauth-client-secret"


class Agent:
    """A minimal A2A 1.0 agent that answers ``SendMessage`` when ``allows(headers)``, and 401
    otherwise; it records the headers of every call."""

    def __init__(self) -> None:
        self.url = ""
        self.allows: Callable[[Any], bool] = lambda _headers: True
        self.seen: list[dict[str, str]] = []

    def card(self) -> dict[str, Any]:
        return {
            "name": "Ledger",
            "description": "Balances of the company's ledger accounts.",
            "version": "1",
            "supportedInterfaces": [
                {"url": f"{self.url}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {},
            "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {
                    "id": "balance",
                    "name": "Account balance",
                    "description": "The balance of a ledger account.",
                    "tags": ["ledger", "balance"],
                }
            ],
        }

    async def serve_card(self, _request: web.Request) -> web.Response:
        return web.json_response(self.card())

    async def rpc(self, request: web.Request) -> web.Response:
        self.seen.append(dict(request.headers))
        if not self.allows(request.headers):
            return web.json_response({"detail": "missing or bad credentials"}, status=401)
        body = await request.json()
        text = body["params"]["message"]["parts"][0]["text"]
        message = {"messageId": "r1", "role": "ROLE_AGENT", "parts": [{"text": f"ledger: {text}"}]}
        return web.json_response(
            {"jsonrpc": "2.0", "id": body["id"], "result": {"message": message}}
        )


class TokenEndpoint:
    """A real OAuth2 token endpoint (client credentials, HTTP Basic)."""

    def __init__(self) -> None:
        self.url = ""
        self.issued = 0

    @property
    def current(self) -> str:
        return f"Bearer tok-{self.issued}"

    async def token(self, request: web.Request) -> web.Response:
        expected = base64.b64encode(f"ledger-router:{CLIENT_SECRET}".encode()).decode()
        form = await request.post()
        if request.headers.get("Authorization") != f"Basic {expected}":
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") != "client_credentials" or form.get("scope") != "ledger.read":
            return web.json_response({"error": "invalid_request"}, status=400)
        self.issued += 1
        return web.json_response(
            {"access_token": f"tok-{self.issued}", "token_type": "Bearer", "expires_in": 3600}
        )


@pytest.fixture
async def agent(aiohttp_server: Any) -> Agent:
    agent = Agent()
    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", agent.serve_card)
    app.router.add_post("/a2a", agent.rpc)
    server: TestServer = await aiohttp_server(app)
    agent.url = str(server.make_url("")).rstrip("/")
    return agent


@pytest.fixture
async def tokens(aiohttp_server: Any) -> TokenEndpoint:
    endpoint = TokenEndpoint()
    app = web.Application()
    app.router.add_post("/token", endpoint.token)
    server: TestServer = await aiohttp_server(app)
    endpoint.url = str(server.make_url("/token"))
    return endpoint


@dataclass
class Switchboard:
    """The app on a real port (with workers: served) and an HTTP client for it."""

    server: Any
    client: aiohttp.ClientSession


@pytest.fixture
async def switchboard(
    start_router: Any, sqlite_url: str, agent: Agent
) -> AsyncIterator[Switchboard]:
    """The whole app, with a secret key, and the agent registered as ``ledger``."""
    server = await start_router(sqlite_url, secret_key=generate_key())
    async with aiohttp.ClientSession(base_url=server.make_url("")) as client:
        resp = await client.post(
            "/api/v1/agents", json={"url": agent.url, "id": "ledger"}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
        await everywhere(server, "/api/v1/agents/ledger", lambda got: got.status_code == 200)
        yield Switchboard(server, client)


async def set_credential(switchboard: Switchboard, body: dict[str, Any]) -> None:
    path = "/api/v1/agents/ledger/credentials"
    resp = await switchboard.client.put(path, json=body, headers=AUTH)
    assert resp.status == 200, await resp.text()
    view = await resp.json()
    await everywhere(switchboard.server, path, lambda got: got.json() == view)


async def ask(switchboard: Switchboard, text: str = "balance of account 4711") -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    resp = await switchboard.client.post("/", json=body, headers=CLIENT)
    assert resp.status == 200
    return await resp.json()


def answered(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return reply["result"]["message"]["parts"][0]["text"]


@pytest.mark.in_process  # each worker caches its own token: the counts below are one process's
async def test_oauth2_bearer_token_from_the_token_endpoint(
    switchboard: Switchboard, agent: Agent, tokens: TokenEndpoint
) -> None:
    agent.allows = lambda headers: headers.get("Authorization") == tokens.current
    await set_credential(
        switchboard,
        {
            "kind": "oauth2",
            "token_url": tokens.url,
            "client_id": "ledger-router",
            "client_secret": CLIENT_SECRET,
            "scopes": ["ledger.read"],
        },
    )
    assert answered(await ask(switchboard)) == "ledger: balance of account 4711"
    assert answered(await ask(switchboard)) == "ledger: balance of account 4711"
    assert tokens.issued == 1  # cached
    tokens.issued += 1  # the identity provider revoked tok-1: the agent refuses it now
    assert answered(await ask(switchboard)) == "ledger: balance of account 4711"
    assert [seen["Authorization"] for seen in agent.seen] == [
        "Bearer tok-1",
        "Bearer tok-1",
        "Bearer tok-1",  # refused with 401: the router fetched a fresh token and asked again
        "Bearer tok-3",
    ]
    assert all(CLIENT_TOKEN not in str(seen) for seen in agent.seen)


async def test_static_api_key_and_the_client_authorization_stays_home(
    switchboard: Switchboard, agent: Agent
) -> None:
    agent.allows = lambda headers: headers.get("X-API-Key") == API_KEY
    await set_credential(switchboard, {"kind": "header", "header": "X-API-Key", "value": API_KEY})
    assert answered(await ask(switchboard)) == "ledger: balance of account 4711"
    assert agent.seen[-1]["X-API-Key"] == API_KEY
    assert "Authorization" not in agent.seen[-1]


async def test_forward_client_auth_passes_the_client_authorization(
    switchboard: Switchboard, agent: Agent
) -> None:
    agent.allows = lambda headers: headers.get("Authorization") == CLIENT["Authorization"]
    await set_credential(switchboard, {"forward_client_auth": True})
    assert answered(await ask(switchboard)) == "ledger: balance of account 4711"
    assert agent.seen[-1]["Authorization"] == CLIENT["Authorization"]

    await set_credential(
        switchboard,
        {"kind": "header", "header": "X-API-Key", "value": API_KEY, "forward_client_auth": False},
    )
    reply = await ask(switchboard)
    assert reply["error"]["code"] == -32052
    assert "Authorization" not in agent.seen[-1] and agent.seen[-1]["X-API-Key"] == API_KEY


async def test_without_a_credential_the_agent_refuses_and_the_client_is_told(
    switchboard: Switchboard, agent: Agent
) -> None:
    agent.allows = lambda headers: "Authorization" in headers
    reply = await ask(switchboard)
    error = reply["error"]
    assert error["code"] == -32052 and error["message"] == "Agent ledger is unavailable"
    assert "refused the call" in str(error["data"]) and "outbound credential" in str(error["data"])
    assert len(agent.seen) == 1 and "Authorization" not in agent.seen[0]


async def test_a_token_endpoint_that_refuses_is_a_clear_error(
    switchboard: Switchboard, agent: Agent, tokens: TokenEndpoint
) -> None:
    await set_credential(
        switchboard,
        {
            "kind": "oauth2",
            "token_url": tokens.url,
            "client_id": "ledger-router",
            "client_secret": "wrong-secret",
            "scopes": ["ledger.read"],
        },
    )
    error = (await ask(switchboard))["error"]
    assert error["code"] == -32052
    assert "cannot get an access token" in str(error["data"]) and "invalid_client" in str(
        error["data"]
    )
    assert "wrong-secret" not in str(error)
    assert agent.seen == []  # no call without a token
