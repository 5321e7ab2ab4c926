"""Database statement latency: SQLAlchemy cursor events on the engine, timed into
:data:`registry.metrics.DB_SECONDS` by statement kind (``select``, ``insert``, ``update``,
``delete``, ``other``). Nothing else of the SQL text is kept: no table, no value."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from registry.metrics import DB_SECONDS

__all__ = ["observe_statement", "statement_kind", "time_statements"]

_KINDS = ("select", "insert", "update", "delete")
_CHILDREN = {kind: DB_SECONDS.labels(kind) for kind in (*_KINDS, "other")}
_STARTED = "switchboard_statement_started"


def statement_kind(statement: str) -> str:
    """The kind of a SQL statement by its first word: select, insert, update, delete or
    other."""
    word = statement[:16].split(None, 1)[0].lower() if statement.strip() else ""
    return word if word in _KINDS else "other"


def observe_statement(statement: str, seconds: float) -> None:
    """Record that ``statement`` took ``seconds`` (for statements run outside the engine)."""
    _CHILDREN[statement_kind(statement)].observe(seconds)


def time_statements(engine: AsyncEngine) -> None:
    """Time every statement ``engine`` runs (a connection runs one statement at a time)."""

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _before(conn: Any, *_args: Any) -> None:
        conn.info[_STARTED] = time.perf_counter()

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _after(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        started = conn.info.pop(_STARTED, None)
        if started is not None:
            _CHILDREN[statement_kind(statement)].observe(time.perf_counter() - started)
