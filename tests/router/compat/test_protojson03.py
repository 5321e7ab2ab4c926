"""A2A 0.3's HTTP+JSON bodies (router.compat.protojson03)."""

from __future__ import annotations

from router.compat.protojson03 import request_in, request_out, result_in, result_out
from router.protocol.versions import Op


def test_a_send_request_in_the_03_proto_json_is_read_as_the_json_rpc_params() -> None:
    body = {
        "message": {
            "messageId": "m1",
            "role": "ROLE_USER",
            "content": [
                {"text": "hi"},
                {"file": {"fileWithUri": "https://x/p.png", "mimeType": "image/png"}},
                {"file": {"fileWithBytes": "AAAA", "name": "a.bin"}},
                {"data": {"data": {"k": 1}}},
            ],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": True},
        "metadata": {"a": 1},
    }
    params = request_in("message/send", body)
    assert params["message"] == {
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "parts": [
            {"kind": "text", "text": "hi"},
            {"kind": "file", "file": {"uri": "https://x/p.png", "mimeType": "image/png"}},
            {"kind": "file", "file": {"bytes": "AAAA", "name": "a.bin"}},
            {"kind": "data", "data": {"k": 1}},
        ],
    }
    assert params["configuration"] == {"acceptedOutputModes": ["text/plain"], "blocking": True}
    assert params["metadata"] == {"a": 1}
    assert request_in("tasks/cancel", {"name": "tasks/t1"}) == {}


def test_answers_are_written_in_the_03_proto_json() -> None:
    task = {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "canceled", "timestamp": "2026-01-01T00:00:00Z"},
        "artifacts": [{"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}],
        "history": [{"kind": "message", "messageId": "m", "role": "agent", "parts": []}],
    }
    expected = {
        "id": "t1",
        "contextId": "c1",
        "status": {"state": "TASK_STATE_CANCELLED", "timestamp": "2026-01-01T00:00:00Z"},
        "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}]}],
        "history": [{"messageId": "m", "role": "ROLE_AGENT", "content": []}],
    }
    assert result_out(Op.GET, task) == expected
    assert result_out(Op.SEND, task) == {"task": expected}
    update = {"kind": "status-update", "taskId": "t1", "contextId": "c1", "final": True,
              "status": {"state": "completed"}}  # fmt: skip
    assert result_out(Op.STREAM, update, stream=True) == {
        "statusUpdate": {
            "taskId": "t1",
            "contextId": "c1",
            "final": True,
            "status": {"state": "TASK_STATE_COMPLETED"},
        }
    }
    card = {"name": "x", "url": "http://r/"}
    assert result_out(Op.EXTENDED_CARD, card) is card


def test_proto_field_names_are_read_as_json_names_but_never_inside_structs() -> None:
    body = {
        "message": {
            "message_id": "m1",
            "context_id": "c1",
            "role": "ROLE_USER",
            "content": [
                {"file": {"file_with_uri": "https://x/p.png", "mime_type": "image/png"}},
                {"data": {"data": {"snake_key": 1}}, "metadata": {"my_key": 2}},
            ],
            "metadata": {"trace_id": "t"},
        },
        "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 2},
    }
    params = request_in("message/send", body)
    message = params["message"]
    assert (message["messageId"], message["contextId"]) == ("m1", "c1")
    assert message["metadata"] == {"trace_id": "t"}  # the client's own keys
    assert message["parts"] == [
        {"kind": "file", "file": {"uri": "https://x/p.png", "mimeType": "image/png"}},
        {"kind": "data", "data": {"snake_key": 1}, "metadata": {"my_key": 2}},
    ]
    assert params["configuration"] == {"acceptedOutputModes": ["text/plain"], "historyLength": 2}


# --- the client direction ----------------------------------------------------------------------


def test_a_send_is_written_as_03_proto_json_and_read_back() -> None:
    params = {
        "message": {
            "kind": "message",
            "messageId": "m1",
            "role": "user",
            "contextId": "c1",
            "parts": [
                {"kind": "text", "text": "hi"},
                {"kind": "file", "file": {"uri": "https://x/p.png", "mimeType": "image/png"}},
                {"kind": "data", "data": {"k": 1}},
            ],
        },
        "configuration": {"blocking": True, "pushNotificationConfig": {"url": "https://h/"}},
        "metadata": {"a": 1},
    }
    body = request_out("message/send", params)
    assert body["message"]["role"] == "ROLE_USER"
    assert body["message"]["content"][1] == {
        "file": {"fileWithUri": "https://x/p.png", "mimeType": "image/png"}
    }
    assert body["configuration"] == {"blocking": True, "pushNotification": {"url": "https://h/"}}
    assert request_in("message/send", body) == params  # the server direction reads it back
    assert request_out("tasks/cancel", {"id": "t1"}) == {"name": "tasks/t1"}
    assert request_out("tasks/get", {"id": "t1"}) == {"id": "t1"}


def test_proto_json_answers_are_read_as_03_results() -> None:
    task = {
        "kind": "task",
        "id": "t1",
        "contextId": "c1",
        "status": {
            "state": "canceled",
            "message": {
                "kind": "message",
                "messageId": "m2",
                "role": "agent",
                "parts": [{"kind": "text", "text": "bye"}],
            },
            "timestamp": "2026-01-01T00:00:00Z",
        },
        "artifacts": [
            {"artifactId": "a1", "name": "echo", "parts": [{"kind": "text", "text": "x"}]}
        ],
        "history": [
            {"kind": "message", "messageId": "m1", "role": "user", "parts": []},
        ],
    }
    for op in (Op.SEND, Op.GET):  # wrapped ({"task"}) and bare
        assert result_in(result_out(op, task)) == task
    assert result_in({"msg": {"messageId": "m", "role": "ROLE_AGENT", "content": []}}) == {
        "kind": "message",
        "messageId": "m",
        "role": "agent",
        "parts": [],
    }
    status = {
        "kind": "status-update",
        "taskId": "t1",
        "contextId": "c1",
        "status": {"state": "working"},
        "final": False,
    }
    assert result_in(result_out(Op.STREAM, status)) == status
    artifact = {
        "kind": "artifact-update",
        "taskId": "t1",
        "contextId": "c1",
        "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": " more"}]},
        "append": True,
        "lastChunk": False,
    }
    assert result_in(result_out(Op.STREAM, artifact)) == artifact
    card = {"name": "x", "url": "http://a/"}
    assert result_in(card) == card  # anything else as it is


