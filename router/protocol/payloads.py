"""What A2A 0.3 and 1.0 payloads look like, as pure functions on plain JSON.

Nothing here copies or rebuilds a payload: the functions read and check the client's or the
agent's JSON as it is. The two shapes, as the official SDKs put them on the wire:

- parts: 0.3 ``{"kind": "text", "text": ..}``, ``{"kind": "file", "file": {"bytes"|"uri",
  "mimeType"}}``, ``{"kind": "data", "data": {..}}``; 1.0 ``{"text"}``, ``{"raw"}``, ``{"url"}``,
  ``{"data"}`` with an optional ``mediaType``;
- roles ``user``/``agent`` vs ``ROLE_USER``/``ROLE_AGENT``; states ``completed`` vs
  ``TASK_STATE_COMPLETED``;
- stream events: 0.3 results carry ``kind`` (``task``, ``message``, ``status-update``,
  ``artifact-update``) and status updates a ``final`` flag; 1.0 results wrap the object in one
  member (``task``, ``message``, ``statusUpdate``, ``artifactUpdate``), have no ``final`` and
  omit false booleans.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Literal

from router.protocol.errors import INVALID_PARAMS, PUSH_NOT_SUPPORTED, RpcError
from router.protocol.versions import (
    ROLE_NUMBERS,
    ROLES,
    STATES,
    Op,
    Version,
    is_terminal_state,
)

__all__ = [
    "INT32_MAX",
    "MAX_ID_LENGTH",
    "V1_EVENT_KEYS",
    "V1_PART_CONTENT",
    "EventKind",
    "ListQuery",
    "accepted_output_modes",
    "check_object",
    "check_send_params",
    "check_task_params",
    "ends_stream",
    "event_payload",
    "event_task_state",
    "json_type",
    "list_tasks_query",
    "message_of",
    "message_task_id",
    "message_text",
    "missing_or",
    "params_error",
    "parse_timestamp",
    "part_media_types",
    "result_task_states",
    "status_at_or_after",
    "status_timestamp",
    "stream_event_kind",
    "stream_result",
    "task_id_param",
]

EventKind = Literal["task", "message", "status-update", "artifact-update"]

_V1_CONTENT = ("text", "raw", "url", "data")
_V03_KINDS = ("text", "file", "data")
_V1_EVENT_KEYS: dict[str, EventKind] = {
    "task": "task",
    "message": "message",
    "statusUpdate": "status-update",
    "artifactUpdate": "artifact-update",
}
_V03_EVENT_KINDS: tuple[EventKind, ...] = ("task", "message", "status-update", "artifact-update")

# Shared with router.compat.translate, which maps one version's names onto the other's.
V1_PART_CONTENT = _V1_CONTENT  # the members of which a 1.0 part holds exactly one
V1_EVENT_KEYS = _V1_EVENT_KEYS  # 1.0 stream response member -> event kind

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
MAX_ID_LENGTH = 512  # longest task/context ID accepted from a client or an agent
INT32_MAX = 2**31 - 1  # historyLength is an int32 in the proto


# --- params checks --------------------------------------------------------------------------


def json_type(value: Any) -> str:
    """The JSON type of ``value`` with its article, for error messages ("a string")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def params_error(violations: list[tuple[str, str]]) -> RpcError:
    """-32602 listing every violation: ``data.fields`` names the fields (full paths such as
    ``message.contextId``), and the (field, description) pairs become the 0.3
    ``fieldViolations`` / the 1.0 ``google.rpc.BadRequest`` detail. The message shows the
    first three."""
    shown = "; ".join(f"{field}: {text}" for field, text in violations[:3])
    more = f" (and {len(violations) - 3} more)" if len(violations) > 3 else ""
    return RpcError(
        INVALID_PARAMS,
        f"Invalid params: {shown}{more}",
        {"fields": [field for field, _ in violations]},
        violations=violations,
    )


def missing_or(value: Any, wanted: str) -> str:
    """Why ``value`` is not ``wanted``: missing, empty, or of another JSON type."""
    if value is None:
        return "is required"
    if value == "":
        return "must not be empty"
    return f"must be {wanted}, not {json_type(value)}"


def _require_str(
    value: Any, field: str, violations: list[tuple[str, str]], *, required: bool = False
) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not value:
        violations.append((field, missing_or(value, "a string")))


