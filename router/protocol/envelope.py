"""The JSON-RPC 2.0 envelope of the router's A2A endpoint, for A2A 0.3 and 1.0.

Two legacy dialects are recognized here too (:mod:`router.compat.legacy`, docs/dialects.md): A2A
v0.1 names (``tasks/send``...) are read as the equivalent 0.3 call and ``A2A.``-prefixed 1.0
names as the 1.0 call, whatever the header says; :attr:`Request.dialect` tells which the
client speaks, so that it is answered in its own shape.

The protocol version of a call is the ``A2A-Version`` header (empty means 0.3, see
:func:`client_version`); both versions share one URL and differ in their method names
(:data:`METHODS`) and in the shape of an error's ``data``: a plain object in 0.3, a list of
typed detail objects (``google.rpc.ErrorInfo`` first) in 1.0 (:func:`error_body`).

:func:`parse_request` parses and checks one request; every envelope error it raises is an
:class:`RpcError` carrying the client's ``id`` when it could be read (``None`` otherwise).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from registry.jsonsafe import JsonLimitError, loads_limited
from router.protocol.fieldnames import json_names

__all__ = [
    "A2A_ERROR_DOMAIN",
    "AGENT_UNAVAILABLE",
    "BAD_ROUTING_HINT",
    "CONTENT_TYPE",
    "EXTENDED_CARD_NOT_CONFIGURED",
    "INTERNAL",
    "INVALID_AGENT_RESPONSE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHODS",
    "METHOD_NOT_FOUND",
    "NOT_CANCELABLE",
    "NO_MATCHING_AGENT",
    "PARSE",
    "PUSH_NOT_SUPPORTED",
    "STREAM_FAILED",
    "TASK_NOT_FOUND",
    "UNSUPPORTED",
    "VERSIONS",
    "VERSION_HEADER",
    "VERSION_NOT_SUPPORTED",
    "Dialect",
    "Op",
    "Request",
    "RpcError",
    "Version",
    "client_version",
    "equivalent_method",
    "error_body",
    "error_domain",
    "error_object",
    "method_name",
    "parse_request",
    "result_body",
    "version_of",
]

Version = Literal["0.3", "1.0"]
VERSIONS: tuple[Version, ...] = ("0.3", "1.0")
# What a client speaks: a version, or a legacy dialect served as one (router.compat.legacy).
Dialect = Literal["0.3", "1.0", "0.1", "1.0-prefixed"]
VERSION_HEADER = "A2A-Version"

# JSON-RPC 2.0 and A2A error codes (A2A 1.0 section 5.4; 0.3 section 8).
PARSE = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL = -32603
TASK_NOT_FOUND = -32001
NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED = -32004
CONTENT_TYPE = -32005
INVALID_AGENT_RESPONSE = -32006
EXTENDED_CARD_NOT_CONFIGURED = -32007
VERSION_NOT_SUPPORTED = -32009
# Switchboard's own (docs/routing.md).
NO_MATCHING_AGENT = -32050
BAD_ROUTING_HINT = -32051
AGENT_UNAVAILABLE = -32052
STREAM_FAILED = -32053

ERROR_DOMAIN = "switchboard.a2a"  # the ErrorInfo domain of Switchboard's own codes (-3205x)
A2A_ERROR_DOMAIN = "a2a-protocol.org"  # the spec's and the 1.x SDK's, for the standard codes
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"
STRUCT_TYPE = "type.googleapis.com/google.protobuf.Struct"
VALUE_TYPE = "type.googleapis.com/google.protobuf.Value"


def error_domain(code: int) -> str:
    """The ErrorInfo ``domain`` of an error code: ``a2a-protocol.org`` for the JSON-RPC
    (-32700..-32600) and A2A (-32001..-32009) codes, as the 1.0 spec and the 1.x SDK say;
    :data:`ERROR_DOMAIN` for Switchboard's own and any other code."""
    if -32700 <= code <= -32600 or -32009 <= code <= -32001:
        return A2A_ERROR_DOMAIN
    return ERROR_DOMAIN


# The specification's message of each standard code (A2A 1.0 section 9.5 and 5.4, 0.3 section
# 8): what clients and the conformance suite look for. The router's own explanation of an
# error goes to ``data.detail`` (see :func:`error_object`).
STANDARD_MESSAGES: dict[int, str] = {
    PARSE: "Invalid JSON payload",
    INVALID_REQUEST: "Request payload validation error",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid parameters",
    INTERNAL: "Internal error",
    TASK_NOT_FOUND: "Task not found",
    NOT_CANCELABLE: "Task cannot be canceled",
    PUSH_NOT_SUPPORTED: "Push Notification is not supported",
    UNSUPPORTED: "This operation is not supported",
    CONTENT_TYPE: "Incompatible content types",
    INVALID_AGENT_RESPONSE: "Invalid agent response",
    EXTENDED_CARD_NOT_CONFIGURED: "Authenticated Extended Card is not configured",
    -32008: "Extension support required",
    VERSION_NOT_SUPPORTED: "Version not supported",
}

