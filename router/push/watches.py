"""The tasks the router follows itself (synthesized push, docs/push.md), with leases.

A task with a push notification config whose agent sends no push notifications is a row of
``router_push_watches`` until it reaches a terminal or interrupted state (or loses its last
config). Each replica claims the rows nobody holds, or whose holder's lease ended (a dead
replica), with a conditional update (one replica per task), and renews its leases while it
follows them; a replica that stops cleanly releases its leases, so another one (or itself,
restarted) takes the tasks over at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from registry.records import utcnow
from registry.store import Store
from router.tables import PushWatchRow

__all__ = ["Watch", "Watches"]


@dataclass(frozen=True)
class Watch:
    """One followed task: the router task, its agent, the agent's task, the owner scope."""

    task_id: str
    agent_id: str
    upstream_task_id: str
    scope: str


class Watches:
    """The ``router_push_watches`` table (shared by the replicas)."""

    def __init__(
        self, store: Store, *, lease: float = 60.0, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.store = store
        self.lease = lease
        self.clock = clock

    async def add(self, watch: Watch) -> bool:
        """Start following a task (nothing happens if it is followed already); whether the row
        is new."""
        try:
            async with self.store.session() as session, session.begin():
                if await session.get(PushWatchRow, watch.task_id) is not None:
                    return False
                session.add(PushWatchRow(**watch.__dict__, created_at=self.clock()))
        except IntegrityError:  # another replica added it at the same time
            return False
        return True

    async def remove(self, task_id: str) -> None:
        """Stop following a task."""
        async with self.store.session() as session, session.begin():
            row = await session.get(PushWatchRow, task_id)
            if row is not None:
                await session.delete(row)

    async def claim(self, holder: str) -> list[Watch]:
        """Take the rows nobody holds (or whose lease ended) for :attr:`lease` seconds."""
        now = self.clock()
        free = or_(col(PushWatchRow.lease_until).is_(None), col(PushWatchRow.lease_until) <= now)
        async with self.store.session() as session:
            rows = list((await session.exec(select(PushWatchRow).where(free).limit(64))).all())
        taken = []
        for row in rows:
            async with self.store.session() as session, session.begin():
                result = await session.exec(  # type: ignore[call-overload]
                    update(PushWatchRow)
                    .where(col(PushWatchRow.task_id) == row.task_id)
                    .where(free)
                    .values(leased_by=holder, lease_until=now + timedelta(seconds=self.lease))
                )
            if result.rowcount == 1:
                taken.append(Watch(row.task_id, row.agent_id, row.upstream_task_id, row.scope))
        return taken

    async def renew(self, holder: str, task_id: str) -> bool:
        """Extend ``holder``'s lease on a task; False when it no longer holds it."""
        until = self.clock() + timedelta(seconds=self.lease)
        async with self.store.session() as session, session.begin():
            result = await session.exec(  # type: ignore[call-overload]
                update(PushWatchRow)
                .where(col(PushWatchRow.task_id) == task_id)
                .where(col(PushWatchRow.leased_by) == holder)
                .values(lease_until=until)
            )
        return bool(result.rowcount == 1)

    async def release(self, holder: str) -> None:
        """Give up every lease ``holder`` has (a clean stop: the tasks are taken over at once)."""
        async with self.store.session() as session, session.begin():
            await session.exec(  # type: ignore[call-overload]
                update(PushWatchRow)
                .where(col(PushWatchRow.leased_by) == holder)
                .values(leased_by=None, lease_until=None)
            )

    async def all(self) -> list[Watch]:
        """Every followed task (for tests and operators)."""
        async with self.store.session() as session:
            rows = (await session.exec(select(PushWatchRow))).all()
        return [Watch(r.task_id, r.agent_id, r.upstream_task_id, r.scope) for r in rows]
