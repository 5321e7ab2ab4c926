"""router.compat.translate: unit cases, golden cases from real SDK traffic (tests/fixtures/wire/),
round-trip properties (hypothesis) and the docs table kept equal to the code's.

The two subscribe captures (``v1_subscribe.out``, ``v03_resubscribe.out``) have their lines cut
at 200 characters, so they are not used; subscribe events have the shapes of stream events.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import a2a.types as v1types
import pytest
from google.protobuf import any_pb2
from google.protobuf.json_format import ParseDict
from google.rpc import error_details_pb2  # noqa: F401 (registers ErrorInfo, BadRequest for Any)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.compat.carry import CARRY_KEY
from router.compat.push import push_params_to, push_result_to
from router.compat.translate import (
    DATA_COMPAT_KEY,
    asks_no_history,
    error_to,
    event_to,
    message_to,
    params_to,
    part_to,
    result_to,
    role_to,
    state_to,
    task_to,
    timestamp_to,
)
from router.protocol.errors import (
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    NO_MATCHING_AGENT,
    STRUCT_TYPE,
    UNSUPPORTED,
    VALUE_TYPE,
    RpcError,
    error_body,
)
from router.protocol.timestamps import parse_timestamp
from router.protocol.versions import METHODS, ROLES, STATES, Op, equivalent_method
from tests.support.helpers import schema_problems
from tests.support.translation_table import EXAMPLES, TABLE, Example

WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"
DOC = Path(__file__).resolve().parents[3] / "docs" / "translation.md"


# --- fixtures from the wire ----------------------------------------------------------------------


def wire_json(name: str) -> dict[str, Any]:
    """The JSON body of a captured request (.json) or non-streaming answer (.out)."""
    lines = (WIRE / name).read_text(encoding="utf-8").splitlines()
    return json.loads(next(line for line in reversed(lines) if line.startswith("{")))


def wire_events(name: str) -> list[dict[str, Any]]:
    """The ``result`` of every SSE event of a captured stream."""
    lines = (WIRE / name).read_text(encoding="utf-8").splitlines()
    return [
        json.loads(line[len("data: ") :])["result"] for line in lines if line.startswith("data:")
    ]


_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


def normal(value: Any, key: str = "") -> Any:
    """``value`` without what differs between two runs: IDs, message IDs, timestamps, and the
    false ``append``/``lastChunk`` flags one SDK writes and the other leaves out."""
    if isinstance(value, dict):
        return {
            k: normal(v, k)
            for k, v in value.items()
            if not (k in ("append", "lastChunk") and v is False)
        }
    if isinstance(value, list):
        return [normal(item) for item in value]
    if isinstance(value, str) and (_UUID.match(value) or key == "messageId"):
        return "<id>"
    if isinstance(value, str) and _STAMP.match(value):
        return "<timestamp>"
    return value


# --- golden cases ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v03", "v1"), [("v03_send.json", "v1_send.json"), ("v03_stream.json", "v1_stream.json")]
)
def test_golden_request_params(v03: str, v1: str) -> None:
    old, new = wire_json(v03), wire_json(v1)
    op = Op.SEND if "send" in v03 else Op.STREAM
    assert params_to(op, old["params"], "0.3", "1.0") == new["params"]
    assert params_to(op, new["params"], "1.0", "0.3") == old["params"]


@pytest.mark.parametrize(
    ("v1", "v03"),
    [
        ("v1_send.out", "v03_send.out"),
        ("v1_send.out", "v1compat_v03_send.out"),  # the SDK's own 1.0 -> 0.3 translation
        ("v1_nonblocking.out", "v03_nonblocking.out"),
    ],
)
def test_golden_send_results(v1: str, v03: str) -> None:
    new, old = wire_json(v1)["result"], wire_json(v03)["result"]
    assert normal(result_to(Op.SEND, new, "1.0", "0.3")) == normal(old)
    assert normal(result_to(Op.SEND, old, "0.3", "1.0")) == normal(new)


@pytest.mark.parametrize("v03", ["v03_stream.out", "v1compat_v03_stream.out"])
def test_golden_stream_events(v03: str) -> None:
    new, old = wire_events("v1_stream.out"), wire_events(v03)
    assert len(new) == len(old) == 6
    assert [normal(event_to(e, "1.0", "0.3")) for e in new] == [normal(e) for e in old]
    assert [normal(event_to(e, "0.3", "1.0")) for e in old] == [normal(e) for e in new]
    # the stream's end: final synthesized for the 0.3 client, dropped for the 1.0 one
    assert [event_to(e, "1.0", "0.3").get("final") for e in new] == [
        None,
        False,
        None,
        None,
        None,
        True,
    ]


def test_golden_error_round_trip() -> None:
    error = wire_json("v1_send_noversion.out")["error"]
    old = error_to(error, "1.0", "0.3")
    # the SDK's domain for the A2A codes is the default: nothing to carry for the 0.3 client
    assert old == {"code": -32009, "message": error["message"], "data": {}}
    assert error_to(old, "0.3", "1.0") == error


def test_golden_push_task_round_trip() -> None:
    """The whole Task a 0.3 agent pushes, through 1.0 and back (timestamps normalized)."""
    pushed = json.loads((WIRE / "push_notifications.jsonl").read_text().splitlines()[0])["body"]
    new = task_to(pushed, "0.3", "1.0")
    assert new["status"] == {
        "state": "TASK_STATE_COMPLETED",
        "timestamp": "2026-11-21T23:16:52.911850Z",
    }
    assert "kind" not in new and all("kind" not in p for a in new["artifacts"] for p in a["parts"])
    back = task_to(new, "1.0", "0.3")
    assert back == {
        **pushed,
        "status": {**pushed["status"], "timestamp": new["status"]["timestamp"]},
    }


# --- unit cases ----------------------------------------------------------------------------------


def test_parts_both_ways() -> None:
    cases = [
        ({"kind": "text", "text": "hi"}, {"text": "hi"}),
        (
            {"kind": "file", "file": {"bytes": "AAE=", "mimeType": "image/png", "name": "a.png"}},
            {"raw": "AAE=", "mediaType": "image/png", "filename": "a.png"},
        ),
        ({"kind": "file", "file": {"uri": "https://x/y"}}, {"url": "https://x/y"}),
        (
            {"kind": "data", "data": {"a": [1, 2]}, "metadata": {"m": 1}},
            {"data": {"a": [1, 2]}, "metadata": {"m": 1}},
        ),
        (
            {"kind": "data", "data": {"value": [1, 2]}, "metadata": {DATA_COMPAT_KEY: True}},
            {"data": [1, 2]},
        ),
        (
            {
                "kind": "text",
                "text": "# hi",
                "metadata": {CARRY_KEY: {"mediaType": "text/markdown"}},
            },
            {"text": "# hi", "mediaType": "text/markdown"},
        ),
    ]
    for old, new in cases:
        assert part_to(old, "0.3", "1.0") == new
        assert part_to(new, "1.0", "0.3") == old


def test_a_file_objects_unknown_members_are_carried() -> None:
    old = {"kind": "file", "file": {"uri": "u", "size": 3}}
    new = part_to(old, "0.3", "1.0")
    assert new == {"url": "u", "metadata": {CARRY_KEY: {"file": {"size": 3}}}}
    assert part_to(new, "1.0", "0.3") == old


def test_unknown_members_pass_through() -> None:
    assert part_to({"kind": "text", "text": "x", "extra": 1}, "0.3", "1.0") == {
        "text": "x",
        "extra": 1,
    }
    message = {"role": "ROLE_AGENT", "messageId": "m", "parts": [], "future": {"x": 1}}
    assert message_to(message, "1.0", "0.3") == {"kind": "message", **message, "role": "agent"}
    assert event_to({"somethingNew": {}}, "1.0", "0.3") == {"somethingNew": {}}


def test_roles_and_states() -> None:
    message = {"role": 2, "messageId": "m", "parts": [{"text": "x"}]}
    assert message_to(message, "1.0", "0.3")["role"] == "agent"
    task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}
    assert task_to(task, "1.0", "0.3")["status"]["state"] == "input-required"
    assert (
        task_to({**task, "status": {"state": 6}}, "1.0", "0.3")["status"]["state"]
        == "input-required"
    )
    assert task_to({"id": "t", "contextId": "c"}, "1.0", "0.3")["status"] == {"state": "unknown"}
    assert message_to({"role": True, "parts": []}, "1.0", "0.3")["role"] is True  # not 1
    bare = event_to({"kind": "status-update", "taskId": "t", "final": False}, "0.3", "1.0")
    assert bare == {"statusUpdate": {"taskId": "t"}}
    assert task_to({"kind": "task", "id": "t", "status": {"state": "rejected"}}, "0.3", "1.0") == {
        "id": "t",
        "status": {"state": "TASK_STATE_REJECTED"},
    }


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2026-11-21T22:44:55.286457+00:00", "2026-11-21T22:44:55.286457Z"),
        ("2026-11-21T22:44:55Z", "2026-11-21T22:44:55Z"),
        ("2026-11-21T23:44:55.5+01:00", "2026-11-21T22:44:55.500000Z"),
        ("2026-11-21T22:44:55.123", "2026-11-21T22:44:55.123000Z"),  # naive: UTC
        ("yesterday", "yesterday"),
    ],
)
def test_timestamps(given: str, expected: str) -> None:
    assert timestamp_to(given, "1.0") == expected
    assert timestamp_to(expected, "0.3") == expected


def test_send_configuration() -> None:
    old = {
        "message": {
            "kind": "message",
            "role": "user",
            "messageId": "m",
            "parts": [{"kind": "text", "text": "x"}],
        },
        "configuration": {
            "blocking": False,
            "historyLength": 2,
            "acceptedOutputModes": ["text/plain"],
        },
        "metadata": {"a": 1},
    }
    new = params_to(Op.SEND, old, "0.3", "1.0")
    assert new["configuration"] == {
        "returnImmediately": True,
        "historyLength": 2,
        "acceptedOutputModes": ["text/plain"],
    }
    assert params_to(Op.SEND, new, "1.0", "0.3") == old
    blocking = params_to(Op.SEND, {**old, "configuration": {"blocking": True}}, "0.3", "1.0")
    assert blocking["configuration"] == {}  # the default: returnImmediately omitted
    zero = params_to(Op.STREAM, {**old, "configuration": {"historyLength": 0}}, "0.3", "1.0")
    assert zero["configuration"] == {}  # 0.3: no limit; 1.0 0 would mean "no history"


def test_push_config_shapes() -> None:
    old = {
        "url": "https://hook",
        "token": "t",
        "authentication": {"schemes": ["Bearer"], "credentials": "c"},
    }
    new = params_to(Op.SEND, {"configuration": {"pushNotificationConfig": old}}, "0.3", "1.0")
    pushed = new["configuration"]["taskPushNotificationConfig"]
    assert pushed == {
        "url": "https://hook",
        "token": "t",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    }
    back = params_to(Op.SEND, new, "1.0", "0.3")
    assert back["configuration"]["pushNotificationConfig"] == old


def test_task_params() -> None:
    assert params_to(
        Op.GET, {"id": "t", "historyLength": 3, "metadata": {"x": 1}}, "0.3", "1.0"
    ) == {
        "id": "t",
        "historyLength": 3,
    }
    assert params_to(Op.GET, {"id": "t", "historyLength": 0}, "1.0", "0.3") == {"id": "t"}
    cancel = params_to(Op.CANCEL, {"id": "t", "tenant": "acme", "metadata": {"x": 1}}, "1.0", "0.3")
    assert cancel == {"id": "t", "metadata": {"x": 1, CARRY_KEY: {"tenant": "acme"}}}
    assert params_to(Op.CANCEL, cancel, "0.3", "1.0") == {
        "id": "t",
        "tenant": "acme",
        "metadata": {"x": 1},
    }
    # 0.3 tasks/resubscribe takes TaskIdParams {id, metadata}: the tenant is carried there
    subscribe = params_to(Op.SUBSCRIBE, {"id": "t", "tenant": "acme"}, "1.0", "0.3")
    assert subscribe == {"id": "t", "metadata": {CARRY_KEY: {"tenant": "acme"}}}
    assert params_to(Op.SUBSCRIBE, subscribe, "0.3", "1.0") == {"id": "t", "tenant": "acme"}


def test_methods_without_a_counterpart_are_unsupported() -> None:
    with pytest.raises(RpcError) as info:
        params_to(Op.LIST, {"pageSize": 5}, "1.0", "0.3")
    assert info.value.code == UNSUPPORTED
    assert info.value.data == {"operation": "list", "agentVersion": "0.3", "clientVersion": "1.0"}
    assert "no such method" in info.value.message
    with pytest.raises(ValueError, match="push_params_to"):
        params_to(Op.PUSH_CONFIG, {"taskId": "t"}, "1.0", "0.3")


def test_push_config_methods() -> None:
    auth03 = {"schemes": ["Bearer"], "credentials": "c"}
    auth1 = {"scheme": "Bearer", "credentials": "c"}
    config03 = {
        "taskId": "t",
        "pushNotificationConfig": {"id": "p", "url": "https://h", "authentication": auth03},
    }
    config1 = {"taskId": "t", "id": "p", "url": "https://h", "authentication": auth1}
    set03, create = "tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig"
    assert push_params_to(set03, config03, "0.3", "1.0") == config1
    assert push_params_to(create, config1, "1.0", "0.3") == config03
    assert push_result_to(create, config1, "1.0", "0.3") == config03
    get03 = {"id": "t", "pushNotificationConfigId": "p"}
    get1 = {"taskId": "t", "id": "p"}
    assert push_params_to("tasks/pushNotificationConfig/get", get03, "0.3", "1.0") == get1
    assert push_params_to("DeleteTaskPushNotificationConfig", get1, "1.0", "0.3") == get03
    tenant = push_params_to("GetTaskPushNotificationConfig", {**get1, "tenant": "a"}, "1.0", "0.3")
    assert tenant == {**get03, "metadata": {CARRY_KEY: {"tenant": "a"}}}
    assert push_params_to("tasks/pushNotificationConfig/get", tenant, "0.3", "1.0") == {
        **get1,
        "tenant": "a",
    }
    listed = push_params_to(
        "ListTaskPushNotificationConfigs", {"taskId": "t", "pageSize": 2}, "1.0", "0.3"
    )
    assert listed == {"id": "t"}
    assert push_result_to("tasks/pushNotificationConfig/list", [config03], "0.3", "1.0") == {
        "configs": [config1]
    }
    assert push_result_to(
        "ListTaskPushNotificationConfigs", {"configs": [config1]}, "1.0", "0.3"
    ) == [config03]
    assert push_result_to("tasks/pushNotificationConfig/delete", None, "0.3", "1.0") == {}
    assert push_result_to("DeleteTaskPushNotificationConfig", {}, "1.0", "0.3") is None
    with pytest.raises(ValueError, match="not a push notification config method"):
        push_params_to("SendMessage", {}, "1.0", "0.3")


def test_status_updates_final() -> None:
    working = {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
    asked = {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_AUTH_REQUIRED"}}
    assert event_to({"statusUpdate": working}, "1.0", "0.3")["final"] is False
    assert event_to({"statusUpdate": asked}, "1.0", "0.3")["final"] is True
    odd = {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "status": {"state": "working"},
        "final": True,
    }
    new = event_to(odd, "0.3", "1.0")
    assert new == {"statusUpdate": {**working, "metadata": {CARRY_KEY: {"final": True}}}}
    assert event_to(new, "1.0", "0.3") == odd


def test_results_of_get_and_cancel() -> None:
    task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_CANCELED"}}
    old = result_to(Op.CANCEL, task, "1.0", "0.3")
    assert old == {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "canceled"}}
    assert result_to(Op.GET, old, "0.3", "1.0") == task
    assert result_to(Op.GET, {"task": task}, "1.0", "0.3") == old  # a wrapped task, tolerated


def test_errors_both_ways() -> None:
    old = {
        "code": -32602,
        "message": "Invalid params",
        "data": {
            "fields": ["message.role"],
            "fieldViolations": [{"field": "message.role", "description": "bad"}],
        },
    }
    new = error_to(old, "0.3", "1.0")
    types = [d["@type"] for d in new["data"]]
    assert types == [ERROR_INFO_TYPE, STRUCT_TYPE, BAD_REQUEST_TYPE]
    assert new["data"][0]["reason"] == "INVALID_PARAMS"
    assert new["data"][0]["metadata"] == {"fields": '["message.role"]'}
    assert error_to(new, "1.0", "0.3") == old
    unknown = {"@type": "type.example.com/Other", "x": 1}
    odd = {
        "code": -32001,
        "message": "m",
        "data": [
            {
                "@type": ERROR_INFO_TYPE,
                "reason": "GONE",
                "domain": "a.org",
                "metadata": {"taskId": "t"},
            },
            unknown,
        ],
    }
    back = error_to(odd, "1.0", "0.3")
    assert back["data"] == {
        "taskId": "t",
        CARRY_KEY: {"reason": "GONE", "domain": "a.org", "details": [unknown]},
    }
    assert error_to(back, "0.3", "1.0") == odd
    assert (
        error_to({"code": -32603, "message": "x", "data": "text"}, "0.3", "1.0")["data"][1]["value"]
        == "text"
    )


def test_a_refusal_s_closest_skills_come_from_the_struct() -> None:
    """A -32050 of A2A 1.0 (another Switchboard as the agent) keeps only scalar facts in its
    ErrorInfo: the closest skills are read from the Struct, typed, for a 0.3 client; and a
    0.3 refusal becomes such a 1.0 one."""
    closest = [{"agent": "a", "skill": "s", "score": 0.51, "reason": "It scores 0.51."}]
    facts = {"reason": "no match", "tier": "refused", "threshold": 0.54, "score": 0.51}
    refusal = RpcError(
        NO_MATCHING_AGENT, "no agent can take this message: ...", {**facts, "closest": closest}
    )
    new = error_body("1.0", 1, refusal)["error"]
    info, struct = new["data"]
    assert "closest" not in info["metadata"] and info["metadata"]["threshold"] == "0.54"
    old = error_to(new, "1.0", "0.3")
    assert old["data"] == {**facts, "closest": closest}  # typed, from the Struct
    assert error_to(old, "0.3", "1.0")["data"] == [info, struct]


def test_review_fixes() -> None:
    # an a2a-sdk 0.3 agent's input-required with final: false (TaskUpdater's default) is
    # what the state implies: nothing carried; only a final: true that 1.0 cannot imply is
    asked = {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "status": {"state": "input-required"},
        "final": False,
    }
    new = event_to(asked, "0.3", "1.0")
    assert new == {
        "statusUpdate": {
            "taskId": "t",
            "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
        }
    }
    assert event_to(new, "1.0", "0.3")["final"] is True  # lossy: the 1.0 stream ends there
    # the ErrorInfo domain: a2a-protocol.org for standard codes, switchboard.a2a for ours
    for code, domain in (
        (-32001, "a2a-protocol.org"),
        (-32700, "a2a-protocol.org"),
        (-32052, "switchboard.a2a"),
    ):
        info = error_to({"code": code, "message": "m", "data": {}}, "0.3", "1.0")["data"][0]
        assert info["domain"] == domain
        back = error_to({"code": code, "message": "m", "data": [info]}, "1.0", "0.3")
        assert back["data"] == {}  # the default domain is not carried
    # 0.3 error data that is an array: a Value detail, and back
    listed = {"code": -32603, "message": "m", "data": [1, "two"]}
    new_error = error_to(listed, "0.3", "1.0")
    assert new_error["data"][1] == {"@type": VALUE_TYPE, "value": [1, "two"]}
    assert error_to(new_error, "1.0", "0.3") == listed
    # a 0.3 timestamp no 1.x SDK reads is carried in the event's metadata, not in status
    odd = {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "status": {"state": "working", "timestamp": "yesterday"},
        "final": False,
        "metadata": {},
    }
    new = event_to(odd, "0.3", "1.0")["statusUpdate"]
    assert new["status"] == {"state": "TASK_STATE_WORKING"}
    assert new["metadata"] == {CARRY_KEY: {"metadata": {}, "statusTimestamp": "yesterday"}}
    assert event_to({"statusUpdate": new}, "1.0", "0.3") == odd
    # a compat data part's members beside "value" are carried, not dropped
    compat = {
        "kind": "data",
        "data": {"value": [1], "note": "x"},
        "metadata": {DATA_COMPAT_KEY: True},
    }
    new_part = part_to(compat, "0.3", "1.0")
    assert new_part == {"data": [1], "metadata": {CARRY_KEY: {"dataMembers": {"note": "x"}}}}
    assert part_to(new_part, "1.0", "0.3") == compat
    # historyLength 0 from a 1.0 client: a 0.3 agent's history is trimmed
    assert asks_no_history(Op.GET, {"id": "t", "historyLength": 0})
    assert asks_no_history(Op.SEND, {"configuration": {"historyLength": "0"}})
    assert not asks_no_history(Op.GET, {"id": "t", "historyLength": 2})
    task = {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"}}
    with_history = {
        **task,
        "history": [{"kind": "message", "messageId": "m", "role": "user", "parts": []}],
    }
    assert "history" not in result_to(Op.GET, with_history, "0.3", "1.0", no_history=True)
    sent = result_to(Op.SEND, with_history, "0.3", "1.0", no_history=True)
    assert "history" not in sent["task"]


def test_same_version_is_untouched() -> None:
    event = {"statusUpdate": {"taskId": "t"}}
    assert event_to(event, "1.0", "1.0") is event
    assert result_to(Op.SEND, event, "1.0", "1.0") is event
    error = {"code": 1, "message": "m", "data": {"x": 1}}
    assert error_to(error, "0.3", "0.3") is error


# --- properties: 0.3 -> 1.0 -> 0.3 is the identity where both can say it -------------------------

_text = st.text(max_size=8)
_ids = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=12)
_scalars = st.none() | st.booleans() | st.integers(-(2**31), 2**31) | _text
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_metadata = st.dictionaries(  # {} too: an empty metadata survives the round trip
    _text.filter(lambda k: k not in (CARRY_KEY, DATA_COMPAT_KEY)), _json, max_size=3
)
_base64 = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
_media = st.sampled_from(["text/plain", "image/png", "application/pdf"])


def _optional(draw: Any, obj: dict[str, Any], key: str, strategy: Any) -> None:
    if draw(st.booleans()):
        obj[key] = draw(strategy)


@st.composite
def parts03(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["text", "bytes", "uri", "data"]))
    if kind == "text":
        part: dict[str, Any] = {"kind": "text", "text": draw(_text)}
    elif kind == "data":
        part = {"kind": "data", "data": draw(st.dictionaries(_text, _json, max_size=3))}
    else:
        file: dict[str, Any] = {kind: draw(_base64 if kind == "bytes" else _text)}
        _optional(draw, file, "mimeType", _media)
        _optional(draw, file, "name", _text)
        part = {"kind": "file", "file": file}
    _optional(draw, part, "metadata", _metadata)
    return part


@st.composite
def messages03(draw: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "kind": "message",
        "messageId": draw(_ids),
        "role": draw(st.sampled_from(["user", "agent"])),
        "parts": draw(st.lists(parts03(), min_size=1, max_size=3)),
    }
    for key, strategy in (
        ("taskId", _ids),
        ("contextId", _ids),
        ("referenceTaskIds", st.lists(_ids, max_size=2)),
        ("extensions", st.lists(_text, max_size=2)),
        ("metadata", _metadata),
    ):
        _optional(draw, message, key, strategy)
    return message


_states03 = st.sampled_from(
    [
        "submitted",
        "working",
        "input-required",
        "auth-required",
        "completed",
        "canceled",
        "failed",
        "rejected",
        "unknown",
    ]
)
_stamps = st.datetimes(timezones=st.none()).map(
    lambda d: d.isoformat(timespec="microseconds") + "Z"
)


_ENDS_STREAM = ("input-required", "auth-required", "completed", "canceled", "failed", "rejected")


@st.composite
def statuses03(draw: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"state": draw(_states03)}
    _optional(draw, status, "message", messages03())
    _optional(draw, status, "timestamp", _stamps)
    return status


@st.composite
def artifacts(draw: Any) -> dict[str, Any]:
    artifact: dict[str, Any] = {
        "artifactId": draw(_ids),
        "parts": draw(st.lists(parts03(), max_size=3)),
    }
    for key, strategy in (("name", _text), ("description", _text), ("metadata", _metadata)):
        _optional(draw, artifact, key, strategy)
    return artifact


@st.composite
def tasks03(draw: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "kind": "task",
        "id": draw(_ids),
        "contextId": draw(_ids),
        "status": draw(statuses03()),
    }
    _optional(draw, task, "history", st.lists(messages03(), max_size=2))
    _optional(draw, task, "artifacts", st.lists(artifacts(), max_size=2))
    _optional(draw, task, "metadata", _metadata)
    return task


@st.composite
def updates03(draw: Any) -> dict[str, Any]:
    if draw(st.booleans()):
        status = draw(statuses03())
        ends = status["state"] in _ENDS_STREAM  # 1.0 implies final: true there (lossy)
        event: dict[str, Any] = {
            "kind": "status-update",
            "taskId": draw(_ids),
            "contextId": draw(_ids),
            "status": status,
            "final": True if ends else draw(st.booleans()),
        }
    else:
        event = {
            "kind": "artifact-update",
            "taskId": draw(_ids),
            "contextId": draw(_ids),
            "artifact": draw(artifacts()),
        }
        _optional(draw, event, "append", st.booleans())
        _optional(draw, event, "lastChunk", st.booleans())
    _optional(draw, event, "metadata", _metadata)
    return event


@st.composite
def send_params03(draw: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"message": draw(messages03())}
    config: dict[str, Any] = {}
    _optional(draw, config, "acceptedOutputModes", st.lists(_media, max_size=2))
    _optional(draw, config, "historyLength", st.integers(1, 100))
    _optional(draw, config, "blocking", st.just(False))  # true is the default: omitted in 1.0
    _optional(draw, params, "configuration", st.just(config))
    _optional(draw, params, "metadata", _metadata)
    return params


@st.composite
def errors03(draw: Any) -> dict[str, Any]:
    error: dict[str, Any] = {
        "code": draw(st.sampled_from([-32001, -32002, -32602, -32603, -32099])),
        "message": draw(_text),
    }
    data = draw(
        st.dictionaries(
            _text.filter(lambda k: k not in ("fieldViolations", CARRY_KEY)), _json, max_size=3
        )
        | _scalars.filter(lambda v: v is not None)
        | st.lists(_json, max_size=3)  # an array: a google.protobuf.Value detail in 1.0
    )
    if isinstance(data, dict) and draw(st.booleans()):
        violation = st.fixed_dictionaries({"field": _text, "description": _text})
        data["fieldViolations"] = draw(st.lists(violation, min_size=1, max_size=2))
    error["data"] = data
    return error


_PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def valid_v1(cls: Any) -> Any:
    """A check that a value is 1.0 ProtoJSON of ``cls`` (an a2a-sdk 1.x protobuf type): no
    member, enum value or timestamp 1.0 cannot hold (ParseDict refuses unknown fields)."""

    def check(value: Any) -> None:
        ParseDict(value, cls())

    return check


def valid_v1_error(error: Any) -> None:
    """A 1.0 JSON-RPC error object: each ``data`` detail a google.protobuf.Any."""
    assert set(error) <= {"code", "message", "data"}
    assert isinstance(error.get("data", []), list)
    for detail in error.get("data", []):
        ParseDict(detail, any_pb2.Any())


def valid_v03(definition: str) -> Any:
    """A check that a value is the 0.3 schema's ``definition``, with no member 0.3 lacks."""

    def check(value: Any) -> None:
        ref = {"$ref": f"#/definitions/{definition}"}
        assert schema_problems(value, ref, definition, closed=True) == []

    return check


