"""Per-version wire knowledge, checked against the bytes the official SDK servers sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from router.protocol import payloads as wire
from router.protocol import versions
from router.protocol.errors import INVALID_PARAMS, RpcError
from router.protocol.events import (
    ends_stream,
    event_payload,
    event_task_state,
    result_task_states,
    stream_event_kind,
    stream_result,
)
from router.protocol.listing import ListQuery, list_tasks_query, status_at_or_after
from router.protocol.timestamps import parse_timestamp, status_timestamp
from router.protocol.versions import Op, Version

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"


# --- captured streams ----------------------------------------------------------------------


def complete_prefix(text: str) -> Any:
    """Parse JSON that may be cut short: keep the members captured whole, close the rest.

    ``v03_resubscribe.out`` and ``v1_subscribe.out`` hold each ``data:`` line cut at 220
    characters; the members before the cut are real bytes from the SDK.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    cuts: list[tuple[int, str]] = []
    stack: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            stack.pop()
        elif char == ",":
            cuts.append((index, "".join(reversed(stack))))
    for position, closers in reversed(cuts):
        try:
            return json.loads(text[:position] + closers)
        except json.JSONDecodeError:
            continue
    raise ValueError(f"no complete member in {text[:60]!r}")


def captured_events(name: str) -> list[dict[str, Any]]:
    """The JSON-RPC objects of the ``data:`` lines of a captured SSE response."""
    lines = (WIRE / name).read_bytes().decode().split("\n")
    data = [line.rstrip("\r")[5:].strip() for line in lines if line.startswith("data:")]
    return [complete_prefix(item) for item in data]


def test_complete_prefix_keeps_whole_members_only() -> None:
    cut = '{"result": {"task": {"id": "t", "status": {"state": "W", "message": {"messageId": "m'
    assert complete_prefix(cut) == {"result": {"task": {"id": "t", "status": {"state": "W"}}}}
    assert complete_prefix('{"a": "x,y", "b": [1, 2') == {"a": "x,y", "b": [1]}


V03_STREAMS = ["v03_stream.out", "v1compat_v03_stream.out"]


@pytest.mark.parametrize("name", V03_STREAMS)
def test_v03_send_stream(name: str) -> None:
    events = captured_events(name)
    kinds = [stream_event_kind("0.3", event) for event in events]
    assert kinds == ["task", "status-update"] + ["artifact-update"] * 3 + ["status-update"]
    assert [ends_stream("0.3", event) for event in events] == [False] * 5 + [True]
    states = [event_task_state("0.3", event) for event in events]
    task_id = events[0]["result"]["id"]
    assert states == [
        (task_id, "submitted"),
        (task_id, "working"),
        (task_id, None),
        (task_id, None),
        (task_id, None),
        (task_id, "completed"),
    ]


def test_v1_send_stream() -> None:
    events = captured_events("v1_stream.out")
    kinds = [stream_event_kind("1.0", event) for event in events]
    assert kinds == ["task", "status-update"] + ["artifact-update"] * 3 + ["status-update"]
    assert [ends_stream("1.0", event) for event in events] == [False] * 5 + [True]
    task_id = events[0]["result"]["task"]["id"]
    assert [event_task_state("1.0", event) for event in events] == [
        (task_id, "TASK_STATE_SUBMITTED"),
        (task_id, "TASK_STATE_WORKING"),
        (task_id, None),
        (task_id, None),
        (task_id, None),
        (task_id, "TASK_STATE_COMPLETED"),
    ]


def test_v03_resubscribe_has_no_task_snapshot() -> None:
    events = captured_events("v03_resubscribe.out")
    kinds = [stream_event_kind("0.3", event) for event in events]
    assert kinds == ["artifact-update", "artifact-update", "status-update"]
    assert [ends_stream("0.3", event) for event in events] == [False, False, True]
    assert event_task_state("0.3", events[-1])[1] == "completed"


