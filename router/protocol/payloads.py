"""The params of A2A 0.3 and 1.0 calls: their checks, and what the router reads from them
(the message, its parts' media types and text, the task ID, accepted output modes); pure
functions on plain JSON.

Nothing here copies or rebuilds a payload: the functions read and check the client's JSON as
it is. The two shapes, as the official SDKs put them on the wire:

- parts: 0.3 ``{"kind": "text", "text": ..}``, ``{"kind": "file", "file": {"bytes"|"uri",
  "mimeType"}}``, ``{"kind": "data", "data": {..}}``; 1.0 ``{"text"}``, ``{"raw"}``, ``{"url"}``,
  ``{"data"}`` with an optional ``mediaType``;
- roles ``user``/``agent`` vs ``ROLE_USER``/``ROLE_AGENT`` (:mod:`router.protocol.versions`).

The violation helpers (:func:`missing_or`, :func:`check_object`, :func:`params_error`...) are
shared with the other readers of params (:mod:`router.protocol.listing`, the v0.1 dialect).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.protocol.errors import INVALID_PARAMS, RpcError
from router.protocol.versions import ROLE_NUMBERS, ROLES, Op, Version

__all__ = [
    "INT32_MAX",
    "MAX_ID_LENGTH",
    "V1_PART_CONTENT",
    "accepted_output_modes",
    "check_history_length",
    "check_object",
    "check_send_params",
    "check_task_params",
    "int_param",
    "json_type",
    "message_of",
    "message_task_id",
    "message_text",
    "missing_or",
    "params_error",
    "part_media_types",
    "shown",
    "task_id_param",
]

V1_PART_CONTENT = ("text", "raw", "url", "data")  # the members of which a 1.0 part holds one
_V03_KINDS = ("text", "file", "data")

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


# the member of a send's configuration that carries a push notification config
_PUSH_CONFIG_KEY: dict[Version, str] = {
    "0.3": "pushNotificationConfig",
    "1.0": "taskPushNotificationConfig",
}


def check_send_params(version: Version, params: Mapping[str, Any]) -> None:
    """Every check of the params of a send/stream call (``parse_request`` runs it).

    -32602 listing each violation by its full path: the message (see :func:`message_of`),
    ``metadata`` and ``message.metadata`` (objects), ``configuration`` (an object),
    ``configuration.acceptedOutputModes`` (an array of strings),
    ``configuration.historyLength`` (a non-negative int32), ``configuration.blocking`` (0.3)
    / ``configuration.returnImmediately`` (1.0) (booleans), the push notification config
    (0.3 ``configuration.pushNotificationConfig``, 1.0
    ``configuration.taskPushNotificationConfig``: an object; the router checks its members
    when it stores it, :mod:`router.forward.push`).
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
        push = _PUSH_CONFIG_KEY[version]
        check_object(config.get(push), f"configuration.{push}", violations)
        other = _PUSH_CONFIG_KEY["1.0" if version == "0.3" else "0.3"]
        if config.get(other) is not None:  # never forwarded as an unknown member
            violations.append(
                (f"configuration.{other}", f"is not an A2A {version} field: use {push}")
            )
    if violations:
        raise params_error(violations)


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
    check_history_length(config, "configuration.historyLength", violations)
    flag = "blocking" if version == "0.3" else "returnImmediately"
    value = config.get(flag)
    if value is not None and not isinstance(value, bool):
        violations.append((f"configuration.{flag}", f"must be a boolean, not {json_type(value)}"))


def check_history_length(
    params: Mapping[str, Any], field: str, violations: list[tuple[str, str]]
) -> int | None:
    """An optional ``historyLength``: a non-negative int32 (ProtoJSON: a number or a decimal
    string)."""
    value = params.get("historyLength")
    if value is None:
        return None
    number = int_param(value)
    if number is None or not 0 <= number <= INT32_MAX:
        violations.append((field, f"must be a non-negative integer, got {shown(value)}"))
        return None
    return number


def shown(value: Any) -> str:
    """``value`` as Python shows it, cut to 40 characters, for error messages."""
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
    present = [key for key in V1_PART_CONTENT if key in part]
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
    """Every check of the params of a get/cancel/subscribe/push-config call (``parse_request``
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
        check_history_length(params, "historyLength", violations)
    if op is not Op.PUSH_CONFIG:
        check_object(params.get("metadata"), "metadata", violations)
    if violations:
        raise params_error(violations)
    return task_id


def check_push_config_params(version: Version, method: str, params: Mapping[str, Any]) -> None:
    """The checks of a push notification config call beyond its task: a 0.3 ``set`` needs a
    ``pushNotificationConfig`` object; the config id (1.0 ``id``, 0.3
    ``pushNotificationConfigId``) is a string when given. -32602 naming the field."""
    violations: list[tuple[str, str]] = []
    if method == "tasks/pushNotificationConfig/set":
        inner = params.get("pushNotificationConfig")
        if not isinstance(inner, dict):
            violations.append(("pushNotificationConfig", missing_or(inner, "an object")))
    else:
        field = "pushNotificationConfigId" if version == "0.3" else "id"
        value = params.get(field)
        if value is not None and not isinstance(value, str):
            violations.append((field, f"must be a string, not {json_type(value)}"))
    if violations:
        raise params_error(violations)


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


def int_param(value: Any) -> int | None:
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


# --- stream events --------------------------------------------------------------------------
