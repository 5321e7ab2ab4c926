"""``SWITCHBOARD_OUTBOUND_PROXY``: every kind of outbound request of a whole Switchboard goes
through a real forward proxy process on loopback (tests/support/proxy.py), and none around it
unless ``SWITCHBOARD_OUTBOUND_NO_PROXY`` lists its host.

"The outside" is one aiohttp server on 127.0.0.1 that plays every party Switchboard calls:
an agent's card and JSON-RPC endpoint, an HTTP+JSON agent, a JWKS, the JWKS a card's ``jku``
names, an OAuth2 token endpoint, a client's webhook, an embeddings endpoint and a chat model
for the adjudicator. It records the peer address of every request: the proxy's connections
leave from 127.0.0.9, so a request from anywhere else went around the proxy. A second server
on 127.0.0.5, in the no-proxy list, must be reached directly. The proxy itself listens on
127.0.0.3, outside the allowed networks (its own address is not judged), and asks for
credentials, which no log record may show. gRPC agents, the gRPC health probe, the OIDC
issuer and ``models fetch`` through the proxy: test_upstream_grpc.py, test_crawler.py,
test_idpkeys.py and test_routing.py (cli).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from cryptography.fernet import Fernet

from registry.jwkeys import generate_key
from registry.signatures import sign_card
from router.app import create_app
from router.choose.adjudicator import Option
from router.push.configs import PushConfig
from router.transport.routes import ROUTER
from tests.support.helpers import AUTH, make_settings
from tests.support.proxy import running_proxy
from tests.support.streams import within

SOURCE = "127.0.0.9"  # where the proxy's connections to targets come from
PASSWORD = "s3cr:t-pass"  # in the proxy URL as s3cr%3At-pass
TASK = {"id": "up-1", "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED"}}
SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
}


def agent_card(base: str, path: str, binding: str = "JSONRPC") -> dict[str, Any]:
    """A 1.0 card of one skill whose only interface is ``base + path``."""
    return {
        "name": f"Agent at {path}",
        "description": "Answers everything with a completed task.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {"url": base + path, "protocolBinding": binding, "protocolVersion": "1.0"}
        ],
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["echo"]}],
    }


class Outside:
    """Every party Switchboard calls, on one server; each request's path and peer kept."""

    def __init__(self, token: str | None = None) -> None:
        self.wanted = token  # the bearer token its JSON-RPC endpoint wants, if any
        self.seen: list[tuple[str, str]] = []
        self.hooked: list[Any] = []
        self.hook_arrived = asyncio.Event()
        self.keys = generate_key("ES256", kid="anchor")
        self.jku_key = generate_key("ES256", kid="card-key")
        self.server: TestServer | None = None

    @property
    def base(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/a/.well-known/agent-card.json", self.card)
        app.router.add_post("/a/rpc", self.rpc)
        app.router.add_post("/rest/message:send", self.rest)
        app.router.add_get("/rest", self.rest_probe)
        app.router.add_get("/keys/jwks.json", self.jwks)
        app.router.add_get("/jku/jwks.json", self.jwks)
        app.router.add_post("/token", self.token)
        app.router.add_post("/hook", self.hook)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.seen.append((request.path, request.remote or ""))
        return await handler(request)

    async def card(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        return web.json_response(agent_card(base, "/a/rpc"))

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        if self.wanted and request.headers.get("Authorization") != f"Bearer {self.wanted}":
            return web.Response(status=401)
        body = await request.json()
        answer = {"jsonrpc": "2.0", "id": body["id"], "result": {"task": TASK}}
        if body["method"] != "SendStreamingMessage":
            return web.json_response(answer)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(f"data: {json.dumps(answer)}\n\n".encode())
        return stream

    async def rest(self, request: web.Request) -> web.Response:
        return web.json_response({"task": TASK})

    async def rest_probe(self, request: web.Request) -> web.Response:
        return web.Response(status=405)

    async def jwks(self, request: web.Request) -> web.Response:
        key = self.keys if request.path.startswith("/keys") else self.jku_key
        return web.json_response({"keys": [json.loads(key.export_public())]})

    async def token(self, request: web.Request) -> web.Response:
        return web.json_response({"access_token": "tok-1", "token_type": "Bearer"})

    async def hook(self, request: web.Request) -> web.Response:
        self.hooked.append(await request.json())
        self.hook_arrived.set()
        return web.Response(status=204)

    async def embeddings(self, request: web.Request) -> web.Response:
        texts = (await request.json())["input"]
        rows = [
            {"index": n, "embedding": [b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]]}
            for n, t in enumerate(texts)
        ]
        return web.json_response({"data": rows})

    async def chat(self, request: web.Request) -> web.Response:
        content = json.dumps({"choice": 1, "reason": "it fits"})
        return web.json_response({"choices": [{"message": {"content": content}}]})


@pytest.fixture
async def outside(aiohttp_server: Any) -> Outside:
    world = Outside(token="tok-1")
    world.server = await aiohttp_server(world.app())
    return world


@pytest.mark.parametrize("upstream_client", ["lean", "aiohttp"])
async def test_every_outbound_request_goes_through_the_proxy(
    upstream_client: str,
    aiohttp_server: Any,
    aiohttp_client: Any,
    outside: Outside,
    sqlite_url: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    direct = Outside()
    direct.server = await aiohttp_server(direct.app(), host="127.0.0.5")
    base = outside.base
    async with running_proxy(
        tmp_path, user="sb", password=PASSWORD, source=SOURCE, host="127.0.0.3"
    ) as proxy:
        settings = make_settings(
            sqlite_url,
            outbound_proxy=proxy.url.replace("://", "://sb:s3cr%3At-pass@"),
            outbound_no_proxy=["127.0.0.5"],
            allow_networks=["127.0.0.1/32", "127.0.0.5/32"],
            push_allow_networks=["127.0.0.1/32"],
            trusted_jku=[f"{base}/jku"],
            secret_key=Fernet.generate_key().decode(),
            matcher="semantic",
            embeddings_url=f"{base}/v1",
            embeddings_model="tiny",
            router_llm_url=f"{base}/v1",
            router_llm_model="judge",
            upstream_client=upstream_client,  # JSON-RPC calls on Switchboard's client or aiohttp's
        )
        client: TestClient = await aiohttp_client(create_app(settings))
        answers = await _every_kind(client, outside, direct)
        entries = proxy.entries()

    # the answers were right: each call reached its agent
    states = [answer["result"]["task"]["status"]["state"] for answer in answers]
    assert states == ["TASK_STATE_COMPLETED"] * 4
    targets = {entry["target"] for entry in entries}
    for url in (
        f"{base}/a/.well-known/agent-card.json",  # a card crawled, and refreshed
        f"{base}/keys/jwks.json",  # a trusted JWKS URL
        f"{base}/jku/jwks.json",  # a card's jku
        f"{base}/token",  # an OAuth2 token for the agent
        f"{base}/a/rpc",  # JSON-RPC calls and streams
        f"{base}/rest/message:send",  # HTTP+JSON
        f"{base}/rest",  # the health probe of a pushed agent
        f"{base}/hook",  # a push delivery
        f"{base}/v1/embeddings",  # the embeddings endpoint
        f"{base}/v1/chat/completions",  # the adjudicator
    ):
        assert url in targets, (url, sorted(targets))
    assert {entry["auth"] for entry in entries} == {"ok"}
    assert outside.seen and {peer for _, peer in outside.seen} == {SOURCE}  # none around it
    assert direct.seen and SOURCE not in {peer for _, peer in direct.seen}
    assert not [t for t in targets if "127.0.0.5" in t or "127.0.0.6" in t]
    for record in caplog.records:
        text = f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
        assert "s3cr" not in text and "t-pass" not in text, text


async def _every_kind(client: TestClient, outside: Outside, direct: Outside) -> list[Any]:
    """Make Switchboard send every kind of outbound request; the four calls' answers."""
    base = outside.base
    crawled = {"url": f"{base}/a", "id": "a"}
    registered = await client.post("/api/v1/agents", json=crawled, headers=AUTH)
    assert registered.status == 201, await registered.text()
    anchor = {"jwks_url": f"{base}/keys/jwks.json"}
    key = await client.post("/api/v1/keys", json=anchor, headers=AUTH)
    assert key.status == 201, await key.text()
    rest_card = agent_card(base, "/rest", "HTTP+JSON")
    signed = sign_card(rest_card, outside.jku_key, jku=f"{base}/jku/jwks.json")
    pushed = await client.post("/api/v1/agents", json={"card": signed, "id": "rest"}, headers=AUTH)
    assert pushed.status == 201, await pushed.text()
    assert (await pushed.json())["verification"]["status"] == "verified"
    credential = {"kind": "oauth2", "token_url": f"{base}/token", "client_id": "sb",
                  "client_secret": "client-secret"}  # fmt: skip
    put = await client.put("/api/v1/agents/a/credentials", json=credential, headers=AUTH)
    assert put.status in (200, 201), await put.text()
    other = await client.post(
        "/api/v1/agents", json={"url": f"{direct.base}/a", "id": "near"}, headers=AUTH
    )
    assert other.status == 201, await other.text()
    refused = agent_card("http://127.0.0.6:9", "/rpc")
    away = await client.post("/api/v1/agents", json={"card": refused, "id": "away"}, headers=AUTH)
    assert away.status == 201, await away.text()

    version = {"A2A-Version": "1.0"}
    answers = []
    for agent in ("a", "rest"):
        resp = await client.post(f"/agents/{agent}", json=SEND, headers=version)
        answers.append(await resp.json())
    stream = {**SEND, "method": "SendStreamingMessage"}
    resp = await client.post("/agents/a", json=stream, headers=version)
    events = [line for line in (await resp.text()).splitlines() if line.startswith("data:")]
    answers.append(json.loads(events[0].removeprefix("data:")))
    resp = await client.post("/agents/near", json=SEND, headers=version)
    answers.append(await resp.json())
    resp = await client.post("/agents/away", json=SEND, headers=version)
    refusal = (await resp.json())["error"]
    assert refusal["code"] == -32052 and "127.0.0.6" in json.dumps(refusal), refusal

    checks = {"ids": ["a", "rest"]}  # a card fetched again, a pushed agent's endpoint probed
    checked = await client.post("/api/v1/refresh", json=checks, headers=AUTH)
    assert checked.status == 200, await checked.text()
    assert not (await checked.json()).get("failed"), await checked.text()
    router = client.app[ROUTER]
    config = PushConfig(
        receiver_key="k", receiver_token="t", task_id="task-1", config_id="c1", scope="",
        agent_id="a", version="1.0", url=f"{base}/hook",
    )  # fmt: skip
    await router.outbox.enqueue(config, {"statusUpdate": {"taskId": "task-1"}})
    await router.outbox.deliver_due()  # or the outbox's own loop, woken by the enqueue
    await within(outside.hook_arrived.wait(), 15)
    adjudicator = router.chooser.adjudicator
    assert adjudicator is not None
    option = Option("a", "echo", "Echo", "Echoes", 0.5)
    assert (await adjudicator.adjudicate("hi", [option])).outcome == "picked"
    return answers