def test_v1_subscribe_starts_with_a_task_snapshot() -> None:
    events = captured_events("v1_subscribe.out")
    kinds = [stream_event_kind("1.0", event) for event in events]
    assert kinds == ["task", "artifact-update", "artifact-update", "status-update"]
    assert [ends_stream("1.0", event) for event in events] == [False, False, False, True]
    task_id, state = event_task_state("1.0", events[0])
    assert state == "TASK_STATE_WORKING"
    assert event_task_state("1.0", events[-1]) == (task_id, "TASK_STATE_COMPLETED")


def test_v1_push_bodies_are_stream_responses() -> None:
    lines = (WIRE / "push_notifications.jsonl").read_text().splitlines()
    bodies = [json.loads(line)["body"] for line in lines if json.loads(line)["path"] == "/v1"]
    kinds = [stream_event_kind("1.0", body) for body in bodies]
    assert kinds[0] == "task"
    assert kinds[-1] == "status-update"
    assert ends_stream("1.0", bodies[-1])


@pytest.mark.parametrize(("name", "version"), [("v03_stream.out", "1.0"), ("v1_stream.out", "0.3")])
def test_events_of_the_other_version_are_not_recognised(name: str, version: Version) -> None:
    for event in captured_events(name)[1:]:
        assert stream_event_kind(version, event) is None
        assert event_task_state(version, event) == (None, None)
        assert not ends_stream(version, event)


def test_results_and_envelopes_classify_alike() -> None:
    for event in captured_events("v1_stream.out"):
        assert stream_event_kind("1.0", event) == stream_event_kind("1.0", event["result"])
        assert stream_result(event) is event["result"]
    result = captured_events("v03_stream.out")[0]["result"]
    assert stream_result(result) is result
    assert event_payload("0.3", result) is result


def test_event_payload_unwraps_v1_members() -> None:
    event = captured_events("v1_stream.out")[1]
    assert event_payload("1.0", event) is event["result"]["statusUpdate"]
    assert event_payload("1.0", {"bogus": {}}) is None
    assert event_payload("1.0", {"task": "not an object"}) is None


MESSAGE_V03 = {"kind": "message", "role": "agent", "messageId": "m", "parts": []}
MESSAGE_V1 = {"message": {"role": "ROLE_AGENT", "messageId": "m", "taskId": "t", "parts": []}}


def _task(version: Version, state: str) -> dict[str, Any]:
    task = {"id": "t", "status": {"state": state}}
    return {"kind": "task", **task} if version == "0.3" else {"task": task}


def _status(version: Version, state: str, final: bool | None = None) -> dict[str, Any]:
    update = {"taskId": "t", "status": {"state": state}}
    if version == "1.0":
        return {"statusUpdate": update}
    return {"kind": "status-update", "final": final, **update}


TASK, STATUS = "task", "status-update"


@pytest.mark.parametrize(
    ("version", "event", "kind", "ends", "state"),
    [
        ("0.3", MESSAGE_V03, "message", True, (None, None)),
        ("1.0", MESSAGE_V1, "message", True, ("t", None)),
        ("0.3", _task("0.3", "failed"), TASK, True, ("t", "failed")),
        ("1.0", _task("1.0", "TASK_STATE_REJECTED"), TASK, True, ("t", "TASK_STATE_REJECTED")),
        (
            "1.0",
            _task("1.0", "TASK_STATE_INPUT_REQUIRED"),
            TASK,
            False,
            ("t", "TASK_STATE_INPUT_REQUIRED"),
        ),
        ("0.3", _status("0.3", "input-required", True), STATUS, True, ("t", "input-required")),
        ("0.3", _status("0.3", "completed", False), STATUS, False, ("t", "completed")),
        (
            "1.0",
            _status("1.0", "TASK_STATE_INPUT_REQUIRED"),
            STATUS,
            False,
            ("t", "TASK_STATE_INPUT_REQUIRED"),
        ),
        ("1.0", _status("1.0", "TASK_STATE_CANCELED"), STATUS, True, ("t", "TASK_STATE_CANCELED")),
        ("0.3", {"kind": "surprise"}, None, False, (None, None)),
        ("1.0", {"task": {}, "message": {}}, None, False, (None, None)),
        ("0.3", {"messageId": "m", "parts": []}, "message", True, (None, None)),
        ("0.3", {"id": "t", "status": {"state": "working"}}, TASK, False, ("t", "working")),
        ("0.3", {}, None, False, (None, None)),
    ],
)
def test_event_cases(
    version: Version, event: dict[str, Any], kind: str | None, ends: bool, state: tuple[Any, Any]
) -> None:
    assert stream_event_kind(version, event) == kind
    assert ends_stream(version, event) is ends
    assert event_task_state(version, event) == state
    envelope = {"jsonrpc": "2.0", "id": 1, "result": event}
    assert stream_event_kind(version, envelope) == kind


