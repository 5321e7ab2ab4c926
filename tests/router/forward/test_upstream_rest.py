"""Agents reached over HTTP+JSON (router.forward.upstream_rest): official a2a-sdk 1.x agents
that serve only the REST binding, registered in a real app and called through the router by
the official clients on JSON-RPC and on REST; the agent's errors in the client's binding."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError
from aiohttp import web
from aiohttp.test_utils import TestServer

from registry.access.credentials import AgentCredentials, parse_credential
from registry.access.secrets import SecretBox, generate_key
from registry.api import REGISTRY
from registry.crawler import Crawler
from registry.netguard import AddressPolicy
from registry.service import Registry
from registry.store import Store
from router.app import ROUTER, create_app
from router.choose.choice import Target
from router.forward.credentials import OutboundAuth
from router.forward.upstream import Upstream, forward_headers
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    TASK_NOT_FOUND,
    RpcError,
)
from tests.peers03 import agent03, cancel_and_resubscribe03, client03_lines
from tests.support.helpers import base, card_v1, make_settings
from tests.support.sdk_clients import answer, ask, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent


async def _switchboard(aiohttp_server: Any, database_url: str) -> TestServer:
    return await aiohttp_server(create_app(make_settings(database_url)))


async def _client(http: httpx.AsyncClient, url: str, binding: str, *, streaming: bool) -> Any:
    card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(
        httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding]
    )
    return ClientFactory(config).create(card)


async def _subscribe_and_cancel(
    client: Any, subscribed: Callable[[], Awaitable[Any]] | None = None
) -> list[Any]:
    """The 1.x client's subscribe and cancel on a task left working (a gated agent): a stream
    is dropped after its task, the client subscribes (``subscribed`` waits until the agent sees
    it; without it, the subscription's first event, the task, says so), cancels the task
    (asserted canceled) and reads the subscription to its end, the canceled status."""
    stream = client.send_message(ask("echo cancel me", return_immediately=True))
    first = await anext(aiter(stream))
    await stream.aclose()
    working = first.task.id
    subscription = client.subscribe(SubscribeToTaskRequest(id=working))
    pending = asyncio.ensure_future(anext(aiter(subscription)))
    events: list[Any] = []
    if subscribed is None:
        events.append(await pending)
        assert events[0].task.id == working, events
    else:
        await subscribed()
    canceled = await client.cancel_task(CancelTaskRequest(id=working))
    assert canceled.id == working and canceled.status.state == TaskState.TASK_STATE_CANCELED
    if subscribed is not None:
        events.append(await pending)
    events += [event async for event in subscription]
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED, events
    assert events[-1].status_update.task_id == working
    return events


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_rest_only_agent_through_the_router(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, binding: str
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor, rest_only=True) as agent_url:
        record = await server.app[REGISTRY].register_url(agent_url, "tasks")
        assert [i.binding for i in record.card.interfaces] == ["HTTP+JSON"]

        # its card through the router offers the router's JSON-RPC and HTTP+JSON endpoints
        card = (await http.get(base(server) + "/agents/tasks/.well-known/agent-card.json")).json()
        endpoint = base(server) + "/agents/tasks"
        interfaces = card["supportedInterfaces"]
        offered = {(i["protocolBinding"], i["protocolVersion"]) for i in interfaces}
        assert offered == {(b, v) for b in ("JSONRPC", "HTTP+JSON") for v in ("1.0", "0.3")}
        assert {i["url"] for i in card["supportedInterfaces"]} == {endpoint}

        client = await _client(http, base(server), binding, streaming=True)
        # stream: the task, its updates, the answer
        executor.release()
        events = [event async for event in client.send_message(ask("echo hello agent"))]
        assert events[0].HasField("task") and events[-1].status_update.status.state == (
            TaskState.TASK_STATE_COMPLETED
        )
        task_id = events[0].task.id
        got = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        assert got.id == task_id and "hello agent" in answer(got)
        listed = await client.list_tasks(ListTasksRequest(page_size=10))
        assert [t.id for t in listed.tasks] == [task_id]

        # the agent's own error, in the client's binding: a completed task cannot be canceled
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))

        # a task left working: subscribe to it, cancel it
        await _subscribe_and_cancel(client)
        assert executor.cancels  # the agent got the cancel, under its own task id

        # without streaming: one task; the router's IDs, never the agent's
        plain = await _client(http, base(server), binding, streaming=False)
        executor.release()
        task = await send(plain, ask("echo plain call"))
        assert "plain call" in answer(task)
        assert task.id not in {m.get("taskId") for m in executor.messages}

        # pinned, through the agent's endpoint at the router
        pinned = await _client(http, endpoint, binding, streaming=False)
        executor.release()
        task = await send(pinned, ask("anything at all"))
        assert "anything at all" in answer(task)


async def test_unknown_tasks_are_the_agents_error(aiohttp_server: Any, sqlite_url: str) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url)
    upstream = server.app[ROUTER].upstream
    async with serve_sdk_agent(executor=TaskEchoExecutor(), rest_only=True) as agent_url:
        target = Target("tasks", agent_url + "/a2a", "1.0", binding="HTTP+JSON")
        answer_ = await upstream.call(target, "GetTask", {"id": "nope"}, request_id=7, headers={})
        assert answer_["id"] == 7 and answer_["error"]["code"] == TASK_NOT_FOUND
        details = answer_["error"]["data"]
        assert details[0]["reason"] == "TASK_NOT_FOUND"
        events = [
            event
            async for event in upstream.stream(
                target, "SubscribeToTask", {"id": "nope"}, request_id=8, headers={}
            )
        ]
        assert [e["error"]["code"] for e in events] == [TASK_NOT_FOUND]
        # a method the binding has no path for
        with pytest.raises(RpcError, match="no path for") as raised:
            await upstream.call(target, "tasks/nope", {}, request_id=9, headers={})
        assert raised.value.code == -32004


async def test_a_03_rest_only_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    """A2A 0.3 over HTTP+JSON only, served by the 1.x SDK's 0.3 REST adapter: the 1.x client
    (the router translates) and the 0.3 client, each on JSON-RPC and on REST."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(
        executor=executor, rest_only=True, compat=True, versions=("0.3",)
    ) as agent_url:
        record = await server.app[REGISTRY].register_url(agent_url, "old")
        assert [(i.binding, i.protocol_version) for i in record.card.interfaces] == [
            ("HTTP+JSON", "0.3")
        ]
        for binding in ("JSONRPC", "HTTP+JSON"):
            client = await _client(http, base(server), binding, streaming=True)
            executor.release()
            events = [event async for event in client.send_message(ask("echo translated"))]
            assert events[0].HasField("task")
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            got = await client.get_task(GetTaskRequest(id=events[0].task.id))
            assert "echo translated" in answer(got)
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=got.id))
            plain = await _client(http, base(server), binding, streaming=False)
            executor.release()
            task = await send(plain, ask("echo sent plainly"))
            assert "sent plainly" in answer(task) and task.id != got.id
            await _subscribe_and_cancel(client)
        assert len(executor.cancels) == 2

        for transport in ("JSONRPC", "HTTP+JSON"):
            executor.release(2)
            sent = await client03_lines(
                sdk03_python, base(server), "send", text="echo old client", transport=transport
            )
            assert sent[-1].get("kind") == "task", sent
            task_id = sent[-1]["id"]
            got03 = await client03_lines(
                sdk03_python, base(server), "get", task_id=task_id, transport=transport
            )
            assert got03[-1]["status"]["state"] == "completed", got03
            streamed = await client03_lines(
                sdk03_python, base(server), "stream", text="echo old stream", transport=transport
            )
            kinds = [line.get("kind") for line in streamed]
            assert kinds[0] == "task" and kinds.count("artifact-update") >= 3, streamed


