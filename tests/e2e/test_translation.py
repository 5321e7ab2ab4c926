"""Version translation end to end: the official SDK clients through the router to agents of the
other version, with no compatibility interface on the agent's side.

- the a2a-sdk 0.3.26 client (own venv) to an a2a-sdk 1.3 agent serving A2A 1.0 only;
- the a2a-sdk 1.3 client (in process) to an a2a-sdk 0.3.26 agent (own venv).

Each pairing: send, stream, get, cancel, resubscribe, multi-turn, file and data parts, and an
agent's error; the clients see router IDs only. The same-version pairings (0.3 with 0.3, 1.0
with 1.0) close the {0.3, 1.0} x {0.3, 1.0} matrix for send, stream, get and cancel, and show
that their JSON passes through untranslated.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.helpers.proto_helpers import new_data_part, new_raw_part, new_url_part
from a2a.types import (
    AgentSkill,
    CancelTaskRequest,
    GetTaskRequest,
    Part,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from aiohttp.test_utils import TestServer
from google.protobuf.json_format import MessageToDict

from registry.api import REGISTRY
from router.compat.carry import CARRY_KEY
from router.transport.routes import ROUTER
from tests.peers03 import Agent03, agent03, client03_lines, run_client03
from tests.support.helpers import base
from tests.support.sdk_clients import answer, ask, connect, send
from tests.support.sdk_peers import TaskEchoExecutor, serve_sdk_agent

PNG = b"\x89PNG\r\n\x1a\n fake"
PNG64 = base64.b64encode(PNG).decode()


async def upstream_ids(server: TestServer) -> set[str]:
    """Every task and context ID an agent made (which clients must never see)."""
    ids = server.app[ROUTER].ids
    found: set[str] = set()
    refs, _ = await ids.tasks.list_tasks(page_size=100)
    for ref in refs:
        found.add(ref.upstream_task_id)
        context = await ids.upstream_context(ref.context_id, ref.agent_id)
        if context:
            found.add(context)
    return found


async def assert_no_upstream_ids(server: TestServer, received: Any) -> None:
    text = json.dumps(received)
    leaked = [i for i in await upstream_ids(server) if i in text]
    assert not leaked, f"upstream ids reached the client: {leaked}"


def text_of(task: dict[str, Any], artifact_id: str = "echo") -> str:
    return "".join(
        part.get("text", "")
        for artifact in task.get("artifacts", [])
        if artifact["artifactId"] == artifact_id
        for part in artifact["parts"]
    )


# --- the 0.3 client and a 1.0-only agent -------------------------------------------------------

V1_SKILL = AgentSkill(
    id="echo-v1",
    name="Echo words (1.0)",
    description="Repeats the words it is sent, one streamed chunk per word.",
    tags=["echo"],
    examples=["echo hello world"],
    input_modes=["text/plain", "application/json", "image/png"],
    output_modes=["text/plain", "application/json", "image/png"],
)


@contextlib.asynccontextmanager
async def v1_agent(router: TestServer, *, gated: bool = False) -> AsyncIterator[TaskEchoExecutor]:
    """An a2a-sdk 1.3 task agent with a 1.0 JSON-RPC interface only, registered as ``echo1``."""
    executor = TaskEchoExecutor(gated=gated)
    async with serve_sdk_agent(executor=executor, skills=[V1_SKILL]) as url:
        record = await router.app[REGISTRY].register_url(url, "echo1")
        assert [i.protocol_version for i in record.card.interfaces] == ["1.0"]
        yield executor


async def test_03_client_sends_to_a_v1_agent(router: TestServer, sdk03_python: Path) -> None:
    async with v1_agent(router) as agent:
        [task] = await client03_lines(
            sdk03_python, base(router), "send", text="echo hello world", extensions=["urn:x:1"]
        )
        assert "error" not in task, task
        [got] = await client03_lines(sdk03_python, base(router), "get", task_id=task["id"])
        [missing] = await client03_lines(sdk03_python, base(router), "get", task_id="nope")
        [refused] = await client03_lines(sdk03_python, base(router), "cancel", task_id=task["id"])
        assert agent.extensions[0] == {"urn:x:1"}  # X-A2A-Extensions became A2A-Extensions
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert text_of(task) == "echo: echo hello world"
    assert [m["role"] for m in task["history"]] == ["user", "agent"]
    assert all(p["kind"] == "text" for m in task["history"] for p in m["parts"])
    assert task["status"]["timestamp"].endswith("Z")
    ref = await router.app[ROUTER].ids.task(task["id"])
    assert ref is not None and ref.agent_id == "echo1"
    assert got["kind"] == "task" and got["id"] == task["id"] and text_of(got) == text_of(task)
    assert missing["error"]["code"] == -32001
    # the 1.0 agent's TaskNotCancelable, its data in the 0.3 shape (an object)
    assert refused["error"]["code"] == -32002, refused
    assert isinstance(refused["error"].get("data", {}), dict)
    await assert_no_upstream_ids(router, [task, got, refused])


async def test_03_client_streams_from_a_v1_agent(router: TestServer, sdk03_python: Path) -> None:
    async with v1_agent(router, gated=True) as agent:
        events = run_client03(sdk03_python, base(router), "stream", text="echo one two")
        first = await anext(events)  # the agent is gated: events arrive live
        assert first["kind"] == "task" and first["status"]["state"] == "submitted"
        agent.release()
        rest = [event async for event in events]
    kinds = [event["kind"] for event in rest]
    assert kinds[0] == "status-update" and rest[0]["status"]["state"] == "working"
    assert rest[0]["final"] is False
    assert kinds.count("artifact-update") == 4  # echo: echo one two
    last = rest[-1]
    assert last["kind"] == "status-update" and last["status"]["state"] == "completed"
    assert last["final"] is True  # synthesized: a 1.0 stream has no final flag
    assert {event["taskId"] for event in rest} == {first["id"]}
    await assert_no_upstream_ids(router, [first, *rest])


async def test_03_client_cancels_a_v1_task(router: TestServer, sdk03_python: Path) -> None:
    async with v1_agent(router, gated=True) as agent:
        events = run_client03(sdk03_python, base(router), "stream", text="echo cancel me")
        first = await anext(events)
        [canceled] = await client03_lines(sdk03_python, base(router), "cancel", task_id=first["id"])
        rest = [event async for event in events]
        assert len(agent.cancels) == 1
    assert "error" not in canceled, canceled
    assert canceled["kind"] == "task" and canceled["id"] == first["id"]
    assert canceled["status"]["state"] == "canceled"
    assert rest[-1]["status"]["state"] == "canceled" and rest[-1]["final"] is True


async def test_03_client_resubscribes_to_a_v1_task(router: TestServer, sdk03_python: Path) -> None:
    async with v1_agent(router, gated=True) as agent:
        async with contextlib.aclosing(
            run_client03(sdk03_python, base(router), "stream", text="echo come back")
        ) as events:
            first = await anext(events)
        again = run_client03(sdk03_python, base(router), "resubscribe", task_id=first["id"])
        snapshot = await anext(again)  # 1.0 sends the task first: the agent is subscribed
        agent.release()
        rest = [event async for event in again]
    assert snapshot["kind"] == "task" and snapshot["id"] == first["id"]
    assert rest[-1]["kind"] == "status-update" and rest[-1]["final"] is True
    assert rest[-1]["status"]["state"] == "completed"
    assert {event["taskId"] for event in rest} == {first["id"]}


async def test_03_client_multi_turn_with_a_v1_agent(router: TestServer, sdk03_python: Path) -> None:
    async with v1_agent(router) as agent:
        [asked] = await client03_lines(
            sdk03_python, base(router), "send", text="echo but need input first"
        )
        assert asked["status"]["state"] == "input-required", asked
        assert asked["status"]["message"]["role"] == "agent"
        [done] = await client03_lines(
            sdk03_python,
            base(router),
            "send",
            text="echo more",
            task_id=asked["id"],
            context_id=asked["contextId"],
        )
        streamed = await client03_lines(
            sdk03_python, base(router), "stream", text="echo need input again"
        )
        assert len(agent.messages) == 3
    assert (done["id"], done["contextId"]) == (asked["id"], asked["contextId"])
    assert done["status"]["state"] == "completed" and text_of(done) == "echo: echo more"
    last = streamed[-1]
    assert last["status"]["state"] == "input-required" and last["final"] is True


async def test_03_client_file_and_data_parts_to_a_v1_agent(
    router: TestServer, sdk03_python: Path
) -> None:
    async with v1_agent(router) as agent:
        [task] = await client03_lines(
            sdk03_python,
            base(router),
            "send",
            text="echo these",
            file_bytes=PNG64,
            mime="image/png",
            file_name="p.png",
            data={"n": 1, "s": "x"},
        )
        [linked] = await client03_lines(
            sdk03_python,
            base(router),
            "send",
            text="echo a link",
            file_uri="https://example.com/p.png",
            mime="image/png",
        )
        received = agent.messages
    assert "error" not in task, task
    parts = received[0]["parts"]
    assert parts[0] == {"text": "echo these"}
    assert parts[1] == {"raw": PNG64, "mediaType": "image/png", "filename": "p.png"}
    assert parts[2] == {"data": {"n": 1.0, "s": "x"}}
    assert received[1]["parts"][1] == {"url": "https://example.com/p.png", "mediaType": "image/png"}
    assert received[0]["role"] == "ROLE_USER"
    # and back: the agent's raw and data parts in the 0.3 shape
    [echoed] = [a for a in task["artifacts"] if a["artifactId"] == "parts"]
    assert echoed["parts"][0] == {
        "kind": "file",
        "file": {"bytes": PNG64, "mimeType": "image/png", "name": "p.png"},
    }
    assert echoed["parts"][1] == {"kind": "data", "data": {"n": 1, "s": "x"}}
    [link] = [a for a in linked["artifacts"] if a["artifactId"] == "parts"]
    assert link["parts"][0]["file"] == {"uri": "https://example.com/p.png", "mimeType": "image/png"}


# --- the 1.x client and a 0.3 agent ------------------------------------------------------------


@contextlib.asynccontextmanager
async def v03_agent(
    router: TestServer, python: Path, *, gated: bool = False
) -> AsyncIterator[Agent03]:
    """The a2a-sdk 0.3.26 echo agent (its only interface is 0.3), registered as ``echo03``."""
    async with agent03(python, gated=gated, echo_parts=True) as agent:
        record = await router.app[REGISTRY].register_url(agent.base_url, "echo03")
        assert {i.protocol_version for i in record.card.interfaces} == {"0.3.0"}
        yield agent


def body(event: Any) -> dict[str, Any]:
    return MessageToDict(event)


async def test_v1_client_sends_to_a_03_agent(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python) as agent:
        client = await connect(http, base(router))
        task = await send(client, ask("echo hello world"))
        got = await client.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotCancelableError):  # the 0.3 agent's error, translated
            await client.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="nope"))
        requests = await agent.wait_for("requests", 2)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(task) == "echo: echo hello world"
    assert [m.role for m in task.history] == [1, 2]  # ROLE_USER, ROLE_AGENT
    assert got.id == task.id and answer(got) == answer(task)
    posted = [r["body"] for r in requests if r["method"] == "POST"]
    assert posted[0]["method"] == "message/send"  # the agent was spoken to in 0.3
    assert posted[0]["params"]["message"]["parts"] == [{"kind": "text", "text": "echo hello world"}]
    assert posted[0]["params"]["message"]["role"] == "user"
    await assert_no_upstream_ids(router, [body(task), body(got)])


async def test_v1_client_streams_from_a_03_agent(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python, gated=True) as agent:
        client = await connect(http, base(router), streaming=True)
        stream = client.send_message(ask("echo one two"))
        first = await anext(stream)
        assert first.HasField("task") and first.task.status.state == TaskState.TASK_STATE_SUBMITTED
        agent.release()
        rest = [event async for event in stream]
    kinds = [event.WhichOneof("payload") for event in rest]
    assert kinds[0] == "status_update" and kinds.count("artifact_update") == 4
    assert kinds[-1] == "status_update"
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert rest[-1].status_update.task_id == first.task.id
    assert "final" not in json.dumps([body(event) for event in rest])
    await assert_no_upstream_ids(router, [body(first), *map(body, rest)])


async def test_v1_client_cancels_a_03_task(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python, gated=True) as agent:
        streaming = await connect(http, base(router), streaming=True)
        stream = streaming.send_message(ask("echo cancel me"))
        first = await anext(stream)
        client = await connect(http, base(router))
        canceled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
        rest = [event async for event in stream]
        assert len(agent.cancels) == 1
    assert canceled.id == first.task.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED


async def test_v1_client_subscribes_to_a_03_task(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python, gated=True) as agent:
        client = await connect(http, base(router), streaming=True)
        stream = client.send_message(ask("echo come back"))
        first = await anext(stream)
        await stream.aclose()  # the client goes away mid-stream
        again = client.subscribe(SubscribeToTaskRequest(id=first.task.id))
        waiting = asyncio.ensure_future(anext(again))
        await agent.wait_for("taps", 1)  # the resubscription reached the agent
        agent.release()
        events = [await waiting] + [event async for event in again]
    last = events[-1]
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert last.status_update.task_id == first.task.id
    assert all(
        getattr(e, e.WhichOneof("payload")).task_id == first.task.id
        for e in events
        if not e.HasField("task")
    )


async def test_v1_client_multi_turn_with_a_03_agent(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python):
        client = await connect(http, base(router))
        asked = await send(client, ask("echo but need input first"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await send(client, ask("echo more", task_id=asked.id, context_id=asked.context_id))
        streaming = await connect(http, base(router), streaming=True)
        streamed = [e async for e in streaming.send_message(ask("echo need input again"))]
    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert "echo: echo more" in answer(done)
    assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_v1_client_file_and_data_parts_to_a_03_agent(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    async with v03_agent(router, sdk03_python) as agent:
        client = await connect(http, base(router))
        parts = [
            Part(text="echo these"),
            new_raw_part(PNG, "image/png", "p.png"),
            new_data_part({"n": 1, "s": "x"}, "application/json"),
            new_url_part("https://example.com/p.png", "image/png"),
        ]
        task = await send(client, ask(parts=parts))
        [execution] = await agent.wait_for("executions")
    got = execution["message"]["parts"]
    assert got[0] == {"kind": "text", "text": "echo these"}
    assert got[1] == {
        "kind": "file",
        "file": {"bytes": PNG64, "mimeType": "image/png", "name": "p.png"},
    }
    assert got[2] == {
        "kind": "data",
        "data": {"n": 1.0, "s": "x"},
        "metadata": {CARRY_KEY: {"mediaType": "application/json"}},
    }
    assert got[3] == {
        "kind": "file",
        "file": {"uri": "https://example.com/p.png", "mimeType": "image/png"},
    }
    [echoed] = [a for a in task.artifacts if a.artifact_id == "parts"]
    back = [body(p) for p in echoed.parts]
    assert back[0] == {"raw": PNG64, "mediaType": "image/png", "filename": "p.png"}
    assert back[1] == {"data": {"n": 1.0, "s": "x"}, "mediaType": "application/json"}
    assert back[2] == {"url": "https://example.com/p.png", "mediaType": "image/png"}


async def test_v1_list_tasks_asks_a_03_owner_in_03(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    """ListTasks (1.0 only) is answered by the router, which asks the 0.3 owner with
    tasks/get and shows the task in the 1.0 shape."""
    async with v03_agent(router, sdk03_python) as agent:
        task = await send(await connect(http, base(router)), ask("echo list me"))
        listing = await http.post(
            base(router) + "/",
            headers={"A2A-Version": "1.0"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "ListTasks",
                "params": {"includeArtifacts": True},
            },
        )
        requests = await agent.wait_for("requests", 3)
    [listed] = listing.json()["result"]["tasks"]
    assert listed["id"] == task.id and listed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "kind" not in json.dumps(listed)  # 1.0 shapes only
    echo = [a for a in listed["artifacts"] if a["artifactId"] == "echo"]
    assert "".join(p["text"] for p in echo[0]["parts"]) == "echo: echo list me"
    asked = [r["body"]["method"] for r in requests if r["method"] == "POST"]
    assert asked == ["message/send", "tasks/get"]


async def test_03_client_through_the_per_agent_endpoint_of_a_v1_agent(
    router: TestServer, sdk03_python: Path
) -> None:
    """The per-agent card of a 1.0-only agent offers 0.3 too: the router translates."""
    async with v1_agent(router):
        url = base(router) + "/agents/echo1"
        [card] = await client03_lines(sdk03_python, url, "card")
        [task] = await client03_lines(sdk03_python, url, "send", text="no skill words needed")
    assert card["url"] == url and card["protocolVersion"] == "0.3.0"
    assert task["status"]["state"] == "completed", task
    assert text_of(task) == "echo: no skill words needed"


async def test_03_client_gets_a_v1_agents_message_reply(
    router: TestServer, sdk03_python: Path
) -> None:
    """A 1.0 ``{"message": ...}`` result is a 0.3 ``kind: "message"`` one."""
    async with serve_sdk_agent() as url:  # answers each message with a message, 1.0 only
        await router.app[REGISTRY].register_url(url, "sdk-echo")
        [reply] = await client03_lines(sdk03_python, base(router), "send", text="say hello back")
        streamed = await client03_lines(sdk03_python, base(router), "stream", text="say hello")
    assert reply["kind"] == "message" and reply["role"] == "agent", reply
    assert reply["parts"] == [{"kind": "text", "text": "echo: say hello back"}]
    assert [event["kind"] for event in streamed] == ["message"]


# --- the same-version pairings: pass-through, for the whole {0.3, 1.0} x {0.3, 1.0} matrix ------


async def test_03_client_and_03_agent_pass_through(router: TestServer, sdk03_python: Path) -> None:
    async with v03_agent(router, sdk03_python, gated=True) as agent:
        events = run_client03(sdk03_python, base(router), "stream", text="echo stop me")
        first = await anext(events)
        [canceled] = await client03_lines(sdk03_python, base(router), "cancel", task_id=first["id"])
        rest = [event async for event in events]
        sending = asyncio.ensure_future(
            client03_lines(sdk03_python, base(router), "send", text="echo as it is")
        )
        await agent.wait_for("executions", 2)
        agent.release(2)  # one more in case the canceled execution still waits at the gate
        [task] = await sending
        [got] = await client03_lines(sdk03_python, base(router), "get", task_id=task["id"])
        requests = await agent.wait_for("requests", 4)
    assert canceled["status"]["state"] == "canceled" and rest[-1]["final"] is True
    assert task["status"]["state"] == "completed" and text_of(got) == "echo: echo as it is"
    posted = [r["body"] for r in requests if r["method"] == "POST"]
    assert [body["method"] for body in posted[:3]] == [
        "message/stream",
        "tasks/cancel",
        "message/send",
    ]
    sent = posted[2]["params"]["message"]
    assert sent["kind"] == "message" and sent["parts"] == [
        {"kind": "text", "text": "echo as it is"}
    ]


async def test_v1_client_and_v1_agent_pass_through(
    router: TestServer, http: httpx.AsyncClient
) -> None:
    async with v1_agent(router, gated=True) as agent:
        streaming = await connect(http, base(router), streaming=True)
        stream = streaming.send_message(ask("echo stop me"))
        first = await anext(stream)
        client = await connect(http, base(router))
        canceled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
        rest = [event async for event in stream]
        agent.release(2)  # one more in case the canceled execution still waits at the gate
        task = await send(client, ask("echo as it is"))
        got = await client.get_task(GetTaskRequest(id=task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answer(got) == "echo: echo as it is"
    assert agent.messages[-1]["parts"] == [{"text": "echo as it is"}]


# --- an a2a-sdk 0.3 agent's default final: false on input-required ----------------------------


async def sse_results(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> list[dict[str, Any]]:
    """Every ``data:`` event of an SSE answer, as JSON."""
    found: list[dict[str, Any]] = []
    async with http.stream("POST", url, json=body, headers=headers) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                found.append(json.loads(line[len("data: ") :]))
    return found


async def test_sdk_default_final_false_on_input_required(
    router: TestServer, sdk03_python: Path, http: httpx.AsyncClient
) -> None:
    """``TaskUpdater.requires_input()`` sends ``final: false``: a 1.0 client sees no carried
    ``final`` (the state implies the end), a v0.1 client's stream ends with ``final: true``."""
    async with agent03(sdk03_python, sdk_final=True) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "echo03")
        message = {
            "messageId": "m-1",
            "role": "ROLE_USER",
            "parts": [{"text": "echo need input please"}],
        }
        new = await sse_results(
            http,
            base(router) + "/",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendStreamingMessage",
                "params": {"message": message},
            },
            {"A2A-Version": "1.0"},
        )
        old = await sse_results(
            http,
            base(router) + "/",
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tasks/sendSubscribe",
                "params": {
                    "id": "v01-task-1",
                    "message": {
                        "role": "user",
                        "parts": [{"type": "text", "text": "echo need input too"}],
                    },
                },
            },
            {},
        )
        posted = await agent.wait_for("requests", 2)
    assert all(r["body"]["method"] == "message/stream" for r in posted if r["method"] == "POST")
    last = new[-1]["result"]["statusUpdate"]
    assert last["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert CARRY_KEY not in json.dumps(new)
    statuses = [e["result"] for e in old if "status" in e["result"]]
    assert statuses[-1]["status"]["state"] == "input-required"
    assert statuses[-1]["final"] is True
    assert statuses[-1]["id"] == "v01-task-1"
