"""The A2A v0.1 dialect (the ``tasks/send`` draft) at the client edge, as pure functions on
plain JSON (docs/dialects.md).

``tasks/send``, ``tasks/sendSubscribe``, ``tasks/get``, ``tasks/cancel``,
``tasks/resubscribe``, ``tasks/pushNotification/set|get`` and ``agent/getCard`` (the method
table is :data:`router.protocol.versions.V01_METHODS`), with ``sessionId`` and ``type``-tagged
parts. A call becomes the equivalent A2A 0.3 call (:func:`v01_to_v03`) and every 0.3 answer
goes back into the v0.1 shape (:func:`v03_result_to_v01`, :func:`v03_event_to_v01`,
:func:`card_to_v01`). The client chooses the task ID in v0.1; mapping it to a router task is
the caller's job (:mod:`router.compat.codec`), so the functions here take the ID to answer
with.

Nothing here changes its input; fields the client or agent sent that have no counterpart
pass through where they were.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from router.protocol.payloads import (
    INT32_MAX,
    MAX_ID_LENGTH,
    check_object,
    json_type,
    missing_or,
    params_error,
)
from router.protocol.stored import NUL, NUL_RULE, nul_fields
from router.protocol.versions import ROLES, TASK_STATES, V01_METHODS, Op, task_state

__all__ = [
    "STATE_KEY",
    "V01Call",
    "card_to_v01",
    "message_to_v01",
    "part_to_v01",
    "push_config_to_v01",
    "state_to_v01",
    "task_to_v01",
    "v01_to_v03",
    "v03_event_to_v01",
    "v03_result_to_v01",
]

STATE_KEY = "switchboard.state"  # metadata key holding a 0.3 state v0.1 cannot name exactly

_TERMINAL = frozenset(state.v03 for state in TASK_STATES if state.terminal)
_INTERRUPTED = frozenset(state.v03 for state in TASK_STATES if state.interrupted)
_PART_TYPES = ("text", "file", "data")
_V03_ID_FIELDS = ("kind", "taskId", "contextId", "referenceTaskIds")  # not in v0.1 messages


# --- v0.1 requests -> 0.3 ---------------------------------------------------------------------


@dataclass(frozen=True)
class V01Call:
    """A v0.1 call as the 0.3 call the router serves.

    ``params`` are 0.3 params; the task ID the client chose is ``client_task_id`` (not yet
    mapped: a send carries no ``message.taskId`` and a get/cancel's ``id`` is the client's,
    until :mod:`router.compat.codec` resolves it).
    """

    op: Op
    method: str  # the 0.3 method ("" for agent/getCard)
    params: dict[str, Any]
    client_task_id: str | None


def v01_to_v03(method: str, params: Mapping[str, Any]) -> V01Call:
    """The 0.3 equivalent of v0.1 ``method`` with ``params``.

    -32602 naming every bad field in its v0.1 path (``data.fields``).

    A task has one push notification config in v0.1: ``tasks/pushNotification/set|get`` and
    a send's ``pushNotification`` become the 0.3 config whose id is the client's task ID
    (:func:`push_config_to_v01` puts the answer back).
    """
    op, method03 = V01_METHODS[method]
    if op is Op.CARD:
        return V01Call(op, "", {}, None)
    violations: list[tuple[str, str]] = []
    task_id = _client_task_id(params, violations)
    out = copy.deepcopy(dict(params))
    check_object(params.get("metadata"), "metadata", violations)
    if op in (Op.SEND, Op.STREAM):
        out = _send_params(out, violations)
    elif op is Op.PUSH_CONFIG:
        out = _push_params(method03 or "", out, task_id)
    else:
        out.pop("sessionId", None)  # a task ID names the task; the session adds nothing
        if op is Op.GET:
            _check_history_length(params.get("historyLength"), "historyLength", violations)
    if violations:
        raise params_error(violations)
    return V01Call(op, method03 or "", out, task_id)


def _client_task_id(params: Mapping[str, Any], violations: list[tuple[str, str]]) -> str:
    value = params.get("id")
    if not isinstance(value, str) or not value:
        violations.append(("id", missing_or(value, "the task id string the client chose")))
        return ""
    if len(value) > MAX_ID_LENGTH:
        violations.append(("id", f"must be at most {MAX_ID_LENGTH} characters long"))
        return ""
    if NUL in value:  # stored (the client's task ID), see router.protocol.stored
        violations.append(("id", NUL_RULE))
        return ""
    return value


def _push_params(method03: str, params: dict[str, Any], task_id: str) -> dict[str, Any]:
    """tasks/pushNotification/set|get params -> the 0.3 ones, about the config whose id is
    the client's task ID (``params`` is a private copy)."""
    if method03 == "tasks/pushNotificationConfig/set":
        config = params.get("pushNotificationConfig")
        if isinstance(config, dict):
            config = {**config, "id": task_id}
        return {"taskId": task_id, "pushNotificationConfig": config}
    return {"id": task_id, "pushNotificationConfigId": task_id}


