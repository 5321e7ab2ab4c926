"""A2A 0.3 and 1.0 stream events and answers: what an event is, whether a stream ends there,
and the task states an answer carries; pure functions on plain JSON.

0.3 results carry ``kind`` (``task``, ``message``, ``status-update``, ``artifact-update``) and
status updates a ``final`` flag; 1.0 results wrap the object in one member (``task``,
``message``, ``statusUpdate``, ``artifactUpdate``), have no ``final`` and omit false booleans.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from router.protocol.versions import Op, Version, is_terminal_state

__all__ = [
    "V1_EVENT_KEYS",
    "EventKind",
    "ends_stream",
    "event_payload",
    "event_task_state",
    "result_task_states",
    "stream_event_kind",
    "stream_result",
]

EventKind = Literal["task", "message", "status-update", "artifact-update"]

V1_EVENT_KEYS: dict[str, EventKind] = {  # 1.0 stream response member -> event kind
    "task": "task",
    "message": "message",
    "statusUpdate": "status-update",
    "artifactUpdate": "artifact-update",
}
_V03_EVENT_KINDS: tuple[EventKind, ...] = ("task", "message", "status-update", "artifact-update")


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
        present = [key for key in V1_EVENT_KEYS if key in result]
        return V1_EVENT_KEYS[present[0]] if len(present) == 1 else None
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
    inner = result[next(key for key, name in V1_EVENT_KEYS.items() if name == kind)]
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
