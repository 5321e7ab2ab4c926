"""Proto field names in requests: ``task_id`` read as ``taskId``.

ProtoJSON parsers accept a field under its proto name as well as its JSON name (A2A 1.0: the
a2a-sdk's parser does; A2A 0.3: the SDK's pydantic models accept both too), so a client may
send ``{"message": {"task_id": ...}}`` or ``{"configuration": {"history_length": 2}}`` and an
agent reads it. The router reads and rewrites the JSON names (``taskId`` carries an ID it must
rewrite), so :func:`json_names` renames the proto names of the fields A2A defines, at the
places A2A defines them, before anything else reads the params. Nothing else changes: free
JSON (``metadata``, data parts, unknown fields) keeps its keys as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Names = Mapping[str, str]
"""Proto name -> JSON name, for the fields of one kind of object."""

_MESSAGE: dict[str, Names] = {
    "1.0": {
        "message_id": "messageId",
        "context_id": "contextId",
        "task_id": "taskId",
        "reference_task_ids": "referenceTaskIds",
    },
    "0.3": {
        "message_id": "messageId",
        "context_id": "contextId",
        "task_id": "taskId",
        "reference_task_ids": "referenceTaskIds",
    },
}
_PART: dict[str, Names] = {"1.0": {"media_type": "mediaType"}, "0.3": {}}
_FILE_03: Names = {"mime_type": "mimeType"}
_CONFIGURATION: dict[str, Names] = {
    "1.0": {
        "accepted_output_modes": "acceptedOutputModes",
        "task_push_notification_config": "taskPushNotificationConfig",
        "history_length": "historyLength",
        "return_immediately": "returnImmediately",
    },
    "0.3": {
        "accepted_output_modes": "acceptedOutputModes",
        "push_notification_config": "pushNotificationConfig",
        "history_length": "historyLength",
    },
}
_TOP: dict[tuple[str, str], Names] = {  # (version, op): see router.protocol.envelope.Op
    ("1.0", "get"): {"history_length": "historyLength"},
    ("0.3", "get"): {"history_length": "historyLength"},
    ("1.0", "push-config"): {"task_id": "taskId"},
    ("0.3", "push-config"): {
        "task_id": "taskId",
        "push_notification_config": "pushNotificationConfig",
        "push_notification_config_id": "pushNotificationConfigId",
    },
    ("1.0", "list"): {
        "context_id": "contextId",
        "page_size": "pageSize",
        "page_token": "pageToken",
        "history_length": "historyLength",
        "status_timestamp_after": "statusTimestampAfter",
        "include_artifacts": "includeArtifacts",
    },
}


def json_names(
    version: str, op: str, params: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``params`` of an ``op`` call (a :class:`router.protocol.envelope.Op` value) with A2A's proto
    field names renamed to their JSON names (a copy where anything changes), and the violations:
    each field given under both names, by its path."""
    clashes: list[tuple[str, str]] = []
    out = _renamed(params, _TOP.get((version, op), {}), "", clashes)
    if op in ("send", "stream"):
        message = out.get("message")
        if isinstance(message, dict):
            message = _renamed(message, _MESSAGE[version], "message.", clashes)
            parts = message.get("parts")
            if isinstance(parts, list):
                renamed = [
                    _part(version, part, f"message.parts[{n}].", clashes)
                    for n, part in enumerate(parts)
                ]
                if any(a is not b for a, b in zip(renamed, parts, strict=True)):
                    message = {**message, "parts": renamed}
            if message is not out["message"]:
                out = {**out, "message": message}
        config = out.get("configuration")
        if isinstance(config, dict):
            renamed_config = _renamed(config, _CONFIGURATION[version], "configuration.", clashes)
            if renamed_config is not config:
                out = {**out, "configuration": renamed_config}
    return out, clashes


def _part(version: str, part: Any, path: str, clashes: list[tuple[str, str]]) -> Any:
    if not isinstance(part, dict):
        return part
    part = _renamed(part, _PART[version], path, clashes)
    file = part.get("file")
    if version == "0.3" and isinstance(file, dict):
        renamed = _renamed(file, _FILE_03, f"{path}file.", clashes)
        if renamed is not file:
            part = {**part, "file": renamed}
    return part


def _renamed(
    obj: dict[str, Any], names: Names, path: str, clashes: list[tuple[str, str]]
) -> dict[str, Any]:
    """``obj`` itself when it uses no proto name of ``names``, else a renamed copy (key
    order kept); a field under both names is a clash (the proto name is dropped)."""
    if not names or not any(key in names for key in obj):
        return obj
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = names.get(key)
        if name is None:
            out[key] = value
        elif name in obj:
            clashes.append((f"{path}{key}", f"names the same field as {name!r}: send one"))
        else:
            out[name] = value
    return out
