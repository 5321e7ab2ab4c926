"""Counting what a store runs against its database: a test of a path that should run none."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from registry.store import Store


@contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """The SQL statements the store's engine runs meanwhile (and a line for each batch the
    store writes on its own connection: :mod:`registry.quickwrite`)."""
    seen: list[str] = []
    batches = store.behind.batches

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)
        seen += ["a batch on the quick writer"] * (store.behind.batches - batches)
