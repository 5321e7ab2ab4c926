"""The server's stop (``router.cli.running``): a real aiohttp server on 127.0.0.1 and raw TCP
clients, with a request on its way in when the stop begins."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from router.cli.running import serve_until

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


async def _serve(arrival_wait: float) -> AsyncIterator[Server]:
    server = Server()

    async def echo(request: web.Request) -> web.Response:
        server.handling.put_nowait(None)
        return web.Response(body=await request.read())

    app = web.Application()
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5)
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
    async for running in _serve(arrival_wait=30):
        yield running


@pytest.fixture
async def impatient() -> AsyncIterator[Server]:
    async for running in _serve(arrival_wait=0.2):
        yield running


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
    answer = await asyncio.wait_for(reader.read(), 30)  # then the server closes it
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"hello", answer
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
    answer = await asyncio.wait_for(reader.read(), 30)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and body == b"hello", answer
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


async def test_a_connection_idle_after_a_request_does_not_hold_the_stop(
    server: Server, waiting: asyncio.Event
) -> None:
    """Idle between keep-alive requests: closed at once, with a 30 s wait for silent ones."""
    reader, writer = await server.connect()
    writer.write(REQUEST)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Length: 5" in head, head
    assert await reader.readexactly(5) == b"hello"
    server.stop.set()
    await server.stopped()  # well within the 30 s
    assert await reader.read() == b"" and not waiting.is_set()
    writer.close()