def push_config_to_v01(result: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    """A 0.3 ``TaskPushNotificationConfig`` as v0.1's: ``{id, pushNotificationConfig}`` named
    by the client's task ID (v0.1 configs have no id of their own)."""
    config = result.get("pushNotificationConfig")
    if isinstance(config, Mapping):
        config = {k: v for k, v in config.items() if k != "id"}
    return {"id": task_id, "pushNotificationConfig": config}


def _send_params(params: dict[str, Any], violations: list[tuple[str, str]]) -> dict[str, Any]:
    """tasks/send params -> message/send params (``params`` is a private copy)."""
    client_task_id = params.pop("id", None)
    session = params.pop("sessionId", None)
    if session is not None and (
        not isinstance(session, str) or not session or len(session) > MAX_ID_LENGTH
    ):
        violations.append(("sessionId", f"must be a string of 1 to {MAX_ID_LENGTH} characters"))
        session = None
    elif session is not None and NUL in session:
        violations.append(("sessionId", NUL_RULE))
        session = None
    push = params.pop("pushNotification", None)
    violations += [(field, NUL_RULE) for field in nul_fields(push, "pushNotification")]
    config: dict[str, Any] = {}
    if push is not None:
        if not isinstance(push, dict):
            violations.append(("pushNotification", f"must be an object, not {json_type(push)}"))
        else:  # the task's one config: its id is the client's task ID
            config["pushNotificationConfig"] = {**push, "id": client_task_id}
    modes = params.pop("acceptedOutputModes", None)
    if modes is not None:
        if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
            violations.append(("acceptedOutputModes", "must be an array of media type strings"))
        else:
            config["acceptedOutputModes"] = modes
    history = params.pop("historyLength", None)
    if _check_history_length(history, "historyLength", violations):
        config["historyLength"] = history
    if config:
        params["configuration"] = config
    message = params.get("message")
    if not isinstance(message, dict):
        violations.append(("message", missing_or(message, "an object")))
        return params
    params["message"] = _message_to_v03(message, session, violations)
    return params


def _message_to_v03(
    message: dict[str, Any], session: str | None, violations: list[tuple[str, str]]
) -> dict[str, Any]:
    role = message.get("role")
    if role not in ROLES["0.3"]:  # v0.1 spells roles as 0.3 does
        allowed = " or ".join(f'"{name}"' for name in ROLES["0.3"])
        violations.append(("message.role", missing_or(role, allowed)))
    out: dict[str, Any] = {"kind": "message"}
    out.update(message)
    out["kind"] = "message"
    out["messageId"] = message.get("messageId") or str(uuid.uuid4())  # required in 0.3
    if session is not None:
        out["contextId"] = session
    check_object(message.get("metadata"), "message.metadata", violations)
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        problem = "must hold at least one part" if parts == [] else None
        violations.append(("message.parts", problem or missing_or(parts, "an array")))
        return out
    out["parts"] = [
        _part_to_v03(part, f"message.parts[{index}]", violations)
        for index, part in enumerate(parts)
    ]
    return out


def _part_to_v03(part: Any, field: str, violations: list[tuple[str, str]]) -> Any:
    if not isinstance(part, dict):
        violations.append((field, f"must be an object, not {json_type(part)}"))
        return part
    kind = part.get("type", part.get("kind"))  # a 0.3 kind-tagged part is accepted as well
    if kind not in _PART_TYPES:
        shown = json.dumps(kind)[:40] if kind is not None else None
        rule = f'must be "text", "file" or "data", not {shown}' if shown else "is required"
        violations.append((f"{field}.type", rule))
        return part
    if kind == "text" and not isinstance(part.get("text"), str):
        violations.append((f"{field}.text", "must be a string"))
    elif kind == "data" and not isinstance(part.get("data"), dict):
        violations.append((f"{field}.data", "must be an object"))
    elif kind == "file":
        _check_file(part.get("file"), f"{field}.file", violations)
    out = {"kind": kind}
    out.update((key, value) for key, value in part.items() if key not in ("type", "kind"))
    return out


def _check_file(file: Any, field: str, violations: list[tuple[str, str]]) -> None:
    if not isinstance(file, dict):
        violations.append((field, missing_or(file, 'an object with "bytes" or "uri"')))
        return
    present = [key for key in ("bytes", "uri") if file.get(key) is not None]
    if len(present) != 1 or not isinstance(file[present[0]], str):
        violations.append((field, 'must hold exactly one of "bytes" (base64) and "uri" (strings)'))
    for key in ("mimeType", "name"):
        if file.get(key) is not None and not isinstance(file[key], str):
            violations.append((f"{field}.{key}", "must be a string"))


# --- 0.3 answers -> v0.1 ----------------------------------------------------------------------


def state_to_v01(state: Any) -> tuple[Any, bool]:
    """A 0.3 task state in v0.1 and whether that lost something (auth-required ->
    input-required, rejected -> failed). Unknown values pass unchanged."""
    row = task_state(state) if isinstance(state, str) else None
    if row is None or row.v03 != state:
        return state, False
    return row.v01, row.v01 != state


def part_to_v01(part: Any) -> Any:
    """A 0.3 ``kind``-tagged part as a v0.1 ``type``-tagged part (other members as they are)."""
    if not isinstance(part, dict) or "kind" not in part:
        return part
    out = {"type": part["kind"]}
    out.update((key, value) for key, value in part.items() if key != "kind")
    return out


def _parts_to_v01(parts: Any) -> Any:
    return [part_to_v01(part) for part in parts] if isinstance(parts, list) else parts


def message_to_v01(message: Any) -> Any:
    """A 0.3 Message in v0.1: type-tagged parts, without ``kind`` and the 0.3 ID members
    (``taskId``, ``contextId``, ``referenceTaskIds``), which a v0.1 client cannot use."""
    if not isinstance(message, dict):
        return message
    out = {key: value for key, value in message.items() if key not in _V03_ID_FIELDS}
    if "parts" in out:
        out["parts"] = _parts_to_v01(out["parts"])
    return out


def _status_to_v01(status: Any, metadata: dict[str, Any]) -> Any:
    if not isinstance(status, dict):
        return status
    out = dict(status)
    state, lossy = state_to_v01(status.get("state"))
    out["state"] = state
    if lossy:
        metadata[STATE_KEY] = status["state"]
    if isinstance(out.get("message"), dict):
        out["message"] = message_to_v01(out["message"])
    return out


def _artifact_to_v01(artifact: Any, index: int) -> Any:
    if not isinstance(artifact, dict):
        return artifact
    out = dict(artifact)
    if "parts" in out:
        out["parts"] = _parts_to_v01(out["parts"])
    out["index"] = index
    return out


def _with_metadata(obj: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    if extra:
        existing = obj.get("metadata")
        obj["metadata"] = {**(existing if isinstance(existing, dict) else {}), **extra}
    return obj


def task_to_v01(task: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    """A 0.3 Task as a v0.1 Task named ``task_id`` (the client's ID): ``contextId`` becomes
    ``sessionId``; status, history and artifacts (with their ``index``) in v0.1 shape."""
    extra: dict[str, Any] = {}
    out: dict[str, Any] = {"id": task_id}
    if task.get("contextId"):
        out["sessionId"] = task["contextId"]
    out["status"] = _status_to_v01(task.get("status"), extra)
    for key, value in task.items():
        if key in ("id", "kind", "contextId", "status"):
            continue
        if key == "artifacts" and isinstance(value, list):
            value = [_artifact_to_v01(artifact, i) for i, artifact in enumerate(value)]
        elif key == "history" and isinstance(value, list):
            value = [message_to_v01(message) for message in value]
        out[key] = value
    return _with_metadata(out, extra)


def v03_result_to_v01(
    result: Any, task_id: str, session_id: str | None, now: str
) -> dict[str, Any] | Any:
    """The result of a 0.3 send/get/cancel in v0.1: always a Task named ``task_id``.

    A Message (the agent answered without a task) becomes a completed Task carrying the
    message as its status message, timestamped ``now``. Anything else passes unchanged.
    """
    if not isinstance(result, dict):
        return result
    if "pushNotificationConfig" in result and "taskId" in result:
        return push_config_to_v01(result, task_id)
    if result.get("kind") == "message" or ("messageId" in result and "status" not in result):
        return _message_task(result, task_id, session_id, now)
    if result.get("kind", "task") == "task" and "status" in result:
        return task_to_v01(result, task_id)
    return result


def _message_task(
    message: Mapping[str, Any], task_id: str, session_id: str | None, now: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task_id}
    session = message.get("contextId") or session_id
    if session:
        out["sessionId"] = session
    out["status"] = {"state": "completed", "message": message_to_v01(message), "timestamp": now}
    return out


def v03_event_to_v01(
    event: Any, task_id: str, session_id: str | None, indexes: dict[str, int], now: str
) -> list[Any]:
    """One 0.3 stream event as the v0.1 events that say the same (usually one).

    status-update -> ``{id, status, final}``; artifact-update -> ``{id, artifact}`` with the
    artifact's ``index`` (``indexes`` numbers artifact IDs in the order first seen, kept by
    the caller for the whole stream), ``append`` and ``lastChunk``; a Task snapshot -> one
    artifact event per artifact, then its status (``final`` if terminal); a Message -> a
    final ``completed`` status carrying it. Unknown events pass unchanged.
    """
    if not isinstance(event, dict):
        return [event]
    kind = event.get("kind")
    if kind == "status-update" or (kind is None and "status" in event and "taskId" in event):
        return [_status_event(event, task_id)]
    if kind == "artifact-update" or (kind is None and "artifact" in event):
        return [_artifact_event(event, task_id, indexes)]
    if kind == "task":
        task = task_to_v01(event, task_id)
        events: list[Any] = []
        for artifact in event.get("artifacts") or []:
            update = {"artifact": artifact, "metadata": None}
            events.append(_artifact_event(update, task_id, indexes))
        status = event.get("status")
        state = status.get("state") if isinstance(status, dict) else None
        status_event: dict[str, Any] = {
            "id": task_id,
            "status": task["status"],
            "final": state in _TERMINAL,
        }
        if isinstance(task.get("metadata"), dict):
            status_event["metadata"] = task["metadata"]
        return [*events, status_event]
    if kind == "message":
        task = _message_task(event, task_id, session_id, now)
        return [{"id": task_id, "status": task["status"], "final": True}]
    return [event]


def _status_event(event: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    out: dict[str, Any] = {"id": task_id, "status": _status_to_v01(event.get("status"), extra)}
    status = event.get("status")
    state = status.get("state") if isinstance(status, dict) else None
    # an interrupted task waits for the client: the v0.1 stream ends there, whatever an
    # a2a-sdk 0.3 agent said (TaskUpdater.requires_input sends final: false by default)
    out["final"] = event.get("final") is True or state in _TERMINAL or state in _INTERRUPTED
    if isinstance(event.get("metadata"), dict) or extra:
        out["metadata"] = dict(event.get("metadata") or {})
    return _with_metadata(out, extra)


def _artifact_event(
    event: Mapping[str, Any], task_id: str, indexes: dict[str, int]
) -> dict[str, Any]:
    artifact = event.get("artifact")
    key = artifact.get("artifactId") if isinstance(artifact, dict) else None
    key = key if isinstance(key, str) else f"#{len(indexes)}"
    index = indexes.setdefault(key, len(indexes))
    out_artifact = _artifact_to_v01(artifact, index)
    if isinstance(out_artifact, dict):
        out_artifact["append"] = event.get("append") is True
        if event.get("lastChunk") is not None:
            out_artifact["lastChunk"] = event.get("lastChunk") is True
    out: dict[str, Any] = {"id": task_id, "artifact": out_artifact}
    if isinstance(event.get("metadata"), dict):
        out["metadata"] = event["metadata"]
    return out


# --- cards ------------------------------------------------------------------------------------


def card_to_v01(card: Mapping[str, Any]) -> dict[str, Any]:
    """A card the router serves (0.3 and/or 1.0 members) in the v0.1 shape.

    ``url`` is the 0.3 ``url`` or the first interface's; ``pushNotifications`` is true (the
    router relays them, or follows the task itself) and ``stateTransitionHistory`` false;
    ``authentication.schemes`` names the card's security schemes. Signatures, interfaces and
    extensions have no v0.1 counterpart and are left out.
    """
    out: dict[str, Any] = {"name": card.get("name", ""), "description": card.get("description", "")}
    out["url"] = card.get("url") or _first_interface_url(card)
    for key in ("provider", "version", "documentationUrl", "iconUrl"):
        if card.get(key) is not None:
            out[key] = card[key]
    capabilities = card.get("capabilities")
    streaming = isinstance(capabilities, dict) and capabilities.get("streaming") is True
    out["capabilities"] = {
        "streaming": streaming,
        "pushNotifications": True,
        "stateTransitionHistory": False,
    }
    schemes = _scheme_names(card.get("securitySchemes"))
    if schemes:
        out["authentication"] = {"schemes": schemes}
    out["defaultInputModes"] = list(card.get("defaultInputModes") or ["text/plain"])
    out["defaultOutputModes"] = list(card.get("defaultOutputModes") or ["text/plain"])
    out["skills"] = [_skill_to_v01(skill) for skill in card.get("skills") or []]
    return out


def _first_interface_url(card: Mapping[str, Any]) -> str | None:
    interfaces = card.get("supportedInterfaces")
    for interface in interfaces if isinstance(interfaces, list) else []:
        if isinstance(interface, dict) and isinstance(interface.get("url"), str):
            return interface["url"]
    return None


def _scheme_names(schemes: Any) -> list[str]:
    """``bearer``/``basic`` for HTTP schemes, else the scheme's type (apiKey, oauth2, ...)."""
    names: list[str] = []
    for scheme in schemes.values() if isinstance(schemes, dict) else []:
        if not isinstance(scheme, dict):
            continue
        if len(scheme) == 1 and isinstance(next(iter(scheme.values())), dict):  # 1.0 oneof
            kind, scheme = next(iter(scheme.items()))
            kind = kind.removesuffix("SecurityScheme")
        else:
            kind = scheme.get("type")
        name = scheme.get("scheme") if kind in ("http", "httpAuth") else kind
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return names


def _skill_to_v01(skill: Any) -> Any:
    if not isinstance(skill, dict):
        return skill
    keys = ("id", "name", "description", "tags", "examples", "inputModes", "outputModes")
    return {key: skill[key] for key in keys if key in skill}


# --- helpers ----------------------------------------------------------------------------------


def _check_history_length(value: Any, field: str, violations: list[tuple[str, str]]) -> bool:
    """Whether ``value`` is a usable historyLength (None: absent, no violation). v0.1 is plain
    JSON: a number only (ProtoJSON's decimal strings, which 0.3 and 1.0 take, are not one)."""
    if value is None:
        return False
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        violations.append((field, "must be a non-negative integer"))
        return False
    return True