_V03_EVENTS = {
    "task": "Task",
    "message": "Message",
    "status-update": "TaskStatusUpdateEvent",
    "artifact-update": "TaskArtifactUpdateEvent",
}


def valid_v03_event(event: Any) -> None:
    valid_v03(_V03_EVENTS[event["kind"]])(event)


def _round_trip(
    value: Any, there: Any, back: Any, check: Any, expected: Any = None, check_in: Any = None
) -> None:
    """``back(there(value))`` is ``expected`` (default: ``value``); ``there(value)`` passes
    ``check`` (valid in the other version: a missing translation cannot pass as identity);
    ``value`` passes ``check_in`` when given; inputs are never changed."""
    if check_in is not None:
        check_in(value)
    before = copy.deepcopy(value)
    new = there(value)
    assert value == before  # inputs are never changed
    json.dumps(new)  # plain JSON
    check(new)
    again = back(new)
    assert again == (value if expected is None else expected)


@_PROPERTY
@given(messages03())
def test_messages_round_trip(message: dict[str, Any]) -> None:
    _round_trip(
        message,
        lambda m: message_to(m, "0.3", "1.0"),
        lambda m: message_to(m, "1.0", "0.3"),
        valid_v1(v1types.Message),
        check_in=valid_v03("Message"),
    )


