"""Legacy dialects, unit by unit: v0.1 <-> 0.3 conversions (requests, answers, stream events,
cards), the A2A.-prefixed 1.0 names, the errors, and the client task ID aliases on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from registry.store import Store
from router.compat.aliases import TaskAliases
from router.compat.codec import LegacyCodec
from router.compat.prefixed import prefixed_result, prefixed_to_v1
from router.compat.v01 import (
    STATE_KEY,
    card_to_v01,
    state_to_v01,
    task_to_v01,
    v01_to_v03,
    v03_event_to_v01,
    v03_result_to_v01,
)
from router.protocol.errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RpcError,
    error_body,
)
from router.protocol.payloads import check_send_params, check_task_params
from router.protocol.versions import Op
from tests.support.helpers import said

NOW = "2026-01-02T03:04:05+00:00"

# A tasks/send exactly as seed 004 shows it, plus fields the router does not know.
SEND_V01: dict[str, Any] = {
    "id": "client-task-1",
    "sessionId": "session-1",
    "acceptedOutputModes": ["text/plain"],
    "historyLength": 3,
    "metadata": {"trace": "abc"},
    "futureField": {"x": 1},
    "message": {
        "role": "user",
        "metadata": {"lang": "en"},
        "parts": [
            {"type": "text", "text": "hello", "metadata": {"m": 1}},
            {"type": "data", "data": {"n": 2}},
            {"type": "file", "file": {"name": "a.png", "mimeType": "image/png", "bytes": "AAAA"}},
            {"type": "file", "file": {"uri": "https://x.example/f.pdf"}},
        ],
    },
}


def _error(call: Any) -> RpcError:
    with pytest.raises(RpcError) as caught:
        call()
    return caught.value


# --- v0.1 requests -> 0.3 ---------------------------------------------------------------------


def test_tasks_send_becomes_message_send() -> None:
    call = v01_to_v03("tasks/send", SEND_V01)
    assert (call.op, call.method, call.client_task_id) == (Op.SEND, "message/send", "client-task-1")
    params = call.params
    message = params["message"]
    assert message["kind"] == "message" and message["role"] == "user"
    assert message["contextId"] == "session-1"
    assert isinstance(message["messageId"], str) and message["messageId"]
    assert "taskId" not in message  # resolved later, from the client's id (router.compat.codec)
    assert message["metadata"] == {"lang": "en"}
    assert message["parts"] == [
        {"kind": "text", "text": "hello", "metadata": {"m": 1}},
        {"kind": "data", "data": {"n": 2}},
        {"kind": "file", "file": {"name": "a.png", "mimeType": "image/png", "bytes": "AAAA"}},
        {"kind": "file", "file": {"uri": "https://x.example/f.pdf"}},
    ]
    assert params["configuration"] == {"acceptedOutputModes": ["text/plain"], "historyLength": 3}
    assert params["metadata"] == {"trace": "abc"}
    assert params["futureField"] == {"x": 1}  # unknown: passed through untouched
    for key in ("id", "sessionId", "acceptedOutputModes", "historyLength"):
        assert key not in params
    check_send_params("0.3", params)  # what the router then checks: valid 0.3
    assert SEND_V01["message"]["parts"][0]["type"] == "text"  # the input is not changed


def test_send_subscribe_and_task_calls() -> None:
    call = v01_to_v03("tasks/sendSubscribe", SEND_V01)
    assert (call.op, call.method) == (Op.STREAM, "message/stream")
    got = v01_to_v03("tasks/get", {"id": "t", "sessionId": "s", "historyLength": 2})
    assert (got.op, got.method, got.params) == (
        Op.GET,
        "tasks/get",
        {"id": "t", "historyLength": 2},
    )
    cancel = v01_to_v03("tasks/cancel", {"id": "t", "sessionId": "s", "metadata": {}})
    assert (cancel.op, cancel.params) == (Op.CANCEL, {"id": "t", "metadata": {}})
    check_task_params("0.3", Op.CANCEL, cancel.params)
    again = v01_to_v03("tasks/resubscribe", {"id": "t"})
    assert (again.op, again.method) == (Op.SUBSCRIBE, "tasks/resubscribe")
    card = v01_to_v03("agent/getCard", {})
    assert (card.op, card.client_task_id) == (Op.CARD, None)


def test_a_message_id_and_a_kind_tagged_part_are_kept() -> None:
    params = {
        "id": "t",
        "message": {"role": "user", "messageId": "m-9", "parts": [{"kind": "text", "text": "x"}]},
    }
    message = v01_to_v03("tasks/send", params).params["message"]
    assert message["messageId"] == "m-9"
    assert message["parts"] == [{"kind": "text", "text": "x"}]
    assert "contextId" not in message  # no sessionId: the agent starts a context


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"message": {"role": "user", "parts": [{"type": "text", "text": "x"}]}}, ["id"]),
        ({"id": 7, "message": {"role": "user", "parts": [{"type": "text", "text": "x"}]}}, ["id"]),
        ({"id": "t"}, ["message"]),
        ({"id": "t", "message": {"role": "robot", "parts": []}}, ["message.role", "message.parts"]),
        (
            {"id": "t", "message": {"role": "user", "parts": [{"text": "x"}]}},
            ["message.parts[0].type"],
        ),
        (
            {"id": "t", "message": {"role": "user", "parts": [{"type": "text", "text": 1}]}},
            ["message.parts[0].text"],
        ),
        (
            {"id": "t", "message": {"role": "user", "parts": [{"type": "data", "data": []}]}},
            ["message.parts[0].data"],
        ),
        (
            {
                "id": "t",
                "message": {
                    "role": "user",
                    "parts": [{"type": "file", "file": {"bytes": "AA", "uri": "https://x"}}],
                },
            },
            ["message.parts[0].file"],
        ),
        (
            {"id": "t", "message": {"role": "user", "parts": ["text"]}},
            ["message.parts[0]"],
        ),
        (
            {
                "id": "t",
                "sessionId": "",
                "acceptedOutputModes": "text/plain",
                "historyLength": -1,
                "metadata": [],
                "message": {"role": "user", "parts": [{"type": "text", "text": "x"}]},
            },
            ["metadata", "sessionId", "acceptedOutputModes", "historyLength"],
        ),
    ],
)
def test_bad_v01_send_params_name_each_field(params: dict[str, Any], fields: list[str]) -> None:
    error = _error(lambda: v01_to_v03("tasks/send", params))
    assert error.code == INVALID_PARAMS
    assert error.data == {"fields": fields}
    body = error_body("0.3", 1, error)["error"]
    assert [v["field"] for v in body["data"]["fieldViolations"]] == fields
    assert body["message"] == "Invalid parameters"  # the spec's; the router's in data.detail
    assert said(body).startswith("Invalid params: " + fields[0])


def test_bad_v01_task_params() -> None:
    error = _error(lambda: v01_to_v03("tasks/get", {"historyLength": "x"}))
    assert error.data == {"fields": ["id", "historyLength"]}
    error = _error(lambda: v01_to_v03("tasks/cancel", {"id": "x" * 513}))
    assert error.data == {"fields": ["id"]}


def test_push_notification_methods_are_the_0_3_config_named_by_the_clients_task_id() -> None:
    config = {"url": "https://client.example/hook", "token": "t"}
    set_ = v01_to_v03("tasks/pushNotification/set", {"id": "c1", "pushNotificationConfig": config})
    assert (set_.op, set_.method, set_.client_task_id) == (
        Op.PUSH_CONFIG, "tasks/pushNotificationConfig/set", "c1",
    )  # fmt: skip
    assert set_.params == {"taskId": "c1", "pushNotificationConfig": {**config, "id": "c1"}}
    get = v01_to_v03("tasks/pushNotification/get", {"id": "c1"})
    assert get.method == "tasks/pushNotificationConfig/get"
    assert get.params == {"id": "c1", "pushNotificationConfigId": "c1"}
    with_push = {**SEND_V01, "pushNotification": config}
    sent = v01_to_v03("tasks/send", with_push)
    assert sent.params["configuration"]["pushNotificationConfig"] == {
        **config, "id": "client-task-1",
    }  # fmt: skip
    error = _error(lambda: v01_to_v03("tasks/send", {**SEND_V01, "pushNotification": "x"}))
    assert error.data == {"fields": ["pushNotification"]}
    answer = {"taskId": "router-task", "pushNotificationConfig": {**config, "id": "c1"}}
    assert v03_result_to_v01(answer, "c1", None, "now") == {
        "id": "c1", "pushNotificationConfig": config,
    }  # fmt: skip


# --- 0.3 answers -> v0.1 ----------------------------------------------------------------------

TASK_03: dict[str, Any] = {
    "kind": "task",
    "id": "router-task",
    "contextId": "session-1",
    "status": {
        "state": "completed",
        "timestamp": NOW,
        "message": {
            "kind": "message",
            "messageId": "m-2",
            "role": "agent",
            "taskId": "router-task",
            "contextId": "session-1",
            "parts": [{"kind": "text", "text": "done"}],
        },
    },
    "artifacts": [
        {"artifactId": "a-1", "name": "echo", "parts": [{"kind": "text", "text": "echo: hi"}]},
        {"artifactId": "a-2", "parts": [{"kind": "data", "data": {"n": 1}}]},
    ],
    "history": [
        {
            "kind": "message",
            "messageId": "m-1",
            "role": "user",
            "referenceTaskIds": ["other"],
            "parts": [{"kind": "text", "text": "hi"}],
        }
    ],
    "metadata": {"k": "v"},
}


def test_a_task_in_v01() -> None:
    task = task_to_v01(TASK_03, "client-task-1")
    assert task == {
        "id": "client-task-1",
        "sessionId": "session-1",
        "status": {
            "state": "completed",
            "timestamp": NOW,
            "message": {
                "messageId": "m-2",
                "role": "agent",
                "parts": [{"type": "text", "text": "done"}],
            },
        },
        "artifacts": [
            {
                "artifactId": "a-1",
                "name": "echo",
                "parts": [{"type": "text", "text": "echo: hi"}],
                "index": 0,
            },
            {"artifactId": "a-2", "parts": [{"type": "data", "data": {"n": 1}}], "index": 1},
        ],
        "history": [
            {"messageId": "m-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
        ],
        "metadata": {"k": "v"},
    }
    assert v03_result_to_v01(TASK_03, "c", None, NOW)["id"] == "c"


@pytest.mark.parametrize(
    ("state", "v01", "lossy"),
    [
        ("submitted", "submitted", False),
        ("working", "working", False),
        ("input-required", "input-required", False),
        ("auth-required", "input-required", True),
        ("rejected", "failed", True),
        ("canceled", "canceled", False),
        ("unknown", "unknown", False),
        ("someday", "someday", False),
    ],
)
def test_states(state: str, v01: str, lossy: bool) -> None:
    assert state_to_v01(state) == (v01, lossy)
    task = task_to_v01({"id": "r", "status": {"state": state}}, "c")
    assert task["status"]["state"] == v01
    assert task.get("metadata", {}).get(STATE_KEY) == (state if lossy else None)


def test_a_message_result_is_a_completed_task() -> None:
    message = {
        "kind": "message",
        "messageId": "m-3",
        "role": "agent",
        "contextId": "ctx",
        "parts": [{"kind": "text", "text": "echo: hi"}],
    }
    assert v03_result_to_v01(message, "client-task-1", "s", NOW) == {
        "id": "client-task-1",
        "sessionId": "ctx",
        "status": {
            "state": "completed",
            "timestamp": NOW,
            "message": {
                "messageId": "m-3",
                "role": "agent",
                "parts": [{"type": "text", "text": "echo: hi"}],
            },
        },
    }
    del message["contextId"]
    assert v03_result_to_v01(message, "c", "s", NOW)["sessionId"] == "s"
    assert v03_result_to_v01("odd", "c", None, NOW) == "odd"


def test_stream_events_in_v01() -> None:
    indexes: dict[str, int] = {}

    def convert(event: dict[str, Any]) -> list[Any]:
        return v03_event_to_v01(event, "c", "s", indexes, NOW)

    snapshot = {"kind": "task", "id": "r", "contextId": "s", "status": {"state": "submitted"}}
    assert convert(snapshot) == [
        {"id": "c", "status": {"state": "submitted"}, "final": False},
    ]
    working = {
        "kind": "status-update",
        "taskId": "r",
        "contextId": "s",
        "status": {"state": "working"},
        "final": False,
    }
    assert convert(working) == [{"id": "c", "status": {"state": "working"}, "final": False}]
    chunk = {
        "kind": "artifact-update",
        "taskId": "r",
        "contextId": "s",
        "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "echo:"}]},
    }
    more = {**chunk, "append": True, "lastChunk": True}
    other = {**chunk, "artifact": {"artifactId": "b", "parts": []}}
    assert convert(chunk) == [
        {
            "id": "c",
            "artifact": {
                "artifactId": "a",
                "parts": [{"type": "text", "text": "echo:"}],
                "index": 0,
                "append": False,
            },
        }
    ]
    assert convert(more)[0]["artifact"] | {"parts": []} == {
        "artifactId": "a",
        "parts": [],
        "index": 0,
        "append": True,
        "lastChunk": True,
    }
    assert convert(other)[0]["artifact"]["index"] == 1
    done = {**working, "status": {"state": "rejected"}, "final": True}
    assert convert(done) == [
        {
            "id": "c",
            "status": {"state": "failed"},
            "final": True,
            "metadata": {STATE_KEY: "rejected"},
        }
    ]


def test_a_finished_task_snapshot_and_a_message_end_the_v01_stream() -> None:
    indexes: dict[str, int] = {}
    events = v03_event_to_v01(TASK_03, "c", None, indexes, NOW)
    assert [sorted(e) for e in events] == [
        ["artifact", "id"],
        ["artifact", "id"],
        ["final", "id", "metadata", "status"],
    ]
    assert [e["artifact"]["index"] for e in events[:2]] == [0, 1]
    assert events[-1]["final"] is True and events[-1]["status"]["state"] == "completed"
    message = {"kind": "message", "messageId": "m", "role": "agent", "parts": []}
    [event] = v03_event_to_v01(message, "c", "s", indexes, NOW)
    assert event == {
        "id": "c",
        "status": {
            "state": "completed",
            "message": {"messageId": "m", "role": "agent", "parts": []},
            "timestamp": NOW,
        },
        "final": True,
    }
    assert v03_event_to_v01({"kind": "new"}, "c", None, indexes, NOW) == [{"kind": "new"}]


# --- cards ------------------------------------------------------------------------------------


def test_card_in_v01() -> None:
    card = {
        "name": "Switchboard",
        "description": "Routes",
        "url": "https://sb.example/",
        "version": "0.1.0",
        "provider": {"organization": "Org", "url": "https://org.example"},
        "supportedInterfaces": [{"url": "https://sb.example/", "protocolBinding": "JSONRPC"}],
        "capabilities": {"streaming": True, "pushNotifications": True, "extensions": [{}]},
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "key": {"apiKeySecurityScheme": {"name": "X-Key", "location": "header"}},
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "s", "name": "S", "tags": ["t"], "examples": [], "securityScheme": 1}],
        "signatures": [{"protected": "x", "signature": "y"}],
    }
    assert card_to_v01(card) == {
        "name": "Switchboard",
        "description": "Routes",
        "url": "https://sb.example/",
        "provider": {"organization": "Org", "url": "https://org.example"},
        "version": "0.1.0",
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,  # relayed, or synthesized
            "stateTransitionHistory": False,
        },
        "authentication": {"schemes": ["bearer", "apiKey"]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [{"id": "s", "name": "S", "tags": ["t"], "examples": []}],
    }
    only_v1 = {"name": "A", "supportedInterfaces": [{"url": "https://sb.example/agents/a"}]}
    converted = card_to_v01(only_v1)
    assert converted["url"] == "https://sb.example/agents/a"
    assert converted["capabilities"]["streaming"] is False and "authentication" not in converted


# --- A2A.-prefixed 1.0 names ------------------------------------------------------------------


def test_prefixed_names_are_the_10_methods() -> None:
    assert prefixed_to_v1("A2A.CancelTask", {"id": "t"}) == ("CancelTask", {"id": "t"})
    assert prefixed_to_v1("A2A.GetTask", {"taskId": "t", "historyLength": 1}) == (
        "GetTask",
        {"id": "t", "historyLength": 1},
    )
    both = {"id": "a", "taskId": "b"}  # ambiguous: left for the 1.0 checks
    assert prefixed_to_v1("A2A.SubscribeToTask", both)[1] == both
    name, _ = prefixed_to_v1("A2A.ListTaskPushNotificationConfig", {})
    assert name == "ListTaskPushNotificationConfigs"
    assert prefixed_to_v1("A2A.ListTasks", {"status": "WORKING"})[1] == {
        "status": "TASK_STATE_WORKING"
    }
    assert prefixed_to_v1("A2A.GetExtendedAgentCard", {})[0] == "GetExtendedAgentCard"
    error = _error(lambda: prefixed_to_v1("A2A.message/send", {}))
    assert error.code == METHOD_NOT_FOUND
    assert "A2A.SendMessage" in error.data["supportedMethods"]


def test_prefixed_send_normalizes_the_drafts_spellings() -> None:
    params = {
        "message": {
            "messageId": "m",
            "role": "user",
            "parts": [
                {"text": "hi", "mimeType": "text/plain"},
                {"structuredData": {"a": 1}},
                {
                    "file": {"uri": "https://x/f.pdf", "name": "f.pdf"},
                    "mimeType": "application/pdf",
                },
                {"file": {"bytes": "AAAA", "mimeType": "image/png"}},
            ],
        },
        "configuration": {"blocking": False, "acceptedOutputModes": ["text/plain"]},
    }
    name, out = prefixed_to_v1("A2A.SendStreamingMessage", params)
    assert name == "SendStreamingMessage"
    assert out == {
        "message": {
            "messageId": "m",
            "role": "ROLE_USER",
            "parts": [
                {"text": "hi", "mediaType": "text/plain"},
                {"data": {"a": 1}},
                {"url": "https://x/f.pdf", "filename": "f.pdf", "mediaType": "application/pdf"},
                {"raw": "AAAA", "mediaType": "image/png"},
            ],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "returnImmediately": True},
    }
    check_send_params("1.0", out)
    assert params["message"]["role"] == "user"  # the input is not changed
    unset = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    assert prefixed_to_v1("A2A.SendMessage", unset)[1] == unset  # no default imposed


# --- client task ID aliases -------------------------------------------------------------------


async def test_aliases_persist_and_the_first_binding_wins(store: Store) -> None:
    aliases = TaskAliases(store)
    assert await aliases.alias("client-1") is None
    assert await aliases.alias("") is None and await aliases.alias("x" * 600) is None
    assert await aliases.bind_alias("client-1", "router-a") == "router-a"
    assert await aliases.bind_alias("client-1", "router-b") == "router-a"
    restarted = TaskAliases(store)  # another replica, or after a restart
    assert await restarted.alias("client-1") == "router-a"
    assert await aliases.alias("client-9") is None  # a miss, remembered briefly...
    assert await aliases.bind_alias("client-9", "router-c") == "router-c"  # ...not past a binding
    assert await aliases.alias("client-9") == "router-c"
    racing = await asyncio.gather(
        *(TaskAliases(store).bind_alias("client-2", f"router-{n}") for n in range(5))
    )
    assert len(set(racing)) == 1
    with pytest.raises(ValueError):
        await aliases.bind_alias("", "router-a")


async def test_codec_binds_the_clients_id_before_answering(store: Store) -> None:
    aliases = TaskAliases(store)
    codec = LegacyCodec(aliases, "client-1", None, "s")
    body = codec.answer({"jsonrpc": "2.0", "id": 1, "result": TASK_03})
    assert body["result"]["id"] == "client-1" and body["id"] == 1
    assert await aliases.alias("client-1") is None  # not yet: flush() comes before the client
    await codec.flush()
    assert await aliases.alias("client-1") == "router-task"
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "x"}}
    assert codec.answer(error) == error
    # the router's task ID never reaches the v0.1 client, in errors either
    refused = {
        "code": -32002,
        "message": "Task router-task cannot be canceled",
        "data": {"taskId": "router-task", "tasks": [{"id": "router-task"}]},
    }
    mapped = codec.answer({"jsonrpc": "2.0", "id": 1, "error": refused})["error"]
    assert mapped == {
        "code": -32002,
        "message": "Task client-1 cannot be canceled",
        "data": {"taskId": "client-1", "tasks": [{"id": "client-1"}]},
    }
    [event] = await codec.events({"jsonrpc": "2.0", "id": 1, "error": refused})
    assert event["error"] == mapped

    streamed = LegacyCodec(aliases, "client-2", None, None)
    update = {
        "kind": "status-update",
        "taskId": "router-task-2",
        "status": {"state": "working"},
        "final": False,
    }
    [event] = await streamed.events({"jsonrpc": "2.0", "id": 2, "result": update})
    assert event["result"] == {"id": "client-2", "status": {"state": "working"}, "final": False}
    assert await aliases.alias("client-2") == "router-task-2"  # bound before it is written
    message = LegacyCodec(aliases, "client-3", None, None)
    await message.events({"jsonrpc": "2.0", "id": 3, "result": {"kind": "message", "parts": []}})
    assert await aliases.alias("client-3") is None  # no task: nothing to bind


def test_prefixed_answers_take_the_drafts_shapes() -> None:
    task = {
        "id": "t",
        "contextId": "c",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [{"text": "Which?"}]},
            "timestamp": "2026-01-02T03:04:05Z",
        },
        "history": [
            {
                "messageId": "m",
                "role": "ROLE_USER",
                "parts": [
                    {"data": {"n": 1}, "mediaType": "application/json"},
                    {"url": "https://x/p.png", "filename": "p.png", "mediaType": "image/png"},
                    {"raw": "AAAA"},
                ],
            }
        ],
        "artifacts": [{"artifactId": "a", "parts": [{"text": "x", "filename": "x.txt"}]}],
    }
    draft = {
        "taskId": "t",
        "contextId": "c",
        "status": {
            "state": "INPUT_REQUIRED",
            "message": "Which?",
            "timestamp": task["status"]["timestamp"],
        },
        "history": [
            {
                "messageId": "m",
                "role": "user",
                "parts": [
                    {"structuredData": {"n": 1}, "mimeType": "application/json"},
                    {"file": {"uri": "https://x/p.png", "name": "p.png"}, "mimeType": "image/png"},
                    {"file": {"bytes": "AAAA"}},
                ],
            }
        ],
        "artifacts": [{"artifactId": "a", "parts": [{"text": "x", "filename": "x.txt"}]}],
    }
    assert prefixed_result(Op.SEND, {"task": task}) == draft
    assert prefixed_result(Op.GET, task) == draft
    assert prefixed_result(Op.LIST, {"tasks": [task], "nextPageToken": ""}) == {
        "tasks": [draft],
        "nextPageToken": "",
    }
    message = {"messageId": "r", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    assert prefixed_result(Op.SEND, {"message": message})["role"] == "agent"
    update = {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}
    assert prefixed_result(Op.STREAM, update) == {
        "statusUpdate": {"taskId": "t", "status": {"state": "WORKING"}}
    }
    # prefixed_to_v1 reads what prefixed_result writes: the parts round trip
    back = prefixed_to_v1("A2A.SendMessage", {"message": draft["history"][0]})[1]
    assert back["message"]["parts"] == task["history"][0]["parts"]
