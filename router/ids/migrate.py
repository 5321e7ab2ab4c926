"""The start-up step that retires the previous task table, ``router_tasks``.

Earlier versions stored a router task ID for every task in ``router_tasks``; the task list,
``router_task_entries`` (:class:`router.tables.RouterTaskEntry`), now holds every task the
router knows, stored IDs included. :func:`retire_router_tasks` copies the old rows the task
list lacks, under their old IDs (so clients' IDs keep working), and drops the old table, in
one transaction. It is idempotent and safe when replicas start together: on PostgreSQL an
advisory lock serializes it, on SQLite the write lock every transaction takes at its start.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import MetaData, Table, and_, exists, insert, inspect, null, or_, select, text
from sqlalchemy.exc import IntegrityError

from registry.store import Store
from router.tables import RouterTaskEntry

__all__ = ["retire_router_tasks"]

_OLD_TASKS = "router_tasks"
_LOCK = 0x5B_0A4E  # PostgreSQL advisory lock key held while retiring the old table
_ATTEMPTS = 3  # a running replica may write a copied task's row meanwhile: try again


async def retire_router_tasks(store: Store) -> int:
    """Copy the ``router_tasks`` rows that have no task-list row into the task list, then
    drop ``router_tasks``; the number of rows copied (0 once the table is gone)."""
    for attempt in range(_ATTEMPTS):
        try:
            async with store.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
                return await conn.run_sync(_retire)
        except IntegrityError:
            if attempt == _ATTEMPTS - 1:
                raise
    return 0  # pragma: no cover - the loop returns or raises


def _retire(conn: Any) -> int:
    """The migration on a synchronous connection inside its transaction."""
    if not inspect(conn).has_table(_OLD_TASKS):
        return 0
    old = Table(_OLD_TASKS, MetaData(), autoload_with=conn)
    new: Any = RouterTaskEntry.__table__
    names = [c.name for c in new.columns]
    same_task = and_(
        new.c.agent_id == old.c.agent_id, new.c.upstream_task_id == old.c.upstream_task_id
    )
    missing = ~exists().where(or_(same_task, new.c.task_id == old.c.task_id))
    # a column an old table may lack (all nullable) is copied as NULL
    columns = [old.c[n] if n in old.c else null().label(n) for n in names]
    copy = insert(new).from_select(names, select(*columns).where(missing))
    copied = conn.execute(copy.returning(new.c.task_id)).all()  # rowcount: -1 on psycopg
    old.drop(conn)
    return len(copied)
