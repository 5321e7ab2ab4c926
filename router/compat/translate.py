"""Translating A2A JSON between protocol versions 0.3 and 1.0, as pure functions.

Everything here takes plain JSON (dicts, lists, strings, numbers) and returns new objects; the
input is never changed and no model is built. Same-version calls never come here: the router
only translates when a client and its agent speak different versions.

- :func:`params_to` a request's params (client -> agent);
- :func:`result_to` the result of send/get/cancel, :func:`event_to` one stream event,
  :func:`error_to` a JSON-RPC error object (agent -> client).

Unknown members pass through untouched. A member with no counterpart in the other version is
kept in the nearest ``metadata`` under :data:`CARRY_KEY` and put back on the way back, so the
round trip 0.3 -> 1.0 -> 0.3 gives back what went in (property-tested). :data:`TABLE` lists
every mapping and every lossy case; ``docs/translation.md`` mirrors it (a test compares them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from router.protocol import payloads as wire
from router.protocol.errors import (
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    REASONS,
    STRUCT_TYPE,
    UNSUPPORTED,
    VALUE_TYPE,
    RpcError,
    error_domain,
    shaped_data,
)
from router.protocol.events import V1_EVENT_KEYS, event_payload, stream_event_kind
from router.protocol.timestamps import parse_timestamp, status_timestamp
from router.protocol.versions import (
    ROLES,
    STATES,
    Op,
    Version,
    equivalent_method,
    is_interrupted_state,
    is_terminal_state,
    role_name,
    task_state,
)

__all__ = [
    "CARRY_KEY",
    "DATA_COMPAT_KEY",
    "EXAMPLES",
    "TABLE",
    "Example",
    "Row",
    "asks_no_history",
    "error_to",
    "event_to",
    "message_to",
    "params_to",
    "part_to",
    "push_params_to",
    "push_result_to",
    "result_to",
    "role_to",
    "state_to",
    "task_to",
    "timestamp_to",
]

CARRY_KEY = "urn:a2a-switchboard:translation:v1"
"""The ``metadata`` key under which members with no counterpart travel (and come back)."""
DATA_COMPAT_KEY = "data_part_compat"
"""The a2a-sdk's own marker (part metadata) of a 1.0 non-object data value wrapped for 0.3 as
``{"value": ...}``; the SDK's 0.3 compatibility layer reads and writes it, so Switchboard does
too."""

Row = tuple[str, str, str, str]
"""One line of the translation table: (area, A2A 0.3, A2A 1.0, note)."""

# The translation table. ``docs/translation.md`` holds the same rows (tests/test_translate.py
# compares them): change both together. A note starting "lossy" is a lossy case.
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
        "Switchboard relays no push config method (`-32003`); `push_params_to`, "
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
        "first scheme only, lossy beyond it; Switchboard refuses both (`-32003`)",
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
        ", ".join(f"`{role}`" for role in ROLES["1.0"]) + " (or 1, 2)",
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
# timestamp, keyed by (area, A2A 0.3 cell) of their row (tests/test_translate.py runs them).
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

_STREAM_KEYS = {kind: key for key, kind in V1_EVENT_KEYS.items()}
_V1_CONTENT = wire.V1_PART_CONTENT
_SEND_OPS = (Op.SEND, Op.STREAM)


# --- carrying ----------------------------------------------------------------------------------


def _carry(obj: dict[str, Any], values: Mapping[str, Any]) -> None:
    """Put ``values`` under ``obj["metadata"][CARRY_KEY]`` (``obj`` is a fresh copy).

    An empty ``metadata: {}`` the object had is remembered (``"metadata": {}`` in the carried
    values), so that :func:`_uncarry` leaves it rather than dropping it."""
    if not values:
        return
    metadata = dict(obj.get("metadata") or {})
    carried = dict(metadata.get(CARRY_KEY) or {})
    if obj.get("metadata") == {}:
        carried["metadata"] = {}
    carried.update(values)
    metadata[CARRY_KEY] = carried
    obj["metadata"] = metadata


def _uncarry(obj: dict[str, Any]) -> dict[str, Any]:
    """Take what :func:`_carry` put in ``obj`` (a fresh copy) out of it again."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get(CARRY_KEY), dict):
        return {}
    metadata = dict(metadata)
    carried = dict(metadata.pop(CARRY_KEY))
    keep_empty = carried.pop("metadata", None) == {}
    if metadata or keep_empty:
        obj["metadata"] = metadata
    else:
        del obj["metadata"]
    return carried


