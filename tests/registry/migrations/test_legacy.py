"""The baseline revision adopting databases of versions before 979ef09, on SQLite and
PostgreSQL: the old ID tables moved into today's (the anonymous scope's), the task list's
``owner`` column and index, missing nullable columns added; twice, and by two replicas at
once (the old IDs resolving through a call: tests/router/ids/test_tokens.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import DateTime, bindparam, inspect, text
from sqlmodel import select

from registry.migrations import HEAD
from registry.store import Store
from router.compat.aliases import TaskAliases
from router.ids.idmap import IdMap
from router.tables import SCHEMA, RouterContextEntry, TaskAliasBinding
from tests.support.old_tables import forget_revision, has_table, old_table, old_task, start_on

MOMENT = datetime(2025, 1, 2, tzinfo=UTC)
ALICE = '["acme","alice"]'


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    """Today's tables, without a recorded revision: as a version before migrations left
    them (the tests add that version's old tables)."""
    store = Store(db_url, SCHEMA)
    await store.create_schema()
    await forget_revision(store)
    yield store
    await store.close()


def _context(context_id: str, agent_id: str, upstream: str | None) -> dict[str, object]:
    return {
        "context_id": context_id,
        "agent_id": agent_id,
        "upstream_context_id": upstream,
        "created_at": MOMENT,
    }


def _alias(alias: str, task_id: str) -> dict[str, object]:
    return {"alias": alias, "task_id": task_id, "created_at": MOMENT}


async def _replicas_start(url: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Two replicas starting together: what each did, and the moves logged."""
    with caplog.at_level(logging.INFO, logger="switchboard.migrations"):
        done = await asyncio.gather(start_on(url), start_on(url))
    assert all(p.after == HEAD for p in done)
    return sorted(p.action for p in done)


def _moves(caplog: pytest.LogCaptureFixture) -> list[str]:
    return sorted(r.getMessage() for r in caplog.records if r.name == "switchboard.migrations")


async def test_old_contexts_and_aliases_move_to_the_anonymous_scope(
    store: Store, db_url: str, caplog: pytest.LogCaptureFixture
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
    # one replica moves the rows, the other finds the schema at head
    assert await _replicas_start(db_url, caplog) == ["current", "upgraded"]
    assert _moves(caplog) == [
        "moved 1 row(s) of the retired table router_task_aliases",
        "moved 2 row(s) of the retired table router_contexts",
        "moved 2 row(s) of the retired table router_task_alias_entries",
    ]
    for name in ("router_contexts", "router_task_aliases", "router_task_alias_entries"):
        assert not await has_table(store, name)
    assert (await start_on(db_url)).action == "current"  # again: nothing to do
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


async def test_the_old_task_table_is_retired(
    store: Store, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    early, late = datetime(2025, 1, 2, tzinfo=UTC), datetime(2025, 1, 3, tzinfo=UTC)
    listed = IdMap(store)  # a task already in the task list keeps its listed ID and state
    known = await listed.task_for_upstream("wx", "wx-known", None)
    await listed.record_state(known.task_id, "completed")
    await listed.close()
    await old_table(
        store,
        "router_tasks",
        old_task("0b6a-old-1", "wx-old-1", "0b6a-ctx", early),
        old_task("0b6a-old-2", "wx-old-2", None, late, "TASK_STATE_FAILED"),
        old_task("0b6a-known", "wx-known", None, late),
    )
    assert await _replicas_start(db_url, caplog) == ["current", "upgraded"]
    assert _moves(caplog) == ["moved 2 row(s) of the retired table router_tasks"]
    assert not await has_table(store, "router_tasks")
    ids = IdMap(store)
    await ids.start()
    try:
        ref = await ids.task("0b6a-old-1")
        assert ref is not None
        assert (ref.agent_id, ref.upstream_task_id, ref.context_id, ref.state) == (
            "wx",
            "wx-old-1",
            "0b6a-ctx",
            "TASK_STATE_WORKING",
        )
        assert (await ids.task_by_upstream("wx", "wx-old-2")).task_id == "0b6a-old-2"  # type: ignore[union-attr]
        assert await ids.task("0b6a-known") is None
        page, _ = await ids.tasks.list_tasks()
        assert [(r.task_id, r.state) for r in page] == [
            (known.task_id, "TASK_STATE_COMPLETED"),
            ("0b6a-old-2", "TASK_STATE_FAILED"),
            ("0b6a-old-1", "TASK_STATE_WORKING"),
        ]
        assert await ids.tasks.count_tasks(state="failed") == 1
    finally:
        await ids.close()


async def test_an_old_task_list_gets_its_owner_column_and_index(store: Store, db_url: str) -> None:
    """A database of the version before scopes: ``router_task_entries`` without ``owner``
    (nor its index). The baseline adds both; the old rows are the anonymous scope's."""
    async with store.engine.begin() as conn:
        time = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
        await conn.execute(text("DROP TABLE router_task_entries"))
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
    assert (await start_on(db_url)).action == "upgraded"
    async with store.engine.connect() as conn:
        indexes = await conn.run_sync(lambda sync: inspect(sync).get_indexes("router_task_entries"))
    assert [i["column_names"] for i in indexes if "owner" in i["column_names"]] == [["owner"]]
    ids = IdMap(store)
    await ids.start()
    try:
        assert [r.task_id for r in (await ids.tasks.list_tasks())[0]] == ["0b6a-old"]
        assert await ids.scoped(ALICE).tasks.count_tasks() == 0
        assert await ids.scoped(ALICE).task("0b6a-old") is None
        mine = await ids.scoped(ALICE).task_for_upstream("wx", "wx-2", None)
        await ids.flush()
        assert [r.task_id for r in (await ids.scoped(ALICE).tasks.list_tasks())[0]] == [
            mine.task_id
        ]
    finally:
        await ids.close()


async def test_a_database_too_old_to_upgrade_is_refused_unchanged(db_url: str) -> None:
    """A table that lacks a non-nullable column: the start stops with ``schema_outdated``,
    and the migration's transaction leaves nothing behind (no other table made)."""
    from registry.errors import RegistryError

    store = Store(db_url, SCHEMA)
    try:
        async with store.engine.begin() as conn:  # what an early Switchboard left behind
            await conn.execute(text("CREATE TABLE agents (id VARCHAR(64) PRIMARY KEY, name TEXT)"))
        with pytest.raises(RegistryError) as info:
            await store.create_schema()
        assert info.value.code == "schema_outdated"
        assert "agents.description" in info.value.details["missing_columns"]
        async with store.engine.connect() as conn:
            names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
        assert names == ["agents"]
    finally:
        await store.close()
