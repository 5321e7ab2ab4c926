"""router.forward.h1conn: answers read as they arrive (streams), over the lean client's pool,
against raw servers on 127.0.0.1 that answer byte for byte."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from router.forward.h1client import H1Error, H1Stream
from router.forward.h1conn import H1Conn, SilenceWatch
from tests.support.rawhttp import ANSWER, BODY, answer, pool

STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def read_all(body: H1Stream) -> bytes:
    got = b""
    while data := await body.read():
        got += data
    return got


async def test_a_stream_is_read_as_it_arrives_and_its_connection_kept(raw: Any) -> None:
    go = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(STREAM_HEAD + chunk(b"data: 1\n\n"))
        await go.wait()  # the first event is read before the second is sent
        writer.write(chunk(b"data: 2\n\n") + b"0\r\n\r\n")
        await server.read_request(reader)
        writer.write(answer())

    server = await raw(script)
    client = pool()
    try:
        head, body = await client.stream(server.url, [("Accept", "text/event-stream")], BODY)
        assert (head.status, head.reason, head.body) == (200, "OK", b"")
        assert head.headers["Content-Type"] == "text/event-stream"
        assert await body.read() == b"data: 1\n\n"
        go.set()
        assert await read_all(body) == b"data: 2\n\n"
        assert await body.read() == b""  # stays ended
        body.close()
        body.close()  # idempotent
        assert (await client.post(server.url, [], BODY)).body == ANSWER
    finally:
        await client.close()
    assert server.connections == 1
    assert b"Accept: text/event-stream\r\n" in server.requests[0]


async def test_a_stream_cut_short_fails_after_what_came(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(STREAM_HEAD + chunk(b"data: 1\n\n") + b"20\r\ndata: ")
        await writer.drain()  # then the connection closes in the middle of the chunk

    server = await raw(script)
    client = pool()
    try:
        _, body = await client.stream(server.url, [], BODY)
        got = b""
        with pytest.raises(aiohttp.ClientPayloadError, match="cut short"):
            while True:
                got += await body.read()
        assert got.startswith(b"data: 1\n\n")
        body.close()
    finally:
        await client.close()


async def test_a_stream_without_framing_ends_with_its_connection(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n")
        await writer.drain()
        writer.write(b"data: 2\n\n")

    server = await raw(script)
    client = pool()
    try:
        _, body = await client.stream(server.url, [], BODY)
        assert await read_all(body) == b"data: 1\n\ndata: 2\n\n"
        body.close()
        assert (await client.post(server.url, [], BODY)).status == 200
    except aiohttp.ServerDisconnectedError:
        pass  # the raw server's script answers one request per connection
    finally:
        await client.close()
    assert server.connections == 2  # not reused: the answer ended with the connection


async def test_interim_answers_and_trailers_around_a_stream(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + STREAM_HEAD)
            writer.write(chunk(b"data: 1\n\n") + b"0\r\nX-Checksum: 1\r\n\r\n")

    server = await raw(script)
    client = pool()
    try:
        for _ in range(2):
            head, body = await client.stream(server.url, [], BODY)
            assert head.status == 200 and "Link" not in head.headers
            assert await read_all(body) == b"data: 1\n\n"
            body.close()
    finally:
        await client.close()
    assert server.connections == 1


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (STREAM_HEAD[:-2] + b"X-Many: 1\r\n" * 128 + b"\r\n", "too large or too many"),
        (STREAM_HEAD[:-2] + b"X-Long: " + b"v" * 9000 + b"\r\n\r\n", "too large or too many"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n", "compressed answer"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n",
            "switch",
        ),
        (STREAM_HEAD + b"zz\r\n", "malformed HTTP answer"),
    ],
)
async def test_bad_heads_and_trailers_are_refused(raw: Any, head: bytes, reason: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(head)
        await reader.read()  # until the client gives up

    server = await raw(script)
    client = pool()
    try:
        with pytest.raises(H1Error, match=reason):
            _, body = await client.stream(server.url, [], BODY)
            await read_all(body)
    finally:
        await client.close()


async def test_a_trailer_that_never_ends_is_refused(raw: Any) -> None:
    go = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.read_request(reader)
        writer.write(STREAM_HEAD + chunk(b"data: 1\n\n"))
        await go.wait()
        writer.write(b"0\r\nX-Trailer: ")
        for _ in range(3):  # 90 KB of a trailer, read after the event that came before it
            writer.write(b"t" * 30000)
            await writer.drain()
        await reader.read()

    server = await raw(script)
    client = pool()
    try:
        _, body = await client.stream(server.url, [], BODY)
        assert await body.read() == b"data: 1\n\n"
        go.set()
        with pytest.raises(H1Error, match="a head or trailer too large"):
            await body.read()
    finally:
        await client.close()


async def test_an_answer_after_a_stream_in_its_read_is_never_read(raw: Any) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server.read_request(reader)
            writer.write(STREAM_HEAD + chunk(b"data: 1\n\n") + b"0\r\n\r\n" + answer(b"{}"))

    server = await raw(script)
    client = pool()
    try:
        for _ in range(2):
            _, body = await client.stream(server.url, [], BODY)
            assert await read_all(body) == b"data: 1\n\n"
            body.close()
    finally:
        await client.close()
    assert server.connections == 2  # the bytes beyond the stream closed its connection


class _Transport(asyncio.Transport):
    """Records what a connection asks of its transport."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.paused = False
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def close(self) -> None:
        self.closed = True


async def test_an_unread_stream_pauses_its_transport_until_read() -> None:
    conn = H1Conn(asyncio.get_running_loop(), max_body=1000)  # not a stream's bound
    watch = SilenceWatch(asyncio.get_running_loop(), 1.0)
    transport = _Transport()
    conn.connection_made(transport)
    opened = asyncio.ensure_future(conn.open(b"POST / HTTP/1.1\r\n\r\n", 5.0))
    await asyncio.sleep(0)  # the request is written
    assert transport.written == b"POST / HTTP/1.1\r\n\r\n"
    event = b"data: " + b"x" * 1000 + b"\n\n"
    conn.data_received(STREAM_HEAD + chunk(event) * 100)  # 100 KiB: under the high water
    assert (await opened).status == 200 and not transport.paused
    conn.data_received(chunk(event) * 40)  # 140 KiB unread: paused
    assert transport.paused
    assert await conn.read(5.0, watch) == event * 140
    assert not transport.paused  # read: resumed
    conn.data_received(b"0\r\n\r\n")
    assert await conn.read(5.0, watch) == b""
    assert conn.reusable and not transport.closed
    watch.close()
