"""router.transport.grpcserver: the official a2a-sdk 1.x client over its gRPC transport, through
the router, to an SDK agent (JSON-RPC): send, stream, get, list, cancel, subscribe; errors as
gRPC statuses with ``google.rpc`` details; client authentication; off unless configured."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils.errors import TaskNotFoundError
from aiohttp.test_utils import TestClient
from google.rpc import error_details_pb2, status_pb2

from router.app import create_app
from router.transport.gate import GATE
from router.transport.routes import GRPC_ENDPOINT
from tests.support.helpers import AUTH, make_settings
from tests.support.sdk_clients import answer, ask, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

# the grpc extra (CI installs it with the test extra)
grpc = pytest.importorskip("grpc")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")

V1 = (("a2a-version", "1.0"),)
COMPLETED = a2a_pb2.TaskState.TASK_STATE_COMPLETED


async def _switchboard(
    aiohttp_client: Any, sqlite_url: str, url: str, **settings: Any
) -> TestClient:
    app = create_app(make_settings(sqlite_url, grpc_port=0, default_agent="echo", **settings))
    client = await aiohttp_client(app)
    made = await client.post("/api/v1/agents", json={"url": url, "id": "echo"}, headers=AUTH)
    assert made.status == 201, await made.text()
    return client


async def _grpc_client(switchboard: TestClient, *, streaming: bool = False) -> Client:
    """The SDK client made from the router's card, speaking gRPC only."""
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, str(switchboard.make_url("/"))).get_agent_card()
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    return ClientFactory(config).create(card)


def _target(switchboard: TestClient) -> str:
    return f"127.0.0.1:{switchboard.app[GRPC_ENDPOINT].port}"


def _status(error: grpc.aio.AioRpcError) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    """The google.rpc.Status of a failed call and its ErrorInfo."""
    trailer = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailer["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return status, info


@pytest.fixture
async def agent() -> AsyncIterator[tuple[str, TaskEchoExecutor]]:
    executor = TaskEchoExecutor(gated=True)
    async with serve_sdk_agent(executor=executor) as url:
        try:
            yield url, executor
        finally:
            executor.release(100)  # no task left waiting when the agent stops


async def test_the_card_lists_the_grpc_interface_and_send_get_list_work_over_it(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[str, TaskEchoExecutor]
) -> None:
    url, executor = agent
    switchboard = await _switchboard(aiohttp_client, sqlite_url, url)
    card = await (await switchboard.get("/.well-known/agent-card.json")).json()
    assert {"url": _target(switchboard), "protocolBinding": "GRPC", "protocolVersion": "1.0"} in (
        card["supportedInterfaces"]
    )
    client = await _grpc_client(switchboard)
    try:
        executor.release()
        task = await send(client, ask("hello there"))
        assert task.status.state == COMPLETED and answer(task) == "echo: hello there"
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id, history_length=1))
        assert got.id == task.id and got.status.state == COMPLETED
        listed = await client.list_tasks(a2a_pb2.ListTasksRequest())
        assert [t.id for t in listed.tasks] == [task.id]
    finally:
        await client.close()


async def test_stream_and_subscribe_deliver_every_event(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[str, TaskEchoExecutor]
) -> None:
    url, executor = agent
    switchboard = await _switchboard(aiohttp_client, sqlite_url, url)
    client = await _grpc_client(switchboard, streaming=True)
    unary = await _grpc_client(switchboard)
    try:
        executor.release()
        events = [event async for event in client.send_message(ask("one two"))]
        assert events[0].HasField("task")
        assert events[-1].status_update.status.state == COMPLETED
        chunks = [
            e.artifact_update.artifact.parts[0].text
            for e in events
            if e.HasField("artifact_update")
        ]
        assert "".join(chunks) == "echo: one two"
        # a task left waiting, then subscribed to: its current state first, then the rest
        task_id = (await send(unary, ask("later", return_immediately=True))).id
        seen = []
        async for event in client.subscribe(a2a_pb2.SubscribeToTaskRequest(id=task_id)):
            seen.append(event)
            if len(seen) == 1:
                assert event.task.id == task_id
                executor.release()
        assert seen[-1].status_update.status.state == COMPLETED
        assert seen[-1].status_update.task_id == task_id
    finally:
        await client.close()
        await unary.close()


async def test_cancel_and_an_unknown_task_is_not_found(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[str, TaskEchoExecutor]
) -> None:
    url, executor = agent
    switchboard = await _switchboard(aiohttp_client, sqlite_url, url)
    client = await _grpc_client(switchboard)
    try:
        task = await send(client, ask("wait for me", return_immediately=True))
        canceled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id))
        assert canceled.id == task.id
        assert canceled.status.state == a2a_pb2.TaskState.TASK_STATE_CANCELED
        assert executor.cancels  # the agent was asked, under its own task id
        with pytest.raises(TaskNotFoundError):
            await client.get_task(a2a_pb2.GetTaskRequest(id="no-such-task"))
    finally:
        await client.close()
    async with grpc.aio.insecure_channel(_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=V1)
        assert failed.value.code() == grpc.StatusCode.NOT_FOUND
        status, info = _status(failed.value)
        assert status.code == grpc.StatusCode.NOT_FOUND.value[0]
        assert (info.reason, info.domain) == ("TASK_NOT_FOUND", "a2a-protocol.org")
        assert "no-such-task" in failed.value.details()


