"""Legacy dialects through the real router: a raw aiohttp client speaking A2A v0.1 exactly as
seed 004 shows it (``tasks/send``, ``sessionId``, ``type``-tagged parts) and the ``A2A.``
-prefixed 1.0 names of seed 002, against real SDK agents.

The v0.1 tests run against agents that speak 0.3 (the a2a-sdk 0.3.26 echo agent, and the
a2a-sdk 1.3 echo agent's 0.3 compatibility interface) and against a2a-sdk 1.3 agents without
0.3 (``v1-only``), which the router reaches by translating the 0.3 call to 1.0 upstream.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState
from aiohttp.test_utils import TestServer

from registry.api import REGISTRY
from router.transport.routes import ROUTER
from tests.peers03 import agent03
from tests.support.helpers import facts
from tests.support.sdk_peers import serve_sdk_agent


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session


def url(server: TestServer, path: str = "/") -> str:
    return str(server.make_url(path))


async def call(
    http: aiohttp.ClientSession,
    target: str,
    method: str,
    params: dict[str, Any],
    request_id: Any = 1,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One JSON-RPC call, its JSON answer."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    async with http.post(target, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.content_type == "application/json"
        return await resp.json()


async def events(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    """The JSON of each ``data:`` event of an SSE response, as it arrives."""
    async for raw in resp.content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def send_params(text: str, task_id: str, session_id: str | None = None) -> dict[str, Any]:
    """tasks/send params exactly as seed 004 shows them."""
    params: dict[str, Any] = {
        "id": task_id,
        "acceptedOutputModes": ["text/plain"],
        "message": {"role": "user", "parts": [{"type": "text", "text": text}]},
    }
    if session_id is not None:
        params["sessionId"] = session_id
    return params


def texts(obj: Any) -> str:
    """Every text of every ``type: text`` part in ``obj``, in order, joined."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "text" and isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(obj)
    return "".join(found)


def assert_v01(obj: Any) -> None:
    """No 0.3 spelling reaches a v0.1 client: no ``kind``, no ``contextId``/``taskId``."""
    text = json.dumps(obj)
    for word in ('"kind"', '"contextId"', '"taskId"'):
        assert word not in text, (word, obj)


async def _upstream_ids(server: TestServer) -> set[str]:
    refs, _ = await server.app[ROUTER].ids.tasks.list_tasks(page_size=100)
    return {ref.upstream_task_id for ref in refs}


class TaskEchoExecutor(AgentExecutor):
    """An a2a-sdk 1.3 agent that works like the 0.3 echo agent (tests/peers03/agent03.py):
    a task, working, the echo as an artifact, completed; ``need input`` first stops in
    input-required and the next message on the task completes it."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None and context.task_id and context.context_id
        task = context.current_task
        resumed = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            task = new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
            await event_queue.enqueue_event(task)
        text = get_message_text(context.message)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if "need input" in text and not resumed:
            await updater.requires_input(new_text_message("What else?", None, task.context_id))
            return
        await updater.start_work()
        await updater.add_artifact([new_text_part(f"echo: {text}")], "echo", name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


@contextlib.asynccontextmanager
async def echo_agent(kind: str, router: TestServer, python: Path | None) -> AsyncIterator[Any]:
    """An echo agent registered with the router as ``echo``: ``sdk03`` (a2a-sdk 0.3.26,
    answers with a task), ``compat`` (a2a-sdk 1.3 with a 0.3 interface, answers with a
    message), ``tasks-compat`` / ``tasks-v1-only`` (a2a-sdk 1.3 answering with tasks, with
    and without a 0.3 interface) or ``v1-only`` (a2a-sdk 1.3, 1.0 only, answers with a
    message)."""
    if kind == "sdk03":
        assert python is not None
        async with agent03(python) as agent:
            await router.app[REGISTRY].register_url(agent.base_url, "echo")
            yield agent
        return
    if kind.startswith("tasks-"):
        # a real a2a-sdk 1.3 agent answering with tasks, 1.0 (and 0.3 too with compat)
        serving = serve_sdk_agent(compat=kind == "tasks-compat", executor=TaskEchoExecutor())
    else:
        serving = serve_sdk_agent(compat=kind == "compat")
    async with serving as agent_url:
        await router.app[REGISTRY].register_url(agent_url, "echo")
        yield None


AGENT_KINDS = [
    "sdk03",
    "compat",
    "tasks-compat",
    "v1-only",
    "tasks-v1-only",
]
# agents that answer with tasks (multi-turn, get, cancel, streams of updates)
TASK_AGENT_KINDS = [
    "sdk03",
    "tasks-compat",
    "tasks-v1-only",
]


@pytest.fixture
def python_for(request: pytest.FixtureRequest) -> Any:
    """The 0.3 venv's python, built only for tests that run the 0.3 agent."""

    def get(kind: str) -> Path | None:
        return request.getfixturevalue("sdk03_python") if kind == "sdk03" else None

    return get


