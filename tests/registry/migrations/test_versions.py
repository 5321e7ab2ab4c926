"""The revision scripts (``registry/migrations/versions/``) on SQLite and PostgreSQL: the
databases of earlier versions (``tests/fixtures/schema/``, one per schema revision) upgraded
in place with every row and every client's task ID intact; the migrations' result equal to
the models; the baseline equal to what 979ef09 made; a downgrade and what it loses."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

from registry.engine import create_engine
from registry.migrations import HEAD, HEAD_TABLES, MigrationError, commands, read_revision
from registry.migrations.baseline import METADATA as BASELINE
from registry.migrations.revisions import head, history
from registry.store import Store
from registry.tables import ApiKeyRow
from router.app import create_app
from router.compat.aliases import TaskAliases
from router.tables import SCHEMA
from router.transport.routes import ROUTER
from tests.support.helpers import AUTH, make_settings
from tests.support.schema_fixtures import ALIAS, REVISIONS, SCHEMA_FIXTURES, load_fixture

NAMES = {t.__tablename__ for t in SCHEMA}
KEYS: Any = ApiKeyRow.__table__


def test_head_is_the_newest_script_and_the_history_a_line() -> None:
    assert head() == HEAD
    ids = [r.id for r in history()]
    assert ids[-1] == HEAD and len(set(ids)) == len(ids)
    assert [r.down for r in history()] == [None, *ids[:-1]]
    assert HEAD_TABLES == NAMES  # a revision that adds or drops a table says so


def test_there_is_a_fixture_for_every_revision_before_head() -> None:
    """Keep a fixture database for each schema revision (tests/fixtures/README.md)."""
    assert REVISIONS, "no fixture database"
    made = {}
    for revision in REVISIONS:
        for suffix in (".db", ".postgresql.sql", ".json"):
            assert (SCHEMA_FIXTURES / f"{revision}{suffix}").is_file(), (revision, suffix)
        made[revision] = json.loads((SCHEMA_FIXTURES / f"{revision}.json").read_text())
        assert {"sqlite", "postgresql"} <= made[revision].keys()
    schemas = {found["schema_revision"] for found in made.values()}
    assert {r.id for r in history()[:-1]} <= schemas, "make.py a fixture of the missing ones"


def _differences(conn: Any, metadata: MetaData, names: set[str]) -> list[Any]:
    context = MigrationContext.configure(
        conn,
        opts={
            "compare_type": True,
            "include_name": lambda name, kind, _parent: kind != "table" or name in names,
        },
    )
    return compare_metadata(context, metadata)


async def _compare(engine: AsyncEngine, metadata: MetaData, names: set[str]) -> list[Any]:
    async with engine.connect() as conn:
        return await conn.run_sync(_differences, metadata, names)


async def test_the_migrations_make_the_models(db_url: str) -> None:
    """``upgrade head`` on an empty database, through every script, gives exactly the
    tables of ``router.tables.SCHEMA`` (Alembic's autogenerate comparison finds nothing): a
    change of the models without its revision fails here."""
    engine = create_engine(db_url)
    try:
        assert await commands.upgrade(engine, "head") == (None, HEAD)
        assert await _compare(engine, SQLModel.metadata, NAMES) == []
    finally:
        await engine.dispose()


async def test_the_baseline_is_979ef09s_schema(db_url: str) -> None:
    """The frozen baseline (registry/migrations/baseline.py) is what 979ef09 created."""
    load_fixture("979ef09", db_url)
    engine = create_engine(db_url)
    try:
        assert await read_revision(engine) is None
        assert await _compare(engine, BASELINE, set(BASELINE.tables)) == []
    finally:
        await engine.dispose()


async def _counts(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
        return {
            name: (await conn.execute(text(f"SELECT count(*) FROM {name}"))).scalar_one()
            for name in sorted(names)
            if name != "alembic_version"
        }


@pytest.mark.parametrize("revision", REVISIONS)
async def test_a_database_of_an_earlier_version_is_upgraded_in_place(
    db_url: str, revision: str
) -> None:
    expected = load_fixture(revision, db_url)
    store = Store(db_url, SCHEMA)
    try:
        before = await read_revision(store.engine)
        prepared = await store.create_schema()
        assert (prepared.before, prepared.after) == (before, HEAD)
        assert prepared.action == ("current" if before == HEAD else "upgraded")
        counts = {k: n for k, n in expected["counts"].items() if k != "alembic_version"}
        assert await _counts(store.engine) == counts  # every row is still there
        assert (await store.create_schema()).action == "current"  # at head: a read only
    finally:
        await store.close()
    await _check_everything_resolves(db_url, expected)


async def _check_everything_resolves(db_url: str, expected: dict[str, Any]) -> None:
    """The app of this version on the upgraded database: the catalog, keys, clients,
    policies, credentials and examples are there; every task and context ID a client
    holds opens to the same agent and upstream IDs, and ListTasks lists them."""
    settings = make_settings(
        db_url, client_auth="api-key", secret_key=expected["secret_key"], seeds=[]
    )
    client = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    try:
        app = client.server.app

        async def get(path: str) -> Any:
            answer = await client.get(path, headers=AUTH)
            assert answer.status == 200, (path, await answer.text())
            return await answer.json()

        assert sorted(a["id"] for a in (await get("/api/v1/agents"))["agents"]) == sorted(
            expected["agents"]
        )
        assert sorted(k["id"] for k in (await get("/api/v1/keys"))["keys"]) == expected["keys"]
        clients = (await get("/api/v1/clients"))["clients"]
        assert [c["id"] for c in clients] == [expected["client"]["id"]]
        policy = await get(f"/api/v1/policies/{expected['policy']['agent_id']}")
        assert policy["tenant"] == expected["policy"]["tenant"]
        assert [r["groups"] for r in policy["rules"]] == [["ops"]]
        credential = expected["credential"]
        shown = await get(f"/api/v1/agents/{credential['agent_id']}/credentials")
        assert (shown["kind"], shown["header"]) == (credential["kind"], credential["header"])
        example = expected["example"]
        examples = await get(f"/api/v1/skills/{example['agent_id']}/{example['skill_id']}/examples")
        assert [e["id"] for e in examples["examples"]] == [example["id"]]
        ids = app[ROUTER].ids
        for task in expected["tasks"]:
            view = ids.scoped(task["scope"])
            ref = await view.task(task["task_id"])
            assert ref is not None, task
            assert (ref.agent_id, ref.upstream_task_id, ref.context_id) == (
                task["agent_id"],
                task["upstream_task_id"],
                task["context_id"],
            )
            upstream = await view.upstream_context(task["context_id"], task["agent_id"])
            assert upstream == task["upstream_context_id"]
        for context in expected["contexts"]:
            view = ids.scoped(context["scope"])
            assert await view.context_agents(context["context_id"]) == set(context["upstream"])
            for agent, upstream in context["upstream"].items():
                assert await view.upstream_context(context["context_id"], agent) == upstream
        for scope, listed in expected["listed"].items():
            page, _ = await ids.scoped(scope).tasks.list_tasks(page_size=100)
            assert sorted(r.task_id for r in page) == listed
        assert await TaskAliases(app[ROUTER].ids.store).alias(ALIAS) == expected["alias"]["task_id"]
        # the client itself, with its API key: authenticated, and its tasks listed
        mine = expected["listed"][json.dumps(["acme", "alice"], separators=(",", ":"))]
        answer = await client.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 100}},
            headers={"A2A-Version": "1.0", "X-API-Key": expected["client"]["key"]},
        )
        listed = (await answer.json())["result"]["tasks"]
        assert sorted(t["id"] for t in listed) == mine
    finally:
        await client.close()


async def test_0002_revokes_the_keys_of_built_in_principals_names(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Keys made for ``admin-token`` or ``read-token`` by an earlier version are revoked by
    the upgrade, each with an audit entry and a log line; other keys, and those already
    refused, are left as they were; the downgrade keeps them revoked."""
    load_fixture("979ef09", db_url)
    engine = create_engine(db_url)
    earlier = datetime(2024, 1, 1, tzinfo=UTC)
    rows = {  # id: (subject, revoked_at)
        "0000000000a1": ("admin-token", None),
        "0000000000a2": ("read-token", datetime(2999, 1, 1, tzinfo=UTC)),  # a grace period
        "0000000000a3": ("admin-token", earlier),  # revoked already
        "0000000000a4": ("alice", None),
    }
    try:
        await commands.upgrade(engine, "0001")
        async with engine.begin() as conn:
            for key_id, (subject, revoked) in rows.items():
                values = {
                    "id": key_id, "prefix": f"sbk_{key_id}", "key_sha256": "0" * 64,
                    "subject": subject, "tenant": "acme", "groups": [], "roles": [],
                    "created_at": earlier, "created_by": "admin-token", "revoked_at": revoked,
                    "revoked_by": "admin-token" if revoked else None,
                }  # fmt: skip
                await conn.execute(KEYS.insert().values(**values))
        with caplog.at_level(logging.WARNING, logger="switchboard.migrations"):
            assert await commands.upgrade(engine, "head") == ("0001", HEAD)
        async with engine.connect() as conn:
            keys = {
                row.id: row
                for row in await conn.execute(
                    text("SELECT id, revoked_at, revoked_by FROM api_keys")
                )
            }
            audit = list(
                await conn.execute(
                    text("SELECT actor, action, target, status, details FROM audit_log "
                         "WHERE actor = 'schema-revision:0002' ORDER BY target")
                )
            )  # fmt: skip
        revoked = {
            key_id for key_id, row in keys.items() if row.revoked_by == "schema revision 0002"
        }
        assert revoked == {"0000000000a1", "0000000000a2"}
        assert keys["0000000000a3"].revoked_by == "admin-token"  # left as it was
        assert keys["0000000000a4"].revoked_at is None
        assert [(a.action, a.target, a.status) for a in audit] == [
            ("DELETE /api/v1/clients/{client_id}", "0000000000a1", 204),
            ("DELETE /api/v1/clients/{client_id}", "0000000000a2", 204),
        ]
        logged = [r.getMessage() for r in caplog.records if r.name == "switchboard.migrations"]
        assert any("sbk_0000000000a1" in line and "'admin-token'" in line for line in logged)
        assert any("sbk_0000000000a2" in line and "'read-token'" in line for line in logged)
        assert await commands.downgrade(engine, "0001") == (HEAD, "0001")
        async with engine.connect() as conn:
            still = await conn.execute(
                text("SELECT count(*) FROM api_keys WHERE revoked_by = 'schema revision 0002'")
            )
            assert still.scalar_one() == 2
    finally:
        await engine.dispose()


REVISION_SCRIPT = '''"""Test: a nullable column on agents and a table (an expand step).

Downgrade: drops both, and their data with them.
"""

import sqlalchemy as sa
from alembic import op

revision = "test_expand"
down_revision = "{down}"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("agents", sa.Column("nickname", sa.String(64)))
    op.create_table(
        "test_notes", sa.Column("id", sa.Integer, primary_key=True), sa.Column("note", sa.Text)
    )


def downgrade():
    op.drop_table("test_notes")
    with op.batch_alter_table("agents") as batch:  # SQLite: the table rebuilt by copy
        batch.drop_column("nickname")
'''


async def test_a_downgrade_loses_what_its_script_says_and_keeps_the_rest(
    db_url: str, tmp_path: Path
) -> None:
    """Upgrade a 979ef09 database to head, then to a later revision (a test's own script),
    then downgrade to head: the column and table the later revision added are gone, every
    other row is kept (on SQLite the agents table is rebuilt by copy, which must not cascade
    into the tables referring to it); below the baseline is refused, changing nothing."""
    expected = load_fixture("979ef09", db_url)
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "test_expand.py").write_text(REVISION_SCRIPT.format(down=HEAD))
    engine = create_engine(db_url)
    try:
        assert await commands.upgrade(engine, HEAD) == (None, HEAD)
        assert await commands.upgrade(engine, "head", [versions]) == (HEAD, "test_expand")
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE agents SET nickname = 'fx' WHERE id = 'currency'"))
            await conn.execute(text("INSERT INTO test_notes (note) VALUES ('lost')"))
        assert await commands.downgrade(engine, HEAD, [versions]) == ("test_expand", HEAD)
        async with engine.connect() as conn:
            tables = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
            columns = await conn.run_sync(lambda sync: inspect(sync).get_columns("agents"))
        assert "test_notes" not in tables
        assert "nickname" not in {c["name"] for c in columns}
        assert await _counts(engine) == expected["counts"]
        assert await _compare(engine, SQLModel.metadata, NAMES) == []
        with pytest.raises(MigrationError, match="baseline"):
            await commands.downgrade(engine, "base")
        assert await read_revision(engine) == HEAD
        assert await _counts(engine) == expected["counts"]
    finally:
        await engine.dispose()
