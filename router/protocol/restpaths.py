"""The HTTP+JSON (REST) binding's paths, as the JSON-RPC calls they stand for.

Each :class:`RestRoute` names an HTTP method and a path (aiohttp's ``{name}`` syntax), the A2A
version that path belongs to (1.0 paths at the root, 0.3 paths under ``/v1``, as the
specification and the official SDKs' REST servers spell them) and the JSON-RPC method it is
served as. :func:`rest_params` makes the JSON-RPC ``params`` of one request from its path
parameters, query and body, so that the JSON-RPC binding's checks
(:func:`router.protocol.envelope.parse_request`) judge it; :func:`http_status` maps an A2A
error code to the HTTP status and ``google.rpc`` status name of the HTTP+JSON binding
(A2A 1.0 section 5.4 and 11.6).

The other direction, for agents reached over HTTP+JSON: :func:`rest_call` makes the request
(verb, path, query, body) of one JSON-RPC call, :func:`rest_error` the JSON-RPC ``error``
object of an agent's HTTP error answer (the 1.0 ``google.rpc.Status`` body, or the 0.3 SDK's
``{"message"}`` with its HTTP status).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from router.protocol.errors import (
    A2A_ERROR_DOMAIN,
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    CONTENT_TYPE,
    ERROR_DOMAIN,
    ERROR_INFO_TYPE,
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL,
    INVALID_AGENT_RESPONSE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_MATCHING_AGENT,
    NOT_CANCELABLE,
    PARSE,
    PUSH_NOT_SUPPORTED,
    RATE_LIMITED,
    REASONS,
    STREAM_FAILED,
    TASK_NOT_FOUND,
    UNAUTHENTICATED,
    UNSUPPORTED,
)
from router.protocol.versions import PREFIX, VERSION_HEADER, Version

__all__ = [
    "RESERVED_SEGMENTS",
    "ROUTES",
    "TENANT",
    "TENANT_ROUTES",
    "RestCall",
    "RestRoute",
    "http_status",
    "is_draft",
    "rest_call",
    "rest_error",
    "rest_params",
    "rest_status_error",
]


@dataclass(frozen=True)
class RestRoute:
    """One path of the binding: ``verb`` ``path`` of A2A ``version``, served as ``method``
    (its params: ``body`` says whether the request body is the params object)."""

    verb: str
    path: str
    version: Version
    method: str
    body: bool = False
    stream: bool = False


# Order matters: the ``:verb`` paths before ``/tasks/{id}``, which would match them too.
_V1: tuple[RestRoute, ...] = (
    RestRoute("POST", "/message:send", "1.0", "SendMessage", body=True),
    RestRoute("POST", "/message:stream", "1.0", "SendStreamingMessage", body=True, stream=True),
    RestRoute("POST", "/tasks/{id}:cancel", "1.0", "CancelTask", body=True),
    RestRoute("POST", "/tasks/{id}:subscribe", "1.0", "SubscribeToTask", stream=True),
    RestRoute("GET", "/tasks/{id}:subscribe", "1.0", "SubscribeToTask", stream=True),
    RestRoute(
        "POST",
        "/tasks/{id}/pushNotificationConfigs",
        "1.0",
        "CreateTaskPushNotificationConfig",
        body=True,
    ),
    RestRoute(
        "GET",
        "/tasks/{id}/pushNotificationConfigs/{configId}",
        "1.0",
        "GetTaskPushNotificationConfig",
    ),
    RestRoute(
        "DELETE",
        "/tasks/{id}/pushNotificationConfigs/{configId}",
        "1.0",
        "DeleteTaskPushNotificationConfig",
    ),
    RestRoute(
        "GET", "/tasks/{id}/pushNotificationConfigs", "1.0", "ListTaskPushNotificationConfigs"
    ),
    RestRoute("GET", "/tasks/{id}", "1.0", "GetTask"),
    RestRoute("GET", "/tasks", "1.0", "ListTasks"),
    RestRoute("GET", "/extendedAgentCard", "1.0", "GetExtendedAgentCard"),
)
_V03: tuple[RestRoute, ...] = (
    RestRoute("POST", "/v1/message:send", "0.3", "message/send", body=True),
    RestRoute("POST", "/v1/message:stream", "0.3", "message/stream", body=True, stream=True),
    RestRoute("POST", "/v1/tasks/{id}:cancel", "0.3", "tasks/cancel", body=True),
    RestRoute("POST", "/v1/tasks/{id}:subscribe", "0.3", "tasks/resubscribe", stream=True),
    RestRoute("GET", "/v1/tasks/{id}:subscribe", "0.3", "tasks/resubscribe", stream=True),
    RestRoute(
        "POST",
        "/v1/tasks/{id}/pushNotificationConfigs",
        "0.3",
        "tasks/pushNotificationConfig/set",
        body=True,
    ),
    RestRoute(
        "GET",
        "/v1/tasks/{id}/pushNotificationConfigs/{configId}",
        "0.3",
        "tasks/pushNotificationConfig/get",
    ),
    RestRoute(
        "GET", "/v1/tasks/{id}/pushNotificationConfigs", "0.3", "tasks/pushNotificationConfig/list"
    ),
    RestRoute(  # in the 0.3 specification's table (section 7.8), not in a2a-sdk 0.3's REST app
        "DELETE",
        "/v1/tasks/{id}/pushNotificationConfigs/{configId}",
        "0.3",
        "tasks/pushNotificationConfig/delete",
    ),
    RestRoute("GET", "/v1/tasks/{id}", "0.3", "tasks/get"),
    RestRoute("GET", "/v1/card", "0.3", "agent/getAuthenticatedExtendedCard"),
)
# Seed 002's draft paths, served as its ``A2A.``-prefixed methods (router.compat.prefixed),
# where they do not collide with the 1.0 ones (its GET /tasks/{id} and GET /tasks are 1.0's).
_DRAFT: tuple[RestRoute, ...] = (
    RestRoute("POST", "/messages", "1.0", "A2A.SendMessage", body=True),
    RestRoute(
        "POST", "/messages/stream", "1.0", "A2A.SendStreamingMessage", body=True, stream=True
    ),
    RestRoute("DELETE", "/tasks/{id}", "1.0", "A2A.CancelTask"),
    RestRoute("GET", "/tasks/{id}/stream", "1.0", "A2A.SubscribeToTask", stream=True),
    RestRoute(
        "POST",
        "/tasks/{id}/notifications",
        "1.0",
        "A2A.CreateTaskPushNotificationConfig",
        body=True,
    ),
    RestRoute("GET", "/tasks/{id}/notifications", "1.0", "A2A.ListTaskPushNotificationConfig"),
    RestRoute(
        "GET", "/tasks/{id}/notifications/{configId}", "1.0", "A2A.GetTaskPushNotificationConfig"
    ),
    RestRoute(
        "DELETE",
        "/tasks/{id}/notifications/{configId}",
        "1.0",
        "A2A.DeleteTaskPushNotificationConfig",
    ),
    RestRoute("GET", "/agent-card", "1.0", "A2A.GetExtendedAgentCard"),
)
ROUTES: tuple[RestRoute, ...] = _V1 + _V03 + _DRAFT
"""Every path the router serves in the HTTP+JSON binding, in matching order."""

TENANT_ROUTES: tuple[RestRoute, ...] = _V1
"""The paths also served under a tenant's first segment (``/{tenant}/message:send``): the
1.0 ones, as A2A 1.0's ``additional_bindings`` spell them."""

