"""The HTTP+JSON (REST) binding over HTTP: the paths of :mod:`router.protocol.restpaths` read
into the same :class:`router.forward.call.Call` the JSON-RPC binding makes, the answer written
in the binding's own format.

A request's version is its ``A2A-Version`` (header or query parameter, as for JSON-RPC) and
must be the version of its path (1.0 at the root, 0.3 under ``/v1``); its body, path and
query become the params of the JSON-RPC method the path stands for, checked by
:func:`router.protocol.envelope.parse_request`, so every check and error is the JSON-RPC
binding's. A 0.3 request's body is 0.3 ProtoJSON, read and written by
:mod:`router.compat.protojson03`. A result is answered as itself with 200; a stream as
Server-Sent Events whose ``data`` is each result object (an error in the middle: an
``error`` event with the error body); an error (also one before a stream's first event) as
the HTTP status of its code with ``{"error": {"code", "status", "message", "details"}}``
(``google.rpc.Status``, ``ErrorInfo`` first in ``details``), as A2A 1.0 section 11.6 says.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from registry.access.principal import ANONYMOUS, Principal
from registry.jsonsafe import JsonLimitError, loads_limited
from router.compat import protojson03
from router.compat.dialects import served_call
from router.forward.call import Call, Event, EventStream, Reply
from router.forward.handler import Router
from router.forward.upstream import CLIENT_HEADERS
from router.protocol.envelope import Request, parse_request
from router.protocol.errors import (
    INTERNAL,
    INVALID_REQUEST,
    PARSE,
    REASONS,
    VERSION_NOT_SUPPORTED,
    RpcError,
    error_domain,
    error_object,
)
from router.protocol.restpaths import RestRoute, http_status, is_draft, rest_params
from router.protocol.versions import VERSION_HEADER, Op, Version
from router.transport import jsonrpc
from router.transport.gate import Gate, Refused

__all__ = ["error_response", "refused", "rest_error_body", "serve"]

log = logging.getLogger(__name__)

_HEADERS = CLIENT_HEADERS | {VERSION_HEADER.lower()}
_DUMPS = functools.partial(json.dumps, allow_nan=False)
_MEDIA_TYPE = {"1.0": "application/a2a+json", "0.3": "application/json"}


async def serve(
    router: Router,
    request: web.Request,
    route: RestRoute,
    pinned: str | None = None,
    *,
    caller: Principal = ANONYMOUS,
    gate: Gate | None = None,
) -> web.StreamResponse:
    """Answer one HTTP+JSON request of ``route`` from ``caller`` (``pinned``: the agent of a
    per-agent endpoint; ``gate``: takes a stream slot of the caller for a streaming route)."""
    settings = router.settings
    draft = is_draft(route)
    try:
        rpc = await _read(request, route, settings.max_request_bytes, settings.max_json_depth)
    except RpcError as error:
        return error_response(error_object("1.0", error), draft=draft)
    except Exception:  # a bug: still the binding's error, no trace
        log.exception("internal error reading a request")
        error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
        return error_response(error_object("1.0", error), draft=draft)
    call = Call(
        rpc,
        headers=CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() in _HEADERS),
        pinned=pinned,
        caller=caller,
        base_url=jsonrpc.public_origin(request, settings.public_url),
        binding="HTTP+JSON",
    )
    opened = False
    if gate is not None and rpc.op in (Op.STREAM, Op.SUBSCRIBE):
        try:
            gate.open_stream(request, caller)
        except Refused as refusal:
            return refused(refusal, draft=draft)
        opened = True
    try:
        answer = await router.handle(call)
    except BaseException:
        if opened and gate is not None:
            gate.close_stream(caller)
        raise
    if isinstance(answer, Reply):
        if opened and gate is not None:
            gate.close_stream(caller)
        return _reply(answer.body, answer.headers, rpc, draft)
    if opened and gate is not None:
        answer.add_closer(_closer(gate, caller))
    first = await _first(answer)
    if first is None or "error" in first[0]:  # nothing sent yet: an HTTP error answer
        await answer.aclose()
        body = first[0] if first is not None else {"error": _internal("the stream was empty")}
        return _reply(body, answer.headers, rpc, draft)
    events = EventStream(_events(first, answer, rpc, draft), answer.headers, answer.aclose)
    return await jsonrpc.write_events(request, events, settings.sse_keepalive)


def _closer(gate: Gate, caller: Principal) -> Any:
    async def close() -> None:
        gate.close_stream(caller)

    return close


async def _read(request: web.Request, route: RestRoute, max_bytes: int, depth: int) -> Request:
    """The JSON-RPC request ``route`` stands for, checked as the JSON-RPC binding checks it."""
    header = request.headers.get(VERSION_HEADER)
    version = jsonrpc.request_version(request)
    if version != route.version and not is_draft(route):  # a draft path: any version
        raise _wrong_version(route, version)
    body: dict[str, Any] | None = None
    if route.body:
        body = _object(await jsonrpc.read_raw_body(request, max_bytes), depth, route)
        if route.version == "0.3":
            body = protojson03.request_in(route.method, body)
    params = rest_params(route, request.match_info, request.query, body)
    # an id of our own: the binding has none, and agents (the 0.3 SDK's) refuse a null one
    document = {"jsonrpc": "2.0", "id": REQUEST_ID, "method": route.method, "params": params}
    return parse_request(
        _DUMPS(document).encode(), version, header, max_depth=depth + 1, dialects=served_call
    )


REQUEST_ID = "rest"
"""The JSON-RPC id of the call an HTTP+JSON request becomes (and is forwarded as)."""


def _object(raw: bytes, depth: int, route: RestRoute) -> dict[str, Any]:
    """The request body: a JSON object (empty: ``{}`` where the body is optional)."""
    if not raw.strip():
        if route.method in ("CancelTask", "tasks/cancel"):
            return {}
        raise RpcError(PARSE, "The request body is empty: send a JSON object", {})
    try:
        value = loads_limited(raw, max_depth=depth, allow_nul=True)  # checked as JSON-RPC's
    except JsonLimitError as exc:
        if exc.code == "json_too_deep":
            raise RpcError(
                PARSE,
                f"The request body is too deeply nested: {exc.message}",
                {"maxDepth": depth},
                reason="JSON_TOO_DEEP",
            ) from None
        raise RpcError(
            PARSE, f"The request body is not valid JSON: {exc.message}", dict(exc.details)
        ) from None
    if not isinstance(value, dict):
        raise RpcError(
            INVALID_REQUEST,
            f"The body of {route.verb} {route.path} must be a JSON object",
            {"path": route.path},
        )
    return value


def _wrong_version(route: RestRoute, version: Version) -> RpcError:
    if route.version == "1.0":
        fix = "send A2A-Version: 1.0, or use the A2A 0.3 paths under /v1/"
    else:
        fix = "drop the A2A-Version header (or send 0.3), or use the A2A 1.0 paths without /v1"
    return RpcError(
        VERSION_NOT_SUPPORTED,
        f"{route.verb} {route.path} is an A2A {route.version} path and this request is "
        f"A2A {version}: {fix}",
        {"path": route.path, "pathVersion": route.version, "requestedVersion": version},
    )


async def _first(stream: EventStream) -> Event | None:
    try:
        return await anext(stream.events)
    except StopAsyncIteration:
        return None


async def _events(
    first: Event, stream: EventStream, rpc: Request, draft: bool
) -> AsyncGenerator[Event, None]:
    """The stream's JSON-RPC bodies as the binding's: each result object; an error as an
    ``error`` event carrying the error body."""
    yield _event(first[0], rpc, draft)
    async for body, _ in stream.events:
        yield _event(body, rpc, draft)


def _event(body: Mapping[str, Any], rpc: Request, draft: bool) -> Event:
    if "error" in body:
        return rest_error_body(body["error"], draft=draft), "error"
    return _result(body.get("result"), rpc, stream=True), None


def _reply(
    body: Mapping[str, Any], headers: Mapping[str, str], rpc: Request, draft: bool
) -> web.Response:
    if "error" in body:
        return error_response(body["error"], headers, draft=draft)
    result = _result(body.get("result"), rpc)
    return web.Response(text=_DUMPS(result), content_type=_MEDIA_TYPE[rpc.version], headers=headers)


def _result(result: Any, rpc: Request, *, stream: bool = False) -> Any:
    """A JSON-RPC result as this binding's body: the same object in 1.0; 0.3 ProtoJSON."""
    if rpc.version == "1.0":
        return result
    return protojson03.result_out(rpc.op, result, stream=stream)


