"""Scheduled refresh: one crawler across replicas, checks when each agent is due.

- Every agent has a next check time in the database (``agent_refresh.next_check_at``, see
  :mod:`registry.health` for how it is chosen).
- Of all the replicas sharing a database, the one holding the ``refresh`` lease runs the
  checks. It renews the lease every ``lease_ttl / 3`` seconds; a replica that dies stops
  renewing, and another takes the lease over within ``lease_ttl``.
- Each check is *claimed* first (its next check time moved forward by a compare-and-set), so
  even two processes that both believe they hold the lease, or an operator's refresh racing
  the schedule, never fetch the same card twice.
- APScheduler's :class:`AsyncIOScheduler` drives it in ``switchboard serve``: one job renews
  the lease, one runs the due checks every ``tick`` seconds (bounded concurrency). Tests call
  :meth:`Refresher.renew_lease` and :meth:`Refresher.run_due` directly with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from registry.errors import NotFound, RegistryError
from registry.metrics import counted_check
from registry.records import utcnow
from registry.service import Registry

log = logging.getLogger(__name__)

LEASE = "refresh"


def replica_name() -> str:
    """A name for this process, unique among replicas: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class RunReport:
    """What one run of checks did."""

    checked: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # claimed by someone else meanwhile

    def to_api(self) -> dict[str, Any]:
        """The admin API's view."""
        return {
            "checked": len(self.checked),
            "changed": sorted(self.changed),
            "failed": [{"id": k, "error": v} for k, v in sorted(self.failed.items())],
            "skipped": sorted(self.skipped),
        }