RESERVED_SEGMENTS = frozenset(
    {
        ".well-known",
        "agent-card",
        "agents",
        "api",
        "extendedAgentCard",
        "healthz",
        "messages",
        "metrics",
        "push",
        "readyz",
        "tasks",
        "ui",
        "v1",
    }
)
"""First path segments that are the router's own (or a binding's) and never a tenant."""

TENANT = (
    "{tenant:(?!(?:" + "|".join(sorted(re.escape(s) for s in RESERVED_SEGMENTS)) + ")(?:/|$))[^/]+}"
)
"""The aiohttp path segment of a tenant: any one segment but the reserved ones (so
``/agents/{agent_id}/...`` and ``/v1/...`` never read as a tenant's)."""


def is_draft(route: RestRoute) -> bool:
    """Whether ``route`` is one of seed 002's draft paths (``A2A.``-prefixed, any version)."""
    return route.method.startswith(PREFIX)


_INTEGERS = frozenset({"historyLength", "pageSize"})
_BOOLEANS = frozenset({"includeArtifacts"})
# query parameters as proto field names (seed 002's draft; HTTP transcoding takes both)
_SNAKE = {
    "context_id": "contextId",
    "page_size": "pageSize",
    "page_token": "pageToken",
    "history_length": "historyLength",
    "include_artifacts": "includeArtifacts",
    "status_timestamp_after": "statusTimestampAfter",
}


