"""The start-up step that moves the ID tables of earlier versions into today's.

- ``router_tasks``: earlier versions stored a router task ID for every task there; the task
  list, ``router_task_entries`` (:class:`router.tables.RouterTaskEntry`), now holds every task
  the router knows, stored IDs included. The old rows the task list lacks are copied under
  their old IDs (so clients' IDs keep working).
- ``router_task_entries.owner``: the column is added by the store at start
  (:class:`registry.store.Store`); its index is made here.
- ``router_contexts`` (key: context, agent): its rows move to ``router_context_entries``
  (:class:`router.tables.RouterContextEntry`, key: owner, context, agent) in the anonymous
  scope, whose contexts they were.
- ``router_task_alias_entries`` and the older ``router_task_aliases`` (key: the v0.1
  client's task ID): their rows move to ``router_task_alias_bindings``
  (:class:`router.tables.TaskAliasBinding`, key: owner, alias) in the anonymous scope (the
  first table wins where both bind one ID, as lookups did).

Each old table is dropped once copied, in the same transaction. :func:`migrate_ids` is
idempotent and safe when replicas start together: on PostgreSQL an advisory lock serializes
it, on SQLite the write lock every transaction takes at its start.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import (
    MetaData,
    Table,
    and_,
    exists,
    insert,
    inspect,
    literal_column,
    null,
    or_,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from registry.store import Store
from router.tables import RouterContextEntry, RouterTaskEntry, TaskAliasBinding

__all__ = ["migrate_ids", "retire_router_tasks"]

_OLD_TASKS = "router_tasks"
_OLD_CONTEXTS = "router_contexts"
_OLD_ALIASES = ("router_task_alias_entries", "router_task_aliases")  # the first one wins
_LOCK = 0x5B_0A4E  # PostgreSQL advisory lock key held while moving the old tables
_ATTEMPTS = 3  # a running replica may write a copied row meanwhile: try again
_T = TypeVar("_T")


async def migrate_ids(store: Store) -> dict[str, int]:
    """Move every old ID table (see the module docs); the rows copied per old table (none
    once they are gone)."""
    return await _locked(store, _migrate_all)


async def retire_router_tasks(store: Store) -> int:
    """Copy the ``router_tasks`` rows that have no task-list row into the task list, then
    drop ``router_tasks``; the number of rows copied (0 once the table is gone)."""
    return await _locked(store, _retire_tasks)


async def _locked(store: Store, step: Callable[[Any], _T]) -> _T:
    """Run ``step`` on a synchronous connection in one transaction, under the lock."""
    for attempt in range(_ATTEMPTS):
        try:
            async with store.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
                return await conn.run_sync(step)
        except IntegrityError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _migrate_all(conn: Any) -> dict[str, int]:
    copied = {_OLD_TASKS: _retire_tasks(conn)}
    owner: Any = RouterTaskEntry.__table__.c.owner
    for index in RouterTaskEntry.__table__.indexes:  # type: ignore[attr-defined]
        if list(index.columns) == [owner]:
            index.create(conn, checkfirst=True)
    copied[_OLD_CONTEXTS] = _retire_contexts(conn)
    for name in _OLD_ALIASES:
        copied[name] = _retire_aliases(conn, name)
    return copied


def _old(conn: Any, name: str) -> Table | None:
    if not inspect(conn).has_table(name):
        return None
    return Table(name, MetaData(), autoload_with=conn)


def _retire_tasks(conn: Any) -> int:
    """``router_tasks`` into the task list (the anonymous scope: the owner is NULL)."""
    old = _old(conn, _OLD_TASKS)
    if old is None:
        return 0
    new: Any = RouterTaskEntry.__table__
    names = [c.name for c in new.columns]
    same_task = and_(
        new.c.agent_id == old.c.agent_id, new.c.upstream_task_id == old.c.upstream_task_id
    )
    missing = ~exists().where(or_(same_task, new.c.task_id == old.c.task_id))
    # a column an old table may lack (all nullable) is copied as NULL
    columns = [old.c[n] if n in old.c else null().label(n) for n in names]
    return _copy(conn, old, insert(new).from_select(names, select(*columns).where(missing)))


def _retire_contexts(conn: Any) -> int:
    """``router_contexts`` into ``router_context_entries``, owner ``""``."""
    old = _old(conn, _OLD_CONTEXTS)
    if old is None:
        return 0
    new: Any = RouterContextEntry.__table__
    taken = exists().where(  # the same slot, or the same upstream context, already moved
        new.c.owner == "",
        new.c.agent_id == old.c.agent_id,
        or_(
            new.c.context_id == old.c.context_id,
            new.c.upstream_context_id == old.c.upstream_context_id,
        ),
    )
    names = ["owner", "context_id", "agent_id", "upstream_context_id", "created_at"]
    rows = select(literal_column("''"), *(old.c[n] for n in names[1:])).where(~taken)
    return _copy(conn, old, insert(new).from_select(names, rows))


def _retire_aliases(conn: Any, name: str) -> int:
    """One old alias table into ``router_task_alias_bindings``, owner ``""``."""
    old = _old(conn, name)
    if old is None:
        return 0
    new: Any = TaskAliasBinding.__table__
    taken = exists().where(new.c.owner == "", new.c.alias == old.c.alias)
    names = ["owner", "alias", "task_id", "created_at"]
    rows = select(literal_column("''"), *(old.c[n] for n in names[1:])).where(~taken)
    return _copy(conn, old, insert(new).from_select(names, rows))


def _copy(conn: Any, old: Table, statement: Any) -> int:
    """Run the copy, drop the old table; the rows copied."""
    first: Any = next(iter(statement.table.primary_key.columns))
    copied = conn.execute(statement.returning(first)).all()  # rowcount: -1 on psycopg
    old.drop(conn)
    return len(copied)
