"""router.transport.grpctenant: one agent addressed over gRPC with the tenant ``agents/<id>``.

The official a2a-sdk 1.x client over its gRPC transport, through the router (the gRPC row of
the compatibility table): to a 0.3 JSON-RPC agent (the 0.3 SDK, translated), a 1.0 HTTP+JSON
agent and a 0.3 HTTP+JSON agent, each by the routing endpoint and by the per-agent tenant its
card lists; push configs and notifications over gRPC; the tenant parsed, never passed on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.types import a2a_pb2
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from aiohttp.test_utils import TestServer, unused_port
from google.rpc import error_details_pb2, status_pb2

from registry.api import REGISTRY
from router.app import create_app
from router.transport.grpctenant import agent_tenant, pinned_by_tenant
from router.transport.routes import GRPC_ENDPOINT
from tests.peers03 import agent03
from tests.support.helpers import base, make_settings
from tests.support.sdk_clients import answer, ask, send
from tests.support.sdk_peers import PushStore, TaskEchoExecutor, serve_sdk_agent
from tests.support.streams import within
from tests.support.webhooks import completed_1_0, serve_webhook

grpc = pytest.importorskip("grpc")  # the grpc extra (CI installs it with the test extra)
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")

V1 = (("a2a-version", "1.0"),)
State = a2a_pb2.TaskState


def test_the_tenant_names_the_agent_and_keeps_the_agents_own() -> None:
    assert agent_tenant("echo") == "agents/echo"
    assert agent_tenant("echo", "acme/eu") == "agents/echo/acme/eu"
    assert pinned_by_tenant("agents/echo") == ("echo", "")
    assert pinned_by_tenant("agents/echo/acme/eu") == ("echo", "acme/eu")
    assert pinned_by_tenant("agents/") == ("", "")  # no such agent, rather than the root
    for other in ("", "acme", "agents", "agentsx/echo", "/agents/echo"):
        assert pinned_by_tenant(other) == (None, other)
    assert pinned_by_tenant(None) == (None, "")


class TenantEcho(TaskEchoExecutor):
    """The task echo agent, keeping the tenant each execution was called with."""

    def __init__(self, gated: bool = False) -> None:
        super().__init__(gated)
        self.tenants: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.tenants.append(context.tenant)
        await super().execute(context, event_queue)


async def _switchboard(aiohttp_server: Any, db_url: str, **settings: Any) -> TestServer:
    port = unused_port()  # known before it starts: gRPC calls name it to agents (push)
    settings.setdefault("push_allow_networks", ["127.0.0.0/8"])
    app = create_app(
        make_settings(db_url, grpc_port=0, public_url=f"http://127.0.0.1:{port}", **settings)
    )
    return await aiohttp_server(app, port=port)


async def _grpc_client(card: a2a_pb2.AgentCard, *, streaming: bool = False) -> Client:
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    return ClientFactory(config).create(card)


async def _card(http: httpx.AsyncClient, url: str) -> a2a_pb2.AgentCard:
    return await A2ACardResolver(http, url).get_agent_card()


def _grpc_interfaces(card: a2a_pb2.AgentCard) -> list[a2a_pb2.AgentInterface]:
    return [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]


def _target(server: TestServer) -> str:
    return f"127.0.0.1:{server.app[GRPC_ENDPOINT].port}"


# --- the row: a 1.x gRPC client, three kinds of agent --------------------------------------


@dataclass
class Peer:
    """A running agent as the row needs it: let ``n`` waiting tasks complete; wait until a
    subscription reached it (given the subscription's first event, still coming)."""

    url: str
    card_v1: bool  # its card is 1.0-shaped (the router's copy lists gRPC with the tenant)
    release: Callable[[int], None]
    attached: Callable[[asyncio.Future[Any]], Awaitable[Any]]
    seen: Callable[[], str]  # everything the agent was sent, for what must not be there


async def _first_event(waiting: asyncio.Future[Any]) -> Any:
    return await within(asyncio.shield(waiting))  # a 1.x agent's snapshot: it is attached


@pytest.fixture(params=["jsonrpc-0.3", "http+json-1.0", "http+json-0.3"])
async def peer(request: pytest.FixtureRequest, sdk03_python: Path) -> AsyncIterator[Peer]:
    """The row's agents: the 0.3 SDK on JSON-RPC, the 1.x SDK on HTTP+JSON (1.0), the 0.3
    SDK on HTTP+JSON."""
    kind = request.param
    if kind == "http+json-1.0":
        executor = TenantEcho(gated=True)
        async with serve_sdk_agent(executor=executor, rest_only=True) as url:
            try:
                yield Peer(
                    url, True, executor.release, _first_event, lambda: json.dumps(executor.tenants)
                )
            finally:
                executor.release(100)  # no task left waiting when the agent stops
        return
    async with agent03(sdk03_python, gated=True, rest=kind == "http+json-0.3") as old:

        async def tapped(_waiting: asyncio.Future[Any]) -> Any:
            return await old.wait_for("taps", len(old.taps) + 1)

        yield Peer(old.base_url, False, old.release, tapped, lambda: json.dumps(old.requests))


async def _exercise(unary: Client, streaming: Client, peer: Peer) -> None:
    """send, stream, get, list, an agent error, subscribe and cancel, as one client sees
    them."""
    peer.release(1)
    task = await send(unary, ask("echo plain call"))
    assert task.status.state == State.TASK_STATE_COMPLETED and "plain call" in answer(task)
    peer.release(1)
    events = [event async for event in streaming.send_message(ask("echo streamed words"))]
    assert events[0].HasField("task")
    assert events[-1].status_update.status.state == State.TASK_STATE_COMPLETED
    streamed = events[0].task.id
    got = await unary.get_task(a2a_pb2.GetTaskRequest(id=streamed))
    assert got.id == streamed and "streamed words" in answer(got)
    listed = await unary.list_tasks(a2a_pb2.ListTasksRequest(page_size=50))
    assert {task.id, streamed} <= {t.id for t in listed.tasks}
    with pytest.raises(TaskNotCancelableError):  # the agent's own error: it is completed
        await unary.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
    # a task left working: the client goes away, subscribes again, the task completes
    stream = streaming.send_message(ask("echo come back"))
    first = await within(anext(aiter(stream)))
    await stream.aclose()
    subscribed = streaming.subscribe(a2a_pb2.SubscribeToTaskRequest(id=first.task.id))
    waiting = asyncio.ensure_future(anext(aiter(subscribed)))
    await peer.attached(waiting)
    peer.release(1)
    seen = [await within(waiting)] + [event async for event in subscribed]
    assert seen[-1].status_update.status.state == State.TASK_STATE_COMPLETED
    assert seen[-1].status_update.task_id == first.task.id
    # and one canceled while it works
    working = await send(unary, ask("echo cancel me", return_immediately=True))
    canceled = await unary.cancel_task(a2a_pb2.CancelTaskRequest(id=working.id))
    assert canceled.id == working.id and canceled.status.state == State.TASK_STATE_CANCELED


async def test_the_grpc_row_by_the_root_and_by_the_agents_tenant(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, peer: Peer
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, default_agent="row")
    await server.app[REGISTRY].register_url(peer.url, "row")
    root = await _card(http, base(server))
    # through the routing endpoint (the default agent)
    unary, streaming = await _grpc_client(root), await _grpc_client(root, streaming=True)
    try:
        await _exercise(unary, streaming, peer)
    finally:
        await unary.close()
        await streaming.close()
    # through the agent's own card: its gRPC interface names the agent by its tenant
    card = await _card(http, f"{base(server)}/agents/row")
    grpc_interfaces = _grpc_interfaces(card)
    if not peer.card_v1:  # a 0.3-shaped card lists none: a client names the tenant itself
        assert not grpc_interfaces
        assert (
            "supportedInterfaces"
            not in (await http.get(f"{base(server)}/agents/row/.well-known/agent-card.json")).json()
        )
        card = await _card(http, base(server))
        for interface in _grpc_interfaces(card):
            interface.tenant = agent_tenant("row")
    else:
        [interface] = grpc_interfaces
        assert (interface.url, interface.protocol_version, interface.tenant) == (
            _target(server),
            "1.0",
            "agents/row",
        )
    unary, streaming = await _grpc_client(card), await _grpc_client(card, streaming=True)
    try:
        await _exercise(unary, streaming, peer)
    finally:
        await unary.close()
        await streaming.close()
    assert "agents/" not in peer.seen()  # the router's address is never the agent's tenant


# --- pinning ----------------------------------------------------------------------------------


def _status(error: grpc.aio.AioRpcError) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    """The google.rpc.Status of a failed call and its ErrorInfo."""
    trailer = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailer["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return status, info


async def test_the_tenant_pins_the_agent_as_its_http_endpoint_does(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    first, second = TenantEcho(), TenantEcho()
    async with (
        serve_sdk_agent(executor=first) as first_url,
        serve_sdk_agent(executor=second) as second_url,
    ):
        server = await _switchboard(aiohttp_server, sqlite_url, default_agent="first")
        await server.app[REGISTRY].register_url(first_url, "first")
        raw = (await http.get(second_url + "/.well-known/agent-card.json")).json()
        for interface in raw["supportedInterfaces"]:  # its card names a tenant of its own
            interface["tenant"] = "acme"
        await server.app[REGISTRY].register_card(raw, "second")
        card = await _card(http, f"{base(server)}/agents/second")
        assert [(i.url, i.tenant) for i in _grpc_interfaces(card)] == [
            (_target(server), "agents/second/acme")
        ]
        pinned = await _grpc_client(card)
        root = await _grpc_client(await _card(http, base(server)))
        try:
            task = await send(pinned, ask("echo to the second"))  # the default is the first
            assert "to the second" in answer(task)
            assert (second.tenants, first.tenants) == (["acme"], [])  # its own tenant, only
            other = await send(root, ask("echo to the first"))
            assert first.tenants == [""]
            listed = await pinned.list_tasks(a2a_pb2.ListTasksRequest())
            assert [t.id for t in listed.tasks] == [task.id]  # the second agent's tasks only
            with pytest.raises(TaskNotFoundError):  # the first agent's task: not here
                await pinned.get_task(a2a_pb2.GetTaskRequest(id=other.id))
        finally:
            await pinned.close()
            await root.close()
        async with grpc.aio.insecure_channel(_target(server)) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            # no own tenant after the agent's id: none given to it
            await stub.SendMessage(_with_tenant(ask("echo bare"), "agents/second"), metadata=V1)
            assert second.tenants[-1] == ""
            # a tenant not under agents/ at the root: as it came, to the chosen agent
            await stub.SendMessage(_with_tenant(ask("echo at root"), "acme"), metadata=V1)
            assert first.tenants[-1] == "acme"
            # an unknown agent: NOT_FOUND, with the HTTP per-agent endpoint's reason
            for tenant in ("agents/ghost", "agents/ghost/acme", "agents/"):
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await stub.SendMessage(_with_tenant(ask("x"), tenant), metadata=V1)
                assert failed.value.code() == grpc.StatusCode.NOT_FOUND
                status, info = _status(failed.value)
                assert status.code == grpc.StatusCode.NOT_FOUND.value[0]
                assert info.reason == "AGENT_UNAVAILABLE"
                assert "no agent with id" in failed.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                request = a2a_pb2.SubscribeToTaskRequest(id=task.id, tenant="agents/ghost")
                async for _ in stub.SubscribeToTask(request, metadata=V1):
                    pass
            assert failed.value.code() == grpc.StatusCode.NOT_FOUND
            assert "'ghost'" in failed.value.details()
        http_answer = await http.post(
            base(server) + "/agents/ghost/",
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
            headers={"A2A-Version": "1.0"},
        )
        error = http_answer.json()["error"]
        assert (error["data"][0]["reason"], error["message"]) == (
            info.reason,
            failed.value.details(),
        ), error  # the same reason and explanation as over HTTP


def _with_tenant(request: a2a_pb2.SendMessageRequest, tenant: str) -> a2a_pb2.SendMessageRequest:
    request.tenant = tenant
    return request


async def test_no_grpc_interface_on_agent_cards_when_the_binding_is_off(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with serve_sdk_agent(executor=TaskEchoExecutor()) as url:
        await server.app[REGISTRY].register_url(url, "plain")
        card = (await http.get(f"{base(server)}/agents/plain/.well-known/agent-card.json")).json()
    assert "GRPC" not in {i["protocolBinding"] for i in card["supportedInterfaces"]}


# --- push over gRPC ---------------------------------------------------------------------------


async def test_push_configs_and_notifications_over_grpc(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient
) -> None:
    hook, webhook = await serve_webhook(aiohttp_server)
    server = await _switchboard(aiohttp_server, sqlite_url, default_agent="pusher")
    executor, store = TaskEchoExecutor(gated=True), PushStore()
    async with serve_sdk_agent(executor=executor, push=store) as agent_url:
        await server.app[REGISTRY].register_url(agent_url, "pusher")
        root = await _grpc_client(await _card(http, base(server)))
        pinned = await _grpc_client(await _card(http, f"{base(server)}/agents/pusher"))
        try:
            # the config RPCs, about a task left working
            task = await send(root, ask("hello push", return_immediately=True))
            config = a2a_pb2.TaskPushNotificationConfig(
                task_id=task.id, id="mine", url=webhook, token="client-token"
            )
            made = await root.create_task_push_notification_config(config)
            assert (made.task_id, made.id, made.url) == (task.id, "mine", webhook)
            got = await root.get_task_push_notification_config(
                a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
            )
            assert (got.url, got.token) == (webhook, "client-token")
            listed = await pinned.list_task_push_notification_configs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in listed.configs] == ["mine"]
            executor.release()
            seen = await hook.until(completed_1_0)
            await root.delete_task_push_notification_config(
                a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
            )
            listed = await root.list_task_push_notification_configs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert list(listed.configs) == []
            # a config given with the message, by the agent's tenant
            request = ask("hello again", return_immediately=True)
            request.configuration.task_push_notification_config.CopyFrom(
                a2a_pb2.TaskPushNotificationConfig(url=webhook, token="on-send")
            )
            again = await send(pinned, request)
            executor.release()
            seen_again = await hook.until(completed_1_0)
        finally:
            await root.close()
            await pinned.close()
    for (headers, body), (token, task_id) in [
        *((s, ("client-token", task.id)) for s in seen),
        *((s, ("on-send", again.id)) for s in seen_again),
    ]:
        assert headers["X-A2A-Notification-Token"] == token
        [event] = body.values()  # 1.0: one StreamResponse event per POST
        assert event.get("taskId", event.get("id")) == task_id  # the router's ID
    # the agent was given the router's receiver, never the client's webhook or token
    assert len(store.given) == 2
    assert all(given["url"].startswith(base(server) + "/push/") for given in store.given)
    assert webhook not in str(store.given) and "client-token" not in str(store.given)
