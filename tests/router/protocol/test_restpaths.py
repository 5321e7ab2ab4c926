"""The HTTP+JSON paths as JSON-RPC calls (router.protocol.restpaths)."""

from __future__ import annotations

import re

import pytest

from router.protocol.restpaths import (
    RESERVED_SEGMENTS,
    ROUTES,
    TENANT,
    TENANT_ROUTES,
    RestCall,
    RestRoute,
    http_status,
    rest_call,
    rest_error,
    rest_params,
    rest_status_error,
)


def route(verb: str, path: str) -> RestRoute:
    (found,) = [r for r in ROUTES if (r.verb, r.path) == (verb, path)]
    return found


def test_every_path_has_its_version_and_method() -> None:
    assert route("POST", "/message:send").method == "SendMessage"
    assert route("POST", "/v1/message:send").method == "message/send"
    assert {r.version for r in ROUTES if r.path.startswith("/v1/")} == {"0.3"}
    assert {r.version for r in ROUTES if not r.path.startswith("/v1/")} == {"1.0"}
    draft = {(r.verb, r.path) for r in ROUTES if r.method.startswith("A2A.")}
    assert len(draft) == 9 and ("DELETE", "/tasks/{id}") in draft
    assert ("GET", "/tasks/{id}") not in draft  # the 1.0 path's
    paths = [r.path for r in ROUTES]  # the :verb paths are matched before /tasks/{id}
    assert paths.index("/tasks/{id}:cancel") < paths.index("/tasks/{id}")
    assert route("GET", "/tasks/{id}:subscribe").stream


def test_params_from_path_query_and_body() -> None:
    get = rest_params(route("GET", "/tasks/{id}"), {"id": "t1"}, {"historyLength": "3"}, None)
    assert get == {"id": "t1", "historyLength": 3}
    listed = rest_params(
        route("GET", "/tasks"),
        {},
        {"pageSize": "10", "includeArtifacts": "true", "status": "TASK_STATE_WORKING",
         "A2A-Version": "1.0"},
        None,
    )  # fmt: skip
    assert listed == {"pageSize": 10, "includeArtifacts": True, "status": "TASK_STATE_WORKING"}
    bad = rest_params(route("GET", "/tasks"), {}, {"pageSize": "ten"}, None)
    assert bad == {"pageSize": "ten"}  # left for the params check to name
    cancel = rest_params(route("POST", "/tasks/{id}:cancel"), {"id": "t1"}, {}, {"id": "x"})
    assert cancel == {"id": "t1"}  # the path wins
    push = route("GET", "/v1/tasks/{id}/pushNotificationConfigs/{configId}")
    assert rest_params(push, {"id": "t", "configId": "c"}, {}, None) == {
        "taskId": "t",
        "pushNotificationConfigId": "c",
    }


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (-32001, (404, "NOT_FOUND")),
        (-32002, (400, "FAILED_PRECONDITION")),
        (-32009, (400, "FAILED_PRECONDITION")),
        (-32005, (400, "INVALID_ARGUMENT")),
        (-32006, (500, "INTERNAL")),
        (-32602, (400, "INVALID_ARGUMENT")),
        (-32054, (401, "UNAUTHENTICATED")),
        (-32055, (429, "RESOURCE_EXHAUSTED")),
        (-32052, (503, "UNAVAILABLE")),
        (12345, (500, "INTERNAL")),
    ],
)
def test_http_status(code: int, status: tuple[int, str]) -> None:
    assert http_status(code) == status


# --- the client direction ----------------------------------------------------------------------


def test_calls_become_paths_query_and_body() -> None:
    send = rest_call("1.0", "SendMessage", {"message": {"messageId": "m"}, "tenant": "acme"})
    body = {"message": {"messageId": "m"}}
    assert send == RestCall("POST", "/acme/message:send", (), body, "SendMessage", "1.0", False)
    stream = rest_call("1.0", "SendStreamingMessage", {"message": {}})
    assert stream is not None and (stream.verb, stream.path, stream.stream) == (
        "POST",
        "/message:stream",
        True,
    )
    get = rest_call("1.0", "GetTask", {"id": "a/b c", "historyLength": 2, "metadata": {"x": 1}})
    assert get is not None and get.path == "/tasks/a%2Fb%20c" and get.body is None
    assert get.query == (("historyLength", "2"),)  # objects cannot go in a query
    listed = rest_call("1.0", "ListTasks", {"pageSize": 5, "includeArtifacts": False})
    assert listed is not None and listed.query == (("pageSize", "5"), ("includeArtifacts", "false"))
    cancel = rest_call("1.0", "CancelTask", {"id": "t1"})
    assert cancel is not None and (cancel.verb, cancel.path, cancel.body) == (
        "POST",
        "/tasks/t1:cancel",
        {"id": "t1"},
    )
    subscribe = rest_call("1.0", "SubscribeToTask", {"id": "t1"})
    assert subscribe is not None and (subscribe.verb, subscribe.stream) == ("POST", True)
    push = rest_call("1.0", "GetTaskPushNotificationConfig", {"taskId": "t1", "id": "c1"})
    assert push is not None and push.path == "/tasks/t1/pushNotificationConfigs/c1"
    assert push.query == ()
    # 0.3: the /v1 paths; subscribe with GET (the 0.3 SDK server's only verb); no tenant
    old = rest_call("0.3", "tasks/resubscribe", {"id": "t1", "tenant": "x"})
    assert old is not None and (old.verb, old.path) == ("GET", "/v1/tasks/t1:subscribe")
    assert old.query == (("tenant", "x"),)
    old_push = rest_call(
        "0.3", "tasks/pushNotificationConfig/get", {"id": "t1", "pushNotificationConfigId": "c"}
    )
    assert old_push is not None and old_push.path == "/v1/tasks/t1/pushNotificationConfigs/c"
    card = rest_call("0.3", "agent/getAuthenticatedExtendedCard", {})
    assert card is not None and (card.verb, card.path) == ("GET", "/v1/card")
    assert rest_call("0.3", "tasks/list", {}) is None
    assert rest_call("1.0", "message/send", {}) is None  # a 0.3 method is no 1.0 path


