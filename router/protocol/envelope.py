"""The JSON-RPC 2.0 request envelope of the router's A2A endpoint, for A2A 0.3 and 1.0.

Two legacy dialects are recognized here too (docs/dialects.md): A2A v0.1 names
(``tasks/send``...) are read as the equivalent 0.3 call and ``A2A.``-prefixed 1.0 names as the
1.0 call, whatever the header says; :attr:`Request.dialect` tells which the client speaks, so
that it is answered in its own shape. Their calls are converted by the caller's
:data:`DialectReader` (:mod:`router.compat` knows the dialects; this package does not).

:func:`parse_request` parses and checks one request: the JSON-RPC document, its method (in the
tables of :mod:`router.protocol.versions`) and its params; every envelope error it raises is an
:class:`~router.protocol.errors.RpcError` carrying the client's ``id`` when it could be read
(``None`` otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from registry.jsonsafe import JsonLimitError, loads_limited
from router.protocol import payloads as wire
from router.protocol.errors import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE,
    RpcError,
    valid_id,
)
from router.protocol.fieldnames import json_names
from router.protocol.listing import list_tasks_query
from router.protocol.stored import check_stored
from router.protocol.versions import (
    EXTENDED_CARD_METHODS,
    METHODS,
    PREFIX,
    V01_METHODS,
    V01_ONLY_METHODS,
    Dialect,
    Op,
    Version,
    equivalent_method,
)

__all__ = [
    "DialectReader",
    "Request",
    "parse_request",
]


# --- requests -------------------------------------------------------------------------------

DialectReader = Callable[[Dialect, str, dict[str, Any]], tuple[str, dict[str, Any], str | None]]
"""A legacy dialect's call (dialect, method, params) as the call the router serves: its method,
params and the task ID a v0.1 client chose (:func:`router.compat.dialects.served_call`)."""


@dataclass(frozen=True)
class Request:
    """A parsed JSON-RPC request of one A2A version.

    ``dialect`` is what the client speaks (its ``version`` unless a legacy dialect: then
    ``method``/``params``/``op``/``version`` are the equivalent call the router serves);
    ``client_task_id`` is the task ID a v0.1 client chose (see :mod:`router.compat.codec`).
    """

    id: str | int | float | None
    method: str
    params: dict[str, Any]
    op: Op
    version: Version
    dialect: Dialect | None = None  # None: the same as version
    client_task_id: str | None = None

    def __post_init__(self) -> None:
        if self.dialect is None:
            object.__setattr__(self, "dialect", self.version)


def parse_request(
    body: bytes,
    version: Version,
    header: str | None,
    *,
    max_depth: int,
    dialects: DialectReader,
) -> Request:
    """Parse and check one JSON-RPC request of A2A ``version`` (``header``: the client's
    ``A2A-Version`` header, which names the fix when a method belongs to the other version).

    A v0.1 method (:data:`router.protocol.versions.V01_METHODS`: one only v0.1 has, or a
    shared name with a v0.1 ``sessionId``) is read as its 0.3 equivalent, dialect "0.1"; an
    ``A2A.`` name as the 1.0 method, dialect "1.0-prefixed", whatever ``version`` is; the
    caller's ``dialects`` (:func:`router.compat.dialects.served_call`) makes the served call.

    Raises :class:`RpcError`: -32700 (not JSON, nested too deep), -32600 (a
    batch, not an object, bad ``jsonrpc``/``id``/``method``/``params``; an ``id`` beyond a
    double's range), -32601 (no such method in ``version``), -32602 (invalid params, each
    field named by its path; NUL in a value the router stores:
    :func:`router.protocol.stored.check_stored`). The extended card methods are
    :attr:`Op.EXTENDED_CARD` calls (the router answers them itself). Strings may hold NUL
    elsewhere (message content passes through).
    """
    document = _parse(body, max_depth)
    request_id = _request_id(document)
    dialect: Dialect = version
    client_task_id = None
    try:
        method, params = _envelope(document)
        if method.startswith(PREFIX):
            version, dialect = "1.0", "1.0-prefixed"
        elif _is_v01(method, params, version):
            version, dialect = "0.3", "0.1"
            if V01_METHODS[method][0] is Op.CARD:
                return Request(request_id, method, {}, Op.CARD, version, dialect)
        if dialect in ("0.1", "1.0-prefixed"):
            method, params, client_task_id = dialects(dialect, method, params)
        op = _lookup(method, version, header)
        params = _check_params(version, op, method, params)
    except RpcError as exc:
        exc.id = request_id
        if dialect in ("0.1", "1.0-prefixed"):  # answered in the dialect's shape
            exc.version = version
        raise
    return Request(request_id, method, params, op, version, dialect, client_task_id)


def _is_v01(method: str, params: dict[str, Any], version: Version) -> bool:
    """Whether a call is A2A v0.1: a name only v0.1 has, or a 0.3 name of v0.1 too (get,
    cancel, resubscribe) with a ``sessionId``, which 0.3 does not have."""
    if method in V01_ONLY_METHODS:
        return True
    return version == "0.3" and method in V01_METHODS and "sessionId" in params


def _parse(body: bytes, max_depth: int) -> Any:
    if not body.strip():
        raise RpcError(
            PARSE,
            "The request body is empty: send one JSON-RPC 2.0 request object",
            {"problem": "empty body"},
        )
    try:
        return loads_limited(body, max_depth=max_depth, allow_nul=True)
    except JsonLimitError as exc:
        if exc.details.get("problem") == "non-finite number":
            _check_finite_id(body, max_depth)
        if exc.code == "json_too_deep":
            raise RpcError(
                PARSE,
                f"The request body is too deeply nested: {exc.message}",
                {"maxDepth": max_depth},
                reason="JSON_TOO_DEEP",
            ) from None
        raise RpcError(
            PARSE, f"The request body is not valid JSON: {exc.message}", dict(exc.details)
        ) from None


def _check_finite_id(body: bytes, max_depth: int) -> None:
    """-32600 (``id`` null) when the number beyond a double's range that made ``body``
    unreadable is the request's ``id``: valid JSON, and an id no client can be answered
    with."""
    try:
        document = loads_limited(body, max_depth=max_depth, allow_nul=True, finite=False)
    except JsonLimitError:
        return
    if isinstance(document, dict):
        _check_id(document)


def _request_id(document: Any) -> str | int | float | None:
    """The client's id if it can be used in the answer, else None."""
    if isinstance(document, dict):
        value = document.get("id")
        if valid_id(value):
            return value
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{text} ({_json_type(value)})"


