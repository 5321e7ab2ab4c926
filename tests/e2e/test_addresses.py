"""Agents' addresses kept in (issue 35): with client authentication on, every answer a plain
caller's key gets (sends, streams, gets, lists, the -32052 of an agent whose address the guard
refuses or that refuses the connection, in both versions and over HTTP+JSON, push payloads,
explain, the catalog's agent views, cards and revisions, the router's cards) is scanned for
the agents' addresses; an admin and a reader still see them (docs/security.md)."""

from __future__ import annotations

import socket
from typing import Any

import httpx
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import create_app
from tests.support.helpers import base, card_v1, make_settings
from tests.support.sdk_peers import PushStore, TaskEchoExecutor, serve_sdk_agent
from tests.support.webhooks import completed_1_0, serve_webhook

ADMIN = {"Authorization": "Bearer admin-secret"}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Seen:
    """Every answer one caller got: status, headers and body, as text."""

    def __init__(self, http: httpx.AsyncClient, server: TestServer, headers: dict[str, str]):
        self.http, self.root, self.headers = http, base(server), headers
        self.answers: list[str] = []

    async def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {**self.headers, **kw.pop("headers", {})}
        answer = await self.http.request(method, self.root + path, headers=headers, **kw)
        self.answers.append(f"{answer.status_code} {dict(answer.headers)} {answer.text}")
        return answer

    async def rpc(
        self, method: str, params: Any, path: str = "/", version: str = "1.0"
    ) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"A2A-Version": version} if version == "1.0" else {}
        answer = await self.call("POST", path, json=body, headers=headers)
        if answer.headers.get("Content-Type", "").startswith("text/event-stream"):
            return {"stream": answer.text}
        return answer.json()

    def leaks(self, needles: list[str]) -> list[str]:
        return [n for n in needles for answer in self.answers if n in answer]


def _message(text: str, version: str = "1.0", **extra: Any) -> dict[str, Any]:
    if version == "0.3":
        parts = [{"kind": "text", "text": text}]
        return {"kind": "message", "role": "user", "messageId": text, "parts": parts, **extra}
    return {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}], **extra}


async def _everything(seen: Seen, webhook: str) -> dict[str, Any]:
    """Every surface, as ``seen``'s caller; some answers, to check they are what they seem."""
    out: dict[str, Any] = {}
    sent = await seen.rpc("SendMessage", {"message": _message("echo please")})
    task = sent["result"]["task"]
    await seen.rpc("SendStreamingMessage", {"message": _message("echo a stream")})
    await seen.rpc("GetTask", {"id": task["id"]})
    await seen.rpc("ListTasks", {})
    await seen.call("GET", f"/tasks/{task['id']}", headers={"A2A-Version": "1.0"})
    for agent in ("trap", "dead"):
        path = f"/agents/{agent}"
        out[agent] = await seen.rpc("SendMessage", {"message": _message("echo x")}, path)
        await seen.rpc("message/send", {"message": _message("echo x", "0.3")}, path, "0.3")
        await seen.rpc("SendStreamingMessage", {"message": _message("echo x")}, path)
        await seen.rpc("message/stream", {"message": _message("echo x", "0.3")}, path, "0.3")
        await seen.call(
            "POST", f"{path}/message:send", json={"message": _message("echo x")},
            headers={"A2A-Version": "1.0"},
        )  # fmt: skip
    pushed = {"url": webhook, "token": "client-token"}
    configured = {"message": _message("echo push"), "configuration": {}}
    configured["configuration"]["taskPushNotificationConfig"] = pushed
    await seen.rpc("SendMessage", configured, "/agents/tasks")
    explained = await seen.call(
        "POST", "/api/v1/route/explain", json={"message": _message("echo x")}
    )
    out["explain"] = explained.json()
    await seen.call("POST", "/api/v1/route/explain", json={"message": _message("weather x")})
    for path in ("/api/v1/agents", "/api/v1/agents?q=weather", "/api/v1/skills"):
        await seen.call("GET", path)
    for agent in ("tasks", "trap", "dead"):
        out[f"{agent}-view"] = (await seen.call("GET", f"/api/v1/agents/{agent}")).json()
        out[f"{agent}-card"] = (await seen.call("GET", f"/api/v1/agents/{agent}/card")).text
        await seen.call("GET", f"/api/v1/agents/{agent}/revisions")
        await seen.call("GET", f"/agents/{agent}/.well-known/agent-card.json")
    await seen.call("GET", "/.well-known/agent-card.json")
    await seen.rpc("GetExtendedAgentCard", {})
    return out


async def test_a_plain_callers_answers_never_name_an_agents_address(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    settings = make_settings(
        sqlite_url, admin_token="admin-secret", client_auth="api-key",
        allow_networks=["127.0.0.1/32"], push_allow_networks=["127.0.0.0/8"],
    )  # fmt: skip
    server = await aiohttp_server(create_app(settings))
    trap_port, dead_port = _closed_port(), _closed_port()
    trap = card_v1(f"http://127.0.0.2:{trap_port}", name="Trap")  # the guard refuses it
    trap["supportedInterfaces"][0]["url"] = f"http://127.0.0.2:{trap_port}/trap-iface"
    dead = card_v1(f"http://127.0.0.1:{dead_port}", name="Dead")  # nobody listens
    async with serve_sdk_agent(executor=TaskEchoExecutor(), push=PushStore()) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        for agent_id, card in (("trap", trap), ("dead", dead)):
            made = await http.post(
                base(server) + "/api/v1/agents", json={"card": card, "id": agent_id}, headers=ADMIN
            )
            assert made.status_code == 201, made.text
        keys = {}
        for subject, roles in (("plain", []), ("auditor", ["reader"])):
            made = await http.post(
                base(server) + "/api/v1/clients",
                json={"subject": subject, "roles": roles},
                headers=ADMIN,
            )
            keys[subject] = made.json()["key"]
        agent_address = agent_url.removeprefix("http://")
        needles = [
            agent_address, f"127.0.0.2:{trap_port}", "127.0.0.2", "trap-iface",
            f"127.0.0.1:{dead_port}",
        ]  # fmt: skip

        plain = Seen(http, server, {"X-API-Key": keys["plain"]})
        out = await _everything(plain, webhook)
        notifications = await hook.until(completed_1_0)
        # what the surfaces answered is what they are for (the scan scans real answers)
        assert out["trap"]["error"]["code"] == out["dead"]["error"]["code"] == -32052
        assert "[address hidden]" in str(out["trap"]["error"])
        assert out["explain"]["candidates"] and "url" not in out["explain"]["candidates"][0]
        tasks = out["tasks-view"]
        assert tasks["interfaces"] and all(
            i["url"].startswith(base(server)) for i in tasks["interfaces"] if "://" in i["url"]
        )
        assert tasks["card"]["url"] == base(server) + "/agents/tasks"
        assert tasks["card"]["signatures"]  # re-signed with the router's key
        assert '"signatures"' in out["tasks-card"] and base(server) in out["tasks-card"]
        assert notifications
        plain.answers += [f"{headers} {body}" for headers, body in notifications]
        assert plain.leaks(needles) == []

        # an admin and a reader keep today's views, addresses and all
        for credential in (ADMIN, {"X-API-Key": keys["auditor"]}):
            privileged = Seen(http, server, credential)
            got = await _everything(privileged, webhook)
            assert "127.0.0.2" in str(got["trap"]["error"])
            assert got["explain"]["candidates"][0]["url"]
            assert agent_address in got["tasks-card"]
            assert agent_address in str(got["tasks-view"]["interfaces"])
            assert privileged.leaks(needles)
