"""A2A 0.3's HTTP+JSON bodies: the ProtoJSON of the 0.3 ``a2a.proto``, to and from the 0.3
JSON-RPC shapes the router serves.

The 0.3 REST binding (the official SDK's ``/v1`` paths) does not carry the JSON-RPC objects:
a ``SendMessageRequest`` holds the message under ``message`` with its parts under ``content``
(``{"text"}``, ``{"file": {"fileWithUri"|"fileWithBytes", "mimeType", "name"}}``,
``{"data": {"data"}}``), roles and task states are enum names (``ROLE_USER``,
``TASK_STATE_CANCELLED``), answers are wrapped (``{"task"}`` or ``{"message"}``; stream events
also ``{"statusUpdate"}``, ``{"artifactUpdate"}``) and carry no ``kind``. The SDK's client
parses answers strictly, so only the proto's fields are written.

For agents reached over the 0.3 HTTP+JSON binding the same mapping runs the other way:
:func:`request_out` writes a call's 0.3 JSON-RPC params as the ``/v1`` request body,
:func:`result_in` reads the agent's ProtoJSON answers back into 0.3 JSON-RPC results.
"""

from __future__ import annotations

from typing import Any

from router.protocol.versions import Op

__all__ = ["request_in", "request_out", "result_in", "result_out"]

_ROLE_IN = {"ROLE_USER": "user", "ROLE_AGENT": "agent", 1: "user", 2: "agent"}
_ROLE_OUT = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_STATE_OUT: dict[str, str] = {
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
    "auth-required": "TASK_STATE_AUTH_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "canceled": "TASK_STATE_CANCELLED",
    "failed": "TASK_STATE_FAILED",
    "rejected": "TASK_STATE_REJECTED",
    "unknown": "TASK_STATE_UNSPECIFIED",
}


# --- requests: ProtoJSON -> 0.3 JSON-RPC params ----------------------------------------------


def request_in(method: str, body: dict[str, Any]) -> dict[str, Any]:
    """The 0.3 JSON-RPC params of a ``/v1`` request body: a ``SendMessageRequest`` for the
    sends; for the others the path says everything (a cancel's ``name`` is ignored). A
    shape this does not know is passed on as it is, for the params check to judge."""
    if method == "tasks/pushNotificationConfig/set":
        return _push_config_in(_json_names(body))
    if method not in ("message/send", "message/stream"):
        return {}
    body = _json_names(body)
    params: dict[str, Any] = {}
    message = body.get("message", body.get("request"))
    params["message"] = _message_in(message) if isinstance(message, dict) else message
    config = body.get("configuration")
    if isinstance(config, dict):
        params["configuration"] = _config_in(config)
    elif config is not None:
        params["configuration"] = config
    if "metadata" in body:
        params["metadata"] = body["metadata"]
    return params


_OPAQUE = frozenset({"metadata", "data"})
"""Members whose values are the client's own (``Struct``s): their keys are never renamed."""


def _json_names(value: Any) -> Any:
    """``value`` with proto field names (``message_id``) read as their JSON names
    (``messageId``), as a ProtoJSON parser must accept both; the members of
    :data:`_OPAQUE` members are left as they are."""
    if isinstance(value, list):
        return [_json_names(item) for item in value]
    if not isinstance(value, dict):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _camel(key) if isinstance(key, str) else key
        if name in out and name != key:  # both spellings sent: the JSON name wins
            continue
        out[name] = item if name in _OPAQUE else _json_names(item)
    return out


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _push_config_in(body: dict[str, Any]) -> dict[str, Any]:
    """A ``CreateTaskPushNotificationConfigRequest`` (``{"parent", "configId", "config":
    {"name", "pushNotificationConfig"}}``; a bare ``TaskPushNotificationConfig`` too) as
    the 0.3 set's params; the task comes from the path. The config object itself has the
    same members in both forms."""
    outer = body.get("config", body)
    config = outer.get("pushNotificationConfig") if isinstance(outer, dict) else None
    if not isinstance(config, dict):
        return {"pushNotificationConfig": config} if config is not None else {}
    config = dict(config)
    if body.get("configId") and not config.get("id"):
        config["id"] = body["configId"]
    auth = config.get("authentication")
    if isinstance(auth, dict) and not auth.get("schemes") and not auth.get("credentials"):
        del config["authentication"]  # proto defaults: an empty message is an unset one
    return {"pushNotificationConfig": config}


def _message_in(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "message"}
    for key in ("messageId", "contextId", "taskId", "metadata", "extensions"):
        if message.get(key) not in (None, ""):
            out[key] = message[key]
    role = message.get("role")
    out["role"] = _ROLE_IN.get(role, role) if isinstance(role, str | int) else role
    parts = message.get("content", message.get("parts", []))
    out["parts"] = (
        [_part_in(p) if isinstance(p, dict) else p for p in parts]
        if isinstance(parts, list)
        else parts
    )
    return out


