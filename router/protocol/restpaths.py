"""The HTTP+JSON (REST) binding's paths, as the JSON-RPC calls they stand for.

Each :class:`RestRoute` names an HTTP method and a path (aiohttp's ``{name}`` syntax), the A2A
version that path belongs to (1.0 paths at the root, 0.3 paths under ``/v1``, as the
specification and the official SDKs' REST servers spell them) and the JSON-RPC method it is
served as. :func:`rest_params` makes the JSON-RPC ``params`` of one request from its path
parameters, query and body, so that the JSON-RPC binding's checks
(:func:`router.protocol.envelope.parse_request`) judge it; :func:`http_status` maps an A2A
error code to the HTTP status and ``google.rpc`` status name of the HTTP+JSON binding
(A2A 1.0 section 5.4 and 11.6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    CONTENT_TYPE,
    INTERNAL,
    INVALID_AGENT_RESPONSE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NO_MATCHING_AGENT,
    PARSE,
    RATE_LIMITED,
    STREAM_FAILED,
    TASK_NOT_FOUND,
    UNAUTHENTICATED,
)
from router.protocol.versions import VERSION_HEADER, Version

__all__ = ["ROUTES", "RestRoute", "http_status", "rest_params"]


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
    RestRoute("GET", "/v1/tasks/{id}", "0.3", "tasks/get"),
    RestRoute("GET", "/v1/card", "0.3", "agent/getAuthenticatedExtendedCard"),
)
ROUTES: tuple[RestRoute, ...] = _V1 + _V03
"""Every path the router serves in the HTTP+JSON binding, in matching order."""

_INTEGERS = frozenset({"historyLength", "pageSize"})
_BOOLEANS = frozenset({"includeArtifacts"})


def rest_params(
    route: RestRoute,
    match: Mapping[str, str],
    query: Mapping[str, str],
    body: dict[str, Any] | None,
) -> dict[str, Any]:
    """The JSON-RPC params of one request of ``route``: the body (for a route that has
    one), the query parameters (numbers and booleans as JSON values when they read as such;
    anything else is left a string for the params check to name), the task ``id`` of the
    path (and the config id of a push config path) over whatever the body says."""
    params: dict[str, Any] = dict(body) if route.body and body is not None else {}
    for key, value in query.items():
        if key != VERSION_HEADER:
            params[key] = _query_value(key, value)
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
