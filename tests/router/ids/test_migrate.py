"""The start-up move of the old ID tables on SQLite and PostgreSQL: old contexts and v0.1
aliases become the anonymous scope's, the task list gets its owner column and index, twice
and by two replicas at once (``router_tasks`` alone: tests/router/ids/test_tokens.py)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sqlalchemy import DateTime, bindparam, inspect, text
from sqlmodel import select

from registry.store import Store
from router.compat.aliases import TaskAliases
from router.ids.idmap import IdMap
from router.ids.migrate import migrate_ids
from router.tables import SCHEMA, RouterContextEntry, TaskAliasBinding
from tests.support.old_tables import has_table, old_table

MOMENT = datetime(2025, 1, 2, tzinfo=UTC)
ALICE = '["acme","alice"]'


def _context(context_id: str, agent_id: str, upstream: str | None) -> dict[str, object]:
    return {
        "context_id": context_id,
        "agent_id": agent_id,
        "upstream_context_id": upstream,
        "created_at": MOMENT,
    }


def _alias(alias: str, task_id: str) -> dict[str, object]:
    return {"alias": alias, "task_id": task_id, "created_at": MOMENT}


async def test_old_contexts_and_aliases_move_to_the_anonymous_scope(
    store: Store, db_url: str
) -> None:
    await old_table(
        store,
        "router_contexts",
        _context("client-ctx", "", None),  # a client's context nobody served yet
        _context("client-ctx", "wx", "wx-ctx"),
        _context("0b6a-old", "inv", "inv-ctx"),
    )
    await old_table(store, "router_task_aliases", _alias("v01-a", "0b6a-a"), _alias("both", "old"))
    await old_table(
        store, "router_task_alias_entries", _alias("v01-b", "t1.b"), _alias("both", "newer")
    )
    # one row is already there (a new replica served it meanwhile): kept, not doubled
    async with store.session() as session, session.begin():
        session.add(
            RouterContextEntry(
                owner="",
                context_id="0b6a-old",
                agent_id="inv",
                upstream_context_id="inv-ctx",
                created_at=MOMENT,
            )
        )
    replicas = [Store(db_url, SCHEMA) for _ in range(2)]
    try:  # two replicas starting together: one moves the rows, the other finds nothing left
        moved = await asyncio.gather(*(migrate_ids(r) for r in replicas))
    finally:
        for replica in replicas:
            await replica.close()
    counts = sorted(moved, key=lambda m: sum(m.values()))
    assert counts[0] == dict.fromkeys(counts[0], 0)
    assert counts[1] == {
        "router_tasks": 0,
        "router_contexts": 2,
        "router_task_alias_entries": 2,
        "router_task_aliases": 1,
    }
    for name in ("router_contexts", "router_task_aliases", "router_task_alias_entries"):
        assert not await has_table(store, name)
    assert await migrate_ids(store) == dict.fromkeys(counts[1], 0)  # again: nothing to do
    async with store.session() as session:
        contexts = (await session.exec(select(RouterContextEntry))).all()
        aliases = (await session.exec(select(TaskAliasBinding))).all()
    assert sorted((c.owner, c.context_id, c.agent_id, c.upstream_context_id) for c in contexts) == [
        ("", "0b6a-old", "inv", "inv-ctx"),
        ("", "client-ctx", "", None),
        ("", "client-ctx", "wx", "wx-ctx"),
    ]
    assert sorted((a.owner, a.alias, a.task_id) for a in aliases) == [
        ("", "both", "newer"),  # router_task_alias_entries wins, as lookups did
        ("", "v01-a", "0b6a-a"),
        ("", "v01-b", "t1.b"),
    ]
    # they resolve as before in the anonymous scope, and in no other
    ids = IdMap(store)
    try:
        assert await ids.upstream_context("client-ctx", "wx") == "wx-ctx"
        assert await ids.context_by_upstream("inv", "inv-ctx") == "0b6a-old"
        assert await ids.context_agents("client-ctx") == {"wx"}
        assert await ids.scoped(ALICE).upstream_context("client-ctx", "wx") is None
    finally:
        await ids.close()
    assert await TaskAliases(store).alias("v01-a") == "0b6a-a"
    assert await TaskAliases(store).scoped(ALICE).alias("v01-a") is None


async def test_an_old_task_list_gets_its_owner_column_and_index(db_url: str) -> None:
    """A database of the version before scopes: ``router_task_entries`` without ``owner``.
    The store adds the column at start, the migration its index; the old rows are the
    anonymous scope's."""
    old = Store(db_url, [t for t in SCHEMA if t.__tablename__ != "router_task_entries"])
    await old.create_schema()
    async with old.engine.begin() as conn:
        time = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
        await conn.execute(
            text(
                "CREATE TABLE router_task_entries (task_id VARCHAR(512) PRIMARY KEY,"
                " agent_id VARCHAR(64) NOT NULL, upstream_task_id VARCHAR(512) NOT NULL,"
                f" context_id VARCHAR(512), state VARCHAR(64), created_at {time} NOT NULL,"
                f" updated_at {time} NOT NULL, UNIQUE (agent_id, upstream_task_id))"
            )
        )
        await conn.execute(
            text(
                "INSERT INTO router_task_entries VALUES ('0b6a-old', 'wx', 'wx-1', NULL,"
                " 'TASK_STATE_WORKING', :at, :at)"
            ).bindparams(bindparam("at", type_=DateTime(timezone=True))),
            {"at": MOMENT},
        )
    await old.close()
    store = Store(db_url, SCHEMA)
    try:
        await store.create_schema()
        ids = IdMap(store)
        await ids.start()
        await IdMap(store).start()  # a second start: nothing more
        async with store.engine.connect() as conn:
            indexes = await conn.run_sync(
                lambda sync: inspect(sync).get_indexes("router_task_entries")
            )
        assert [i["column_names"] for i in indexes if "owner" in i["column_names"]] == [["owner"]]
        assert [r.task_id for r in (await ids.tasks.list_tasks())[0]] == ["0b6a-old"]
        assert await ids.scoped(ALICE).tasks.count_tasks() == 0
        assert await ids.scoped(ALICE).task("0b6a-old") is None
        mine = await ids.scoped(ALICE).task_for_upstream("wx", "wx-2", None)
        await ids.flush()
        assert [r.task_id for r in (await ids.scoped(ALICE).tasks.list_tasks())[0]] == [
            mine.task_id
        ]
        await ids.close()
    finally:
        await store.close()