@pytest.mark.parametrize("version", ["0.3", "1.0"])
def test_error_events_end_the_stream(version: Version) -> None:
    error = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom"}}
    assert stream_event_kind(version, error) is None
    assert ends_stream(version, error)
    assert event_task_state(version, error) == (None, None)


# --- states --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.3", "1.0"])
def test_terminal_and_interrupted_states(version: Version) -> None:
    terminal = {"completed", "canceled", "failed", "rejected"}
    interrupted = {"input-required", "auth-required"}
    for old, new in zip(versions.STATES["0.3"], versions.STATES["1.0"], strict=True):
        for name in (old, new):
            assert versions.is_terminal_state(version, name) is (old in terminal)
            assert versions.is_interrupted_state(version, name) is (old in interrupted)
    assert not versions.is_terminal_state(version, None)
    assert not versions.is_terminal_state(version, "done")


def test_state_name_converts_spellings() -> None:
    assert versions.state_name("1.0", "input-required") == "TASK_STATE_INPUT_REQUIRED"
    assert versions.state_name("1.0", "TASK_STATE_WORKING") == "TASK_STATE_WORKING"
    assert versions.state_name("0.3", "TASK_STATE_CANCELED") == "canceled"
    assert versions.state_name("0.3", "TASK_STATE_UNSPECIFIED") == "unknown"
    assert versions.state_name("0.3", "weird") == "weird"


def test_states_match_the_sdk_enum() -> None:
    from a2a.types import a2a_pb2

    assert set(versions.STATES["1.0"]) == set(a2a_pb2.TaskState.keys())


# --- messages ------------------------------------------------------------------------------


def _params(name: str) -> dict[str, Any]:
    return json.loads((WIRE / name).read_text())["params"]


def test_message_of_the_captured_requests() -> None:
    params = _params("v03_send.json")
    assert wire.message_of("0.3", params) is params["message"]
    params = _params("v1_send.json")
    assert wire.message_of("1.0", params) is params["message"]


def _v03(*parts: Any, **fields: Any) -> dict[str, Any]:
    return {"message": {"role": "user", "messageId": "m-1", "parts": list(parts), **fields}}


