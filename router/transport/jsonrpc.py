"""The JSON-RPC binding over HTTP: an aiohttp request in, a :class:`router.forward.call.Call`
to the routing core, its answer encoded back.

:func:`serve` reads the A2A version (the ``A2A-Version`` header, or the query parameter of
that name), the body (within ``SWITCHBOARD_MAX_REQUEST_BYTES``; its ``Content-Encoding``
decoded by :func:`registry.bodies.read_body`) and its JSON-RPC envelope
(:func:`router.protocol.envelope.parse_request`), keeps the headers that matter downstream,
and hands the call to :meth:`router.forward.handler.Router.handle`. A
:class:`~router.forward.call.Reply` is written as JSON (always valid JSON: no NaN or
Infinity, as the spec requires); an :class:`~router.forward.call.EventStream` as Server-Sent
Events (:mod:`router.transport.sse`), stopped as soon as the client goes away, even while the
agent is silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from registry.access.principal import ANONYMOUS, Principal
from registry.bodies import ACCEPTED_ENCODINGS, BodyError, read_body
from router.compat.dialects import served_call
from router.forward.call import Call, EventStream, Frames, Reply
from router.forward.handler import Router
from router.forward.upstream import CLIENT_HEADERS
from router.protocol.envelope import DialectReader, Request, parse_request
from router.protocol.errors import INTERNAL, PARSE, RpcError, error_body
from router.protocol.versions import VERSION_HEADER, Op, Version, client_version
from router.transport.gate import Gate, Refused
from router.transport.sse import SseWriter

__all__ = [
    "Served",
    "json_answer",
    "public_origin",
    "read_raw_body",
    "read_request",
    "request_version",
    "serve",
    "write_events",
]

log = logging.getLogger(__name__)

_HEADERS = CLIENT_HEADERS | {VERSION_HEADER.lower()}
_BODY_REASONS = {
    "too_large": "REQUEST_TOO_LARGE",
    "unsupported_encoding": "UNSUPPORTED_CONTENT_ENCODING",
    "bad_encoding": "INVALID_CONTENT_ENCODING",
    "unreadable": "PARSE_ERROR",
}
_DUMPS = functools.partial(json.dumps, allow_nan=False)


Served = web.StreamResponse | Awaitable[web.StreamResponse]
"""What :func:`serve` gives: a response, or the writing of a stream's events to await."""


async def serve(
    router: Router,
    request: web.Request,
    pinned: str | None = None,
    *,
    caller: Principal = ANONYMOUS,
    gate: Gate | None = None,
) -> Served:
    """Answer one JSON-RPC call of ``caller`` (``pinned``: the agent of a per-agent endpoint;
    ``gate``: takes a stream slot of the caller for a streaming call): the response, or for
    a stream the writing of its events, to await (nothing of this call's frame is held while
    the stream lasts)."""
    settings = router.settings
    version: Version = "0.3"
    try:
        try:
            version = request_version(request)
        except RpcError as error:
            # a client that sends the header knows 1.x: answer in the 1.0 shape, with its id
            version, error.id = "1.0", await _request_id(router, request)
            raise
        rpc = await read_request(
            request,
            version,
            max_bytes=settings.max_request_bytes,
            max_depth=settings.max_json_depth,
        )
    except RpcError as error:
        return json_answer(error_body(error.version or version, error.id, error))
    except Exception:  # a bug: still a JSON-RPC answer, no trace
        log.exception("internal error reading a request")
        error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
        return json_answer(error_body(version, None, error))
    call = Call(
        rpc,
        headers=CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() in _HEADERS),
        pinned=pinned,
        caller=caller,
        base_url=public_origin(request, settings.public_url),
    )
    release: _Slot | None = None
    if gate is not None and rpc.op in (Op.STREAM, Op.SUBSCRIBE):
        try:
            gate.open_stream(request, caller)
        except Refused as refused:
            return refused.response
        release = _Slot(gate, caller)
    try:
        answer = await router.handle(call)
    except BaseException:
        if release is not None:
            release()
        raise
    if isinstance(answer, Reply):
        if release is not None:
            release()
        return json_answer(answer.body, answer.headers)
    if release is not None:
        answer.add_closer(release.close)
    return write_events(request, answer, settings.sse_keepalive)


class _Slot:
    """The caller's stream slot, given back when the stream closes."""

    __slots__ = ("caller", "gate")

    def __init__(self, gate: Gate, caller: Principal) -> None:
        self.gate, self.caller = gate, caller

    def __call__(self) -> None:
        self.gate.close_stream(self.caller)

    async def close(self) -> None:
        """Give the slot back (a closer of an :class:`EventStream`)."""
        self.gate.close_stream(self.caller)