class Refresher:
    """Runs the due health checks and card refreshes of the catalog, at most ``concurrency``
    at a time in this process."""

    def __init__(
        self,
        registry: Registry,
        *,
        holder: str | None = None,
        lease_ttl: float = 30.0,
        concurrency: int = 8,
        claim_for: float = 120.0,
        on_change: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """``on_change`` is awaited after a check that changed a card (the router tells its
        other workers and replicas at once rather than at their next poll)."""
        self.registry = registry
        self.on_change = on_change
        self.holder = holder or replica_name()
        self.lease_ttl = lease_ttl
        self.concurrency = concurrency
        self.claim_for = claim_for
        self._lease_until: datetime | None = None
        self._slots = asyncio.Semaphore(concurrency)
        self._running: set[asyncio.Task[Any]] = set()

    @property
    def clock_now(self) -> datetime:
        """The registry policy's clock."""
        return self.registry.policy.now()

    def holds_lease(self) -> bool:
        """Whether this process holds the lease (by its own clock, with a margin)."""
        if self._lease_until is None:
            return False
        margin = timedelta(seconds=self.lease_ttl / 6)
        return self.clock_now < self._lease_until - margin

    async def renew_lease(self) -> bool:
        """Take or renew the refresh lease; True while this process holds it."""
        now = self.clock_now
        try:
            held = await self.registry.store.acquire_lease(LEASE, self.holder, now, self.lease_ttl)
        except Exception:  # database down: we cannot know, so we must not crawl
            log.warning("renewing the refresh lease failed", exc_info=True)
            held = False
        was = self._lease_until is not None
        self._lease_until = now + timedelta(seconds=self.lease_ttl) if held else None
        if held and not was:
            log.info("this replica (%s) now runs the scheduled refreshes", self.holder)
        elif was and not held:
            log.info("this replica (%s) no longer runs the scheduled refreshes", self.holder)
        return held

    async def release_lease(self) -> None:
        """Give the lease up (on shutdown) so another replica takes over at once."""
        self._lease_until = None
        with contextlib.suppress(Exception):
            await self.registry.store.release_lease(LEASE, self.holder)

    async def dispatch(self) -> list[asyncio.Task[Any]]:
        """Start the due checks that fit in the free slots (only while holding the lease),
        without waiting for them: one slow agent never holds up the others."""
        free = self.concurrency - len(self._running)
        if not self.holds_lease() or free <= 0:
            return []
        await self.registry.sync()
        rows = await self.registry.store.due(self.clock_now, free)
        report = RunReport()
        return [self._start(row.agent_id, report, due_only=True) for row in rows]

    async def run_due(self) -> RunReport:
        """Run the due checks that fit and wait for them (tests call this with a fake
        clock); an empty report without the lease."""
        reports = [await task for task in await self.dispatch()]
        return reports[0] if reports else RunReport()  # every task fills the same report

    async def run_now(
        self, agent_ids: list[str] | None = None, *, due_only: bool = False
    ) -> RunReport:
        """Check the given agents (default: all) now, lease or not: the operator's
        ``POST /api/v1/refresh``. An agent whose check is in flight elsewhere is skipped."""
        await self.registry.sync()
        wanted = list(self.registry.catalog.snapshot.agents) if agent_ids is None else agent_ids
        report = RunReport()
        card = None if due_only else True  # an operator's "now" fetches the card too
        tasks = [self._start(agent_id, report, due_only=due_only, card=card) for agent_id in wanted]
        for task in tasks:
            await task
        return report

    def _start(
        self, agent_id: str, report: RunReport, *, due_only: bool, card: bool | None = None
    ) -> asyncio.Task[Any]:
        task = asyncio.create_task(self._check(agent_id, report, due_only=due_only, card=card))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    @counted_check
    async def _check(
        self, agent_id: str, report: RunReport, *, due_only: bool, card: bool | None
    ) -> RunReport:
        async with self._slots:
            try:
                result = await self.registry.upkeep.check_claimed(
                    agent_id, self.holder, due_only=due_only, card=card, claim_for=self.claim_for
                )
            except NotFound:
                return report  # removed meanwhile
            except RegistryError as exc:
                report.checked.append(agent_id)
                report.failed[agent_id] = exc.message
                return report
            except Exception as exc:  # a bug must not stop the other checks
                log.exception("checking agent %s failed", agent_id)
                report.checked.append(agent_id)
                report.failed[agent_id] = f"internal error: {type(exc).__name__}"
                return report
        if result is None:
            report.skipped.append(agent_id)
            return report
        report.checked.append(agent_id)
        if result[1]:
            report.changed.append(agent_id)
            log.info("agent %s: its card changed", agent_id)
            if self.on_change is not None:
                await self.on_change()
        return report

    async def cancel(self) -> None:
        """Stop the checks in flight (shutdown)."""
        tasks = list(self._running)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class RefreshScheduler:
    """APScheduler jobs that run a :class:`Refresher` inside the server's event loop."""

    def __init__(self, refresher: Refresher, *, tick: float) -> None:
        self.refresher = refresher
        self.tick = tick
        self.scheduler = AsyncIOScheduler(timezone="UTC")
        self._jobs: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        """Add the jobs and start; the lease is tried at once."""
        common: dict[str, Any] = {"max_instances": 1, "coalesce": True, "misfire_grace_time": None}
        self.scheduler.add_job(
            self._renew,
            "interval",
            seconds=self.refresher.lease_ttl / 3,
            id="refresh-lease",
            next_run_time=utcnow(),
            **common,
        )
        self.scheduler.add_job(
            self._run_due, "interval", seconds=self.tick, id="refresh-due", **common
        )
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop the jobs, cancel the runs and checks in flight and hand the lease over
        (before the database and the crawler close)."""
        self.scheduler.shutdown(wait=False)
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel()
        for job in jobs:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await job
        await self.refresher.cancel()
        await self.refresher.release_lease()

    @contextlib.contextmanager
    def _tracked(self) -> Any:
        """Track the running job so that :meth:`stop` can wait for it; a job cancelled at
        shutdown ends quietly (APScheduler would log the cancellation as an error)."""
        task = asyncio.current_task()
        if task is not None:
            self._jobs.add(task)
        try:
            yield
        except asyncio.CancelledError:
            pass
        finally:
            self._jobs.discard(task)  # type: ignore[arg-type]

    async def _renew(self) -> None:
        with self._tracked():
            await self.refresher.renew_lease()

    async def _run_due(self) -> None:
        with self._tracked():
            try:
                await self.refresher.dispatch()  # the checks run on; failures are logged
            except Exception:  # a database hiccup: the next tick tries again
                log.warning("scheduled refresh failed", exc_info=True)


class PassiveHealth:
    """What the router sees when it calls agents, reported to the registry in the background
    (the call never waits for the database): connection failures and 5xx answers count as
    failed checks, and an answer from an agent that was not healthy makes it healthy."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failing: set[str] = set()

    def failed(self, agent_id: str, reason: str) -> None:
        """The agent could not be reached, or answered 5xx (one report in flight per agent:
        a burst of failed calls is one failure)."""
        if agent_id in self._failing or self.registry.health_of(agent_id).status == "unreachable":
            return
        self._failing.add(agent_id)
        task = self._spawn(self.registry.upkeep.report_failure(agent_id, reason))
        task.add_done_callback(lambda _task: self._failing.discard(agent_id))

    def answered(self, agent_id: str) -> None:
        """The agent answered (below 500); free unless its status changes."""
        if self.registry.health_of(agent_id).status != "healthy":
            self._spawn(self.registry.upkeep.report_success(agent_id))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(self._guarded(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except Exception:  # a report lost to a database hiccup; the schedule checks anyway
            log.warning("recording an agent's health failed", exc_info=True)

    async def drain(self) -> None:
        """Wait for the reports in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
