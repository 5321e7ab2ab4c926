"""JSON-RPC errors of the router's A2A endpoint, for A2A 0.3 and 1.0.

The codes (JSON-RPC 2.0, A2A's, Switchboard's own), the specification's message and the
``google.rpc.ErrorInfo`` reason of each, :class:`RpcError` (an error to answer with), and the
response bodies: :func:`error_body` shapes an error's ``data`` per version, a plain object in
0.3 and a list of typed detail objects (``google.rpc.ErrorInfo`` first) in 1.0
(:func:`shaped_data`); :func:`result_body` a success.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from router.protocol.versions import Version

__all__ = [
    "A2A_ERROR_DOMAIN",
    "AGENT_UNAVAILABLE",
    "BAD_REQUEST_TYPE",
    "BAD_ROUTING_HINT",
    "CONTENT_TYPE",
    "ERROR_DOMAIN",
    "ERROR_INFO_TYPE",
    "EXTENDED_CARD_NOT_CONFIGURED",
    "INTERNAL",
    "INVALID_AGENT_RESPONSE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_CANCELABLE",
    "NO_MATCHING_AGENT",
    "PARSE",
    "PUSH_NOT_SUPPORTED",
    "RATE_LIMITED",
    "REASONS",
    "SCALAR_METADATA",
    "STANDARD_MESSAGES",
    "STREAM_FAILED",
    "STRUCT_TYPE",
    "TASK_NOT_FOUND",
    "UNAUTHENTICATED",
    "UNSUPPORTED",
    "VALUE_TYPE",
    "VERSION_NOT_SUPPORTED",
    "RpcError",
    "error_body",
    "error_domain",
    "error_object",
    "result_body",
    "shaped_data",
    "valid_id",
]

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
UNAUTHENTICATED = -32054
RATE_LIMITED = -32055

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
    UNAUTHENTICATED: "UNAUTHENTICATED",
    RATE_LIMITED: "RATE_LIMITED",
}


# --- error objects --------------------------------------------------------------------------


class RpcError(Exception):
    """A JSON-RPC error to answer with.

    ``data`` is raw facts (a dict with camelCase keys, shaped per version by
    :func:`error_object`) unless ``shaped`` is true: then it is passed through verbatim (an
    upstream agent's error relayed as it came). ``reason`` overrides the ErrorInfo reason of
    the code; ``violations`` are (field, description) pairs of invalid params. ``id`` is the
    client's request id when known (set by :func:`router.protocol.envelope.parse_request`);
    ``version`` the version to answer in when the request's dialect says otherwise than its
    header (a v0.1 method, an ``A2A.`` prefix), else None.
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
    """A JSON-RPC error response (an ``id`` that is not a string, finite number or null is
    null)."""
    return {"jsonrpc": "2.0", "id": _response_id(id), "error": error_object(version, error)}


def result_body(id: Any, result: Any) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": _response_id(id), "result": result}


def _response_id(id: Any) -> str | int | float | None:
    return id if valid_id(id) else None


def valid_id(value: Any) -> bool:
    """Whether ``value`` may be a JSON-RPC ``id``: a string, a finite number (an integer or
    not: JSON-RPC 2.0 allows any number) or null."""
    if value is None or isinstance(value, str):
        return True
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


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


SCALAR_METADATA = frozenset({NO_MATCHING_AGENT})
"""The codes whose 1.0 ErrorInfo metadata holds only the scalar members of ``data`` (strings,
numbers, booleans, as strings): their lists and objects (a refusal's ``closest``) are in the
``google.protobuf.Struct`` detail alone. Other codes' metadata also holds those as compact
JSON."""


def _shape_v1(error: RpcError, data: Any) -> list[dict[str, Any]]:
    """1.0: ErrorInfo (string metadata), then the full data if structured, then BadRequest."""
    facts = data if isinstance(data, Mapping) else {}
    scalars = error.code in SCALAR_METADATA
    metadata = {
        str(key): _metadata_value(value)
        for key, value in facts.items()
        if not scalars or _scalar(value)
    }
    details: list[dict[str, Any]] = [
        {
            "@type": ERROR_INFO_TYPE,
            "reason": error.reason,
            "domain": error_domain(error.code),
            "metadata": metadata,
        }
    ]
    if isinstance(data, Mapping):
        if any(isinstance(value, Mapping | list | tuple) for value in data.values()) or (
            scalars and len(metadata) < len(data)
        ):
            details.append({"@type": STRUCT_TYPE, "value": dict(data)})
    elif data is not None:
        details.append({"@type": VALUE_TYPE, "value": data})
    if error.violations:
        details.append({"@type": BAD_REQUEST_TYPE, "fieldViolations": _violation_objects(error)})
    return details


def _scalar(value: Any) -> bool:
    """Whether a member of ``data`` is a string, number or boolean (for
    :data:`SCALAR_METADATA`)."""
    return isinstance(value, str | int | float | bool)


def _metadata_value(value: Any) -> str:
    """google.rpc.ErrorInfo metadata values are strings: other JSON values as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