# --- v0.1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", AGENT_KINDS)
async def test_v01_tasks_send_gets_an_answer(
    kind: str, router: TestServer, http: aiohttp.ClientSession, python_for: Any
) -> None:
    """The issue's 'done when': a v0.1 tasks/send client gets its answer, in v0.1."""
    task_id, session = str(uuid.uuid4()), str(uuid.uuid4())
    async with echo_agent(kind, router, python_for(kind)):
        params = send_params("echo hi", task_id, session)
        answer = await call(http, url(router), "tasks/send", params, 2)
        again = await call(http, url(router), "tasks/get", {"id": task_id}, 3)
    assert answer["id"] == 2 and "error" not in answer, answer
    task = answer["result"]
    assert task["id"] == task_id and task["sessionId"] == session
    assert task["status"]["state"] == "completed"
    assert "echo: echo hi" in texts(task)
    assert_v01(answer)
    leaked = [i for i in await _upstream_ids(router) if i in json.dumps(answer)]
    assert not leaked
    if kind in ("compat", "v1-only"):  # a message answer: no task to get afterwards
        assert again["error"]["code"] == -32001, again
    else:
        assert again["result"]["id"] == task_id, again
        assert again["result"]["status"]["state"] == "completed"
        assert_v01(again)


@pytest.mark.parametrize("kind", TASK_AGENT_KINDS)
async def test_v01_multi_turn_get_and_session(
    kind: str, router: TestServer, http: aiohttp.ClientSession, python_for: Any
) -> None:
    """The same client-chosen id continues the task; tasks/get reads it by that id."""
    task_id, session = str(uuid.uuid4()), str(uuid.uuid4())
    async with echo_agent(kind, router, python_for(kind)) as agent:
        first = await call(
            http, url(router), "tasks/send", send_params("echo need input now", task_id, session)
        )
        second = await call(
            http, url(router), "tasks/send", send_params("echo here it is", task_id, session)
        )
        query = {"id": task_id, "sessionId": session, "historyLength": 5}
        got = await call(http, url(router), "tasks/get", query)
        executions = list(agent.executions) if agent is not None else None
    assert first["result"]["status"]["state"] == "input-required", first
    assert first["result"]["status"]["message"]["parts"] == [{"type": "text", "text": "What else?"}]
    assert second["result"]["id"] == task_id and second["result"]["sessionId"] == session
    assert second["result"]["status"]["state"] == "completed", second
    assert texts(second["result"]["artifacts"]) == "echo: echo here it is"
    assert second["result"]["artifacts"][0]["index"] == 0
    assert got["result"]["id"] == task_id and got["result"]["status"]["state"] == "completed"
    assert [m["role"] for m in got["result"]["history"]][:1] == ["user"]
    for answer in (first, second, got):
        assert_v01(answer)
    if executions is not None:  # one upstream task, continued: the agent saw its id twice
        assert len(executions) == 2 and executions[0]["task_id"] == executions[1]["task_id"]
    router_task = await router.app[ROUTER].aliases.alias(task_id)
    ref = await router.app[ROUTER].ids.task(router_task or "")
    assert ref is not None and ref.context_id == session


