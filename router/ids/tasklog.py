"""The task list: one row per router task, written behind the requests that reveal them.

Mapping a router ID needs no row (:mod:`router.ids.tokens`); only ListTasks, the last known
task states and answers' references to earlier tasks do. So a request only queues its
task's row (or state) in this process, and :class:`TaskLog` writes the queue in batches, one
transaction per batch, a few tens of milliseconds later, off the request path (on a SQLite
file in a writer thread of its own: :mod:`registry.quickwrite`). It is written
before this process answers ListTasks, and at shutdown. Another replica sees a new task in
its ListTasks once that batch is written. Writes are idempotent upserts keyed on (agent,
upstream task): a task recorded twice, by any replicas, is one row; a state replaces the
stored one only when it differs and is not older.

Each row has an owner scope (:mod:`router.ids.owners`), and one upstream task is one row:
the first owner's. An agent that hands the same task to callers of two scopes (it shares
it, or reuses its IDs) gives each scope its own token for it (tokens need no row), but the
row, and so ListTasks, the stored state and the lookups of the task by its upstream ID,
stay the first owner's: a later owner's writes of that task change nothing, in the queue
(:meth:`TaskWrite.merge`) as in the table (the upsert's owner guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, or_
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from registry.store import Store
from router.ids.owners import task_owner
from router.tables import RouterTaskEntry

__all__ = ["TaskLog", "TaskWrite"]

log = logging.getLogger(__name__)

_BATCH = 200  # rows per transaction
_ATTEMPTS = 3  # failed batch writes before rows are tried one at a time
_RETRY_MAX = 5.0  # seconds between attempts after a failed write, at most


@dataclass
class TaskWrite:
    """One queued row: a task seen (``state`` None) or its state recorded at ``updated_at``,
    in owner scope ``owner`` (the scope itself, not its stored form)."""

    task_id: str
    agent_id: str
    upstream_task_id: str
    context_id: str | None
    state: str | None
    created_at: datetime
    updated_at: datetime
    owner: str = ""

    def merge(self, later: TaskWrite) -> None:
        """Fold a later write of the same task into this one (one of another owner changes
        nothing: the task is the first owner's)."""
        if later.owner != self.owner:
            return
        self.context_id = self.context_id or later.context_id
        if later.state is not None:
            self.state, self.updated_at = later.state, later.updated_at


class TaskLog:
    """The write-behind queue of task rows of one process (see the module docs)."""

    def __init__(self, store: Store, delay: float = 0.05) -> None:
        self.store = store
        self.delay = delay  # seconds a queued row waits for others to share its transaction
        self._pending: dict[tuple[str, str], TaskWrite] = {}
        self._inflight: dict[tuple[str, str], TaskWrite] = {}  # being written: still visible
        self._failures = 0  # consecutive failed batch writes
        self._lock = asyncio.Lock()
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    def add(self, write: TaskWrite) -> None:
        """Queue a row; it is written within :attr:`delay` seconds (or at :meth:`flush`)."""
        key = (write.agent_id, write.upstream_task_id)
        queued = self._pending.get(key)
        if queued is None:
            self._pending[key] = write
        else:
            queued.merge(write)
        if self._flusher is None and not self._closed:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def pending(self, agent_id: str, upstream_task_id: str, owner: str = "") -> TaskWrite | None:
        """The queued row of a task of scope ``owner``, if it is not written yet (or being
        written)."""
        key = (agent_id, upstream_task_id)
        write = self._pending.get(key) or self._inflight.get(key)
        return write if write is not None and write.owner == owner else None

    def pending_rows(self, owner: str | None = None) -> list[TaskWrite]:
        """Every queued row (those being written included), or those of scope ``owner``."""
        rows = {**self._inflight, **self._pending}.values()
        return [w for w in rows if owner is None or w.owner == owner]

    async def flush(self) -> None:
        """Write every queued row now (what ListTasks waits for); raises if the database
        fails (the rows stay queued)."""
        async with self._lock:
            while self._pending:
                batch = dict(list(self._pending.items())[:_BATCH])
                for key in batch:
                    del self._pending[key]
                self._inflight = batch
                try:
                    await self._write(list(batch.values()))
                    self._failures = 0
                except Exception:
                    self._failures += 1
                    if self._failures < _ATTEMPTS or not await self._write_each(batch):
                        self._requeue(batch)
                        raise
                except BaseException:
                    self._requeue(batch)
                    raise
                finally:
                    self._inflight = {}

    def _requeue(self, batch: dict[tuple[str, str], TaskWrite]) -> None:
        for key, write in batch.items():  # back in the queue, older first
            later = self._pending.get(key)
            if later is not None:
                write.merge(later)
            self._pending[key] = write

    async def _write_each(self, batch: dict[tuple[str, str], TaskWrite]) -> bool:
        """After repeated failures, write the rows one at a time: a row that alone cannot be
        written is logged and dropped, so it cannot block the others (and ListTasks) for
        ever. False if none could be written (the database is down: keep them all)."""
        failed: list[tuple[str, str]] = []
        for key, write in batch.items():
            try:
                await self._write([write])
            except Exception:
                failed.append(key)
        if len(failed) == len(batch):
            return False
        for key in failed:
            log.error("dropped task row %s of agent %s: it cannot be written", key[1], key[0])
        self._failures = 0
        return True

    async def close(self) -> None:
        """Stop the timer and write what is queued (at shutdown)."""
        self._closed = True
        if self._flusher is not None:
            self._flusher.cancel()
            with contextlib.suppress(BaseException):
                await self._flusher
            self._flusher = None
        try:
            await self.flush()
        except Exception:
            log.exception("could not write %d task row(s) at shutdown", len(self._pending))

    async def _flush_later(self) -> None:
        wait = self.delay
        try:
            while self._pending and not self._closed:
                await asyncio.sleep(wait)
                try:
                    await self.flush()
                    wait = self.delay
                except Exception:
                    log.exception("could not write %d task row(s); retrying", len(self._pending))
                    wait = min(max(wait * 2, 0.1), _RETRY_MAX)
        finally:
            self._flusher = None

    async def _write(self, rows: list[TaskWrite]) -> None:
        values = [
            {
                "task_id": w.task_id,
                "agent_id": w.agent_id,
                "upstream_task_id": w.upstream_task_id,
                "context_id": w.context_id,
                "owner": task_owner(w.owner),
                "state": w.state,
                "created_at": w.created_at,
                "updated_at": w.updated_at,
            }
            for w in rows
        ]
        upsert = _upsert(self.store.engine.dialect.name)
        try:
            await self.store.behind.execute_many(upsert, values)
        except IntegrityError:
            # Another replica inserted one of these rows (the same sealed task ID) while this
            # insert ran: PostgreSQL raises on the primary key instead of taking the (agent,
            # upstream task) conflict path. Its row is committed now: once more takes that path.
            await self.store.behind.execute_many(upsert, values)


@functools.cache
def _upsert(dialect: str) -> Any:
    """INSERT .. ON CONFLICT (agent, upstream task) that keeps the first task ID, owner and
    creation time, and for the same owner only fills a missing context and takes a state
    that differs and is not older."""
    table: Any = RouterTaskEntry.__table__
    insert = pg_insert if dialect == "postgresql" else sqlite_insert
    statement = insert(table)
    new, old = statement.excluded, table.c
    mine = old.owner.is_not_distinct_from(new.owner)
    take = and_(
        mine,
        new.state.is_not(None),
        or_(old.state.is_(None), old.state != new.state),
        new.updated_at >= old.updated_at,
    )
    return statement.on_conflict_do_update(
        index_elements=[old.agent_id, old.upstream_task_id],
        set_={
            "context_id": case(
                (mine, func.coalesce(old.context_id, new.context_id)), else_=old.context_id
            ),
            "state": case((take, new.state), else_=old.state),
            "updated_at": case((take, new.updated_at), else_=old.updated_at),
        },
    )
