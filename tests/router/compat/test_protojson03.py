"""A2A 0.3's HTTP+JSON bodies (router.compat.protojson03)."""

from __future__ import annotations

from router.compat.protojson03 import request_in, result_out
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
