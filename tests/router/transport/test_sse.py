"""router.transport.sse: the client-side SSE writer (its bytes, keep-alives, a gone client)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from a2a.client.transports.http_helpers import parse_sse_stream
from aiohttp import ClientSession, web

from router.choose.choice import Target
from router.forward.sse import SseParser
from router.forward.upstream import Upstream
from router.transport.sse import PENDING_BYTES, SseWriter, _Pings
from tests.support.streams import parse_all, within, within_each

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
    assert body == (
        b'data: {"jsonrpc":"2.0","id":1,"result":{"text":"h\\u00e9llo\\nworld"}}\r\n\r\n'
        b'event: error\r\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":1}}\r\n\r\n'
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


async def test_writer_holds_json_events_until_the_task_waits(aiohttp_server: Any) -> None:
    """send_json() events that follow one another go out in one write (one HTTP chunk),
    before a later send() and at once when the task waits (here: on the gate)."""
    gate = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        for n in range(3):
            await writer.send_json(b'{"n":%d}' % n)
        await writer.send({"n": 3})
        await writer.send_json(b'{"n":4}', event="note")
        await gate.wait()
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        chunks = []
        async for data, end in resp.content.iter_chunks():
            chunks.append(data)
            if data.endswith(b'note\r\ndata: {"n":4}\r\n\r\n'):
                gate.set()
            assert end or not data  # whole HTTP chunks
    assert chunks[:3] == [
        b'data: {"n":0}\r\n\r\ndata: {"n":1}\r\n\r\ndata: {"n":2}\r\n\r\n',
        b'data: {"n":3}\r\n\r\n',
        b'event: note\r\ndata: {"n":4}\r\n\r\n',
    ]


async def test_writer_holds_a_bounded_amount(aiohttp_server: Any) -> None:
    """Past PENDING_BYTES held, send_json() waits for the write (the client's pace)."""
    event = b'{"pad":"' + b"x" * 1000 + b'"}'
    count = 2 * PENDING_BYTES // len(event)
    writes: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        for _ in range(count):
            await writer.send_json(event)
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        async for data, _ in resp.content.iter_chunks():
            writes.append(len(data))
    assert sum(writes) == count * (len(event) + 10)
    assert len(writes) >= 2 and max(writes) <= PENDING_BYTES + len(event) + 10


async def test_writer_a_failed_held_write_marks_the_client_lost(aiohttp_server: Any) -> None:
    outcome: list[str] = []
    done = asyncio.Event()
    started = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        await writer.send_json(b'{"n":0}')
        started.set()

        async def keep_writing() -> None:
            try:
                while True:
                    await writer.send_json(b'{"n":1}')
                    await asyncio.sleep(0)  # let the held events go out
            except ConnectionResetError:
                outcome.append("reset")
            assert writer.lost.is_set()
            await writer.close()
            done.set()

        await asyncio.shield(asyncio.ensure_future(keep_writing()))
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        await within(resp.content.readuntil(b"\r\n\r\n"))
        await within(started.wait())
    await within(done.wait())
    assert outcome == ["reset"]


async def test_writer_keepalive_comment_while_idle(aiohttp_server: Any) -> None:
    gate = asyncio.Event()
    tasks: list[object] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=0.05)
        await writer.prepare(request)
        await writer.send({"n": 1})
        await gate.wait()
        await writer.send({"n": 2})
        await writer.close()
        tasks.append(writer._ping)
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
    assert tasks == [None]  # close() stopped the keep-alives


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


# Every character str.splitlines() (so httpx's aiter_lines()) breaks a line at.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def test_line_breaks_list_is_complete() -> None:
    breaks = {chr(c) for c in range(0x10000) if len(f"a{chr(c)}b".splitlines()) > 1}
    assert breaks == set(LINE_BREAKS)


async def test_writer_line_separators_survive_the_sdk_client(aiohttp_server: Any) -> None:
    """The a2a-sdk client reads SSE with httpx ``aiter_lines()``, which also splits at U+2028,
    U+2029, U+0085 and some ASCII controls: none of them may appear raw on the wire."""
    text = "a\u2028b\u2029c\x85d\x0be\x1cf\r\ng é 😀 " + LINE_BREAKS
    answer = {"jsonrpc": "2.0", "id": "x", "result": {"text": text, LINE_BREAKS: [text]}}

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        await writer.send(answer)
        await writer.send(answer, event=f"odd{LINE_BREAKS}name")
        await writer.comment(f"note{LINE_BREAKS}end")
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with httpx.AsyncClient() as client:
        async with client.stream("GET", url) as resp:
            received = [item async for item in within_each(parse_sse_stream(resp))]
        raw = (await within(client.get(url))).content
    assert raw.isascii()
    assert raw.count(b"\n") == raw.count(b"\r\n") == 7  # 2 + 3 (event: line) + 2 (comment)
    assert [(name, json.loads(data)) for name, data in received] == [
        ("message", answer),
        ("odd" + " " * len(LINE_BREAKS) + "name", answer),
    ]


