"""Version translation at its edges, through the real router, with scripted agents (real HTTP
servers on 127.0.0.1 that answer exactly what a case needs) and the a2a-sdk 0.3 echo agent:

- an error event in the middle of a translated stream;
- IDs nested in a 0.3 agent's error ``data`` (rewritten before they become 1.0 strings);
- the agent's activated-extensions header, back under the client version's name;
- ``historyLength: 0`` from a 1.0 client to a 0.3 agent (no history comes back);
- the tenant of a 1.0 agent's interface, set for a 0.3 client's call;
- a non-object 1.0 data part through a 0.3 agent and back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.compat.carry import CARRY_KEY
from tests.peers03 import agent03
from tests.support.helpers import card_v03, card_v1
from tests.support.served import serve_router

UP_TASK, UP_CONTEXT = "up-task-0001", "up-context-0001"
V1_HEADERS = {"A2A-Version": "1.0"}


class Scripted:
    """A 0.3 agent (``/v03``) and a 1.0 agent with a tenant (``/v1``) on one server; every
    JSON-RPC request they get is kept in :attr:`requests` (method, params, headers)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.server: TestServer | None = None

    def url(self, path: str) -> str:
        assert self.server is not None
        return str(self.server.make_url(path))

    async def card(self, request: web.Request) -> web.Response:
        if request.match_info["agent"] == "v03":
            card = card_v03(self.url("/v03"), name="Scripted 0.3", capabilities={"streaming": True})
        else:
            card = card_v1(self.url("/v1"), name="Scripted 1.0")
            card["supportedInterfaces"][0]["tenant"] = "acme"
        return web.json_response(card)

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(
            {"method": body["method"], "params": body["params"], "headers": dict(request.headers)}
        )
        answer = {"jsonrpc": "2.0", "id": body["id"]}
        method = body["method"]
        if method == "SendMessage":
            task = {"id": "up1-task-0001", "contextId": "up1-context-01"}
            task["status"] = {"state": "TASK_STATE_COMPLETED"}
            return web.json_response({**answer, "result": {"task": task}})
        if method == "message/send":
            message = body["params"]["message"]
            task = {
                "kind": "task",
                "id": UP_TASK,
                "contextId": UP_CONTEXT,
                "status": {"state": "completed"},
                "history": [{**message, "taskId": UP_TASK, "contextId": UP_CONTEXT}],
                "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "ok"}]}],
            }
            headers = {"X-A2A-Extensions": "urn:ext:send"}
            return web.json_response({**answer, "result": task}, headers=headers)
        if method == "tasks/get":  # IDs nested in the error's data
            error = {
                "code": -32001,
                "message": f"Task {UP_TASK} is gone",
                "data": {
                    "task": {"id": UP_TASK, "contextId": UP_CONTEXT},
                    "history": [{"contextId": UP_CONTEXT}],
                },
            }
            return web.json_response({**answer, "error": error})
        assert method == "message/stream", method
        response = web.StreamResponse(headers={"X-A2A-Extensions": "urn:ext:stream"})
        response.content_type = "text/event-stream"
        await response.prepare(request)
        task_id, context_id = "up-task-0002", "up-context-0002"
        events = [
            {
                "kind": "task",
                "id": task_id,
                "contextId": context_id,
                "status": {"state": "submitted"},
            },
            {
                "kind": "status-update",
                "taskId": task_id,
                "contextId": context_id,
                "status": {"state": "working"},
                "final": False,
            },
        ]
        for event in events:
            data = json.dumps({**answer, "result": event})
            await response.write(f"data: {data}\r\n\r\n".encode())
        error = {"code": -32603, "message": "the model failed", "data": {"taskId": task_id}}
        await response.write(f"data: {json.dumps({**answer, 'error': error})}\r\n\r\n".encode())
        await response.write_eof()
        return response


@pytest.fixture
async def scripted(aiohttp_server: Any) -> Scripted:
    agents = Scripted()
    app = web.Application()
    app.router.add_get("/{agent}/.well-known/agent-card.json", agents.card)
    app.router.add_post("/v03/rpc", agents.rpc)
    app.router.add_post("/v1/a2a", agents.rpc)
    agents.server = await aiohttp_server(app)
    return agents


@pytest.fixture
async def router(aiohttp_server: Any, sqlite_url: str, scripted: Scripted) -> AsyncIterator[Any]:
    """The ``router`` of tests/e2e/conftest.py (with workers: served) with the scripted
    agents registered."""
    async with serve_router(aiohttp_server, sqlite_url) as server:
        registry = server.app[REGISTRY]
        await registry.register_url(scripted.url("/v03"), "scripted03")
        await registry.register_url(scripted.url("/v1"), "scripted1")
        yield server


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


def _message(version: str, text: str) -> dict[str, Any]:
    if version == "1.0":
        return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}
    return {
        "kind": "message",
        "messageId": "m-1",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }


