"""Agents reached over gRPC (router.forward.upstream_grpc): official a2a-sdk 1.x agents that
serve only the A2A 1.0 gRPC binding (``lf.a2a.v1.A2AService``), registered in a real app and
called through the router by the official clients on JSON-RPC and on HTTP+JSON (1.x, and the
0.3 client translated); the agent's errors in the client's binding; the edge's guards."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCapabilities,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from aiohttp import web
from aiohttp.test_utils import TestServer
from google.protobuf.json_format import MessageToDict

from registry.api import REGISTRY
from registry.egress import OutboundProxy
from registry.netguard import AddressPolicy
from router.app import create_app
from router.choose.choice import GRPC, Target
from router.forward.upstream import Upstream, forward_headers
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    INVALID_PARAMS,
    NOT_CANCELABLE,
    STREAM_FAILED,
    TASK_NOT_FOUND,
    UNSUPPORTED,
    RpcError,
)
from tests.peers03 import cancel_and_resubscribe03, client03_lines
from tests.support.helpers import base, make_settings
from tests.support.proxy import running_proxy
from tests.support.sdk_clients import answer, ask, send
from tests.support.sdk_peers import PushStore, TaskEchoExecutor, echo_card
from tests.support.streams import within

grpc = pytest.importorskip("grpc")  # the grpc extra (CI installs it with the test extra)
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler  # noqa: E402
from a2a.server.tasks import BasePushNotificationSender, InMemoryTaskStore  # noqa: E402
from a2a.types import a2a_pb2  # noqa: E402


class Recorder(grpc.aio.ServerInterceptor):
    """Keeps the metadata of every call the agent receives."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, str]] = []

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        self.metadata.append({k: v for k, v in details.invocation_metadata or ()})
        return await continuation(details)