# ErrorInfo reasons per code; the A2A ones are those the official SDK uses.
REASONS: dict[int, str] = {
    PARSE: "PARSE_ERROR",
    INVALID_REQUEST: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PARAMS",
    INTERNAL: "INTERNAL_ERROR",
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE: "CONTENT_TYPE_NOT_SUPPORTED",
    INVALID_AGENT_RESPONSE: "INVALID_AGENT_RESPONSE",
    EXTENDED_CARD_NOT_CONFIGURED: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
    NO_MATCHING_AGENT: "NO_MATCHING_AGENT",
    BAD_ROUTING_HINT: "BAD_ROUTING_HINT",
    AGENT_UNAVAILABLE: "AGENT_UNAVAILABLE",
    STREAM_FAILED: "STREAM_FAILED",
}


class Op(StrEnum):
    """What a method does, the same in both versions."""

    SEND = "send"
    STREAM = "stream"
    GET = "get"
    CANCEL = "cancel"
    SUBSCRIBE = "subscribe"
    LIST = "list"
    PUSH_CONFIG = "push-config"  # any push-notification-config method
    CARD = "card"  # A2A v0.1 agent/getCard (router.compat.legacy)


# (0.3 name, 1.0 name, op); None where a version has no such method.
_METHOD_PAIRS: tuple[tuple[str | None, str | None, Op], ...] = (
    ("message/send", "SendMessage", Op.SEND),
    ("message/stream", "SendStreamingMessage", Op.STREAM),
    ("tasks/get", "GetTask", Op.GET),
    (None, "ListTasks", Op.LIST),
    ("tasks/cancel", "CancelTask", Op.CANCEL),
    ("tasks/resubscribe", "SubscribeToTask", Op.SUBSCRIBE),
    ("tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs", Op.PUSH_CONFIG),
    ("tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig", Op.PUSH_CONFIG),
)

METHODS: dict[Version, dict[str, Op]] = {
    "0.3": {old: op for old, _, op in _METHOD_PAIRS if old},
    "1.0": {new: op for _, new, op in _METHOD_PAIRS if new},
}

# Methods of A2A that the router knows but does not serve (no extended card).
_EXTENDED_CARD_METHODS = {
    "agent/getAuthenticatedExtendedCard": "0.3",
    "GetExtendedAgentCard": "1.0",
}


def method_name(version: Version, op: Op) -> str:
    """The method of ``version`` for ``op``; ValueError for PUSH_CONFIG (several) or a gap."""
    names = [name for name, method_op in METHODS[version].items() if method_op == op]
    if len(names) != 1:
        raise ValueError(f"A2A {version} has {len(names)} methods for {op.value!r}")
    return names[0]


def equivalent_method(method: str, to_version: Version) -> str | None:
    """The name of ``method`` (of either version) in ``to_version``; None if it has none."""
    for old, new, _ in _METHOD_PAIRS:
        if method in (old, new):
            return old if to_version == "0.3" else new
    return None


# --- versions -------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.\d+)?$")


def _major_minor(text: str) -> tuple[int, int] | None:
    found = _VERSION_RE.match(text.strip())
    if found is None:
        return None
    return int(found.group(1)), int(found.group(2) or 0)


def client_version(header_value: str | None) -> Version:
    """The version a client asks for in ``A2A-Version``: none or empty means 0.3.

    Patch numbers are ignored (``0.3.0`` is 0.3, ``1`` and ``1.0.1`` are 1.0); anything
    else raises :class:`RpcError` ``-32009`` naming the supported versions.
    """
    if header_value is None or not header_value.strip():
        return "0.3"
    parsed = _major_minor(header_value)
    if parsed == (0, 3):
        return "0.3"
    if parsed == (1, 0):
        return "1.0"
    raise RpcError(
        VERSION_NOT_SUPPORTED,
        f"A2A-Version {header_value.strip()!r} is not supported: Switchboard speaks A2A 1.0 "
        "(send A2A-Version: 1.0) and A2A 0.3 (send no A2A-Version header, or 0.3)",
        {"requestedVersion": header_value.strip(), "supportedVersions": list(VERSIONS)},
    )


def version_of(protocol_version: str) -> Version | None:
    """The router version of an agent interface's ``protocolVersion``: 0.x is "0.3"."""
    parsed = _major_minor(protocol_version) if isinstance(protocol_version, str) else None
    if parsed is None:
        return None
    if parsed[0] == 0:
        return "0.3"
    if parsed == (1, 0):
        return "1.0"
    return None