# --- the edge: what the JSON-RPC upstream guards, the REST leg guards too ----------------------


class RestAgent:
    """A raw HTTP+JSON agent: records each request, answers what a test sets per path."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append((request.method, request.path_qs, dict(request.headers), body))
        path = request.path
        if path.endswith("/moved/message:send"):
            raise web.HTTPFound("http://169.254.169.254/latest")
        if path.endswith("/big/message:send"):
            return web.json_response({"task": {"id": "t", "pad": "x" * 4096}})
        if path.endswith("/down/message:send"):
            return web.Response(status=502, text="<html>bad gateway</html>")
        if path.endswith("/sse/message:stream"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            task = {"task": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}}}
            await resp.write(f"data: {json.dumps(task)}\n\n".encode())
            error = {"error": {"code": 500, "status": "INTERNAL", "message": "boom", "details": []}}
            await resp.write(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
            return resp
        return web.json_response({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}})


class Health:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str]] = []

    def failed(self, agent_id: str, reason: str) -> None:
        self.reports.append(("failed", agent_id))

    def answered(self, agent_id: str) -> None:
        self.reports.append(("answered", agent_id))


@pytest.fixture
async def rest_agent(aiohttp_server: Any) -> tuple[RestAgent, str]:
    agent = RestAgent()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", agent.handle)
    server = await aiohttp_server(app)
    return agent, str(server.make_url("")).rstrip("/")


@pytest.fixture
async def credentials(sqlite_url: str) -> AsyncIterator[AgentCredentials]:
    store = Store(sqlite_url)
    registry = Registry(store, Crawler(make_settings(sqlite_url)))
    await registry.load()
    await registry.register_card(card_v1("https://rest.example.com"), "rest")
    credentials = AgentCredentials(store, SecretBox([generate_key()]))
    await credentials.load()
    try:
        yield credentials
    finally:
        await store.close()


async def test_the_rest_leg_keeps_the_guards_headers_and_credentials(
    rest_agent: tuple[RestAgent, str], credentials: AgentCredentials
) -> None:
    agent, url = rest_agent
    send = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    headers = forward_headers({"A2A-Extensions": "urn:x", "Authorization": "Bearer client"}, "1.0")

    def target(path: str) -> Target:
        return Target("rest", url + path, "1.0", binding="HTTP+JSON")

    # the SSRF guard: a loopback agent is refused by the default policy, before any request
    async with Upstream(connect_timeout=2, read_timeout=5, policy=AddressPolicy()) as guarded:
        with pytest.raises(RpcError) as refused:
            await guarded.call(target("/a"), "SendMessage", send, request_id=1, headers=headers)
        assert refused.value.code == AGENT_UNAVAILABLE and not agent.seen

    policy = AddressPolicy(["127.0.0.0/8"])
    up = Upstream(connect_timeout=2, read_timeout=5, policy=policy, max_body_bytes=1024)
    up.health = health = Health()
    up.auth = OutboundAuth(credentials, policy=policy)
    key = parse_credential({"kind": "header", "header": "X-API-Key", "value": "s3cret"})
    await credentials.put("rest", key, by="test")
    async with up:
        answer_ = await up.call(target("/a"), "SendMessage", send, request_id=1, headers=headers)
        assert answer_ == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}},
        }
        verb, path, sent, body = agent.seen[-1]
        assert (verb, path, json.loads(body)) == ("POST", "/a/message:send", send)
        assert sent["A2A-Version"] == "1.0" and sent["A2A-Extensions"] == "urn:x"
        assert sent["X-API-Key"] == "s3cret" and "Authorization" not in sent  # never the client's
        get = {"id": "t 1", "historyLength": 1}
        await up.call(target("/a/"), "GetTask", get, request_id=2, headers=headers)
        assert agent.seen[-1][:2] == ("GET", "/a/tasks/t%201?historyLength=1")

        # no redirects, size limits, a 5xx without an error body: the JSON-RPC leg's errors
        for path, code, reason in (
            ("/moved", AGENT_UNAVAILABLE, "redirects are not followed"),
            ("/big", INVALID_AGENT_RESPONSE, "the answer exceeds 1024 bytes"),
            ("/down", AGENT_UNAVAILABLE, "HTTP 502"),
        ):
            with pytest.raises(RpcError) as failed:
                await up.call(target(path), "SendMessage", send, request_id=3, headers=headers)
            assert failed.value.code == code and reason in failed.value.data["reason"], path
        assert ("failed", "rest") in health.reports and ("answered", "rest") in health.reports

        # a stream: results as they come, an error event as the JSON-RPC error
        stream = up.stream(
            target("/sse"), "SendStreamingMessage", send, request_id=4, headers=headers
        )
        events = [event async for event in stream]
        assert events[0]["result"]["task"]["id"] == "t"
        assert events[1]["error"] == {"code": -32603, "message": "boom"}


async def test_the_03_sdks_own_rest_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    """An a2a-sdk 0.3.26 agent served by that SDK's REST app (its only transport): the 0.3
    client on both bindings and the 1.x client on REST (translated) through the router."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with agent03(sdk03_python, rest=True) as agent:
        record = await server.app[REGISTRY].register_url(agent.base_url, "old-rest")
        assert [i.binding for i in record.card.interfaces] == ["HTTP+JSON"]
        for transport in ("JSONRPC", "HTTP+JSON"):
            streamed = await client03_lines(
                sdk03_python, base(server), "stream", text="echo via rest", transport=transport
            )
            kinds = [line.get("kind") for line in streamed]
            assert kinds[0] == "task" and kinds[-1] == "status-update", streamed
            assert streamed[-1]["status"]["state"] == "completed"
            task_id = streamed[0]["id"]
            got = await client03_lines(
                sdk03_python, base(server), "get", task_id=task_id, transport=transport
            )
            assert got[-1]["id"] == task_id and got[-1]["status"]["state"] == "completed", got
        assert all(r["path"].startswith(("/v1/", "/.well-known/")) for r in agent.requests)

        client = await _client(http, base(server), "HTTP+JSON", streaming=False)
        task = await send(client, ask("echo from a new client"))
        assert "from a new client" in answer(task)
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_the_03_client_to_a_10_rest_agent(
    aiohttp_server: Any, sqlite_url: str, sdk03_python: Path
) -> None:
    """The 0.3 client, on JSON-RPC and on REST, to a 1.0 agent reached over HTTP+JSON."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with serve_sdk_agent(executor=TaskEchoExecutor(), rest_only=True) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        for transport in ("JSONRPC", "HTTP+JSON"):
            sent = await client03_lines(
                sdk03_python, base(server), "send", text="echo sent to new", transport=transport
            )
            assert sent[-1].get("kind") == "task", sent
            assert sent[-1]["status"]["state"] == "completed", sent
            streamed = await client03_lines(
                sdk03_python, base(server), "stream", text="echo old to new", transport=transport
            )
            assert streamed[0].get("kind") == "task", streamed
            assert streamed[-1]["status"]["state"] == "completed", streamed
            got = await client03_lines(
                sdk03_python, base(server), "get", task_id=streamed[0]["id"], transport=transport
            )
            words = [p["text"] for a in got[-1]["artifacts"] for p in a["parts"]]
            assert "".join(words) == "echo: echo old to new", got


async def test_the_rest_clients_to_a_03_json_rpc_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    """The cells the HTTP+JSON server's tests leave: REST clients (1.x and 0.3) to a 0.3
    JSON-RPC agent: send, stream, get, subscribe (resubscribe) and cancel."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with agent03(sdk03_python, gated=True) as agent:
        await server.app[REGISTRY].register_url(agent.base_url, "echo03")
        client = await _client(http, base(server), "HTTP+JSON", streaming=True)
        agent.release()
        events = [event async for event in client.send_message(ask("echo new over rest"))]
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        got = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert "new over rest" in answer(got)
        plain = await _client(http, base(server), "HTTP+JSON", streaming=False)
        agent.release()
        task = await send(plain, ask("echo sent over rest"))
        assert "sent over rest" in answer(task) and task.id != got.id

        old = {"transport": "HTTP+JSON"}
        agent.release(2)
        sent = await client03_lines(sdk03_python, base(server), "send", text="echo old", **old)
        assert sent[-1]["status"]["state"] == "completed", sent
        streamed = await client03_lines(
            sdk03_python, base(server), "stream", text="echo old stream", **old
        )
        assert streamed[0]["kind"] == "task" and streamed[-1]["status"]["state"] == "completed"
        got03 = await client03_lines(
            sdk03_python, base(server), "get", task_id=streamed[0]["id"], **old
        )
        words = [p["text"] for a in got03[-1]["artifacts"] for p in a["parts"]]
        assert "".join(words) == "echo: echo old stream", got03

        # tasks left working (the gate stays shut): subscribed to and canceled, a 0.3 agent
        # sends no task first, its log says when the subscription reached it
        await _subscribe_and_cancel(client, subscribed=lambda: agent.wait_for("taps"))
        await agent.wait_for("taps", 2)  # the subscription's and the cancel's
        await cancel_and_resubscribe03(
            sdk03_python, base(server), subscribed=lambda: agent.wait_for("taps", 3)
        )
        assert len(agent.cancels) == 2


