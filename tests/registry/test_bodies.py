"""Request bodies and their ``Content-Encoding``: the codings, decoding within the limit, and
:func:`registry.bodies.read_body` behind a real server on 127.0.0.1.

What the admin API and the JSON-RPC binding answer is tested in ``test_api.py`` and
``tests/router/transport/test_jsonrpc.py``.
"""

from __future__ import annotations

import gzip
import zlib
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from registry.bodies import (
    MAX_CODINGS,
    RAW_BODIES,
    UNREADABLE,
    BodyError,
    content_codings,
    decode,
    read_body,
)

TEXT = b'{"hello": "world"}'
LIMIT = 64


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def refused(call: Any, *args: Any) -> BodyError:
    with pytest.raises(BodyError) as info:
        call(*args)
    return info.value


# --- the codings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "codings"),
    [
        ([], []),
        (["identity"], []),
        (["GZIP"], ["gzip"]),
        (["x-gzip"], ["gzip"]),
        (["gzip, deflate"], ["gzip", "deflate"]),
        (["gzip", " deflate ,"], ["gzip", "deflate"]),  # the header given twice
        (["identity, deflate"], ["deflate"]),
    ],
)
def test_codings_in_the_order_applied(headers: list[str], codings: list[str]) -> None:
    assert content_codings(headers) == codings


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, Bogus", "*"])
def test_other_codings_are_unsupported(header: str) -> None:
    error = refused(content_codings, [header])
    shown = header.split(", ")[-1]
    assert error.problem == "unsupported_encoding"
    assert error.encoding == shown
    assert error.message == (
        f"The request body's Content-Encoding {shown!r} is not supported; "
        "send it as identity, gzip or deflate"
    )
    assert "install" not in error.message


def test_too_many_codings() -> None:
    error = refused(content_codings, [", ".join(["gzip"] * (MAX_CODINGS + 1))])
    assert error.problem == "unsupported_encoding"
    assert error.message == (
        f"The request body has {MAX_CODINGS + 1} content codings (gzip, gzip, gzip); "
        f"at most {MAX_CODINGS} are accepted"
    )


# --- decoding ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "codings"),
    [
        (TEXT, []),
        (gzip.compress(TEXT, mtime=0), ["gzip"]),
        (
            gzip.compress(TEXT[:5], mtime=0) + gzip.compress(TEXT[5:], mtime=0),
            ["gzip"],
        ),  # two gzip members
        (zlib.compress(TEXT), ["deflate"]),  # RFC 9110: zlib
        (raw_deflate(TEXT), ["deflate"]),  # as some clients send it
        (zlib.compress(gzip.compress(TEXT, mtime=0)), ["gzip", "deflate"]),
        (b"", ["gzip"]),
    ],
)
def test_decode(body: bytes, codings: list[str]) -> None:
    assert decode(body, codings, LIMIT) == (TEXT if body else b"")


@pytest.mark.parametrize(
    ("body", "coding", "why"),
    [
        (b"not compressed at all", "gzip", "it could not be decompressed"),
        (gzip.compress(TEXT, mtime=0)[:-10], "gzip", "it ends before its compressed data does"),
        (gzip.compress(TEXT, mtime=0) + b"junk", "gzip", "it could not be decompressed"),
        (zlib.compress(TEXT) + b"junk", "deflate", "data follows the end of its compressed data"),
    ],
)
def test_bad_data(body: bytes, coding: str, why: str) -> None:
    error = refused(decode, body, [coding], LIMIT)
    assert (error.problem, error.encoding) == ("bad_encoding", coding)
    assert error.message == f"The request body is not valid {coding} data: {why}"


def test_never_decoded_past_the_limit() -> None:
    assert decode(gzip.compress(b"x" * LIMIT), ["gzip"], LIMIT) == b"x" * LIMIT
    bomb = gzip.compress(b"x" * 50_000_000)  # 50 MB in about 50 KB
    error = refused(decode, bomb, ["gzip"], LIMIT)
    assert (error.problem, error.max_bytes, error.encoding) == ("too_large", LIMIT, "gzip")
    assert error.message == (
        f"The request body is larger than the limit of {LIMIT} bytes once decoded from gzip"
    )


# --- reading a request --------------------------------------------------------------------------


async def reader_client(aiohttp_client: Any, **app_args: Any) -> TestClient:
    """A server whose one route answers what :func:`read_body` made of the body."""

    async def handler(request: web.Request) -> web.Response:
        try:
            body = await read_body(request, LIMIT)
        except BodyError as error:
            return web.json_response({"problem": error.problem, "message": error.message})
        return web.json_response({"body": body.decode()})

    app = web.Application(**app_args)
    app.router.add_post("/", handler)
    return await aiohttp_client(app)


async def test_read_body_decodes(aiohttp_client: Any) -> None:
    client = await reader_client(aiohttp_client, handler_args=RAW_BODIES)
    headers = {"Content-Encoding": "gzip"}
    resp = await client.post("/", data=gzip.compress(TEXT), headers=headers)
    assert await resp.json() == {"body": TEXT.decode()}
    resp = await client.post("/", data=b"x" * (LIMIT + 1))
    assert (await resp.json())["problem"] == "too_large"
    resp = await client.post("/", data=TEXT, headers={"Content-Encoding": "br"})
    assert (await resp.json())["problem"] == "unsupported_encoding"


async def test_read_body_when_aiohttp_decoded_it(aiohttp_client: Any) -> None:
    """An app made without RAW_BODIES: what aiohttp decoded is taken as it is, and what it
    could not decode is unreadable (not aiohttp's own message)."""
    client = await reader_client(aiohttp_client)
    headers = {"Content-Encoding": "gzip"}
    resp = await client.post("/", data=gzip.compress(TEXT), headers=headers)
    assert await resp.json() == {"body": TEXT.decode()}
    resp = await client.post("/", data=b"not gzip", headers=headers)
    assert await resp.json() == {"problem": "unreadable", "message": UNREADABLE}
