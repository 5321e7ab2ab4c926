"""Streams for agents that do not stream: a streaming call to an agent whose card lacks
``capabilities.streaming`` is answered from unary calls (docs/routing.md#agents-that-do-not-stream).

:meth:`UnaryStreams.events` keeps the contract of :meth:`Upstream.stream
<router.forward.upstream.Upstream.stream>`: JSON-RPC response objects in the agent's version,
``on_headers`` called once the agent answered. :class:`router.forward.relay.Relay` takes
them for the agent's own events, so they are relayed as those are: IDs rewritten, translated
to the client's version, task states recorded, traced, put in the client's dialect.

- ``SendStreamingMessage`` (``message/stream``): ``SendMessage`` (``message/send``) with the
  same params. A Message is one event. A Task is the task (``submitted``, without its
  artifacts), one artifact update per artifact, then its status (0.3: ``final`` when the
  task is terminal or interrupted).
- ``SubscribeToTask`` (``tasks/resubscribe``): ``GetTask``; the Task first (1.0 requires it,
  0.3 leaves what a resubscription sends first to the server); a task in a terminal state
  is ``-32004``, as the spec says.
- While the task is neither terminal nor interrupted, ``GetTask`` is polled at the pace of
  synthesized push (:class:`router.forward.synth.Pace`: ``SWITCHBOARD_PUSH_POLL_INTERVAL``
  doubling to ``SWITCHBOARD_PUSH_POLL_CAP``, back to the interval after a change); each change
  is streamed: the artifacts that are new or changed, then the status if it changed.

An error the agent answers to the first call is its answer to the stream (1.0: plain JSON, as
a2a-sdk 1.x agents answer before a stream; 0.3: one error event, as a2a-sdk 0.3 agents
stream it); one answered to a poll, or a poll that cannot reach the agent (``-32053``), ends
the stream. Closing the events (the client went away) stops the polling at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from registry.netguard import redact_url
from router.choose.choice import Target
from router.forward.synth import Pace, finished, task_params
from router.forward.upstream import Upstream
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INVALID_AGENT_RESPONSE,
    STREAM_FAILED,
    UNSUPPORTED,
    RpcError,
    error_body,
)
from router.protocol.events import event_payload, stream_event_kind
from router.protocol.versions import Op, Version, is_terminal_state, method_name, state_name

__all__ = ["UnaryStreams"]

OnHeaders = Callable[[list[str], bool], None]
"""Told the extensions the agent activated and whether its answer is a stream (False: the one
plain JSON answer follows), as :meth:`Upstream.stream` tells it."""


class UnaryStreams:
    """The event streams of agents that do not stream, made from their unary answers."""

    def __init__(self, upstream: Upstream, *, poll_interval: float, poll_cap: float) -> None:
        self.upstream = upstream
        self.poll_interval = poll_interval
        self.poll_cap = poll_cap
        self.sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
        """How a poll waits for the next (tests record the waits)."""

    async def events(
        self,
        target: Target,
        op: Op,
        params: dict[str, Any],
        *,
        request_id: Any,
        headers: Mapping[str, str],
        on_headers: OnHeaders,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events of ``op`` (a stream or a subscription; ``params`` in the agent's
        version), each a JSON-RPC response object in the agent's version."""
        version = target.version
        first = Op.SEND if op is Op.STREAM else Op.GET
        extensions: list[str] = []
        answer = await self.upstream.call(
            target, method_name(version, first), params, request_id=request_id,
            headers=headers, extensions=extensions,
        )  # fmt: skip
        tenant = params.get("tenant") if version == "1.0" else None  # the call's, for polls
        del params  # not held while the stream lasts
        if "error" in answer:
            on_headers(extensions, version == "0.3")
            yield answer
            return
        if op is Op.STREAM:
            kind = stream_event_kind(version, answer)
            if kind == "message":
                on_headers(extensions, True)
                yield answer
                return
            if kind != "task":
                raise _invalid(target, f"the answer to {method_name(version, first)} is "
                               "neither a Task nor a Message")  # fmt: skip
            task = _task(target, event_payload(version, answer))
            on_headers(extensions, True)
            opening = _opening(version, task)
        else:
            task = _task(target, answer.get("result"))
            state = task["status"].get("state")
            if is_terminal_state(version, state):
                on_headers(extensions, version == "0.3")
                yield _terminal(version, request_id, state)
                return
            on_headers(extensions, True)
            opening = [_task_event(version, task)]
        for event in opening:
            yield {"jsonrpc": "2.0", "id": request_id, "result": event}
        if finished(version, Op.GET, task):
            return
        polled = self._polled(target, task, tenant, request_id, headers)
        async with contextlib.aclosing(polled):  # closed with these events
            async for item in polled:
                yield item

    async def _polled(
        self,
        target: Target,
        task: dict[str, Any],
        tenant: Any,
        request_id: Any,
        headers: Mapping[str, str],
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The changes of ``task`` that polling ``GetTask`` finds, until it is finished."""
        version = target.version
        get = task_params(task["id"], target)
        if isinstance(tenant, str) and tenant:
            get["tenant"] = tenant  # the one the call named or was given
        method = method_name(version, Op.GET)
        pace = Pace(self.poll_interval, self.poll_cap)
        pace.changed(task)
        while not finished(version, Op.GET, task):
            await self.sleep(pace.next_wait())
            try:
                answer = await self.upstream.call(
                    target, method, get, request_id=request_id, headers=headers
                )
            except RpcError as exc:
                if exc.code != AGENT_UNAVAILABLE:
                    raise
                message = f"The stream from agent {target.agent_id} failed"
                raise RpcError(STREAM_FAILED, message, exc.data) from None
            if "error" in answer:
                yield answer
                return
            now = _task(target, answer.get("result"))
            if not pace.changed(now):
                continue
            for event in _changes(version, task, now):
                yield {"jsonrpc": "2.0", "id": request_id, "result": event}
            task = now


def _opening(version: Version, task: dict[str, Any]) -> list[dict[str, Any]]:
    """A send's Task as the events a streaming agent would have sent: the task (submitted,
    no artifacts), each artifact, the status."""
    created = {k: v for k, v in task.items() if k != "artifacts"}
    created["status"] = {"state": state_name(version, "submitted")}
    artifacts = task.get("artifacts")
    artifacts = artifacts if isinstance(artifacts, list) else []
    updates = [_artifact_event(version, task, a) for a in artifacts if isinstance(a, dict)]
    return [_task_event(version, created), *updates, _status_event(version, task)]


def _changes(version: Version, old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The events that take a client from ``old`` to ``new``: each artifact that is new or
    changed (whole: it replaces the one of its ID), then the status if it changed."""
    before = {_artifact_id(a): _same(a) for a in _artifacts(old)}
    events = [
        _artifact_event(version, new, artifact)
        for artifact in _artifacts(new)
        if before.get(_artifact_id(artifact)) != _same(artifact)
    ]
    if _same(old.get("status")) != _same(new.get("status")):
        events.append(_status_event(version, new))
    return events