@_PROPERTY
@given(tasks03())
def test_tasks_round_trip(task: dict[str, Any]) -> None:
    _round_trip(
        task,
        lambda t: result_to(Op.GET, t, "0.3", "1.0"),
        lambda t: result_to(Op.GET, t, "1.0", "0.3"),
        valid_v1(v1types.Task),
        check_in=valid_v03("Task"),
    )


@_PROPERTY
@given(tasks03() | messages03() | updates03())
def test_events_and_send_results_round_trip(event: dict[str, Any]) -> None:
    _round_trip(
        event,
        lambda e: event_to(e, "0.3", "1.0"),
        lambda e: event_to(e, "1.0", "0.3"),
        valid_v1(v1types.StreamResponse),
        check_in=valid_v03_event,
    )
    if event["kind"] in ("task", "message"):
        _round_trip(
            event,
            lambda e: result_to(Op.SEND, e, "0.3", "1.0"),
            lambda e: result_to(Op.SEND, e, "1.0", "0.3"),
            valid_v1(v1types.SendMessageResponse),
        )


_offsets = st.sampled_from(["", "+00:00", "-00:00", "+05:30", "-08:00", "+14:00"])


@_PROPERTY
@given(st.datetimes(timezones=st.none()), _offsets, st.sampled_from(["working", "completed"]))
def test_other_timestamps_become_utc_z(moment: Any, offset: str, state: str) -> None:
    """0.3 timestamps with any offset, or none: the same instant in 1.0's Z form, which a
    1.x SDK reads; back in 0.3, that Z form (lossy: the spelling, not the instant)."""
    stamp = moment.isoformat(timespec="microseconds") + offset
    given_update = {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "status": {"state": state, "timestamp": stamp},
        "final": state == "completed",
    }
    new = event_to(given_update, "0.3", "1.0")
    status = new["statusUpdate"]["status"]
    if "timestamp" not in status:  # beyond 1.0's range once in UTC: carried, as unreadable
        assert new["statusUpdate"]["metadata"][CARRY_KEY] == {"statusTimestamp": stamp}
        assert event_to(new, "1.0", "0.3") == given_update
        return
    valid_v1(v1types.StreamResponse)(new)
    assert status["timestamp"].endswith("Z")
    assert parse_timestamp(status["timestamp"]) == parse_timestamp(stamp if offset else stamp + "Z")
    back = event_to(new, "1.0", "0.3")
    assert back == {**given_update, "status": {"state": state, "timestamp": status["timestamp"]}}


