"""A bad HTTP request is one log line, other errors keep their traceback: a real aiohttp server
on a random port, raw bytes over a socket, the records the ``aiohttp.server`` logger emits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp import web

from router.cli.logs import SERVER_LOGGER, BadRequestFilter

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.fixture
def bad_request_filter() -> Iterator[None]:
    server = logging.getLogger(SERVER_LOGGER)
    installed = BadRequestFilter()
    server.addFilter(installed)
    try:
        yield
    finally:
        server.removeFilter(installed)


@pytest.fixture
async def port(bad_request_filter: None) -> AsyncIterator[int]:
    async def boom(_request: web.Request) -> web.Response:
        raise RuntimeError("a bug in a handler")

    app = web.Application()
    app.router.add_get("/boom", boom)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def _send(port: int, data: bytes) -> bytes:
    """Send ``data`` and read the answer until the server closes the connection (it logs the
    error before it answers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=10)
    finally:
        writer.close()


def _server_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == SERVER_LOGGER]


async def test_http2_preface_is_one_info_line(port: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    answer = await _send(port, PREFACE)
    assert answer.startswith(b"HTTP/1.0 400 ") or answer.startswith(b"HTTP/1.1 400 ")
    [record] = _server_records(caplog)
    assert record.levelno == logging.INFO
    assert record.exc_info is None
    assert record.getMessage().startswith("bad HTTP request from 127.0.0.1: ")
    assert "\n" not in record.getMessage()
    assert "Traceback" not in caplog.text


async def test_bad_header_is_one_info_line_saying_what_was_sent(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    await _send(port, b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    [record] = _server_records(caplog)
    assert record.levelno == logging.INFO and record.exc_info is None
    message = record.getMessage()
    assert message.startswith("bad HTTP request from 127.0.0.1: ") and "Bad Header" in message
    assert "\n" not in message


async def test_bad_method_stays_at_debug_as_one_line(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp logs a bad method in a connection's first request (TLS on the HTTP port) at
    DEBUG: it stays there, without its traceback."""
    caplog.set_level(logging.DEBUG, logger=SERVER_LOGGER)
    await _send(port, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n")
    [record] = _server_records(caplog)
    assert record.levelno == logging.DEBUG and record.exc_info is None
    assert record.getMessage().startswith("bad HTTP request from 127.0.0.1: ")


async def test_bad_request_is_dropped_below_the_loggers_level(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    await _send(port, PREFACE)
    assert _server_records(caplog) == []


async def test_other_errors_keep_their_traceback(
    port: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    answer = await _send(port, b"GET /boom HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert b" 500 " in answer.split(b"\r\n")[0]
    [record] = _server_records(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
    assert "Traceback" in caplog.text