def _internal(message: str) -> dict[str, Any]:
    return error_object("1.0", RpcError(INTERNAL, message, {}))


def rest_error_body(error: Mapping[str, Any], *, draft: bool = False) -> dict[str, Any]:
    """A JSON-RPC ``error`` object (of either version's shape, or an agent's as it came) as
    the binding's ``{"error": {"code", "status", "message", "details"}}`` (``draft``: seed
    002's error object itself, ``{"code", "status", "message", "details"}``)."""
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL
    status, name = http_status(code)
    message = error.get("message")
    data = error.get("data")
    details: list[Any]
    if isinstance(data, list) and all(isinstance(d, dict) and "@type" in d for d in data):
        details = list(data)  # 1.0: google.rpc details already, ErrorInfo first
    else:
        facts = data if isinstance(data, Mapping) else {}
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": REASONS.get(code, "UNKNOWN_ERROR"),
                "domain": error_domain(code),
                "metadata": {
                    str(k): v if isinstance(v, str) else _DUMPS(v) for k, v in facts.items()
                },
            }
        ]
        if data is not None:
            details.append({"@type": "type.googleapis.com/google.protobuf.Value", "value": data})
    body: dict[str, Any] = {
        "code": status,
        "status": name,
        "message": message if isinstance(message, str) else "",
        "details": details,
    }
    return body if draft else {"error": body}


def error_response(
    error: Mapping[str, Any], headers: Mapping[str, str] | None = None, *, draft: bool = False
) -> web.Response:
    """A JSON-RPC ``error`` object answered in the binding's format, with its HTTP status
    (``draft``: in seed 002's)."""
    body = rest_error_body(error, draft=draft)
    return web.Response(
        text=_DUMPS(body),
        status=body["code"] if draft else body["error"]["code"],
        content_type="application/json",
        headers=headers,
    )


def refused(refusal: Refused, *, draft: bool = False) -> web.Response:
    """The Gate's refusal (401, 503, 429 with a JSON-RPC error body) in the binding's format
    (``draft``: seed 002's), its ``WWW-Authenticate`` and ``Retry-After`` kept."""
    response = refusal.response
    try:
        document = json.loads(response.body)  # type: ignore[arg-type]
        error = document["error"]
    except (TypeError, ValueError, KeyError):
        return response
    keep = {k: v for k, v in response.headers.items() if k in ("WWW-Authenticate", "Retry-After")}
    answer = error_response(error, keep, draft=draft)
    answer.set_status(response.status)
    answer_body = json.loads(answer.text or "{}")
    (answer_body if draft else answer_body["error"])["code"] = response.status
    answer.text = _DUMPS(answer_body)
    return answer