_push_auth = st.fixed_dictionaries(
    {"schemes": st.lists(st.sampled_from(["Bearer", "Basic"]), min_size=1, max_size=1)},
    optional={"credentials": _text},
)


@st.composite
def send_params03_any(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send params with the defaults 1.0 cannot tell from "not set" too: (params, what the
    round trip gives back)."""
    params = draw(send_params03())
    expected = copy.deepcopy(params)
    config = params.get("configuration")
    if config is not None:
        if draw(st.booleans()):
            config["blocking"] = True  # the default: omitted in 1.0 (lossy)
            expected["configuration"].pop("blocking", None)
        if draw(st.booleans()):
            config["historyLength"] = 0  # 0.3 "no limit": omitted for 1.0 (lossy)
            expected["configuration"].pop("historyLength", None)
    return params, expected


@_PROPERTY
@given(send_params03_any())
def test_send_params_round_trip(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    params, expected = pair
    _round_trip(
        params,
        lambda p: params_to(Op.SEND, p, "0.3", "1.0"),
        lambda p: params_to(Op.SEND, p, "1.0", "0.3"),
        valid_v1(v1types.SendMessageRequest),
        expected,
        check_in=valid_v03("MessageSendParams"),
    )


@_PROPERTY
@given(
    st.fixed_dictionaries({"id": _ids}, optional={"historyLength": st.integers(0, 99)}),
    st.sampled_from([Op.GET, Op.CANCEL, Op.SUBSCRIBE]),
    st.none() | _metadata,
)
def test_task_params_round_trip(params: dict[str, Any], op: Op, metadata: Any) -> None:
    """get (TaskQueryParams), cancel and resubscribe (TaskIdParams). Lossy: historyLength 0
    (0.3 "no limit") and the metadata of get and resubscribe (1.0 has none there)."""
    params = dict(params)
    if op is not Op.GET:
        params.pop("historyLength", None)
    if metadata is not None:
        params["metadata"] = metadata
    expected = dict(params)
    if params.get("historyLength") == 0:
        del expected["historyLength"]
    if op is not Op.CANCEL:
        expected.pop("metadata", None)
    kinds = {
        Op.GET: (v1types.GetTaskRequest, "TaskQueryParams"),
        Op.CANCEL: (v1types.CancelTaskRequest, "TaskIdParams"),
        Op.SUBSCRIBE: (v1types.SubscribeToTaskRequest, "TaskIdParams"),
    }
    _round_trip(
        params,
        lambda p: params_to(op, p, "0.3", "1.0"),
        lambda p: params_to(op, p, "1.0", "0.3"),
        valid_v1(kinds[op][0]),
        expected,
        check_in=valid_v03(kinds[op][1]),
    )


@_PROPERTY
@given(
    st.fixed_dictionaries(
        {"url": st.just("https://client.example/hook")},
        optional={"id": _ids, "token": _text, "authentication": _push_auth},
    ),
    _ids,
    _ids,
)
def test_push_params_round_trip(config: dict[str, Any], task_id: str, config_id: str) -> None:
    cases = [
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": config},
            v1types.TaskPushNotificationConfig,
            "TaskPushNotificationConfig",
        ),
        (
            "tasks/pushNotificationConfig/get",
            {"id": task_id, "pushNotificationConfigId": config_id},
            v1types.GetTaskPushNotificationConfigRequest,
            "GetTaskPushNotificationConfigParams",
        ),
        (
            "tasks/pushNotificationConfig/delete",
            {"id": task_id, "pushNotificationConfigId": config_id},
            v1types.DeleteTaskPushNotificationConfigRequest,
            "DeleteTaskPushNotificationConfigParams",
        ),
        (
            "tasks/pushNotificationConfig/list",
            {"id": task_id},
            v1types.ListTaskPushNotificationConfigsRequest,
            "ListTaskPushNotificationConfigParams",
        ),
    ]
    for method, params, cls, definition in cases:
        _round_trip(
            params,
            lambda p, m=method: push_params_to(m, p, "0.3", "1.0"),
            lambda p, m=method: push_params_to(m, p, "1.0", "0.3"),
            valid_v1(cls),
            check_in=valid_v03(definition),
        )


@_PROPERTY
@given(errors03())
def test_errors_round_trip(error: dict[str, Any]) -> None:
    _round_trip(
        error,
        lambda e: error_to(e, "0.3", "1.0"),
        lambda e: error_to(e, "1.0", "0.3"),
        valid_v1_error,
        check_in=valid_v03("JSONRPCError"),
    )


# --- properties: 1.0 -> 0.3 -> 1.0 too, carrying what 0.3 cannot say ---------------------------


@st.composite
def parts1(draw: Any) -> dict[str, Any]:
    key = draw(st.sampled_from(["text", "raw", "url", "data"]))
    value = {"data": _json, "raw": _base64}.get(key, _text)
    part: dict[str, Any] = {key: draw(value)}
    _optional(draw, part, "mediaType", _media)
    _optional(draw, part, "filename", _text)
    _optional(draw, part, "metadata", _metadata)
    return part


@st.composite
def events1(draw: Any) -> dict[str, Any]:
    message = {
        "messageId": draw(_ids),
        "role": draw(st.sampled_from(["ROLE_USER", "ROLE_AGENT"])),
        "parts": draw(st.lists(parts1(), min_size=1, max_size=3)),
    }
    _optional(draw, message, "metadata", _metadata)
    state = draw(_states03.map(lambda s: state_to(s, "1.0")))
    status: dict[str, Any] = {"state": state}
    _optional(draw, status, "message", st.just(message))
    _optional(draw, status, "timestamp", _stamps)
    kind = draw(st.sampled_from(["task", "message", "statusUpdate", "artifactUpdate"]))
    ids = {"taskId": draw(_ids), "contextId": draw(_ids)}
    if kind == "message":
        return {"message": message}
    if kind == "statusUpdate":
        return {"statusUpdate": {**ids, "status": status}}
    if kind == "artifactUpdate":
        artifact = {"artifactId": draw(_ids), "parts": draw(st.lists(parts1(), max_size=3))}
        return {"artifactUpdate": {**ids, "artifact": artifact}}
    task = {"id": ids["taskId"], "contextId": ids["contextId"], "status": status}
    _optional(draw, task, "history", st.just([message]))
    return {"task": task}


@_PROPERTY
@given(events1())
def test_v1_events_round_trip(event: dict[str, Any]) -> None:
    _round_trip(
        event,
        lambda e: event_to(e, "1.0", "0.3"),
        lambda e: event_to(e, "0.3", "1.0"),
        valid_v03_event,
        check_in=valid_v1(v1types.StreamResponse),
    )


# --- the docs table ----------------------------------------------------------------------------


def doc_rows() -> list[tuple[str, ...]]:
    """The rows of the table in docs/translation.md (between its table markers)."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- table:start -->", 1)[1].split("<!-- table:end -->", 1)[0]
    lines = [line for line in table.strip().splitlines() if line.startswith("|")]
    assert lines[0].startswith("| Area |") and set(lines[1]) <= set("|-: ")
    return [tuple(cell.strip() for cell in line.strip()[1:-1].split(" | ")) for line in lines[2:]]


