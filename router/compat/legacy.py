"""Legacy dialects at the client edge, as pure functions on plain JSON.

Two dialects older than the A2A versions the router serves are accepted and answered in
their own shape (docs/dialects.md):

- **A2A v0.1** (the ``tasks/send`` draft): ``tasks/send``, ``tasks/sendSubscribe``,
  ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``, ``tasks/pushNotification/set|get``
  and ``agent/getCard``, with ``sessionId`` and ``type``-tagged parts. A call becomes the
  equivalent A2A 0.3 call (:func:`v01_to_v03`) and every 0.3 answer goes back into the v0.1
  shape (:func:`v03_result_to_v01`, :func:`v03_event_to_v01`, :func:`card_to_v01`). The
  client chooses the task ID in v0.1; mapping it to a router task is the caller's job
  (:mod:`router.compat.codec`), so the functions here take the ID to answer with.
- **``A2A.``-prefixed 1.0 names** (a 1.0 draft: ``A2A.SendMessage``, ``A2A.GetTask``...):
  the 1.0 method, with the draft's unambiguous spellings normalized
  (:func:`prefixed_to_v1`); answers go back into the draft's shapes where seed 002 is
  unambiguous (:func:`prefixed_result`: a bare Task with ``taskId``, bare states, roles
  ``user``/``agent``, ``structuredData`` and ``mimeType`` parts).

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

from router.protocol.errors import METHOD_NOT_FOUND, PUSH_NOT_SUPPORTED, RpcError
from router.protocol.payloads import (
    INT32_MAX,
    MAX_ID_LENGTH,
    check_object,
    json_type,
    missing_or,
    params_error,
)
from router.protocol.versions import (
    METHODS,
    PREFIX,
    PREFIXED_ALIASES,
    ROLE_TABLE,
    ROLES,
    TASK_STATES,
    V01_METHODS,
    Op,
    task_state,
)

__all__ = [
    "STATE_KEY",
    "V01Call",
    "card_to_v01",
    "message_to_prefixed",
    "message_to_v01",
    "part_to_prefixed",
    "part_to_v01",
    "prefixed_event",
    "prefixed_result",
    "prefixed_to_v1",
    "state_to_v01",
    "task_to_prefixed",
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

    -32602 naming every bad field in its v0.1 path (``data.fields``); -32003 for the push
    notification methods and a send asking for push notifications (the router relays none).
    """
    op, method03 = V01_METHODS[method]
    if op is Op.PUSH_CONFIG:
        raise RpcError(
            PUSH_NOT_SUPPORTED,
            f"{method}: Switchboard does not relay push notifications; follow the task with "
            "tasks/sendSubscribe, tasks/resubscribe or tasks/get",
            {"method": method},
        )
    if op is Op.CARD:
        return V01Call(op, "", {}, None)
    violations: list[tuple[str, str]] = []
    task_id = _client_task_id(params, violations)
    out = copy.deepcopy(dict(params))
    check_object(params.get("metadata"), "metadata", violations)
    if op in (Op.SEND, Op.STREAM):
        out = _send_params(out, violations)
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
    return value


def _send_params(params: dict[str, Any], violations: list[tuple[str, str]]) -> dict[str, Any]:
    """tasks/send params -> message/send params (``params`` is a private copy)."""
    params.pop("id", None)
    session = params.pop("sessionId", None)
    if session is not None and (
        not isinstance(session, str) or not session or len(session) > MAX_ID_LENGTH
    ):
        violations.append(("sessionId", f"must be a string of 1 to {MAX_ID_LENGTH} characters"))
        session = None
    if params.get("pushNotification") is not None:
        raise RpcError(
            PUSH_NOT_SUPPORTED,
            "Switchboard does not relay push notifications: remove pushNotification and "
            "follow the task with tasks/sendSubscribe, tasks/resubscribe or tasks/get",
            {"field": "pushNotification"},
        )
    params.pop("pushNotification", None)
    config: dict[str, Any] = {}
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

    ``url`` is the 0.3 ``url`` or the first interface's; ``pushNotifications`` is false (the
    router relays none) and ``stateTransitionHistory`` false; ``authentication.schemes``
    names the card's security schemes. Signatures, interfaces and extensions have no v0.1
    counterpart and are left out.
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
        "pushNotifications": False,
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


# --- A2A.-prefixed 1.0 names ------------------------------------------------------------------

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


# --- 1.0 answers -> the draft's shapes (A2A.-prefixed calls) ---------------------------------

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
