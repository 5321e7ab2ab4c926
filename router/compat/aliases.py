"""Task IDs chosen by A2A v0.1 clients (``tasks/send`` ``id``) and the router tasks they stand
for: stored (the first binding wins, in any process), cached per process, per owner scope.

A v0.1 client names its own tasks, so two callers may both choose ``task-1``: a binding
belongs to the owner scope it was made in (:mod:`router.ids.owners`), and
:meth:`TaskAliases.scoped` gives the view of one scope (the object itself is the anonymous
scope's). In another scope an alias is as unknown as one nobody chose, and can be bound
there again to that scope's task. For one version a view also finds the aliases of the
scope earlier versions gave its caller (``old``: :mod:`router.ids.oldscope`).

Bindings are in ``router_task_alias_bindings`` (:class:`router.tables.TaskAliasBinding`, key:
owner, alias); those of earlier versions were moved there, in the anonymous scope, by the
baseline schema revision (:mod:`registry.migrations.legacy`). See :mod:`router.compat.codec`
for where they are made and read.
"""

from __future__ import annotations

import copy

from cachetools import LRUCache, TTLCache
from sqlalchemy.exc import IntegrityError

from registry.records import utcnow
from registry.store import Store
from router.ids.owners import owner_key
from router.ids.refs import check_id, valid_id
from router.tables import TaskAliasBinding

__all__ = ["TaskAliases"]

# seconds an unknown v0.1 alias stays unknown without asking the database again (in this
# process a binding ends it at once; another replica's binding is seen after this)
_ALIAS_MISS_TTL = 2.0


class TaskAliases:
    """v0.1 clients' task IDs -> router task IDs, in one owner scope (see the module docs)."""

    def __init__(self, store: Store, cache_size: int = 10000) -> None:
        self.store = store
        self.scope = ""
        self._owner = ""  # the stored form of the scope
        self._old: TaskAliases | None = None  # the caller's scope in earlier versions
        # (scope, alias) -> router task ID; unknown (scope, alias) pairs, briefly
        self._aliases: LRUCache[tuple[str, str], str] = LRUCache(cache_size)
        self._alias_misses: TTLCache[tuple[str, str], bool] = TTLCache(cache_size, _ALIAS_MISS_TTL)

    def scoped(self, scope: str, old: str | None = None) -> TaskAliases:
        """The aliases of owner scope ``scope`` (``""``: the anonymous one), which also finds
        those of ``old`` (the same caller's scope in earlier versions): the same store and
        caches. Cheap, so made per request."""
        if scope == self.scope and old is None and self._old is None:
            return self
        view = copy.copy(self)  # shares the caches
        view.scope, view._owner, view._old = scope, owner_key(scope), None
        if old is not None and old != scope:
            view._old = view.scoped(old)
        return view

    async def alias(self, client_task_id: str) -> str | None:
        """The router task that an A2A v0.1 client's own task ID stands for in this scope, or
        None."""
        if not valid_id(client_task_id):
            return None
        key = (self.scope, client_task_id)
        task_id = self._aliases.get(key)
        if task_id is not None:
            return task_id
        if key in self._alias_misses:
            return None if self._old is None else await self._old.alias(client_task_id)
        async with self.store.session() as session:
            row = await session.get(TaskAliasBinding, (self._owner, client_task_id))
        if row is None:
            self._alias_misses[key] = True
            return None if self._old is None else await self._old.alias(client_task_id)
        self._aliases[key] = row.task_id
        return row.task_id

    async def bind_alias(self, client_task_id: str, task_id: str) -> str:
        """Make a v0.1 client's task ID stand for router task ``task_id`` in this scope, unless
        it already stands for one: the first binding wins, in any process. The bound router
        task."""
        check_id(client_task_id, "client task id")
        key = (self.scope, client_task_id)
        self._alias_misses.pop(key, None)
        known = await self.alias(client_task_id)
        if known is not None:
            return known
        try:
            async with self.store.session() as session, session.begin():
                session.add(
                    TaskAliasBinding(
                        owner=self._owner,
                        alias=client_task_id,
                        task_id=task_id,
                        created_at=utcnow(),
                    )
                )
        except IntegrityError:  # another request or replica bound it first
            self._alias_misses.pop(key, None)
            known = await self.alias(client_task_id)
            if known is None:
                raise
            return known
        self._aliases[key] = task_id
        return task_id