def test_the_docs_table_is_the_code_table() -> None:
    assert doc_rows() == list(TABLE)


_EXAMPLE_AREAS = ("part", "metadata", "object", "params", "result", "event", "error", "timestamp")


def _translated(example: Example, value: Any, src: str, dst: str) -> Any:
    """``value`` of ``example``'s kind, translated with the function the row is about."""
    kind, op = example.kind, example.op
    if kind == "part":
        return part_to(value, src, dst)  # type: ignore[arg-type]
    if kind == "message":
        return message_to(value, src, dst)  # type: ignore[arg-type]
    if kind == "task":
        return task_to(value, src, dst)  # type: ignore[arg-type]
    if kind == "params":
        assert op is not None
        return params_to(op, value, src, dst)  # type: ignore[arg-type]
    if kind == "result":
        assert op is not None
        return result_to(op, value, src, dst)  # type: ignore[arg-type]
    if kind == "event":
        return event_to(value, src, dst)  # type: ignore[arg-type]
    if kind == "error":
        return error_to(value, src, dst)  # type: ignore[arg-type]
    assert kind == "timestamp", kind
    return timestamp_to(value, dst)  # type: ignore[arg-type]


def test_every_row_of_the_translating_areas_has_an_example() -> None:
    rows = {(area, old) for area, old, _, _ in TABLE if area in _EXAMPLE_AREAS}
    assert rows == set(EXAMPLES)


