"""The ID tables of earlier versions (``router_tasks``, ``router_contexts``,
``router_task_aliases``, ``router_task_alias_entries``), made with raw SQL as those versions
made them, and a database without a recorded schema revision, as versions before migrations
left it: for the tests of :mod:`registry.migrations.legacy` and of the old IDs still
resolving."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, bindparam, inspect, text

from registry.migrations import Prepared
from registry.store import Store
from router.tables import SCHEMA

_DDL = {
    "router_tasks": """CREATE TABLE router_tasks (
        task_id VARCHAR(64) NOT NULL PRIMARY KEY,
        agent_id VARCHAR(64) NOT NULL,
        upstream_task_id VARCHAR(512) NOT NULL,
        context_id VARCHAR(512),
        state VARCHAR(64),
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        UNIQUE (agent_id, upstream_task_id)
    )""",
    "router_contexts": """CREATE TABLE router_contexts (
        context_id VARCHAR(512) NOT NULL,
        agent_id VARCHAR(64) NOT NULL,
        upstream_context_id VARCHAR(512),
        created_at {time} NOT NULL,
        PRIMARY KEY (context_id, agent_id),
        UNIQUE (agent_id, upstream_context_id)
    )""",
    "router_task_aliases": """CREATE TABLE router_task_aliases (
        alias VARCHAR(512) NOT NULL PRIMARY KEY,
        task_id VARCHAR(64) NOT NULL,
        created_at {time} NOT NULL
    )""",
    "router_task_alias_entries": """CREATE TABLE router_task_alias_entries (
        alias VARCHAR(512) NOT NULL PRIMARY KEY,
        task_id VARCHAR(512) NOT NULL,
        created_at {time} NOT NULL
    )""",
}
_TIMES = ("created_at", "updated_at")


async def old_table(store: Store, name: str, *rows: dict[str, Any]) -> None:
    """Create the old table ``name`` with ``rows`` (each a dict of its columns)."""
    async with store.engine.begin() as conn:
        time = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
        await conn.execute(text(_DDL[name].format(time=time)))
        for row in rows:
            names = list(row)
            insert = text(
                f"INSERT INTO {name} ({', '.join(names)})"
                f" VALUES ({', '.join(':' + n for n in names)})"
            ).bindparams(
                *(bindparam(n, type_=DateTime(timezone=True)) for n in names if n in _TIMES)
            )
            await conn.execute(insert, row)


async def has_table(store: Store, name: str) -> bool:
    """Whether the database has table ``name``."""
    async with store.engine.connect() as conn:
        return await conn.run_sync(lambda sync: inspect(sync).has_table(name))


def old_task(
    task_id: str, upstream: str, context_id: str | None, at: datetime, state: str | None = None
) -> dict[str, Any]:
    """A ``router_tasks`` row of agent ``wx``."""
    return {
        "task_id": task_id,
        "agent_id": "wx",
        "upstream_task_id": upstream,
        "context_id": context_id,
        "state": state or "TASK_STATE_WORKING",
        "created_at": at,
        "updated_at": at,
    }


async def forget_revision(store: Store) -> None:
    """Drop ``alembic_version``: the database looks like one a version before schema
    migrations made."""
    async with store.engine.begin() as conn:
        await conn.execute(text("DROP TABLE alembic_version"))


async def start_on(url: str) -> Prepared:
    """What a start of this version does to the database at ``url`` (schema migrations)."""
    store = Store(url, SCHEMA)
    try:
        return await store.create_schema()
    finally:
        await store.close()
