"""Persistence: reads and writes of agents, their refresh state and leases (SQLite or
PostgreSQL).

The database is the source of truth; replicas share nothing else. Every write of an agent
replaces its interfaces, skills, tags and modes in one transaction and bumps a catalog
version counter and records which agent that version changed (``catalog_changes``); each
process compares that counter with its in-memory snapshot's version and reads the agents
another process changed (see ``Registry.sync``). The tables
are in :mod:`registry.tables`, the engine in :mod:`registry.engine`, the mapping between
records and rows in :mod:`registry.rows`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel, col, delete, select, update
from sqlmodel.ext.asyncio.session import AsyncSession

from registry.dbmetrics import time_statements
from registry.engine import create_engine
from registry.errors import RegistryError
from registry.metrics import CARD_CHANGES
from registry.migrations import MigrationError, Prepared, prepare
from registry.quickread import QuickReads
from registry.quickwrite import QuickWrites
from registry.records import AgentRecord, as_utc
from registry.rows import (
    Values,
    agent_row,
    agent_values,
    child_values,
    records_from,
    revision_row,
    revision_values,
)
from registry.tables import (
    TABLES,
    AgentRow,
    CardRevisionRow,
    CatalogChangeRow,
    CatalogStateRow,
    InterfaceRow,
    LeaseRow,
    RefreshRow,
    SkillModeRow,
    SkillRow,
    SkillTagRow,
)
from registry.writebatch import WriteBatcher

log = logging.getLogger(__name__)

# --- tables ----------------------------------------------------------------------------------


CATALOG_VERSION = "catalog_version"
HEALTH_VERSION = "health_version"
_VERSION, _HEALTH_VERSION = CATALOG_VERSION, HEALTH_VERSION  # the counters' keys
# what routing and the API's health view show: a change of these bumps health_version
_SHOWN = ("status", "consecutive_failures", "last_error", "card_error", "interval")
_QUICK_AGENTS = 64  # agents read in the calling thread on a SQLite file (a catch-up's few)
CHANGES_KEPT = 10_000
"""Catalog versions whose changed agent is kept (a replica further behind reloads all)."""
_Insert = tuple[AgentRecord, bytes, "RefreshRow | None"]
_CHILDREN: tuple[type[SQLModel], ...] = (SkillModeRow, SkillTagRow, SkillRow, InterfaceRow)
_AGENTS: Any = AgentRow.__table__  # type: ignore[attr-defined]
_REVISIONS: Any = CardRevisionRow.__table__  # type: ignore[attr-defined]
_REFRESH: Any = RefreshRow.__table__  # type: ignore[attr-defined]


# --- the store -------------------------------------------------------------------------------


class Store:
    """Reads and writes agent records; one instance per process, safe for concurrent tasks."""

    def __init__(self, url: str, tables: Iterable[type[SQLModel]] = TABLES) -> None:
        """``tables`` are the tables :meth:`create_schema` creates and checks: the registry's
        by default; the router passes its own too (:data:`router.tables.SCHEMA`)."""
        self.url = url
        self.tables = tuple(tables)
        self.engine = create_engine(url)
        time_statements(self.engine)
        self.quick = QuickReads(url, self.engine)  # one row a request waits for
        self.behind = QuickWrites(url, self.engine)  # batches written behind the requests
        # writes and reads that arrive while one is under way share the next transaction
        self._inserts: WriteBatcher[_Insert, int] = WriteBatcher(self._insert_batch)
        self._versions: WriteBatcher[None, dict[str, int]]
        self._versions = WriteBatcher(self._read_versions, 4096)
        self._raws: WriteBatcher[str, bytes | None] = WriteBatcher(self._read_raws, 500)

    @property
    def insert_batches(self) -> int:
        """Transactions the inserts were written in so far (fewer than the inserts when
        concurrent ones shared one)."""
        return self._inserts.batches

    async def create_schema(self) -> Prepared:
        """Bring the database to this version's schema (:func:`registry.migrations.prepare`):
        at its revision, one read; an empty database gets the tables, an older one the
        migrations, under a database lock. A newer one (``schema_too_new``), or one too old to
        upgrade (``schema_outdated``): a :class:`RegistryError` with that code."""
        try:
            prepared = await prepare(self.engine, self.tables)
        except MigrationError as exc:
            raise RegistryError(exc.message, code=exc.code, details=exc.details) from None
        if prepared.action != "current":
            log.info(
                "database schema %s: revision %s (was %s)",
                prepared.action,
                prepared.after,
                prepared.before or "none",
            )
        return prepared

    async def ping(self) -> None:
        """Raise if the database cannot be reached."""
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def close(self) -> None:
        """Dispose of the connection pool."""
        self.behind.close()
        self.quick.close()
        await self.engine.dispose()

    def session(self) -> AsyncSession:
        """A new session; use as ``async with store.session() as s``."""
        return AsyncSession(self.engine, expire_on_commit=False)

    async def versions(self) -> tuple[int, int]:
        """The catalog version and the health version, in one query.

        Concurrent callers share one read that starts after their call (never an older one
        already in flight), so a burst of registrations, each syncing first, costs one query.
        """
        found = await self.counters()
        return found.get(_VERSION, 0), found.get(_HEALTH_VERSION, 0)

    async def counters(self) -> dict[str, int]:
        """Every counter of ``catalog_state`` (the catalog's, the health's, and those of the
        state each process keeps in memory: :class:`registry.synced.Synced`), in one query
        shared like :meth:`versions`'."""
        return await self._versions.submit(None)

    async def _read_versions(self, items: Sequence[None]) -> list[dict[str, int]]:
        query = select(col(CatalogStateRow.key), col(CatalogStateRow.value))
        now = self.quick.all_now([query])  # a SQLite file: read at once, no thread hop
        if now is not None:
            rows = now[0]
        else:
            async with self.engine.connect() as conn:
                rows = list((await conn.execute(query)).all())
        found = {str(key): int(value) for key, value in rows}
        return [found] * len(items)

    async def catalog_version(self) -> int:
        """The current catalog version (0 for an empty, never written catalog)."""
        async with self.session() as session:
            row = await session.get(CatalogStateRow, _VERSION)
            return row.value if row else 0

    async def changes_since(self, version: int) -> tuple[int, dict[str, AgentRecord | None]] | None:
        """The catalog version now and every agent changed after ``version`` (None for a
        removed one), read together; None when the change log does not cover every version
        in between (pruned, or written by an older Switchboard): reload everything then."""
        counter = select(col(CatalogStateRow.value)).where(col(CatalogStateRow.key) == _VERSION)
        log = select(CatalogChangeRow.__table__).where(  # type: ignore[attr-defined]
            col(CatalogChangeRow.version) > version
        )
        read = self.quick.all_now([counter, log])  # a SQLite file: in this thread, at once
        if read is None:
            async with self.session() as session:
                current = await session.get(CatalogStateRow, _VERSION)
                now = current.value if current else 0
                query = select(CatalogChangeRow).where(col(CatalogChangeRow.version) > version)
                changes: list[Any] = list((await session.exec(query)).all())
        else:
            now, changes = (read[0][0][0] if read[0] else 0), read[1]
        if sorted(c.version for c in changes if c.version <= now) != list(
            range(version + 1, now + 1)
        ):
            return None
        changed = {c.agent_id for c in changes}
        records = {r.id: r for r in await self._load(None, changed)} if changed else {}
        return now, {agent_id: records.get(agent_id) for agent_id in sorted(changed)}

    async def get(self, agent_id: str) -> AgentRecord | None:
        """One agent, or None."""
        records = await self._load(agent_id)
        return records[0] if records else None

    async def all(self) -> list[AgentRecord]:
        """Every agent, ordered by id."""
        return await self._load(None)

    async def raw_card(self, agent_id: str) -> bytes | None:
        """The card bytes as last fetched or pushed (concurrent reads share one query)."""
        return await self._raws.submit(agent_id)

    async def _read_raws(self, agent_ids: Sequence[str]) -> list[bytes | None]:
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(col(AgentRow.id), col(AgentRow.card_raw)).where(
                    col(AgentRow.id).in_(set(agent_ids))
                )
            )
            found = dict(result.all())
        return [found.get(agent_id) for agent_id in agent_ids]

    async def id_for_source(self, source_url: str) -> str | None:
        """The id of the agent registered from ``source_url``, if any."""
        async with self.session() as session:
            result = await session.exec(
                select(AgentRow.id).where(AgentRow.source_url == source_url)
            )
            return result.first()

    async def ids(self) -> set[str]:
        """Every agent id."""
        async with self.session() as session:
            return set((await session.exec(select(AgentRow.id))).all())

    async def insert(
        self, record: AgentRecord, raw: bytes, refresh: RefreshRow | None = None
    ) -> int:
        """Add a new agent with its index rows, first revision and (optional) refresh state;
        return the catalog version.

        Inserts that arrive while another one's transaction is open are written together in
        the next transaction (:class:`WriteBatcher`), one statement per table; if one of them
        fails, they are written again one by one in savepoints, so it leaves the others
        written. Raises :class:`sqlalchemy.exc.IntegrityError` if
        the id or source URL is taken.
        """
        return await self._inserts.submit((record, raw, refresh))

    async def _insert_batch(self, items: Sequence[_Insert]) -> list[int | BaseException]:
        """Many inserts in one transaction with one statement per table; if that fails (one
        id or source URL taken), again one by one, each in its own savepoint, so only the
        failing ones fail. The outcome of each: its catalog version or its error."""
        if len(items) > 1:
            try:
                async with self.session() as session, session.begin():
                    return list(await _insert_agents(session, items))
            except IntegrityError:
                pass
        outcomes: list[int | BaseException] = []
        async with self.session() as session, session.begin():
            if len(items) == 1:  # alone, it needs no savepoint
                return list(await _insert_agents(session, items))
            for item in items:
                try:
                    async with session.begin_nested():
                        outcomes.extend(await _insert_agents(session, [item]))
                except Exception as exc:  # this row only: its savepoint is rolled back
                    outcomes.append(exc)
        return outcomes

    async def update(
        self,
        record: AgentRecord,
        raw: bytes,
        *,
        expected_sha256: str | None = None,
        diff: dict[str, Any] | None = None,
    ) -> tuple[bool, int] | None:
        """Replace an existing agent and its index rows atomically.

        A revision row is added when the card bytes changed or ``diff`` (what changed in the
        indexed agent, e.g. only its verification) is not empty. Returns (whether the card
        bytes changed, the catalog version), or None if the agent no longer exists (removed
        meanwhile: an update never brings it back) or, with ``expected_sha256``, if its
        stored card is no longer that one (compare-and-set).
        """
        async with self.session() as session, session.begin():
            existing = await session.get(AgentRow, record.id, with_for_update=True)
            if existing is None:
                return None
            if expected_sha256 is not None and existing.card_sha256 != expected_sha256:
                return None
            changed = existing.card_sha256 != record.card_sha256
            for key, value in agent_row(record, raw).model_dump().items():
                setattr(existing, key, value)
            existing.card_raw = raw
            for table in _CHILDREN:
                await session.exec(delete(table).where(col(table.agent_id) == record.id))
            await _insert_rows(session, child_values(record))
            if changed or diff:
                session.add(revision_row(record, raw, diff))
            version = await bump(session)
            await _log_changes(session, version, [record.id])
        if changed or diff:
            CARD_CHANGES.labels("card" if changed else "reverified").inc()
        return changed, version

    async def replace_raw(
        self, record: AgentRecord, raw: bytes, *, expected_sha256: str
    ) -> bool | None:
        """Store new card bytes that mean the same (the indexed agent is unchanged): no index
        rows rewritten and no catalog version bump, one revision with an empty diff. True if
        written; False if these bytes are stored already (another replica was first); None
        if the agent is gone or its card is neither ``expected_sha256`` nor these bytes."""
        async with self.session() as session, session.begin():
            row = await session.get(AgentRow, record.id, with_for_update=True)
            if row is None:
                return None
            if row.card_sha256 == record.card_sha256:
                return False
            if row.card_sha256 != expected_sha256:
                return None
            row.card_raw, row.card_sha256 = raw, record.card_sha256
            row.card_url, row.etag, row.last_modified = (
                record.card_url,
                record.etag,
                record.last_modified,
            )
            row.fetched_at, row.updated_at = record.fetched_at, record.updated_at
            session.add(revision_row(record, raw, {}))
        CARD_CHANGES.labels("same_meaning").inc()
        return True

    async def delete(self, agent_id: str) -> int | None:
        """Remove an agent with its index rows and revisions; the new catalog version, or
        None if it did not exist."""
        async with self.session() as session, session.begin():
            row = await session.get(AgentRow, agent_id, with_for_update=True)
            if row is None:
                return None
            for table in (*_CHILDREN, CardRevisionRow, RefreshRow):
                await session.exec(delete(table).where(col(table.agent_id) == agent_id))
            await session.delete(row)
            version = await bump(session)
            await _log_changes(session, version, [agent_id])
            return version

    async def revisions(self, agent_id: str) -> list[dict[str, Any]]:
        """The card revisions of an agent, newest first, without their card bytes (only
        their ``size``)."""
        columns = [
            col(CardRevisionRow.sha256),
            col(CardRevisionRow.fetched_at),
            col(CardRevisionRow.card_url),
            func.length(CardRevisionRow.raw).label("size"),
            col(CardRevisionRow.verification_status),
            col(CardRevisionRow.diff),
        ]
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(*columns)
                .where(col(CardRevisionRow.agent_id) == agent_id)
                .order_by(col(CardRevisionRow.pk).desc())
            )
            return [dict(row._mapping) for row in result.all()]

    # --- refresh state, health and leases ----------------------------------------------------

    async def health_version(self) -> int:
        """A counter that grows with every write of refresh state (health, schedule)."""
        return (await self.counters()).get(_HEALTH_VERSION, 0)

    async def refresh_rows(self, since: int = -1) -> list[RefreshRow]:
        """The refresh state of every agent that has one (written after health version
        ``since``, if given: on a SQLite file those few are read at once, as rows with the
        same attributes)."""
        if since >= 0:
            table: Any = RefreshRow.__table__  # type: ignore[attr-defined]
            read = self.quick.all_now([select(table).where(table.c.revision > since)])
            if read is not None:
                return read[0]
        async with self.session() as session:
            query = select(RefreshRow).where(col(RefreshRow.revision) > since)
            return list((await session.exec(query)).all())

    async def refresh_row(self, agent_id: str) -> RefreshRow | None:
        """One agent's refresh state."""
        async with self.session() as session:
            return await session.get(RefreshRow, agent_id)

    async def adopt_missing(self, make: Callable[[str, str], RefreshRow]) -> int:
        """Give every agent without refresh state (registered by an older version) a row
        made by ``make(agent_id, source)``, in one transaction; how many were added."""
        async with self.session() as session:
            have = select(RefreshRow.agent_id)
            query = select(AgentRow.id, AgentRow.source).where(col(AgentRow.id).not_in(have))
            missing = list((await session.exec(query)).all())
        if not missing:
            return 0
        try:
            async with self.session() as session, session.begin():
                version = await bump(session, _HEALTH_VERSION)
                for agent_id, source in missing:
                    row = make(agent_id, source)
                    row.revision = version
                    session.add(row)
        except IntegrityError:
            return 0  # another replica adopted them first
        return len(missing)

    async def modify_refresh(
        self, agent_id: str, change: Callable[[RefreshRow], RefreshRow | None]
    ) -> RefreshRow | None:
        """Read-modify-write one agent's refresh state in one transaction (row locked), so
        concurrent reports never lose a failure. ``change`` gets the current state (a fresh
        row if there is none) and returns the new one, or None to leave it. Returns what was
        written; None if nothing was (or the agent is gone). ``health_version`` grows only
        when what routing or the API shows changed."""
        try:
            async with self.session() as session, session.begin():
                exists = await session.exec(select(AgentRow.id).where(AgentRow.id == agent_id))
                if exists.first() is None:
                    return None
                existing = await session.get(RefreshRow, agent_id, with_for_update=True)
                current = RefreshRow(agent_id=agent_id) if existing is None else existing
                before = {key: getattr(current, key) for key in _SHOWN}
                updated = change(RefreshRow(**current.model_dump()))
                if updated is None:
                    return None
                if existing is None or any(getattr(updated, k) != v for k, v in before.items()):
                    updated.revision = await bump(session, _HEALTH_VERSION)
                if existing is None:
                    session.add(updated)
                else:
                    for key, value in updated.model_dump().items():
                        setattr(existing, key, value)
                return RefreshRow(**updated.model_dump())
        except IntegrityError:
            return None  # the agent was removed meanwhile (its foreign key is gone)

    async def due(self, now: datetime, limit: int) -> list[RefreshRow]:
        """Agents whose next check is at or before ``now`` and not in flight, soonest first."""
        async with self.session() as session:
            query = (
                select(RefreshRow)
                .where(col(RefreshRow.next_check_at).is_not(None))
                .where(col(RefreshRow.next_check_at) <= now)
                .where(
                    or_(
                        col(RefreshRow.claimed_until).is_(None),
                        col(RefreshRow.claimed_until) <= now,
                    )
                )
                .order_by(col(RefreshRow.next_check_at))
                .limit(limit)
            )
            return list((await session.exec(query)).all())

    async def claim(
        self, agent_id: str, holder: str, now: datetime, until: datetime, *, due_only: bool
    ) -> RefreshRow | None:
        """Take one agent's check until ``until``: None if another check of it is in flight
        (or, with ``due_only``, if it is not due). Of several replicas or requests claiming at
        once, exactly one gets it; writing the check's result releases it."""
        async with self.session() as session, session.begin():
            row = await session.get(RefreshRow, agent_id, with_for_update=True)
            if row is None:
                return None
            if row.claimed_until is not None and as_utc(row.claimed_until) > now:
                return None
            if due_only and (row.next_check_at is None or as_utc(row.next_check_at) > now):
                return None
            row.claimed_until, row.claimed_by = until, holder
            return RefreshRow(**row.model_dump())

    async def acquire_lease(self, name: str, holder: str, now: datetime, ttl: float) -> bool:
        """Take or renew the lease ``name`` for ``ttl`` seconds; False if another holder has
        it and it has not expired."""
        expires = now + timedelta(seconds=ttl)
        try:
            async with self.session() as session, session.begin():
                row = await session.get(LeaseRow, name, with_for_update=True)
                if row is None:
                    session.add(LeaseRow(name=name, holder=holder, expires_at=expires))
                    return True
                if row.holder != holder and as_utc(row.expires_at) > now:
                    return False
                row.holder, row.expires_at = holder, expires
                return True
        except IntegrityError:  # created meanwhile: by another replica, or by this holder
            return await self.lease_holder(name, now) == holder

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease up at once (on shutdown) if ``holder`` has it."""
        async with self.session() as session, session.begin():
            row = await session.get(LeaseRow, name, with_for_update=True)
            if row is not None and row.holder == holder:
                await session.delete(row)

    async def lease_holder(self, name: str, now: datetime) -> str | None:
        """Who holds the lease ``name`` now, if anyone."""
        async with self.session() as session:
            row = await session.get(LeaseRow, name)
            if row is None or as_utc(row.expires_at) <= now:
                return None
            return row.holder

    async def _load(
        self, agent_id: str | None, agent_ids: Iterable[str] | None = None
    ) -> list[AgentRecord]:
        """One agent, these agents, or (with neither) every agent."""
        wanted = None if agent_ids is None else sorted(agent_ids)
        tables = (AgentRow, InterfaceRow, SkillRow, SkillTagRow, SkillModeRow)
        if wanted is not None and len(wanted) <= _QUICK_AGENTS:  # a few: at once on SQLite
            queries = [
                select(table.__table__).where(  # type: ignore[attr-defined]
                    col(table.id if table is AgentRow else table.agent_id).in_(wanted)
                )
                for table in tables
            ]
            read = self.quick.all_now(queries)
            if read is not None:
                return records_from(
                    {t.__tablename__: rows for t, rows in zip(tables, read, strict=True)}
                )
        async with self.session() as session:
            found: dict[str, list[Any]] = {}
            for table in tables:
                query = select(table)
                key = col(table.id if table is AgentRow else table.agent_id)
                if agent_id is not None:
                    query = query.where(key == agent_id)
                elif wanted is not None:
                    query = query.where(key.in_(wanted))
                found[table.__tablename__] = list((await session.exec(query)).all())
        return records_from(found)


async def bump(session: AsyncSession, key: str = _VERSION, by: int = 1) -> int:
    """Increment a counter (the catalog version by default) by ``by`` in the writer's
    transaction; return the new value.

    One UPDATE, so concurrent writers serialize on the row in both databases.
    """
    conn = await session.connection()
    result = await conn.execute(
        update(CatalogStateRow)
        .where(col(CatalogStateRow.key) == key)
        .values(value=CatalogStateRow.value + by)
        .returning(col(CatalogStateRow.value))
    )
    return int(result.scalar_one())


async def _insert_agents(session: AsyncSession, items: Sequence[_Insert]) -> list[int]:
    """Write new agents in the session's transaction, in order; the catalog version each
    one made (consecutive, as if written one after the other)."""
    refreshes = [refresh for _, _, refresh in items if refresh is not None]
    health = await bump(session, _HEALTH_VERSION, len(refreshes)) if refreshes else 0
    for n, refresh in enumerate(refreshes):
        refresh.revision = health - len(refreshes) + 1 + n
    # plain values, no ORM objects; one statement per table, the agents' table first
    values: Values = {_AGENTS: [], _REVISIONS: [], _REFRESH: []}
    for record, raw, refresh in items:
        values[_AGENTS].append(agent_values(record, raw))
        for table, rows in child_values(record).items():
            values.setdefault(table, []).extend(rows)
        values[_REVISIONS].append(revision_values(record, raw, None))
        if refresh is not None:
            values[_REFRESH].append(refresh.model_dump())
    await _insert_rows(session, values)
    last = await bump(session, _VERSION, len(items))
    await _log_changes(session, last, [record.id for record, _, _ in items])
    return [last - len(items) + 1 + n for n in range(len(items))]


async def _log_changes(session: AsyncSession, last: int, agent_ids: Sequence[str]) -> None:
    """Record that versions ``last - len(agent_ids) + 1`` to ``last`` changed these agents
    (in order); now and then, forget versions older than :data:`CHANGES_KEPT`."""
    first = last - len(agent_ids) + 1
    conn = await session.connection()
    values = [{"version": first + n, "agent_id": a} for n, a in enumerate(agent_ids)]
    await conn.execute(CatalogChangeRow.__table__.insert(), values)  # type: ignore[attr-defined]
    if last // 1000 != (first - 1) // 1000:  # once every thousand versions
        old = col(CatalogChangeRow.version) <= last - CHANGES_KEPT
        await session.exec(delete(CatalogChangeRow).where(old))


async def _insert_rows(session: AsyncSession, values: Values) -> None:
    """Insert the rows of ``values`` with one multi-row statement per table, in its order
    (the ORM would send one INSERT a row): an agent's interfaces, skills, tags and modes in
    four statements."""
    conn = await session.connection()
    for table, rows in values.items():
        if rows:
            await conn.execute(table.insert(), rows)
