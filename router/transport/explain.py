"""``POST /api/v1/route/explain``: where a message would go, and why, as the send decides it.

The body names the send: ``message``, the ``method`` it would be sent with (any A2A method
that sends a message, of either version or a legacy dialect: :data:`SEND_METHODS`; it implies
the version and whether the call streams), the send's ``configuration`` and ``metadata``,
and the ``taskId`` and ``contextId`` it continues, looked up in the caller's ID space as the
send looks them up. The request is read by the send's own reader
(:func:`router.protocol.envelope.parse_request`, the dialects included) and routed by the
send's own function (:meth:`router.forward.handler.Router.explain`): for the same catalog,
health, caller and inputs, the agent explain names is the agent the send reaches.

Without ``method``: the deprecated ``stream`` (and ``version``, else the ``A2A-Version``
header, else the message's shape) pick it. A ``stream`` or ``version`` that contradicts
``method`` is ``400 invalid_body``; a method that sends no message ``400 invalid_method``.

With client authentication on, a caller with neither the admin nor the reader role gets no
agent's URL (``candidates[].url``, ``choice.url``): :mod:`router.forward.addresses`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from registry.api import SETTINGS, caller, read_json
from registry.errors import RegistryError
from registry.openapi import documented
from router.choose.chooser import Routed
from router.choose.explaining import explain_view
from router.compat.dialects import served_call
from router.forward.addresses import hide_in_explain, shows_addresses
from router.forward.handler import Router
from router.protocol.envelope import parse_request
from router.protocol.errors import RpcError
from router.protocol.versions import VERSION_HEADER, Op, Version, client_version
from router.transport.apimodels import Explain, ExplainRequest

SEND_METHODS: dict[str, tuple[Version, Op]] = {
    "SendMessage": ("1.0", Op.SEND),
    "SendStreamingMessage": ("1.0", Op.STREAM),
    "message/send": ("0.3", Op.SEND),
    "message/stream": ("0.3", Op.STREAM),
    "tasks/send": ("0.3", Op.SEND),  # A2A v0.1, served as 0.3
    "tasks/sendSubscribe": ("0.3", Op.STREAM),
    "A2A.SendMessage": ("1.0", Op.SEND),  # the A2A.-prefixed 1.0 draft
    "A2A.SendStreamingMessage": ("1.0", Op.STREAM),
}
"""The methods explain takes: each sends a message, in one version, streaming or not."""
_V01 = ("tasks/send", "tasks/sendSubscribe")


def explain_handler(router_key: web.AppKey[Router]) -> Any:
    """The explain handler of the app whose :class:`Router` is at ``router_key``."""

    @documented(
        "Which agent a message would be routed to, and why",
        "routing",
        answer=Explain,
        body=ExplainRequest,
    )
    async def explain(request: web.Request) -> web.Response:
        """``{"message", "method"?, "configuration"?, "metadata"?, "taskId"?, "contextId"?}``
        → the send's decision: the ranked candidates, each kept or dropped with its reason,
        the threshold that decided, and the choice or the error."""
        body = await read_json(request)
        router = request.app[router_key]
        method, version, op = send_method(body, request.headers.get(VERSION_HEADER))
        document = {"jsonrpc": "2.0", "id": "explain", "method": method, "params": _params(body)}
        settings = request.app[SETTINGS]
        header = "1.0" if version == "1.0" else None
        try:
            rpc = parse_request(
                json.dumps(document).encode(), version, header,
                max_depth=settings.max_json_depth + 2, dialects=served_call,
            )  # fmt: skip
        except RpcError as error:  # what the send would answer
            out = explain_view(router.matcher, Routed(error=error), None)
        else:
            out = await router.explain(caller(request), rpc, header=header)
        if not shows_addresses(settings, caller(request)):
            out = hide_in_explain(out)  # no agent's URL for a caller without a reading role
        return web.json_response({"method": method, "stream": op is Op.STREAM, **out})

    return explain


def send_method(body: Any, header: str | None) -> tuple[str, Version, Op]:
    """The method of an explain body, its version and op; RegistryError (400) when the body
    is not one or contradicts itself (see the module docs)."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), dict):
        raise RegistryError(
            'send {"message": {...}} with an A2A message, optionally "method", '
            '"configuration", "metadata", "taskId" and "contextId"',
            code="invalid_body",
        )
    for name in ("taskId", "contextId"):
        if name in body and not (isinstance(body[name], str) and body[name]):
            raise RegistryError(f"{name} must be a non-empty string", code="invalid_body")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RegistryError("stream must be true or false", code="invalid_body")
    try:
        asked: Version | None = client_version(body["version"]) if body.get("version") else None
    except RpcError as error:
        raise RegistryError(error.message, code="invalid_version", details=error.data) from None
    method = body.get("method")
    if method is None:
        version = asked or _default_version(body["message"], header)
        op = Op.STREAM if stream else Op.SEND
        names = {v: k for k, v in SEND_METHODS.items() if not k.startswith(("A2A.", "tasks/"))}
        return names[(version, op)], version, op
    if not isinstance(method, str) or method not in SEND_METHODS:
        raise RegistryError(
            f"method must be one of the methods that send a message: {', '.join(SEND_METHODS)}",
            code="invalid_method",
            details={"method": method, "methods": list(SEND_METHODS)},
        )
    version, op = SEND_METHODS[method]
    if stream is not None and stream != (op is Op.STREAM):
        raise RegistryError(
            f"stream {str(stream).lower()} contradicts method {method!r}; leave stream out "
            "(deprecated: the method says whether the call streams)",
            code="invalid_body",
            details={"field": "stream", "method": method},
        )
    if asked is not None and asked != version:
        raise RegistryError(
            f"version {body['version']!r} contradicts method {method!r}, which is A2A "
            f"{version}; leave version out (the method says it)",
            code="invalid_body",
            details={"field": "version", "method": method},
        )
    return method, version, op


def _default_version(message: dict[str, Any], header: str | None) -> Version:
    """Without a method or a version: the ``A2A-Version`` header's, else the message's shape
    (a 0.3 role or ``kind``-tagged parts: 0.3), else 1.0."""
    if header:
        try:
            return client_version(header)
        except RpcError as error:
            raise RegistryError(error.message, code="invalid_version") from None
    parts = message.get("parts")
    tagged = isinstance(parts, list) and any(isinstance(p, dict) and "kind" in p for p in parts)
    return "0.3" if message.get("role") in ("user", "agent") or tagged else "1.0"


def _params(body: dict[str, Any]) -> dict[str, Any]:
    """The send's params: the message with the ``taskId`` and ``contextId`` it continues
    (400 when it carries others), the configuration and the metadata; for an A2A v0.1
    method, the client's task ID as ``id`` (a new one without ``taskId``) and the context as
    ``sessionId``."""
    message = dict(body["message"])
    for name in ("taskId", "contextId"):
        given = body.get(name)
        if given is None:
            continue
        if message.get(name) not in (None, given):
            raise RegistryError(
                f"{name} {given!r} contradicts the message's {name}", code="invalid_body"
            )
        message[name] = given
    params: dict[str, Any] = {k: body[k] for k in ("configuration", "metadata") if k in body}
    if body.get("method") in _V01:
        params["id"] = message.pop("taskId", None) or f"explain-{uuid.uuid4()}"
        if "contextId" in message:
            params["sessionId"] = message.pop("contextId")
    params["message"] = message
    return params
