"""Task and context ID mapping: clients see only the router's IDs.

A router task ID maps to one (agent, upstream task ID). A router context ID maps to one
upstream context ID per agent, so one conversation can span several agents and no agent ever
sees another agent's IDs or the router's.

Every task and context belongs to an owner scope (:mod:`router.ids.owners`): an
:class:`IdMap` is a view of the map in one scope (:meth:`IdMap.scoped`; the map itself is the
anonymous scope's), and another scope's tasks and contexts are, in it, IDs that do not exist:
the same answer, the same work (a token of another scope fails to open as a forged one does;
a stored ID is looked up once either way, and then is not this scope's). A view may name the
scope earlier versions gave its caller (``old``): an exchange whose IDs are that scope's runs
in it (:mod:`router.ids.oldscope`), and ListTasks lists both.

The common IDs carry their mapping themselves: sealed tokens (:mod:`router.ids.tokens`), the same
in every replica and after a restart, unforgeable, so mapping them reads no table. The rare
ones are stored with LRU caches in front (keyed by scope too), race-safe through unique
constraints: contexts in ``router_context_entries`` (a context the client chose, a router
context another agent joins, an upstream ID too long for a token; per owner, so two owners
who choose the same context ID hold two conversations), task IDs in the task list
``router_task_entries`` (an upstream ID too long for a token, and every ID of the previous
scheme; the tables of earlier versions were moved by the baseline schema revision,
:mod:`registry.migrations.legacy`).
Task rows and last known states are otherwise written behind the requests
(:mod:`router.ids.tasklog`); ListTasks reads them through :attr:`IdMap.tasks`
(:mod:`router.ids.tasklist`). v0.1 clients' own task IDs are
:class:`router.compat.aliases.TaskAliases`.

:class:`router.ids.rewrite.Rewriter` applies the mapping to requests, results, stream events
and errors of both protocol versions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from uuid import uuid4

from cachetools import LRUCache, TTLCache
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from registry.records import utcnow
from registry.store import Store
from router.ids.owners import owner_key, owns_task, task_owner
from router.ids.refs import TaskRef, check_id, ref_of, valid_id
from router.ids.tasklist import TaskList
from router.ids.tasklog import TaskLog, TaskWrite
from router.ids.tokens import (
    CONTEXT_PREFIX,
    CTX_NONE,
    CTX_ROUTER,
    CTX_UPSTREAM,
    TASK_PREFIX,
    Sealer,
    load_id_secret,
)
from router.protocol.payloads import MAX_ID_LENGTH, params_error
from router.protocol.versions import canonical_state
from router.tables import RouterContextEntry, RouterTaskEntry

__all__ = ["IdMap"]

_NO_AGENT = ""  # agent_id of the row marking a router context that no agent serves yet
_AGENTS_TTL = 30.0  # seconds; another replica may add an agent to a context meanwhile


class _Shared:
    """What every scope's view of one map shares: the store, the task log, the key and the
    caches (every cache key starts with the scope)."""

    def __init__(self, store: Store, cache_size: int, flush_delay: float) -> None:
        self.store = store
        self.log = TaskLog(store, flush_delay)
        self.sealer: Sealer | None = None  # the anonymous scope's, once the key is loaded
        self.key_lock = asyncio.Lock()
        # (scope, task ID) -> ref; (scope, agent, upstream task) -> task ID
        self.tasks: LRUCache[tuple[str, str], TaskRef] = LRUCache(cache_size)
        self.by_upstream_task: LRUCache[tuple[str, str, str], str] = LRUCache(cache_size)
        # (scope, context, agent) -> upstream context; (scope, agent, upstream) -> context
        self.upstream_ctx: LRUCache[tuple[str, str, str], str] = LRUCache(cache_size)
        self.router_ctx: LRUCache[tuple[str, str, str], str] = LRUCache(cache_size)
        self.known_ctx: LRUCache[tuple[str, str], bool] = LRUCache(cache_size)
        # (scope, context token) -> (agent, upstream context): tokens sealed or opened here
        self.opened_ctx: LRUCache[tuple[str, str], tuple[str, str]] = LRUCache(cache_size)
        self.agents: TTLCache[tuple[str, str], frozenset[str]] = TTLCache(cache_size, _AGENTS_TTL)


# --- the map ---------------------------------------------------------------------------------


class IdMap:
    """Router IDs <-> upstream IDs: sealed tokens, a few stored mappings, cached per process;
    the anonymous scope's view (:meth:`scoped` gives another scope's).

    The common IDs are tokens (:mod:`router.ids.tokens`): mapping them reads no table. Stored
    mappings remain for the rare cases a token cannot carry: a context the client chose, a
    router context another agent joins, IDs a token would make too long, and the IDs of
    the previous (stored) scheme. Only positive answers are cached (a miss asks the
    database, so IDs stored by another replica or before a restart resolve). Task rows
    for ListTasks and states are written behind (:class:`router.ids.tasklog.TaskLog`) and
    listed by :attr:`tasks` (:class:`router.ids.tasklist.TaskList`).
    """

    def __init__(self, store: Store, cache_size: int = 10000, flush_delay: float = 0.05) -> None:
        self._view(_Shared(store, cache_size, flush_delay), "")

    def _view(self, shared: _Shared, scope: str, old: str | None = None) -> None:
        self._shared = shared
        self.scope = scope
        self.old = old if old != scope else None
        """The scope earlier versions gave this view's caller, if another (one version's
        grace: :mod:`router.ids.oldscope`)."""
        self.store = shared.store
        self.log = shared.log
        self._owner = owner_key(scope)  # the stored form of the scope
        self._sealer: Sealer | None = None  # this scope's, once the key is loaded

    def scoped(self, scope: str, old: str | None = None) -> IdMap:
        """This map in owner scope ``scope`` (``""``: the anonymous one): the same store,
        task log, key and caches; every ID it makes or finds is that scope's. ``old``: the
        scope earlier versions gave the same caller (:mod:`router.ids.oldscope`). Cheap (one
        small object), so made per request."""
        if scope == self.scope and old == self.old:
            return self
        view = object.__new__(IdMap)
        view._view(self._shared, scope, old)
        return view

    @property
    def tasks(self) -> TaskList:
        """ListTasks over this scope's tasks (and its :attr:`old` scope's)."""
        return TaskList(self.store, self.log, self.scope, self.old)

    def view_of(self, ref: TaskRef) -> IdMap:
        """The view of the scope ``ref`` was listed in (this one, or its :attr:`old` one)."""
        return self.scoped(ref.owner) if self.old is not None and ref.owner == self.old else self

    # --- lifecycle ---

    async def start(self) -> None:
        """Load the ID key (the tables of earlier versions are the schema migrations' job:
        :mod:`registry.migrations.legacy`)."""
        await self.sealer()

    async def close(self) -> None:
        """Write the queued task rows."""
        await self.log.close()

    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """An aiohttp ``cleanup_ctx``: :meth:`start`, then :meth:`close` at shutdown."""
        await self.start()
        try:
            yield
        finally:
            await self.close()

    async def flush(self) -> None:
        """Write the queued task rows now."""
        await self.log.flush()

    async def sealer(self) -> Sealer:
        """The sealer of this scope's router IDs, its key loaded (or made) on first use."""
        if self._sealer is None:
            shared = self._shared
            if shared.sealer is None:
                async with shared.key_lock:
                    if shared.sealer is None:
                        shared.sealer = Sealer(await load_id_secret(self.store))
            self._sealer = shared.sealer.scoped(self.scope)
        return self._sealer

    # --- tasks ---

    async def task(self, task_id: str) -> TaskRef | None:
        """The task behind a router task ID of this scope, or None (forged and altered IDs,
        and other scopes' IDs, too)."""
        if not valid_id(task_id):
            return None
        ref = self._shared.tasks.get((self.scope, task_id))
        if ref is not None:
            return ref
        if task_id.startswith(TASK_PREFIX):
            sealer = await self.sealer()
            opened = sealer.open_task(task_id)
            if opened is None:
                return None
            agent_id, upstream, kind, context = opened
            if kind == CTX_UPSTREAM and context is not None:
                context = sealer.seal_context(agent_id, context)
            ref = TaskRef(task_id, agent_id, upstream, context, None, owner=self.scope)
            self._cache_ref(ref)
            return ref
        async with self.store.session() as session:  # a stored ID: its task-list row
            row = await session.get(RouterTaskEntry, task_id)
        if row is None or (row.owner or "") != self._owner:
            return None
        return self._cache_ref(ref_of(row, self.scope))

    async def task_by_upstream(self, agent_id: str, upstream_task_id: str) -> TaskRef | None:
        """The router task of this scope for an agent's task ID, if the router saw that task
        (never creates)."""
        if not valid_id(upstream_task_id):
            return None
        task_id = self._shared.by_upstream_task.get((self.scope, agent_id, upstream_task_id))
        if task_id is not None and (ref := await self.task(task_id)) is not None:
            return ref
        queued = self.log.pending(agent_id, upstream_task_id, self.scope)
        if queued is not None:
            return self._cache_ref(ref_of(queued))
        async with self.store.session() as session:
            result = await session.exec(
                select(RouterTaskEntry).where(
                    RouterTaskEntry.agent_id == agent_id,
                    RouterTaskEntry.upstream_task_id == upstream_task_id,
                    owns_task(self.scope),
                )
            )
            row = result.first()
        return self._cache_ref(ref_of(row, self.scope)) if row else None

    async def task_for_upstream(
        self, agent_id: str, upstream_task_id: str, context_id: str | None
    ) -> TaskRef:
        """The router task for an agent's task ID (in router context ``context_id``): a
        token, the same in every process; queued for the task list when new here."""
        check_id(upstream_task_id, "upstream task id")
        known = self._shared.by_upstream_task.get((self.scope, agent_id, upstream_task_id))
        ref = self._shared.tasks.get((self.scope, known)) if known is not None else None
        if ref is not None:
            if ref.context_id is None and context_id is not None:
                ref = self._cache_ref(replace(ref, context_id=context_id))
                self._queue(ref, None)
            return ref
        sealer = await self.sealer()
        kind, context = CTX_NONE, None
        if context_id is not None:
            opened = self._opened(sealer, context_id)
            if opened is not None and opened[0] == agent_id:
                kind, context = CTX_UPSTREAM, opened[1]
            else:
                kind, context = CTX_ROUTER, context_id
        token = sealer.seal_task(agent_id, upstream_task_id, kind, context)
        if len(token) > MAX_ID_LENGTH:  # long upstream IDs: a stored mapping
            return await self._stored_task(agent_id, upstream_task_id, context_id)
        now = utcnow()
        ref = self._cache_ref(
            TaskRef(token, agent_id, upstream_task_id, context_id, None, now, now, self.scope)
        )
        self._queue(ref, None)
        return ref

    async def _stored_task(
        self, agent_id: str, upstream_task_id: str, context_id: str | None
    ) -> TaskRef:
        """A task with a stored random ID (an upstream ID too long for a token): its task-list
        row, written at once (not behind) so that every replica resolves the ID; made if new,
        race-safe. A task the router already knows keeps its ID. Raises ValueError when the
        upstream task is another scope's (the agent gave one task to two owners)."""
        ref = await self.task_by_upstream(agent_id, upstream_task_id)
        if ref is None:
            now = utcnow()
            row = RouterTaskEntry(
                task_id=str(uuid4()),
                agent_id=agent_id,
                upstream_task_id=upstream_task_id,
                context_id=context_id,
                owner=task_owner(self.scope),
                created_at=now,
                updated_at=now,
            )
            try:
                async with self.store.session() as session, session.begin():
                    session.add(row)
            except IntegrityError:  # another task or replica made it first
                ref = await self.task_by_upstream(agent_id, upstream_task_id)
                if ref is None:
                    raise ValueError("the upstream task belongs to another owner") from None
            else:
                ref = ref_of(row, self.scope)
        if ref.context_id is None and context_id is not None:
            ref = replace(ref, context_id=context_id)
        ref = self._cache_ref(ref)
        self._queue(ref, None)
        return ref

    async def record_state(self, task_id: str, state: str) -> None:
        """Remember a task's last known state (either version's name); queued only on
        change. A task of the :attr:`old` scope (ListTasks lists them) is recorded there."""
        canonical = canonical_state(state)
        if canonical is None:
            return
        ref = await self.task(task_id)
        if ref is None and self.old is not None:
            await self.scoped(self.old).record_state(task_id, state)
            return
        if ref is None or ref.state == canonical:
            return
        ref = self._cache_ref(replace(ref, state=canonical, updated_at=utcnow()))
        self._queue(ref, canonical)

    def _queue(self, ref: TaskRef, state: str | None) -> None:
        now = ref.updated_at or utcnow()
        self.log.add(
            TaskWrite(
                task_id=ref.task_id,
                agent_id=ref.agent_id,
                upstream_task_id=ref.upstream_task_id,
                context_id=ref.context_id,
                state=state,
                created_at=ref.created_at or now,
                updated_at=now,
                owner=self.scope,
            )
        )
        if ref.context_id is not None:
            key = (self.scope, ref.context_id)
            agents = self._shared.agents.get(key)
            if agents is not None and ref.agent_id not in agents:
                self._shared.agents[key] = agents | {ref.agent_id}

    # --- contexts ---

    async def _open_context(self, context_id: str) -> tuple[str, str] | None:
        if not context_id.startswith(CONTEXT_PREFIX):
            return None
        return self._opened(await self.sealer(), context_id)

    def _opened(self, sealer: Sealer, context_id: str) -> tuple[str, str] | None:
        """``sealer.open_context``, remembering the tokens sealed or opened here: a token is
        one (agent, context) for one key and scope, so an answer's new context is not
        decrypted right after it was sealed."""
        key = (self.scope, context_id)
        opened = self._shared.opened_ctx.get(key)
        if opened is None:
            opened = sealer.open_context(context_id)
            if opened is not None:
                self._shared.opened_ctx[key] = opened
        return opened

    async def upstream_context(self, context_id: str, agent_id: str) -> str | None:
        """The agent's own context ID within a router context, if it has one yet."""
        if not valid_id(context_id):
            return None
        upstream = self._shared.upstream_ctx.get((self.scope, context_id, agent_id))
        if upstream is not None:
            return upstream
        opened = await self._open_context(context_id)
        if opened is not None and opened[0] == agent_id:
            return opened[1]
        async with self.store.session() as session:
            row = await session.get(RouterContextEntry, (self._owner, context_id, agent_id))
        if row is None or row.upstream_context_id is None:
            return None
        self._cache_context(context_id, agent_id, row.upstream_context_id)
        return row.upstream_context_id

    async def context_by_upstream(self, agent_id: str, upstream_context_id: str) -> str | None:
        """The router context of an agent's context ID, if the router saw that context
        (never creates)."""
        if not valid_id(upstream_context_id):
            return None
        context_id = self._shared.router_ctx.get((self.scope, agent_id, upstream_context_id))
        if context_id is not None:
            return context_id
        context_id = await self._stored_context_of(agent_id, upstream_context_id)
        if context_id is not None:
            return context_id
        token = (await self.sealer()).seal_context(agent_id, upstream_context_id)
        if any(w.context_id == token for w in self.log.pending_rows(self.scope)):
            return token
        async with self.store.session() as session:
            result = await session.exec(
                select(RouterTaskEntry.task_id)
                .where(
                    RouterTaskEntry.context_id == token,
                    RouterTaskEntry.agent_id == agent_id,
                    owns_task(self.scope),
                )
                .limit(1)
            )
            seen = result.first() is not None
        return token if seen else None

    async def _stored_context_of(self, agent_id: str, upstream_context_id: str) -> str | None:
        async with self.store.session() as session:
            result = await session.exec(
                select(RouterContextEntry.context_id).where(
                    RouterContextEntry.owner == self._owner,
                    RouterContextEntry.agent_id == agent_id,
                    RouterContextEntry.upstream_context_id == upstream_context_id,
                )
            )
            context_id = result.first()
        if context_id is not None:
            self._cache_context(context_id, agent_id, upstream_context_id)
        return context_id

    async def context_for_upstream(
        self, agent_id: str, upstream_context_id: str, proposed: str | None
    ) -> str:
        """The router context for an agent's context ID.

        With no ``proposed`` (the request's router context), or when ``proposed`` is this
        agent's token of another context: the context's own token (no lookup). When
        ``proposed`` is a context the client chose, another agent's, or a stored one: the
        stored mapping, made if the agent has no context there yet (race-safe), else the
        context's own token.
        """
        check_id(upstream_context_id, "upstream context id")
        key = (self.scope, agent_id, upstream_context_id)
        known = self._shared.router_ctx.get(key)
        if known is not None:
            return known
        sealer = await self.sealer()
        token = sealer.seal_context(agent_id, upstream_context_id)
        fits = len(token) <= MAX_ID_LENGTH
        if fits:  # what opening it gives (a longer token is never opened)
            self._shared.opened_ctx[(self.scope, token)] = (agent_id, upstream_context_id)
        if fits and (proposed is None or proposed == token):
            if proposed is None and (self.scope, token) not in self._shared.agents:
                # new here: nobody joined yet
                self._shared.agents[(self.scope, token)] = frozenset({agent_id})
            self._shared.router_ctx[key] = token
            return token
        opened = self._opened(sealer, proposed) if proposed is not None else None
        if fits and opened is not None and opened[0] == agent_id:
            self._shared.router_ctx[key] = token  # the agent's other conversation: its own
            return token
        return await self._stored_context(agent_id, upstream_context_id, proposed, fits)

    async def _stored_context(
        self, agent_id: str, upstream: str, proposed: str | None, token_fits: bool
    ) -> str:
        """The rare path of :meth:`context_for_upstream`: stored mappings (a context the
        router already knows for this upstream context wins)."""
        found = await self.context_by_upstream(agent_id, upstream)
        if found is not None:
            return found
        if proposed is not None and await self._claim(proposed, agent_id, upstream):
            self._cache_context(proposed, agent_id, upstream)
            self._shared.agents.pop((self.scope, proposed), None)
            return proposed
        found = await self._stored_context_of(agent_id, upstream)
        if found is not None:
            return found
        if token_fits:
            token = (await self.sealer()).seal_context(agent_id, upstream)
            self._shared.router_ctx[(self.scope, agent_id, upstream)] = token
            return token
        context_id = str(uuid4())  # an upstream ID too long for a token
        if await self._claim(context_id, agent_id, upstream):
            self._cache_context(context_id, agent_id, upstream)
            return context_id
        found = await self._stored_context_of(agent_id, upstream)
        if found is None:  # pragma: no cover - a fresh uuid4 was taken
            raise RuntimeError("could not allocate a router context")
        return found

    async def _claim(self, context_id: str, agent_id: str, upstream: str) -> bool:
        """Record (context, agent) -> upstream in this scope; False if the slot or the
        upstream context is taken by another mapping."""
        try:
            async with self.store.session() as session, session.begin():
                row = await session.get(
                    RouterContextEntry, (self._owner, context_id, agent_id), with_for_update=True
                )
                if row is None:
                    session.add(
                        RouterContextEntry(
                            owner=self._owner,
                            context_id=context_id,
                            agent_id=agent_id,
                            upstream_context_id=upstream,
                            created_at=utcnow(),
                        )
                    )
                elif row.upstream_context_id is None:
                    row.upstream_context_id = upstream
                    session.add(row)
                else:
                    return row.upstream_context_id == upstream
        except IntegrityError:
            return False
        return True

    async def knows_context(self, context_id: str) -> bool:
        """Whether ``context_id`` is a router context of this scope (made or named in it)."""
        if not valid_id(context_id):
            return False
        if (self.scope, context_id) in self._shared.known_ctx:
            return True
        if await self._open_context(context_id) is not None:
            return True
        async with self.store.session() as session:
            result = await session.exec(
                select(RouterContextEntry.agent_id)
                .where(
                    RouterContextEntry.owner == self._owner,
                    RouterContextEntry.context_id == context_id,
                )
                .limit(1)
            )
            return result.first() is not None

    async def ensure_context(self, context_id: str, field: str = "message.contextId") -> None:
        """Make a client-supplied context ID a router context of this scope (idempotent; a
        token of ours already is one).

        Raises :class:`RpcError` -32602 naming ``field`` (its path in the params) for an
        empty or overlong ID.
        """
        if not valid_id(context_id):
            raise params_error(
                [(field, f"must be a non-empty string of at most {MAX_ID_LENGTH} characters")]
            )
        if not await self.knows_context(context_id):
            try:
                async with self.store.session() as session, session.begin():
                    session.add(
                        RouterContextEntry(
                            owner=self._owner,
                            context_id=context_id,
                            agent_id=_NO_AGENT,
                            created_at=utcnow(),
                        )
                    )
            except IntegrityError:
                pass  # made meanwhile
        self._shared.known_ctx[(self.scope, context_id)] = True

    async def context_agents(self, context_id: str) -> set[str]:
        """The agents already serving a router context of this scope (briefly cached: another
        replica may add one meanwhile). A context token names its first agent itself."""
        if not valid_id(context_id):
            return set()
        key = (self.scope, context_id)
        agents = self._shared.agents.get(key)
        if agents is None:
            opened = await self._open_context(context_id)
            async with self.store.session() as session:
                contexts = await session.exec(
                    select(RouterContextEntry.agent_id).where(
                        RouterContextEntry.owner == self._owner,
                        RouterContextEntry.context_id == context_id,
                        RouterContextEntry.agent_id != _NO_AGENT,
                    )
                )
                agents = frozenset(contexts.all())
                if opened is None:  # a stored context: its tasks' agents too
                    tasks = await session.exec(
                        select(RouterTaskEntry.agent_id)
                        .where(RouterTaskEntry.context_id == context_id, owns_task(self.scope))
                        .distinct()
                    )
                    agents |= frozenset(tasks.all())
            if opened is not None:
                agents |= {opened[0]}
            pending = self.log.pending_rows(self.scope)
            agents |= {w.agent_id for w in pending if w.context_id == context_id}
            self._shared.agents[key] = agents
        return set(agents)

    # --- cache helpers ---

    def _cache_ref(self, ref: TaskRef) -> TaskRef:
        self._shared.tasks[(self.scope, ref.task_id)] = ref
        self._shared.by_upstream_task[(self.scope, ref.agent_id, ref.upstream_task_id)] = (
            ref.task_id
        )
        return ref

    def _cache_context(self, context_id: str, agent_id: str, upstream: str) -> None:
        self._shared.upstream_ctx[(self.scope, context_id, agent_id)] = upstream
        self._shared.router_ctx[(self.scope, agent_id, upstream)] = context_id
        self._shared.known_ctx[(self.scope, context_id)] = True
