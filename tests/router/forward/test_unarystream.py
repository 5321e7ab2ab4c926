"""router.forward.unarystream: streaming calls through the router to agents that do not stream.

A scripted JSON-RPC agent of either version (its card says ``streaming: false``; it answers
the tasks the test gives and counts its calls) and raw JSON-RPC clients: the answer streamed
as the spec's events, a task left working polled at the synthesized-push pace (the waits
recorded, not timed) until it completes, SubscribeToTask on a running and on a finished task,
the agent's errors, a client that goes away stopping the polling; then the official SDK client
on the HTTP+JSON and gRPC bindings against an a2a-sdk agent that does not stream.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from a2a.types import AgentCapabilities, SubscribeToTaskRequest, TaskState
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import create_app
from router.transport.routes import ROUTER
from tests.support.helpers import base, make_settings
from tests.support.sdk_clients import ask, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

STATES = {"1.0": "TASK_STATE_{}", "0.3": "{}"}


def task(version: str, state: str, *artifacts: str, message: str | None = None) -> dict[str, Any]:
    """The agent's task ``up-1`` in ``version``'s shape: ``state`` (0.3 spelling), one text
    artifact per name (its text the name)."""
    spelled = STATES[version].format(state.upper().replace("-", "_") if version == "1.0" else state)
    text = (lambda t: {"text": t}) if version == "1.0" else (lambda t: {"kind": "text", "text": t})
    status: dict[str, Any] = {"state": spelled}
    if message is not None:
        role = "ROLE_AGENT" if version == "1.0" else "agent"
        status["message"] = {"role": role, "messageId": "m-up", "parts": [text(message)]}
        if version == "0.3":
            status["message"]["kind"] = "message"
    out: dict[str, Any] = {"id": "up-1", "contextId": "up-ctx", "status": status}
    if artifacts:
        out["artifacts"] = [{"artifactId": a, "parts": [text(a)]} for a in artifacts]
    if version == "0.3":
        out["kind"] = "task"
    return out


class Scripted:
    """A JSON-RPC agent that does not stream: a send answers ``tasks[0]``, the n-th GetTask
    ``tasks[n]`` (the last one once they run out), or ``errors[method]`` when set."""

    def __init__(self, version: str, tasks: list[dict[str, Any]]) -> None:
        self.version = version
        self.tasks = tasks
        self.errors: dict[str, dict[str, Any]] = {}
        self.methods: list[str] = []
        self.gets = 0
        self._called = asyncio.Event()

    async def rpc(self, request: web.Request) -> web.Response:
        body = await request.json()
        method = body["method"]
        self.methods.append(method)
        self._called.set()
        if method in self.errors:
            return web.json_response(
                {"jsonrpc": "2.0", "id": body["id"], "error": self.errors[method]}
            )
        if method in ("SendMessage", "message/send"):
            result = self.tasks[0]
            result = {"task": result} if self.version == "1.0" else result
        elif method in ("GetTask", "tasks/get"):
            self.gets += 1
            result = self.tasks[min(self.gets, len(self.tasks) - 1)]
        else:
            error = {"code": -32004, "message": f"{method} is not supported"}
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "error": error})
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})

    async def until_gets(self, count: int) -> None:
        """Wait until GetTask was called ``count`` times."""
        async with asyncio.timeout(10):
            while self.gets < count:
                self._called.clear()
                await self._called.wait()

    async def serve(self, aiohttp_server: Any) -> dict[str, Any]:
        """Start the agent; its card."""
        app = web.Application()
        app.router.add_post("/", self.rpc)
        server = await aiohttp_server(app)
        url = str(server.make_url("/"))
        skill = {"id": "scripted", "name": "Scripted work", "description": "Does scripted work.",
                 "tags": ["scripted"]}  # fmt: skip
        card: dict[str, Any] = {
            "name": "Scripted", "description": "Answers what the test says.", "version": "1",
            "capabilities": {"streaming": False}, "skills": [skill],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        }  # fmt: skip
        if self.version == "1.0":
            interface = {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            card["supportedInterfaces"] = [interface]
        else:
            card.update(url=url, protocolVersion="0.3.0", preferredTransport="JSONRPC")
        return card


class Waits:
    """The router's waits between polls, recorded instead of slept: the first ``free`` return
    at once, the next one parks until cancelled (``parked``, then ``cancelled`` set)."""

    def __init__(self, free: int = 1000) -> None:
        self.seconds: list[float] = []
        self.free = free
        self.parked = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        if len(self.seconds) <= self.free:
            await asyncio.sleep(0)
            return
        self.parked.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def switchboard(aiohttp_server: Any, sqlite_url: str, card: dict[str, Any], waits: Waits,
                      **settings: Any) -> TestServer:  # fmt: skip
    """The app on a real port with the agent of ``card`` registered, polling at interval 1,
    cap 4 (``waits`` records the waits)."""
    settings = {"push_poll_interval": 1.0, "push_poll_cap": 4.0, **settings}
    server = await aiohttp_server(create_app(make_settings(sqlite_url, **settings)))
    await server.app[REGISTRY].register_card(card, "scripted")
    server.app[ROUTER].relay.unary.sleep = waits
    return server


def request(version: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}


def message(version: str, text: str = "scripted work please") -> dict[str, Any]:
    if version == "1.0":
        return {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]}}
    parts = [{"kind": "text", "text": text}]
    return {"message": {"kind": "message", "role": "user", "messageId": "m1", "parts": parts}}


async def post(
    http: httpx.AsyncClient, server: TestServer, version: str, method: str, params: dict[str, Any]
) -> tuple[str, list[dict[str, Any]]]:
    """One call to the router's root: its content type, and its SSE events' data (or its one
    JSON answer)."""
    headers = {"A2A-Version": "1.0"} if version == "1.0" else {}
    body = request(version, method, params)
    async with http.stream("POST", base(server) + "/", json=body, headers=headers) as answer:
        kind = answer.headers["Content-Type"].partition(";")[0]
        if kind == "application/json":
            return kind, [json.loads(await answer.aread())]
        lines = [line async for line in answer.aiter_lines()]
    return kind, [json.loads(line[len("data: ") :]) for line in lines if line.startswith("data: ")]


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert all("result" in e for e in events), events
    return [e["result"] for e in events]


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_working_task_is_polled_at_the_push_pace_and_each_change_streamed(
    version: str, aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    working, a1 = task(version, "working"), task(version, "working", "a1")
    done = task(version, "completed", "a1", "a2", message="all done")
    agent = Scripted(version, [working, working, working, working, a1, a1, done])
    waits = Waits()
    server = await switchboard(aiohttp_server, sqlite_url, await agent.serve(aiohttp_server), waits)
    method = "SendStreamingMessage" if version == "1.0" else "message/stream"
    kind, events = await post(http, server, version, method, message(version))
    assert kind == "text/event-stream"
    assert agent.methods[0] in ("SendMessage", "message/send")  # unary: it does not stream
    assert agent.gets == 6 and len(agent.methods) == 7
    # interval 1 doubling to the cap of 4 while the task stays the same, 1 again after a change
    assert waits.seconds == [1.0, 2.0, 4.0, 4.0, 1.0, 2.0]
    got = results(events)
    assert "up-1" not in json.dumps(got) and "up-ctx" not in json.dumps(got)
    if version == "1.0":
        first, *updates = got
        assert first["task"]["status"] == {"state": "TASK_STATE_SUBMITTED"}
        assert "artifacts" not in first["task"]
        router_task = first["task"]["id"]
        shown = [next(iter(u.items())) for u in updates]
        assert [k for k, _ in shown] == ["statusUpdate", "artifactUpdate", "artifactUpdate",
                                         "statusUpdate"]  # fmt: skip
        assert shown[0][1]["status"]["state"] == "TASK_STATE_WORKING"
        assert [shown[1][1]["artifact"]["artifactId"], shown[2][1]["artifact"]["artifactId"]] == [
            "a1", "a2"
        ]  # fmt: skip
        assert shown[1][1]["lastChunk"] is True
        assert shown[3][1]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert shown[3][1]["status"]["message"]["parts"] == [{"text": "all done"}]
        assert {u["taskId"] for _, u in shown} == {router_task}
    else:
        assert [r["kind"] for r in got] == [
            "task", "status-update", "artifact-update", "artifact-update", "status-update"
        ]  # fmt: skip
        assert got[0]["status"] == {"state": "submitted"} and "artifacts" not in got[0]
        assert [got[1]["final"], got[4]["final"]] == [False, True]
        assert [got[2]["artifact"]["artifactId"], got[3]["artifact"]["artifactId"]] == ["a1", "a2"]
        assert got[4]["status"]["state"] == "completed"
        assert {r["taskId"] for r in got[1:]} == {got[0]["id"]}
    # the states were recorded: GetTask through the router says completed
    get = "GetTask" if version == "1.0" else "tasks/get"
    router_task = got[0]["task"]["id"] if version == "1.0" else got[0]["id"]
    kind, [answer] = await post(http, server, version, get, {"id": router_task})
    state = answer["result"]["status"]["state"]
    assert state in ("TASK_STATE_COMPLETED", "completed"), answer


@pytest.mark.parametrize(("client", "agent_version"), [("1.0", "0.3"), ("0.3", "1.0")])
async def test_subscribing_to_a_running_task_sends_it_first_then_polls(
    client: str, agent_version: str, aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    working = task(agent_version, "working")
    a1, done = task(agent_version, "working", "a1"), task(agent_version, "completed", "a1")
    agent = Scripted(agent_version, [working, a1, a1, done])
    waits = Waits()
    server = await switchboard(aiohttp_server, sqlite_url, await agent.serve(aiohttp_server), waits)
    send_method = "SendMessage" if client == "1.0" else "message/send"
    _, [sent] = await post(http, server, client, send_method, message(client))
    router_task = sent["result"]["task"]["id"] if client == "1.0" else sent["result"]["id"]
    subscribe = "SubscribeToTask" if client == "1.0" else "tasks/resubscribe"
    kind, events = await post(http, server, client, subscribe, {"id": router_task})
    assert kind == "text/event-stream"
    got = results(events)
    assert agent.gets == 3 and waits.seconds == [1.0, 2.0]  # the same task at the first poll
    if client == "1.0":
        assert [next(iter(r)) for r in got] == ["task", "statusUpdate"]
        snapshot = got[0]["task"]
        assert snapshot["id"] == router_task and snapshot["status"]["state"] == "TASK_STATE_WORKING"
        assert [a["artifactId"] for a in snapshot["artifacts"]] == ["a1"]
        assert got[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    else:
        assert [r["kind"] for r in got] == ["task", "status-update"]
        assert got[0]["id"] == router_task and got[0]["status"]["state"] == "working"
        assert got[1]["status"]["state"] == "completed" and got[1]["final"] is True
    assert "up-1" not in json.dumps(got)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_finished_task_cannot_be_subscribed_to_and_errors_end_the_stream(
    version: str, aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    """As an a2a-sdk agent of that version answers: 1.0 plain JSON, 0.3 an error event."""
    working, done = task(version, "working"), task(version, "completed", "a1")
    agent = Scripted(version, [done, done])
    server = await switchboard(
        aiohttp_server, sqlite_url, await agent.serve(aiohttp_server), Waits()
    )
    send_method, subscribe, get = (
        ("SendMessage", "SubscribeToTask", "GetTask")
        if version == "1.0"
        else ("message/send", "tasks/resubscribe", "tasks/get")
    )
    _, [sent] = await post(http, server, version, send_method, message(version))
    router_task = sent["result"]["task"]["id"] if version == "1.0" else sent["result"]["id"]
    kind, [refused] = await post(http, server, version, subscribe, {"id": router_task})
    assert kind == ("application/json" if version == "1.0" else "text/event-stream")
    assert refused["error"]["code"] == -32004 and "terminal state" in json.dumps(refused)
    # an error answered to a poll is the stream's last event
    agent.tasks = [working, working]
    agent.errors[get] = {"code": -32001, "message": "Task not found"}
    stream = "SendStreamingMessage" if version == "1.0" else "message/stream"
    kind, events = await post(http, server, version, stream, message(version))
    assert kind == "text/event-stream" and events[-1]["error"]["code"] == -32001, events
    assert len(events) == 3  # the task, its status, the error
    # an error answered to the send is the answer (1.0 plain, 0.3 one event)
    agent.errors[send_method] = {"code": -32602, "message": "Invalid params"}
    kind, [failed] = await post(http, server, version, stream, message(version))
    assert failed["error"]["code"] == -32602, failed
    assert kind == ("application/json" if version == "1.0" else "text/event-stream")


async def test_a_client_that_goes_away_stops_the_polling(
    aiohttp_server: Any, sqlite_url: str
) -> None:
    working = task("1.0", "working")
    agent = Scripted("1.0", [working])
    waits = Waits(free=2)  # two polls, then the third wait parks
    server = await switchboard(aiohttp_server, sqlite_url, await agent.serve(aiohttp_server), waits)
    body = request("1.0", "SendStreamingMessage", message("1.0"))
    async with (
        aiohttp.ClientSession() as http,
        http.post(base(server) + "/", json=body, headers={"A2A-Version": "1.0"}) as answer,
    ):
        data = [line async for line in _data_lines(answer.content, 2)]
        assert [next(iter(json.loads(d)["result"])) for d in data] == ["task", "statusUpdate"]
        await asyncio.wait_for(waits.parked.wait(), 10)
    # the client left while the router waited for its next poll
    await asyncio.wait_for(waits.cancelled.wait(), 10)
    assert agent.gets == 2 and len(waits.seconds) == 3


async def _data_lines(content: aiohttp.StreamReader, count: int) -> AsyncIterator[str]:
    """The data of the first ``count`` SSE events."""
    while count:
        line = (await content.readline()).decode().rstrip("\r\n")
        if line.startswith("data: "):
            count -= 1
            yield line[len("data: ") :]


# --- the HTTP+JSON and gRPC bindings, the official SDK client, an SDK agent ----------------------

QUIET = AgentCapabilities(streaming=False)


async def test_the_sdk_client_streams_over_http_json_from_an_agent_that_does_not_stream(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    server = await aiohttp_server(
        create_app(make_settings(sqlite_url, push_poll_interval=0.01, push_poll_cap=0.05))
    )
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor, rest_only=True, capabilities=QUIET) as url:
        await server.app[REGISTRY].register_url(url, "quiet")
        card = await A2ACardResolver(http, base(server)).get_agent_card()
        config = ClientConfig(httpx_client=http, streaming=True,
                              supported_protocol_bindings=["HTTP+JSON"])  # fmt: skip
        client = ClientFactory(config).create(card)
        # returned at once, then polled: the first events come before the agent finishes
        events = client.send_message(ask("echo rest words", return_immediately=True))
        first = await anext(aiter(events))
        assert first.HasField("task")
        executor.release()
        rest = [event async for event in events]
        assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        words = [e.artifact_update.artifact for e in rest if e.HasField("artifact_update")]
        assert "".join(p.text for a in words for p in a.parts) == "echo: echo rest words"
        # subscribed to, over HTTP+JSON too
        plain = ClientFactory(ClientConfig(httpx_client=http, streaming=False,
                              supported_protocol_bindings=["HTTP+JSON"])).create(card)  # fmt: skip
        waiting = await send(plain, ask("echo later", return_immediately=True))
        seen = []
        async for event in client.subscribe(SubscribeToTaskRequest(id=waiting.id)):
            seen.append(event)
            if len(seen) == 1:
                assert event.task.id == waiting.id
                executor.release()
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_sdk_client_streams_over_grpc_from_an_agent_that_does_not_stream(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    grpc = pytest.importorskip("grpc")
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    settings = make_settings(sqlite_url, grpc_port=0, push_poll_interval=0.01, push_poll_cap=0.05)
    server = await aiohttp_server(create_app(settings))
    async with serve_sdk_agent(capabilities=QUIET) as url:  # answers with a message
        await server.app[REGISTRY].register_url(url, "quiet")
        card = await A2ACardResolver(http, base(server)).get_agent_card()
        config = ClientConfig(streaming=True, supported_protocol_bindings=["GRPC"],
                              grpc_channel_factory=grpc.aio.insecure_channel)  # fmt: skip
        client = ClientFactory(config).create(card)
        try:
            events = [event async for event in client.send_message(ask("say hello back"))]
        finally:
            await client.close()
    assert len(events) == 1 and events[0].HasField("message"), events
    assert events[0].message.parts[0].text == "echo: say hello back"