def rest_params(
    route: RestRoute,
    match: Mapping[str, str],
    query: Mapping[str, str],
    body: dict[str, Any] | None,
) -> dict[str, Any]:
    """The JSON-RPC params of one request of ``route``: the body (for a route that has
    one), the query parameters (numbers and booleans as JSON values when they read as such;
    anything else is left a string for the params check to name), the task ``id`` of the
    path (and the config id of a push config path) over whatever the body says; a 1.0
    path's ``{tenant}`` segment as the ``tenant`` param. A 1.0 query's snake_case names
    (``page_size``) are read as the JSON names."""
    params: dict[str, Any] = dict(body) if route.body and body is not None else {}
    for key, value in query.items():
        if key != VERSION_HEADER:
            if route.version == "1.0" and key in _SNAKE and _SNAKE[key] not in query:
                key = _SNAKE[key]
            params[key] = _query_value(key, value)
    if "tenant" in match and route.version == "1.0":
        params["tenant"] = match["tenant"]
    if "id" in match:
        push = "PushNotificationConfig" in route.method or "pushNotificationConfig" in route.method
        params["taskId" if push else "id"] = match["id"]
    if "configId" in match:
        key = "pushNotificationConfigId" if route.version == "0.3" else "id"
        params[key] = match["configId"]
    return params


def _query_value(key: str, value: str) -> Any:
    if key in _INTEGERS and value.strip().lstrip("-").isdigit():
        return int(value)
    if key in _BOOLEANS and value in ("true", "false"):
        return value == "true"
    return value


# code -> (HTTP status, google.rpc status name)
_STATUS: dict[int, tuple[int, str]] = {
    PARSE: (400, "INVALID_ARGUMENT"),
    INVALID_REQUEST: (400, "INVALID_ARGUMENT"),
    INVALID_PARAMS: (400, "INVALID_ARGUMENT"),
    METHOD_NOT_FOUND: (404, "NOT_FOUND"),
    INTERNAL: (500, "INTERNAL"),
    TASK_NOT_FOUND: (404, "NOT_FOUND"),
    CONTENT_TYPE: (400, "INVALID_ARGUMENT"),
    INVALID_AGENT_RESPONSE: (500, "INTERNAL"),
    NO_MATCHING_AGENT: (404, "NOT_FOUND"),
    BAD_ROUTING_HINT: (400, "INVALID_ARGUMENT"),
    AGENT_UNAVAILABLE: (503, "UNAVAILABLE"),
    STREAM_FAILED: (502, "UNAVAILABLE"),
    UNAUTHENTICATED: (401, "UNAUTHENTICATED"),
    RATE_LIMITED: (429, "RESOURCE_EXHAUSTED"),
}


def http_status(code: int) -> tuple[int, str]:
    """The HTTP status and ``google.rpc`` status name of an A2A error code: the
    specification's table (-32001 404; -32002/3/4/7/8/9 400 ``FAILED_PRECONDITION``; -32005
    400; -32006 500), the JSON-RPC codes as the official SDK maps them, Switchboard's own
    (docs/routing.md); any other code (an agent's own) 500."""
    if code in _STATUS:
        return _STATUS[code]
    if -32009 <= code <= -32001:
        return 400, "FAILED_PRECONDITION"
    return 500, "INTERNAL"


# --- the client direction: calling an agent over HTTP+JSON -----------------------------------


@dataclass(frozen=True)
class RestCall:
    """One request to an agent's HTTP+JSON interface: ``verb`` ``path`` (percent-encoded,
    relative to the interface URL, with a 1.0 ``tenant`` as its first segment), ``query``
    pairs, the JSON ``body`` (None: no body), for the JSON-RPC ``method`` it stands for."""

    verb: str
    path: str
    query: tuple[tuple[str, str], ...]
    body: dict[str, Any] | None
    method: str
    version: Version
    stream: bool


def _outbound(route: RestRoute) -> bool:
    """The one route per method the router calls: 1.0 subscribes with POST (as the 1.x SDK
    client does), 0.3 with GET (the only verb the 0.3 SDK server has)."""
    if route.method == "SubscribeToTask":
        return route.verb == "POST"
    if route.method == "tasks/resubscribe":
        return route.verb == "GET"
    return True


_CALLS: dict[tuple[Version, str], RestRoute] = {
    (r.version, r.method): r for r in reversed(_V1 + _V03) if _outbound(r)
}


