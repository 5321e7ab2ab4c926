"""Translating A2A JSON between protocol versions 0.3 and 1.0, as pure functions.

Everything here takes plain JSON (dicts, lists, strings, numbers) and returns new objects; the
input is never changed and no model is built. Same-version calls never come here: the router
only translates when a client and its agent speak different versions.

- :func:`params_to` a request's params (client -> agent);
- :func:`result_to` the result of send/get/cancel, :func:`event_to` one stream event,
  :func:`error_to` a JSON-RPC error object (agent -> client).

Unknown members pass through untouched. A member with no counterpart in the other version is
kept in the nearest ``metadata`` under :data:`router.compat.carry.CARRY_KEY` and put back on
the way back, so the round trip 0.3 -> 1.0 -> 0.3 gives back what went in (property-tested).
``docs/translation.md`` lists every mapping and every lossy case; the same table, with an
example of each row, is ``tests/support/translation_table.py`` (a test compares them and runs the
examples). Push notification configs are :mod:`router.compat.push`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from router.compat.carry import CARRY_KEY, carried_values, carry, uncarry
from router.compat.push import push_config_to
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
from router.protocol.payloads import V1_PART_CONTENT
from router.protocol.timestamps import parse_timestamp, status_timestamp
from router.protocol.versions import (
    Op,
    Version,
    is_interrupted_state,
    is_terminal_state,
    role_name,
    task_state,
)
from router.tracing.spans import traced_translation

__all__ = [
    "DATA_COMPAT_KEY",
    "asks_no_history",
    "error_to",
    "event_to",
    "message_to",
    "params_to",
    "part_to",
    "result_to",
    "role_to",
    "state_to",
    "task_to",
    "timestamp_to",
]

DATA_COMPAT_KEY = "data_part_compat"
"""The a2a-sdk's own marker (part metadata) of a 1.0 non-object data value wrapped for 0.3 as
``{"value": ...}``; the SDK's 0.3 compatibility layer reads and writes it, so Switchboard does
too."""

_STREAM_KEYS = {kind: key for key, kind in V1_EVENT_KEYS.items()}
_SEND_OPS = (Op.SEND, Op.STREAM)


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
    """One message or artifact part in ``dst``'s shape (see docs/translation.md)."""
    if src == dst or not isinstance(part, dict):
        return part
    return _part_to_v1(part) if dst == "1.0" else _part_to_v03(part)


def _part_to_v1(part: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in part.items() if k not in ("kind", "file")}
    keep_empty = carried_values(part).get("metadata") == {}
    carried = uncarry(out)
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
            carry(out, {"file": file})
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
        carry(out, carried)
    return out


def _part_to_v03(part: dict[str, Any]) -> dict[str, Any]:
    content = [key for key in V1_PART_CONTENT if key in part]
    if len(content) != 1:
        return dict(part)  # not a 1.0 part: left for the client to judge
    key = content[0]
    out = {k: v for k, v in part.items() if k not in (key, "mediaType", "filename")}
    carried = uncarry(out)
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
    carry(out, {**carried, **extra})
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
    carried = uncarry(out) if dst == "0.3" else {}
    found: dict[str, Any] = {}
    if "status" in out:
        out["status"] = _status(out["status"], src, dst, carried if dst == "0.3" else found)
    if dst == "0.3" and "statusTimestamp" in carried:  # no status to put it back in
        found["statusTimestamp"] = carried.pop("statusTimestamp")
    carry(out, {**carried, **found})
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
    """A status update; 0.3 ``final`` is implied by the state in 1.0 (see docs/translation.md)."""
    out = {k: v for k, v in event.items() if k not in ("kind", "final")}
    status = out.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    ends = is_terminal_state(src, state) or is_interrupted_state(src, state)
    if dst == "1.0" and event.get("final") is True and not ends:
        carry(out, {"final": True})  # a 0.3 stream that ends where 1.0 would not
    out = _with_status(out, src, dst)
    if dst == "0.3":
        carried = uncarry(out)
        final = carried.pop("final", ends)
        carry(out, carried)
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


@traced_translation("result")
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


@traced_translation("params")
def params_to(op: Op, params: Mapping[str, Any], src: Version, dst: Version) -> dict[str, Any]:
    """A request's params in ``dst``'s shape (see docs/translation.md).

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
        carried = uncarry(out)
        if "tenant" in carried:
            out["tenant"] = carried.pop("tenant")
        if carried:
            carry(out, carried)
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
        carry(out, tenant_to_carry)
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
            out["taskPushNotificationConfig"] = push_config_to(
                out.pop("pushNotificationConfig"), dst
            )
    else:
        immediately = out.pop("returnImmediately", None)
        if immediately is True:
            out["blocking"] = False
        if "taskPushNotificationConfig" in out:
            out["pushNotificationConfig"] = push_config_to(
                out.pop("taskPushNotificationConfig"), dst
            )
    return out


# --- errors ------------------------------------------------------------------------------------


@traced_translation("error")
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
