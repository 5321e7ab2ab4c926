"""The translation table of A2A 0.3 <-> 1.0 (:mod:`router.compat.translate`) as test data.

:data:`TABLE` holds the rows of ``docs/translation.md``
(``tests/router/compat/test_translate.py`` compares them: change both together);
:data:`EXAMPLES` a machine-readable example of each part, params, object, result, event, error
and timestamp row, which the tests translate both ways.
The method, state and role rows are made from the router's own tables
(:mod:`router.protocol.versions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router.compat.carry import CARRY_KEY
from router.compat.translate import DATA_COMPAT_KEY
from router.protocol.errors import BAD_REQUEST_TYPE, STRUCT_TYPE, VALUE_TYPE
from router.protocol.versions import ROLE_NUMBERS, ROLES, STATES, Op

__all__ = ["EXAMPLES", "TABLE", "Example", "Row"]

Row = tuple[str, str, str, str]
"""One line of the translation table: (area, A2A 0.3, A2A 1.0, note)."""

# The translation table. ``docs/translation.md`` holds the same rows
# (tests/router/compat/test_translate.py compares them): change both together. A note starting
# "lossy" is a lossy case.
TABLE: tuple[Row, ...] = (
    ("method", "`message/send`", "`SendMessage`", ""),
    ("method", "`message/stream`", "`SendStreamingMessage`", ""),
    ("method", "`tasks/get`", "`GetTask`", ""),
    ("method", "`tasks/cancel`", "`CancelTask`", ""),
    ("method", "`tasks/resubscribe`", "`SubscribeToTask`", ""),
    (
        "method",
        "none",
        "`ListTasks`",
        "served by Switchboard itself from its task map; it asks each owner with "
        "`tasks/get`/`GetTask`",
    ),
    ("method", "`tasks/pushNotificationConfig/set`", "`CreateTaskPushNotificationConfig`", ""),
    ("method", "`tasks/pushNotificationConfig/get`", "`GetTaskPushNotificationConfig`", ""),
    ("method", "`tasks/pushNotificationConfig/list`", "`ListTaskPushNotificationConfigs`", ""),
    ("method", "`tasks/pushNotificationConfig/delete`", "`DeleteTaskPushNotificationConfig`", ""),
    (
        "push",
        "set params, set/get result: `{taskId, pushNotificationConfig}`",
        "`{taskId, id, url, token, authentication, tenant}` (flat)",
        "Switchboard serves them ([push.md](push.md)); `push_params_to`, "
        "`push_result_to` translate them. `tenant` of a set: lossy",
    ),
    (
        "push",
        "get, delete params: `{id, pushNotificationConfigId, metadata}`",
        "`{taskId, id, tenant}`",
        "0.3 `metadata`: lossy; `tenant` carried in it",
    ),
    (
        "push",
        "list params: `{id, metadata}`",
        "`{taskId, pageSize, pageToken, tenant}`",
        "`pageSize`, `pageToken`: lossy (0.3 lists all)",
    ),
    (
        "push",
        "list result: `[TaskPushNotificationConfig, ...]`",
        "`{configs: [...], nextPageToken}`",
        "",
    ),
    ("push", "delete result: `null`", "delete result: `{}`", ""),
    (
        "params",
        "`configuration.blocking: false`",
        "`configuration.returnImmediately: true`",
        "negated; `blocking: true` is `returnImmediately` omitted",
    ),
    (
        "params",
        "`configuration.historyLength: n` (n > 0)",
        "`configuration.historyLength: n`",
        "also `historyLength` of `tasks/get`/`GetTask`",
    ),
    (
        "params",
        "`historyLength: 0` (0.3: no limit)",
        "`historyLength` omitted",
        'lossy: 0.3 `0` becomes "not set"; a 1.0 `historyLength: 0` (no history) is '
        "omitted for a 0.3 agent and Switchboard leaves `history` out of the Task it returns",
    ),
    (
        "params",
        "`configuration.pushNotificationConfig` `{id, url, token, authentication: {schemes, "
        "credentials}}`",
        "`configuration.taskPushNotificationConfig` `{id, url, token, authentication: "
        "{scheme, credentials}}`",
        "first scheme only, lossy beyond it ([push.md](push.md))",
    ),
    (
        "params",
        "`params.metadata[CARRY].tenant`",
        "`tenant`",
        "carried on `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`, "
        "`tasks/resubscribe`; a 1.0 agent's interface tenant is set when the client names none",
    ),
    (
        "params",
        "`metadata` of `tasks/get`, `tasks/resubscribe`",
        "none",
        "lossy: `GetTask` and `SubscribeToTask` have no metadata",
    ),
    ("part", '`{"kind": "text", "text"}`', '`{"text"}`', ""),
    (
        "part",
        '`{"kind": "file", "file": {"bytes", "mimeType", "name"}}`',
        '`{"raw", "mediaType", "filename"}`',
        "base64 text passed as is",
    ),
    (
        "part",
        '`{"kind": "file", "file": {"uri", "mimeType", "name"}}`',
        '`{"url", "mediaType", "filename"}`',
        "",
    ),
    ("part", '`{"kind": "data", "data": {...}}`', '`{"data": {...}}`', ""),
    (
        "part",
        '`{"kind": "data", "data": {"value": v}, "metadata": {"data_part_compat": true}}`',
        '`{"data": v}` (v not an object)',
        "the a2a-sdk's own convention",
    ),
    (
        "part",
        "`metadata[CARRY]` `{mediaType, filename}`",
        "`mediaType`, `filename` of a text or data part",
        "",
    ),
    (
        "part",
        "`metadata[CARRY].dataMembers`",
        '`data` members beside `"value"` of a compat data part',
        "",
    ),
    (
        "metadata",
        "`metadata: {}` and a carried value",
        "`metadata: {}`",
        "`metadata[CARRY].metadata: {}` says the metadata was there, empty",
    ),
    (
        "role",
        ", ".join(f"`{role}`" for role in ROLES["0.3"]),
        ", ".join(f"`{role}`" for role in ROLES["1.0"])
        + f" (or {', '.join(str(number) for number in ROLE_NUMBERS)})",
        "",
    ),
    *(
        ("state", f"`{old}`", f"`{new}`", "")
        for old, new in zip(STATES["0.3"], STATES["1.0"], strict=True)
    ),
    ("object", '`{"kind": "message", ...}`', "Message without `kind`", ""),
    ("object", '`{"kind": "task", ...}`', "Task without `kind`", ""),
    ("result", 'send: `{"kind": "task", ...}`', 'send: `{"task": {...}}`', ""),
    ("result", 'send: `{"kind": "message", ...}`', 'send: `{"message": {...}}`', ""),
    ("result", "get, cancel: Task with `kind`", "get, cancel: Task", ""),
    ("event", '`{"kind": "task", ...}`', '`{"task": {...}}`', ""),
    ("event", '`{"kind": "message", ...}`', '`{"message": {...}}`', ""),
    (
        "event",
        '`{"kind": "status-update", "final", ...}`',
        '`{"statusUpdate": {...}}`',
        "`final` is true on a terminal or interrupted state; a `final: true` on another "
        "state goes to `metadata[CARRY].final`; lossy: `final: false` on a terminal or "
        "interrupted state",
    ),
    (
        "event",
        '`{"kind": "artifact-update", ...}`',
        '`{"artifactUpdate": {...}}`',
        "`append`, `lastChunk` as they are",
    ),
    (
        "error",
        "`data`: an object",
        "`data`: `[ErrorInfo, Struct, BadRequest]`",
        "ErrorInfo metadata holds the object's members as strings, Struct the object itself; "
        "ErrorInfo `domain` `a2a-protocol.org` (standard codes) or `switchboard.a2a`",
    ),
    (
        "error",
        "`data`: not an object (an array, a string, a number)",
        "`data`: `[ErrorInfo, Value]`",
        "",
    ),
    (
        "error",
        "`data.fieldViolations`",
        "`google.rpc.BadRequest` `fieldViolations`",
        "",
    ),
    (
        "error",
        "`data[CARRY]` `{reason, domain, details}`",
        "ErrorInfo `reason`, `domain`; other details",
        "",
    ),
    (
        "timestamp",
        "ISO 8601, any offset or none (UTC)",
        "RFC 3339 in UTC with `Z`",
        "lossy: the offset (same instant); beyond microseconds when converted",
    ),
    (
        "timestamp",
        "`status.timestamp` no 1.x SDK reads",
        "`metadata[CARRY].statusTimestamp` of the task or update",
        "",
    ),
    (
        "header",
        "`X-A2A-Extensions`",
        "`A2A-Extensions`",
        "merged, deduplicated, renamed for the agent; the agent's answer's header comes back "
        "under the client's name",
    ),
)


@dataclass(frozen=True)
class Example:
    """A machine-readable example of a :data:`TABLE` row: ``v03`` and ``v1`` translate into
    each other with the function of ``kind`` (``part``, ``message``, ``task``, ``params``,
    ``result``, ``event``, ``error``, ``timestamp``; ``op`` for params and results). A lossy
    row sets ``back``: what ``v1`` gives in 0.3 (``v03`` itself otherwise). The tests run
    every example both ways."""

    kind: str
    v03: Any
    v1: Any
    op: Op | None = None
    back: Any = None
    lossy: bool = False


_M03 = {
    "kind": "message",
    "messageId": "m",
    "role": "user",
    "parts": [{"kind": "text", "text": "hi"}],
}
_M1 = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
_T03 = {"kind": "task", "id": "t", "contextId": "c", "status": {"state": "completed"}}
_T1 = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
_ENDED03 = {"kind": "status-update", "taskId": "t", "contextId": "c", "final": True}
_ENDED1 = {"taskId": "t", "contextId": "c"}
_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

# Examples of the rows of the areas part, metadata, object, params, result, event, error and
# timestamp, keyed by (area, A2A 0.3 cell) of their row (tests/router/compat/test_translate.py
# runs them).
EXAMPLES: dict[tuple[str, str], Example] = {
    ("params", "`configuration.blocking: false`"): Example(
        "params",
        {"message": _M03, "configuration": {"blocking": False}},
        {"message": _M1, "configuration": {"returnImmediately": True}},
        Op.SEND,
    ),
    ("params", "`configuration.historyLength: n` (n > 0)"): Example(
        "params", {"id": "t", "historyLength": 3}, {"id": "t", "historyLength": 3}, Op.GET
    ),
    ("params", "`historyLength: 0` (0.3: no limit)"): Example(
        "params", {"id": "t", "historyLength": 0}, {"id": "t"}, Op.GET, {"id": "t"}, True
    ),
    (
        "params",
        "`configuration.pushNotificationConfig` `{id, url, token, authentication: {schemes, "
        "credentials}}`",
    ): Example(
        "params",
        {
            "message": _M03,
            "configuration": {
                "pushNotificationConfig": {
                    "url": "https://h",
                    "authentication": {"schemes": ["Bearer"]},
                }
            },
        },
        {
            "message": _M1,
            "configuration": {
                "taskPushNotificationConfig": {
                    "url": "https://h",
                    "authentication": {"scheme": "Bearer"},
                }
            },
        },
        Op.SEND,
    ),
    ("params", "`params.metadata[CARRY].tenant`"): Example(
        "params",
        {"id": "t", "metadata": {CARRY_KEY: {"tenant": "acme"}}},
        {"id": "t", "tenant": "acme"},
        Op.SUBSCRIBE,
    ),
    ("params", "`metadata` of `tasks/get`, `tasks/resubscribe`"): Example(
        "params", {"id": "t", "metadata": {"x": 1}}, {"id": "t"}, Op.GET, {"id": "t"}, True
    ),
    ("part", '`{"kind": "text", "text"}`'): Example(
        "part", {"kind": "text", "text": "hi"}, {"text": "hi"}
    ),
    ("part", '`{"kind": "file", "file": {"bytes", "mimeType", "name"}}`'): Example(
        "part",
        {"kind": "file", "file": {"bytes": "AAAA", "mimeType": "image/png", "name": "p.png"}},
        {"raw": "AAAA", "mediaType": "image/png", "filename": "p.png"},
    ),
    ("part", '`{"kind": "file", "file": {"uri", "mimeType", "name"}}`'): Example(
        "part",
        {"kind": "file", "file": {"uri": "https://h/p.png", "mimeType": "image/png"}},
        {"url": "https://h/p.png", "mediaType": "image/png"},
    ),
    ("part", '`{"kind": "data", "data": {...}}`'): Example(
        "part", {"kind": "data", "data": {"n": 1}}, {"data": {"n": 1}}
    ),
    (
        "part",
        '`{"kind": "data", "data": {"value": v}, "metadata": {"data_part_compat": true}}`',
    ): Example(
        "part",
        {"kind": "data", "data": {"value": [1, 2]}, "metadata": {DATA_COMPAT_KEY: True}},
        {"data": [1, 2]},
    ),
    ("part", "`metadata[CARRY]` `{mediaType, filename}`"): Example(
        "part",
        {"kind": "text", "text": "# hi", "metadata": {CARRY_KEY: {"mediaType": "text/markdown"}}},
        {"text": "# hi", "mediaType": "text/markdown"},
    ),
    ("part", "`metadata[CARRY].dataMembers`"): Example(
        "part",
        {
            "kind": "data",
            "data": {"value": "v", "note": "n"},
            "metadata": {DATA_COMPAT_KEY: True},
        },
        {"data": "v", "metadata": {CARRY_KEY: {"dataMembers": {"note": "n"}}}},
    ),
    ("metadata", "`metadata: {}` and a carried value"): Example(
        "part",
        {
            "kind": "text",
            "text": "x",
            "metadata": {CARRY_KEY: {"metadata": {}, "filename": "x.md"}},
        },
        {"text": "x", "filename": "x.md", "metadata": {}},
    ),
    ("object", '`{"kind": "message", ...}`'): Example("message", _M03, _M1),
    ("object", '`{"kind": "task", ...}`'): Example("task", _T03, _T1),
    ("result", 'send: `{"kind": "task", ...}`'): Example("result", _T03, {"task": _T1}, Op.SEND),
    ("result", 'send: `{"kind": "message", ...}`'): Example(
        "result", _M03, {"message": _M1}, Op.SEND
    ),
    ("result", "get, cancel: Task with `kind`"): Example("result", _T03, _T1, Op.CANCEL),
    ("event", '`{"kind": "task", ...}`'): Example("event", _T03, {"task": _T1}),
    ("event", '`{"kind": "message", ...}`'): Example("event", _M03, {"message": _M1}),
    ("event", '`{"kind": "status-update", "final", ...}`'): Example(
        "event",
        {**_ENDED03, "status": {"state": "working"}},
        {
            "statusUpdate": {
                **_ENDED1,
                "status": {"state": "TASK_STATE_WORKING"},
                "metadata": {CARRY_KEY: {"final": True}},
            }
        },
    ),
    ("event", '`{"kind": "artifact-update", ...}`'): Example(
        "event",
        {
            "kind": "artifact-update",
            "taskId": "t",
            "contextId": "c",
            "artifact": {"artifactId": "a", "parts": []},
            "append": True,
        },
        {
            "artifactUpdate": {
                "taskId": "t",
                "contextId": "c",
                "artifact": {"artifactId": "a", "parts": []},
                "append": True,
            }
        },
    ),
    ("error", "`data`: an object"): Example(
        "error",
        {"code": -32001, "message": "m", "data": {"taskId": "t", "tries": [1]}},
        {
            "code": -32001,
            "message": "m",
            "data": [
                {
                    "@type": _INFO,
                    "reason": "TASK_NOT_FOUND",
                    "domain": "a2a-protocol.org",
                    "metadata": {"taskId": "t", "tries": "[1]"},
                },
                {"@type": STRUCT_TYPE, "value": {"taskId": "t", "tries": [1]}},
            ],
        },
    ),
    ("error", "`data`: not an object (an array, a string, a number)"): Example(
        "error",
        {"code": -32603, "message": "m", "data": ["a", 1]},
        {
            "code": -32603,
            "message": "m",
            "data": [
                {
                    "@type": _INFO,
                    "reason": "INTERNAL_ERROR",
                    "domain": "a2a-protocol.org",
                    "metadata": {},
                },
                {"@type": VALUE_TYPE, "value": ["a", 1]},
            ],
        },
    ),
    ("error", "`data.fieldViolations`"): Example(
        "error",
        {
            "code": -32602,
            "message": "m",
            "data": {"fieldViolations": [{"field": "id", "description": "d"}]},
        },
        {
            "code": -32602,
            "message": "m",
            "data": [
                {
                    "@type": _INFO,
                    "reason": "INVALID_PARAMS",
                    "domain": "a2a-protocol.org",
                    "metadata": {},
                },
                {
                    "@type": BAD_REQUEST_TYPE,
                    "fieldViolations": [{"field": "id", "description": "d"}],
                },
            ],
        },
    ),
    ("error", "`data[CARRY]` `{reason, domain, details}`"): Example(
        "error",
        {
            "code": -32001,
            "message": "m",
            "data": {CARRY_KEY: {"reason": "GONE", "domain": "a.org"}},
        },
        {
            "code": -32001,
            "message": "m",
            "data": [{"@type": _INFO, "reason": "GONE", "domain": "a.org", "metadata": {}}],
        },
    ),
    ("timestamp", "ISO 8601, any offset or none (UTC)"): Example(
        "timestamp",
        "2026-01-02T03:04:05+01:00",
        "2026-01-02T02:04:05.000000Z",
        back="2026-01-02T02:04:05.000000Z",
        lossy=True,
    ),
    ("timestamp", "`status.timestamp` no 1.x SDK reads"): Example(
        "task",
        {**_T03, "status": {"state": "completed", "timestamp": "noon"}},
        {**_T1, "metadata": {CARRY_KEY: {"statusTimestamp": "noon"}}},
    ),
}