@pytest.mark.parametrize("kind", TASK_AGENT_KINDS)
async def test_v01_send_subscribe_streams_v01_events(
    kind: str, router: TestServer, http: aiohttp.ClientSession, python_for: Any
) -> None:
    task_id = str(uuid.uuid4())
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tasks/sendSubscribe",
        "params": send_params("echo these words", task_id),
    }
    async with (
        echo_agent(kind, router, python_for(kind)),
        http.post(url(router), json=body) as resp,
    ):
        assert resp.content_type == "text/event-stream"
        got = [event async for event in events(resp)]
    assert all(e["id"] == 3 and "result" in e for e in got), got
    results = [e["result"] for e in got]
    assert all(r["id"] == task_id for r in results)
    assert_v01(got)
    statuses = [r for r in results if "status" in r]
    artifacts = [r["artifact"] for r in results if "artifact" in r]
    assert [s["status"]["state"] for s in statuses] == ["submitted", "working", "completed"]
    assert [s["final"] for s in statuses] == [False, False, True]
    assert results[-1]["final"] is True
    assert texts(artifacts) == "echo: echo these words"
    assert {a["index"] for a in artifacts} == {0}
    assert artifacts[0]["append"] is False and all(a["append"] for a in artifacts[1:])
    if kind == "sdk03":  # one chunk per word
        assert len(artifacts) == 4 and artifacts[-1]["lastChunk"] is True
    assert all(p["type"] == "text" for a in artifacts for p in a["parts"])


async def test_v01_cancel_by_the_clients_id(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    """A task held by the agent is canceled through its v0.1 id; the stream ends canceled."""
    task_id = str(uuid.uuid4())
    body = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "tasks/sendSubscribe",
        "params": send_params("echo hold this", task_id),
    }
    async with agent03(sdk03_python, gated=True) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "echo")
        async with http.post(url(router), json=body) as resp:
            stream = events(resp)
            first = await anext(stream)
            assert first["result"]["id"] == task_id
            canceled = await call(
                http, url(router), "tasks/cancel", {"id": task_id, "sessionId": "any"}, 5
            )
            rest = [event async for event in stream]
    assert canceled["id"] == 5 and canceled["result"]["id"] == task_id, canceled
    assert canceled["result"]["status"]["state"] == "canceled"
    assert_v01(canceled)
    assert rest[-1]["result"]["status"]["state"] == "canceled" and rest[-1]["result"]["final"]


async def test_v01_resubscribe_after_a_dropped_connection(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    """tasks/resubscribe by the client's id (a 0.3 name: no header, no sessionId) streams
    the rest of the task in v0.1."""
    task_id = str(uuid.uuid4())
    body = {
        "jsonrpc": "2.0",
        "id": 6,
        "method": "tasks/sendSubscribe",
        "params": send_params("echo come back", task_id),
    }
    again = {"jsonrpc": "2.0", "id": 7, "method": "tasks/resubscribe", "params": {"id": task_id}}
    async with agent03(sdk03_python, gated=True) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "echo")
        async with http.post(url(router), json=body) as resp:
            first = await anext(events(resp))
        async with http.post(url(router), json=again) as resp:
            await agent.wait_for("taps", 1)  # the resubscription reached the agent
            agent.release()
            rest = [event async for event in events(resp)]
    assert first["result"]["id"] == task_id
    assert all(e["id"] == 7 and e["result"]["id"] == task_id for e in rest), rest
    assert rest[-1]["result"]["final"] is True
    assert rest[-1]["result"]["status"]["state"] == "completed"
    assert_v01(rest)