def _require_id(value: Any, field: str, violations: list[tuple[str, str]]) -> None:
    """An optional task or context ID: a non-empty string of at most MAX_ID_LENGTH."""
    if value is None:
        return
    if not isinstance(value, str) or not value:
        violations.append((field, missing_or(value, "a string")))
    elif len(value) > MAX_ID_LENGTH:
        violations.append(
            (field, f"must be at most {MAX_ID_LENGTH} characters long, not {len(value)}")
        )


def check_object(value: Any, field: str, violations: list[tuple[str, str]]) -> None:
    """An optional JSON object (``metadata``: a google.protobuf.Struct)."""
    if value is not None and not isinstance(value, dict):
        violations.append((field, f"must be an object, not {json_type(value)}"))


def message_of(version: Version, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params.message``, checked: an object with messageId, role and a list of parts."""
    message = params.get("message")
    if not isinstance(message, dict):
        raise params_error([("message", missing_or(message, "an object"))])
    violations: list[tuple[str, str]] = []
    _message_violations(version, message, violations)
    if violations:
        raise params_error(violations)
    return message


def _message_violations(
    version: Version, message: Mapping[str, Any], violations: list[tuple[str, str]]
) -> None:
    _require_str(message.get("messageId"), "message.messageId", violations, required=True)
    _check_role(version, message.get("role"), violations)
    for key in ("taskId", "contextId"):
        _require_id(message.get(key), f"message.{key}", violations)
    _check_reference_ids(message.get("referenceTaskIds"), violations)
    _check_parts(version, message.get("parts"), violations)
    check_object(message.get("metadata"), "message.metadata", violations)


# configuration members that ask the agent to push to a client's webhook (camelCase and the
# proto names, which ProtoJSON parsers accept too)
_PUSH_CONFIG_KEYS = (
    "pushNotificationConfig",
    "taskPushNotificationConfig",
    "push_notification_config",
    "task_push_notification_config",
)
_FOLLOW: dict[Version, str] = {
    "0.3": "message/stream, tasks/resubscribe or tasks/get",
    "1.0": "SendStreamingMessage, SubscribeToTask or GetTask",
}


def check_send_params(version: Version, params: Mapping[str, Any]) -> None:
    """Every check of the params of a send/stream call (``read_request`` runs it).

    -32602 listing each violation by its full path: the message (see :func:`message_of`),
    ``metadata`` and ``message.metadata`` (objects), ``configuration`` (an object),
    ``configuration.acceptedOutputModes`` (an array of strings),
    ``configuration.historyLength`` (a non-negative int32), ``configuration.blocking`` (0.3)
    / ``configuration.returnImmediately`` (1.0) (booleans). Then -32003
    (PushNotificationNotSupported) naming the field when the configuration carries a push
    notification config: the router does not relay push notifications (its card says so),
    and an agent pushing to the client's webhook would bypass the ID rewriting.
    """
    violations: list[tuple[str, str]] = []
    message = params.get("message")
    if isinstance(message, dict):
        _message_violations(version, message, violations)
    else:
        violations.append(("message", missing_or(message, "an object")))
    check_object(params.get("metadata"), "metadata", violations)
    config = params.get("configuration")
    if config is not None and not isinstance(config, dict):
        violations.append(("configuration", f"must be an object, not {json_type(config)}"))
    elif isinstance(config, dict):
        _configuration_violations(version, config, violations)
    if violations:
        raise params_error(violations)
    if isinstance(config, dict):
        for key in _PUSH_CONFIG_KEYS:
            if config.get(key) is not None:
                field = f"configuration.{key}"
                raise RpcError(
                    PUSH_NOT_SUPPORTED,
                    f"Switchboard does not relay push notifications: remove {field} and "
                    f"follow the task with {_FOLLOW[version]}",
                    {"field": field},
                )


def _configuration_violations(
    version: Version, config: Mapping[str, Any], violations: list[tuple[str, str]]
) -> None:
    modes = config.get("acceptedOutputModes")
    if modes is not None and (
        not isinstance(modes, list) or not all(isinstance(mode, str) for mode in modes)
    ):
        violations.append(
            ("configuration.acceptedOutputModes", "must be an array of media type strings")
        )
    _check_history_length(config, "configuration.historyLength", violations)
    flag = "blocking" if version == "0.3" else "returnImmediately"
    value = config.get(flag)
    if value is not None and not isinstance(value, bool):
        violations.append((f"configuration.{flag}", f"must be a boolean, not {json_type(value)}"))


def _check_history_length(
    params: Mapping[str, Any], field: str, violations: list[tuple[str, str]]
) -> int | None:
    """An optional ``historyLength``: a non-negative int32 (ProtoJSON: a number or a decimal
    string)."""
    value = params.get("historyLength")
    if value is None:
        return None
    number = _int_param(value)
    if number is None or not 0 <= number <= INT32_MAX:
        violations.append((field, f"must be a non-negative integer, got {_shown(value)}"))
        return None
    return number


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_role(version: Version, role: Any, violations: list[tuple[str, str]]) -> None:
    if role is None:
        violations.append(("message.role", "is required"))
    elif version == "1.0" and role in ROLE_NUMBERS and not isinstance(role, bool):
        return  # ProtoJSON allows enum numbers
    elif role not in ROLES[version]:
        other: Version = "1.0" if version == "0.3" else "0.3"
        hint = f" ({role!r} is the A2A {other} spelling)" if role in ROLES[other] else ""
        allowed = " or ".join(repr(name) for name in ROLES[version])
        violations.append(("message.role", f"must be {allowed} in A2A {version}{hint}"))


def _check_reference_ids(value: Any, violations: list[tuple[str, str]]) -> None:
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        violations.append(("message.referenceTaskIds", "must be an array of task id strings"))
    elif any(len(item) > MAX_ID_LENGTH for item in value):
        violations.append(
            ("message.referenceTaskIds", f"must hold IDs of at most {MAX_ID_LENGTH} characters")
        )


def _check_parts(version: Version, parts: Any, violations: list[tuple[str, str]]) -> None:
    if parts is None:
        violations.append(("message.parts", "is required"))
    elif not isinstance(parts, list):
        violations.append(("message.parts", f"must be an array, not {json_type(parts)}"))
    elif not parts:
        violations.append(("message.parts", "must hold at least one part"))
    else:
        check = _part_problem_v03 if version == "0.3" else _part_problem_v1
        for index, part in enumerate(parts):
            problem = check(part)
            if problem:
                violations.append((f"message.parts[{index}]", problem))


def _kind_v03(part: Mapping[str, Any]) -> str | None:
    """A 0.3 part's kind; the SDK defaults it from the members when absent."""
    kind = part.get("kind")
    if kind is not None:
        return kind if isinstance(kind, str) else None
    return next((name for name in _V03_KINDS if name in part), None)


def _part_problem_v03(part: Any) -> str | None:
    if not isinstance(part, dict):
        return f"must be an object, not {json_type(part)}"
    kind = _kind_v03(part)
    if kind is None and "kind" not in part:
        if "raw" in part or "url" in part:
            return 'has no "kind": it looks like an A2A 1.0 part (send A2A-Version: 1.0)'
        return 'has no "kind" (text, file or data)'
    if kind == "text":
        return None if isinstance(part.get("text"), str) else '"text" must be a string'
    if kind == "data":
        return None if isinstance(part.get("data"), dict) else '"data" must be an object'
    if kind == "file":
        return _file_problem_v03(part.get("file"))
    return f'"kind" must be "text", "file" or "data", not {part.get("kind")!r}'


def _file_problem_v03(file: Any) -> str | None:
    if not isinstance(file, dict):
        return '"file" must be an object with "bytes" or "uri"'
    has = [key for key in ("bytes", "uri") if isinstance(file.get(key), str)]
    if len(has) != 1:
        return '"file" must hold exactly one of "bytes" (base64) and "uri"'
    mime = file.get("mimeType")
    if mime is not None and not isinstance(mime, str):
        return '"file.mimeType" must be a string'
    return None


def _part_problem_v1(part: Any) -> str | None:
    if not isinstance(part, dict):
        return f"must be an object, not {json_type(part)}"
    present = [key for key in _V1_CONTENT if key in part]
    if not present:
        if "kind" in part or "file" in part:
            return "has none of text, raw, url, data: it looks like an A2A 0.3 part"
        return "has none of text, raw, url, data"
    if len(present) > 1:
        return f"holds {' and '.join(present)}: a part holds exactly one of text, raw, url, data"
    key = present[0]
    if key != "data" and not isinstance(part[key], str):
        return f'"{key}" must be a string'
    for name in ("mediaType", "filename"):
        if name in part and not isinstance(part[name], str):
            return f'"{name}" must be a string'
    return None


def message_task_id(version: Version, params: Mapping[str, Any]) -> str | None:
    """``params.message.taskId`` when the message continues a task, else None."""
    message = params.get("message")
    task_id = message.get("taskId") if isinstance(message, dict) else None
    return task_id if isinstance(task_id, str) and task_id else None


def part_media_types(version: Version, message: Mapping[str, Any]) -> list[str]:
    """The media type of each part of ``message``, in order."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return []
    media = _media_type_v03 if version == "0.3" else _media_type_v1
    return [media(part) if isinstance(part, dict) else "application/octet-stream" for part in parts]


def _media_type_v03(part: Mapping[str, Any]) -> str:
    kind = _kind_v03(part)
    if kind == "text":
        return "text/plain"
    if kind == "data":
        return "application/json"
    file = part.get("file")
    mime = file.get("mimeType") if isinstance(file, dict) else None
    return mime if isinstance(mime, str) and mime else "application/octet-stream"


def _media_type_v1(part: Mapping[str, Any]) -> str:
    mime = part.get("mediaType")
    if isinstance(mime, str) and mime:
        return mime
    if "text" in part:
        return "text/plain"
    if "data" in part:
        return "application/json"
    return "application/octet-stream"


def message_text(version: Version, message: Mapping[str, Any]) -> str:
    """The text parts of ``message``, joined by newlines."""
    parts = message.get("parts")
    if not isinstance(parts, list):
        return ""
    texts = [
        part["text"]
        for part in parts
        if isinstance(part, dict)
        and isinstance(part.get("text"), str)
        and (version == "1.0" or _kind_v03(part) == "text")
    ]
    return "\n".join(texts)


def accepted_output_modes(version: Version, params: Mapping[str, Any]) -> list[str]:
    """``params.configuration.acceptedOutputModes`` (empty: anything goes)."""
    config = params.get("configuration")
    if config is None:
        return []
    if not isinstance(config, dict):
        raise params_error([("configuration", f"must be an object, not {json_type(config)}")])
    modes = config.get("acceptedOutputModes")
    if modes is None:
        return []
    if not isinstance(modes, list) or not all(isinstance(mode, str) for mode in modes):
        raise params_error(
            [("configuration.acceptedOutputModes", "must be an array of media type strings")]
        )
    return list(modes)


def check_task_params(version: Version, op: Op, params: Mapping[str, Any]) -> str:
    """Every check of the params of a get/cancel/subscribe/push-config call (``read_request``
    runs it): the task ID (:func:`task_id_param`), ``historyLength`` of a get (a
    non-negative int32) and ``metadata`` (an object); -32602 listing each violation. The
    task ID."""
    violations: list[tuple[str, str]] = []
    task_id = ""
    try:
        task_id = task_id_param(version, op, params)
    except RpcError as error:
        violations += error.violations
    if op is Op.GET:
        _check_history_length(params, "historyLength", violations)
    if op is not Op.PUSH_CONFIG:
        check_object(params.get("metadata"), "metadata", violations)
    if violations:
        raise params_error(violations)
    return task_id


def task_id_param(version: Version, op: Op, params: Mapping[str, Any]) -> str:
    """The task a GET/CANCEL/SUBSCRIBE (``id``) or push-config call is about.

    Push-config methods name it ``taskId`` in 1.0 and in 0.3 ``set``; ``id`` in the other
    0.3 ones. ValueError for ops that take no task id.
    """
    if op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
        field = "id"
    elif op is Op.PUSH_CONFIG:
        field = "taskId" if version == "1.0" or "taskId" in params else "id"
    else:
        raise ValueError(f"{op.value!r} calls take no task id parameter")
    value = params.get(field)
    if not isinstance(value, str) or not value:
        raise params_error([(field, missing_or(value, "a task id string"))])
    return value


@dataclass(frozen=True)
class ListQuery:
    """The checked params of a 1.0 ``ListTasks`` call."""

    context_id: str | None = None
    status: str | None = None  # a 1.0 state name; None: any
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str | None = None
    history_length: int | None = None
    include_artifacts: bool = False
    # statusTimestampAfter, parsed (timezone-aware, UTC); see :func:`status_at_or_after`
    status_timestamp_after: datetime | None = None


def _int_param(value: Any) -> int | None:
    """A ProtoJSON integer: a JSON number with no fraction or a decimal string."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def list_tasks_query(params: Mapping[str, Any]) -> ListQuery:
    """Check the params of ``ListTasks`` (1.0 only); -32602 with every violation."""
    violations: list[tuple[str, str]] = []
    for key in ("contextId", "pageToken", "statusTimestampAfter"):
        value = params.get(key)
        if value is not None and not isinstance(value, str):
            violations.append((key, f"must be a string, not {json_type(value)}"))
    stamp = params.get("statusTimestampAfter")
    after = parse_timestamp(stamp) if isinstance(stamp, str) and stamp else None
    if isinstance(stamp, str) and stamp and after is None:
        rule = "must be an RFC 3339 timestamp such as 2026-01-02T03:04:05Z"
        violations.append(("statusTimestampAfter", f"{rule}, got {_shown(stamp)}"))
    status = params.get("status")
    if status in (None, "", "TASK_STATE_UNSPECIFIED"):
        status = None
    elif status not in STATES["1.0"]:
        allowed = ", ".join(STATES["1.0"][:-1])
        violations.append(("status", f"must be one of {allowed}; got {status!r}"))
    page_size = _page_size(params.get("pageSize"), violations)
    history_length = _check_history_length(params, "historyLength", violations)
    include = params.get("includeArtifacts", False)
    if not isinstance(include, bool):
        violations.append(("includeArtifacts", f"must be a boolean, not {json_type(include)}"))
    if violations:
        raise params_error(violations)
    return ListQuery(
        context_id=params.get("contextId") or None,
        status=status,
        page_size=page_size,
        page_token=params.get("pageToken") or None,
        history_length=history_length,
        include_artifacts=include,
        status_timestamp_after=after,
    )


_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (the ProtoJSON form of google.protobuf.Timestamp) as an aware
    UTC datetime (fractions beyond microseconds are cut); None if ``value`` is not one."""
    found = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in found.groups()[:6])
    fraction, zulu, sign, off_hours, off_minutes = found.groups()[6:]
    micros = int((fraction or "").ljust(6, "0")[:6])
    try:
        if zulu:
            zone = UTC
        else:
            offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
            zone = timezone(-offset if sign == "-" else offset)
        moment = datetime(year, month, day, hour, minute, second, micros, tzinfo=zone)
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):  # Feb 30, second 60, offsets of a day or more
        return None


def status_timestamp(task: Mapping[str, Any]) -> datetime | None:
    """``task.status.timestamp`` (either version) as an aware UTC datetime, if it has a
    readable one (RFC 3339; a 0.3 agent's ISO 8601 time without an offset is taken as
    UTC)."""
    status = task.get("status")
    stamp = status.get("timestamp") if isinstance(status, dict) else None
    if not isinstance(stamp, str):
        return None
    parsed = parse_timestamp(stamp)
    if parsed is not None:
        return parsed
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def status_at_or_after(task: Mapping[str, Any], after: datetime) -> bool:
    """Whether a task passes ListTasks' ``statusTimestampAfter`` (as the official SDK's task
    stores do: a status timestamp at or after it; a task without one does not pass)."""
    stamp = status_timestamp(task)
    return stamp is not None and stamp >= after


def _page_size(value: Any, violations: list[tuple[str, str]]) -> int:
    if value is None:
        return DEFAULT_PAGE_SIZE
    size = _int_param(value)
    if size == 0:  # proto3 default: unset
        return DEFAULT_PAGE_SIZE
    if size is None or not 1 <= size <= MAX_PAGE_SIZE:
        violations.append(
            ("pageSize", f"must be between 1 and {MAX_PAGE_SIZE} inclusive, got {value!r}")
        )
        return DEFAULT_PAGE_SIZE
    return size


# --- stream events --------------------------------------------------------------------------


def stream_result(event: Mapping[str, Any]) -> Any:
    """The ``result`` of a JSON-RPC response envelope (None for an error); else ``event``.

    No A2A result has a ``result`` member, so an object with one is an envelope even when
    it lacks ``jsonrpc``.
    """
    if "result" in event or _is_error(event):
        return event.get("result")
    return event


def _is_error(event: Mapping[str, Any]) -> bool:
    return "error" in event and "result" not in event and ("jsonrpc" in event or "id" in event)


def stream_event_kind(version: Version, event: Mapping[str, Any]) -> EventKind | None:
    """What a stream event (a result, or its response envelope) is; None if unrecognised."""
    result = stream_result(event)
    if not isinstance(result, dict):
        return None
    if version == "1.0":
        present = [key for key in _V1_EVENT_KEYS if key in result]
        return _V1_EVENT_KEYS[present[0]] if len(present) == 1 else None
    kind = result.get("kind")
    if kind is None:
        return _kind_by_shape_v03(result)
    return kind if kind in _V03_EVENT_KINDS else None


def _kind_by_shape_v03(result: Mapping[str, Any]) -> EventKind | None:
    """A 0.3 event without ``kind`` (required, but cheap to tolerate): by its members."""
    if "artifact" in result:
        return "artifact-update"
    if "status" in result:
        return "status-update" if "taskId" in result else "task"
    if "messageId" in result and "parts" in result:
        return "message"
    return None


def event_payload(version: Version, event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Task/Message/update object of a stream event (1.0: unwrapped from its member)."""
    result = stream_result(event)
    kind = stream_event_kind(version, event)
    if kind is None or not isinstance(result, dict):
        return None
    if version == "0.3":
        return result
    inner = result[next(key for key, name in _V1_EVENT_KEYS.items() if name == kind)]
    return inner if isinstance(inner, dict) else None


