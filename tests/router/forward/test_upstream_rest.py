"""Agents reached over HTTP+JSON (router.forward.upstream_rest): official a2a-sdk 1.x agents
that serve only the REST binding, registered in a real app and called through the router by
the official clients on JSON-RPC and on REST; the agent's errors in the client's binding."""

from __future__ import annotations

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
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.app import ROUTER, create_app
from router.choose.choice import Target
from router.protocol.errors import TASK_NOT_FOUND
from tests.peers03 import client03_lines
from tests.support.helpers import base, make_settings
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
        with pytest.raises(Exception, match="no path for") as raised:
            await upstream.call(target, "tasks/nope", {}, request_id=9, headers={})
        assert raised.value.code == -32004  # type: ignore[attr-defined]


async def test_a_03_rest_only_agent(
    aiohttp_server: Any, sqlite_url: str, http: httpx.AsyncClient, sdk03_python: Path
) -> None:
    """A2A 0.3 over HTTP+JSON only, served by the 1.x SDK's 0.3 REST adapter: the 1.x client
    (the router translates) and the 0.3 client on JSON-RPC and on REST."""
    server = await _switchboard(aiohttp_server, sqlite_url)
    executor = TaskEchoExecutor()
    async with serve_sdk_agent(
        executor=executor, rest_only=True, compat=True, versions=("0.3",)
    ) as agent_url:
        record = await server.app[REGISTRY].register_url(agent_url, "old")
        assert [(i.binding, i.protocol_version) for i in record.card.interfaces] == [
            ("HTTP+JSON", "0.3")
        ]
        client = await _client(http, base(server), "JSONRPC", streaming=True)
        events = [event async for event in client.send_message(ask("echo translated"))]
        assert events[0].HasField("task")
        assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        got = await client.get_task(GetTaskRequest(id=events[0].task.id))
        assert "echo translated" in answer(got)
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=got.id))

        for transport in ("JSONRPC", "HTTP+JSON"):
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
