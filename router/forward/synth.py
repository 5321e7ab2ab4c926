"""Synthesized push notifications (docs/push.md): the router follows a task itself when its
agent sends no push notifications but a client gave the task a config.

A followed task is a row of :mod:`router.push.watches` (leased: one replica follows each
task; rows outlive a restart). :class:`PushWatcher` claims rows and follows each task: with
``SubscribeToTask`` (0.3 ``tasks/resubscribe``) when the agent streams, else by polling
``GetTask`` with a backoff (:class:`Pace`: ``poll_interval`` doubling to ``poll_cap``, back to
``poll_interval`` whenever the task changed; the streams of agents that do not stream poll at
the same pace, :mod:`router.forward.unarystream`). Every event, and every changed task a poll
finds, is handed to ``notify`` (the relay queues it for each of the task's configs, as if the
agent had posted it), until the task reaches a terminal or interrupted state or has no config
left; then the row is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from router.choose.choice import Target
from router.forward.upstream import Upstream
from router.protocol.errors import RpcError
from router.protocol.events import result_task_states
from router.protocol.versions import (
    Op,
    Version,
    is_interrupted_state,
    is_terminal_state,
    method_name,
)
from router.push.watches import Watch, Watches

__all__ = ["AgentOf", "Notify", "Pace", "PushWatcher", "finished", "task_params"]

log = logging.getLogger(__name__)

AgentOf = Callable[[str], tuple[Target, bool]]
"""An agent's target (how the router calls it) and whether it streams; raises when the agent
is no longer registered."""
Notify = Callable[[Watch, dict[str, Any], Version], Awaitable[bool]]
"""Queue one event of a followed task (in the agent's version, agent IDs) for its configs;
False when the task has no config left."""


class PushWatcher:
    """Follows the tasks of :class:`~router.push.watches.Watches` this replica holds."""

    def __init__(
        self,
        watches: Watches,
        upstream: Upstream,
        notify: Notify,
        *,
        poll_interval: float = 1.0,
        poll_cap: float = 30.0,
    ) -> None:
        self.watches = watches
        self.upstream = upstream
        self.notify = notify
        self.poll_interval = poll_interval
        self.poll_cap = poll_cap
        self.agent_of: AgentOf | None = None  # set by the router (its matcher)
        self.holder = uuid.uuid4().hex
        self.wake = asyncio.Event()
        self._following: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()

    async def watch(self, watch: Watch) -> None:
        """Follow a task from now on (this replica or another takes it at once)."""
        await self.watches.add(watch)
        self.wake.set()

    async def run(self, poll: float = 5.0) -> None:
        """Claim and follow tasks until cancelled: whenever one is added here, and every
        ``poll`` seconds (tasks added by other replicas, or left by a dead one)."""
        while True:
            self.wake.clear()
            try:
                for watch in await self.watches.claim(self.holder):
                    if watch.task_id not in self._following:
                        follow = asyncio.create_task(self._follow(watch))
                        self._following[watch.task_id] = follow
            except Exception:  # a database hiccup: try again next round
                log.exception("claiming followed tasks failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=poll)

    async def close(self) -> None:
        """Stop following (the leases are released: another replica, or this one restarted,
        takes the tasks over at once)."""
        self._stopping.set()
        following = list(self._following.values())
        for task in following:
            task.cancel()
        for task in following:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await self.watches.release(self.holder)
        except Exception:  # the database is gone: the leases end by themselves
            log.warning("synthesized push: leases not released at stop", exc_info=True)

    @property
    def following(self) -> set[str]:
        """The router tasks this replica follows now."""
        return set(self._following)

    async def _follow(self, watch: Watch) -> None:
        """Follow one task while this replica holds its lease."""
        track = asyncio.create_task(self._track(watch))
        try:
            while not track.done():
                done, _ = await asyncio.wait({track}, timeout=self.watches.lease / 3)
                if not done and not await self.watches.renew(self.holder, watch.task_id):
                    track.cancel()  # another replica took it over
            if not track.cancelled() and track.exception() is None:
                await self.watches.remove(watch.task_id)
            elif not track.cancelled():
                log.error("following task %s failed", watch.task_id, exc_info=track.exception())
        except Exception:
            log.exception("following task %s failed", watch.task_id)
        finally:
            track.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await track  # its subscription closed before the upstream pool is
            self._following.pop(watch.task_id, None)

    async def _track(self, watch: Watch) -> None:
        """Until the task is finished (or has no config left): subscribe, else poll."""
        pace = Pace(self.poll_interval, self.poll_cap)
        while True:
            assert self.agent_of is not None, "the router sets agent_of"
            try:
                target, streams = self.agent_of(watch.agent_id)
            except Exception:  # the agent is no longer registered: nothing to follow
                log.info("task %s: its agent %s is gone; not followed", watch.task_id,
                         watch.agent_id)  # fmt: skip
                return
            if streams:
                if await self._subscribe(watch, target) is not None:
                    return
                pace.forget()  # the subscription ended early: the next poll tells the state
            task = await self._get(watch, target)
            if task is not None and pace.changed(task):
                event = {"task": task} if target.version == "1.0" else task
                if not await self.notify(watch, event, target.version):
                    return
                if finished(target.version, Op.GET, task):
                    return
            await self._pause(pace.next_wait())

    async def _subscribe(self, watch: Watch, target: Target) -> bool | None:
        """Relay the task's events while the agent streams them: True when it finished (or
        lost its configs); None when the stream ended or failed first."""
        method = method_name(target.version, Op.SUBSCRIBE)
        params = task_params(watch.upstream_task_id, target)
        events = self.upstream.stream(target, method, params, request_id=1, headers={})
        try:
            async for answer in events:
                event = answer.get("result")
                if not isinstance(event, dict):
                    return None  # an error (a finished task cannot be subscribed to): poll
                if not await self.notify(watch, event, target.version):
                    return True
                if finished(target.version, Op.STREAM, event):
                    return True
        except RpcError as exc:
            log.info("task %s: subscribing failed (%s); polling", watch.task_id, exc)
        finally:
            await events.aclose()
        return None

    async def _get(self, watch: Watch, target: Target) -> dict[str, Any] | None:
        """The task as the agent has it now, or None when it cannot say."""
        method = method_name(target.version, Op.GET)
        try:
            params = task_params(watch.upstream_task_id, target)
            answer = await self.upstream.call(target, method, params, request_id=1, headers={})
        except RpcError as exc:
            log.info("task %s: polling failed: %s", watch.task_id, exc)
            return None
        task = answer.get("result")
        return task if isinstance(task, dict) else None

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)


class Pace:
    """When to poll a task next: ``interval`` after a change, the wait doubling while the task
    stays the same, up to ``cap``."""

    def __init__(self, interval: float, cap: float) -> None:
        self.interval = interval
        self.cap = cap
        self._delay = interval
        self._last: str | None = None

    def changed(self, task: dict[str, Any]) -> bool:
        """Whether ``task`` differs from the one seen last (the next wait is then
        ``interval`` again)."""
        seen = json.dumps(task, sort_keys=True)
        if seen == self._last:
            return False
        self._last, self._delay = seen, self.interval
        return True

    def forget(self) -> None:
        """Take the next task seen as a change, whatever it is."""
        self._last = None

    def next_wait(self) -> float:
        """The wait before the next poll (the one after it is twice as long, at most
        ``cap``, unless the task changes)."""
        delay = self._delay
        self._delay = min(self.cap, delay * 2)
        return delay


def task_params(upstream_task_id: str, target: Target) -> dict[str, Any]:
    """The params of GetTask (and SubscribeToTask) for the agent's task, with the tenant of
    the target's interface."""
    params: dict[str, Any] = {"id": upstream_task_id}
    if target.version == "1.0" and target.tenant:
        params["tenant"] = target.tenant
    return params


def finished(version: Version, op: Op, result: dict[str, Any]) -> bool:
    """Whether an event or task says the task is terminal or waits for the client."""
    return any(
        is_terminal_state(version, state) or is_interrupted_state(version, state)
        for _, state in result_task_states(version, op, result)
    )
