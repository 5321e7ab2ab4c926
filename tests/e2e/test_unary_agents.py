"""Streaming clients through the router's root to agents that do not stream: the official
a2a-sdk agents with ``capabilities.streaming: false`` (1.x in process, 0.3 in its own venv),
which refuse streaming methods, reached by the official 1.x client, the official 0.3 client and
a v0.1 ``tasks/sendSubscribe`` client; a task still working when the agent's unary answer comes
back, streamed on until it completes; subscribing to a running task (docs/routing.md)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from a2a.types import AgentCapabilities, SubscribeToTaskRequest, TaskState

from registry.api import REGISTRY
from tests.peers03 import agent03, client03_lines, run_client03
from tests.support.helpers import base
from tests.support.sdk_clients import ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

FAST = {"push_poll_interval": 0.01, "push_poll_cap": 0.05}
COMPLETED = TaskState.TASK_STATE_COMPLETED


def _text(events: Any) -> str:
    """Every text of every artifact in ``events`` (JSON), in order."""
    found: list[str] = []

    def walk(node: Any, in_artifact: bool) -> None:
        if isinstance(node, dict):
            if in_artifact and isinstance(node.get("text"), str):
                found.append(node["text"])
            for key, value in node.items():
                walk(value, in_artifact or key == "artifact")
        elif isinstance(node, list):
            for value in node:
                walk(value, in_artifact)

    walk(events, False)
    return "".join(found)


def _last_artifact(events: list[Any]) -> str:
    """The text of the last artifact update of SDK stream events (each polled change of an
    artifact comes whole)."""
    updates = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    return "".join(part.text for part in updates[-1].parts)


async def _send_subscribe(url: str, text: str) -> list[dict[str, Any]]:
    """A v0.1 client's ``tasks/sendSubscribe`` (seed 004's shapes): its events' results."""
    params = {
        "id": str(uuid.uuid4()),
        "message": {"role": "user", "parts": [{"type": "text", "text": text}]},
    }
    body = {"jsonrpc": "2.0", "id": 3, "method": "tasks/sendSubscribe", "params": params}
    async with httpx.AsyncClient(timeout=30) as http, http.stream("POST", url, json=body) as answer:
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        lines = [line async for line in answer.aiter_lines() if line.startswith("data: ")]
    results = [json.loads(line[len("data: ") :])["result"] for line in lines]
    assert all(r["id"] == params["id"] for r in results), results
    assert "kind" not in json.dumps(results) and "taskId" not in json.dumps(results)
    return results


async def test_a_1_0_agent_that_does_not_stream(
    start_router: Any, sqlite_url: str, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    router = await start_router(sqlite_url, **FAST)
    executor = TaskEchoExecutor(gated=True)
    quiet = AgentCapabilities(streaming=False)
    async with serve_sdk_agent(executor=executor, capabilities=quiet) as agent_url:
        await router.app[REGISTRY].register_url(agent_url, "quiet")
        client = await connect(http, base(router), streaming=True)

        # the 1.x client: a task answered at once, still working, streamed until it completes
        events = client.send_message(ask("echo these words", return_immediately=True))
        first = await anext(aiter(events))
        assert first.HasField("task") and first.task.status.state == TaskState.TASK_STATE_SUBMITTED
        executor.release()
        rest = [event async for event in events]
        assert rest[-1].status_update.status.state == COMPLETED
        assert {e.status_update.task_id for e in rest if e.HasField("status_update")} == {
            first.task.id
        }
        assert _last_artifact(rest) == "echo: echo these words"

        # subscribing to a running task: the task first, then what follows
        unary = await connect(http, base(router))
        waiting = await send(unary, ask("echo later", return_immediately=True))
        seen = []
        async for event in client.subscribe(SubscribeToTaskRequest(id=waiting.id)):
            seen.append(event)
            if len(seen) == 1:
                assert event.task.id == waiting.id
                executor.release()
        assert seen[-1].status_update.status.state == COMPLETED

        # the 0.3 client (translated): the task, its artifact, its final status
        executor.release()
        lines = await client03_lines(sdk03_python, base(router), "stream", text="echo from 03")
        assert [line.get("kind") for line in lines] == ["task", "artifact-update", "status-update"]
        assert lines[-1]["status"]["state"] == "completed" and lines[-1]["final"] is True
        assert _text(lines) == "echo: echo from 03"

        # a v0.1 client
        executor.release()
        results = await _send_subscribe(base(router) + "/", "echo from v01")
    states = [r["status"]["state"] for r in results if "status" in r]
    assert states == ["submitted", "completed"] and results[-1]["final"] is True
    assert _text(results) == "echo: echo from v01"


async def test_a_0_3_agent_that_does_not_stream(
    start_router: Any, sqlite_url: str, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    router = await start_router(sqlite_url, **FAST)
    async with agent03(sdk03_python, gated=True, streaming=False) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "quiet03")
        url = base(router)

        # the 0.3 client: the task, its artifact, its final status
        agent.release()
        lines = await client03_lines(sdk03_python, url, "stream", text="echo these words")
        assert [line.get("kind") for line in lines] == ["task", "artifact-update", "status-update"]
        assert lines[-1]["status"]["state"] == "completed" and lines[-1]["final"] is True
        assert _text(lines) == "echo: echo these words"

        # the 1.x client (translated): answered at once, polled until it completes
        client = await connect(http, url, streaming=True)
        events = client.send_message(ask("echo from v1", return_immediately=True))
        first = await anext(aiter(events))
        assert first.HasField("task")
        agent.release()
        rest = [event async for event in events]
        assert rest[-1].status_update.status.state == COMPLETED
        assert _last_artifact(rest) == "echo: echo from v1"

        # tasks/resubscribe on a running task, with the 0.3 client
        params = {
            "message": {"kind": "message", "role": "user", "messageId": "m-r",
                        "parts": [{"kind": "text", "text": "echo resubscribed"}]},
            "configuration": {"blocking": False},
        }  # fmt: skip
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}
        async with httpx.AsyncClient(timeout=30) as raw:  # no A2A-Version: 0.3
            task_id = (await raw.post(url + "/", json=body)).json()["result"]["id"]
        again = run_client03(sdk03_python, url, "resubscribe", task_id=task_id)
        snapshot = await anext(again)
        assert snapshot["kind"] == "task" and snapshot["id"] == task_id
        agent.release()
        followed = [line async for line in again]
        assert followed[-1]["status"]["state"] == "completed" and followed[-1]["final"] is True

        # a v0.1 client
        agent.release()
        results = await _send_subscribe(url + "/", "echo from v01")
        methods = {r["body"]["method"] for r in agent.requests if r["method"] == "POST"}
    assert methods == {"message/send", "tasks/get"}  # it was never asked to stream
    assert results[-1]["status"]["state"] == "completed" and results[-1]["final"] is True
    assert _text(results) == "echo: echo from v01"
