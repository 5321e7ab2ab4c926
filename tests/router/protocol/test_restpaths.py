"""The HTTP+JSON paths as JSON-RPC calls (router.protocol.restpaths)."""

from __future__ import annotations

import pytest

from router.protocol.restpaths import ROUTES, RestRoute, http_status, rest_params


def route(verb: str, path: str) -> RestRoute:
    (found,) = [r for r in ROUTES if (r.verb, r.path) == (verb, path)]
    return found


def test_every_path_has_its_version_and_method() -> None:
    assert route("POST", "/message:send").method == "SendMessage"
    assert route("POST", "/v1/message:send").method == "message/send"
    assert {r.version for r in ROUTES if r.path.startswith("/v1/")} == {"0.3"}
    assert {r.version for r in ROUTES if not r.path.startswith("/v1/")} == {"1.0"}
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