def test_agent_errors_become_json_rpc_errors() -> None:
    get = rest_call("1.0", "GetTask", {"id": "t"})
    assert get is not None
    body = {
        "error": {
            "code": 404,
            "status": "NOT_FOUND",
            "message": "Task not found",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "t"},
                }
            ],
        }
    }
    error = rest_error(get, 404, body)
    assert error == {"code": -32001, "message": "Task not found", "data": body["error"]["details"]}
    # the reason decides over the status; an unknown reason leaves the status's code
    body["error"]["details"][0]["reason"] = "TASK_NOT_CANCELABLE"
    assert rest_error(get, 400, body)["code"] == -32002  # type: ignore[index]
    body["error"]["details"][0]["reason"] = "SOMETHING_ELSE"
    assert rest_error(get, 404, body)["code"] == -32001  # type: ignore[index]
    # the 0.3 SDK's {"message"} body: the code from the status, as that SDK maps it
    old_get = rest_call("0.3", "tasks/get", {"id": "t"})
    old_cancel = rest_call("0.3", "tasks/cancel", {"id": "t"})
    old_card = rest_call("0.3", "agent/getAuthenticatedExtendedCard", {})
    old_push = rest_call("0.3", "tasks/pushNotificationConfig/list", {"id": "t"})
    assert old_get and old_cancel and old_card and old_push
    assert rest_error(old_get, 404, {"message": "Task not found"}) == {
        "code": -32001,
        "message": "Task not found",
    }
    assert rest_error(old_cancel, 409, {"message": "no"})["code"] == -32002  # type: ignore[index]
    assert rest_error(old_card, 404, {"message": "no"})["code"] == -32007  # type: ignore[index]
    assert rest_error(old_push, 501, {"message": "no"})["code"] == -32003  # type: ignore[index]
    assert rest_error(old_get, 422, {"message": "bad"})["code"] == -32602  # type: ignore[index]
    # a 1.0 body for a 0.3 call: the ErrorInfo metadata as the plain 0.3 data
    body["error"]["details"][0]["metadata"] = {"taskId": "t", "n": "[1]"}
    assert rest_error(old_get, 404, body)["data"] == {"taskId": "t", "n": [1]}  # type: ignore[index]
    # no usable body: the status alone where it names an error, else nothing
    assert rest_error(get, 404, "<html>")["code"] == -32001  # type: ignore[index]
    assert rest_status_error(get, 418) is None
    assert rest_error(get, 500, {"unrelated": True}) is None


def test_tenant_routes_and_params() -> None:
    assert {r.version for r in TENANT_ROUTES} == {"1.0"} and not any(
        r.method.startswith("A2A.") for r in TENANT_ROUTES
    )
    sent = rest_params(route("POST", "/message:send"), {"tenant": "acme"}, {}, {"message": {}})
    assert sent == {"message": {}, "tenant": "acme"}
    # the aiohttp segment pattern: any segment but the router's own first segments
    pattern = re.compile(TENANT.removeprefix("{tenant:").removesuffix("}") + "/")
    assert pattern.match("acme/") and pattern.match("agents-of-acme/")
    for reserved in ("agents", "api", "v1", "push", ".well-known", "ui", "metrics", "tasks"):
        assert reserved in RESERVED_SEGMENTS and not pattern.match(reserved + "/"), reserved


def test_draft_paths_and_snake_case_queries() -> None:
    cancel = route("DELETE", "/tasks/{id}")
    assert cancel.method == "A2A.CancelTask" and cancel.version == "1.0"
    assert rest_params(cancel, {"id": "t1"}, {}, None) == {"id": "t1"}
    config = route("GET", "/tasks/{id}/notifications/{configId}")
    assert rest_params(config, {"id": "t1", "configId": "c"}, {}, None) == {
        "taskId": "t1",
        "id": "c",
    }
    assert route("GET", "/agent-card").method == "A2A.GetExtendedAgentCard"
    listed = rest_params(route("GET", "/tasks"), {}, {"page_size": "5", "context_id": "c"}, None)
    assert listed == {"pageSize": 5, "contextId": "c"}
    # not the 0.3 paths' query, and a camelCase name given too wins
    assert rest_params(route("GET", "/v1/tasks/{id}"), {"id": "t"}, {"page_size": "5"}, None) == {
        "id": "t",
        "page_size": "5",
    }
    both = rest_params(route("GET", "/tasks"), {}, {"page_size": "5", "pageSize": "6"}, None)
    assert both == {"page_size": "5", "pageSize": 6}