async def test_writer_refuses_non_finite_numbers_before_writing(aiohttp_server: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=None)
        await writer.prepare(request)
        for bad in (float("inf"), float("-inf"), float("nan")):
            with pytest.raises(ValueError, match="JSON compliant"):
                await writer.send({"jsonrpc": "2.0", "id": 1, "result": {"n": [1, bad]}})
        await writer.send({"n": 1.5})
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session, session.get(url) as resp:
        assert await within(resp.read()) == b'data: {"n":1.5}\r\n\r\n'


async def test_gone_client_noticed_by_keepalive_while_the_agent_is_silent(
    aiohttp_server: Any,
) -> None:
    """A proxy waiting on a silent agent learns from the failed keep-alive write that its
    client left (no handler cancellation), and closes the agent connection."""
    agent_streaming = asyncio.Event()
    agent_gone = asyncio.Event()
    proxy_done = asyncio.Event()
    writers: list[SseWriter] = []
    failed_comments: list[str] = []
    outcome: list[str] = []

    async def silent_agent(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        agent_streaming.set()
        try:
            await asyncio.Event().wait()  # never a byte more
        finally:
            agent_gone.set()  # the test server cancels us when the router hangs up
        return resp

    class RecordingWriter(SseWriter):
        async def comment(self, text: str = "ping") -> None:
            try:
                await super().comment(text)
            except ConnectionError:
                failed_comments.append(text)
                raise

    agent_app = web.Application()
    agent_app.router.add_post("/rpc", silent_agent)
    agent = await aiohttp_server(agent_app)
    target = Target(agent_id="silent", url=str(agent.make_url("/rpc")), version="1.0")

    async with Upstream(connect_timeout=2.0, read_timeout=30.0) as upstream:

        async def proxy(request: web.Request) -> web.StreamResponse:
            writer = RecordingWriter(keepalive=0.05)
            writers.append(writer)
            await writer.prepare(request)
            events = upstream.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
            gone = asyncio.ensure_future(writer.wait_lost())
            try:
                while True:
                    next_event = asyncio.ensure_future(anext(events, None))
                    done, _ = await asyncio.wait(
                        {next_event, gone}, return_when=asyncio.FIRST_COMPLETED
                    )
                    if next_event not in done:
                        outcome.append("client lost")
                        next_event.cancel()
                        await asyncio.wait({next_event})
                        break
                    if (item := next_event.result()) is None:
                        outcome.append("agent ended")
                        break
                    await writer.send(item)
            finally:
                gone.cancel()
                await events.aclose()
                await writer.close()
                proxy_done.set()
            return writer.response

        # Our own runner: unlike the test server it does not cancel handlers on disconnect.
        proxy_app = web.Application()
        proxy_app.router.add_get("/", proxy)
        runner = web.AppRunner(proxy_app, handler_cancellation=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            async with ClientSession() as session:
                resp = await session.get(f"http://{host}:{port}/")
                assert resp.status == 200
                await within(agent_streaming.wait())
                assert await within(resp.content.readline()) == b": ping\r\n"
                resp.close()  # the client goes away; the agent stays silent
            await within(writers[0].lost.wait())
            await within(proxy_done.wait())
            await within(agent_gone.wait())
        finally:
            await runner.cleanup()
    assert outcome == ["client lost"]
    assert failed_comments == ["ping"]  # the keep-alive write noticed it, nothing else wrote


async def test_writer_before_prepare() -> None:
    writer = SseWriter()
    with pytest.raises(RuntimeError):
        await writer.send({})
    await writer.close()


async def test_idle_writers_share_one_keepalive_timer(aiohttp_server: Any) -> None:
    """Many idle streams: every one gets its keep-alives, yet no task runs per stream while
    they wait (one timer for all), and the timer is gone once they are closed."""
    count = 5
    writers: list[SseWriter] = []
    prepared = asyncio.Event()
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        writer = SseWriter(keepalive=0.05)
        writers.append(writer)
        await writer.prepare(request)
        if len(writers) == count:
            prepared.set()
        await release.wait()
        await writer.close()
        return writer.response

    url = await serve(aiohttp_server, handler)
    async with ClientSession() as session:
        responses = [await session.get(url) for _ in range(count)]
        await within(prepared.wait())
        for resp in responses:  # each stream is kept alive
            assert await within(resp.content.readline()) == b": ping\r\n"
            assert await within(resp.content.readline()) == b"\r\n"
        coros = [getattr(t.get_coro(), "__qualname__", "") for t in asyncio.all_tasks()]
        assert len([c for c in coros if c.startswith("SseWriter.")]) < count  # none per stream
        loop = asyncio.get_running_loop()
        assert loop in _Pings._loops
        release.set()
        for resp in responses:
            await within(resp.read())
            resp.close()
    assert all(w._ping is None for w in writers)
    assert loop not in _Pings._loops  # the last close took the timer away