def test_push_configs_in_the_03_proto_json() -> None:
    config = {
        "url": "https://hook.example/a2a",
        "token": "t",
        "authentication": {"schemes": ["Bearer"]},
    }
    created = {
        "parent": "tasks/t1",
        "config_id": "c1",
        "config": {"push_notification_config": config},
    }
    assert request_in("tasks/pushNotificationConfig/set", created) == {
        "pushNotificationConfig": {**config, "id": "c1"}
    }
    bare = {"pushNotificationConfig": {**config, "id": "c2"}}
    assert request_in("tasks/pushNotificationConfig/set", bare) == bare
    one = {"taskId": "t1", "pushNotificationConfig": {**config, "id": "c1"}}
    assert result_out(Op.PUSH_CONFIG, one) == {
        "name": "tasks/t1/pushNotificationConfigs/c1",
        "pushNotificationConfig": {**config, "id": "c1"},
    }
    assert result_out(Op.PUSH_CONFIG, [one]) == {"configs": [result_out(Op.PUSH_CONFIG, one)]}
    unset = {"config": {"pushNotificationConfig": {"url": "https://h/", "authentication": {}}}}
    assert request_in("tasks/pushNotificationConfig/set", unset) == {
        "pushNotificationConfig": {"url": "https://h/"}
    }