def _part_in(part: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any]
    if "text" in part:
        out = {"kind": "text", "text": part["text"]}
    elif isinstance(part.get("file"), dict):
        file = part["file"]
        inner: dict[str, Any] = {}
        if "fileWithUri" in file:
            inner["uri"] = file["fileWithUri"]
        if "fileWithBytes" in file:
            inner["bytes"] = file["fileWithBytes"]
        if file.get("mimeType"):
            inner["mimeType"] = file["mimeType"]
        if file.get("name"):
            inner["name"] = file["name"]
        out = {"kind": "file", "file": inner}
    elif isinstance(part.get("data"), dict):
        out = {"kind": "data", "data": part["data"].get("data", {})}
    else:
        return part
    if "metadata" in part:
        out["metadata"] = part["metadata"]
    return out


def _config_in(config: dict[str, Any]) -> dict[str, Any]:
    out = {
        k: config[k] for k in ("acceptedOutputModes", "historyLength", "blocking") if k in config
    }
    if "pushNotification" in config:
        out["pushNotificationConfig"] = config["pushNotification"]
    return out


# --- answers: 0.3 JSON-RPC results -> ProtoJSON ----------------------------------------------


def result_out(op: Op, result: Any, *, stream: bool = False) -> Any:
    """A 0.3 JSON-RPC result as the ``/v1`` answer: a send's task or message wrapped
    (``{"task"}``/``{"message"}``), a stream event wrapped as a ``StreamResponse``, a task
    as a proto ``Task``; anything else as it is (the extended card too: the 0.3 SDK serves
    and reads the card's JSON on ``/v1/card``)."""
    if op is Op.PUSH_CONFIG:
        return _push_config_out(result)
    if not isinstance(result, dict):
        return result
    kind = result.get("kind")
    if op in (Op.SEND, Op.STREAM, Op.SUBSCRIBE) or stream:
        if kind == "message":
            return {"message": _message_out(result)}
        if kind == "status-update":
            return {"statusUpdate": _status_update_out(result)}
        if kind == "artifact-update":
            return {"artifactUpdate": _artifact_update_out(result)}
        return {"task": _task_out(result)}
    if op in (Op.GET, Op.CANCEL) or kind == "task":
        return _task_out(result)
    return result


def _push_config_out(result: Any) -> Any:
    """A 0.3 ``TaskPushNotificationConfig`` (``{"taskId", "pushNotificationConfig"}``) as
    the proto's (``{"name": "tasks/T/pushNotificationConfigs/C", "pushNotificationConfig"}``);
    a list of them as ``{"configs": [...]}``."""
    if isinstance(result, list):
        return {"configs": [_push_config_out(item) for item in result]}
    if not isinstance(result, dict) or "taskId" not in result:
        return result
    config = result.get("pushNotificationConfig")
    config_id = config.get("id") if isinstance(config, dict) else None
    name = f"tasks/{result['taskId']}/pushNotificationConfigs/{config_id or result['taskId']}"
    return {"name": name, "pushNotificationConfig": config}


def _some(source: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: source[key] for key in keys if source.get(key) is not None}


def _task_out(task: dict[str, Any]) -> dict[str, Any]:
    out = _some(task, ("id", "contextId", "metadata"))
    if isinstance(task.get("status"), dict):
        out["status"] = _status_out(task["status"])
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [_artifact_out(a) for a in task["artifacts"] if isinstance(a, dict)]
    if isinstance(task.get("history"), list):
        out["history"] = [_message_out(m) for m in task["history"] if isinstance(m, dict)]
    return out


def _status_out(status: dict[str, Any]) -> dict[str, Any]:
    state = status.get("state")
    out: dict[str, Any] = {"state": _STATE_OUT.get(state, "TASK_STATE_UNSPECIFIED")}
    if isinstance(status.get("message"), dict):
        out["message"] = _message_out(status["message"])
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    return out


