"""The database engine: an async SQLAlchemy engine for a SQLite or PostgreSQL URL.

SQLite gets one connection (it has one writer), WAL (switched on with retries when several
processes create a new file together), ``synchronous=NORMAL``, foreign keys and
``BEGIN IMMEDIATE`` transactions; PostgreSQL a pool with pre-ping.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from registry.errors import RegistryError


def async_url(url: str) -> str:
    """Map a plain database URL to its async driver (aiosqlite, psycopg)."""
    parsed = make_url(url)
    driver = parsed.drivername
    if driver == "sqlite":
        parsed = parsed.set(drivername="sqlite+aiosqlite")
    elif driver in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def sqlite_file(url: str) -> str | None:
    """The SQLite file of ``url``; None for any other database, or SQLite in memory (a URI
    filename too: it may be in memory, and is no plain file)."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    if database.startswith("file:"):
        return None
    return database


def create_engine(url: str) -> AsyncEngine:
    """An async engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout."""
    full = async_url(url)
    parsed = make_url(full)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # one connection: SQLite has one writer, and every transaction here takes the write
        # lock (BEGIN IMMEDIATE); waiting in the pool is an asyncio wait, while several
        # connections contending for the lock would sleep in SQLite's busy handler
        engine = create_async_engine(
            full, connect_args={"timeout": 30}, pool_size=1, max_overflow=0, pool_timeout=60
        )

        if sqlite3.sqlite_version_info < (3, 35):
            raise RegistryError(
                f"SQLite {sqlite3.sqlite_version} is too old: Switchboard needs 3.35 or newer "
                "(UPDATE ... RETURNING); use a newer Python build, or PostgreSQL",
                code="sqlite_too_old",
            )

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves, below
            cursor = dbapi_connection.cursor()
            _use_wal(cursor)
            cursor.execute("PRAGMA synchronous=NORMAL")  # WAL: safe against crashes, fast commits
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _begin(conn: Any) -> None:
            # take the write lock up front: two deferred transactions that both read, then
            # write, would otherwise fail with "database is locked" instead of waiting
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_async_engine(full, pool_pre_ping=True)


def _use_wal(cursor: Any) -> None:
    """Switch a SQLite database to WAL (kept in the file: only its first opening does it).

    The switch needs the database to itself, and SQLite answers "database is locked" at once,
    without its busy timeout, when several processes open a new file together: retry then.
    """
    cursor.execute("PRAGMA journal_mode")
    if str(cursor.fetchone()[0]).lower() == "wal":
        return
    for attempt in range(_WAL_ATTEMPTS):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as exc:  # the driver's OperationalError, through SQLAlchemy's adapter
            if "locked" not in str(exc) or attempt == _WAL_ATTEMPTS - 1:
                raise
            time.sleep(0.02 * (attempt + 1))  # only ever while a new database file is created


_WAL_ATTEMPTS = 20
