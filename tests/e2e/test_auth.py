"""Who is calling, end to end: API keys and JWTs on the A2A endpoints, tasks isolated per
principal and tenant, policies shaping routing and the cards, with real a2a-sdk clients and
agents (docs/security.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.auth.interceptor import AuthInterceptor

from registry.api import REGISTRY
from tests.peers03 import client03_lines
from tests.support.helpers import base
from tests.support.issuer import serve_issuer
from tests.support.sdk_clients import Keys, answer, ask, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent
from tests.support.served import everywhere

ADMIN = {"Authorization": "Bearer admin-secret"}


async def _switchboard(start_router: Any, database_url: str, **settings: Any) -> Any:
    settings.setdefault("client_auth", "api-key")
    return await start_router(database_url, admin_token="admin-secret", **settings)


async def _key(http: httpx.AsyncClient, server: Any, subject: str, **fields: Any) -> str:
    answer = await http.post(
        base(server) + "/api/v1/clients", json={"subject": subject, **fields}, headers=ADMIN
    )
    assert answer.status_code == 201, answer.text
    return answer.json()["key"]


async def _rpc(
    http: httpx.AsyncClient, url: str, method: str, params: Any, key: str | None
) -> httpx.Response:
    headers = {"A2A-Version": "1.0"}
    if key is not None:
        headers["X-API-Key"] = key
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await http.post(url, json=body, headers=headers)


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {"message": {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}], **extra}}


async def test_api_key_callers_are_isolated_and_the_sdk_authenticates_from_the_card(
    start_router: Any, db_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(start_router, db_url)
    url = base(server) + "/"
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        alice = await _key(http, server, "alice", tenant="acme")
        bob = await _key(http, server, "bob", tenant="globex")

        # no or bad credentials: 401 with WWW-Authenticate and -32054
        for key in (None, "sbk_nope_nope", "garbage"):
            refused = await _rpc(http, url, "SendMessage", _message("hello"), key)
            assert refused.status_code == 401 and "WWW-Authenticate" in refused.headers
            assert refused.json()["error"]["code"] == -32054

        # the card says how to authenticate; the SDK's auth interceptor reads it
        card = await A2ACardResolver(http, base(server)).get_agent_card()
        assert "apiKey" in card.security_schemes and card.capabilities.extended_agent_card
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=False))
        client = factory.create(card, [AuthInterceptor(Keys(apiKey=alice))])
        task = await send(client, ask("echo hello there"))  # "hello there" alone: no content
        assert "hello there" in answer(task)

        # another principal: the task and its context do not exist for it
        for method, params in (
            ("GetTask", {"id": task.id}),
            ("CancelTask", {"id": task.id}),
            ("SubscribeToTask", {"id": task.id}),
            ("SendMessage", _message("more", taskId=task.id)),
        ):
            got = (await _rpc(http, url, method, params, bob)).json()
            assert got["error"]["code"] == -32001, (method, got)
        mine = (await _rpc(http, url, "GetTask", {"id": task.id}, alice)).json()
        assert mine["result"]["id"] == task.id
        listed = (await _rpc(http, url, "ListTasks", {}, bob)).json()["result"]
        assert listed["tasks"] == [] and listed["totalSize"] == 0
        listed = (await _rpc(http, url, "ListTasks", {}, alice)).json()["result"]
        assert [t["id"] for t in listed["tasks"]] == [task.id]

        # the same context ID chosen by two callers: two conversations
        first = (
            await _rpc(
                http, url, "SendMessage", _message("hello from alice", contextId="c-1"), alice
            )
        ).json()
        second = (
            await _rpc(http, url, "SendMessage", _message("hello from bob", contextId="c-1"), bob)
        ).json()
        assert "result" in first and "result" in second, (first, second)
        tasks = [first["result"]["task"], second["result"]["task"]]
        assert tasks[0]["contextId"] == tasks[1]["contextId"] == "c-1"
        mine = (await _rpc(http, url, "GetTask", {"id": tasks[1]["id"]}, alice)).json()
        assert mine["error"]["code"] == -32001

        # a revoked key is refused at once
        key_id = alice.split("_")[1]
        revoked = await http.delete(base(server) + f"/api/v1/clients/{key_id}", headers=ADMIN)
        assert revoked.status_code in (200, 204), revoked.text
        refused = await _rpc(http, url, "GetTask", {"id": task.id}, alice)
        assert refused.status_code == 401

    # after a restart (a new app on the same database) bob still cannot see alice's task
    again = await _switchboard(start_router, db_url)
    got = (await _rpc(http, base(again) + "/", "GetTask", {"id": task.id}, bob)).json()
    assert got["error"]["code"] == -32001


async def test_policies_shape_routing_cards_and_the_catalog(
    start_router: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(start_router, sqlite_url)
    url = base(server) + "/"
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "secret-echo")
        policy = {"tenant": "acme", "rules": [{"groups": ["finance"]}]}
        put = await http.put(
            base(server) + "/api/v1/policies/secret-echo", json=policy, headers=ADMIN
        )
        assert put.status_code == 200, put.text
        await everywhere(
            server, "/api/v1/policies/secret-echo", lambda got: got.json() == put.json()
        )
        finance = await _key(http, server, "fin", tenant="acme", groups=["finance"])
        other = await _key(http, server, "dev", tenant="acme", groups=["dev"])

        sent = (await _rpc(http, url, "SendMessage", _message("echo this"), finance)).json()
        assert "result" in sent, sent
        refused = (await _rpc(http, url, "SendMessage", _message("echo this"), other)).json()
        assert refused["error"]["code"] == -32050
        assert "secret-echo" not in str(refused)  # a hidden agent is never named
        pinned = (
            await _rpc(http, url + "agents/secret-echo", "SendMessage", _message("x"), other)
        ).json()
        unknown = (
            await _rpc(http, url + "agents/no-such", "SendMessage", _message("x"), other)
        ).json()
        # the answer for a hidden agent is the one for an unknown id (each names the id sent)
        hidden_said = str(pinned["error"]).replace("secret-echo", "no-such")
        assert hidden_said == str(unknown["error"])

        # the router's card, the extended card and the catalog show what each may use
        def skills(card: dict[str, Any]) -> list[str]:
            return [s["id"] for s in card.get("skills", [])]

        for key, seen in ((finance, ["sdk-echo"]), (other, [])):
            card = await http.get(url + ".well-known/agent-card.json", headers={"X-API-Key": key})
            assert skills(card.json()) == seen
            assert card.headers["Cache-Control"].startswith("private")  # per caller
            assert "X-API-Key" in card.headers["Vary"]
            extended = (await _rpc(http, url, "GetExtendedAgentCard", {}, key)).json()
            assert skills(extended["result"]) == seen
            listing = await http.get(base(server) + "/api/v1/agents", headers={"X-API-Key": key})
            assert [a["id"] for a in listing.json()["agents"]] == (["secret-echo"] if seen else [])
        hidden = await http.get(
            base(server) + "/api/v1/agents/secret-echo", headers={"X-API-Key": other}
        )
        assert hidden.status_code == 404
        public = await http.get(url + ".well-known/agent-card.json")
        assert skills(public.json()) == []


async def test_an_sdk_03_client_authenticates_from_the_card(
    start_router: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    server = await _switchboard(start_router, sqlite_url)
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        key = await _key(http, server, "dora", tenant="acme")
        sent = await client03_lines(
            sdk03_python, base(server), "send", text="echo this please", credential=f"apiKey={key}"
        )
        assert sent[-1].get("kind") == "task", sent
        refused = await client03_lines(sdk03_python, base(server), "send", text="echo this")
        assert refused[-1]["error"].get("status") == 401, refused


@pytest.mark.parametrize("discovery", [True, False])
async def test_jwt_callers(
    aiohttp_server: Any,
    start_router: Any,
    sqlite_url: str,
    http: httpx.AsyncClient,
    discovery: bool,
) -> None:
    issuer = await serve_issuer(aiohttp_server)
    server = await _switchboard(start_router, sqlite_url, **issuer.settings(discovery=discovery))
    url = base(server) + "/"
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        good = issuer.token(sub="carol", tenant="acme")

        async def call(token: str) -> httpx.Response:
            headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": _message("echo this please"),
            }
            return await http.post(url, json=body, headers=headers)

        assert "result" in (await call(good)).json()
        # a 1.0 request acts in the caller's own tenant only
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {good}"}
        for tenant, answered in (("acme", "result"), ("globex", "error")):
            params = {**_message("echo this please"), "tenant": tenant}
            body = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": params}
            got = (await http.post(url, json=body, headers=headers)).json()
            assert answered in got, got
            if answered == "error":
                assert got["error"]["code"] == -32602 and "globex" not in got["error"]["message"]
        # the admin API's roles come from the token's roles claim
        policy = base(server) + "/api/v1/policies/tasks"
        for roles, status in ((["admin"], 200), ([], 403)):
            token = issuer.token(sub="ops", roles=roles)
            answer = await http.put(
                policy, json={"tenant": None}, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code == status, answer.text
        for bad in (
            issuer.token(sub="carol", exp=int(time.time()) - 3600),
            issuer.token(sub="carol", aud="someone-else"),
            issuer.token(sub="carol", iss="https://evil.example"),
        ):
            refused = await call(bad)
            assert refused.status_code == 401, refused.text
            assert refused.json()["error"]["code"] == -32054
