"""The server's stop (``router.cli.running``): a real aiohttp server on 127.0.0.1 and raw TCP
clients, with a request on its way in when the stop begins; and what its answers say of their
connection (``Keep-Alive: timeout=N``, ``Connection: close``)."""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from router.cli.running import connection_headers, serve_until

ROOT = Path(__file__).resolve().parents[3]

HEAD = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
REQUEST = HEAD + b"hello"


class _Waiting(logging.Handler):
    """Sets ``event`` when the stop says it waits for requests on their way in."""

    def __init__(self) -> None:
        super().__init__()
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("stopped listening: waiting"):
            self.event.set()


@pytest.fixture
def waiting() -> Iterator[asyncio.Event]:
    handler = _Waiting()
    logger = logging.getLogger("switchboard")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield handler.event
    logger.setLevel(level)
    logger.removeHandler(handler)


@dataclass
class Server:
    """A server run by ``serve_until``: its port, its stop, its task, its accepted connections."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    accepted: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    handling: asyncio.Queue[None] = field(default_factory=asyncio.Queue)  # handler called
    port: int = 0
    task: asyncio.Task[None] | None = None

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A raw connection, once the server has accepted it."""
        connection = await asyncio.open_connection("127.0.0.1", self.port)
        await asyncio.wait_for(self.accepted.get(), 10)
        return connection

    async def stopped(self) -> None:
        assert self.task is not None
        await asyncio.wait_for(self.task, 30)


async def _serve(
    arrival_wait: float, idle_wait: float, keepalive: int = 3630
) -> AsyncIterator[Server]:
    server = Server()

    async def echo(request: web.Request) -> web.Response:
        server.handling.put_nowait(None)
        return web.Response(body=await request.read())

    async def refuse(request: web.Request) -> web.Response:  # answers without the body
        server.handling.put_nowait(None)
        return web.Response(status=401)

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_post("/refuse", refuse)
    connection_headers(app, server.stop, keepalive)
    runner = web.AppRunner(
        app, handle_signals=False, shutdown_timeout=5, keepalive_timeout=keepalive
    )
    await runner.setup()
    assert runner.server is not None
    made = runner.server.connection_made

    def connection_made(handler: Any, transport: Any) -> None:  # observed, not replaced
        made(handler, transport)
        server.accepted.put_nowait(None)

    runner.server.connection_made = connection_made  # type: ignore[method-assign]
    started = asyncio.Event()
    server.task = asyncio.create_task(
        serve_until(
            runner,
            lambda: [web.TCPSite(runner, "127.0.0.1", 0)],
            server.stop,
            lambda _text: started.set(),
            arrival_wait=arrival_wait,
            idle_wait=idle_wait,
        )
    )
    await asyncio.wait_for(started.wait(), 10)
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.stop.set()
        await server.stopped()


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async for running in _serve(arrival_wait=30, idle_wait=30):
        yield running


@pytest.fixture
async def impatient() -> AsyncIterator[Server]:
    async for running in _serve(arrival_wait=0.2, idle_wait=0.2):
        yield running


@pytest.fixture
async def brief() -> AsyncIterator[Server]:
    """A server that keeps an idle connection 1 s."""
    async for running in _serve(arrival_wait=30, idle_wait=30, keepalive=1):
        yield running


async def test_keep_alive_answers_announce_the_servers_idle_timeout(server: Server) -> None:
    reader, writer = await _answered_once(server)
    writer.write(REQUEST)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert b"\r\nKeep-Alive: timeout=3630\r\n" in head, head
    assert b"Connection:" not in head
    await reader.readexactly(5)
    writer.write(HEAD.replace(b"HTTP/1.1", b"HTTP/1.1\r\nConnection: close", 1) + b"hello")
    answer = await asyncio.wait_for(reader.read(), 10)  # the client's close: no Keep-Alive
    assert b"\r\nConnection: close\r\n" in answer and b"Keep-Alive" not in answer, answer
    writer.close()


async def test_an_answer_given_before_the_body_arrived_says_connection_close(
    server: Server,
) -> None:
    """The server will not read the rest as the next request, nor linger for it and then
    close without a word: it says so, and closes."""
    reader, writer = await _answered_once(server)
    writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)  # after DRAIN_WAIT
    assert head.startswith(b"HTTP/1.1 401 ") and b"\r\nConnection: close\r\n" in head
    assert b"Keep-Alive" not in head
    writer.write_eof()  # the client closes its side, as told: so does the server, at once
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    reader, writer = await server.connect()  # a whole body that the handler never reads
    writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nwhole")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 401 ") and b"Keep-Alive: timeout=3630" in head, head
    writer.close()


async def test_a_small_body_still_on_its_way_is_read_and_the_connection_kept(
    server: Server,
) -> None:
    """Answered before its body was read (a 401): the rest that the client is sending is
    read and dropped, and the connection stays for the next request."""
    reader, writer = await _answered_once(server)
    while not server.handling.empty():
        server.handling.get_nowait()  # the echo's
    writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf")
    await asyncio.wait_for(server.handling.get(), 10)  # the refusal is made
    writer.write(b"-rest!")  # the rest, once the handler has answered
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 401 ") and b"Keep-Alive: timeout=3630" in head, head
    assert b"Connection: close" not in head, head
    writer.write(REQUEST)  # the next request on the same connection
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 "), head
    writer.close()


