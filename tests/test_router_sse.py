"""router.sse: the incremental event-stream parser and the client-side SSE writer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from aiohttp import ClientSession, web

from router.sse import SseError, SseEvent, SseParser, SseWriter

WIRE = Path(__file__).parent / "fixtures" / "wire"
STREAM_FIXTURES = sorted(p.name for p in WIRE.glob("*.out") if "stream" in p.name) + sorted(
    p.name for p in WIRE.glob("*subscribe*.out")
)
T = TypeVar("T")


async def within(aw: Awaitable[T], seconds: float = 5.0) -> T:
    """Await ``aw`` but fail fast instead of hanging the test run."""
    return await asyncio.wait_for(aw, seconds)


def wire_body(name: str) -> bytes:
    """The SSE body of a captured response (the HTTP head, when recorded, removed)."""
    raw = (WIRE / name).read_bytes()
    if raw.startswith(b"HTTP/"):
        raw = raw.split(b"\r\n\r\n", 1)[1]
    return raw


def wire_data(body: bytes) -> list[str]:
    """The text of every ``data:`` line of a captured body (each event there has one).

    The subscribe captures were cut at 200 characters per line (their data is not complete
    JSON); the stream captures are whole.
    """
    return [
        line[len("data: ") :] for line in body.decode().splitlines() if line.startswith("data: ")
    ]


def parse_all(chunks: list[bytes], **limits: int) -> list[SseEvent]:
    parser = SseParser(**limits)
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.feed_eof())
    return events


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# --- SseParser ---------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\r\n", b"\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = eol.join([b"data: one", b"", b"data: two", b"", b""])
    for chunks in ([stream], bytewise(stream)):
        assert [e.data for e in parse_all(chunks)] == ["one", "two"]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []  # the LF belongs to the CR: no blank line yet
    assert parser.feed(b"\r") == []
    assert [e.data for e in parser.feed(b"\ndata: b\r\n\r\n")] == ["a", "b"]


def test_events_dispatch_at_the_blank_line_not_before() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"n": 1}\r\n') == []
    assert parser.feed(b"\r\n") == [SseEvent(event="message", data='{"n": 1}')]


def test_comments_are_ignored_and_counted() -> None:
    parser = SseParser()
    events = parser.feed(b": ping\r\n\r\n: another\r\ndata: x\r\n:mid-event\r\n\r\n")
    assert [e.data for e in events] == ["x"]
    assert parser.comments == 3


def test_event_type_id_and_retry() -> None:
    events = parse_all([b"event: error\nid: 7\nretry: 1500\ndata: {}\n\ndata: next\n\n"])
    assert events[0] == SseEvent(event="error", data="{}", id="7", retry=1500)
    assert events[1].event == "message"  # the type is per event
    assert events[1].id == "7"  # the last event id persists


def test_multi_line_data_is_joined_with_newlines() -> None:
    events = parse_all([b'data: {"a":\r\ndata:1,\r\ndata\r\ndata:  "b": 2}\r\n\r\n'])
    assert events[0].data == '{"a":\n1,\n\n "b": 2}'
    assert json.loads(events[0].data) == {"a": 1, "b": 2}


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert parse_all([b"\r\n\r\nevent: error\r\n\r\nid: 1\r\n\r\ndata: x\r\n\r\n"]) == [
        SseEvent(event="message", data="x", id="1")
    ]


def test_last_event_without_blank_line_is_dispatched_at_eof() -> None:
    parser = SseParser()
    assert [e.data for e in parser.feed(b"data: a\n\ndata: b")] == ["a"]
    assert [e.data for e in parser.feed_eof()] == ["b"]
    parser = SseParser()
    assert parser.feed(b"data: c\r") == []
    assert [e.data for e in parser.feed_eof()] == ["c"]


def test_byte_order_mark_is_skipped_even_when_split() -> None:
    assert [e.data for e in parse_all(bytewise(b"\xef\xbb\xbfdata: x\n\n"))] == ["x"]


def test_line_limit_applies_before_the_line_ends() -> None:
    parser = SseParser(max_line_bytes=64, max_event_bytes=1024)
    parser.feed(b"data: " + b"x" * 50)
    with pytest.raises(SseError, match="line exceeds 64 bytes"):
        parser.feed(b"x" * 20)


def test_event_size_limit() -> None:
    parser = SseParser(max_line_bytes=64, max_event_bytes=100)
    with pytest.raises(SseError, match="event exceeds 100 bytes"):
        parser.feed(b"data: " + b"x" * 40 + b"\n" * 1 + (b"data: " + b"y" * 40 + b"\n") * 2)


def test_long_line_in_small_chunks_is_not_rescanned() -> None:
    parser = SseParser()
    payload = json.dumps({"text": "z" * 200_000}).encode()
    for i in range(0, len(payload), 100):
        assert parser.feed((b"data: " if i == 0 else b"") + payload[i : i + 100]) == []
    assert json.loads(parser.feed(b"\r\n\r\n")[0].data) == {"text": "z" * 200_000}


@pytest.mark.parametrize("name", STREAM_FIXTURES)
def test_captured_sdk_streams(name: str) -> None:
    body = wire_body(name)
    expected = wire_data(body)
    assert len(expected) >= 3
    for chunks in ([body], bytewise(body)):
        events = parse_all(chunks)
        assert [e.data for e in events] == expected
        assert {e.event for e in events} == {"message"}
    if "stream" in name:  # complete captures: every event is a JSON-RPC response
        assert all(json.loads(e.data)["jsonrpc"] == "2.0" for e in events)


# --- SseWriter ---------------------------------------------------------------------------------


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(aiohttp_server: Any, handler: Handler) -> str:
    app = web.Application()
    app.router.add_get("/", handler)
    server = await aiohttp_server(app)
    return str(server.make_url("/"))


async def test_writer_headers_and_event_bytes(aiohttp_server: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        await writer.send({"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo\nworld"}})
        await writer.send({"jsonrpc": "2.0", "id": 1, "error": {"code": 1}}, event="error")
        await writer.close()
        await writer.close()  # idempotent
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        assert resp.content_type == "text/event-stream"
        assert resp.headers["Cache-Control"] == "no-cache"
        assert resp.headers["X-Accel-Buffering"] == "no"
        body = await within(resp.read())
    assert (
        body
        == (
            'data: {"jsonrpc":"2.0","id":1,"result":{"text":"héllo\\nworld"}}\r\n\r\n'
            'event: error\r\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":1}}\r\n\r\n'
        ).encode()
    )
    first = parse_all([body])[0]
    assert json.loads(first.data)["result"]["text"] == "héllo\nworld"


async def test_writer_delivers_each_event_at_once(aiohttp_server: Any) -> None:
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        await writer.send({"n": 1})
        await gate.wait()
        await writer.send({"n": 2})
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        assert await within(resp.content.readuntil(b"\r\n\r\n")) == b'data: {"n":1}\r\n\r\n'
        gate.set()
        assert await within(resp.content.read()) == b'data: {"n":2}\r\n\r\n'


async def test_writer_keepalive_comment_while_idle(aiohttp_server: Any) -> None:
    gate = asyncio.Event()
    tasks: list[asyncio.Task[None] | None] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=0.05)
        await writer.prepare(request)
        await writer.send({"n": 1})
        await gate.wait()
        await writer.send({"n": 2})
        await writer.close()
        tasks.append(writer._task)
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        assert await within(resp.content.readline()) == b'data: {"n":1}\r\n'
        assert await within(resp.content.readline()) == b"\r\n"
        assert await within(resp.content.readline()) == b": ping\r\n"
        gate.set()
        rest = await within(resp.content.read())
    parser = SseParser()
    assert [json.loads(e.data) for e in parser.feed(rest)] == [{"n": 2}]
    assert tasks == [None]  # close() cancelled and dropped the keep-alive task


async def test_writer_notices_a_gone_client_through_keepalive(aiohttp_server: Any) -> None:
    seen_lost = asyncio.Event()
    prepared = asyncio.Event()

    async def watch(writer: SseWriter) -> None:
        await writer.lost.wait()
        with pytest.raises(ConnectionResetError):
            await writer.send({"n": 2})
        await writer.close()
        seen_lost.set()

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=0.05)
        await writer.prepare(request)
        await writer.send({"n": 1})
        prepared.set()
        # The test server cancels the handler when the client leaves; the watcher lives on.
        await asyncio.shield(asyncio.ensure_future(watch(writer)))
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session:
        resp = await session.get(url)
        await within(resp.content.readuntil(b"\r\n\r\n"))
        resp.close()
    await within(seen_lost.wait())
    assert prepared.is_set()


async def test_writer_before_prepare() -> None:
    writer = SseWriter()
    with pytest.raises(RuntimeError):
        await writer.send({})
    await writer.close()


def test_limit_error_keeps_the_events_completed_before_it() -> None:
    parser = SseParser(max_line_bytes=32, max_event_bytes=64)
    with pytest.raises(SseError) as info:
        parser.feed(b"data: a\n\ndata: b\n\ndata: " + b"x" * 40)
    assert [e.data for e in info.value.events] == ["a", "b"]
