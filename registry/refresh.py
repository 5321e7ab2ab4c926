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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from registry.errors import NotFound, RegistryError
from registry.records import as_utc, utcnow
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
    """Runs the due health checks and card refreshes of the catalog."""

    def __init__(
        self,
        registry: Registry,
        *,
        holder: str | None = None,
        lease_ttl: float = 30.0,
        concurrency: int = 8,
        batch: int = 100,
        claim_for: float = 120.0,
    ) -> None:
        self.registry = registry
        self.holder = holder or replica_name()
        self.lease_ttl = lease_ttl
        self.concurrency = concurrency
        self.batch = batch
        self.claim_for = claim_for
        self._lease_until: datetime | None = None
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
            await self._adopt_orphans()
        elif was and not held:
            log.info("this replica (%s) no longer runs the scheduled refreshes", self.holder)
        return held

    async def release_lease(self) -> None:
        """Give the lease up (on shutdown) so another replica takes over at once."""
        self._lease_until = None
        with contextlib.suppress(Exception):
            await self.registry.store.release_lease(LEASE, self.holder)

    async def _adopt_orphans(self) -> None:
        """Give agents registered by an older version (no refresh state) a schedule."""
        for agent_id in await self.registry.store.missing_refresh_rows():
            record = self.registry.catalog.snapshot.agents.get(agent_id)
            if record is None:
                continue
            row = self.registry.new_refresh_row(agent_id, record.source, None, None)
            await self.registry.store.modify_refresh(agent_id, lambda _old, row=row: row)

    async def run_due(self) -> RunReport:
        """Check every agent whose time has come (only while holding the lease)."""
        if not self.holds_lease():
            return RunReport()
        await self.registry.sync()
        rows = await self.registry.store.due(self.clock_now, self.batch)
        return await self._run([(row.agent_id, row.next_check_at) for row in rows])

    async def run_now(self, agent_ids: list[str] | None = None) -> RunReport:
        """Check the given agents (default: all) now, whether due or not, lease or not:
        the operator's ``POST /api/v1/refresh``. Claims still keep it from fetching what
        a scheduled check fetches at the same moment."""
        await self.registry.sync()
        wanted = (
            list(self.registry.catalog.snapshot.agents) if agent_ids is None else list(agent_ids)
        )
        pairs = []
        for agent_id in wanted:
            row = await self.registry.store.refresh_row(agent_id)
            pairs.append((agent_id, row.next_check_at if row else None))
        return await self._run(pairs)

    async def _run(self, due: list[tuple[str, datetime | None]]) -> RunReport:
        report = RunReport()
        semaphore = asyncio.Semaphore(self.concurrency)

        async def one(agent_id: str, expected: datetime | None) -> None:
            async with semaphore:
                await self._check(agent_id, expected, report)

        tasks = [asyncio.create_task(one(a, e)) for a, e in due]
        self._running.update(tasks)
        try:
            await asyncio.gather(*tasks)
        finally:
            self._running.difference_update(tasks)
        return report

    async def _check(self, agent_id: str, expected: datetime | None, report: RunReport) -> None:
        until = self.clock_now + timedelta(seconds=self.claim_for)
        if expected is not None:
            claimed = await self.registry.store.claim(agent_id, as_utc(expected), until)
            if not claimed:
                report.skipped.append(agent_id)
                return
        report.checked.append(agent_id)
        try:
            _record, changed = await self.registry.check_agent(agent_id)
        except NotFound:
            return  # removed meanwhile
        except RegistryError as exc:
            report.failed[agent_id] = exc.message
            return
        except Exception as exc:  # a bug must not stop the other checks
            log.exception("checking agent %s failed", agent_id)
            report.failed[agent_id] = f"internal error: {type(exc).__name__}"
            return
        if changed:
            report.changed.append(agent_id)
            log.info("agent %s: its card changed", agent_id)

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
                report = await self.refresher.run_due()
            except Exception:  # a database hiccup: the next tick tries again
                log.warning("scheduled refresh failed", exc_info=True)
                return
            if report.failed:
                log.info(
                    "scheduled refresh: %d checked, %d failed",
                    len(report.checked),
                    len(report.failed),
                )


class PassiveHealth:
    """What the router sees when it calls agents, reported to the registry in the background
    (the call never waits for the database): connection failures and 5xx answers count as
    failed checks, and an answer from an agent that was not healthy makes it healthy."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._tasks: set[asyncio.Task[Any]] = set()

    def failed(self, agent_id: str, reason: str) -> None:
        """The agent could not be reached, or answered 5xx."""
        self._spawn(self.registry.report_failure(agent_id, reason))

    def answered(self, agent_id: str) -> None:
        """The agent answered (below 500); free unless its status changes."""
        if self.registry.health_of(agent_id).status != "healthy":
            self._spawn(self.registry.report_success(agent_id))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(self._guarded(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, coro: Any) -> None:
        try:
            await coro
        except Exception:  # a report lost to a database hiccup; the schedule checks anyway
            log.warning("recording an agent's health failed", exc_info=True)

    async def drain(self) -> None:
        """Wait for the reports in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