@pytest.mark.slow
async def test_the_03_rest_client_cancels_and_resubscribes_via_rest_agents(
    aiohttp_server: Any, sqlite_url: str, sdk03_python: Path
) -> None:
    """The 0.3 client on REST and on JSON-RPC, cancel and resubscribe, to a 1.0 REST agent
    (the 1.x SDK's) and to a 0.3 REST agent (the 0.3 SDK's own REST app)."""
    transports = ("HTTP+JSON", "JSONRPC")
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor, rest_only=True) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "tasks")
        for transport in transports:
            lines = await cancel_and_resubscribe03(
                sdk03_python, base(server) + "/agents/tasks", transport=transport
            )
            assert lines[0]["kind"] == "task", lines
        assert len(executor.cancels) == 2
    server = await _switchboard(aiohttp_server, sqlite_url.replace(".db", "2.db"))
    async with agent03(sdk03_python, gated=True, rest=True) as agent:
        await server.app[REGISTRY].register_url(agent.base_url, "old-rest")
        for done, transport in enumerate(transports):
            # each round taps the task's queue twice: its resubscribe, its cancel
            await agent.wait_for("taps", 2 * done)
            # pinned: the per-agent card of a 0.3 card without additionalInterfaces gets them
            await cancel_and_resubscribe03(
                sdk03_python,
                base(server) + "/agents/old-rest",
                transport=transport,
                subscribed=lambda n=2 * done + 1: agent.wait_for("taps", n),
            )
        assert len(agent.cancels) == 2
        assert all(r["path"].startswith(("/v1/", "/.well-known/")) for r in agent.requests)