def _carried(obj: Any) -> dict[str, Any]:
    """What :func:`_carry` put in ``obj``, read without changing it."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    carried = metadata.get(CARRY_KEY) if isinstance(metadata, dict) else None
    return carried if isinstance(carried, dict) else {}


# --- small shapes -----------------------------------------------------------------------------


def state_to(state: Any, dst: Version) -> Any:
    """A task state in ``dst``'s spelling (1.0 enum numbers too); unknown: unchanged."""
    row = task_state(state)
    if row is None:
        return state
    return row.v03 if dst == "0.3" else row.v1


def role_to(role: Any, dst: Version) -> Any:
    """A message role in ``dst``'s spelling (1.0 enum numbers too); unknown: unchanged."""
    return role_name(dst, role)


_ZULU = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z")
_UTC_OFFSET = re.compile(r"(\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d{1,9})?)(?:[+-]00:?00)")


def timestamp_to(value: Any, dst: Version) -> Any:
    """A timestamp as ``dst``'s SDKs accept it.

    1.0 (ProtoJSON Timestamp): RFC 3339 in UTC with ``Z``; a ``+00:00`` offset becomes ``Z``
    keeping every digit, another offset or none (taken as UTC, as 0.3 SDKs mean) is converted
    (microseconds). 0.3 takes any ISO 8601 string: unchanged. Unreadable: unchanged.
    """
    if dst == "0.3" or not isinstance(value, str) or _ZULU.fullmatch(value):
        return value
    same = _UTC_OFFSET.fullmatch(value)
    if same:
        return same.group(1).replace("t", "T").replace(" ", "T") + "Z"
    moment = status_timestamp({"status": {"timestamp": value}})
    if moment is None:
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- parts, messages, tasks --------------------------------------------------------------------


def part_to(part: Any, src: Version, dst: Version) -> Any:
    """One message or artifact part in ``dst``'s shape (see :data:`TABLE`)."""
    if src == dst or not isinstance(part, dict):
        return part
    return _part_to_v1(part) if dst == "1.0" else _part_to_v03(part)


def _part_to_v1(part: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in part.items() if k not in ("kind", "file")}
    keep_empty = _carried(part).get("metadata") == {}
    carried = _uncarry(out)
    kind = part.get("kind") or next((k for k in ("text", "file", "data") if k in part), None)
    if kind == "file" and isinstance(part.get("file"), dict):
        file = dict(part["file"])
        if "bytes" in file:
            out["raw"] = file.pop("bytes")
        elif "uri" in file:
            out["url"] = file.pop("uri")
        if "mimeType" in file:
            out["mediaType"] = file.pop("mimeType")
        if "name" in file:
            out["filename"] = file.pop("name")
        if file:  # members of the file object with no 1.0 counterpart
            _carry(out, {"file": file})
    elif kind == "file":
        out["file"] = part.get("file")  # not a file object: left for the agent to refuse
    elif kind == "data":
        metadata = out.get("metadata")
        data = part.get("data")
        if (
            isinstance(metadata, dict)
            and metadata.get(DATA_COMPAT_KEY) is True
            and isinstance(data, dict)
            and "value" in data
        ):
            out["data"] = data["value"]
            others = {k: v for k, v in data.items() if k != "value"}
            if others:  # members beside "value" have no place in 1.0: carried
                carried["dataMembers"] = others
            rest = {k: v for k, v in metadata.items() if k != DATA_COMPAT_KEY}
            if rest or keep_empty:
                out["metadata"] = rest
            else:
                del out["metadata"]
    for key in ("mediaType", "filename"):
        if key in carried:
            out[key] = carried.pop(key)
    if carried:
        _carry(out, carried)
    return out