@contextlib.asynccontextmanager
async def serve_grpc_agent(
    executor: TaskEchoExecutor, servicer: Any = None, push: PushStore | None = None
) -> AsyncIterator[tuple[str, dict[str, Any], Recorder]]:
    """The SDK's gRPC servicer (or ``servicer``) on a random 127.0.0.1 port; yields its
    target, its card (JSON; its only interface is that gRPC one) and the metadata recorder."""
    recorder = Recorder()
    server = grpc.aio.server(interceptors=[recorder])
    port = server.add_insecure_port("127.0.0.1:0")
    target = f"127.0.0.1:{port}"
    card = echo_card(
        f"http://127.0.0.1:{port}",
        supported_interfaces=[
            AgentInterface(url=target, protocol_binding="GRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=push is not None),
    )
    sender = httpx.AsyncClient(timeout=5.0)
    pushing: dict[str, Any] = {}
    if push is not None:
        pushing = {
            "push_config_store": push,
            "push_sender": BasePushNotificationSender(sender, push),
        }
    if servicer is None:
        handler = DefaultRequestHandler(
            agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card, **pushing
        )
        servicer = GrpcHandler(handler)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)
    await server.start()
    try:
        yield target, MessageToDict(card), recorder
    finally:
        await server.stop(None)
        await sender.aclose()


async def _switchboard(aiohttp_server: Any, database_url: str, **settings: Any) -> TestServer:
    return await aiohttp_server(create_app(make_settings(database_url, **settings)))


async def _client(http: httpx.AsyncClient, url: str, binding: str, *, streaming: bool) -> Any:
    card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(
        httpx_client=http,
        streaming=streaming,
        supported_protocol_bindings=[binding],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    return ClientFactory(config).create(card)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_a_grpc_only_agent_through_the_router(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, binding: str
) -> None:
    """The 1.x client on each of its bindings (the router's gRPC port on for GRPC: per-agent
    calls then go by the card's tenant ``agents/tasks``) to a gRPC-only agent."""
    grpc_on = {"grpc_port": 0} if binding == "GRPC" else {}
    server = await _switchboard(aiohttp_server, sqlite_url, **grpc_on)
    executor = TaskEchoExecutor(gated=True)
    async with serve_grpc_agent(executor) as (target, raw, recorder):
        record = await server.app[REGISTRY].register_card(raw, "tasks")
        assert [i.binding for i in record.card.interfaces] == ["GRPC"]

        # its card through the router offers the router's JSON-RPC and HTTP+JSON endpoints
        card = (await http.get(base(server) + "/agents/tasks/.well-known/agent-card.json")).json()
        endpoint = base(server) + "/agents/tasks"
        http_interfaces = [i for i in card["supportedInterfaces"] if i["protocolBinding"] != "GRPC"]
        offered = {(i["protocolBinding"], i["protocolVersion"]) for i in http_interfaces}
        assert offered == {(b, v) for b in ("JSONRPC", "HTTP+JSON") for v in ("1.0", "0.3")}
        assert {i["url"] for i in http_interfaces} == {endpoint}
        tenants = [i.get("tenant") for i in card["supportedInterfaces"] if i not in http_interfaces]
        assert tenants == (["agents/tasks"] if grpc_on else [])

        client = await _client(http, base(server), binding, streaming=True)
        # stream: the task, its updates, the answer
        executor.release()
        headers = {
            "A2A-Extensions": "urn:x-test",
            "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
        }
        http.headers.update(headers)
        try:
            events = [event async for event in client.send_message(ask("echo hello agent"))]
        finally:
            for name in headers:
                del http.headers[name]
        assert events[0].HasField("task") and events[-1].status_update.status.state == (
            TaskState.TASK_STATE_COMPLETED
        )
        sent = recorder.metadata[-1]  # what the agent got, as gRPC metadata
        assert sent["a2a-version"] == "1.0"
        if not grpc_on:  # the headers went with the HTTP client's requests
            assert sent["a2a-extensions"] == "urn:x-test"
            assert sent["traceparent"] == headers["traceparent"]
            assert executor.extensions[-1] == {"urn:x-test"}
        task_id = events[0].task.id
        got = await client.get_task(GetTaskRequest(id=task_id, history_length=1))
        assert got.id == task_id and "hello agent" in answer(got)
        listed = await client.list_tasks(ListTasksRequest(page_size=10))
        assert [t.id for t in listed.tasks] == [task_id]

        # the agent's own errors, in the client's binding
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))

        # a task left working: subscribe to it, cancel it
        stream = client.send_message(ask("echo cancel me", return_immediately=True))
        first = await anext(aiter(stream))
        await stream.aclose()
        working = first.task.id
        subscribed = client.subscribe(SubscribeToTaskRequest(id=working))
        seen = await anext(aiter(subscribed))
        assert seen.task.id == working
        canceled = await client.cancel_task(CancelTaskRequest(id=working))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        rest = [event async for event in subscribed]
        assert rest and rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        # the agent got the cancel under its own task id, which the client never saw
        assert len(executor.cancels) == 1 and working not in executor.cancels
        assert executor.cancels[0] not in {task_id, working, got.context_id}

        # without streaming: one task; pinned, through the agent's endpoint at the router
        plain = await _client(http, endpoint, binding, streaming=False)
        executor.release()
        task = await send(plain, ask("anything at all"))
        assert "anything at all" in answer(task)
        assert task.id not in executor.cancels

    # the agent gone: -32052 from the router, in the client's binding
    down = await http.post(
        endpoint,
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
        headers={"A2A-Version": "1.0"},
    )
    error = down.json()["error"]
    assert error["code"] == AGENT_UNAVAILABLE, error
    assert error["data"][0]["metadata"]["url"] == target


