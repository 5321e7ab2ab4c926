"""``switchboard serve`` stopped by SIGTERM or SIGINT while a stream is open: a real process
(configured by a ``SWITCHBOARD_CONFIG`` file), a real agent that streams, a real client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.support.helpers import card_v1
from tests.support.procout import ProcessOutput

ROOT = Path(__file__).resolve().parents[3]
TASK = {"id": "t-1", "contextId": "c-1"}


@dataclass
class SlowAgent:
    """An A2A 1.0 agent whose stream sends its first event, then waits for ``release``."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    gone: asyncio.Event = field(default_factory=asyncio.Event)  # the router hung up on it

    async def card(self, request: web.Request) -> web.Response:
        return web.json_response(card_v1(f"{request.scheme}://{request.host}"))

    async def rpc(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(result: dict[str, Any]) -> None:
            event = {"jsonrpc": "2.0", "id": body["id"], "result": result}
            await response.write(f"data: {json.dumps(event)}\n\n".encode())

        await send({"task": {**TASK, "status": {"state": "TASK_STATE_WORKING"}}})
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.gone.set()
            raise
        status = {"state": "TASK_STATE_COMPLETED"}
        await send({"statusUpdate": {"taskId": "t-1", "contextId": "c-1", "status": status}})
        await response.write_eof()
        return response


@pytest.fixture
async def agent(aiohttp_server: Any) -> AsyncIterator[tuple[SlowAgent, TestServer]]:
    slow = SlowAgent()
    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", slow.card)
    app.router.add_post("/a2a", slow.rpc)
    yield slow, await aiohttp_server(app)
    slow.release.set()


@contextlib.asynccontextmanager
async def _serve(
    tmp_path: Path, port: int, agent_url: str, grace: float
) -> AsyncIterator[tuple[Any, ProcessOutput]]:
    """Run ``switchboard serve`` configured by a TOML file, with the agent as its seed; killed
    at the end if it is still running."""
    (tmp_path / "seeds.toml").write_text(f'[[agents]]\nid = "slow"\nurl = "{agent_url}"\n')
    config = tmp_path / "switchboard.toml"
    config.write_text(
        f"port = {port}\n"
        f'database_url = "sqlite:///{tmp_path / "switchboard.db"}"\n'
        'allow_networks = ["127.0.0.1/32"]\n'
        f'seeds = ["{tmp_path / "seeds.toml"}"]\n'
        'matcher = "lexical"\n'
        "refresh = false\n"
        f"shutdown_grace = {grace}\n"
        "workers = 2\n"  # a supervisor and its workers, not one per CPU
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "serve",
        env={**env, "PYTHONPATH": str(ROOT), "SWITCHBOARD_CONFIG": str(config)},
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    log = ProcessOutput(proc.stderr)
    try:
        await log.wait_for(rf"Running on http://127\.0\.0\.1:{port}\b")
        yield proc, log
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _open_stream(http: aiohttp.ClientSession, port: int) -> aiohttp.ClientResponse:
    """A streaming call to the agent through the router, its first event read."""
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "rain in Paris?"}]}
    response = await http.post(
        f"http://127.0.0.1:{port}/agents/slow",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": message},
        },
        headers={"A2A-Version": "1.0", "Accept": "text/event-stream"},
    )
    assert response.status == 200 and response.content_type == "text/event-stream"
    first = await asyncio.wait_for(_next_data(response), 30)
    assert first is not None and first["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    return response


async def _next_data(response: aiohttp.ClientResponse) -> dict[str, Any] | None:
    """The next ``data:`` event of ``response``; None at the end of the stream."""
    while line := await response.content.readline():
        if line.startswith(b"data:"):
            return json.loads(line[5:])
    return None


async def _rest(response: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """Every further event until the stream ends (cleanly or cut off)."""
    events: list[dict[str, Any]] = []
    with contextlib.suppress(aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
        while (event := await _next_data(response)) is not None:
            events.append(event)
    return events


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_an_open_stream_finishes_within_the_grace_period(
    sig: signal.Signals,
    agent: tuple[SlowAgent, TestServer],
    tmp_path: Path,
    unused_tcp_port: int,
) -> None:
    slow, server = agent
    async with (
        _serve(tmp_path, unused_tcp_port, str(server.make_url("")), grace=60) as (proc, log),
        aiohttp.ClientSession() as http,
    ):
        response = await _open_stream(http, unused_tcp_port)
        proc.send_signal(sig)
        await log.wait_for(r"shutting down \(draining 1 stream\)")
        assert proc.returncode is None  # still there, waiting for the stream
        assert not response.content.at_eof()
        started = time.monotonic()
        slow.release.set()  # the agent finishes its task
        rest = await asyncio.wait_for(_rest(response), 30)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert [e["result"]["statusUpdate"]["status"]["state"] for e in rest] == [
        "TASK_STATE_COMPLETED"
    ]
    assert time.monotonic() - started < 30  # it did not wait for the 60 s grace
    assert code == 0, log.text
    await log.wait_for(r"\bstopped$")
    assert not slow.gone.is_set()
    assert "Traceback" not in log.text


async def test_a_stream_still_open_after_the_grace_period_is_closed(
    agent: tuple[SlowAgent, TestServer], tmp_path: Path, unused_tcp_port: int
) -> None:
    slow, server = agent
    async with (
        _serve(tmp_path, unused_tcp_port, str(server.make_url("")), grace=1) as (proc, log),
        aiohttp.ClientSession() as http,
    ):
        response = await _open_stream(http, unused_tcp_port)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        await log.wait_for(r"shutting down \(draining 1 stream\): up to 1 s to finish")
        rest = await asyncio.wait_for(_rest(response), 30)  # cut off, never released
        code = await asyncio.wait_for(proc.wait(), 30)
        waited = time.monotonic() - started
    assert rest == []
    assert 1 <= waited < 20, waited
    assert code == 0, log.text
    await log.wait_for(r"\bstopped$")
    await asyncio.wait_for(slow.gone.wait(), 10)  # the router closed the agent's stream too
    assert "Traceback" not in log.text


async def test_a_second_signal_stops_at_once(
    agent: tuple[SlowAgent, TestServer], tmp_path: Path, unused_tcp_port: int
) -> None:
    """While the stop waits for an open stream (60 s of grace), a second SIGINT ends it (the
    supervisor's and the worker's)."""
    slow, server = agent
    async with (
        _serve(tmp_path, unused_tcp_port, str(server.make_url("")), grace=60) as (proc, log),
        aiohttp.ClientSession() as http,
    ):
        response = await _open_stream(http, unused_tcp_port)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        await log.wait_for(r"shutting down \(draining 1 stream\)")
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(_rest(response), 30)  # cut off
        await asyncio.wait_for(proc.wait(), 30)
        waited = time.monotonic() - started
    assert waited < 30, waited
    await log.wait_for(r"stopping \d+ workers now: a second signal")
    await log.wait_for(r"stopping now: a second signal came while stopping")
    assert not slow.release.is_set()


async def test_no_stream_open(tmp_path: Path, unused_tcp_port: int, agent: Any) -> None:
    _, server = agent
    async with _serve(tmp_path, unused_tcp_port, str(server.make_url("")), grace=60) as (
        proc,
        log,
    ):
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
    assert code == 0, log.text
    await log.wait_for(r"shutting down \(draining 0 streams\)")
    await log.wait_for(r"\bstopped$")
    assert time.monotonic() - started < 30