def _invalid(message: str, field: str | None = None, **facts: Any) -> RpcError:
    data = {"field": field, **facts} if field else facts
    return RpcError(INVALID_REQUEST, message, data or None)


def _envelope(document: Any) -> tuple[str, dict[str, Any]]:
    """Check the JSON-RPC 2.0 request object; its method and params."""
    if isinstance(document, list):
        raise RpcError(
            INVALID_REQUEST,
            "Batch requests are not supported: send one JSON-RPC request object per HTTP request",
            {"batchSize": len(document)},
            reason="BATCH_NOT_SUPPORTED",
        )
    if not isinstance(document, dict):
        raise _invalid(
            f"A JSON-RPC request must be a JSON object, not {_json_type(document)}",
            received=_json_type(document),
        )
    _check_id(document)
    _check_jsonrpc(document)
    method = _check_method(document)
    return method, _check_params_object(document)


def _check_id(document: dict[str, Any]) -> None:
    if "id" in document and not valid_id(document["id"]):
        value = document["id"]
        shown = (
            "a number beyond the range of a double"
            if isinstance(value, float)  # valid_id refuses only the infinite ones
            else _describe(value)
        )
        raise _invalid(
            f"'id' must be a string, a finite number or null; got {shown}",
            "id",
            received=_json_type(value),
        )


def _check_jsonrpc(document: dict[str, Any]) -> None:
    if "jsonrpc" not in document:
        raise _invalid("'jsonrpc' is missing: it must be \"2.0\"", "jsonrpc")
    if document["jsonrpc"] != "2.0":
        raise _invalid(
            f"'jsonrpc' must be exactly \"2.0\"; got {_describe(document['jsonrpc'])}", "jsonrpc"
        )


def _check_method(document: dict[str, Any]) -> str:
    if "method" not in document:
        raise _invalid("'method' is missing", "method")
    method = document["method"]
    if not isinstance(method, str) or not method:
        raise _invalid(f"'method' must be a non-empty string; got {_describe(method)}", "method")
    return method


def _check_params_object(document: dict[str, Any]) -> dict[str, Any]:
    if "params" not in document:
        return {}
    params = document["params"]
    if not isinstance(params, dict):
        raise _invalid(
            f"'params' must be an object for A2A methods; got {_json_type(params)}",
            "params",
            received=_json_type(params),
        )
    return params


def _header_phrase(header: str | None) -> str:
    if header is None or not header.strip():
        return "this request has no A2A-Version header, so it is A2A 0.3"
    return f"this request has A2A-Version {header.strip()}"


def _lookup(method: str, version: Version, header: str | None) -> Op:
    """The op of ``method`` in ``version``, else RpcError saying what to send instead."""
    op = METHODS[version].get(method)
    if op is not None:
        return op
    facts: dict[str, Any] = {"method": method, "version": version}
    other: Version = "1.0" if version == "0.3" else "0.3"
    if method in METHODS[other]:
        raise RpcError(
            METHOD_NOT_FOUND,
            f"{method} is an A2A {other} method; {_header_phrase(header)}: "
            + _fix_for(method, version, other),
            {**facts, "methodVersion": other, "useMethod": equivalent_method(method, version)},
        )
    if method in EXTENDED_CARD_METHODS:
        return Op.EXTENDED_CARD  # the router answers it (router.forward.handler)
    raise RpcError(
        METHOD_NOT_FOUND,
        f"Method {method!r} does not exist in A2A {version}",
        {**facts, "supportedMethods": list(METHODS[version])},
    )


def _fix_for(method: str, version: Version, other: Version) -> str:
    same = equivalent_method(method, version)
    header = "drop the A2A-Version header" if other == "0.3" else "send A2A-Version: 1.0"
    if same is None:
        return f"{method} exists only in A2A {other}; {header} to call it"
    return f"use {same}, or {header}"


def _check_params(version: Version, op: Op, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The params of ``op``, with proto field names read as JSON names
    (:func:`router.protocol.fieldnames.json_names`). RpcError -32602
    naming each bad field by its path; see :func:`router.protocol.payloads.check_send_params`,
    :func:`router.protocol.payloads.check_task_params`,
    :func:`router.protocol.payloads.check_push_config_params` and
    :func:`router.protocol.payloads.list_tasks_query`."""
    params, clashes = json_names(version, op.value, params)
    if clashes:
        raise wire.params_error(clashes)
    _check_shape(version, op, method, params)
    check_stored(op, params)
    return params


def _check_shape(version: Version, op: Op, method: str, params: dict[str, Any]) -> None:
    if op in (Op.SEND, Op.STREAM):
        wire.check_send_params(version, params)
    elif op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE, Op.PUSH_CONFIG):
        wire.check_task_params(version, op, params)
        if op is Op.PUSH_CONFIG:
            wire.check_push_config_params(version, method, params)
    elif op is Op.LIST:
        list_tasks_query(params)
