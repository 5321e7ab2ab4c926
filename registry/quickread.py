"""Reads that a request waits for: one row by its key, on SQLite without the driver's thread.

The async SQLite driver (aiosqlite) runs each step of a statement in its own thread, and
every transaction here takes the write lock (``BEGIN IMMEDIATE``, :mod:`registry.engine`) on
the store's one connection. A read of one row by its primary key then costs a begin, the
select, its fetch, the cursor's close and a rollback, each a thread hop (about a millisecond
in all on an idle process), queued behind whatever the writers are doing.

:class:`QuickReads` runs such a read on a read-only connection of its own, in the calling
thread: tens of microseconds, since the row is in SQLite's page cache and in WAL mode a
reader never waits for a writer. It reads committed data, as the async engine does, so
what another process wrote (a revoked key) is seen at once. PostgreSQL, and SQLite in memory
(a second connection would open another database), go through the async engine; so does a
read that finds the file locked (WAL recovery after a crash) or unreadable.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from registry.engine import sqlite_file

__all__ = ["QuickReads"]

_BUSY_TIMEOUT = 0.05  # seconds a read waits for a lock before taking the async engine


class QuickReads:
    """Short reads of the database at ``url`` (whose async engine is ``engine``)."""

    def __init__(self, url: str, engine: AsyncEngine) -> None:
        self._engine = engine
        self.reader: Engine | None = _sqlite_reader(url)
        """The read-only engine of the immediate reads; None when reads take ``engine``."""

    @property
    def immediate(self) -> bool:
        """Whether reads run in the calling thread (SQLite file), not through the engine."""
        return self.reader is not None

    async def first(self, statement: Executable, params: dict[str, Any]) -> Any:
        """The first row of ``statement`` with ``params``, or None."""
        if self.reader is not None:
            try:
                with self.reader.connect() as conn:
                    return conn.execute(statement, params).first()
            except OperationalError:
                pass  # locked or not readable here: the engine waits for it
        async with self._engine.connect() as conn:
            return (await conn.execute(statement, params)).first()

    def all_now(self, statements: list[Executable]) -> list[list[Any]] | None:
        """The rows of each of ``statements``, read in this thread one after another on the
        SQLite file (a few small reads); None when they cannot be read here (another
        database, or the file is locked): read them through the engine then."""
        if self.reader is None:
            return None
        try:
            with self.reader.connect() as conn:
                return [list(conn.execute(statement).all()) for statement in statements]
        except OperationalError:
            return None

    def close(self) -> None:
        """Close the read connection."""
        if self.reader is not None:
            self.reader.dispose()


def _sqlite_reader(url: str) -> Engine | None:
    """A read-only engine on the SQLite file of ``url`` (one connection); None for any other
    database."""
    if sqlite_file(url) is None:
        return None
    engine = create_engine(
        make_url(url).set(drivername="sqlite"),
        pool_size=1,
        max_overflow=0,
        connect_args={"timeout": _BUSY_TIMEOUT, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA query_only=ON")
        cursor.close()

    return engine
