"""The A2A 1.0 gRPC binding's messages as the JSON-RPC binding's JSON, and back; its errors.

Pure conversions for :mod:`router.transport.grpcserver`, on the a2a-sdk's generated
``a2a.types.a2a_pb2`` (the normative ``a2a.proto``, service ``lf.a2a.v1.A2AService``):

- :data:`RPCS`: each RPC of the service, its request and response message and whether it
  streams; the RPC names are the 1.0 JSON-RPC method names.
- :func:`rpc_body`: a request message as the 1.0 JSON-RPC request the router parses
  (:func:`router.protocol.envelope.parse_request`): its params are the message's proto3 JSON
  (``json_format.MessageToDict``: lowerCamelCase names, enum names, RFC 3339 timestamps),
  which is the 1.0 JSON the JSON-RPC binding carries.
- :func:`result_message`: a 1.0 JSON-RPC ``result`` parsed into the RPC's response message
  (unknown fields are an error, not dropped: a bug shows).
- :func:`error_status`: a 1.0 JSON-RPC ``error`` object as a gRPC status code, message and
  the ``grpc-status-details-bin`` trailer (a ``google.rpc.Status`` whose details are the
  error's ``google.rpc.ErrorInfo`` and the rest of its typed details), the codes mapped as
  the 1.0 specification's table says (section 5.4).

The other way, for calling gRPC agents (:mod:`router.forward.upstream_grpc`):
:func:`request_message` (1.0 params as the RPC's request message), :func:`result_json` (a
response message as the 1.0 ``result``) and :func:`status_error` (an agent's gRPC status as
the 1.0 JSON-RPC ``error``, the table read backwards).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from a2a.types import a2a_pb2
from google.protobuf import any_pb2, empty_pb2, json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from router.protocol.errors import (
    A2A_ERROR_DOMAIN,
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    CONTENT_TYPE,
    ERROR_DOMAIN,
    ERROR_INFO_TYPE,
    INTERNAL,
    INVALID_AGENT_RESPONSE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_MATCHING_AGENT,
    PARSE,
    RATE_LIMITED,
    REASONS,
    STREAM_FAILED,
    STRUCT_TYPE,
    TASK_NOT_FOUND,
    UNAUTHENTICATED,
    UNSUPPORTED,
    VALUE_TYPE,
    error_domain,
)

__all__ = [
    "RPCS",
    "SERVICE",
    "STATUS_DETAILS_KEY",
    "Rpc",
    "error_status",
    "grpc_code",
    "request_message",
    "result_json",
    "result_message",
    "rpc_body",
    "status_error",
]

SERVICE = "lf.a2a.v1.A2AService"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
"""The trailer carrying the serialized ``google.rpc.Status`` (the gRPC richer error model)."""


@dataclass(frozen=True)
class Rpc:
    """One RPC of the service: its request and response messages, and whether the response
    is a server stream (of ``StreamResponse``)."""

    name: str
    request: type[Message]
    response: type[Message]
    streaming: bool = False


RPCS: dict[str, Rpc] = {
    rpc.name: rpc
    for rpc in (
        Rpc("SendMessage", a2a_pb2.SendMessageRequest, a2a_pb2.SendMessageResponse),
        Rpc("SendStreamingMessage", a2a_pb2.SendMessageRequest, a2a_pb2.StreamResponse, True),
        Rpc("GetTask", a2a_pb2.GetTaskRequest, a2a_pb2.Task),
        Rpc("ListTasks", a2a_pb2.ListTasksRequest, a2a_pb2.ListTasksResponse),
        Rpc("CancelTask", a2a_pb2.CancelTaskRequest, a2a_pb2.Task),
        Rpc("SubscribeToTask", a2a_pb2.SubscribeToTaskRequest, a2a_pb2.StreamResponse, True),
        Rpc(
            "CreateTaskPushNotificationConfig",
            a2a_pb2.TaskPushNotificationConfig,
            a2a_pb2.TaskPushNotificationConfig,
        ),
        Rpc(
            "GetTaskPushNotificationConfig",
            a2a_pb2.GetTaskPushNotificationConfigRequest,
            a2a_pb2.TaskPushNotificationConfig,
        ),
        Rpc(
            "ListTaskPushNotificationConfigs",
            a2a_pb2.ListTaskPushNotificationConfigsRequest,
            a2a_pb2.ListTaskPushNotificationConfigsResponse,
        ),
        Rpc(
            "DeleteTaskPushNotificationConfig",
            a2a_pb2.DeleteTaskPushNotificationConfigRequest,
            empty_pb2.Empty,
        ),
        Rpc("GetExtendedAgentCard", a2a_pb2.GetExtendedAgentCardRequest, a2a_pb2.AgentCard),
    )
}
"""Every RPC of ``lf.a2a.v1.A2AService``, by name (the 1.0 JSON-RPC method of the same name)."""


def rpc_body(rpc: Rpc, request: Message, request_id: int = 1) -> bytes:
    """``request`` of ``rpc`` as the body of the equivalent 1.0 JSON-RPC request."""
    params = json_format.MessageToDict(request)
    document = {"jsonrpc": "2.0", "id": request_id, "method": rpc.name, "params": params}
    return json.dumps(document, separators=(",", ":")).encode()


def result_message(rpc: Rpc, result: Any) -> Message:
    """A 1.0 JSON-RPC ``result`` as ``rpc``'s response message (one event of a stream).
    :class:`google.protobuf.json_format.ParseError` when it does not fit (an unknown field,
    a wrong type)."""
    message = rpc.response()
    if result is None and isinstance(message, empty_pb2.Empty):
        return message
    return json_format.ParseDict(result, message, ignore_unknown_fields=False)


# The 1.0 specification's table (section 5.4) for the A2A codes; the JSON-RPC codes as the
# official SDK's gRPC handler maps them; Switchboard's own as its HTTP statuses say.
_CODES: dict[int, grpc.StatusCode] = {
    PARSE: grpc.StatusCode.INVALID_ARGUMENT,
    INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    METHOD_NOT_FOUND: grpc.StatusCode.UNIMPLEMENTED,
    INVALID_PARAMS: grpc.StatusCode.INVALID_ARGUMENT,
    INTERNAL: grpc.StatusCode.INTERNAL,
    TASK_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    CONTENT_TYPE: grpc.StatusCode.INVALID_ARGUMENT,
    INVALID_AGENT_RESPONSE: grpc.StatusCode.INTERNAL,
    NO_MATCHING_AGENT: grpc.StatusCode.NOT_FOUND,
    BAD_ROUTING_HINT: grpc.StatusCode.INVALID_ARGUMENT,
    AGENT_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    STREAM_FAILED: grpc.StatusCode.UNAVAILABLE,
    UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    RATE_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def grpc_code(code: int) -> grpc.StatusCode:
    """The gRPC status of a JSON-RPC error code: the specification's table (-32001
    ``NOT_FOUND``; -32002/3/4/7/8/9 ``FAILED_PRECONDITION``; -32005 ``INVALID_ARGUMENT``;
    -32006 ``INTERNAL``), the JSON-RPC codes, Switchboard's own (-32050 ``NOT_FOUND``, -32051
    ``INVALID_ARGUMENT``, -32052/-32053 ``UNAVAILABLE``, -32054 ``UNAUTHENTICATED``, -32055
    ``RESOURCE_EXHAUSTED``); any other (an agent's own) ``UNKNOWN``."""
    if code in _CODES:
        return _CODES[code]
    if -32009 <= code <= -32001:
        return grpc.StatusCode.FAILED_PRECONDITION
    return grpc.StatusCode.UNKNOWN


def error_status(
    error: Mapping[str, Any], code: grpc.StatusCode | None = None
) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes], ...]]:
    """A 1.0 JSON-RPC ``error`` object as (status code, message, trailing metadata).

    The code is :func:`grpc_code` of the error's unless ``code`` is given (the Gate's 503);
    the message is the router's explanation (``ErrorInfo.metadata.detail``) when there is one,
    else the error's message; the trailer holds a ``google.rpc.Status`` with the error's
    typed details (``ErrorInfo`` first: one is made from the code when an agent's error had
    none; data that is not typed details becomes a ``Struct`` or ``Value`` detail)."""
    number = error.get("code")
    number = number if isinstance(number, int) and not isinstance(number, bool) else INTERNAL
    message = error.get("message") if isinstance(error.get("message"), str) else ""
    details = _details(error.get("data"))
    infos = [d for d in details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    if not infos:
        info = error_details_pb2.ErrorInfo(
            reason=REASONS.get(number, "UNKNOWN_ERROR"), domain=error_domain(number)
        )
        packed = any_pb2.Any()
        packed.Pack(info)
        details.insert(0, packed)
    else:
        info = error_details_pb2.ErrorInfo()
        infos[0].Unpack(info)
        message = info.metadata.get("detail") or message
    status_code = code or grpc_code(number)
    status = status_pb2.Status(code=status_code.value[0], message=message, details=details)
    return status_code, message, ((STATUS_DETAILS_KEY, status.SerializeToString()),)


def _details(data: Any) -> list[any_pb2.Any]:
    """Typed details (``{"@type": ...}`` objects) as ``Any`` messages; other data as one
    ``Struct`` (an object) or ``Value`` detail; unreadable details are left out."""
    if data is None:
        return []
    if isinstance(data, list) and all(isinstance(d, Mapping) and "@type" in d for d in data):
        typed = list(data)
    elif isinstance(data, Mapping):
        typed = [{"@type": STRUCT_TYPE, "value": dict(data)}]
    else:
        typed = [{"@type": VALUE_TYPE, "value": data}]
    out: list[any_pb2.Any] = []
    for detail in typed:
        packed = any_pb2.Any()
        try:
            json_format.ParseDict(_info_strings(detail), packed)
        except (json_format.ParseError, TypeError, ValueError):
            continue
        out.append(packed)
    return out


def _info_strings(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    """An ErrorInfo's metadata values as strings (an agent may have sent other JSON)."""
    metadata = detail.get("metadata")
    if detail.get("@type") != ERROR_INFO_TYPE or not isinstance(metadata, Mapping):
        return detail
    strings = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()}
    return {**detail, "metadata": strings}


# --- the other way: an agent's gRPC answers as 1.0 JSON-RPC ---------------------------------


def request_message(rpc: Rpc, params: Mapping[str, Any]) -> Message:
    """1.0 JSON-RPC ``params`` as ``rpc``'s request message (proto3 JSON, unknown fields
    refused). :class:`google.protobuf.json_format.ParseError` when they do not fit."""
    return json_format.ParseDict(dict(params), rpc.request(), ignore_unknown_fields=False)


def result_json(message: Message) -> Any:
    """A response message (or one stream event) as the 1.0 JSON-RPC ``result``: its proto3
    JSON (lowerCamelCase names, enum names); ``google.protobuf.Empty`` as null."""
    if isinstance(message, empty_pb2.Empty):
        return None
    return json_format.MessageToDict(message)


_BY_REASON = {reason: code for code, reason in REASONS.items()}

# A status without an A2A ErrorInfo, read backwards through the table above (where it is
# ambiguous: the most general code of those that share the status).
_STATUS_CODES: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.NOT_FOUND: TASK_NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT: INVALID_PARAMS,
    grpc.StatusCode.UNIMPLEMENTED: METHOD_NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION: UNSUPPORTED,
    grpc.StatusCode.RESOURCE_EXHAUSTED: RATE_LIMITED,
}