def _v1(*parts: Any, **fields: Any) -> dict[str, Any]:
    return {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": list(parts), **fields}}


def _violations(version: Version, params: Any) -> list[tuple[str, str]]:
    with pytest.raises(RpcError) as info:
        wire.message_of(version, params)
    assert info.value.code == -32602
    return list(info.value.violations)


def test_message_must_be_an_object() -> None:
    assert _violations("0.3", {}) == [("message", "is required")]
    assert _violations("1.0", {"message": [1]}) == [("message", "must be an object, not an array")]


def test_message_fields_are_checked() -> None:
    params = {"message": {"parts": "x", "taskId": 5, "referenceTaskIds": ["a", 1]}}
    assert _violations("0.3", params) == [
        ("message.messageId", "is required"),
        ("message.role", "is required"),
        ("message.taskId", "must be a string, not a number"),
        ("message.referenceTaskIds", "must be an array of task id strings"),
        ("message.parts", "must be an array, not a string"),
    ]
    assert _violations("1.0", _v1(contextId="")) == [
        ("message.contextId", "must not be empty"),
        ("message.parts", "must hold at least one part"),
    ]


def test_message_error_lists_the_first_three_problems() -> None:
    with pytest.raises(RpcError) as info:
        wire.message_of("0.3", {"message": {"parts": None, "taskId": 1, "contextId": 2}})
    assert info.value.message == (
        "Invalid params: message.messageId: is required; message.role: is required; "
        "message.taskId: must be a string, not a number (and 2 more)"
    )
    assert info.value.data == {
        "fields": [
            "message.messageId",
            "message.role",
            "message.taskId",
            "message.contextId",
            "message.parts",
        ]
    }


def test_roles_name_the_other_versions_spelling() -> None:
    text = {"text": "hi"}
    assert _violations("1.0", {"message": {**_v1(text)["message"], "role": "user"}}) == [
        (
            "message.role",
            "must be 'ROLE_USER' or 'ROLE_AGENT' in A2A 1.0 ('user' is the A2A 0.3 spelling)",
        )
    ]
    assert _violations("0.3", {"message": {**_v03(text)["message"], "role": "boss"}}) == [
        ("message.role", "must be 'user' or 'agent' in A2A 0.3")
    ]
    assert wire.message_of("1.0", {"message": {**_v1(text)["message"], "role": 1}})


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        ("x", "must be an object, not a string"),
        ({}, 'has no "kind" (text, file or data)'),
        (
            {"raw": "AA==", "mediaType": "image/png"},
            'has no "kind": it looks like an A2A 1.0 part (send A2A-Version: 1.0)',
        ),
        ({"kind": "text", "text": 5}, '"text" must be a string'),
        ({"kind": "data", "data": [1]}, '"data" must be an object'),
        ({"kind": "file", "file": "x"}, '"file" must be an object with "bytes" or "uri"'),
        (
            {"kind": "file", "file": {"bytes": "AA==", "uri": "https://x"}},
            '"file" must hold exactly one of "bytes" (base64) and "uri"',
        ),
        (
            {"kind": "file", "file": {"uri": "https://x", "mimeType": 3}},
            '"file.mimeType" must be a string',
        ),
        ({"kind": "image"}, '"kind" must be "text", "file" or "data", not \'image\''),
        ({"kind": 7, "text": "x"}, '"kind" must be "text", "file" or "data", not 7'),
    ],
)
def test_v03_part_problems(part: Any, problem: str) -> None:
    assert _violations("0.3", _v03({"kind": "text", "text": "ok"}, part)) == [
        ("message.parts[1]", problem)
    ]


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        ([], "must be an object, not an array"),
        ({"kind": "text"}, "has none of text, raw, url, data: it looks like an A2A 0.3 part"),
        ({"metadata": {}}, "has none of text, raw, url, data"),
        (
            {"text": "a", "raw": "AA=="},
            "holds text and raw: a part holds exactly one of text, raw, url, data",
        ),
        ({"url": 5}, '"url" must be a string'),
        ({"text": "a", "mediaType": 1}, '"mediaType" must be a string'),
        ({"raw": "AA==", "filename": ["a"]}, '"filename" must be a string'),
    ],
)
def test_v1_part_problems(part: Any, problem: str) -> None:
    assert _violations("1.0", _v1(part)) == [("message.parts[0]", problem)]


def test_v03_parts_without_kind_are_read_as_the_sdk_reads_them() -> None:
    params = _v03({"text": "hi"}, {"data": {"a": 1}}, {"file": {"uri": "https://x/a.pdf"}})
    message = wire.message_of("0.3", params)
    assert wire.part_media_types("0.3", message) == [
        "text/plain",
        "application/json",
        "application/octet-stream",
    ]
    assert wire.message_text("0.3", message) == "hi"


def test_part_media_types_v03() -> None:
    message = _v03(
        {"kind": "text", "text": "hello"},
        {"kind": "file", "file": {"bytes": "AA==", "mimeType": "image/png"}},
        {"kind": "file", "file": {"uri": "https://x/y"}},
        {"kind": "data", "data": {"a": 1}},
    )["message"]
    assert wire.part_media_types("0.3", message) == [
        "text/plain",
        "image/png",
        "application/octet-stream",
        "application/json",
    ]