async def test_v01_get_card_and_push_and_errors(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    async with echo_agent("sdk03", router, sdk03_python):
        card = await call(http, url(router), "agent/getCard", {})
        pinned = await call(http, url(router, "/agents/echo"), "agent/getCard", {})
        push_set = await call(
            http,
            url(router),
            "tasks/pushNotification/set",
            {"id": "t-1", "sessionId": "s", "url": "https://client.example/hook", "headers": {}},
        )
        push_get = await call(http, url(router), "tasks/pushNotification/get", {"id": "t-1"})
        unknown = await call(http, url(router), "tasks/get", {"id": "nope", "sessionId": "s"})
        bad = await call(
            http,
            url(router),
            "tasks/send",
            {"id": "t-2", "message": {"role": "user", "parts": [{"type": "image"}]}},
            headers={"A2A-Version": "1.0"},  # a stray header: v0.1 still answers in v0.1
        )
    result = card["result"]
    assert result["url"] == url(router)
    assert result["capabilities"] == {
        "streaming": True,
        "pushNotifications": True,  # relayed, or synthesized (docs/push.md)
        "stateTransitionHistory": False,
    }
    assert [s["id"] for s in result["skills"]] == ["echo03"]
    assert pinned["result"]["url"] == url(router, "/agents/echo")
    assert pinned["result"]["name"] == "Echo agent (a2a-sdk 0.3)"
    assert push_set["error"]["code"] == -32602, push_set  # no pushNotificationConfig object
    assert push_set["error"]["data"]["fields"] == ["pushNotificationConfig"]
    assert push_get["error"]["code"] == -32001, push_get  # no task t-1
    assert facts(push_get["error"]["data"]) == {"taskId": "t-1"}
    assert unknown["error"]["code"] == -32001
    assert facts(unknown["error"]["data"]) == {"taskId": "nope"}
    assert bad["error"]["code"] == -32602
    assert bad["error"]["data"]["fields"] == ["message.parts[0].type"]
    assert bad["error"]["data"]["fieldViolations"] == [
        {
            "field": "message.parts[0].type",
            "description": 'must be "text", "file" or "data", not "image"',
        }
    ]


async def test_v01_client_ids_do_not_disturb_03_clients(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    """A 0.3 client using the router's ids gets 0.3 answers, v0.1 aliases aside."""
    async with echo_agent("sdk03", router, sdk03_python):
        legacy = await call(http, url(router), "tasks/send", send_params("echo one", "my-own-id"))
        sent = await call(
            http,
            url(router),
            "message/send",
            {
                "message": {
                    "kind": "message",
                    "messageId": "m-1",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "echo two"}],
                }
            },
        )
        got03 = await call(http, url(router), "tasks/get", {"id": sent["result"]["id"]})
        got01 = await call(http, url(router), "tasks/get", {"id": "my-own-id"})
    assert legacy["result"]["id"] == "my-own-id"
    assert got03["result"]["kind"] == "task" and got03["result"]["id"] == sent["result"]["id"]
    assert got01["result"]["id"] == "my-own-id" and "kind" not in got01["result"]


# --- A2A.-prefixed 1.0 names ------------------------------------------------------------------


