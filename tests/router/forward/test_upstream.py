"""router.forward.upstream: JSON-RPC calls and SSE streams to agents, against real local
HTTP servers."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict

from registry.netguard import AddressPolicy
from router.choose.choice import Target
from router.forward.upstream import Upstream, forward_headers
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    STREAM_FAILED,
    RpcError,
)
from tests.support.streams import within

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

OK = {"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "id": "t-1"}}


@pytest.fixture(params=["lean", "aiohttp"])
async def upstream(request: pytest.FixtureRequest) -> AsyncIterator[Upstream]:
    """Both clients of unary calls (SWITCHBOARD_UPSTREAM_CLIENT)."""
    lean = request.param == "lean"
    async with Upstream(connect_timeout=2.0, read_timeout=5.0, lean_calls=lean) as up:
        yield up


async def serve(aiohttp_server: Any, handler: Handler, version: str = "1.0") -> Target:
    app = web.Application()
    app.router.add_post("/rpc", handler)
    server = await aiohttp_server(app)
    return Target(agent_id="echo", url=str(server.make_url("/rpc")), version=version)  # type: ignore[arg-type]


async def sse_start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(request)
    return resp


def sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\r\n\r\n".encode()


def event(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": {"n": n}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def call(up: Upstream, target: Target, **headers: str) -> dict[str, Any]:
    return await up.call(
        target,
        "SendMessage",
        {"message": {}},
        request_id=1,
        headers=forward_headers(headers, target.version),
    )


async def collect(up: Upstream, target: Target) -> list[dict[str, Any]]:
    gen = up.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
    return [obj async for obj in gen]


def assert_error(err: RpcError, code: int, target: Target, *reason_parts: str) -> None:
    assert err.code == code
    assert set(err.data) == {"agent", "url", "reason"}
    assert err.data["agent"] == target.agent_id
    assert err.data["url"] == target.url
    for part in reason_parts:
        assert part in err.data["reason"]
    assert "Traceback" not in err.data["reason"]


# --- call --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_call_forwards_request_and_returns_the_response_object(
    aiohttp_server: Any, upstream: Upstream, version: str
) -> None:
    seen: list[tuple[CIMultiDict[str], Any]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append((CIMultiDict(request.headers), await request.json()))
        return web.json_response(OK)

    target = await serve(aiohttp_server, handler, version)
    answer = await call(
        upstream, target, Authorization="Bearer client-secret", **{"A2A-Extensions": "urn:x"}
    )
    assert answer == OK
    headers, body = seen[0]
    assert body == {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {}}}
    assert headers["Content-Type"] == "application/json"
    assert "Authorization" not in headers and "Cookie" not in headers
    if version == "1.0":
        assert headers["A2A-Version"] == "1.0"
        assert headers["A2A-Extensions"] == "urn:x"
    else:
        assert "A2A-Version" not in headers
        assert headers["X-A2A-Extensions"] == "urn:x"
        assert "A2A-Extensions" not in headers


async def test_call_sets_version_and_drops_framing_headers_itself(
    aiohttp_server: Any, upstream: Upstream
) -> None:
    seen: list[CIMultiDict[str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(CIMultiDict(request.headers))
        await request.read()
        return web.json_response(OK)

    target = await serve(aiohttp_server, handler, "1.0")
    headers = {"Host": "evil.example", "Content-Length": "1", "A2A-Version": "0.3", "X-Trace": "t"}
    await upstream.call(target, "GetTask", {"id": "t"}, request_id="r", headers=headers)
    assert seen[0]["Host"].startswith("127.0.0.1:")
    assert seen[0]["A2A-Version"] == "1.0"
    assert seen[0]["X-Trace"] == "t"  # what the caller passes (forward_headers output) is sent


@pytest.mark.parametrize("status", [200, 400, 500])
async def test_call_relays_jsonrpc_errors_whatever_the_status(
    aiohttp_server: Any, upstream: Upstream, status: int
) -> None:
    error = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32001, "message": "Task not found", "data": {"x": 1}},
    }

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(error, status=status)

    target = await serve(aiohttp_server, handler)
    assert await call(upstream, target) == error


@pytest.mark.parametrize(
    ("status", "body", "content_type", "code", "reason"),
    [
        (500, "<html>Internal Server Error</html>", "text/html", AGENT_UNAVAILABLE, "HTTP 500"),
        (502, '{"detail": "bad gateway"}', "application/json", AGENT_UNAVAILABLE, "HTTP 502"),
        (200, "hello", "text/plain", AGENT_UNAVAILABLE, "not JSON"),
        (200, "", "application/json", AGENT_UNAVAILABLE, "empty"),
        (404, "Not Found", "text/plain", AGENT_UNAVAILABLE, "HTTP 404"),
        (200, '{"foo": 1}', "application/json", INVALID_AGENT_RESPONSE, "not a JSON-RPC response"),
        (200, "[1, 2]", "application/json", INVALID_AGENT_RESPONSE, "not a JSON-RPC response"),
        (400, '{"error": "bad"}', "application/json", INVALID_AGENT_RESPONSE, "HTTP 400"),
        (
            200,
            '{"jsonrpc": "2.0", "id": 1}',
            "application/json",
            INVALID_AGENT_RESPONSE,
            "JSON-RPC",
        ),
        (
            200,
            '{"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}',
            "application/json",
            INVALID_AGENT_RESPONSE,
            "JSON-RPC",
        ),
        (
            200,
            '{"jsonrpc": "2.0", "id": 1, "result": NaN}',
            "application/json",
            INVALID_AGENT_RESPONSE,
            "NaN",
        ),
        (200, "[" * 100 + "]" * 100, "application/json", INVALID_AGENT_RESPONSE, "deeper than 64"),
        *[
            (200, body, "application/json", INVALID_AGENT_RESPONSE, reason)
            for body, reason in [
                ('{"jsonrpc": "2.0", "id": 1, "result": {"x": [1e400]}}', "1e400 is out of range"),
                ('{"jsonrpc": "2.0", "id": 1, "result": -1.5E+999}', "-1.5E+999 is out of range"),
                ('{"jsonrpc": "2.0", "id": 1, "result": Infinity}', "Infinity is not allowed"),
                ('{"jsonrpc": "2.0", "id": 1, "result": -Infinity}', "-Infinity is not allowed"),
                ('{"jsonrpc": "2.0", "id": 1, "result": ' + "9" * 5000 + "}", "too long"),
            ]
        ],
        # A non-finite number even in an error answer (whatever the status) is refused.
        (
            500,
            '{"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "m", "data": 1e400}}',
            "application/json",
            INVALID_AGENT_RESPONSE,
            "HTTP 500",
        ),
    ],
)
async def test_call_bad_answers(
    aiohttp_server: Any,
    upstream: Upstream,
    status: int,
    body: str,
    content_type: str,
    code: int,
    reason: str,
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=status, text=body, content_type=content_type)

    target = await serve(aiohttp_server, handler)
    with pytest.raises(RpcError) as info:
        await call(upstream, target)
    assert_error(info.value, code, target, reason)


async def test_call_keeps_finite_extreme_numbers(aiohttp_server: Any, upstream: Upstream) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 1, "result": {"big": 1.7976931348623157e308, "tiny": 1e-400,'
        ' "neg": -2.5e-3, "int": ' + "9" * 400 + "}}"
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=body, content_type="application/json")

    target = await serve(aiohttp_server, handler)
    result = (await call(upstream, target))["result"]
    assert result == {
        "big": 1.7976931348623157e308,
        "tiny": 0.0,
        "neg": -0.0025,
        "int": int("9" * 400),
    }
    json.dumps(result, allow_nan=False)  # writable back as strict JSON


async def test_call_does_not_follow_redirects(aiohttp_server: Any, upstream: Upstream) -> None:
    hits: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        hits.append(request.path)
        raise web.HTTPTemporaryRedirect("/elsewhere")

    target = await serve(aiohttp_server, handler)
    with pytest.raises(RpcError) as info:
        await call(upstream, target)
    assert_error(info.value, AGENT_UNAVAILABLE, target, "HTTP 307", "/elsewhere", "not followed")
    assert hits == ["/rpc"]


async def test_call_body_limit(aiohttp_server: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": "x" * 5000})

    target = await serve(aiohttp_server, handler)
    async with Upstream(connect_timeout=2, read_timeout=5, max_body_bytes=1000) as up:
        with pytest.raises(RpcError) as info:
            await call(up, target)
    assert_error(info.value, INVALID_AGENT_RESPONSE, target, "exceeds 1000 bytes")


async def test_call_connection_refused(upstream: Upstream) -> None:
    target = Target("gone", f"http://127.0.0.1:{free_port()}/", "1.0")
    with pytest.raises(RpcError) as info:
        await call(upstream, target)
    assert_error(info.value, AGENT_UNAVAILABLE, target, "connection refused")
    assert info.value.message == "Agent gone is unavailable"


async def test_call_slow_agent_times_out(aiohttp_server: Any) -> None:
    left = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            await asyncio.Event().wait()  # never answers
        finally:
            left.set()
        raise AssertionError("unreachable")

    target = await serve(aiohttp_server, handler)
    async with Upstream(connect_timeout=2, read_timeout=0.2) as up:
        with pytest.raises(RpcError) as info:
            await within(call(up, target))
    assert_error(info.value, AGENT_UNAVAILABLE, target, "no data from the agent for 0.2 s")
    await within(left.wait())  # the timed-out request was closed


async def test_call_refused_address_with_policy() -> None:
    target = Target("local", f"http://127.0.0.1:{free_port()}/", "0.3")
    async with Upstream(connect_timeout=2, read_timeout=5, policy=AddressPolicy()) as up:
        with pytest.raises(RpcError) as info:
            await call(up, target)
    assert_error(info.value, AGENT_UNAVAILABLE, target, "not a publicly routable address")


async def test_bad_url() -> None:
    async with Upstream(connect_timeout=2, read_timeout=5) as up:
        for url in ("ftp://example.com/", "not a url"):
            target = Target("odd", url, "0.3")
            with pytest.raises(RpcError) as info:
                await call(up, target)
            assert info.value.code == AGENT_UNAVAILABLE


async def test_call_before_start() -> None:
    up = Upstream(connect_timeout=1, read_timeout=1)
    with pytest.raises(RuntimeError):
        await call(up, Target("a", "http://127.0.0.1:1/", "1.0"))


async def test_per_agent_connection_limit(aiohttp_server: Any) -> None:
    """Calls share a pool with a per-agent limit; streams, which hold their connection for as
    long as they last, have a pool of their own and never starve calls."""
    gate, arrived = asyncio.Event(), asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if body["method"] == "SendStreamingMessage":
            resp = await sse_start(request)
            await resp.write(sse(event(1)))
            await gate.wait()
            return resp
        if body["method"] == "Slow":
            arrived.set()
            await gate.wait()
        return web.json_response(OK)

    target = await serve(aiohttp_server, handler)
    async with Upstream(
        connect_timeout=0.2, read_timeout=5, per_agent_limit=1, pool_timeout=0.1
    ) as up:
        stream = up.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
        assert await within(anext(stream)) == event(1)
        assert await within(call(up, target)) == OK  # the stream does not hold a call slot
        slow = asyncio.ensure_future(up.call(target, "Slow", {}, request_id=2, headers={}))
        await within(arrived.wait())
        with pytest.raises(RpcError) as info:  # the only call connection is busy
            await within(call(up, target))
        assert_error(info.value, AGENT_UNAVAILABLE, target, "no free connection to the agent")
        gate.set()
        await within(slow)
        await stream.aclose()
        assert await within(call(up, target)) == OK


# --- stream ------------------------------------------------------------------------------------


async def test_stream_delivers_each_event_before_the_next_is_sent(
    aiohttp_server: Any, upstream: Upstream
) -> None:
    received = [asyncio.Event(), asyncio.Event()]
    sent: list[int] = []
    seen: list[CIMultiDict[str]] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(CIMultiDict(request.headers))
        resp = await sse_start(request)
        for n in range(3):
            if n:
                await received[n - 1].wait()  # the test has the previous event
            await resp.write(sse(event(n)))
            sent.append(n)
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    stream = upstream.stream(
        target, "SendStreamingMessage", {"message": {}}, request_id=1, headers={}
    )
    for n in range(2):
        assert await within(anext(stream)) == event(n)
        assert sent == list(range(n + 1))  # nothing beyond this event was sent yet
        received[n].set()
    assert await within(anext(stream)) == event(2)
    with pytest.raises(StopAsyncIteration):
        await within(anext(stream))
    assert seen[0]["A2A-Version"] == "1.0"
    assert "text/event-stream" in seen[0]["Accept"]


async def test_stream_wire_variants(aiohttp_server: Any, upstream: Upstream) -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
    chunks = [
        b": ping\r\n\r\n",
        sse(event(1)),
        b'data: {"jsonrpc": "2.0",\n',  # multi-line data, LF line ends
        b'data: "id": 1, "result": {"n": 2}}\n\n',
        b'data: {"jsonrpc": "2.0", "id": 1, "result": {"n": 3}}\r',  # CR only, CR LF split
        b"\r",
        b": comment between events\r\n",
        b"event: error\r\n",
        f"data: {json.dumps(error)}\r\n\r\n".encode(),
        b'data: {"jsonrpc": "2.0", "id": 1, "result": {"n": 4}}',  # no blank line before EOF
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        for chunk in chunks:
            await resp.write(chunk)
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    assert await within(collect(upstream, target)) == [
        event(1),
        event(2),
        event(3),
        error,
        event(4),
    ]


@pytest.mark.parametrize("name", ["v03_stream.out", "v1_stream.out", "v1compat_v03_stream.out"])
async def test_stream_replays_captured_sdk_streams(
    aiohttp_server: Any, upstream: Upstream, name: str
) -> None:
    raw = (WIRE / name).read_bytes()
    body = raw.split(b"\r\n\r\n", 1)[1] if raw.startswith(b"HTTP/") else raw
    expected = [
        json.loads(line[len(b"data: ") :])
        for line in body.split(b"\r\n")
        if line.startswith(b"data: ")
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        for i in range(0, len(body), 7):  # odd chunks: lines and CR LF pairs split
            await resp.write(body[i : i + 7])
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler, "1.0" if name.startswith("v1_") else "0.3")
    assert await within(collect(upstream, target)) == expected
    assert len(expected) == 6


@pytest.mark.parametrize("status", [200, 400])
async def test_stream_plain_json_answer(
    aiohttp_server: Any, upstream: Upstream, status: int
) -> None:
    error = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {"code": -32004, "message": "Streaming is not supported"},
    }

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response(error, status=status)

    target = await serve(aiohttp_server, handler)
    assert await within(collect(upstream, target)) == [error]


async def test_stream_plain_non_json_answer(aiohttp_server: Any, upstream: Upstream) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(status=502, text="<h1>Bad Gateway</h1>", content_type="text/html")

    target = await serve(aiohttp_server, handler)
    with pytest.raises(RpcError) as info:
        await within(collect(upstream, target))
    assert_error(info.value, AGENT_UNAVAILABLE, target, "HTTP 502")


async def test_stream_connection_refused(upstream: Upstream) -> None:
    target = Target("gone", f"http://127.0.0.1:{free_port()}/", "0.3")
    with pytest.raises(RpcError) as info:
        await within(collect(upstream, target))
    assert_error(info.value, AGENT_UNAVAILABLE, target, "connection refused")


@pytest.mark.parametrize("events_before", [0, 1])
async def test_stream_upstream_dies(
    aiohttp_server: Any, upstream: Upstream, events_before: int
) -> None:
    got_first = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        if events_before:
            await resp.write(sse(event(1)))
            await got_first.wait()
        await resp.write(b'data: {"jsonrpc": "2.0", "id": 1, "res')  # half an event
        assert request.transport is not None
        request.transport.abort()  # the agent process dies
        await asyncio.Event().wait()
        return resp

    target = await serve(aiohttp_server, handler)
    stream = upstream.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
    if events_before:
        assert await within(anext(stream)) == event(1)
        got_first.set()
    with pytest.raises(RpcError) as info:
        await within(anext(stream))
    code = STREAM_FAILED if events_before else AGENT_UNAVAILABLE
    assert_error(info.value, code, target, "closed before the answer was complete")
    if events_before:
        assert info.value.message == "The stream from agent echo failed"


@pytest.mark.parametrize("events_before", [0, 1])
async def test_stream_silence_times_out(aiohttp_server: Any, events_before: int) -> None:
    left = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        try:
            if events_before:
                await resp.write(sse(event(1)))
            await asyncio.Event().wait()
        finally:
            left.set()
        return resp

    target = await serve(aiohttp_server, handler)
    async with Upstream(connect_timeout=2, read_timeout=0.3) as up:
        stream = up.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
        if events_before:
            assert await within(anext(stream)) == event(1)
        with pytest.raises(RpcError) as info:
            await within(anext(stream))
    code = STREAM_FAILED if events_before else AGENT_UNAVAILABLE
    assert_error(info.value, code, target, "no data from the agent for 0.3 s")
    await within(left.wait())


async def test_stream_read_timeout_is_between_bytes_not_total(aiohttp_server: Any) -> None:
    """Events keep coming, each well within read_timeout, for longer than read_timeout."""
    acks = asyncio.Queue[int]()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        for n in range(6):
            await resp.write(sse(event(n)))
            await acks.get()
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    loop = asyncio.get_running_loop()
    async with Upstream(connect_timeout=2, read_timeout=0.5) as up:
        start = loop.time()
        got = []
        async for obj in up.stream(target, "SendStreamingMessage", {}, request_id=1, headers={}):
            got.append(obj)
            # Hold each event for 0.15 s before asking for the next: the stream outlives 0.5 s.
            await asyncio.sleep(0.15)
            acks.put_nowait(len(got))
        assert got == [event(n) for n in range(6)]
        assert loop.time() - start > 0.5


async def test_stream_aclose_closes_the_upstream_connection(
    aiohttp_server: Any, upstream: Upstream
) -> None:
    disconnected = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        try:
            await resp.write(sse(event(1)))
            await asyncio.Event().wait()  # an agent that would stream forever
        finally:
            disconnected.set()
        return resp

    target = await serve(aiohttp_server, handler)
    stream = upstream.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
    assert await within(anext(stream)) == event(1)
    assert not disconnected.is_set()
    await stream.aclose()
    await within(disconnected.wait())


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"data: not json\r\n\r\n", "not JSON"),
        (b'data: {"hello": 1}\r\n\r\n', "not a JSON-RPC response"),
        (b'event: error\r\ndata: {"detail": "x"}\r\n\r\n', "'error' event"),
        (b"data: " + b"x" * 2000 + b"\r\n\r\n", "line exceeds 1000 bytes"),
        (b'data: {"jsonrpc":"2.0","id":1,"result":{"n":1e400}}\r\n\r\n', "1e400 is out of range"),
        (b'data: {"jsonrpc":"2.0","id":1,"result":{"n":NaN}}\r\n\r\n', "NaN is not allowed"),
        (b'data: {"jsonrpc":"2.0","id":1,"result":Infinity}\r\n\r\n', "Infinity is not"),
    ],
)
async def test_stream_invalid_events(aiohttp_server: Any, payload: bytes, reason: str) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        await resp.write(sse(event(1)) + payload)
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    async with Upstream(connect_timeout=2, read_timeout=5, max_body_bytes=1000) as up:
        stream = up.stream(target, "SendStreamingMessage", {}, request_id=1, headers={})
        assert await within(anext(stream)) == event(1)
        with pytest.raises(RpcError) as info:
            await within(anext(stream))
    assert_error(info.value, INVALID_AGENT_RESPONSE, target, reason)


@pytest.mark.parametrize("sse_answer", [True, False])
async def test_stream_non_finite_number_in_the_first_answer(
    aiohttp_server: Any, upstream: Upstream, sse_answer: bool
) -> None:
    """Before any event, too: -32006 (the agent answered, badly), not -32052."""
    body = '{"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "score": -1e400}}'

    async def handler(request: web.Request) -> web.StreamResponse:
        if not sse_answer:
            return web.Response(text=body, content_type="application/json")
        resp = await sse_start(request)
        await resp.write(f"data: {body}\r\n\r\n".encode())
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    with pytest.raises(RpcError) as info:
        await within(collect(upstream, target))
    assert_error(info.value, INVALID_AGENT_RESPONSE, target, "-1e400 is out of range")
    if sse_answer:
        assert "'message' event" in info.value.data["reason"]


async def test_stream_without_events_just_ends(aiohttp_server: Any, upstream: Upstream) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = await sse_start(request)
        await resp.write(b": ping\r\n\r\n")
        await resp.write_eof()
        return resp

    target = await serve(aiohttp_server, handler)
    assert await within(collect(upstream, target)) == []
