"""JSON-RPC ids that are any finite number, and NUL (``\\u0000``) in A2A bodies, through the
whole app to an agent and back, in every binding (JSON-RPC, HTTP+JSON, gRPC) and both
versions, on each test database (a NUL stored in a text column fails on PostgreSQL).

The cases come from the fuzz of issue 35: ids ``1.5``, ``1e+308``, ``-0.0``, ``1e-300`` and a
big integer are echoed as sent (the agent gets a stand-in); ``1e400`` is -32600 and ``NaN``
-32700, both with ``id: null``; NUL in text parts, data parts and metadata reaches the agent
and comes back escaped, in JSON and in SSE; NUL in each value the router stores is -32602
naming the field, with the request's id, and the agent is never called.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from router.app import create_app
from router.transport.routes import GRPC_ENDPOINT
from tests.support.helpers import AUTH, card_v1, make_settings

grpc = pytest.importorskip("grpc")
a2a_pb2 = pytest.importorskip("a2a.types.a2a_pb2")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")
from google.protobuf import json_format  # noqa: E402  (with the grpc extra)
from google.rpc import error_details_pb2, status_pb2  # noqa: E402

NUL = "\x00"
TEXT = f"before{NUL}after"
DATA = {f"k{NUL}": [f"v{NUL}", 1]}
META = {"note": f"m{NUL}m"}
V1 = {"A2A-Version": "1.0"}


class EchoAgent:
    """A 1.0 JSON-RPC agent answering a Task whose artifact holds the message's parts and
    whose metadata is the message's; it streams the same as three events. It records the
    JSON-RPC ids it was sent."""

    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.numbers = itertools.count(1)
        self.tasks: dict[str, dict[str, Any]] = {}
        self.task_id: str | None = None  # when set, the ID its next tasks get

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/a2a", self.rpc)
        return app

    def task(self, message: dict[str, Any], state: str) -> dict[str, Any]:
        n = next(self.numbers)
        task = {
            "id": self.task_id or f"up-{n}",
            "contextId": f"upctx-{n}",
            "status": {"state": state},
            "history": [message],
            "artifacts": [{"artifactId": "echo", "parts": message["parts"]}],
            "metadata": message.get("metadata", {}),
        }
        self.tasks[task["id"]] = task
        return task

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.ids.append(body["id"])
        if body["method"] == "GetTask":
            task = self.tasks[body["params"]["id"]]
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": task})
        message = body["params"]["message"]
        if body["method"] == "SendMessage":
            task = self.task(message, "TASK_STATE_COMPLETED")
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {"task": task}})
        task = self.task(message, "TASK_STATE_WORKING")
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        events = [
            {"task": task},
            {"artifactUpdate": {**ids, "artifact": task["artifacts"][0]}},
            {"statusUpdate": {**ids, "status": {"state": "TASK_STATE_COMPLETED"}}},
        ]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": event})
            await response.write(f"data: {data}\r\n\r\n".encode())
        await response.write_eof()
        return response


@pytest.fixture
async def agent(aiohttp_server: Any) -> AsyncIterator[tuple[EchoAgent, TestServer]]:
    echo = EchoAgent()
    yield echo, await aiohttp_server(echo.app())


async def _switchboard(
    aiohttp_client: Any, database_url: str, agent: tuple[EchoAgent, TestServer]
) -> TestClient:
    client = await aiohttp_client(create_app(make_settings(database_url, grpc_port=0)))
    card = card_v1(str(agent[1].make_url("")).rstrip("/"), name="Echo")
    made = await client.post("/api/v1/agents", json={"card": card, "id": "echo"}, headers=AUTH)
    assert made.status == 201, await made.text()
    return client


@pytest.fixture
async def switchboard(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[EchoAgent, TestServer]
) -> TestClient:
    """The app with the echo agent as ``echo``, on SQLite."""
    return await _switchboard(aiohttp_client, sqlite_url, agent)


@pytest.fixture
async def stored(
    aiohttp_client: Any, db_url: str, agent: tuple[EchoAgent, TestServer]
) -> TestClient:
    """The same on each test database: for the tests that write rows."""
    return await _switchboard(aiohttp_client, db_url, agent)


def send_v1(request_id: Any, method: str = "SendMessage", **message: Any) -> dict[str, Any]:
    parts = [{"text": TEXT}, {"data": DATA}]
    content = {"role": "ROLE_USER", "messageId": "m1", "parts": parts, "metadata": META}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"message": {**content, **message}, "metadata": META},
    }


def send_v03(request_id: Any, method: str = "message/send", **message: Any) -> dict[str, Any]:
    parts = [{"kind": "text", "text": TEXT}, {"kind": "data", "data": DATA}]
    content = {"kind": "message", "role": "user", "messageId": "m1", "parts": parts}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"message": {**content, "metadata": META, **message}, "metadata": META},
    }


async def post_raw(client: TestClient, body: bytes | dict[str, Any], **headers: str) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    resp = await client.post("/agents/echo", data=data, headers=headers)
    assert resp.status == 200
    return await resp.read()


def sse_data(raw: bytes) -> list[dict[str, Any]]:
    assert NUL.encode() not in raw  # escaped in the JSON of every line
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]


# --- ids ------------------------------------------------------------------------------------

NUMBERS = ["1.5", "1e+308", "-0.0", "1e-300", "123456789012345678901234567890", "0.1"]


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("version", ["0.3", "1.0"])
async def test_a_finite_number_id_is_echoed_as_sent_and_the_agent_gets_a_stand_in(
    switchboard: TestClient, agent: tuple[EchoAgent, TestServer], number: str, version: str
) -> None:
    echo, _ = agent
    headers = V1 if version == "1.0" else {}
    request = send_v1(0) if version == "1.0" else send_v03(0)
    text = json.dumps(request).replace('"id": 0', f'"id": {number}', 1).encode()
    raw = await post_raw(switchboard, text, **headers)
    assert raw.startswith(f'{{"jsonrpc": "2.0", "id": {number}, "result": '.encode()), raw[:80]
    if number.isdigit():  # an integer goes as it is
        assert echo.ids[-1] == int(number)
    else:  # SDK agents refuse a fraction: they get a string of the router's
        assert isinstance(echo.ids[-1], str) and echo.ids[-1].startswith("switchboard-")
    # and a stream's every event
    method = "SendStreamingMessage" if version == "1.0" else "message/stream"
    streamed = text.replace(b'"SendMessage"', f'"{method}"'.encode())
    streamed = streamed.replace(b'"message/send"', f'"{method}"'.encode())
    events = (await post_raw(switchboard, streamed, **headers)).decode()
    datas = [line for line in events.splitlines() if line.startswith("data: ")]
    assert len(datas) == 3
    sent = re.compile(rf'^data: {{"jsonrpc": ?"2.0", ?"id": ?{re.escape(number)},')
    assert all(sent.match(line) for line in datas), datas


@pytest.mark.parametrize(
    ("number", "code"),
    [("1e400", -32600), ("-1e400", -32600), ("NaN", -32700), ("Infinity", -32700),
     ("-Infinity", -32700)],
)  # fmt: skip
async def test_a_non_finite_id_is_refused_with_id_null(
    switchboard: TestClient, agent: tuple[EchoAgent, TestServer], number: str, code: int
) -> None:
    text = json.dumps(send_v1(0)).replace('"id": 0', f'"id": {number}', 1).encode()
    answer = json.loads(await post_raw(switchboard, text, **V1))
    assert answer["id"] is None and answer["error"]["code"] == code
    assert agent[0].ids == []


# --- NUL in content -------------------------------------------------------------------------


async def test_nul_in_text_data_and_metadata_passes_through_json_rpc_1_0(
    stored: TestClient,
) -> None:
    raw = await post_raw(stored, send_v1("a"), **V1)
    assert NUL.encode() not in raw and b"\\u0000" in raw
    task = json.loads(raw)["result"]["task"]
    assert task["artifacts"][0]["parts"] == [{"text": TEXT}, {"data": DATA}]
    assert task["metadata"] == META and task["history"][0]["parts"][0]["text"] == TEXT
    listed = await post_raw(stored, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks"}, **V1)
    assert [t["id"] for t in json.loads(listed)["result"]["tasks"]] == [task["id"]]  # stored
    stream = sse_data(await post_raw(stored, send_v1("s", "SendStreamingMessage"), **V1))
    artifact = stream[1]["result"]["artifactUpdate"]["artifact"]
    assert artifact["parts"] == [{"text": TEXT}, {"data": DATA}]


async def test_nul_in_content_passes_through_json_rpc_0_3(switchboard: TestClient) -> None:
    task = json.loads(await post_raw(switchboard, send_v03("b")))["result"]
    assert task["artifacts"][0]["parts"] == [
        {"kind": "text", "text": TEXT},
        {"kind": "data", "data": DATA},
    ]
    assert task["metadata"] == META
    stream = sse_data(await post_raw(switchboard, send_v03("s", "message/stream")))
    assert stream[1]["result"]["artifact"]["parts"][0] == {"kind": "text", "text": TEXT}


async def test_nul_in_content_passes_through_http_json(switchboard: TestClient) -> None:
    params = send_v1(None)["params"]
    resp = await switchboard.post("/agents/echo/message:send", json=params, headers=V1)
    assert resp.status == 200, await resp.text()
    task = (await resp.json())["task"]
    assert task["artifacts"][0]["parts"] == [{"text": TEXT}, {"data": DATA}]
    content = [{"text": TEXT}, {"data": {"data": DATA}}]  # 0.3 over HTTP+JSON: ProtoJSON
    message = {"role": "ROLE_USER", "messageId": "m2", "content": content, "metadata": META}
    resp = await switchboard.post("/agents/echo/v1/message:send", json={"message": message})
    assert resp.status == 200, await resp.text()
    task = (await resp.json())["task"]
    assert task["artifacts"][0]["parts"] == content and task["metadata"] == META


def grpc_target(switchboard: TestClient) -> str:
    return f"127.0.0.1:{switchboard.app[GRPC_ENDPOINT].port}"


def grpc_message(**fields: Any) -> Any:
    return json_format.ParseDict(
        {"message": {**send_v1(0)["params"]["message"], **fields}, "metadata": META},
        a2a_pb2.SendMessageRequest(),
    )


GRPC_META = (("a2a-version", "1.0"),)


async def test_nul_in_content_passes_through_grpc(switchboard: TestClient) -> None:
    async with grpc.aio.insecure_channel(grpc_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        sent = grpc_message()
        sent.tenant = "agents/echo"
        answer = await stub.SendMessage(sent, metadata=GRPC_META)
        parts = json_format.MessageToDict(answer.task.artifacts[0])["parts"]
        assert parts == [{"text": TEXT}, {"data": DATA}]
        assert json_format.MessageToDict(answer.task.metadata) == META


# --- NUL in what the router stores ----------------------------------------------------------

TASK = "t-1"
STORED_V1 = [
    ("message.contextId", send_v1(7, contextId=f"c{NUL}")),
    ("message.taskId", send_v1(7, taskId=f"t{NUL}")),
    ("message.referenceTaskIds[1]", send_v1(7, referenceTaskIds=["a", f"b{NUL}"])),
    ("id", {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": f"t{NUL}"}}),
    ("id", {"jsonrpc": "2.0", "id": 7, "method": "CancelTask", "params": {"id": f"t{NUL}"}}),
    ("contextId", {"jsonrpc": "2.0", "id": 7, "method": "ListTasks",
                   "params": {"contextId": f"c{NUL}"}}),
    ("url", {"jsonrpc": "2.0", "id": 7, "method": "CreateTaskPushNotificationConfig",
             "params": {"taskId": TASK, "url": f"https://h.example/{NUL}"}}),
    ("token", {"jsonrpc": "2.0", "id": 7, "method": "CreateTaskPushNotificationConfig",
               "params": {"taskId": TASK, "url": "https://h.example/", "token": f"x{NUL}"}}),
]  # fmt: skip
_push = {"url": "https://h.example/", "token": f"x{NUL}"}
STORED_V1.append(
    (
        "configuration.taskPushNotificationConfig.token",
        {**send_v1(7), "params": {**send_v1(7)["params"], "configuration": {
            "taskPushNotificationConfig": _push}}},
    )
)  # fmt: skip
STORED_V03 = [
    ("message.contextId", send_v03(7, contextId=f"c{NUL}")),
    ("id", {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": f"t{NUL}"}}),
    ("pushNotificationConfig.url", {"jsonrpc": "2.0", "id": 7,
     "method": "tasks/pushNotificationConfig/set",
     "params": {"taskId": TASK, "pushNotificationConfig": {"url": f"https://h/{NUL}"}}}),
    ("sessionId", {"jsonrpc": "2.0", "id": 7, "method": "tasks/send", "params": {
        "id": "v01-task", "sessionId": f"s{NUL}",
        "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}}),
    ("id", {"jsonrpc": "2.0", "id": 7, "method": "tasks/send", "params": {
        "id": f"v01{NUL}", "message": {"role": "user", "parts": [{"type": "text", "text": "x"}]}}}),
]  # fmt: skip


def violations(error: dict[str, Any]) -> list[dict[str, str]]:
    data = error["data"]
    if isinstance(data, dict):  # 0.3
        return data["fieldViolations"]
    return next(d["fieldViolations"] for d in data if d["@type"].endswith("BadRequest"))


@pytest.mark.parametrize(("field", "request_body"), STORED_V1, ids=[f for f, _ in STORED_V1])
async def test_nul_in_a_stored_value_is_invalid_params_naming_it_1_0(
    switchboard: TestClient,
    agent: tuple[EchoAgent, TestServer],
    field: str,
    request_body: dict[str, Any],
) -> None:
    answer = json.loads(await post_raw(switchboard, request_body, **V1))
    assert answer["id"] == 7 and answer["error"]["code"] == -32602
    assert {"field": field, "description": "must not contain NUL (\\u0000)"} in violations(
        answer["error"]
    )
    assert agent[0].ids == []


@pytest.mark.parametrize(("field", "request_body"), STORED_V03, ids=[f for f, _ in STORED_V03])
async def test_nul_in_a_stored_value_is_invalid_params_naming_it_0_3(
    switchboard: TestClient,
    agent: tuple[EchoAgent, TestServer],
    field: str,
    request_body: dict[str, Any],
) -> None:
    answer = json.loads(await post_raw(switchboard, request_body))
    assert answer["id"] == 7 and answer["error"]["code"] == -32602
    assert field in [v["field"] for v in violations(answer["error"])]
    assert agent[0].ids == []


async def test_nul_in_a_stored_value_over_http_json(switchboard: TestClient) -> None:
    params = send_v1(None, contextId=f"c{NUL}")["params"]
    resp = await switchboard.post("/agents/echo/message:send", json=params, headers=V1)
    assert await rest_violations(resp) == ["message.contextId"]
    resp = await switchboard.get("/agents/echo/tasks/t%00x", headers=V1)
    assert await rest_violations(resp) == ["id"]
    resp = await switchboard.get("/agents/echo/v1/tasks/t%00x")
    assert await rest_violations(resp) == ["id"]
    resp = await switchboard.get("/agents/echo/tasks?contextId=c%00", headers=V1)
    assert await rest_violations(resp) == ["contextId"]


async def rest_violations(resp: Any) -> list[str]:
    """The fields of an HTTP+JSON 400's BadRequest detail."""
    assert resp.status == 400, await resp.text()
    details = (await resp.json())["error"]["details"]
    bad = next(d for d in details if d["@type"].endswith("BadRequest"))
    return [v["field"] for v in bad["fieldViolations"]]