@pytest.mark.parametrize("with_header", [False, True])
async def test_prefixed_send_message_and_get_task(
    with_header: bool, router: TestServer, http: aiohttp.ClientSession
) -> None:
    headers = {"A2A-Version": "1.0"} if with_header else None
    async with echo_agent("compat", router, None):
        sent = await call(
            http,
            url(router),
            "A2A.SendMessage",
            {
                "message": {
                    "messageId": "m-1",
                    "role": "user",  # the draft's spelling
                    "parts": [{"text": "echo hello prefixed"}],
                }
            },
            headers=headers,
        )
        missing = await call(
            http, url(router), "A2A.GetTask", {"taskId": "no-such-task"}, headers=headers
        )
        bad = await call(http, url(router), "A2A.GetTask", {}, headers=headers)
        unknown = await call(http, url(router), "A2A.Frobnicate", {}, headers=headers)
    message = sent["result"]  # the draft's shape: the bare Message, its role "agent"
    assert message["role"] == "agent"
    assert message["parts"][0]["text"] == "echo: echo hello prefixed"
    assert missing["error"]["code"] == -32001
    assert missing["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"  # 1.0 error details
    assert bad["error"]["code"] == -32602 and isinstance(bad["error"]["data"], list)
    assert unknown["error"]["code"] == -32601
    assert "A2A.SendMessage" in unknown["error"]["data"][1]["value"]["supportedMethods"]


async def test_prefixed_send_and_get_of_a_task(
    router: TestServer, http: aiohttp.ClientSession
) -> None:
    """A2A.SendMessage (seed 002's ``structuredData`` part too) and A2A.GetTask by the
    draft's ``taskId``, without A2A-Version, answered in the draft's shapes: a bare Task
    named by ``taskId``, bare states, ``structuredData`` parts, roles ``user``/``agent``."""
    async with echo_agent("tasks-v1-only", router, None):
        sent = await call(
            http,
            url(router),
            "A2A.SendMessage",
            {
                "message": {
                    "messageId": "m-2",
                    "role": "user",
                    "parts": [{"text": "echo ok"}, {"structuredData": {"n": 1}}],
                },
                "configuration": {"blocking": True},
            },
        )
        task_id = sent["result"]["taskId"]
        got = await call(http, url(router), "A2A.GetTask", {"taskId": task_id})
    task = sent["result"]
    assert "id" not in task and task["status"]["state"] == "COMPLETED", sent
    assert task["artifacts"][0]["parts"][0]["text"].startswith("echo: echo ok")
    assert got["result"]["taskId"] == task_id
    assert got["result"]["status"]["state"] == "COMPLETED"
    assert got["result"]["history"][0]["role"] == "user"
    assert got["result"]["history"][0]["parts"][1] == {"structuredData": {"n": 1}}
    assert "TASK_STATE_" not in json.dumps([sent, got]) and "ROLE_" not in json.dumps(got)


async def test_prefixed_calls_to_a_03_only_agent(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    """A2A.-prefixed calls reach an a2a-sdk 0.3 agent translated (1.0 -> 0.3 and back) and
    are answered in the draft's shapes, streams included."""
    stream_body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "A2A.SendStreamingMessage",
        "params": {
            "message": {
                "messageId": "m-9",
                "role": "user",
                "parts": [{"text": "echo two words"}, {"structuredData": {"k": "v"}}],
            }
        },
    }
    async with echo_agent("sdk03", router, sdk03_python) as agent:
        sent = await call(
            http,
            url(router),
            "A2A.SendMessage",
            {"message": {"messageId": "m-8", "role": "user", "parts": [{"text": "echo hi"}]}},
        )
        got = await call(http, url(router), "A2A.GetTask", {"taskId": sent["result"]["taskId"]})
        async with http.post(url(router), json=stream_body) as resp:
            streamed = [event async for event in events(resp)]
        posted = [r["body"] for r in await agent.wait_for("requests", 3) if r["method"] == "POST"]
    assert [p["method"] for p in posted] == ["message/send", "tasks/get", "message/stream"]
    assert sent["result"]["status"]["state"] == "COMPLETED", sent
    assert sent["result"]["status"]["message"] == "done"  # the draft's status message: text
    assert got["result"]["taskId"] == sent["result"]["taskId"]
    results = [e["result"] for e in streamed]
    assert list(results[0]) == ["task"] and results[0]["task"]["status"]["state"] == "SUBMITTED"
    assert results[-1]["statusUpdate"]["status"]["state"] == "COMPLETED"
    assert "final" not in json.dumps(results) and "kind" not in json.dumps(results)
    assert "TASK_STATE_" not in json.dumps([sent, got, streamed])


async def test_v01_errors_name_the_clients_task_id(
    router: TestServer, http: aiohttp.ClientSession, sdk03_python: Path
) -> None:
    """An error about the task (here: its agent is gone) names it by the client's ID, never
    by the router's, for answers and for the one error event of a stream."""
    task_id = str(uuid.uuid4())
    async with echo_agent("sdk03", router, sdk03_python):
        sent = await call(http, url(router), "tasks/send", send_params("echo hi", task_id, "s"))
        router_task = await router.app[ROUTER].aliases.alias(task_id)
        await router.app[REGISTRY].remove("echo")
        got = await call(http, url(router), "tasks/get", {"id": task_id, "sessionId": "s"})
        again = {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tasks/resubscribe",
            "params": {"id": task_id},
        }
        async with http.post(url(router), json=again) as resp:
            streamed = [event async for event in events(resp)]
    assert sent["result"]["id"] == task_id and router_task is not None
    assert got["error"]["code"] == -32052, got
    assert got["error"]["data"]["taskId"] == task_id
    assert router_task not in json.dumps(got)
    [event] = streamed
    assert event["error"]["code"] == -32052 and event["error"]["data"]["taskId"] == task_id
    assert router_task not in json.dumps(streamed)