async def test_bad_requests_get_the_json_rpc_bindings_checks_as_statuses(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[str, TaskEchoExecutor]
) -> None:
    url, _ = agent
    switchboard = await _switchboard(aiohttp_client, sqlite_url, url)
    async with grpc.aio.insecure_channel(_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as failed:  # a message without parts
            await stub.SendMessage(a2a_pb2.SendMessageRequest(), metadata=V1)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        _, info = _status(failed.value)
        assert info.reason == "INVALID_PARAMS"
        not_json = ask("x")
        not_json.metadata["score"] = float("nan")  # JSON has no NaN
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.SendMessage(not_json, metadata=V1)
        assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "NaN" in failed.value.details() or "nan" in failed.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.GetTask(a2a_pb2.GetTaskRequest(id="x"), metadata=(("a2a-version", "0.3"),))
        assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert _status(failed.value)[1].reason == "VERSION_NOT_SUPPORTED"
        with pytest.raises(grpc.aio.AioRpcError) as failed:  # no client auth: no extended card
            await stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=V1)
        assert failed.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert _status(failed.value)[1].reason == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
        with pytest.raises(grpc.aio.AioRpcError) as failed:  # a stream refused before it starts
            async for _ in stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="nope")):
                pass
        assert failed.value.code() == grpc.StatusCode.NOT_FOUND


async def test_client_auth_over_grpc_metadata(
    aiohttp_client: Any, sqlite_url: str, agent: tuple[str, TaskEchoExecutor]
) -> None:
    url, executor = agent
    switchboard = await _switchboard(
        aiohttp_client, sqlite_url, url, client_auth="api-key", rate_limit_streams=1
    )
    keys = {}
    for subject in ("alice", "bob"):
        made = await switchboard.post("/api/v1/clients", json={"subject": subject}, headers=AUTH)
        assert made.status == 201, await made.text()
        keys[subject] = (await made.json())["key"]
    alice = ClientCallContext(service_parameters={"X-API-Key": keys["alice"]})
    bob = ClientCallContext(service_parameters={"authorization": f"Bearer {keys['bob']}"})
    client = await _grpc_client(switchboard)
    try:
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await client.list_tasks(a2a_pb2.ListTasksRequest())
        executor.release()
        sent = [e async for e in client.send_message(ask("mine"), context=alice)]
        task = sent[0].task
        got = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id), context=alice)
        assert got.id == task.id
        with pytest.raises(TaskNotFoundError):  # bob's ID space has no such task
            await client.get_task(a2a_pb2.GetTaskRequest(id=task.id), context=bob)
    finally:
        await client.close()
    async with grpc.aio.insecure_channel(_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=(*V1, ("x-api-key", "bad")))
        assert failed.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert _status(failed.value)[1].reason == "UNAUTHENTICATED"
        auth = (*V1, ("x-api-key", keys["alice"]))
        card = await stub.GetExtendedAgentCard(a2a_pb2.GetExtendedAgentCardRequest(), metadata=auth)
        assert card.name == "Switchboard" and [s.id for s in card.skills] == ["sdk-echo"]
        # one stream slot: a second stream is refused while the first is open, and the slot
        # comes back when the client cancels the first
        closed = asyncio.Event()
        limits = switchboard.app[GATE].limits
        assert limits is not None
        give_back = limits.close_stream

        def close_stream(key: str) -> None:
            give_back(key)
            closed.set()

        limits.close_stream = close_stream  # type: ignore[method-assign]
        first = stub.SendStreamingMessage(ask("hold the line"), metadata=auth)
        assert (await first.read()).HasField("task")
        second = stub.SendStreamingMessage(ask("me too"), metadata=auth)
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await second.read()
        assert failed.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _status(failed.value)[1].reason == "RATE_LIMITED"
        closed.clear()
        first.cancel()
        await asyncio.wait_for(closed.wait(), 10)
        third = stub.SendStreamingMessage(ask("now me"), metadata=auth)
        assert (await third.read()).HasField("task")
        third.cancel()


async def test_off_by_default(aiohttp_client: Any, sqlite_url: str) -> None:
    switchboard = await aiohttp_client(create_app(make_settings(sqlite_url)))
    assert GRPC_ENDPOINT not in switchboard.app
    card = await (await switchboard.get("/.well-known/agent-card.json")).json()
    assert "GRPC" not in {i["protocolBinding"] for i in card["supportedInterfaces"]}


async def test_failed_authentications_over_grpc_are_throttled_by_the_peers_address(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    switchboard = await aiohttp_client(
        create_app(
            make_settings(
                sqlite_url, grpc_port=0, client_auth="api-key", rate_limit_auth_failures=0.01
            )
        )
    )
    async with grpc.aio.insecure_channel(_target(switchboard)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        codes = []
        for _ in range(2):
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await stub.ListTasks(a2a_pb2.ListTasksRequest(), metadata=(*V1, ("x-api-key", "x")))
            codes.append(failed.value.code())
        assert codes == [grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert _status(failed.value)[1].metadata["limit"] == "failed authentications"