async def rpc(
    http: aiohttp.ClientSession,
    url: str,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[dict[str, Any], Any]:
    """One JSON-RPC call: its answer and its response headers."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(url, json=body, headers=headers) as resp:
        return await resp.json(), resp.headers


async def test_v1_client_and_a_03_agents_answers(
    router: TestServer, scripted: Scripted, http: aiohttp.ClientSession
) -> None:
    """historyLength 0 gives no history; the agent's X-A2A-Extensions comes back as
    A2A-Extensions; IDs nested in the agent's error data are router IDs, never the agent's."""
    url = str(router.make_url("/agents/scripted03"))
    params = {"message": _message("1.0", "hi"), "configuration": {"historyLength": 0}}
    headers = {**V1_HEADERS, "A2A-Extensions": "urn:ext:send"}
    sent, sent_headers = await rpc(http, url, "SendMessage", params, headers)
    task = sent["result"]["task"]
    assert "history" not in task and task["artifacts"][0]["parts"] == [{"text": "ok"}]
    assert sent_headers["A2A-Extensions"] == "urn:ext:send"
    assert "X-A2A-Extensions" not in sent_headers
    [send] = [r for r in scripted.requests if r["method"] == "message/send"]
    assert "historyLength" not in send["params"].get("configuration", {})
    assert send["headers"]["X-A2A-Extensions"] == "urn:ext:send"  # renamed for the 0.3 agent

    got, _ = await rpc(http, url, "GetTask", {"id": task["id"]}, V1_HEADERS)
    error = got["error"]
    text = json.dumps(error)
    assert UP_TASK not in text and UP_CONTEXT not in text, error
    info = error["data"][0]
    assert info["domain"] == "a2a-protocol.org" and info["reason"] == "TASK_NOT_FOUND"
    assert json.loads(info["metadata"]["task"]) == {
        "id": task["id"],
        "contextId": task["contextId"],
    }
    # the router lists the task, so the agent forgot it: the router says so
    assert info["metadata"]["agentMessage"] == f"Task {task['id']} is gone"
    assert info["metadata"]["reason"] == "OWNER_FORGOT_TASK"
    assert error["message"].startswith("Task not found: the agent 'scripted03' that owns task")


async def test_an_error_event_in_the_middle_of_a_translated_stream(
    router: TestServer, scripted: Scripted, http: aiohttp.ClientSession
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendStreamingMessage",
        "params": {"message": _message("1.0", "go")},
    }
    url = str(router.make_url("/agents/scripted03"))
    async with http.post(url, json=body, headers=V1_HEADERS) as resp:
        assert resp.headers["A2A-Extensions"] == "urn:ext:stream"
        lines = [raw.decode().rstrip("\r\n") async for raw in resp.content]
    kinds = [line for line in lines if line.startswith("event:")]
    events = [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]
    assert [list(e.get("result", {"error": 0})) for e in events] == [
        ["task"],
        ["statusUpdate"],
        ["error"],
    ]
    task_id = events[0]["result"]["task"]["id"]
    assert events[1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
    error = events[2]["error"]
    assert error["code"] == -32603 and kinds == ["event: error"]  # as 1.x servers mark it
    assert error["data"][0]["metadata"] == {"taskId": task_id}  # the router's ID
    assert "up-task-0002" not in json.dumps(events)


async def test_03_client_to_a_v1_agent_with_a_tenant(
    router: TestServer, scripted: Scripted, http: aiohttp.ClientSession
) -> None:
    url = str(router.make_url("/agents/scripted1"))
    sent, _ = await rpc(http, url, "message/send", {"message": _message("0.3", "hi")})
    assert sent["result"]["kind"] == "task", sent
    assert sent["result"]["status"]["state"] == "completed"
    [call] = [r for r in scripted.requests if r["method"] == "SendMessage"]
    assert call["params"]["tenant"] == "acme"  # the interface's tenant, set for the agent
    assert call["headers"]["A2A-Version"] == "1.0"


async def test_a_non_object_v1_data_part_through_a_03_agent(
    start_router: Any, sqlite_url: str, sdk03_python: Path, http: aiohttp.ClientSession
) -> None:
    """A 1.0 data part whose value is a list reaches an a2a-sdk 0.3 agent as the SDK's
    ``data_part_compat`` wrapping and comes back to the 1.0 client as the list."""
    router = await start_router(sqlite_url)
    async with agent03(sdk03_python, echo_parts=True) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "echo03")
        message = {
            "messageId": "m-2",
            "role": "ROLE_USER",
            "parts": [{"text": "echo data"}, {"data": [1, "two", None]}],
        }
        headers = {**V1_HEADERS, "A2A-Extensions": "urn:x:1"}
        sent, _ = await rpc(
            http, str(router.make_url("/")), "SendMessage", {"message": message}, headers
        )
        [execution] = await agent.wait_for("executions")
        posted = [r for r in await agent.wait_for("requests", 1) if r["method"] == "POST"]
    assert execution["message"]["parts"][1] == {
        "kind": "data",
        "data": {"value": [1, "two", None]},
        "metadata": {"data_part_compat": True},
    }
    assert posted[0]["headers"]["x-a2a-extensions"] == "urn:x:1"  # a 1.x client's header
    [echoed] = [a for a in sent["result"]["task"]["artifacts"] if a["artifactId"] == "parts"]
    assert echoed["parts"] == [{"data": [1, "two", None]}]
    assert CARRY_KEY not in json.dumps(sent)
