"""The schema check of every start (:meth:`registry.store.Store.create_schema`): cheap when
the database is at this version's revision, which is nearly always.

- At :data:`~registry.migrations.HEAD`: one read of ``alembic_version``, nothing else (no
  lock, no Alembic import).
- Otherwise, under the schema lock (:mod:`.locking`), the revision read again (another
  process may have just migrated it), then:

  - an empty database (no table of Switchboard's): the tables made from the models
    (``create_all``) and :data:`HEAD` recorded (a "stamp"), when the caller's tables are the
    whole schema (:data:`HEAD_TABLES`); a caller with part of it (the registry alone) runs
    the revisions instead, which make every table;
  - a database without a revision (made before migrations existed, 979ef09 or earlier),
    or at an older revision: the revisions up to :data:`HEAD` (the baseline adopts the
    former, :mod:`.legacy`);
  - a revision the scripts do not know (a newer Switchboard's): :class:`SchemaTooNew`, and
    nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

from registry.migrations.baseline import NAMES as BASELINE_NAMES
from registry.migrations.errors import SchemaTooNew
from registry.migrations.legacy import OLD_NAMES, seed_counters
from registry.migrations.locking import locked

HEAD = "0002"
"""The revision this version's code needs: the newest script in ``versions/`` (a test keeps
them equal)."""

HEAD_TABLES = BASELINE_NAMES
"""The tables of the schema at :data:`HEAD` (a test keeps it equal to
``router.tables.SCHEMA``'s): a revision that adds or drops a table changes it."""

VERSION_TABLE = "alembic_version"
_ATTEMPTS = 3  # a running older replica may write a row a migration copies: try again

Action = Literal["current", "created", "upgraded"]


@dataclass(frozen=True)
class Prepared:
    """What a start found and did: the revision before and after, and the action."""

    before: str | None
    after: str
    action: Action


async def read_revision(engine: AsyncEngine) -> str | None:
    """The database's revision in one query; None when there is none (or no table)."""
    try:
        async with engine.connect() as conn:
            result = await conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))
            return result.scalar()
    except DBAPIError:
        return None  # no such table (or no database: the locked path says so)


async def prepare(engine: AsyncEngine, tables: Iterable[type[SQLModel]]) -> Prepared:
    """Bring the database to :data:`HEAD` (see the module docs); what was found and done."""
    before = await read_revision(engine)
    if before == HEAD:
        return Prepared(HEAD, HEAD, "current")
    models = [SQLModel.metadata.tables[t.__tablename__] for t in tables]
    for attempt in range(_ATTEMPTS):
        try:
            async with locked(engine) as conn:
                return await conn.run_sync(_prepare, models)
        except IntegrityError:
            if attempt == _ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _prepare(conn: Any, models: list[Table]) -> Prepared:
    """Under the lock: read the revision again, then create, upgrade or refuse."""
    names = set(inspect(conn).get_table_names())
    before = _revision(conn) if VERSION_TABLE in names else None
    if before == HEAD:
        return Prepared(HEAD, HEAD, "current")
    fresh = before is None and names.isdisjoint(BASELINE_NAMES | OLD_NAMES)
    if fresh and {t.name for t in models} >= HEAD_TABLES:
        # none of them there: no question asked per table (create_all's checkfirst)
        checkfirst = not names.isdisjoint(t.name for t in models)
        SQLModel.metadata.create_all(conn, tables=models, checkfirst=checkfirst)
        seed_counters(conn)
        _stamp(conn, HEAD)
        return Prepared(None, HEAD, "created")
    from registry.migrations.revisions import known, upgrade  # Alembic: only when needed

    if before is not None and not known(before):
        raise SchemaTooNew(before, HEAD)
    upgrade(conn, "head")
    return Prepared(before, HEAD, "created" if fresh else "upgraded")


def _revision(conn: Any) -> str | None:
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


_VERSIONS = Table(  # Alembic's own version table, as it creates it
    VERSION_TABLE,
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def _stamp(conn: Any, revision: str) -> None:
    """Record ``revision`` as Alembic would (``alembic stamp``), without loading Alembic."""
    _VERSIONS.create(conn, checkfirst=True)
    conn.execute(_VERSIONS.delete())
    conn.execute(_VERSIONS.insert().values(version_num=revision))