async def test_an_idle_connection_is_closed_once_the_announced_timeout_has_passed(
    brief: Server,
) -> None:
    loop = asyncio.get_running_loop()
    reader, writer = await brief.connect()
    writer.write(REQUEST)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    await reader.readexactly(5)
    answered = loop.time()
    assert b"\r\nKeep-Alive: timeout=1\r\n" in head, head
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
    assert loop.time() - answered >= 1.0  # not before the time it announced
    writer.close()


async def test_a_connection_accepted_before_the_stop_gets_its_answer(
    server: Server, waiting: asyncio.Event
) -> None:
    """Its request arrives only after the server stopped listening (``run_app`` closed it)."""
    reader, writer = await server.connect()
    server.stop.set()
    await asyncio.wait_for(waiting.wait(), 10)
    with pytest.raises(OSError):  # no longer listening
        await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(REQUEST)
    _answered(await asyncio.wait_for(reader.read(), 30))  # then the server closes it
    await server.stopped()
    writer.close()


async def test_a_request_whose_body_arrives_after_the_stop_gets_its_answer(
    server: Server, waiting: asyncio.Event
) -> None:
    """Its head arrived and is being handled; aiohttp would drop the body arriving later, and
    the call would be cancelled unanswered after the shutdown's timeout."""
    reader, writer = await server.connect()
    writer.write(HEAD)
    await asyncio.wait_for(server.handling.get(), 10)
    server.stop.set()
    await asyncio.wait_for(waiting.wait(), 10)
    writer.write(b"hello")
    _answered(await asyncio.wait_for(reader.read(), 30))
    await server.stopped()
    writer.close()


async def test_a_connection_that_stays_silent_is_closed_after_the_wait(
    impatient: Server, waiting: asyncio.Event
) -> None:
    reader, writer = await impatient.connect()
    impatient.stop.set()
    await asyncio.wait_for(waiting.wait(), 10)
    assert await asyncio.wait_for(reader.read(), 30) == b""
    await impatient.stopped()
    writer.close()


async def test_a_busy_keep_alive_client_gets_its_next_call_answered(
    server: Server, waiting: asyncio.Event
) -> None:
    """Idle between two calls when the stop begins: its next call is answered (aiohttp closed
    the connection as it came), with ``Connection: close``."""
    reader, writer = await _answered_once(server)
    server.stop.set()
    await asyncio.wait_for(waiting.wait(), 10)
    writer.write(REQUEST)
    _answered(await asyncio.wait_for(reader.read(), 30))
    await server.stopped()
    writer.close()


async def test_a_quiet_keep_alive_connection_is_closed_after_the_idle_wait(
    impatient: Server, waiting: asyncio.Event
) -> None:
    reader, writer = await _answered_once(impatient)
    impatient.stop.set()
    await asyncio.wait_for(waiting.wait(), 10)
    assert await asyncio.wait_for(reader.read(), 30) == b""
    await impatient.stopped()
    writer.close()


async def test_a_stop_with_no_request_on_its_way_does_not_wait(server: Server) -> None:
    """No connection, or one whose request is done and closed: no wait (30 s here)."""
    reader, writer = await server.connect()
    writer.write(b"GET /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await asyncio.wait_for(reader.read(), 10)).startswith(b"HTTP/1.1 404 ")
    server.stop.set()
    await asyncio.wait_for(server.stopped(), 10)
    writer.close()


async def _answered_once(server: Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A keep-alive connection that has had one call answered (without ``Connection: close``)."""
    reader, writer = await server.connect()
    writer.write(REQUEST)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 ") and b"Connection: close" not in head, head
    assert b"Content-Length: 5" in head and await reader.readexactly(5) == b"hello"
    return reader, writer


def _answered(answer: bytes) -> None:
    """``answer`` is the echo's 200, with ``Connection: close``."""
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"hello", answer
    assert b"\r\nConnection: close" in head, head


STUBBORN = """
import asyncio, logging
from aiohttp import web
from router.cli.running import run

async def stubborn():
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # swallowed: the task never ends

async def start(app):
    app["task"] = asyncio.get_running_loop().create_task(stubborn())

logging.basicConfig(level=logging.INFO)
app = web.Application()
app.on_startup.append(start)
run(app, host="127.0.0.1", port=0, print=lambda text: print(text, flush=True), cancel_wait=0.5)
"""


def test_a_task_that_ignores_its_cancellation_does_not_keep_the_process_alive() -> None:
    """A real process: stopped by SIGTERM, it ends although a task swallows its cancellation,
    and says which task."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STUBBORN],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and "Running on" in proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "a task did not end within 0.5 s of its cancellation" in err and "stubborn" in err, err