# --- errors ---------------------------------------------------------------------------------


class RpcError(Exception):
    """A JSON-RPC error to answer with.

    ``data`` is raw facts (a dict with camelCase keys, shaped per version by
    :func:`error_object`) unless ``shaped`` is true: then it is passed through verbatim (an
    upstream agent's error relayed as it came). ``reason`` overrides the ErrorInfo reason of
    the code; ``violations`` are (field, description) pairs of invalid params. ``id`` is the
    client's request id when known (set by :func:`parse_request`); ``version`` the version
    to answer in when the request's dialect says otherwise than its header (a v0.1 method,
    an ``A2A.`` prefix), else None.
    """

    def __init__(
        self,
        code: int,
        message: str,
        data: Any = None,
        *,
        reason: str | None = None,
        violations: Iterable[tuple[str, str]] = (),
        shaped: bool = False,
        id: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.reason = reason or REASONS.get(code, "UNKNOWN_ERROR")
        self.violations = tuple(violations)
        self.shaped = shaped
        self.id = id
        self.version: Version | None = None

    @classmethod
    def relayed(cls, error: Mapping[str, Any]) -> RpcError:
        """An upstream JSON-RPC ``error`` object, to relay with its code, message and data."""
        code = error.get("code")
        message = error.get("message")
        return cls(
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL,
            message if isinstance(message, str) else "",
            error.get("data"),
            shaped=True,
        )

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r}, {self.data!r})"


def error_object(version: Version, error: RpcError) -> dict[str, Any]:
    """The ``error`` member: code, message and ``data`` in the shape of ``version``. A
    standard code gets the specification's message (:data:`STANDARD_MESSAGES`) and the
    router's own explanation in ``data.detail``; an agent's error relayed as it came
    (``shaped``) keeps its message."""
    if error.shaped:
        body: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["data"] = error.data
        return body
    message, data = error.message, error.data
    standard = STANDARD_MESSAGES.get(error.code)
    if standard is not None and message != standard:
        message, data = standard, _with_detail(data, message)
    body = {"code": error.code, "message": message}
    shaped = shaped_data(version, error, data)
    if shaped is not None:
        body["data"] = shaped
    return body


def _with_detail(data: Any, detail: str) -> Any:
    """``data`` with the router's explanation under ``detail`` (a data that is not an object
    moves under ``value``)."""
    if data is None:
        return {"detail": detail}
    if isinstance(data, Mapping):
        return data if "detail" in data else {"detail": detail, **data}
    return {"detail": detail, "value": data}


def error_body(version: Version, id: Any, error: RpcError) -> dict[str, Any]:
    """A JSON-RPC error response (an ``id`` that is not a string, integer or null is null)."""
    return {"jsonrpc": "2.0", "id": _response_id(id), "error": error_object(version, error)}