def _status_state(payload: Mapping[str, Any]) -> str | None:
    status = payload.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None


def ends_stream(version: Version, event: Mapping[str, Any]) -> bool:
    """True if nothing follows ``event`` in its stream.

    Both: a message, an error, a task snapshot in a terminal state. 0.3: a status update
    with ``final: true``. 1.0: a status update with a terminal state (there is no ``final``;
    the official server also closes after INPUT_REQUIRED, which a caller sees as the end of
    the upstream stream).
    """
    if _is_error(event):
        return True
    kind = stream_event_kind(version, event)
    payload = event_payload(version, event)
    if kind is None or payload is None:
        return False
    if kind == "message":
        return True
    if kind == "task":
        return is_terminal_state(version, _status_state(payload))
    if kind == "status-update":
        if version == "0.3":
            return payload.get("final") is True
        return is_terminal_state(version, _status_state(payload))
    return False


def event_task_state(version: Version, event: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(task id, task state) as far as a stream event carries them (a bare 1.0 Task, the
    result of GetTask/CancelTask, is not a stream event: see :func:`result_task_states`)."""
    kind = stream_event_kind(version, event)
    payload = event_payload(version, event)
    if kind is None or payload is None:
        return None, None
    key = "id" if kind == "task" else "taskId"
    task_id = payload.get(key)
    task_id = task_id if isinstance(task_id, str) and task_id else None
    state = _status_state(payload) if kind in ("task", "status-update") else None
    return task_id, state


def result_task_states(version: Version, op: Op, result: Any) -> list[tuple[str, str]]:
    """(task id, state) of every task an answer of ``op`` carries, to record as last known.

    ``result`` is the ``result`` of an answer (or its whole response envelope):
    send (0.3 Task or Message; 1.0 ``{"task"}``/``{"message"}``), stream/subscribe (one
    event, as :func:`event_task_state`), get/cancel (a Task: 0.3 with ``kind``, 1.0 bare),
    list (``{"tasks": [Task, ...]}``). A message, an update without a state or anything
    unrecognised yields nothing.
    """
    if not isinstance(result, Mapping):
        return []
    result = stream_result(result)
    if not isinstance(result, Mapping):
        return []
    if op is Op.LIST:
        tasks = result.get("tasks")
        if not isinstance(tasks, list):
            return []
        pairs = (_task_state(task) for task in tasks if isinstance(task, Mapping))
        return [pair for pair in pairs if pair is not None]
    if op in (Op.GET, Op.CANCEL):
        wrapped = result.get("task")
        if "id" not in result and isinstance(wrapped, Mapping):
            result = wrapped  # tolerate a 1.0 agent that wraps it like a send result
        pair = _task_state(result)
        return [pair] if pair is not None else []
    task_id, state = event_task_state(version, result)
    return [(task_id, state)] if task_id and state else []


def _task_state(task: Mapping[str, Any]) -> tuple[str, str] | None:
    task_id = task.get("id")
    state = _status_state(task)
    if isinstance(task_id, str) and task_id and state:
        return task_id, state
    return None
