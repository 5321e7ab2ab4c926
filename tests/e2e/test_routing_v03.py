"""The router with the official a2a-sdk 0.3 client (in its own virtual environment): live
streams, resubscribe after a dropped connection, an agent killed mid-stream, and a client
that goes away."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from aiohttp import web
from aiohttp.test_utils import TestServer
from google.protobuf.json_format import MessageToDict

from registry.api import REGISTRY
from router.app import create_app
from router.transport.routes import ROUTER
from seeds.demo_agents import start_demo_agents
from tests.peers03 import agent03, client03_lines, run_client03
from tests.support.helpers import base, make_settings
from tests.support.sdk_clients import ask, connect
from tests.support.sdk_peers import serve_sdk_agent


async def _upstream_ids(server: TestServer) -> set[str]:
    refs, _ = await server.app[ROUTER].ids.tasks.list_tasks(page_size=100)
    return {ref.upstream_task_id for ref in refs}


async def test_03_client_to_a_03_agent(router: TestServer, sdk03_python: Path) -> None:
    agents = await start_demo_agents(ports={"translate": 0, "currency": 0, "caption": 0})
    try:
        await router.app[REGISTRY].register_url(agents.urls["translate"], "translate")
        [task] = await client03_lines(
            sdk03_python, base(router), "send", text="translate hello world to french"
        )
    finally:
        await agents.close()
    assert task["kind"] == "task" and task["status"]["state"] == "completed", task
    assert "bonjour" in json.dumps(task).lower()
    ref = await router.app[ROUTER].ids.task(task["id"])
    assert ref is not None and ref.agent_id == "translate" and ref.upstream_task_id != task["id"]
    leaked = [i for i in await _upstream_ids(router) if i in json.dumps(task)]
    assert not leaked


@contextlib.asynccontextmanager
async def _echo_agent(router: TestServer, python: Path) -> AsyncIterator[Any]:
    async with agent03(python, gated=True) as agent:
        await router.app[REGISTRY].register_url(agent.base_url, "echo03")
        yield agent


async def test_stream_events_arrive_live(router: TestServer, sdk03_python: Path) -> None:
    """The first event reaches the client while the agent is still held before its end."""
    async with _echo_agent(router, sdk03_python) as agent:
        events = run_client03(sdk03_python, base(router), "stream", text="echo hello there")
        first = await anext(events)  # the agent is gated: it has not finished
        assert first["kind"] == "task" and first["status"]["state"] == "submitted"
        assert len(agent.executions) <= 1
        agent.release()
        rest = [event async for event in events]
    assert rest[-1]["kind"] == "status-update" and rest[-1]["final"] is True
    assert rest[-1]["status"]["state"] == "completed"
    assert {event["taskId"] for event in rest} == {first["id"]}
    leaked = [i for i in await _upstream_ids(router) if i in json.dumps([first, *rest])]
    assert not leaked


async def test_resubscribe_after_a_dropped_connection(
    router: TestServer, sdk03_python: Path
) -> None:
    async with _echo_agent(router, sdk03_python) as agent:
        async with contextlib.aclosing(
            run_client03(sdk03_python, base(router), "stream", text="echo resume me")
        ) as events:
            first = await anext(events)
        # the client went away mid-stream; it comes back through the router
        again = run_client03(sdk03_python, base(router), "resubscribe", task_id=first["id"])
        waiting = asyncio.ensure_future(anext(again))
        await agent.wait_for("taps", 1)  # the resubscription reached the agent
        agent.release()
        events = [await waiting] + [event async for event in again]
    assert events[-1]["final"] is True and events[-1]["status"]["state"] == "completed"
    assert {event["taskId"] for event in events} == {first["id"]}


async def test_agent_killed_mid_stream_ends_with_an_error(
    router: TestServer, sdk03_python: Path
) -> None:
    async with _echo_agent(router, sdk03_python) as agent:
        events = run_client03(sdk03_python, base(router), "stream", text="echo and then die")
        await anext(events)
        agent.kill()
        rest = [event async for event in events]
    assert rest[-1]["error"]["code"] == -32053, rest


async def _waiter_agent(aiohttp_server: Any) -> tuple[dict[str, Any], asyncio.Event]:
    """A real 0.3 agent that streams one event, then waits forever; the event is set when
    its connection is closed."""
    disconnected = asyncio.Event()

    async def rpc(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        task = {"kind": "task", "id": "up-1", "contextId": "up-ctx", "status": {"state": "working"}}
        event = {"jsonrpc": "2.0", "id": body["id"], "result": task}
        await response.write(f"data: {json.dumps(event)}\r\n\r\n".encode())
        try:
            await asyncio.Event().wait()  # never finishes on its own
        finally:
            disconnected.set()
        return response

    agent_app = web.Application()
    agent_app.router.add_post("/", rpc)
    agent = await aiohttp_server(agent_app)
    card = {
        "name": "Waiter",
        "description": "Streams forever.",
        "version": "1",
        "url": str(agent.make_url("/")),
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "wait", "name": "Wait forever", "tags": ["wait"]}],
    }
    return card, disconnected


_WAIT = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "message/stream",
    "params": {
        "message": {
            "role": "user",
            "messageId": "m-1",
            "parts": [{"kind": "text", "text": "please wait forever"}],
        }
    },
}


async def test_client_going_away_closes_the_upstream_stream(
    router: TestServer, aiohttp_server: Any
) -> None:
    """When the client leaves, the router closes its connection to the agent."""
    card, disconnected = await _waiter_agent(aiohttp_server)
    await router.app[REGISTRY].register_card(card, "waiter")
    async with aiohttp.ClientSession() as http, http.post(base(router) + "/", json=_WAIT) as resp:
        first = await resp.content.readline()
        assert first.startswith(b"data: ") and b"up-1" not in first
    await asyncio.wait_for(disconnected.wait(), timeout=10)


async def test_a_silent_stream_notices_the_client_left_without_handler_cancellation(
    aiohttp_server: Any, sqlite_url: str
) -> None:
    """Under a server that does not cancel handlers, the keep-alive ping that fails is what
    tells the router the client left; it must then close the agent's stream."""
    card, disconnected = await _waiter_agent(aiohttp_server)
    app = create_app(make_settings(sqlite_url, sse_keepalive=0.05))
    runner = web.AppRunner(app, handler_cancellation=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        await app[REGISTRY].register_card(card, "waiter")
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}/"
        async with aiohttp.ClientSession() as http, http.post(url, json=_WAIT) as resp:
            line = await resp.content.readline()
            while line.startswith(b": ping"):  # a keep-alive may come first on a busy machine
                line = await resp.content.readline()
            assert line.startswith(b"data: ")
        await asyncio.wait_for(disconnected.wait(), timeout=10)
    finally:
        await runner.cleanup()


