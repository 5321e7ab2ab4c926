"""The lock every schema change runs under: one transaction that no other process's schema
change (nor, on SQLite, any write) can interleave with.

- PostgreSQL: ``pg_advisory_xact_lock`` on :data:`LOCK_KEY`, held until the transaction ends.
  It is the key 979ef09's ``Store.create_schema`` took, so an older replica starting during a
  migration waits for it too.
- SQLite: the transaction is ``BEGIN IMMEDIATE`` (:mod:`registry.engine`): the database's one
  write lock, held to the commit; other processes wait (the 30 s busy timeout). Foreign keys
  are switched off for the transaction (``PRAGMA foreign_keys`` cannot change inside one), as
  Alembic's batch operations need: a table rebuilt by copy must not cascade its ``DROP`` into
  the tables that refer to it. ``PRAGMA foreign_key_check`` runs before the commit.

Whoever holds the lock reads the revision again before changing anything, so processes that
start together on an old database migrate it once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from registry.migrations.errors import MigrationError

LOCK_KEY = 0x5B_0A4D
"""The PostgreSQL advisory lock key of schema changes."""


@asynccontextmanager
async def locked(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection in a transaction that holds the schema lock; committed on leaving."""
    async with engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        if sqlite:
            await conn.run_sync(_foreign_keys, "OFF")  # before BEGIN: a no-op within one
        try:
            async with conn.begin():
                if conn.dialect.name == "postgresql":
                    await conn.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY}
                    )
                yield conn
                if sqlite:
                    await conn.run_sync(_check_foreign_keys)
        finally:
            if sqlite:
                await conn.run_sync(_foreign_keys, "ON")


def _foreign_keys(conn: Any, state: str) -> None:
    """``PRAGMA foreign_keys`` on the driver's connection, outside SQLAlchemy's transaction
    (a statement through SQLAlchemy would begin one first)."""
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA foreign_keys={state}")
    finally:
        cursor.close()


def _check_foreign_keys(conn: Any) -> None:
    broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = sorted({str(row[0]) for row in broken})
        raise MigrationError(
            f"the schema change would leave rows whose foreign keys point nowhere "
            f"(in {', '.join(tables)}): nothing was changed",
            code="schema_change_failed",
        )