async def test_nul_in_a_stored_value_over_grpc(switchboard: TestClient) -> None:
    async with grpc.aio.insecure_channel(grpc_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        for call, request, field in [
            (stub.GetTask, a2a_pb2.GetTaskRequest(id=f"t{NUL}"), "id"),
            (stub.SendMessage, grpc_message(contextId=f"c{NUL}"), "message.contextId"),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await call(request, metadata=GRPC_META)
            assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            trailer = dict(failed.value.trailing_metadata() or ())
            status = status_pb2.Status.FromString(trailer["grpc-status-details-bin"])
            bad = error_details_pb2.BadRequest()
            assert any(detail.Unpack(bad) for detail in status.details)
            assert [v.field for v in bad.field_violations] == [field]


async def test_an_agent_task_id_with_nul_is_an_invalid_answer_and_never_stored(
    stored: TestClient, agent: tuple[EchoAgent, TestServer]
) -> None:
    agent[0].task_id = f"up{NUL}1"
    answer = json.loads(await post_raw(stored, send_v1(3), **V1))
    assert answer["id"] == 3 and answer["error"]["code"] == -32006
    listed = await post_raw(stored, {"jsonrpc": "2.0", "id": 2, "method": "ListTasks"}, **V1)
    assert json.loads(listed)["result"]["tasks"] == []


async def test_feedback_from_a_task_whose_message_holds_nul_stores_a_space(
    stored: TestClient,
) -> None:
    task = json.loads(await post_raw(stored, send_v1("f"), **V1))["result"]["task"]
    resp = await stored.post(
        "/api/v1/route/feedback", json={"task_id": task["id"], "agent": "echo"}, headers=AUTH
    )
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["example"]["text"] == "before after"
