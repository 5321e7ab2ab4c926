"""The store on SQLite and PostgreSQL: atomic saves, revisions, the catalog version, deletes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from registry.engine import async_url
from registry.errors import RegistryError
from registry.records import AgentRecord, utcnow
from registry.store import Store
from registry.tables import RefreshRow
from tests.support.helpers import card_v03, card_v1, make_record


def _record(agent_id: str, card: dict, source_url: str | None = None) -> tuple[AgentRecord, bytes]:
    return make_record(agent_id, card, source_url)


async def test_round_trip_keeps_every_field(store: Store) -> None:
    card = card_v1("https://w.example", description="Prévisions météo ✓")
    record, raw = _record("wx", card, "https://w.example")
    assert await store.insert(record, raw) == 1
    assert await store.get("wx") == record
    assert await store.raw_card("wx") == raw
    assert await store.id_for_source("https://w.example") == "wx"
    assert await store.catalog_version() == 1


async def test_update_replaces_index_rows_and_adds_revision(store: Store) -> None:
    card = card_v1("https://w.example")
    record, raw = _record("wx", card)
    await store.insert(record, raw)
    assert await store.update(record, raw) == (False, 2)  # same bytes: no new revision
    card["skills"] = card["skills"][:1]
    card["skills"][0]["tags"] = ["only"]
    updated, raw2 = _record("wx", card)
    assert await store.update(updated, raw2) == (True, 3)
    got = await store.get("wx")
    assert got is not None
    assert [s.id for s in got.card.skills] == ["forecast"]
    assert got.card.skills[0].tags == ["only"]
    revisions = await store.revisions("wx")
    assert [r["size"] for r in revisions] == [len(raw2), len(raw)]  # newest first
    assert revisions[0]["sha256"] == updated.card_sha256
    assert await store.catalog_version() == 3


async def test_delete_removes_everything(store: Store) -> None:
    for agent_id, card in (("a", card_v1("https://a.example")), ("b", card_v03("https://b"))):
        await store.insert(*_record(agent_id, card))
    assert await store.delete("a") == 3
    assert await store.delete("a") is None
    assert [r.id for r in await store.all()] == ["b"]
    assert await store.revisions("a") == []
    assert await store.ids() == {"b"}


async def test_source_url_is_unique(store: Store) -> None:
    from sqlalchemy.exc import IntegrityError

    await store.insert(*_record("a", card_v1("https://a.example"), "https://same.example"))
    with pytest.raises(IntegrityError):
        await store.insert(*_record("b", card_v1("https://b.example"), "https://same.example"))
    with pytest.raises(IntegrityError):
        await store.insert(*_record("a", card_v1("https://c.example")))
    assert await store.ids() == {"a"}  # the failed inserts left nothing behind
    assert await store.catalog_version() == 1


async def test_update_never_brings_back_a_removed_agent(store: Store) -> None:
    record, raw = _record("a", card_v1("https://a.example"))
    await store.insert(record, raw)
    await store.delete("a")
    assert await store.update(record, raw) is None
    assert await store.get("a") is None


async def test_concurrent_schema_creation(db_url: str) -> None:
    """Replicas starting together on an empty database must not race on CREATE TABLE."""
    stores = [Store(db_url) for _ in range(4)]
    try:
        await asyncio.gather(*(s.create_schema() for s in stores))
        assert await stores[0].catalog_version() == 0
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_concurrent_saves_keep_a_consistent_version(store: Store) -> None:
    records = [_record(f"agent-{n}", card_v1(f"https://{n}.example")) for n in range(8)]
    versions = await asyncio.gather(*(store.insert(r, raw) for r, raw in records))
    assert sorted(versions) == list(range(1, 9))  # each write saw its own version
    updates = await asyncio.gather(*(store.update(r, raw) for r, raw in records))
    assert sorted(v for _, v in updates) == list(range(9, 17))
    assert len(await store.all()) == 8
    assert await store.catalog_version() == 16


def test_async_url_mapping() -> None:
    assert async_url("sqlite:///./x.db") == "sqlite+aiosqlite:///./x.db"
    assert async_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert async_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert async_url("postgresql+asyncpg://u@h/db") == "postgresql+asyncpg://u@h/db"


async def test_an_older_schema_is_a_clear_error(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # what an earlier Switchboard left behind
        conn.execute("CREATE TABLE agents (id VARCHAR(64) PRIMARY KEY, name VARCHAR)")
    store = Store(f"sqlite:///{path}")
    try:
        with pytest.raises(RegistryError) as info:
            await store.create_schema()
    finally:
        await store.close()
    assert info.value.code == "schema_outdated"
    assert "agents.description" in info.value.details["missing_columns"]


async def test_one_holder_taking_a_lease_twice_at_once_holds_it(store: Store) -> None:
    """Two renewals of one holder racing to create the lease row both hold it; another
    holder does not."""
    now = utcnow()
    for _ in range(5):
        await store.release_lease("race", "me")
        held = await asyncio.gather(*(store.acquire_lease("race", "me", now, 30) for _ in range(4)))
        assert all(held), held
    assert not await store.acquire_lease("race", "other", now, 30)
    assert await store.lease_holder("race", now) == "me"


def _refresh(agent_id: str) -> RefreshRow:
    return RefreshRow(agent_id=agent_id, status="healthy")


async def test_concurrent_inserts_share_one_transaction_in_order(store: Store) -> None:
    items = [_record(f"agent-{n}", card_v1(f"https://{n}.example")) for n in range(6)]
    versions = await asyncio.gather(*(store.insert(r, raw, _refresh(r.id)) for r, raw in items))
    assert versions == [1, 2, 3, 4, 5, 6]  # in arrival order, as if written one by one
    assert store.insert_batches == 1
    assert await store.catalog_version() == 6
    assert [r.id for r in await store.all()] == [f"agent-{n}" for n in range(6)]
    for record, raw in items:
        assert await store.get(record.id) == record
        assert [r["size"] for r in await store.revisions(record.id)] == [len(raw)]
    revisions = {row.agent_id: row.revision for row in await store.refresh_rows()}
    assert revisions == {f"agent-{n}": n + 1 for n in range(6)}  # the health version too
    assert (await store.versions())[1] == 6


async def test_a_conflicting_insert_in_a_batch_fails_alone(store: Store) -> None:
    from sqlalchemy.exc import IntegrityError

    await store.insert(*_record("taken", card_v1("https://t.example"), "https://t.example"))
    items = [
        _record("a", card_v1("https://a.example")),
        _record("dup", card_v1("https://d1.example")),
        _record("dup", card_v1("https://d2.example")),  # the same id twice in one batch
        _record("b", card_v1("https://b.example"), "https://t.example"),  # a taken source
        _record("c", card_v1("https://c.example")),
    ]
    outcomes = await asyncio.gather(
        *(store.insert(r, raw, _refresh(r.id)) for r, raw in items), return_exceptions=True
    )
    assert outcomes[0] == 2 and outcomes[1] == 3 and outcomes[4] == 4
    assert isinstance(outcomes[2], IntegrityError) and isinstance(outcomes[3], IntegrityError)
    assert await store.ids() == {"taken", "a", "dup", "c"}
    dup = await store.get("dup")
    assert dup is not None and dup.card.interfaces[0].url == "https://d1.example/a2a"
    assert await store.catalog_version() == 4
    assert await store.revisions("b") == []
    assert {row.agent_id for row in await store.refresh_rows()} == {"a", "dup", "c"}
    # the batcher goes on: a later insert lands with the next version
    assert await store.insert(*_record("d", card_v1("https://e.example"))) == 5
