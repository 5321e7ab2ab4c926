"""Task IDs chosen by A2A v0.1 clients (``tasks/send`` ``id``) and the router tasks they stand
for: stored (the first binding wins, in any process), cached per process.

Bindings are in ``router_task_alias_entries`` (:class:`router.tables.TaskAliasEntry`); those of
earlier versions stay in ``router_task_aliases`` (:class:`router.tables.TaskAliasRow`) and
still resolve. See :mod:`router.compat.codec` for where they are made and read.
"""

from __future__ import annotations

from cachetools import LRUCache, TTLCache
from sqlalchemy.exc import IntegrityError

from registry.records import utcnow
from registry.store import Store
from router.ids.refs import check_id, valid_id
from router.tables import TaskAliasEntry, TaskAliasRow

__all__ = ["TaskAliases"]

# seconds an unknown v0.1 alias stays unknown without asking the database again (in this
# process a binding ends it at once; another replica's binding is seen after this)
_ALIAS_MISS_TTL = 2.0


class TaskAliases:
    """v0.1 clients' task IDs -> router task IDs (see the module docs)."""

    def __init__(self, store: Store, cache_size: int = 10000) -> None:
        self.store = store
        self._aliases: LRUCache[str, str] = LRUCache(cache_size)
        self._alias_misses: TTLCache[str, bool] = TTLCache(cache_size, _ALIAS_MISS_TTL)

    async def alias(self, client_task_id: str) -> str | None:
        """The router task that an A2A v0.1 client's own task ID stands for, or None."""
        if not valid_id(client_task_id):
            return None
        task_id = self._aliases.get(client_task_id)
        if task_id is not None:
            return task_id
        if client_task_id in self._alias_misses:
            return None
        async with self.store.session() as session:
            row: TaskAliasEntry | TaskAliasRow | None = await session.get(
                TaskAliasEntry, client_task_id
            )
            if row is None:
                row = await session.get(TaskAliasRow, client_task_id)
        if row is None:
            self._alias_misses[client_task_id] = True
            return None
        self._aliases[client_task_id] = row.task_id
        return row.task_id

    async def bind_alias(self, client_task_id: str, task_id: str) -> str:
        """Make a v0.1 client's task ID stand for router task ``task_id``, unless it already
        stands for one: the first binding wins, in any process. The bound router task."""
        check_id(client_task_id, "client task id")
        self._alias_misses.pop(client_task_id, None)
        known = await self.alias(client_task_id)
        if known is not None:
            return known
        try:
            async with self.store.session() as session, session.begin():
                session.add(
                    TaskAliasEntry(alias=client_task_id, task_id=task_id, created_at=utcnow())
                )
        except IntegrityError:  # another request or replica bound it first
            self._alias_misses.pop(client_task_id, None)
            known = await self.alias(client_task_id)
            if known is None:
                raise
            return known
        self._aliases[client_task_id] = task_id
        return task_id