@pytest.mark.parametrize("key", list(EXAMPLES), ids=lambda key: f"{key[0]}:{key[1][:40]}")
def test_the_table_examples_translate_both_ways(key: tuple[str, str]) -> None:
    example = EXAMPLES[key]
    note = next(note for area, old, _, note in TABLE if (area, old) == key)
    assert not example.lossy or "lossy" in note, "a lossy example belongs to a lossy row"
    assert _translated(example, example.v03, "0.3", "1.0") == example.v1
    back = example.back if example.lossy else example.v03
    assert _translated(example, example.v1, "1.0", "0.3") == back


def test_state_and_role_rows_are_the_wire_tables() -> None:
    states = [(old, new) for area, old, new, _ in TABLE if area == "state"]
    assert states == [
        (f"`{old}`", f"`{new}`") for old, new in zip(STATES["0.3"], STATES["1.0"], strict=True)
    ]
    for old, new in states:
        assert state_to(old.strip("`"), "1.0") == new.strip("`")
        assert state_to(new.strip("`"), "0.3") == old.strip("`")
    [(old_roles, new_roles)] = [(old, new) for area, old, new, _ in TABLE if area == "role"]
    for old, new in zip(ROLES["0.3"], ROLES["1.0"], strict=True):
        assert f"`{old}`" in old_roles and f"`{new}`" in new_roles
        assert role_to(old, "1.0") == new and role_to(new, "0.3") == old


def test_the_method_rows_are_the_method_tables() -> None:
    for area, old, new, _ in TABLE:
        if area == "method" and old.startswith("`"):
            assert equivalent_method(old.strip("`"), "1.0") == new.strip("`")
    named = {
        cell.strip("`") for area, old, new, _ in TABLE if area == "method" for cell in (old, new)
    }
    assert set(METHODS["0.3"]) | set(METHODS["1.0"]) <= named


def test_every_lossy_case_is_in_the_docs_list() -> None:
    text = DOC.read_text(encoding="utf-8")
    lossy = text.split("## Lossy cases", 1)[1]
    for area, old, new, note in TABLE:
        if "lossy" in note:
            named = re.findall(r"`[^`]+`", old + new)
            assert any(name in lossy for name in named), (area, old, new)