async def test_both_sdk_clients_through_the_router_to_a_compat_sdk_agent(
    router: TestServer, sdk03_python: Path
) -> None:
    """A real a2a-sdk 1.3 agent in 0.3-compatibility mode: the 1.x client reaches its 1.0
    interface and the 0.3 client its 0.3 interface, both through the router."""
    async with serve_sdk_agent(compat=True) as agent_url, httpx.AsyncClient(timeout=10) as http:
        await router.app[REGISTRY].register_url(agent_url, "sdk-echo")
        client = await connect(http, base(router))
        events = [event async for event in client.send_message(ask("say hello back"))]
        lines = await client03_lines(sdk03_python, base(router), "send", text="say hello back")
    assert "echo: say hello back" in json.dumps([MessageToDict(e) for e in events])
    assert "error" not in lines[0] and "echo: say hello back" in json.dumps(lines), lines


async def test_03_client_gets_each_demo_query_answered_by_the_right_agent(
    router: TestServer, sdk03_python: Path
) -> None:
    """The issue's 'done when' with the demo agents: an unmodified 0.3 SDK client pointed at
    the router's card reaches every demo agent (currency and caption also serve 0.3)."""
    import base64

    from tests.support.images import png

    agents = await start_demo_agents(ports={"translate": 0, "currency": 0, "caption": 0})
    try:
        for name, url in agents.urls.items():
            await router.app[REGISTRY].register_url(url, name)
        queries = [
            ("translate", {"text": "translate hello world to french"}, "bonjour"),
            ("currency", {"text": "convert 100 USD to EUR"}, "92.00 EUR"),
            (
                "caption",
                {
                    "text": "what is in this picture?",
                    "file_bytes": base64.b64encode(png(64, 48)).decode(),
                    "mime": "image/png",
                },
                "64x48",
            ),
        ]
        for agent, options, expected in queries:
            [task] = await client03_lines(sdk03_python, base(router), "send", **options)
            assert expected in json.dumps(task), (agent, task)
            ref = await router.app[ROUTER].ids.task(task["id"])
            assert ref is not None and ref.agent_id == agent
    finally:
        await agents.close()


async def test_served_cards_load_in_the_03_client_with_empty_and_false_values(
    router: TestServer, sdk03_python: Path
) -> None:
    """The 0.3 SDK requires some members a signer would drop (tags: [], capabilities):
    the router serves cards whole and signs what verifiers compute from them."""
    card = {
        "name": "Plain",
        "description": "",
        "version": "1",
        "url": "http://127.0.0.1:9/rpc",
        "protocolVersion": "0.3.0",
        "preferredTransport": "JSONRPC",
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "plain", "name": "Plain skill", "description": "x", "tags": []}],
    }
    await router.app[REGISTRY].register_card(card, "plain")
    for url in (base(router), base(router) + "/agents/plain"):
        [served] = await client03_lines(sdk03_python, url, "card")
        assert "error" not in served, served
        assert served["skills"][0]["tags"] == []