def _part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    content = [key for key in _V1_CONTENT if key in part]
    if len(content) != 1:
        return dict(part)  # not a 1.0 part: left for the client to judge
    key = content[0]
    out = {k: v for k, v in part.items() if k not in (key, "mediaType", "filename")}
    carried = _uncarry(out)
    extra = {k: part[k] for k in ("mediaType", "filename") if k in part}
    if key in ("raw", "url"):
        file = dict(carried.pop("file", None) or {})
        file["bytes" if key == "raw" else "uri"] = part[key]
        if "mediaType" in extra:
            file["mimeType"] = extra.pop("mediaType")
        if "filename" in extra:
            file["name"] = extra.pop("filename")
        out = {"kind": "file", "file": file, **out}
    elif key == "text":
        out = {"kind": "text", "text": part["text"], **out}
    else:
        data = part["data"]
        out = {"kind": "data", **out}
        if isinstance(data, dict):
            out["data"] = data
        else:
            members = carried.pop("dataMembers", None)
            out["data"] = {**(members if isinstance(members, dict) else {}), "value": data}
            if part.get("metadata") == {}:
                carried["metadata"] = {}  # kept through the compat marker
            out["metadata"] = {**(out.get("metadata") or {}), DATA_COMPAT_KEY: True}
    _carry(out, {**carried, **extra})
    return out


def _parts(parts: Any, src: Version, dst: Version) -> Any:
    if not isinstance(parts, list):
        return parts
    return [part_to(part, src, dst) for part in parts]


def message_to(message: Any, src: Version, dst: Version) -> Any:
    """A Message in ``dst``'s shape: ``kind``, role and parts."""
    if src == dst or not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k != "kind"}
    if dst == "0.3":
        out = {"kind": "message", **out}
    if "role" in out:
        out["role"] = role_to(out["role"], dst)
    if "parts" in out:
        out["parts"] = _parts(out["parts"], src, dst)
    return out


def _status(status: Any, src: Version, dst: Version, carried: dict[str, Any]) -> Any:
    """A TaskStatus in ``dst``'s shape. A 0.3 timestamp a 1.0 SDK could not read goes into
    ``carried`` (``statusTimestamp``: for the enclosing task's or event's metadata) and comes
    back from it (``carried`` is the enclosing object's carried values, 1.0 -> 0.3)."""
    if not isinstance(status, dict):
        return status
    out = dict(status)
    if "state" in out:
        out["state"] = state_to(out["state"], dst)
    if "message" in out:
        out["message"] = message_to(out["message"], src, dst)
    if "timestamp" in out:
        stamp = timestamp_to(out["timestamp"], dst)
        if dst == "1.0" and not _readable_timestamp(stamp):
            carried["statusTimestamp"] = out.pop("timestamp")
        else:
            out["timestamp"] = stamp
    if dst == "0.3" and "statusTimestamp" in carried and "timestamp" not in out:
        out["timestamp"] = carried.pop("statusTimestamp")
    return out


def _readable_timestamp(value: Any) -> bool:
    """Whether a 1.x SDK reads ``value`` as a google.protobuf.Timestamp."""
    return isinstance(value, str) and parse_timestamp(value) is not None


def _with_status(out: dict[str, Any], src: Version, dst: Version) -> dict[str, Any]:
    """``out`` (a fresh copy of a task or status update) with its status in ``dst``'s shape,
    and the carried values of its metadata taken out (0.3) or put in (1.0)."""
    carried = _uncarry(out) if dst == "0.3" else {}
    found: dict[str, Any] = {}
    if "status" in out:
        out["status"] = _status(out["status"], src, dst, carried if dst == "0.3" else found)
    if dst == "0.3" and "statusTimestamp" in carried:  # no status to put it back in
        found["statusTimestamp"] = carried.pop("statusTimestamp")
    _carry(out, {**carried, **found})
    return out