def rest_call(version: Version, method: str, params: Mapping[str, Any]) -> RestCall | None:
    """The HTTP+JSON request of JSON-RPC ``method`` with ``params`` (both of A2A
    ``version``), or None when the binding has no path for it. The task id (``id``, or
    ``taskId`` for a push config) and the config id fill the path; the rest is the body of a
    route that has one, else the query (numbers and booleans as JSON spells them, objects
    left out: a query cannot carry them). A 0.3 body is 0.3 JSON-RPC params here: the
    caller writes it as ProtoJSON."""
    route = _CALLS.get((version, method))
    if route is None:
        return None
    rest = dict(params)
    tenant = rest.pop("tenant", None) if version == "1.0" else None
    push = "ushNotificationConfig" in method
    path = route.path
    if "{configId}" in path:
        config_key = "pushNotificationConfigId" if version == "0.3" else "id"
        path = path.replace("{configId}", _segment(rest.pop(config_key, "")))
    if "{id}" in path:
        task_key = "taskId" if push and "taskId" in rest else "id"
        task_id = rest.pop(task_key, "") if not route.body else rest.get(task_key, "")
        path = path.replace("{id}", _segment(task_id))
    if isinstance(tenant, str) and tenant:
        path = f"/{_segment(tenant)}{path}"
    if route.body:
        return RestCall(route.verb, path, (), rest, method, version, route.stream)
    query = tuple((k, _query_text(v)) for k, v in rest.items() if _query_text(v) is not None)
    return RestCall(route.verb, path, query, None, method, version, route.stream)


def _segment(value: Any) -> str:
    return quote(str(value), safe="")


def _query_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


_BY_REASON = {reason: code for code, reason in REASONS.items()}
_BY_STATUS: dict[int, int] = {
    400: INVALID_REQUEST,
    404: METHOD_NOT_FOUND,
    405: METHOD_NOT_FOUND,
    409: NOT_CANCELABLE,
    415: CONTENT_TYPE,
    422: INVALID_PARAMS,
    501: UNSUPPORTED,
    502: INVALID_AGENT_RESPONSE,
}


def rest_error(call: RestCall, status: int, body: Any) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` object of an agent's HTTP error answer to ``call``, or None when
    ``body`` is neither shape. A 1.0 body's code comes from its ``ErrorInfo`` reason (else the
    HTTP status), its ``details`` become the 1.0 error ``data`` (for a 0.3 call: the
    ``ErrorInfo`` metadata); a 0.3 ``{"message"}`` body's code comes from the HTTP status as
    the 0.3 SDK maps it (404 on a task's path: task not found; 501 on a push path: push not
    supported)."""
    if not isinstance(body, dict):
        return rest_status_error(call, status)
    inner = body.get("error")
    if isinstance(inner, dict) and isinstance(inner.get("message", ""), str):
        details = inner.get("details")
        details = details if isinstance(details, list) else []
        info = next(
            (d for d in details if isinstance(d, dict) and d.get("@type") == ERROR_INFO_TYPE), {}
        )
        code = _status_code(call, status)
        if info.get("domain") in (A2A_ERROR_DOMAIN, ERROR_DOMAIN):
            code = _BY_REASON.get(info.get("reason"), code)
        error: dict[str, Any] = {"code": code, "message": inner.get("message", "")}
        if call.version == "1.0" and details:
            error["data"] = details
        elif isinstance(info.get("metadata"), dict) and info["metadata"]:
            error["data"] = _metadata_in(info["metadata"])
        return error
    if isinstance(body.get("message"), str) and set(body) <= {"message", "code", "data"}:
        return {"code": _status_code(call, status), "message": body["message"]}
    return rest_status_error(call, status)


def rest_status_error(call: RestCall, status: int) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` object of an HTTP error status whose body says nothing usable,
    when the status alone names an A2A error (404, 405, 409, 415, 422, 501; not 400, which
    any HTTP layer answers, nor a 502, which is a gateway's as often as the agent's)."""
    if status not in _BY_STATUS or status in (400, 502):
        return None
    return {"code": _status_code(call, status), "message": f"the agent answered HTTP {status}"}


def _status_code(call: RestCall, status: int) -> int:
    if status == 404 and call.method in (
        "GetExtendedAgentCard",
        "agent/getAuthenticatedExtendedCard",
    ):
        return EXTENDED_CARD_NOT_CONFIGURED
    if status == 404 and "{id}" in _CALLS[(call.version, call.method)].path:
        return TASK_NOT_FOUND
    if status == 501 and "ushNotificationConfig" in call.method:
        return PUSH_NOT_SUPPORTED
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return INVALID_REQUEST if 400 <= status < 500 else INTERNAL


def _metadata_in(metadata: dict[str, Any]) -> dict[str, Any]:
    """ErrorInfo metadata (strings; JSON values as compact JSON) as a plain object."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        try:
            out[key] = json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value
        except ValueError:
            out[key] = value
    return out
