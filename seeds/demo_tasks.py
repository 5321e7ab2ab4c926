"""The demo agents' in-memory task store, shared by every protocol version an agent serves.

Tasks are kept in the neutral model of :mod:`seeds.demo_model`; whoever listens to a task
(a stream, a blocking send) says in which :class:`~seeds.demo_wire.Wire` its events are
rendered, so a task started over 1.0 can be read, continued or followed over 0.3 and the
other way round, as an a2a-sdk 1.3 server in 0.3-compatibility mode allows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from seeds.demo_model import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Events,
    Message,
    RpcError,
    Task,
    invalid_params,
    task_not_found,
    unsupported,
)
from seeds.demo_rpc import ListCall
from seeds.demo_wire import Wire

Render = Callable[[Wire], dict[str, Any]]


class TaskStore:
    """Tasks by id, oldest first; at most ``max_tasks`` finished ones are kept."""

    def __init__(self, max_tasks: int = 1000) -> None:
        self.max_tasks = max_tasks
        self._tasks: OrderedDict[str, Task] = OrderedDict()

    def find(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise task_not_found(task_id)
        return task

    def _add(self, task: Task) -> None:
        self._tasks[task.id] = task
        while len(self._tasks) > self.max_tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.runner is not None and not oldest.runner.done():
                break
            self._tasks.popitem(last=False)

    def begin(self, wire: Wire, message: Message) -> Task:
        """Open a new task for ``message``, or continue the task it names."""
        if message.task_id:
            task = self.find(message.task_id)
            if message.context_id and message.context_id != task.context_id:
                raise invalid_params(
                    f"Context {message.context_id} does not match context "
                    f"{task.context_id} of task {task.id}"
                )
            if task.state in TERMINAL_STATES:
                raise wire.terminal_send_error(task)
            if task.state not in INTERRUPTED_STATES:
                raise unsupported(f"Task {task.id} is still running; wait for it to ask")
        else:
            task = Task(id=str(uuid.uuid4()), context_id=message.context_id or str(uuid.uuid4()))
            self._add(task)
        message.task_id, message.context_id = task.id, task.context_id
        task.set_status("submitted")
        task.history.append(message)
        return task

    # events

    @staticmethod
    def listen(wire: Wire, task: Task) -> Events:
        """A queue of ``task``'s events from now on, rendered in ``wire``'s version."""
        queue: Events = asyncio.Queue()
        task.listeners.append((wire, queue))
        return queue

    @staticmethod
    def unlisten(task: Task, queue: Events | None) -> None:
        task.listeners[:] = [(w, q) for w, q in task.listeners if q is not queue]

    @staticmethod
    def publish(task: Task, render: Render, final: bool) -> None:
        """Send an event to every listener, rendered now (a snapshot) in its own version."""
        for wire, queue in task.listeners:
            queue.put_nowait((render(wire), final))

    def set_status(self, task: Task, state: str, text: str | None = None) -> None:
        """Move the task to ``state`` (the old status message goes to history) and publish."""
        if task.state in TERMINAL_STATES:
            return
        message = None
        if text is not None:
            message = Message(
                role="agent",
                parts=[{"kind": "text", "text": text}],
                message_id=str(uuid.uuid4()),
                task_id=task.id,
                context_id=task.context_id,
            )
        task.set_status(state, message, datetime.now(UTC))
        final = state in TERMINAL_STATES or state in INTERRUPTED_STATES
        self.publish(task, lambda wire: wire.status_event(task, final), final)

    # operations

    def cancel(self, wire: Wire, task_id: str) -> dict[str, Any]:
        task = self.find(task_id)
        if task.state in TERMINAL_STATES:
            raise RpcError(-32002, "Task cannot be canceled", "TASK_NOT_CANCELABLE")
        if task.runner is not None and not task.runner.done():
            task.runner.cancel()
        self.set_status(task, "canceled")
        return wire.task(task)

    def list(self, wire: Wire, call: ListCall) -> dict[str, Any]:
        tasks = sorted(self._tasks.values(), key=lambda t: t.updated, reverse=True)
        tasks = [
            t
            for t in tasks
            if (call.context_id is None or t.context_id == call.context_id)
            and (call.state is None or t.state == call.state)
        ]
        page = tasks[call.offset : call.offset + call.page_size]
        rendered = [wire.task(t, call.history_length) for t in page]
        if not call.include_artifacts:
            for task in rendered:
                task.pop("artifacts", None)
        more = call.offset + call.page_size < len(tasks)
        return {
            "tasks": rendered,
            "nextPageToken": str(call.offset + call.page_size) if more else "",
            "pageSize": call.page_size,
            "totalSize": len(tasks),
        }

    async def shutdown(self) -> None:
        """End every open stream and cancel every running task."""
        running = []
        for task in self._tasks.values():
            for _wire, queue in task.listeners:
                queue.put_nowait(None)
            if task.runner is not None and not task.runner.done():
                task.runner.cancel()
                running.append(task.runner)
        await asyncio.gather(*running, return_exceptions=True)