def result_body(id: Any, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": _response_id(id), "result": result}


def _response_id(id: Any) -> str | int | None:
    return id if _valid_id(id) else None


def _valid_id(value: Any) -> bool:
    return value is None or isinstance(value, str) or _is_int(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _violation_objects(error: RpcError) -> list[dict[str, str]]:
    return [{"field": field, "description": text} for field, text in error.violations]


def shaped_data(version: Version, error: RpcError, data: Any) -> Any:
    """``data`` (of ``error``) in the shape of ``version``: see :func:`_shape_v03` and
    :func:`_shape_v1`."""
    if version == "0.3":
        return _shape_v03(error, data)
    return _shape_v1(error, data)


def _shape_v03(error: RpcError, data: Any) -> Any:
    """0.3: a plain object (field violations under ``fieldViolations``); None when empty."""
    if not error.violations:
        return data
    shaped = dict(data) if isinstance(data, Mapping) else {} if data is None else {"detail": data}
    shaped["fieldViolations"] = _violation_objects(error)
    return shaped


def _shape_v1(error: RpcError, data: Any) -> list[dict[str, Any]]:
    """1.0: ErrorInfo (string metadata), then the full data if structured, then BadRequest."""
    facts = data if isinstance(data, Mapping) else {}
    details: list[dict[str, Any]] = [
        {
            "@type": ERROR_INFO_TYPE,
            "reason": error.reason,
            "domain": error_domain(error.code),
            "metadata": {str(key): _metadata_value(value) for key, value in facts.items()},
        }
    ]
    if isinstance(data, Mapping):
        if any(isinstance(value, Mapping | list | tuple) for value in data.values()):
            details.append({"@type": STRUCT_TYPE, "value": dict(data)})
    elif data is not None:
        details.append({"@type": VALUE_TYPE, "value": data})
    if error.violations:
        details.append({"@type": BAD_REQUEST_TYPE, "fieldViolations": _violation_objects(error)})
    return details


def _metadata_value(value: Any) -> str:
    """google.rpc.ErrorInfo metadata values are strings: other JSON values as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


# --- requests -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """A parsed JSON-RPC request of one A2A version.

    ``dialect`` is what the client speaks (its ``version`` unless a legacy dialect: then
    ``method``/``params``/``op``/``version`` are the equivalent call the router serves);
    ``client_task_id`` is the task ID a v0.1 client chose (see :mod:`router.compat.codec`).
    """

    id: str | int | None
    method: str
    params: dict[str, Any]
    op: Op
    version: Version
    dialect: Dialect | None = None  # None: the same as version
    client_task_id: str | None = None

    def __post_init__(self) -> None:
        if self.dialect is None:
            object.__setattr__(self, "dialect", self.version)


def parse_request(body: bytes, version: Version, header: str | None, *, max_depth: int) -> Request:
    """Parse and check one JSON-RPC request of A2A ``version`` (``header``: the client's
    ``A2A-Version`` header, which names the fix when a method belongs to the other version).

    A v0.1 method (:data:`router.compat.legacy.V01_METHODS`: one only v0.1 has, or a shared name
    with a v0.1 ``sessionId``) is read as its 0.3 equivalent, dialect "0.1"; an ``A2A.``
    name as the 1.0 method, dialect "1.0-prefixed", whatever ``version`` is.

    Raises :class:`RpcError`: -32700 (not JSON, nested too deep), -32600 (a
    batch, not an object, bad ``jsonrpc``/``id``/``method``/``params``), -32601 (no such
    method in ``version``), -32602 (invalid params, each field named by its path), -32003 (a
    push notification config in a send), -32007 (extended card).
    """
    from router.compat import legacy  # legacy imports this module

    document = _parse(body, max_depth)
    request_id = _request_id(document)
    dialect: Dialect = version
    client_task_id = None
    try:
        method, params = _envelope(document)
        if method.startswith(legacy.PREFIX):
            version, dialect = "1.0", "1.0-prefixed"
            method, params = legacy.prefixed_to_v1(method, params)
        elif _is_v01(method, params, version):
            version, dialect = "0.3", "0.1"
            call = legacy.v01_to_v03(method, params)
            if call.op is Op.CARD:
                return Request(request_id, method, {}, Op.CARD, version, dialect)
            method, params, client_task_id = call.method, call.params, call.client_task_id
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
    from router.compat import legacy

    if method in legacy.V01_ONLY_METHODS:
        return True
    return version == "0.3" and method in legacy.V01_METHODS and "sessionId" in params


def _parse(body: bytes, max_depth: int) -> Any:
    if not body.strip():
        raise RpcError(
            PARSE,
            "The request body is empty: send one JSON-RPC 2.0 request object",
            {"problem": "empty body"},
        )
    try:
        return loads_limited(body, max_depth=max_depth)
    except JsonLimitError as exc:
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


def _request_id(document: Any) -> str | int | None:
    """The client's id if it can be used in the answer, else None."""
    if isinstance(document, dict):
        value = document.get("id")
        if _valid_id(value):
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
    if "id" in document and not _valid_id(document["id"]):
        raise _invalid(
            f"'id' must be a string, an integer or null; got {_describe(document['id'])}",
            "id",
            received=_json_type(document["id"]),
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
    if method in _EXTENDED_CARD_METHODS:
        raise RpcError(
            EXTENDED_CARD_NOT_CONFIGURED,
            f"{method}: Switchboard has no extended agent card; its public card at "
            "/.well-known/agent-card.json is complete",
            facts,
        )
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
    (:func:`router.protocol.fieldnames.json_names`). RpcError: -32003 for a push notification config
    method (not supported: said before any check of its params) or one in a send, -32602
    naming each bad field by its path; see :func:`router.protocol.payloads.check_send_params`,
    :func:`router.protocol.payloads.check_task_params` and
    :func:`router.protocol.payloads.list_tasks_query`."""
    from router.protocol import payloads as wire  # wire imports this module

    if op is Op.PUSH_CONFIG:
        raise RpcError(
            PUSH_NOT_SUPPORTED,
            "Push Notification is not supported: Switchboard does not relay push "
            "notifications; use streaming or polling",
            {"method": method},
        )
    params, clashes = json_names(version, op.value, params)
    if clashes:
        raise wire.params_error(clashes)
    if op in (Op.SEND, Op.STREAM):
        wire.check_send_params(version, params)
    elif op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
        wire.check_task_params(version, op, params)
    elif op is Op.LIST:
        wire.list_tasks_query(params)
    return params
