"""The a2a-sdk 0.3.26 test peers: the official 0.3 client against the 0.3 echo agent and
against the repo's own 0.3 demo agent (translate), each in the cached 0.3 venv."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from pathlib import Path
from typing import Any

from seeds.demo_agents import start_demo_agents
from tests.peers03 import agent03, client03_lines, run_client03


def artifact_text(events: list[dict[str, Any]]) -> str:
    """The text of every artifact chunk in a stream, joined."""
    return "".join(
        part["text"]
        for event in events
        if event.get("kind") == "artifact-update"
        for part in event["artifact"]["parts"]
        if part["kind"] == "text"
    )


def task_text(task: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "") for artifact in task["artifacts"] for part in artifact["parts"]
    )


async def test_send_get_and_errors(sdk03_python: Path) -> None:
    async with agent03(sdk03_python) as agent:
        [task] = await client03_lines(
            sdk03_python,
            agent.base_url,
            "send",
            text="hello there",
            data={"n": 1},
            metadata={"m": "x"},
            extensions=["urn:x:1"],
            headers={"Authorization": "Bearer t"},
        )
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert task_text(task) == 'echo: hello there [data {"n": 1}]'

        [got] = await client03_lines(sdk03_python, agent.base_url, "get", task_id=task["id"])
        assert got["id"] == task["id"] and got["status"]["state"] == "completed"

        [missing] = await client03_lines(sdk03_python, agent.base_url, "get", task_id="nope")
        assert missing == {
            "error": {"type": "A2AClientJSONRPCError", "code": -32001, "message": "Task not found"}
        }
        [done] = await client03_lines(sdk03_python, agent.base_url, "cancel", task_id=task["id"])
        assert done["error"]["code"] == -32002

        # What the agent received: the card fetch, then JSON-RPC to the URL in the card.
        requests = await agent.wait_for("requests", 6)
        assert [r["path"] for r in requests[:2]] == ["/.well-known/agent-card.json", "/"]
        post = requests[1]
        assert post["body"]["method"] == "message/send"
        assert post["headers"]["x-a2a-extensions"] == "urn:x:1"
        assert post["headers"]["authorization"] == "Bearer t"
        assert "a2a-version" not in post["headers"]
        [execution] = await agent.wait_for("executions")
        assert execution["message"]["metadata"] == {"m": "x"}


async def test_file_part_and_request_metadata(sdk03_python: Path) -> None:
    png = base64.b64encode(b"\x89PNG fake").decode()
    async with agent03(sdk03_python) as agent:
        [task] = await client03_lines(
            sdk03_python,
            agent.base_url,
            "send",
            file_bytes=png,
            mime="image/png",
            request_metadata={"r": 1},
            accepted_output_modes=["text/plain"],
        )
        assert task_text(task) == f"echo: [file image/png b64len={len(png)}]"
        [execution] = await agent.wait_for("executions")
        assert execution["metadata"] == {"r": 1}
        body = (await agent.wait_for("requests", 2))[1]["body"]
        assert body["params"]["configuration"]["acceptedOutputModes"] == ["text/plain"]


async def test_stream_arrives_event_by_event(sdk03_python: Path) -> None:
    async with agent03(sdk03_python, gated=True) as agent:
        events: list[dict[str, Any]] = []
        async with contextlib.aclosing(
            run_client03(sdk03_python, agent.base_url, "stream", text="one two three")
        ) as stream:
            async for event in stream:
                events.append(event)
                if event.get("lastChunk"):
                    # Everything so far reached the client while the agent waits at its gate.
                    assert not any(e.get("final") for e in events)
                    agent.release()
        kinds = [e["kind"] for e in events]
        assert kinds == ["task", "status-update", *["artifact-update"] * 4, "status-update"]
        assert [e["status"]["state"] for e in events if "status" in e] == [
            "submitted",
            "working",
            "completed",
        ]
        assert events[-1]["final"] is True
        assert artifact_text(events) == "echo: one two three"
        assert {e.get("taskId", e.get("id")) for e in events} == {events[0]["id"]}


async def test_cancel_ends_the_open_stream(sdk03_python: Path) -> None:
    async with agent03(sdk03_python, gated=True) as agent:
        async with contextlib.aclosing(
            run_client03(sdk03_python, agent.base_url, "stream", text="stop me")
        ) as stream:
            task = await anext(stream)
            [canceled] = await client03_lines(
                sdk03_python, agent.base_url, "cancel", task_id=task["id"]
            )
            assert canceled["status"]["state"] == "canceled"
            rest = [event async for event in stream]
        assert rest[-1]["status"]["state"] == "canceled" and rest[-1]["final"] is True
        [got] = await client03_lines(sdk03_python, agent.base_url, "get", task_id=task["id"])
        assert got["status"]["state"] == "canceled"
        assert (await agent.wait_for("cancels"))[0]["task_id"] == task["id"]


async def test_resubscribe_after_a_dropped_connection(sdk03_python: Path) -> None:
    async with agent03(sdk03_python, gated=True) as agent:
        async with contextlib.aclosing(
            run_client03(sdk03_python, agent.base_url, "stream", text="again")
        ) as stream:
            task = await anext(stream)
        # The first client is gone; the task still waits at the gate.
        resubscribed = run_client03(sdk03_python, agent.base_url, "resubscribe", task_id=task["id"])
        async with contextlib.aclosing(resubscribed):
            first = asyncio.ensure_future(anext(resubscribed))  # starts the client
            await agent.wait_for("taps")  # it is attached to the task's events: open the gate
            agent.release()
            events = [await first] + [event async for event in resubscribed]
        assert events[-1]["status"]["state"] == "completed" and events[-1]["final"] is True
        assert {e["taskId"] for e in events} == {task["id"]}


async def test_input_required_then_second_message(sdk03_python: Path) -> None:
    async with agent03(sdk03_python) as agent:
        [first] = await client03_lines(sdk03_python, agent.base_url, "send", text="need input")
        assert first["status"]["state"] == "input-required"
        [second] = await client03_lines(
            sdk03_python,
            agent.base_url,
            "send",
            text="more",
            task_id=first["id"],
            context_id=first["contextId"],
        )
        assert second["id"] == first["id"] and second["status"]["state"] == "completed"
        assert task_text(second) == "echo: more"


async def test_errors_are_json_lines(sdk03_python: Path) -> None:
    async with agent03(sdk03_python) as agent:
        [unknown] = await client03_lines(
            sdk03_python, agent.base_url, "resubscribe", task_id="nope"
        )
        assert unknown["error"]["code"] == -32001
        url = agent.base_url
    [down] = await client03_lines(sdk03_python, url, "send", text="hi")
    assert down["error"]["type"] == "A2AClientHTTPError" and down["error"]["status"] == 503


async def test_demo_translate_agent(sdk03_python: Path) -> None:
    async with await start_demo_agents(ports={"currency": 0, "translate": 0, "caption": 0}) as demo:
        url = demo.urls["translate"]
        [card] = await client03_lines(sdk03_python, url, "card")
        assert card["protocolVersion"] == "0.3.0" and card["url"] == f"{url}/"
        text = "translate hello world to french"
        [task] = await client03_lines(sdk03_python, url, "send", text=text)
        assert task["status"]["state"] == "completed"
        assert "bonjour monde" in task_text(task)
        events = await client03_lines(sdk03_python, url, "stream", text=text)
        assert events[0]["kind"] == "task" and events[-1]["final"] is True
        assert events[-1]["status"]["state"] == "completed"
        assert "bonjour monde" in artifact_text(events)
        [got] = await client03_lines(sdk03_python, url, "get", task_id=events[0]["id"])
        assert got["status"]["state"] == "completed"
