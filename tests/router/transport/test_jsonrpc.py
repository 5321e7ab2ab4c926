"""The JSON-RPC binding reading request bodies: ``Content-Encoding`` on ``POST /`` and
``POST /agents/{id}`` of the whole app, with raw aiohttp requests; and writing a stream
(:func:`router.transport.jsonrpc.write_events`) to a client that goes away.

Reading and parsing the envelope is tested in ``tests/router/protocol/test_envelope.py``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestClient

from router.app import create_app
from router.forward.call import Event, EventStream
from router.transport.jsonrpc import write_events
from tests.support.helpers import facts, make_settings, said
from tests.support.streams import within

GET = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": "no-such-task"}}
RAW = json.dumps(GET).encode()
ACCEPTED = ["identity", "gzip", "deflate"]
PATHS = ["/", "/agents/some-agent"]


@pytest.fixture
async def client(aiohttp_client: Any, sqlite_url: str) -> TestClient:
    return await aiohttp_client(create_app(make_settings(sqlite_url, max_request_bytes=4096)))


async def post(
    client: TestClient, path: str, body: bytes, encoding: str, **headers: str
) -> dict[str, Any]:
    """POST ``body`` as it is, with ``Content-Encoding: encoding``: the JSON-RPC answer."""
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding, **headers}
    resp = await client.post(path, data=body, headers=headers)
    text = await resp.text()
    assert resp.status == 200, text
    assert resp.content_type == "application/json", text
    assert "install" not in text.lower()
    return json.loads(text)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("encoding", ["br", "zstd", "compress", "bogus", "gzip, br"])
async def test_unsupported_encoding_is_a_parse_error(
    client: TestClient, path: str, encoding: str
) -> None:
    """Finding (issue 15): ``br`` got aiohttp's text/plain 400 ("Please install Brotli"),
    and an unknown coding was read as if there were none."""
    body = await post(client, path, RAW, encoding)
    error = body["error"]
    assert body["id"] is None
    assert error["code"] == -32700
    refused = encoding.split(", ")[-1]
    assert said(error) == (
        f"The request body's Content-Encoding {refused!r} is not supported; "
        "send it as identity, gzip or deflate"
    )
    assert facts(error["data"]) == {"contentEncoding": refused, "acceptedEncodings": ACCEPTED}


async def test_unsupported_encoding_in_the_1_0_shape(client: TestClient) -> None:
    body = await post(client, "/", RAW, "br", **{"A2A-Version": "1.0"})
    info = body["error"]["data"][0]
    assert body["error"]["code"] == -32700
    assert info["reason"] == "UNSUPPORTED_CONTENT_ENCODING"
    assert facts(info["metadata"]) == {
        "contentEncoding": "br",
        "acceptedEncodings": json.dumps(ACCEPTED, separators=(",", ":")),
    }


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("encoding", "body", "why"),
    [
        ("gzip", b"this is not gzip", "it could not be decompressed"),
        ("gzip", gzip.compress(RAW, mtime=0)[:-12], "it ends before its compressed data does"),
        ("deflate", zlib.compress(RAW) + b"junk", "data follows the end of its compressed data"),
    ],
)
async def test_corrupt_body_is_a_parse_error(
    client: TestClient, path: str, encoding: str, body: bytes, why: str
) -> None:
    answer = await post(client, path, body, encoding, **{"A2A-Version": "1.0"})
    error = answer["error"]
    assert error["code"] == -32700
    assert said(error) == f"The request body is not valid {encoding} data: {why}"
    assert error["data"][0]["reason"] == "INVALID_CONTENT_ENCODING"
    assert error["data"][0]["metadata"]["contentEncoding"] == encoding


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("gzip", gzip.compress(RAW, mtime=0)),
        ("x-gzip", gzip.compress(RAW, mtime=0)),
        ("deflate", zlib.compress(RAW)),
        ("identity", RAW),
        ("gzip, deflate", zlib.compress(gzip.compress(RAW, mtime=0))),
    ],
)
async def test_encoded_bodies_are_decoded(client: TestClient, encoding: str, body: bytes) -> None:
    answer = await post(client, "/", body, encoding)
    assert answer["id"] == 7  # the request was read: an answer to it
    assert answer["error"]["code"] == -32001  # no such task


async def test_decoded_body_over_the_limit(client: TestClient) -> None:
    """A small gzip body that inflates past SWITCHBOARD_MAX_REQUEST_BYTES is refused, and
    never decoded further than the limit."""
    bomb = gzip.compress(b" " * 3_000_000)
    assert len(bomb) < 4096
    body = await post(client, "/", bomb, "gzip", **{"A2A-Version": "1.0"})
    error = body["error"]
    assert error["code"] == -32700
    assert said(error) == (
        "The request body is larger than the limit of 4096 bytes once decoded from gzip"
    )
    assert error["data"][0]["reason"] == "REQUEST_TOO_LARGE"
    assert facts(error["data"][0]["metadata"]) == {"maxBytes": "4096", "contentEncoding": "gzip"}


async def test_write_events_stops_a_silent_stream_when_a_keepalive_fails() -> None:
    """A client that leaves while the agent is silent, on a server that does not cancel
    handlers: the failed keep-alive ends write_events at once (the stream's events are
    closed, the handler returns) instead of waiting on the agent."""
    events_closed = asyncio.Event()
    handler_done: list[str] = []

    async def silent() -> AsyncGenerator[Event, None]:
        try:
            yield {"jsonrpc": "2.0", "id": 1, "result": {"n": 1}}, None
            await asyncio.Event().wait()  # the agent says nothing more
            yield {"jsonrpc": "2.0", "id": 1, "result": {"n": 2}}, None
        finally:
            events_closed.set()

    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            return await write_events(request, EventStream(silent()), keepalive=0.05)
        finally:
            handler_done.append("cancelled" if asyncio.current_task().cancelling() else "done")

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, handler_cancellation=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        async with ClientSession() as session:
            resp = await session.get(f"http://{host}:{port}/")
            assert (
                await within(resp.content.readline())
                == b'data: {"jsonrpc":"2.0","id":1,"result":{"n":1}}\r\n'
            )
            await within(resp.content.readuntil(b": ping\r\n"))
            resp.close()  # the client goes away; only a keep-alive can notice
        await within(events_closed.wait())
    finally:
        await runner.cleanup()
    assert handler_done == ["done"]  # returned normally: the cancellation was ours, undone