def _artifact(artifact: Any, src: Version, dst: Version) -> Any:
    if not isinstance(artifact, dict) or "parts" not in artifact:
        return artifact
    return {**artifact, "parts": _parts(artifact["parts"], src, dst)}


def task_to(task: Any, src: Version, dst: Version) -> Any:
    """A Task in ``dst``'s shape: ``kind``, status, history and artifacts."""
    if src == dst or not isinstance(task, dict):
        return task
    out = {k: v for k, v in task.items() if k != "kind"}
    if dst == "0.3":
        out = {"kind": "task", **out}
    out = _with_status(out, src, dst)
    if "status" not in out and dst == "0.3":
        out["status"] = {"state": "unknown"}  # required in 0.3; a 1.0 task may omit it
    if isinstance(out.get("history"), list):
        out["history"] = [message_to(m, src, dst) for m in out["history"]]
    if isinstance(out.get("artifacts"), list):
        out["artifacts"] = [_artifact(a, src, dst) for a in out["artifacts"]]
    return out


def _status_update(event: dict[str, Any], src: Version, dst: Version) -> dict[str, Any]:
    """A status update; 0.3 ``final`` is implied by the state in 1.0 (see :data:`TABLE`)."""
    out = {k: v for k, v in event.items() if k not in ("kind", "final")}
    status = out.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    ends = is_terminal_state(src, state) or is_interrupted_state(src, state)
    if dst == "1.0" and event.get("final") is True and not ends:
        _carry(out, {"final": True})  # a 0.3 stream that ends where 1.0 would not
    out = _with_status(out, src, dst)
    if dst == "0.3":
        carried = _uncarry(out)
        final = carried.pop("final", ends)
        _carry(out, carried)
        return {"kind": "status-update", **out, "final": final}
    return out


def _artifact_update(event: dict[str, Any], src: Version, dst: Version) -> dict[str, Any]:
    out = {k: v for k, v in event.items() if k != "kind"}
    if "artifact" in out:
        out["artifact"] = _artifact(out["artifact"], src, dst)
    return {"kind": "artifact-update", **out} if dst == "0.3" else out


# --- events and results ------------------------------------------------------------------------


def event_to(event: Any, src: Version, dst: Version) -> Any:
    """One stream event (the ``result`` of an SSE message) in ``dst``'s shape.

    0.3 ``{"kind": ...}`` objects and 1.0 one-member wrappers (``task``, ``message``,
    ``statusUpdate``, ``artifactUpdate``). For a 0.3 client, a status update gets ``final``:
    true on a terminal or interrupted state (a 1.0 stream ends there without saying so).
    Unrecognised events are returned unchanged.
    """
    if src == dst or not isinstance(event, dict):
        return event
    kind = stream_event_kind(src, event)
    payload = event_payload(src, event)
    if kind is None or payload is None:
        return event
    if kind == "task":
        inner = task_to(payload, src, dst)
    elif kind == "message":
        inner = message_to(payload, src, dst)
    elif kind == "status-update":
        inner = _status_update(payload, src, dst)
    else:
        inner = _artifact_update(payload, src, dst)
    return inner if dst == "0.3" else {_STREAM_KEYS[kind]: inner}


