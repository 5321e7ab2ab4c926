"""The ``A2A.``-prefixed 1.0 dialect (a 1.0 draft's JSON-RPC names: ``A2A.SendMessage``,
``A2A.GetTask``...) at the client edge, as pure functions on plain JSON (docs/dialects.md).

A call is the 1.0 method, with the draft's unambiguous spellings normalized
(:func:`prefixed_to_v1`); answers go back into the draft's shapes where seed 002 is
unambiguous (:func:`prefixed_result`: a bare Task with ``taskId``, bare states, roles
``user``/``agent``, ``structuredData`` and ``mimeType`` parts). The draft's names, roles and
states come from the tables of :mod:`router.protocol.versions`.

Nothing here changes its input; fields the client or agent sent that have no counterpart
pass through where they were.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from router.protocol.errors import METHOD_NOT_FOUND, RpcError
from router.protocol.versions import (
    METHODS,
    PREFIX,
    PREFIXED_ALIASES,
    ROLE_TABLE,
    TASK_STATES,
    Op,
)

__all__ = [
    "message_to_prefixed",
    "part_to_prefixed",
    "prefixed_event",
    "prefixed_result",
    "prefixed_to_v1",
    "task_to_prefixed",
]

# --- calls ----------------------------------------------------------------------------------

_STATE_PREFIX = "TASK_STATE_"
_ROLES_V1 = {role.draft: role.v1 for role in ROLE_TABLE}
# the draft's states: the 1.0 names without their prefix (and no UNSPECIFIED)
_STATES_V1 = frozenset(
    state.v1.removeprefix(_STATE_PREFIX)
    for state in TASK_STATES
    if state.v1 != "TASK_STATE_UNSPECIFIED"
)


def prefixed_to_v1(method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The 1.0 method and params of an ``A2A.``-prefixed call (a 1.0 draft's JSON-RPC names).

    The draft's spellings that mean one thing only are normalized: ``taskId`` for a
    get/cancel/subscribe's ``id``; roles ``user``/``agent``; parts ``{"structuredData"}``
    (-> ``data``), ``{"file": {"uri"|"bytes", "name"}}`` (-> ``url``/``raw``,
    ``filename``) and ``mimeType`` (-> ``mediaType``); ``configuration.blocking`` (->
    ``returnImmediately``, its negation); ListTasks ``status: "WORKING"`` (->
    ``TASK_STATE_WORKING``). -32601 for a name that is not a 1.0 method.
    """
    name = method.removeprefix(PREFIX)
    name = PREFIXED_ALIASES.get(name, name)
    if name not in METHODS["1.0"] and name != "GetExtendedAgentCard":
        raise RpcError(
            METHOD_NOT_FOUND,
            f"Method {method!r} does not exist: A2A.-prefixed names are the A2A 1.0 methods",
            {"method": method, "supportedMethods": [PREFIX + m for m in METHODS["1.0"]]},
        )
    out = copy.deepcopy(dict(params))
    op = METHODS["1.0"].get(name)
    if op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE) and "id" not in out and "taskId" in out:
        out["id"] = out.pop("taskId")
    elif op in (Op.SEND, Op.STREAM):
        _normalize_send_v1(out)
    elif op is Op.LIST:
        status = out.get("status")
        if isinstance(status, str) and status in _STATES_V1:
            out["status"] = f"TASK_STATE_{status}"
    return name, out


def _normalize_send_v1(params: dict[str, Any]) -> None:
    message = params.get("message")
    if isinstance(message, dict):
        role = message.get("role")
        if isinstance(role, str) and role in _ROLES_V1:
            message["role"] = _ROLES_V1[role]
        parts = message.get("parts")
        if isinstance(parts, list):
            message["parts"] = [_part_to_v1(part) for part in parts]
    config = params.get("configuration")
    if isinstance(config, dict) and isinstance(config.get("blocking"), bool):
        blocking = config.pop("blocking")
        config.setdefault("returnImmediately", not blocking)