def status_error(
    code: grpc.StatusCode, message: str, details_bin: bytes | None
) -> dict[str, Any] | None:
    """An agent's gRPC status (code, message, its ``grpc-status-details-bin`` trailer) as a 1.0
    JSON-RPC ``error`` object: the code from the ``ErrorInfo`` reason (domain
    ``a2a-protocol.org`` or ``switchboard.a2a``), else from the status (:data:`_STATUS_CODES`,
    else ``-32603``); the status details (typed detail objects) are its ``data``. None for a
    status that carries no A2A error and says the call did not get through (``UNAVAILABLE``,
    ``DEADLINE_EXCEEDED``, ``CANCELLED``, ``UNAUTHENTICATED``, ``PERMISSION_DENIED``): the
    caller's to judge."""
    status = status_pb2.Status()
    if details_bin:
        try:
            status.ParseFromString(details_bin)
        except ValueError:  # google.protobuf.message.DecodeError
            status = status_pb2.Status()
    data: list[dict[str, Any]] = []
    number: int | None = None
    for detail in status.details:
        try:
            data.append(json_format.MessageToDict(detail))
        except (TypeError, KeyError, json_format.Error):
            continue  # a detail of a type this process does not know
        if number is None and detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            if info.domain in (A2A_ERROR_DOMAIN, ERROR_DOMAIN):
                number = _BY_REASON.get(info.reason)
    if number is None:
        if code in _NOT_THROUGH:
            return None
        number = _STATUS_CODES.get(code, INTERNAL)
    error: dict[str, Any] = {"code": number, "message": status.message or message}
    if data:
        error["data"] = data
    return error


_NOT_THROUGH = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)