def _message_out(message: dict[str, Any]) -> dict[str, Any]:
    out = _some(message, ("messageId", "contextId", "taskId", "metadata", "extensions"))
    role = message.get("role")
    out["role"] = _ROLE_OUT.get(role, "ROLE_UNSPECIFIED") if isinstance(role, str) else role
    parts = message.get("parts")
    out["content"] = (
        [_part_out(p) for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    )
    return out


def _artifact_out(artifact: dict[str, Any]) -> dict[str, Any]:
    out = _some(artifact, ("artifactId", "name", "description", "metadata", "extensions"))
    parts = artifact.get("parts")
    out["parts"] = (
        [_part_out(p) for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    )
    return out


def _part_out(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("kind")
    out: dict[str, Any]
    if kind == "file" and isinstance(part.get("file"), dict):
        file = part["file"]
        inner: dict[str, Any] = {}
        if "uri" in file:
            inner["fileWithUri"] = file["uri"]
        elif "bytes" in file:
            inner["fileWithBytes"] = file["bytes"]
        if file.get("mimeType"):
            inner["mimeType"] = file["mimeType"]
        if file.get("name"):
            inner["name"] = file["name"]
        out = {"file": inner}
    elif kind == "data":
        out = {"data": {"data": part.get("data") if isinstance(part.get("data"), dict) else {}}}
    else:
        out = {"text": part.get("text", "")}
    if isinstance(part.get("metadata"), dict):
        out["metadata"] = part["metadata"]
    return out


def _status_update_out(event: dict[str, Any]) -> dict[str, Any]:
    out = _some(event, ("taskId", "contextId", "final", "metadata"))
    if isinstance(event.get("status"), dict):
        out["status"] = _status_out(event["status"])
    return out


def _artifact_update_out(event: dict[str, Any]) -> dict[str, Any]:
    out = _some(event, ("taskId", "contextId", "append", "lastChunk", "metadata"))
    if isinstance(event.get("artifact"), dict):
        out["artifact"] = _artifact_out(event["artifact"])
    return out


# --- the client direction: 0.3 JSON-RPC params -> ProtoJSON, ProtoJSON answers -> results ----

_STATE_IN = {name: state for state, name in _STATE_OUT.items()}
_STATE_IN["TASK_STATE_CANCELED"] = "canceled"  # the 1.0 spelling, from an agent that mixes


def request_out(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The ``/v1`` request body of a 0.3 JSON-RPC call: a ``SendMessageRequest`` for the
    sends (a ``message/send`` that does not say ``blocking`` says ``blocking: true``, which
    JSON-RPC's absent field means and the proto's does not), ``{"name": "tasks/<id>"}`` for
    a cancel, the params as they are otherwise."""
    if method == "tasks/cancel":
        return {"name": f"tasks/{params.get('id', '')}"}
    if method not in ("message/send", "message/stream"):
        return dict(params)
    body: dict[str, Any] = {}
    message = params.get("message")
    body["message"] = _message_out(message) if isinstance(message, dict) else message
    config = params.get("configuration")
    config = config if isinstance(config, dict) else {}
    keys = ("acceptedOutputModes", "historyLength", "blocking")
    out = {k: config[k] for k in keys if k in config}
    if "pushNotificationConfig" in config:
        out["pushNotification"] = config["pushNotificationConfig"]
    if method == "message/send":  # JSON-RPC's absent ``blocking`` blocks; the proto's is false
        out.setdefault("blocking", True)
    body["configuration"] = out
    if "metadata" in params:
        body["metadata"] = params["metadata"]
    return body


def result_in(result: Any) -> Any:
    """A ``/v1`` answer as the 0.3 JSON-RPC result: a wrapped ``{"task"}``, ``{"message"}``
    (``{"msg"}``), ``{"statusUpdate"}`` or ``{"artifactUpdate"}`` unwrapped, a bare proto
    ``Task`` (get, cancel) with its ``kind``; anything else (a card, a push config) as it is."""
    if not isinstance(result, dict):
        return result
    if len(result) == 1:
        ((key, value),) = result.items()
        if isinstance(value, dict):
            if key == "task":
                return _task_in(value)
            if key in ("message", "msg"):
                return _message_in_result(value)
            if key == "statusUpdate":
                return _status_update_in(value)
            if key == "artifactUpdate":
                return _artifact_update_in(value)
    if "status" in result and "id" in result:
        return _task_in(result)
    return result


def _task_in(task: dict[str, Any]) -> dict[str, Any]:
    out = _some(task, ("id", "contextId", "metadata"))
    out["kind"] = "task"
    out["status"] = _status_in(task.get("status") if isinstance(task.get("status"), dict) else {})
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [_artifact_in(a) for a in task["artifacts"] if isinstance(a, dict)]
    if isinstance(task.get("history"), list):
        out["history"] = [_message_in_result(m) for m in task["history"] if isinstance(m, dict)]
    return out


def _status_in(status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": _STATE_IN.get(status.get("state"), "unknown")}
    message = status.get("message", status.get("update"))
    if isinstance(message, dict):
        out["message"] = _message_in_result(message)
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    return out


def _message_in_result(message: dict[str, Any]) -> dict[str, Any]:
    out = _message_in(message)
    if out.get("role") not in ("user", "agent"):
        out["role"] = "agent"
    return out


def _artifact_in(artifact: dict[str, Any]) -> dict[str, Any]:
    out = _some(artifact, ("artifactId", "name", "description", "metadata", "extensions"))
    parts = artifact.get("parts", artifact.get("content", []))
    parts = parts if isinstance(parts, list) else []
    out["parts"] = [_part_in(p) for p in parts if isinstance(p, dict)]
    return out


def _status_update_in(event: dict[str, Any]) -> dict[str, Any]:
    out = _some(event, ("taskId", "contextId", "metadata"))
    out["kind"] = "status-update"
    out["status"] = _status_in(event.get("status") if isinstance(event.get("status"), dict) else {})
    out["final"] = bool(event.get("final", False))
    return out


def _artifact_update_in(event: dict[str, Any]) -> dict[str, Any]:
    out = _some(event, ("taskId", "contextId", "metadata"))
    out["kind"] = "artifact-update"
    if isinstance(event.get("artifact"), dict):
        out["artifact"] = _artifact_in(event["artifact"])
    for key in ("append", "lastChunk"):
        if key in event:
            out[key] = bool(event[key])
    return out