def _task_event(version: Version, task: dict[str, Any]) -> dict[str, Any]:
    return {"task": task} if version == "1.0" else {**task, "kind": "task"}


def _artifact_event(
    version: Version, task: dict[str, Any], artifact: dict[str, Any]
) -> dict[str, Any]:
    update = {**_ids(task), "artifact": artifact, "lastChunk": True}
    if version == "1.0":
        return {"artifactUpdate": update}
    return {"kind": "artifact-update", **update}


def _status_event(version: Version, task: dict[str, Any]) -> dict[str, Any]:
    update = {**_ids(task), "status": task["status"]}
    if version == "1.0":
        return {"statusUpdate": update}
    return {"kind": "status-update", **update, "final": finished(version, Op.GET, task)}


def _ids(task: dict[str, Any]) -> dict[str, Any]:
    ids = {"taskId": task["id"]}
    if task.get("contextId"):
        ids["contextId"] = task["contextId"]
    return ids


def _artifacts(task: dict[str, Any]) -> list[dict[str, Any]]:
    artifacts = task.get("artifacts")
    return [a for a in artifacts if isinstance(a, dict)] if isinstance(artifacts, list) else []


def _artifact_id(artifact: dict[str, Any]) -> Any:
    return artifact.get("artifactId")


def _same(value: Any) -> str:
    """A key under which equal JSON values are equal."""
    return json.dumps(value, sort_keys=True)


def _task(target: Target, result: Any) -> dict[str, Any]:
    """The Task of a GetTask answer (-32006 when it is none)."""
    valid = (
        isinstance(result, dict)
        and isinstance(result.get("id"), str)
        and isinstance(result.get("status"), dict)
    )
    if not valid:
        raise _invalid(target, f"the answer to {method_name(target.version, Op.GET)} is not a Task")
    return result


def _terminal(version: Version, request_id: Any, state: Any) -> dict[str, Any]:
    """What an agent answers a subscription to a finished task: -32004, in its version."""
    error = RpcError(
        UNSUPPORTED,
        f"the task is in a terminal state ({state}): there is nothing left to subscribe to; "
        "GetTask reads it",
        {"state": state},
    )
    return error_body(version, request_id, error)


def _invalid(target: Target, reason: str) -> RpcError:
    data = {"agent": target.agent_id, "url": redact_url(target.url), "reason": reason}
    message = f"Agent {target.agent_id} sent an invalid response"
    return RpcError(INVALID_AGENT_RESPONSE, message, data)
