"""Batches written behind the requests: on a SQLite file, in one hop to a thread of their own.

The async SQLite driver (aiosqlite) runs each step of a transaction in its thread: begin,
the statement, the cursor's close, the commit, each a hop there and back through the event
loop, and SQLAlchemy's async layer around each. For a batch of a few rows that is several
milliseconds of the loop thread's CPU, and every hop waits for the interpreter lock while
the loop thread serves requests.

:class:`QuickWrites` runs such a batch on a connection of its own, in a thread of its own:
the statement is compiled once, its rows bound with SQLAlchemy's own processors (so a value
is stored exactly as the engine would store it), and the transaction (``BEGIN IMMEDIATE``,
the rows, ``COMMIT``) is one call. SQLite's own work runs without the interpreter lock.
The file is in WAL mode (:mod:`registry.engine`), so this writer and the engine's connection
take SQLite's write lock in turn: whoever finds it taken waits in SQLite's busy handler, in
its own thread. PostgreSQL and SQLite in memory (a second connection would open another
database) take the async engine. Errors are SQLAlchemy's (:class:`sqlalchemy.exc.DBAPIError`
and its subclasses), on either path.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.dialects.sqlite import pysqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from registry.dbmetrics import observe_statement
from registry.engine import sqlite_file

__all__ = ["QuickWrites"]

_BUSY_TIMEOUT = 30.0  # seconds a batch waits for the write lock, as the engine's connections

_Compiled = tuple[str, tuple[tuple[str, Callable[[Any], Any] | None], ...]]


class QuickWrites:
    """Batches of rows written to the database at ``url`` (whose async engine is
    ``engine``)."""

    def __init__(self, url: str, engine: AsyncEngine) -> None:
        self._engine = engine
        self.path: str | None = sqlite_file(url)
        """The SQLite file written in the writer's thread; None when batches take ``engine``."""
        self._dialect = pysqlite.dialect()
        self._compiled: dict[int, tuple[Executable, _Compiled]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.batches = 0
        """Batches written so far (on either path)."""

    @property
    def immediate(self) -> bool:
        """Whether batches run in the writer's thread (SQLite file), not through the engine."""
        return self.path is not None

    async def execute_many(self, statement: Executable, rows: Sequence[dict[str, Any]]) -> None:
        """Run ``statement`` once for each of ``rows`` (parameters by name), all in one
        transaction; raises :class:`sqlalchemy.exc.DBAPIError` if the database fails."""
        if not rows:
            return
        if self.path is None:
            async with self._engine.begin() as conn:
                await conn.execute(statement, list(rows))
            self.batches += 1
            return
        sql, binds = self._compile(statement)
        params = [
            tuple(row[name] if bind is None else bind(row[name]) for name, bind in binds)
            for row in rows
        ]
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="switchboard-quickwrite")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._write, sql, params)
        self.batches += 1

    def close(self) -> None:
        """Wait for the batch under way, then close the writer's connection."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _compile(self, statement: Executable) -> _Compiled:
        cached = self._compiled.get(id(statement))
        if cached is not None and cached[0] is statement:
            return cached[1]
        compiled: Any = statement.compile(dialect=self._dialect)  # type: ignore[attr-defined]
        processors = compiled._bind_processors
        names = compiled.positiontup or ()
        result = (compiled.string, tuple((name, processors.get(name)) for name in names))
        self._compiled[id(statement)] = (statement, result)
        return result

    def _write(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        started = time.perf_counter()
        with self._lock:
            conn = self._open()
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, params)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise DBAPIError.instance(sql, params, exc, sqlite3.Error) from exc
        observe_statement(sql, time.perf_counter() - started)

    def _open(self) -> sqlite3.Connection:
        if self._connection is None:
            assert self.path is not None
            conn = sqlite3.connect(
                self.path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA synchronous=NORMAL")  # as the engine's: WAL, fast commits
            conn.execute("PRAGMA foreign_keys=ON")
            self._connection = conn
        return self._connection
