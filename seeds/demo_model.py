"""The version-neutral task model of the demo agents, and their JSON-RPC errors.

:mod:`seeds.demo_wire` translates between these objects and the wire shapes of each A2A
version; :mod:`seeds.demo_server` keeps and runs the tasks.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seeds.demo_wire import Wire

Part = dict[str, Any]
# A listener's queue: (rendered event, is it the last one) pairs; None ends the stream.
Events = asyncio.Queue[tuple[dict[str, Any], bool] | None]
# Who listens to a task: the wire its events are rendered in, and the queue they go to.
Listener = tuple["Wire", Events]

TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected"})
INTERRUPTED_STATES = frozenset({"input-required", "auth-required"})
ALL_STATES = TERMINAL_STATES | INTERRUPTED_STATES | {"submitted", "working"}
_CLOCK = itertools.count()  # orders task updates for ListTasks, newest first


class RpcError(Exception):
    """A JSON-RPC error answer. ``reason`` is the A2A ErrorInfo reason (1.0 sends it as data);
    ``data`` is a detail only the 0.3-compat wire sends."""

    def __init__(
        self, code: int, message: str, reason: str | None = None, data: Any = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.data = data


def invalid_params(message: str) -> RpcError:
    return RpcError(-32602, message, "INVALID_PARAMS")


def task_not_found(task_id: str) -> RpcError:
    return RpcError(-32001, f"Task not found: {task_id}", "TASK_NOT_FOUND")


def unsupported(message: str) -> RpcError:
    return RpcError(-32004, message, "UNSUPPORTED_OPERATION")


@dataclass
class Message:
    role: str  # "user" | "agent"
    parts: list[Part]
    message_id: str
    task_id: str | None = None
    context_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # metadata, extensions, referenceTaskIds


@dataclass
class Artifact:
    artifact_id: str
    name: str
    parts: list[Part] = field(default_factory=list)


@dataclass
class Task:
    id: str
    context_id: str
    state: str = "submitted"
    message: Message | None = None  # the status message
    timestamp: datetime | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    history: list[Message] = field(default_factory=list)
    updated: int = field(default_factory=lambda: next(_CLOCK))
    runner: asyncio.Task[None] | None = None
    listeners: list[Listener] = field(default_factory=list)

    def set_status(
        self, state: str, message: Message | None = None, when: datetime | None = None
    ) -> None:
        """Enter ``state`` with a new status ``message``; the old one goes to history."""
        if self.message is not None:
            self.history.append(self.message)
        self.state, self.message, self.timestamp = state, message, when
        self.touch()

    def touch(self) -> None:
        """Mark the task as the most recently updated one."""
        self.updated = next(_CLOCK)