def request_version(request: web.Request) -> Version:
    """:func:`~router.protocol.envelope.client_version` of the header, or of an
    ``A2A-Version`` query parameter."""
    value = request.headers.get(VERSION_HEADER) or request.query.get(VERSION_HEADER)
    return client_version(value)


async def read_request(
    request: web.Request,
    version: Version,
    *,
    max_bytes: int,
    max_depth: int,
    dialects: DialectReader = served_call,
) -> Request:
    """Read the body (at most ``max_bytes``, its ``Content-Encoding`` decoded, else -32700)
    and parse its JSON-RPC request of A2A ``version``
    (:func:`~router.protocol.envelope.parse_request`; legacy dialects are read by
    ``dialects``, :func:`router.compat.dialects.served_call` by default)."""
    body = await read_raw_body(request, max_bytes)
    header = request.headers.get(VERSION_HEADER)
    return parse_request(body, version, header, max_depth=max_depth, dialects=dialects)


def public_origin(request: web.Request, public_url: str | None) -> str:
    """Where clients reach Switchboard: ``public_url`` if configured, else the request's origin."""
    if public_url:
        return public_url.rstrip("/")
    return f"{request.scheme}://{request.host}"


def json_answer(body: dict[str, Any], headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer that is always valid JSON (no NaN/Infinity), as the spec requires."""
    return web.json_response(body, dumps=_DUMPS, headers=headers)


async def _request_id(router: Router, request: web.Request) -> Any:
    """The client's request id, read with either version's method table."""
    settings = router.settings
    try:
        rpc = await read_request(
            request, "1.0", max_bytes=settings.max_request_bytes, max_depth=settings.max_json_depth
        )
    except RpcError as error:
        return error.id
    return rpc.id


async def read_raw_body(request: web.Request, max_bytes: int) -> bytes:
    """The body, decoded (:func:`registry.bodies.read_body`); -32700 if it cannot be read."""
    try:
        return await read_body(request, max_bytes)
    except BodyError as error:
        raise _body_error(error) from None


def _body_error(error: BodyError) -> RpcError:
    """The -32700 of a body that cannot be read: too large, or a coding not accepted or not
    valid (``data`` names the coding and the accepted ones), or cut short."""
    data: dict[str, Any]
    if error.problem == "too_large":
        data = {"maxBytes": error.max_bytes}
        if error.content_length is not None:
            data["contentLength"] = error.content_length
        if error.encoding is not None:
            data["contentEncoding"] = error.encoding
    elif error.problem == "unreadable":
        data = {}
    else:
        data = {"contentEncoding": error.encoding, "acceptedEncodings": list(ACCEPTED_ENCODINGS)}
    return RpcError(PARSE, error.message, data, reason=_BODY_REASONS[error.problem])


async def write_events(
    request: web.Request, stream: EventStream, keepalive: float | None
) -> web.StreamResponse:
    """Write ``stream`` as Server-Sent Events until it ends or the client goes away.

    The events are written in this task (no task of its own, none waiting for the client to
    go), interrupted as soon as the client is gone, even while the agent is silent: a failed
    write elsewhere (a keep-alive, held events) cancels this task, and that cancellation,
    told apart from any other as :func:`asyncio.timeout` does, ends the stream. One
    coroutine does it all: its frame is all an idle stream holds of the transport."""
    writer = SseWriter(keepalive=keepalive, headers=stream.headers)
    stream.as_bytes = True  # bodies may come as their JSON, written as they are
    task = asyncio.current_task()
    assert task is not None
    stop = _Stop(task)
    try:
        await writer.prepare(request)
        if writer.is_lost:
            raise ConnectionResetError("the client went away")
        writer.on_lost(stop)
        try:
            async for body, event in stream.events:
                if type(body) is Frames:
                    await writer.send_frames(body)
                elif isinstance(body, bytes):
                    await writer.send_json(body, event=event)
                else:
                    await writer.send(body, event=event)
                del body  # not held while the agent is silent
        except asyncio.CancelledError:
            if stop.cancelled and task.uncancel() == 0:
                raise ConnectionResetError("the client went away") from None
            raise
        else:
            if stop.cancelled:  # our cancellation was swallowed on the way: undo its count
                task.uncancel()
                raise ConnectionResetError("the client went away")
        finally:
            writer.on_lost(None)
    except ConnectionResetError:
        if writer.is_lost:
            pass  # the client went away: nothing left to tell it
        else:
            raise
    finally:
        await stream.aclose()  # closes the upstream connection at once
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await writer.close()
    return writer.response


class _Stop:
    """Cancels the writing task when the client is found gone by another task."""

    __slots__ = ("cancelled", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.cancelled = False

    def __call__(self) -> None:
        if asyncio.current_task() is not self.task:  # else the failed write raises there
            self.cancelled = True
            self.task.cancel()