@pytest.mark.slow
async def test_the_03_client_to_a_grpc_agent(
    aiohttp_server: Any, sqlite_url: str, sdk03_python: Path
) -> None:
    """The 0.3 client, on JSON-RPC and on REST, to a 1.0 agent reached over gRPC: send,
    stream, get, cancel, resubscribe, the agent's errors."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    async with serve_grpc_agent(TaskEchoExecutor()) as (_target, raw, _recorder):
        await server.app[REGISTRY].register_card(raw, "tasks")
        for transport in ("JSONRPC", "HTTP+JSON"):
            streamed = await client03_lines(
                sdk03_python, base(server), "stream", text="echo old to grpc", transport=transport
            )
            assert streamed[0].get("kind") == "task", streamed
            assert streamed[-1]["status"]["state"] == "completed", streamed
            task_id = streamed[0]["id"]
            got = await client03_lines(
                sdk03_python, base(server), "get", task_id=task_id, transport=transport
            )
            words = [p["text"] for a in got[-1]["artifacts"] for p in a["parts"]]
            assert "".join(words) == "echo: echo old to grpc", got
            sent = await client03_lines(
                sdk03_python, base(server), "send", text="echo plain", transport=transport
            )
            assert sent[-1]["status"]["state"] == "completed", sent
            canceled = await client03_lines(
                sdk03_python, base(server), "cancel", task_id=task_id, transport=transport
            )
            assert canceled[-1]["error"], canceled  # completed: not cancelable
            missing = await client03_lines(
                sdk03_python, base(server), "get", task_id="nope", transport=transport
            )
            assert "error" in missing[-1], missing
    # a task left working: the 0.3 client resubscribes and cancels it (pinned)
    executor = TaskEchoExecutor(gated=True)
    async with serve_grpc_agent(executor) as (_target, raw, _recorder):
        await server.app[REGISTRY].register_card(raw, "gated")
        for transport in ("JSONRPC", "HTTP+JSON"):
            lines = await cancel_and_resubscribe03(
                sdk03_python, base(server) + "/agents/gated", transport=transport
            )
            assert lines[-1]["status"]["state"] == "canceled", lines
        assert len(executor.cancels) == 2


# --- the edge ------------------------------------------------------------------------------------


class Servicer(a2a_pb2_grpc.A2AServiceServicer):
    """A raw gRPC agent: a stream that breaks after its first event, an oversized answer, a
    status without details."""

    async def SendStreamingMessage(self, request: Any, context: Any) -> Any:
        task = a2a_pb2.Task(id="t", context_id="c")
        task.status.state = a2a_pb2.TaskState.TASK_STATE_WORKING
        yield a2a_pb2.StreamResponse(task=task)
        await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")

    async def SendMessage(self, request: Any, context: Any) -> Any:
        text = request.message.parts[0].text if request.message.parts else ""
        if text == "big":
            task = a2a_pb2.Task(id="t", context_id="c")
            task.metadata["pad"] = "x" * 4096
            return a2a_pb2.SendMessageResponse(task=task)
        await context.abort(grpc.StatusCode.NOT_FOUND, "nothing here")


SEND = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


async def test_the_edge_errors_guards_and_metadata(sqlite_url: str) -> None:
    headers = forward_headers({"A2A-Extensions": "urn:x", "Authorization": "Bearer client"}, "1.0")
    async with serve_grpc_agent(TaskEchoExecutor()) as (url, _raw, recorder):
        target = Target("tasks", url, "1.0", binding="GRPC")

        # the SSRF guard: a loopback agent is refused by the default policy, before any call
        async with Upstream(connect_timeout=2, read_timeout=5, policy=AddressPolicy()) as guarded:
            with pytest.raises(RpcError) as refused:
                await guarded.call(target, "SendMessage", SEND, request_id=1, headers=headers)
            assert refused.value.code == AGENT_UNAVAILABLE and not recorder.metadata
            assert refused.value.data["url"] == url

        policy = AddressPolicy(["127.0.0.0/8"])
        async with Upstream(connect_timeout=2, read_timeout=5, policy=policy) as up:
            sent = await up.call(target, "SendMessage", SEND, request_id=1, headers=headers)
            assert sent["id"] == 1
            assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            metadata = recorder.metadata[-1]
            assert metadata["a2a-version"] == "1.0" and metadata["a2a-extensions"] == "urn:x"
            assert "authorization" not in metadata  # never the client's

            # the agent's error: its ErrorInfo reason names the code, its details are the data
            missing = await up.call(target, "GetTask", {"id": "nope"}, request_id=7, headers={})
            assert missing["id"] == 7 and missing["error"]["code"] == TASK_NOT_FOUND
            assert missing["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
            done = {"id": sent["result"]["task"]["id"]}
            kept = await up.call(target, "CancelTask", done, request_id=8, headers={})
            assert kept["error"]["code"] == NOT_CANCELABLE  # FAILED_PRECONDITION + its reason
            events = [
                event
                async for event in up.stream(
                    target, "SubscribeToTask", {"id": "nope"}, request_id=8, headers={}
                )
            ]
            assert [e["error"]["code"] for e in events] == [TASK_NOT_FOUND]

            # a method the binding has no RPC for; params that do not fit the request message
            with pytest.raises(RpcError, match="no RPC for") as raised:
                await up.call(target, "tasks/get", {}, request_id=9, headers={})
            assert raised.value.code == UNSUPPORTED
            with pytest.raises(RpcError, match=r"lf\.a2a\.v1\.GetTaskRequest") as raised:
                await up.call(target, "GetTask", {"id": "t", "bogus": 1}, request_id=9, headers={})
            assert raised.value.code == INVALID_PARAMS

    # the agent gone: -32052, for calls and streams
    async with Upstream(connect_timeout=2, read_timeout=5) as up:
        for_call = up.call(target, "GetTask", {"id": "t"}, request_id=1, headers={})
        with pytest.raises(RpcError) as down:
            await for_call
        assert down.value.code == AGENT_UNAVAILABLE and "UNAVAILABLE" in down.value.data["reason"]
        with pytest.raises(RpcError) as down:
            await anext(up.stream(target, "SendStreamingMessage", SEND, request_id=2, headers={}))
        assert down.value.code == AGENT_UNAVAILABLE


async def test_a_broken_stream_and_other_statuses() -> None:
    async with serve_grpc_agent(TaskEchoExecutor(), servicer=Servicer()) as (url, _raw, _rec):
        target = Target("raw", url, "1.0", binding="GRPC")
        async with Upstream(connect_timeout=2, read_timeout=5, max_body_bytes=1024) as up:
            stream = up.stream(target, "SendStreamingMessage", SEND, request_id=1, headers={})
            first = await anext(stream)
            assert first["result"]["task"]["id"] == "t"
            with pytest.raises(RpcError) as broken:
                await anext(stream)
            assert (
                broken.value.code == STREAM_FAILED and "going away" in broken.value.data["reason"]
            )

            big = {"message": {**SEND["message"], "parts": [{"text": "big"}]}}
            with pytest.raises(RpcError) as large:
                await up.call(target, "SendMessage", big, request_id=2, headers={})
            assert large.value.code == INVALID_AGENT_RESPONSE
            assert "exceeds 1024 bytes" in large.value.data["reason"]

            # a status without an ErrorInfo: the specification's table read backwards
            answer_ = await up.call(target, "SendMessage", SEND, request_id=3, headers={})
            assert answer_["error"] == {"code": TASK_NOT_FOUND, "message": "nothing here"}


async def test_push_through_the_router_to_a_grpc_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    """The push relay registers the router's config with a gRPC agent
    (CreateTaskPushNotificationConfig over the edge); the agent's notifications reach the
    client's webhook with the router's IDs."""
    got: asyncio.Queue[tuple[dict[str, str], Any]] = asyncio.Queue()

    async def webhook(request: web.Request) -> web.Response:
        await got.put((dict(request.headers), await request.json()))
        return web.Response(status=204)

    hook_app = web.Application()
    hook_app.router.add_post("/hook", webhook)
    hook = str((await aiohttp_server(hook_app)).make_url("/hook"))
    settings = make_settings(sqlite_url, push_allow_networks=["127.0.0.0/8"])
    server = await aiohttp_server(create_app(settings))
    executor, store = TaskEchoExecutor(gated=True), PushStore()
    async with serve_grpc_agent(executor, push=store) as (_url, raw, _recorder):
        await server.app[REGISTRY].register_card(raw, "pusher")
        client = await _client(http, base(server), "JSONRPC", streaming=False)
        task = await send(client, ask("hello push", return_immediately=True))
        config = TaskPushNotificationConfig(task_id=task.id, id="mine", url=hook, token="tok")
        made = await client.create_task_push_notification_config(config)
        assert (made.task_id, made.url) == (task.id, hook)
        executor.release()
        states = []
        while "TASK_STATE_COMPLETED" not in states:
            headers, body = await within(got.get())
            assert headers["X-A2A-Notification-Token"] == "tok"
            [event] = body.values()  # 1.0: one StreamResponse event per POST
            assert event.get("taskId", event.get("id")) == task.id  # the router's ID
            states.append(event.get("status", {}).get("state"))
    [given] = store.given  # the agent got the router's receiver, never the client's webhook
    assert given["url"].startswith(base(server) + "/push/") and given.get("token") != "tok"


ROOT = Path(__file__).resolve().parents[3]
_WITHOUT_GRPC = """
import asyncio, sys
sys.modules["grpc"] = None  # as if grpcio were not installed
import router.app
from router.choose import fits
from router.choose.choice import Target
from router.forward.upstream import Upstream
from router.protocol.errors import RpcError

