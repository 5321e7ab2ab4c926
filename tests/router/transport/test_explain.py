"""router.transport.explain: ``POST /api/v1/route/explain`` reads the send it explains (its
method, of either version or a legacy dialect, says the version and whether it streams; a
contradicting ``stream`` or ``version`` is a 400) and decides it as the send does, in the
caller's ID space: the owner of a task, the agents of a conversation (real a2a-sdk agents)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from router.app import create_app
from seeds.demo_agents import currency_card, translate_card
from tests.support.helpers import AUTH, make_settings
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

V1_TEXT = {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "convert 100 USD to EUR"}]}
V03_TEXT = {
    "kind": "message",
    "role": "user",
    "messageId": "m",
    "parts": [{"kind": "text", "text": "convert 100 USD to EUR"}],
}
V01_TEXT = {"role": "user", "parts": [{"type": "text", "text": "convert 100 USD to EUR"}]}


@pytest.fixture
async def client(aiohttp_client: Any, sqlite_url: str) -> TestClient:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    for n, (agent_id, card) in enumerate(
        (("currency", currency_card), ("translate", translate_card))
    ):
        body = {"card": card(f"http://127.0.0.1:{9101 + n}/"), "id": agent_id}
        assert (await client.post("/api/v1/agents", json=body, headers=AUTH)).status == 201
    return client


async def _explain(client: TestClient, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    resp = await client.post("/api/v1/route/explain", json=body, headers=headers)
    assert resp.status == 200, await resp.text()
    return await resp.json()


@pytest.mark.parametrize(
    ("method", "message", "version", "stream"),
    [
        ("SendMessage", V1_TEXT, "1.0", False),
        ("SendStreamingMessage", V1_TEXT, "1.0", True),
        ("message/send", V03_TEXT, "0.3", False),
        ("message/stream", V03_TEXT, "0.3", True),
        ("tasks/send", V01_TEXT, "0.3", False),
        ("tasks/sendSubscribe", V01_TEXT, "0.3", True),
        ("A2A.SendMessage", V1_TEXT, "1.0", False),
        ("A2A.SendStreamingMessage", V1_TEXT, "1.0", True),
    ],
)
async def test_the_method_says_the_version_and_whether_it_streams(
    client: TestClient, method: str, message: dict[str, Any], version: str, stream: bool
) -> None:
    out = await _explain(client, {"method": method, "message": message})
    assert (out["method"], out["version"], out["stream"]) == (method, version, stream)
    assert out["choice"]["agent_id"] == "currency" and out["error"] is None
    assert out["threshold"] == 0.5 and out["threshold_source"] == "default"


async def test_without_a_method_the_old_fields_and_the_shape_decide(client: TestClient) -> None:
    out = await _explain(client, {"message": V1_TEXT})
    assert (out["method"], out["version"], out["stream"]) == ("SendMessage", "1.0", False)
    out = await _explain(client, {"message": V03_TEXT})  # the 0.3 shape, no header
    assert (out["method"], out["version"]) == ("message/send", "0.3")
    out = await _explain(client, {"message": V03_TEXT, "stream": True})  # deprecated
    assert (out["method"], out["stream"]) == ("message/stream", True)
    out = await _explain(client, {"message": V1_TEXT, "version": "1.0", "stream": True})
    assert out["method"] == "SendStreamingMessage"
    out = await _explain(client, {"message": V1_TEXT}, **{"A2A-Version": "1.0"})
    assert out["method"] == "SendMessage"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"method": "SendMessage", "stream": True, "message": V1_TEXT}, "invalid_body"),
        ({"method": "message/stream", "stream": False, "message": V03_TEXT}, "invalid_body"),
        ({"method": "SendMessage", "version": "0.3", "message": V1_TEXT}, "invalid_body"),
        ({"method": "GetTask", "message": V1_TEXT}, "invalid_method"),
        ({"method": 7, "message": V1_TEXT}, "invalid_method"),
        ({"method": "SendMessage"}, "invalid_body"),
        ({"message": V1_TEXT, "version": "2.0"}, "invalid_version"),
        ({"message": V1_TEXT, "taskId": ""}, "invalid_body"),
        ({"message": {**V1_TEXT, "taskId": "t-1"}, "taskId": "t-2"}, "invalid_body"),
    ],
)
async def test_a_body_that_contradicts_itself_is_a_400(
    client: TestClient, body: dict[str, Any], code: str
) -> None:
    resp = await client.post("/api/v1/route/explain", json=body)
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == code


async def test_what_the_send_would_refuse_is_the_error(client: TestClient) -> None:
    bad = {"method": "SendMessage", "message": {"role": "user", "messageId": "m", "parts": []}}
    out = await _explain(client, bad)
    assert out["choice"] is None and out["error"]["code"] == -32602  # the send's reader's
    unknown = {"method": "SendMessage", "message": V1_TEXT, "taskId": "t1.nope"}
    out = await _explain(client, unknown)
    assert out["error"]["code"] == -32001 and out["task"] == {"taskId": "t1.nope"}


@pytest.fixture
async def echoes() -> AsyncIterator[dict[str, tuple[str, TaskEchoExecutor]]]:
    """Two a2a-sdk agents with the same skill: words cannot tell them apart."""
    found: dict[str, tuple[str, TaskEchoExecutor]] = {}
    a, b = TaskEchoExecutor(), TaskEchoExecutor()
    async with serve_sdk_agent(executor=a) as url_a, serve_sdk_agent(executor=b) as url_b:
        found["echo-a"], found["echo-b"] = (url_a, a), (url_b, b)
        yield found


async def test_explain_resolves_the_task_and_the_conversation_in_the_callers_scope(
    aiohttp_client: Any, sqlite_url: str, echoes: dict[str, tuple[str, TaskEchoExecutor]]
) -> None:
    settings = make_settings(sqlite_url, client_auth="api-key")
    client = await aiohttp_client(create_app(settings))
    for agent_id, (url, _) in echoes.items():
        made = await client.post("/api/v1/agents", json={"url": url, "id": agent_id}, headers=AUTH)
        assert made.status == 201, await made.text()
    keys = {}
    for name in ("alice", "bob"):
        made = await client.post("/api/v1/clients", json={"subject": name}, headers=AUTH)
        keys[name] = {"X-API-Key": (await made.json())["key"], "A2A-Version": "1.0"}

    def message(text: str, **extra: Any) -> dict[str, Any]:
        return {"role": "ROLE_USER", "messageId": text, "parts": [{"text": text}], **extra}

    hint = {"urn:a2a-switchboard:routing:v1": {"agent": "echo-b"}}
    first = {"message": message("echo this", metadata=hint)}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": first}
    task = (await (await client.post("/", json=rpc, headers=keys["alice"])).json())["result"]
    task_id, context_id = task["task"]["id"], task["task"]["contextId"]

    # a new message: a tie by words, broken by id; in the conversation, by who serves it
    alone = await _explain(client, {"message": message("echo that")}, **keys["alice"])
    assert alone["choice"]["agent_id"] == "echo-a" and alone["context_agents"] == []
    body = {"message": message("echo that"), "contextId": context_id}
    within = await _explain(client, body, **keys["alice"])
    assert within["context_agents"] == ["echo-b"] and within["choice"]["agent_id"] == "echo-b"
    rpc["params"] = {"message": message("echo that", contextId=context_id)}
    sent = await (await client.post("/", json=rpc, headers=keys["alice"])).json()
    assert "result" in sent and echoes["echo-b"][1].messages[-1]["parts"][0]["text"] == "echo that"

    # a message continuing the task: its owner, as the send
    body = {"method": "SendStreamingMessage", "message": message("more"), "taskId": task_id}
    owned = await _explain(client, body, **keys["alice"])
    assert owned["task"] == {"taskId": task_id, "agent": "echo-b"}
    assert (owned["choice"]["agent_id"], owned["choice"]["tier"]) == ("echo-b", "task")
    hinted = {**body, "message": message("more", metadata={**hint})}
    hinted["message"]["metadata"]["urn:a2a-switchboard:routing:v1"] = {"agent": "echo-a"}
    assert (await _explain(client, hinted, **keys["alice"]))["error"]["code"] == -32051
    # another caller's task and conversation are not his
    stranger = await _explain(client, body, **keys["bob"])
    assert stranger["choice"] is None and stranger["error"]["code"] == -32001
    body = {"message": message("echo that"), "contextId": context_id}
    assert (await _explain(client, body, **keys["bob"]))["context_agents"] == []
