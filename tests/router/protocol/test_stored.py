"""router.protocol.stored: NUL in the values the router stores is -32602 naming each field;
NUL anywhere else passes (read through ``parse_request``, as every binding reads a call)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from router.compat.dialects import served_call
from router.protocol.envelope import Request, parse_request
from router.protocol.errors import RpcError
from router.protocol.stored import NUL_RULE, check_stored, nul_fields
from router.protocol.versions import Op

NUL = "\x00"


def parse(method: str, params: dict[str, Any], version: str = "1.0") -> Request:
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})
    return parse_request(body.encode(), version, version, max_depth=32, dialects=served_call)  # type: ignore[arg-type]


def refused(method: str, params: dict[str, Any], version: str = "1.0") -> list[str]:
    with pytest.raises(RpcError) as info:
        parse(method, params, version)
    assert (info.value.code, info.value.id) == (-32602, 9)
    assert all(text == NUL_RULE for _, text in info.value.violations)
    return [field for field, _ in info.value.violations]


def message(version: str = "1.0", **fields: Any) -> dict[str, Any]:
    if version == "0.3":
        parts: list[Any] = [
            {"kind": "text", "text": f"a{NUL}"},
            {"kind": "data", "data": {NUL: NUL}},
        ]
        return {"kind": "message", "role": "user", "messageId": "m", "parts": parts, **fields}
    parts = [{"text": f"a{NUL}"}, {"data": {f"k{NUL}": [f"v{NUL}"]}}]
    return {"role": "ROLE_USER", "messageId": "m", "parts": parts, **fields}


@pytest.mark.parametrize("version", ["0.3", "1.0"])
def test_nul_in_content_and_metadata_passes(version: str) -> None:
    method = "SendMessage" if version == "1.0" else "message/send"
    params = {"message": message(version, metadata={"m": NUL}), "metadata": {NUL: f"x{NUL}"}}
    assert parse(method, params, version).params == params


def test_each_stored_value_of_a_send_is_named() -> None:
    params = {
        "message": message(
            contextId=f"c{NUL}", taskId=f"t{NUL}", referenceTaskIds=["ok", f"r{NUL}"]
        ),
        "configuration": {
            "taskPushNotificationConfig": {
                "url": f"https://h/{NUL}",
                "token": NUL,
                "authentication": {"scheme": "Bearer", "credentials": f"c{NUL}"},
            }
        },
    }
    assert refused("SendMessage", params) == [
        "message.taskId",
        "message.contextId",
        "message.referenceTaskIds[1]",
        "configuration.taskPushNotificationConfig.url",
        "configuration.taskPushNotificationConfig.token",
        "configuration.taskPushNotificationConfig.authentication.credentials",
    ]
    streamed = {"message": message("0.3", contextId=f"c{NUL}")}
    assert refused("message/stream", streamed, "0.3") == ["message.contextId"]


@pytest.mark.parametrize(
    ("method", "params", "fields"),
    [
        ("GetTask", {"id": f"t{NUL}"}, ["id"]),
        ("CancelTask", {"id": f"t{NUL}"}, ["id"]),
        ("SubscribeToTask", {"id": f"t{NUL}"}, ["id"]),
        ("ListTasks", {"contextId": NUL, "pageToken": NUL}, ["contextId", "pageToken"]),
        ("GetTaskPushNotificationConfig", {"taskId": "t", "id": f"c{NUL}"}, ["id"]),
        (
            "CreateTaskPushNotificationConfig",
            {"taskId": f"t{NUL}", "url": "https://h/", "token": f"x{NUL}"},
            ["taskId", "token"],
        ),
    ],
)
def test_task_list_and_push_config_calls(
    method: str, params: dict[str, Any], fields: list[str]
) -> None:
    assert refused(method, params) == fields


def test_the_0_3_push_config_and_the_v01_dialect() -> None:
    config = {"taskId": "t", "pushNotificationConfig": {"url": f"https://h/{NUL}"}}
    assert refused("tasks/pushNotificationConfig/set", config, "0.3") == [
        "pushNotificationConfig.url"
    ]
    v01 = {"role": "user", "parts": [{"type": "text", "text": f"x{NUL}"}]}
    assert parse("tasks/send", {"id": "v01", "message": v01}, "0.3").client_task_id == "v01"
    bad = {"id": f"v{NUL}", "sessionId": NUL, "message": v01, "pushNotification": {"url": NUL}}
    assert refused("tasks/send", bad, "0.3") == ["id", "sessionId", "pushNotification.url"]


def test_nul_fields_walks_keys_lists_and_objects() -> None:
    value = {"a": [1, "x", f"y{NUL}"], f"b{NUL}": "z", "c": {"d": NUL}}
    assert list(nul_fields(value, "p")) == ["p.a[2]", "p.b\\u0000", "p.c.d"]
    assert list(nul_fields(f"{NUL}", "")) == [""]
    check_stored(Op.SEND, {"message": {"parts": [{"text": NUL}]}, "metadata": {"k": NUL}})