def test_part_media_types_v1() -> None:
    message = _v1(
        {"text": "hello"},
        {"text": "# hi", "mediaType": "text/markdown"},
        {"raw": "AA==", "mediaType": "image/png"},
        {"url": "https://x/y"},
        {"data": {"a": 1}},
        {"data": [1], "mediaType": "application/vnd.x+json"},
    )["message"]
    assert wire.part_media_types("1.0", message) == [
        "text/plain",
        "text/markdown",
        "image/png",
        "application/octet-stream",
        "application/json",
        "application/vnd.x+json",
    ]
    assert wire.part_media_types("1.0", {"parts": "x"}) == []
    assert wire.part_media_types("1.0", {"parts": [5]}) == ["application/octet-stream"]


def test_message_text() -> None:
    v03 = _v03({"kind": "text", "text": "a"}, {"kind": "data", "data": {"text": "no"}})
    assert wire.message_text("0.3", v03["message"]) == "a"
    v1 = _v1({"text": "weather in"}, {"raw": "AA=="}, {"text": "Paris"})
    assert wire.message_text("1.0", v1["message"]) == "weather in\nParis"
    assert wire.message_text("1.0", {}) == ""


def test_message_task_id() -> None:
    assert wire.message_task_id("0.3", _v03({"text": "x"}, taskId="t-1")) == "t-1"
    assert wire.message_task_id("1.0", _v1({"text": "x"})) is None
    assert wire.message_task_id("1.0", {"message": "x"}) is None


# --- other params --------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.3", "1.0"])
def test_accepted_output_modes(version: Version) -> None:
    assert wire.accepted_output_modes(version, {}) == []
    assert wire.accepted_output_modes(version, {"configuration": {}}) == []
    modes = {"configuration": {"acceptedOutputModes": ["text/plain", "image/*"]}}
    assert wire.accepted_output_modes(version, modes) == ["text/plain", "image/*"]
    for bad in ({"configuration": []}, {"configuration": {"acceptedOutputModes": "text"}}):
        with pytest.raises(RpcError) as info:
            wire.accepted_output_modes(version, bad)
        assert info.value.code == -32602


@pytest.mark.parametrize(
    ("version", "op", "params", "task_id"),
    [
        ("0.3", Op.GET, {"id": "t", "historyLength": 2}, "t"),
        ("1.0", Op.CANCEL, {"id": "t"}, "t"),
        ("1.0", Op.SUBSCRIBE, {"id": "t"}, "t"),
        ("0.3", Op.PUSH_CONFIG, {"taskId": "t", "pushNotificationConfig": {}}, "t"),
        ("0.3", Op.PUSH_CONFIG, {"id": "t", "pushNotificationConfigId": "c"}, "t"),
        ("1.0", Op.PUSH_CONFIG, {"taskId": "t", "id": "c"}, "t"),
    ],
)
def test_task_id_param(version: Version, op: Op, params: dict[str, Any], task_id: str) -> None:
    assert wire.task_id_param(version, op, params) == task_id


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({}, ("id", "is required")),
        ({"id": ""}, ("id", "must not be empty")),
        ({"id": 12}, ("id", "must be a task id string, not a number")),
        ({"taskId": "t"}, ("id", "is required")),
    ],
)
def test_task_id_param_problems(params: dict[str, Any], problem: tuple[str, str]) -> None:
    with pytest.raises(RpcError) as info:
        wire.task_id_param("1.0", Op.GET, params)
    assert info.value.code == -32602
    assert info.value.violations == (problem,)


def test_task_id_param_of_ops_without_one() -> None:
    with pytest.raises(ValueError, match="take no task id"):
        wire.task_id_param("1.0", Op.SEND, {"id": "t"})