def result_to(op: Op, result: Any, src: Version, dst: Version, *, no_history: bool = False) -> Any:
    """The ``result`` of a send/stream/subscribe/get/cancel answer in ``dst``'s shape.

    Send: 0.3 Task or Message with ``kind`` vs 1.0 ``{"task"}``/``{"message"}``; get and
    cancel: a Task (1.0 bare); stream/subscribe: as :func:`event_to`. ``no_history``: the
    1.0 client asked for ``historyLength: 0`` (see :func:`asks_no_history`), which a 0.3
    agent cannot be told: the Task's ``history`` is left out here.
    """
    if src == dst or not isinstance(result, dict):
        return result
    if op in (Op.GET, Op.CANCEL):
        if src == "1.0" and "id" not in result and isinstance(result.get("task"), dict):
            result = result["task"]  # tolerate a wrapped task
        out = task_to(result, src, dst)
        if no_history and dst == "1.0" and isinstance(out, dict):
            out.pop("history", None)
        return out
    out = event_to(result, src, dst)
    if no_history and dst == "1.0" and isinstance(out, dict) and isinstance(out.get("task"), dict):
        out["task"] = {k: v for k, v in out["task"].items() if k != "history"}
    return out


def asks_no_history(op: Op, params: Mapping[str, Any]) -> bool:
    """Whether 1.0 ``params`` of a send or get ask for ``historyLength: 0`` (no history)."""
    if op in (Op.SEND, Op.STREAM):
        config = params.get("configuration")
        value = config.get("historyLength") if isinstance(config, dict) else None
    elif op is Op.GET:
        value = params.get("historyLength")
    else:
        return False
    return value is not None and _no_history_limit(value)


# --- params ------------------------------------------------------------------------------------


def params_to(op: Op, params: Mapping[str, Any], src: Version, dst: Version) -> dict[str, Any]:
    """A request's params in ``dst``'s shape (see :data:`TABLE`).

    RpcError -32004 (UnsupportedOperation) for an operation ``dst`` has no method for.
    """
    if src == dst:
        return dict(params)
    if op is Op.PUSH_CONFIG:
        raise ValueError("push notification config params need the method: see push_params_to")
    if op is Op.LIST:
        raise RpcError(
            UNSUPPORTED,
            f"ListTasks cannot be translated to A2A {dst}: the agent speaks only A2A {dst}, "
            "which has no such method",
            {"operation": op.value, "agentVersion": dst, "clientVersion": src},
        )
    out = dict(params)
    tenant_to_carry: dict[str, Any] = {}
    if dst == "0.3" and "tenant" in out:
        tenant_to_carry = {"tenant": out.pop("tenant")}
    if dst == "1.0":
        carried = _uncarry(out)
        if "tenant" in carried:
            out["tenant"] = carried.pop("tenant")
        if carried:
            _carry(out, carried)
    if op in _SEND_OPS:
        if "message" in out:
            out["message"] = message_to(out["message"], src, dst)
        if isinstance(out.get("configuration"), dict):
            out["configuration"] = _configuration(out["configuration"], dst)
    elif "historyLength" in out and _no_history_limit(out["historyLength"]):
        del out["historyLength"]
    if dst == "1.0" and op in (Op.GET, Op.SUBSCRIBE):
        out.pop("metadata", None)  # GetTask and SubscribeToTask have no metadata
    if tenant_to_carry:  # 0.3 TaskIdParams and TaskQueryParams have metadata too
        _carry(out, tenant_to_carry)
    return out


def _no_history_limit(value: Any) -> bool:
    """``historyLength`` 0 (a number or ProtoJSON's string): "no limit" in 0.3 and "no
    history" in 1.0; either way the other version gets "not set" (see the lossy cases)."""
    return value == 0 or value == "0"


def _configuration(config: dict[str, Any], dst: Version) -> dict[str, Any]:
    out = dict(config)
    if "historyLength" in out and _no_history_limit(out["historyLength"]):
        del out["historyLength"]
    if dst == "1.0":
        blocking = out.pop("blocking", None)
        if blocking is False:
            out["returnImmediately"] = True
        if "pushNotificationConfig" in out:
            out["taskPushNotificationConfig"] = _push_config(out.pop("pushNotificationConfig"), dst)
    else:
        immediately = out.pop("returnImmediately", None)
        if immediately is True:
            out["blocking"] = False
        if "taskPushNotificationConfig" in out:
            out["pushNotificationConfig"] = _push_config(out.pop("taskPushNotificationConfig"), dst)
    return out