def _part_to_v1(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    out = dict(part)
    if "structuredData" in out and "data" not in out:
        out["data"] = out.pop("structuredData")
    file = out.get("file")
    if isinstance(file, dict) and not any(key in out for key in ("url", "raw")):
        del out["file"]
        if file.get("uri") is not None:
            out["url"] = file["uri"]
        elif file.get("bytes") is not None:
            out["raw"] = file["bytes"]
        if file.get("name") is not None:
            out.setdefault("filename", file["name"])
        media = file.get("mimeType") or file.get("mediaType")
        if media is not None:
            out.setdefault("mediaType", media)
    if "mimeType" in out and "mediaType" not in out:
        out["mediaType"] = out.pop("mimeType")
    return out


# --- 1.0 answers -> the draft's shapes ------------------------------------------------------

_ROLES_DRAFT: dict[Any, str] = {role.v1: role.draft for role in ROLE_TABLE} | {
    role.number: role.draft for role in ROLE_TABLE
}


def prefixed_result(op: Op, result: Any) -> Any:
    """The 1.0 ``result`` of ``op`` in the shape seed 002's draft gives it.

    SendMessage: the bare Task or Message (not ``{"task"}``/``{"message"}``); GetTask,
    CancelTask: the Task; ListTasks: each task of ``tasks``; streams: as
    :func:`prefixed_event`. Other results (push configs) are left as they are.
    """
    if not isinstance(result, dict):
        return result
    if op is Op.SEND:
        if isinstance(result.get("task"), dict):
            return task_to_prefixed(result["task"])
        if isinstance(result.get("message"), dict):
            return message_to_prefixed(result["message"])
        return result
    if op in (Op.GET, Op.CANCEL):
        return task_to_prefixed(result)
    if op is Op.LIST and isinstance(result.get("tasks"), list):
        return {**result, "tasks": [task_to_prefixed(task) for task in result["tasks"]]}
    if op in (Op.STREAM, Op.SUBSCRIBE):
        return prefixed_event(result)
    return result


def prefixed_event(event: Any) -> Any:
    """A 1.0 stream response with the object it wraps in the draft's shape (the wrapper is
    the draft's ``StreamResponse`` too)."""
    if not isinstance(event, dict):
        return event
    out = dict(event)
    if isinstance(out.get("task"), dict):
        out["task"] = task_to_prefixed(out["task"])
    if isinstance(out.get("message"), dict):
        out["message"] = message_to_prefixed(out["message"])
    if isinstance(out.get("statusUpdate"), dict):
        update = dict(out["statusUpdate"])
        if "status" in update:
            update["status"] = _status_to_prefixed(update["status"])
        out["statusUpdate"] = update
    if isinstance(out.get("artifactUpdate"), dict):
        update = dict(out["artifactUpdate"])
        if "artifact" in update:
            update["artifact"] = _artifact_to_prefixed(update["artifact"])
        out["artifactUpdate"] = update
    return out


def task_to_prefixed(task: Any) -> Any:
    """A 1.0 Task in the draft's shape: ``taskId`` (not ``id``), bare states, the status
    message as its text, draft parts in history and artifacts."""
    if not isinstance(task, dict):
        return task
    out: dict[str, Any] = {}
    for key, value in task.items():
        if key == "id":
            out["taskId"] = value
        elif key == "status":
            out["status"] = _status_to_prefixed(value)
        elif key == "history" and isinstance(value, list):
            out["history"] = [message_to_prefixed(message) for message in value]
        elif key == "artifacts" and isinstance(value, list):
            out["artifacts"] = [_artifact_to_prefixed(artifact) for artifact in value]
        else:
            out[key] = value
    return out


def message_to_prefixed(message: Any) -> Any:
    """A 1.0 Message in the draft's shape: roles ``user``/``agent``, draft parts."""
    if not isinstance(message, dict):
        return message
    out = dict(message)
    role = out.get("role")
    if isinstance(role, str | int) and not isinstance(role, bool) and role in _ROLES_DRAFT:
        out["role"] = _ROLES_DRAFT[role]
    if isinstance(out.get("parts"), list):
        out["parts"] = [part_to_prefixed(part) for part in out["parts"]]
    return out


def part_to_prefixed(part: Any) -> Any:
    """A 1.0 part in the draft's shape: ``{"structuredData"}`` for data, ``{"file": {"uri"
    or "bytes", "name"}}`` for url/raw, ``mimeType`` for ``mediaType`` (top level)."""
    if not isinstance(part, dict):
        return part
    out: dict[str, Any] = {}
    file: dict[str, Any] = {}
    for key, value in part.items():
        if key == "data":
            out["structuredData"] = value
        elif key == "url":
            file["uri"] = value
        elif key == "raw":
            file["bytes"] = value
        elif key == "filename" and ("url" in part or "raw" in part):
            file["name"] = value
        elif key == "mediaType":
            out["mimeType"] = value
        else:
            out[key] = value
    if file:
        out["file"] = file
    return out


def _status_to_prefixed(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    out = dict(status)
    state = out.get("state")
    if isinstance(state, str) and state.startswith(_STATE_PREFIX):
        out["state"] = state.removeprefix(_STATE_PREFIX)
    message = out.get("message")
    if isinstance(message, dict):  # the draft's status message is a string
        parts = message.get("parts")
        texts = [
            part["text"]
            for part in (parts if isinstance(parts, list) else [])
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        out["message"] = "\n".join(texts)
    return out


def _artifact_to_prefixed(artifact: Any) -> Any:
    if not isinstance(artifact, dict) or not isinstance(artifact.get("parts"), list):
        return artifact
    return {**artifact, "parts": [part_to_prefixed(part) for part in artifact["parts"]]}