def test_list_tasks_query_defaults_and_values() -> None:
    assert list_tasks_query({}) == ListQuery()
    query = list_tasks_query(
        {
            "contextId": "c",
            "status": "TASK_STATE_WORKING",
            "pageSize": "20",
            "pageToken": "tok",
            "historyLength": 0,
            "includeArtifacts": True,
            "statusTimestampAfter": "2026-01-01T00:00:00Z",
            "tenant": "ignored",
        }
    )
    assert query == ListQuery(
        context_id="c",
        status="TASK_STATE_WORKING",
        page_size=20,
        page_token="tok",
        history_length=0,
        include_artifacts=True,
        status_timestamp_after=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert list_tasks_query({"pageSize": 0, "status": "TASK_STATE_UNSPECIFIED"}) == (ListQuery())
    assert list_tasks_query({"pageSize": 100.0}).page_size == 100


def test_list_tasks_query_reports_every_violation() -> None:
    with pytest.raises(RpcError) as info:
        list_tasks_query(
            {
                "pageSize": 150,
                "historyLength": -5,
                "status": "TASK_STATE_RUNNING",
                "contextId": 3,
                "includeArtifacts": "yes",
                "statusTimestampAfter": "yesterday",
            }
        )
    fields = [field for field, _ in info.value.violations]
    assert fields == [
        "contextId",
        "statusTimestampAfter",
        "status",
        "pageSize",
        "historyLength",
        "includeArtifacts",
    ]
    problems = dict(info.value.violations)
    assert problems["pageSize"] == "must be between 1 and 100 inclusive, got 150"
    assert problems["historyLength"] == "must be a non-negative integer, got -5"
    assert problems["status"].startswith("must be one of TASK_STATE_SUBMITTED, TASK_STATE_WORKING")
    assert "TASK_STATE_UNSPECIFIED" not in problems["status"]
    assert problems["status"].endswith("got 'TASK_STATE_RUNNING'")
    assert problems["statusTimestampAfter"] == (
        "must be an RFC 3339 timestamp such as 2026-01-02T03:04:05Z, got 'yesterday'"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-02t03:04:05.5z", datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
        ("2026-01-02 03:04:05.123456789Z", datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("2026-01-02T04:04:05+01:00", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2026-01-01T20:34:05-06:30", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ],
)
def test_parse_timestamp(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected and parsed is not None and parsed.utcoffset() is not None
    query = list_tasks_query({"statusTimestampAfter": text})
    assert query.status_timestamp_after == expected
    assert query.status_timestamp_after.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "2026-01-02T03:04:05",  # no offset
        "2026-01-02",
        "20260102T030405Z",
        "2026-02-30T00:00:00Z",
        "2026-01-02T24:00:00Z",
        "2026-01-02T23:59:60Z",
        "2026-01-02T03:04:05+24:00",
        "2026-01-02T03:04:05.Z",
        "2026-01-02T03:04:05.1234567890Z",
        "0001-01-01T00:00:00+01:00",
        " 2026-01-02T03:04:05Z",
        "2026-01-02T03:04:05Z\n",
    ],
)
def test_bad_timestamps(text: str) -> None:
    assert parse_timestamp(text) is None
    with pytest.raises(RpcError) as info:
        list_tasks_query({"statusTimestampAfter": text})
    assert [field for field, _ in info.value.violations] == ["statusTimestampAfter"]


def test_status_at_or_after() -> None:
    after = datetime(2026, 1, 2, tzinfo=UTC)

    def task(stamp: Any) -> dict[str, Any]:
        return {"id": "t", "status": {"state": "TASK_STATE_WORKING", "timestamp": stamp}}

    assert status_at_or_after(task("2026-01-02T00:00:00Z"), after)
    assert status_at_or_after(task("2026-01-02T01:00:00+01:00"), after)  # same instant
    assert status_at_or_after(task("2026-01-02T00:00:00.000001+00:00"), after)
    assert status_at_or_after(task("2026-01-02T00:00:00.5"), after)  # naive: UTC
    assert not status_at_or_after(task("2026-01-01T23:59:59.999Z"), after)
    assert not status_at_or_after(task("2026-01-02T00:30:00+01:00"), after)
    for no_time in (None, 5, "soon"):
        assert not status_at_or_after(task(no_time), after)
    assert not status_at_or_after({"id": "t"}, after)
    assert status_timestamp(task("2026-01-02T00:00:00Z")) == after


# --- recording the states answers carry --------------------------------------------------------


def test_result_task_states_of_every_op() -> None:
    bare_v1 = json.loads(complete_text("v1_send.out"))["result"]["task"]
    task_v03 = json.loads(complete_text("v03_send.out"))["result"]
    assert bare_v1["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in bare_v1
    v1_pair = (bare_v1["id"], "TASK_STATE_COMPLETED")
    v03_pair = (task_v03["id"], task_v03["status"]["state"])
    # 1.0 GetTask/CancelTask answer a bare Task, which no stream event is
    assert event_task_state("1.0", bare_v1) == (None, None)
    for op in (Op.GET, Op.CANCEL):
        assert result_task_states("1.0", op, bare_v1) == [v1_pair]
        assert result_task_states("1.0", op, {"task": bare_v1}) == [v1_pair]
        assert result_task_states("0.3", op, task_v03) == [v03_pair]
        envelope = {"jsonrpc": "2.0", "id": 1, "result": bare_v1}
        assert result_task_states("1.0", op, envelope) == [v1_pair]
    # sends: wrapped 1.0 results, 0.3 kinds; a message carries no state
    assert result_task_states("1.0", Op.SEND, {"task": bare_v1}) == [v1_pair]
    assert result_task_states("0.3", Op.SEND, task_v03) == [v03_pair]
    assert result_task_states("1.0", Op.SEND, MESSAGE_V1) == []
    assert result_task_states("0.3", Op.SEND, MESSAGE_V03) == []
    # stream events, as event_task_state
    for name, version in (("v1_stream.out", "1.0"), ("v03_stream.out", "0.3")):
        for event in captured_events(name):
            task_id, state = event_task_state(version, event)
            expected = [(task_id, state)] if task_id and state else []
            for op in (Op.STREAM, Op.SUBSCRIBE):
                assert result_task_states(version, op, event) == expected
    # ListTasks: every task with an id and a state
    listing = {
        "tasks": [
            bare_v1,
            {"id": "t2", "status": {"state": "TASK_STATE_WORKING"}},
            {"id": "t3", "status": {}},
            {"status": {"state": "TASK_STATE_FAILED"}},
            "junk",
        ],
        "nextPageToken": "",
    }
    assert result_task_states("1.0", Op.LIST, listing) == [
        v1_pair,
        ("t2", "TASK_STATE_WORKING"),
    ]
    for odd in (None, [], "x", {"tasks": "x"}, {}, {"id": "", "status": {"state": "x"}}):
        for op in (Op.GET, Op.LIST, Op.SEND):
            assert result_task_states("1.0", op, odd) == []


def complete_text(name: str) -> str:
    raw = (WIRE / name).read_bytes().decode()
    return raw.split("\r\n\r\n", 1)[-1].strip()


# --- every params check read_request runs ------------------------------------------------------


def _send_problems(version: Version, params: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(RpcError) as info:
        wire.check_send_params(version, params)
    assert info.value.code == INVALID_PARAMS
    assert info.value.data == {"fields": [field for field, _ in info.value.violations]}
    return list(info.value.violations)


def test_check_send_params_accepts_the_captured_requests() -> None:
    for name, version in (("v03_send.json", "0.3"), ("v03_stream.json", "0.3")):
        wire.check_send_params(version, _params(name))
    for name in ("v1_send.json", "v1_stream.json"):
        wire.check_send_params("1.0", _params(name))
    full = {
        **_v03({"kind": "text", "text": "hi"}, metadata={"k": 1}),
        "metadata": {},
        "configuration": {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": 3,
            "blocking": False,
            "pushNotificationConfig": None,  # null is unset
        },
    }
    wire.check_send_params("0.3", full)
    config = {"acceptedOutputModes": [], "historyLength": "0", "returnImmediately": True}
    wire.check_send_params("1.0", {**_v1({"text": "hi"}), "configuration": config})


def test_check_send_params_names_each_field_by_its_path() -> None:
    params = {
        **_v03({"kind": "text", "text": "hi"}, contextId="c" * 513, metadata="x"),
        "metadata": 5,
        "configuration": {
            "historyLength": "abc",
            "blocking": "yes",
            "acceptedOutputModes": ["text/plain", 3],
        },
    }
    assert _send_problems("0.3", params) == [
        ("message.contextId", "must be at most 512 characters long, not 513"),
        ("message.metadata", "must be an object, not a string"),
        ("metadata", "must be an object, not a number"),
        ("configuration.acceptedOutputModes", "must be an array of media type strings"),
        ("configuration.historyLength", "must be a non-negative integer, got 'abc'"),
        ("configuration.blocking", "must be a boolean, not a string"),
    ]
    v1 = {
        **_v1({"text": "hi"}, metadata=[1]),
        "configuration": {
            "historyLength": -1,
            "returnImmediately": 1,
            "acceptedOutputModes": "text/plain",
        },
    }
    assert _send_problems("1.0", v1) == [
        ("message.metadata", "must be an object, not an array"),
        ("configuration.acceptedOutputModes", "must be an array of media type strings"),
        ("configuration.historyLength", "must be a non-negative integer, got -1"),
        ("configuration.returnImmediately", "must be a boolean, not a number"),
    ]
    for history in (1.5, True, 2**31, "1e3", "", [1]):
        config = {"historyLength": history}
        problems = _send_problems("1.0", {**_v1({"text": "hi"}), "configuration": config})
        assert [field for field, _ in problems] == ["configuration.historyLength"], history
    assert _send_problems("1.0", {**_v1({"text": "hi"}), "configuration": [1]}) == [
        ("configuration", "must be an object, not an array")
    ]
    assert _send_problems("0.3", {"metadata": []}) == [
        ("message", "is required"),
        ("metadata", "must be an object, not an array"),
    ]
    ids = _v1({"text": "hi"}, taskId="t" * 513, referenceTaskIds=["r" * 513])
    assert [field for field, _ in _send_problems("1.0", ids)] == [
        "message.taskId",
        "message.referenceTaskIds",
    ]
    assert wire.message_of("1.0", _v1({"text": "hi"}, contextId="c" * 512))


@pytest.mark.parametrize(
    ("version", "key", "other"),
    [("0.3", "pushNotificationConfig", "taskPushNotificationConfig"),
     ("1.0", "taskPushNotificationConfig", "pushNotificationConfig")],
)  # fmt: skip
def test_a_push_notification_config_in_a_send_is_an_object_under_its_versions_name(
    version: Version, key: str, other: str
) -> None:
    message = _v03({"kind": "text", "text": "hi"}) if version == "0.3" else _v1({"text": "hi"})
    config = {key: {"url": "https://client.example/hook", "token": "t"}}
    wire.check_send_params(version, {**message, "configuration": config})  # the router's
    for bad in ({key: "https://client.example/hook"}, {other: config[key]}):
        with pytest.raises(RpcError) as info:
            wire.check_send_params(version, {**message, "configuration": bad})
        assert info.value.code == INVALID_PARAMS
        assert info.value.data == {"fields": [f"configuration.{next(iter(bad))}"]}


def test_check_task_params() -> None:
    assert wire.check_task_params("1.0", Op.GET, {"id": "t", "historyLength": "2"}) == "t"
    assert wire.check_task_params("0.3", Op.CANCEL, {"id": "t", "metadata": {}}) == "t"
    assert wire.check_task_params("1.0", Op.PUSH_CONFIG, {"taskId": "t", "metadata": 1}) == "t"
    for version, op, params, problems in [
        ("1.0", Op.GET, {"id": "t", "historyLength": -5}, [("historyLength", "-5")]),
        (
            "0.3",
            Op.GET,
            {"id": 3, "historyLength": "x"},
            [("id", "number"), ("historyLength", "x")],
        ),
        ("0.3", Op.CANCEL, {"id": "t", "metadata": "m"}, [("metadata", "string")]),
        ("1.0", Op.SUBSCRIBE, {"metadata": []}, [("id", "required"), ("metadata", "array")]),
    ]:
        with pytest.raises(RpcError) as info:
            wire.check_task_params(version, op, params)
        assert info.value.code == INVALID_PARAMS
        assert [field for field, _ in info.value.violations] == [f for f, _ in problems]
        for (_, text), (_, part) in zip(info.value.violations, problems, strict=True):
            assert part in text
        assert info.value.data == {"fields": [f for f, _ in problems]}