def _push_config(config: Any, dst: Version) -> Any:
    """A push notification config object: ``authentication.schemes`` (0.3, a list) vs
    ``authentication.scheme`` (1.0, one)."""
    if not isinstance(config, dict) or not isinstance(config.get("authentication"), dict):
        return config
    auth = dict(config["authentication"])
    if dst == "1.0" and "schemes" in auth:
        schemes = auth.pop("schemes")
        if isinstance(schemes, list) and schemes:
            auth["scheme"] = schemes[0]
    elif dst == "0.3" and "scheme" in auth:
        auth["schemes"] = [auth.pop("scheme")]
    return {**config, "authentication": auth}


# --- push notification config methods -----------------------------------------------------------

_PUSH_SET, _PUSH_GET, _PUSH_LIST, _PUSH_DELETE = (
    f"tasks/pushNotificationConfig/{name}" for name in ("set", "get", "list", "delete")
)


def _push_method(method: str) -> str:
    """The 0.3 name of a push notification config method of either version."""
    name = equivalent_method(method, "0.3")
    if name not in (_PUSH_SET, _PUSH_GET, _PUSH_LIST, _PUSH_DELETE):
        raise ValueError(f"{method!r} is not a push notification config method")
    return name


def _flat_config(task_config: Mapping[str, Any], dst: Version) -> dict[str, Any]:
    """0.3 ``{taskId, pushNotificationConfig: {...}}`` <-> 1.0's flat TaskPushNotificationConfig."""
    if dst == "1.0":
        out = {k: v for k, v in task_config.items() if k != "pushNotificationConfig"}
        inner = task_config.get("pushNotificationConfig")
        if isinstance(inner, dict):
            out.update(_push_config(inner, dst))
        return out
    out = {k: v for k, v in task_config.items() if k in ("taskId",)}
    inner = {k: v for k, v in task_config.items() if k not in ("taskId", "tenant")}
    out["pushNotificationConfig"] = _push_config(inner, dst)
    return out


def push_params_to(
    method: str, params: Mapping[str, Any], src: Version, dst: Version
) -> dict[str, Any]:
    """The params of a push notification config ``method`` (either version's name) in
    ``dst``'s shape. Switchboard does not relay these methods (``-32003``); this is the
    translation they get when it does. ValueError for another method."""
    name = _push_method(method)
    if src == dst:
        return dict(params)
    if name == _PUSH_SET:
        return _flat_config(params, dst)
    if dst == "1.0":  # 0.3 names the task ``id`` and the config ``pushNotificationConfigId``
        out: dict[str, Any] = {"taskId": params.get("id")}
        if name != _PUSH_LIST and "pushNotificationConfigId" in params:
            out["id"] = params["pushNotificationConfigId"]
        carried = _uncarry(dict(params))
        if "tenant" in carried:
            out["tenant"] = carried["tenant"]
        return out
    out = {"id": params.get("taskId")}
    if name != _PUSH_LIST and "id" in params:
        out["pushNotificationConfigId"] = params["id"]
    if "tenant" in params:
        _carry(out, {"tenant": params["tenant"]})
    return out


def push_result_to(method: str, result: Any, src: Version, dst: Version) -> Any:
    """The result of a push notification config ``method`` in ``dst``'s shape: a config
    (set, get), a list (0.3 an array, 1.0 ``{"configs", "nextPageToken"}``), nothing
    (delete: 0.3 ``null``, 1.0 ``{}``)."""
    name = _push_method(method)
    if src == dst:
        return result
    if name == _PUSH_DELETE:
        return {} if dst == "1.0" else None
    if name == _PUSH_LIST:
        configs = result.get("configs") if isinstance(result, dict) else result
        if not isinstance(configs, list):
            return result
        items = [_flat_config(c, dst) if isinstance(c, dict) else c for c in configs]
        return {"configs": items} if dst == "1.0" else items
    return _flat_config(result, dst) if isinstance(result, dict) else result


# --- errors ------------------------------------------------------------------------------------