async def main():
    async with Upstream(connect_timeout=1, read_timeout=1) as up:
        target = Target("g", "127.0.0.1:9", "1.0", binding="GRPC")
        try:
            await up.call(target, "GetTask", {"id": "t"}, request_id=1, headers={})
        except RpcError as exc:
            print(fits.BINDINGS, fits.NOT_REACHABLE, exc.code, exc.data["reason"], sep="|")

asyncio.run(main())
"""


async def test_without_the_grpc_extra_grpc_agents_are_not_reachable() -> None:
    root = ROOT
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WITHOUT_GRPC, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    bindings, reachable, code, reason = out.decode().strip().split("|")
    assert bindings == "('JSONRPC', 'HTTP+JSON')" and "a2a-switchboard[grpc]" in reachable
    assert int(code) == AGENT_UNAVAILABLE and "install a2a-switchboard[grpc]" in reason


async def test_through_the_outbound_proxy(tmp_path: Path) -> None:
    """A gRPC agent through the proxy: grpcio's own CONNECT to the agent's name, with the
    credentials, once the guard accepted it (a refused target never reaches the proxy); an
    https:// proxy refuses gRPC agents (grpcio speaks plain HTTP to a proxy) unless the
    no-proxy list names them."""
    async with (
        serve_grpc_agent(TaskEchoExecutor()) as (url, _raw, recorder),
        running_proxy(tmp_path, user="sb", password="s3cret", source="127.0.0.9") as proxy,
    ):
        via = OutboundProxy.parse(proxy.url.replace("://", "://sb:s3cret@"))
        policy = AddressPolicy(["127.0.0.1/32"])
        target = Target("tasks", url, "1.0", binding="GRPC")
        async with Upstream(connect_timeout=2, read_timeout=5, policy=policy, proxy=via) as up:
            sent = await up.call(target, "SendMessage", SEND, request_id=1, headers={})
            assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            stream = up.stream(target, "SendStreamingMessage", SEND, request_id=2, headers={})
            assert [event async for event in stream]
            elsewhere = Target("other", url.replace("127.0.0.1", "127.0.0.6"), "1.0", binding=GRPC)
            with pytest.raises(RpcError, match="unavailable") as refused:
                await up.call(elsewhere, "SendMessage", SEND, request_id=3, headers={})
            assert "127.0.0.6 (loopback)" in refused.value.data["reason"]
        tls_proxy = OutboundProxy.parse("https://127.0.0.1:1")
        async with Upstream(connect_timeout=2, read_timeout=5, proxy=tls_proxy) as up:
            with pytest.raises(RpcError) as refused:
                await up.call(target, "SendMessage", SEND, request_id=4, headers={})
            assert (
                "gRPC cannot go through the https:// outbound proxy"
                in (refused.value.data["reason"])
            )
        listed = OutboundProxy.parse("https://127.0.0.1:1", ["127.0.0.1"])
        async with Upstream(connect_timeout=2, read_timeout=5, proxy=listed) as up:
            assert (await up.call(target, "SendMessage", SEND, request_id=5, headers={}))["id"] == 5
        entries = proxy.entries()
    assert [(e["method"], e["target"], e["auth"]) for e in entries] == [
        ("CONNECT", url, "ok")
    ]  # one channel for the call and the stream
    assert len(recorder.metadata) == 3
