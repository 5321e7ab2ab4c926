"""Request bodies: read within a byte limit, their ``Content-Encoding`` decoded by Switchboard.

Left to itself, aiohttp decodes gzip and deflate bodies, passes an unknown coding through as
if it were none, and answers ``br`` or ``zstd`` (without their optional modules) with its own
``text/plain`` 400 ("Please install ...") before any handler or middleware runs. So the app is
made with ``handler_args=RAW_BODIES`` (aiohttp leaves bodies as they came) and the places that
read a body (the admin API's ``read_json``, the JSON-RPC binding) call :func:`read_body`:
``identity``, ``gzip`` (or ``x-gzip``) and ``deflate`` (zlib or raw), at most
:data:`MAX_CODINGS` of them, each decoded no further than the limit (no decompression bomb).
Anything else is a :class:`BodyError`, which each caller answers in its own error format.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal

from aiohttp import web

__all__ = [
    "ACCEPTED_ENCODINGS",
    "MAX_CODINGS",
    "RAW_BODIES",
    "UNREADABLE",
    "BodyError",
    "content_codings",
    "decode",
    "read_body",
]

#: The content codings a request body may have (as the ``Accept-Encoding`` of a 415 says).
ACCEPTED_ENCODINGS = ("identity", "gzip", "deflate")
#: The most codings one body may have been through (each is decoded in memory).
MAX_CODINGS = 2
#: The app's ``handler_args``: aiohttp leaves request bodies encoded (:func:`read_body`
#: decodes them).
RAW_BODIES: Mapping[str, Any] = MappingProxyType({"auto_decompress": False})

BodyProblem = Literal["too_large", "unsupported_encoding", "bad_encoding", "unreadable"]

_ALIASES = {"x-gzip": "gzip"}
_CHUNK = 64 * 1024
_ACCEPTED_TEXT = "identity, gzip or deflate"
#: The message of a body that could not be read to its end.
UNREADABLE = "The request body could not be read to its end (it is malformed)"


class BodyError(Exception):
    """A body that cannot be read: ``problem`` says why, ``message`` in one sentence.

    ``encoding`` is the content coding at fault; ``max_bytes`` and ``content_length`` are
    set for ``too_large`` (the declared length when that was the reason).
    """

    def __init__(
        self,
        problem: BodyProblem,
        message: str,
        *,
        encoding: str | None = None,
        max_bytes: int | None = None,
        content_length: int | None = None,
    ) -> None:
        super().__init__(message)
        self.problem = problem
        self.message = message
        self.encoding = encoding
        self.max_bytes = max_bytes
        self.content_length = content_length


def content_codings(headers: Iterable[str]) -> list[str]:
    """The codings of ``Content-Encoding`` header values, in the order they were applied
    (``identity`` dropped, ``x-gzip`` read as ``gzip``); :class:`BodyError`
    ``unsupported_encoding`` for any other, or for more than :data:`MAX_CODINGS`."""
    codings: list[str] = []
    for value in headers:
        for token in value.split(","):
            coding = token.strip().lower()
            coding = _ALIASES.get(coding, coding)
            if coding in ("", "identity"):
                continue
            if coding not in ACCEPTED_ENCODINGS:
                shown = token.strip()[:40]
                raise BodyError(
                    "unsupported_encoding",
                    f"The request body's Content-Encoding {shown!r} is not supported; "
                    f"send it as {_ACCEPTED_TEXT}",
                    encoding=shown,
                )
            codings.append(coding)
    if len(codings) > MAX_CODINGS:
        raise BodyError(
            "unsupported_encoding",
            f"The request body has {len(codings)} content codings ({', '.join(codings)}); "
            f"at most {MAX_CODINGS} are accepted",
            encoding=", ".join(codings),
        )
    return codings


def decode(body: bytes, codings: list[str], max_bytes: int) -> bytes:
    """``body`` with ``codings`` undone (the last applied first), never longer than
    ``max_bytes`` at any step; :class:`BodyError` ``bad_encoding`` or ``too_large``."""
    for coding in reversed(codings):
        body = _inflate(body, coding, max_bytes)
    return body


async def read_body(request: web.Request, max_bytes: int) -> bytes:
    """The body of ``request``, decoded, at most ``max_bytes`` before and after decoding.

    The coding is checked before anything is read. A body aiohttp already decoded (an app
    made without :data:`RAW_BODIES`) is taken as it is. :class:`BodyError` when the body is
    too large, has a coding that is not accepted or is not valid data of its coding, or could
    not be read to its end.
    """
    codings = content_codings(request.headers.getall("Content-Encoding", ()))
    length = request.content_length
    if length is not None and length > max_bytes:
        raise _too_large(max_bytes, length)
    chunks: list[bytes] = []
    total = 0
    try:
        async for chunk in request.content.iter_chunked(_CHUNK):
            total += len(chunk)
            if total > max_bytes:
                raise _too_large(max_bytes, None)
            chunks.append(chunk)
    except web.RequestPayloadError:
        raise BodyError("unreadable", UNREADABLE) from None
    if getattr(request.content, "total_compressed_bytes", None) is not None:
        return b"".join(chunks)  # aiohttp decoded it already
    return decode(b"".join(chunks), codings, max_bytes)


def _inflate(data: bytes, coding: str, max_bytes: int) -> bytes:
    """One gzip (one member or more) or deflate stream, whole, decoded within ``max_bytes``."""
    if not data:
        return data
    out = bytearray()
    while True:
        if coding == "gzip":
            wbits = 16 + zlib.MAX_WBITS
        else:  # deflate: zlib-wrapped as RFC 9110 says, or raw as some clients send it
            wbits = zlib.MAX_WBITS if data[0] & 0x0F == 8 else -zlib.MAX_WBITS
        stream = zlib.decompressobj(wbits)
        try:
            out += stream.decompress(data, max_bytes + 1 - len(out))
        except zlib.error:
            raise _bad(coding, "it could not be decompressed") from None
        if len(out) > max_bytes:
            raise BodyError(
                "too_large",
                f"The request body is larger than the limit of {max_bytes} bytes once "
                f"decoded from {coding}",
                encoding=coding,
                max_bytes=max_bytes,
            )
        if not stream.eof:
            raise _bad(coding, "it ends before its compressed data does")
        data = stream.unused_data
        if not data:
            return bytes(out)
        if coding != "gzip":  # gzip members may follow each other; nothing else may
            raise _bad(coding, "data follows the end of its compressed data")


def _bad(coding: str, why: str) -> BodyError:
    return BodyError(
        "bad_encoding",
        f"The request body is not valid {coding} data: {why}",
        encoding=coding,
    )


def _too_large(max_bytes: int, length: int | None) -> BodyError:
    return BodyError(
        "too_large",
        f"The request body is larger than the limit of {max_bytes} bytes",
        max_bytes=max_bytes,
        content_length=length,
    )