def error_to(error: Any, src: Version, dst: Version) -> Any:
    """A JSON-RPC error object with its ``data`` in ``dst``'s shape (codes are the same).

    0.3 ``data`` is a plain object; 1.0 a list of typed details (``google.rpc.ErrorInfo``
    first). The translation keeps every member: 0.3 -> 1.0 puts the object in ErrorInfo
    metadata (as strings) and whole in a Struct detail, ``fieldViolations`` in a BadRequest;
    1.0 -> 0.3 merges them back, and what has no place (reason, domain, other details) goes
    under :data:`CARRY_KEY`.
    """
    if src == dst or not isinstance(error, dict) or "data" not in error:
        return error
    data = error["data"]
    out = dict(error)
    if dst == "1.0":
        out["data"] = _error_data_to_v1(error.get("code"), error.get("message"), data)
    elif isinstance(data, list):
        out["data"] = _error_data_to_v03(error.get("code"), data)
    return out


def _error_data_to_v1(code: Any, message: Any, data: Any) -> Any:
    if data is None:
        return data
    facts = dict(data) if isinstance(data, dict) else data
    carried: dict[str, Any] = {}
    violations: list[tuple[str, str]] = []
    if isinstance(facts, dict):
        carried = dict(facts.pop(CARRY_KEY, None) or {})
        found = facts.pop("fieldViolations", None)
        if isinstance(found, list):
            violations = [
                (str(v.get("field", "")), str(v.get("description", "")))
                for v in found
                if isinstance(v, dict)
            ]
    code = code if isinstance(code, int) and not isinstance(code, bool) else -32603
    rpc = RpcError(
        code,
        message if isinstance(message, str) else "",
        facts,
        violations=violations,
        reason=carried.get("reason") if isinstance(carried.get("reason"), str) else None,
    )
    details: list[dict[str, Any]] = shaped_data("1.0", rpc, rpc.data)
    info = details[0]
    if isinstance(carried.get("domain"), str):
        info["domain"] = carried["domain"]
    has_struct = any(d.get("@type") == STRUCT_TYPE for d in details)
    typed = isinstance(facts, dict) and any(not isinstance(v, str) for v in facts.values())
    if typed and not has_struct:
        details.insert(1, {"@type": STRUCT_TYPE, "value": facts})
    extra = carried.get("details")
    if isinstance(extra, list):
        details.extend(extra)
    return details


def _error_data_to_v03(code: Any, details: list[Any]) -> Any:
    out: dict[str, Any] = {}
    carried: dict[str, Any] = {}
    others: list[Any] = []
    struct: dict[str, Any] | None = None
    value: Any = _NONE
    for detail in details:
        kind = detail.get("@type") if isinstance(detail, dict) else None
        if kind == ERROR_INFO_TYPE:
            metadata = detail.get("metadata")
            if isinstance(metadata, dict):
                out.update(metadata)
            number = code if isinstance(code, int) and not isinstance(code, bool) else 0
            defaults = {
                "reason": REASONS.get(code, "UNKNOWN_ERROR"),
                "domain": error_domain(number),
            }
            for key, default in defaults.items():
                if isinstance(detail.get(key), str) and detail[key] != default:
                    carried[key] = detail[key]
        elif kind == STRUCT_TYPE and isinstance(detail.get("value"), dict) and struct is None:
            struct = detail["value"]
        elif kind == VALUE_TYPE and "value" in detail and value is _NONE:
            value = detail["value"]
        elif kind == BAD_REQUEST_TYPE and isinstance(detail.get("fieldViolations"), list):
            out["fieldViolations"] = detail["fieldViolations"]
        else:
            others.append(detail)
    if struct is not None:
        out.update(struct)  # the typed values win over ErrorInfo's strings
    if others:
        carried["details"] = others
    if value is not _NONE:
        if not out and not carried:
            return value  # 0.3 data that was not an object
        out["detail"] = value
    if carried:
        out[CARRY_KEY] = carried
    return out


_NONE = object()
