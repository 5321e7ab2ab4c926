"""API keys on SQLite and PostgreSQL: create, authenticate, revoke (on another replica too),
rotate, expiry, malformed keys; only the hash is stored and lists never show secrets."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from registry.access.apikeys import ApiKeys
from registry.access.errors import AuthError
from registry.errors import RegistryError
from registry.store import Store
from tests.support.clock import FakeClock

OpenStore = Callable[[str], Awaitable[Store]]  # the open_store fixture (conftest.py)

KEY = re.compile(r"sbk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(open_store: OpenStore, db_url: str) -> Store:
    return await open_store(db_url)


@pytest.fixture
def keys(store: Store, clock: FakeClock) -> ApiKeys:
    return ApiKeys(store, clock=clock)


async def _reason(keys: ApiKeys, key: str) -> str:
    with pytest.raises(AuthError) as caught:
        await keys.authenticate(key)
    if len(key) > 8:
        assert key not in caught.value.message  # the message never echoes the credential
    return caught.value.reason


async def test_create_then_authenticate(keys: ApiKeys) -> None:
    info, key = await keys.create(
        "alice",
        tenant="acme",
        groups=["finance", "ops", "finance"],
        roles=["reader"],
        description="CI pipeline",
        by="admin-token",
    )
    match = KEY.fullmatch(key)
    assert match is not None and match.group(1) == info.id
    assert info.prefix == f"sbk_{info.id}"
    assert (info.subject, info.tenant, info.groups, info.roles) == (
        "alice",
        "acme",
        ("finance", "ops"),
        ("reader",),
    )
    assert info.created_by == "admin-token" and info.description == "CI pipeline"

    principal = await keys.authenticate(key)
    assert principal.method == "api-key" and principal.key_id == info.id
    assert principal.subject == "alice" and principal.tenant == "acme"
    assert principal.groups == frozenset({"finance", "ops"})
    assert principal.roles == frozenset({"reader"})
    assert principal.label() == f"api-key:{info.id} alice"


async def test_only_the_hash_is_stored(keys: ApiKeys, store: Store) -> None:
    _, key = await keys.create("alice", by="admin-token")
    secret = key.split("_", 2)[2]
    async with store.engine.connect() as conn:
        rows = (await conn.execute(text("SELECT * FROM api_keys"))).mappings().all()
    assert len(rows) == 1
    row = dict(rows[0])
    assert row["key_sha256"] == hashlib.sha256(key.encode()).hexdigest()
    stored = " ".join(str(value) for value in row.values())
    assert key not in stored and secret not in stored


async def test_lists_and_views_never_show_secrets(keys: ApiKeys, clock: FakeClock) -> None:
    created = [await keys.create(f"user-{n}", by="admin-token") for n in range(3)]
    page = await keys.list()
    assert {info.id for info in page.items} == {info.id for info, _ in created}
    for info in [*page.items, await keys.get(created[0][0].id)]:
        shown = f"{asdict(info)} {info.to_api(clock())}"
        for _, key in created:
            assert key not in shown and key.split("_", 2)[2] not in shown
            assert hashlib.sha256(key.encode()).hexdigest() not in shown
    view = page.items[0].to_api(clock())
    assert set(view) == {
        "id",
        "prefix",
        "status",
        "subject",
        "tenant",
        "groups",
        "roles",
        "description",
        "created_at",
        "created_by",
        "expires_at",
        "revoked_at",
        "revoked_by",
        "rotated_to",
    }
    assert view["status"] == "active"


async def test_list_pages_and_filters(keys: ApiKeys, clock: FakeClock) -> None:
    ids = []
    for n in range(5):
        info, _ = await keys.create(f"user-{n % 2}", tenant="acme" if n < 3 else None, by="x")
        ids.append(info.id)
        clock.advance(1)
    info, _ = await keys.create("same-time-a", by="x")  # two keys created at the same time
    info2, _ = await keys.create("same-time-b", by="x")
    seen, cursor = [], None
    while True:
        page = await keys.list(limit=2, cursor=cursor)
        seen += [i.id for i in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen[2:] == list(reversed(ids))
    assert set(seen[:2]) == {info.id, info2.id}
    assert [i.subject for i in (await keys.list(subject="user-1")).items] == ["user-1"] * 2
    assert len((await keys.list(tenant="acme")).items) == 3
    first = await keys.list(limit=1, subject="user-1")
    assert first.next_cursor is not None
    with pytest.raises(RegistryError) as caught:  # a cursor of other filters
        await keys.list(limit=1, subject="user-0", cursor=first.next_cursor)
    assert caught.value.code == "invalid_cursor"
    with pytest.raises(RegistryError) as caught:
        await keys.list(cursor="not-a-cursor")
    assert caught.value.code == "invalid_cursor"


async def test_revoked_key_is_refused_at_once_by_another_replica(
    keys: ApiKeys, open_store: OpenStore, db_url: str, clock: FakeClock
) -> None:
    other = ApiKeys(await open_store(db_url), clock=clock)  # another process, same database
    info, key = await keys.create("alice", by="admin-token")
    assert (await other.authenticate(key)).subject == "alice"
    revoked = await keys.revoke(info.id, "admin-token")
    assert revoked.revoked_at == clock() and revoked.revoked_by == "admin-token"
    assert revoked.status(clock()) == "revoked"
    assert await _reason(other, key) == "revoked"
    assert await _reason(keys, key) == "revoked"
    clock.advance(60)
    again = await other.revoke(info.id, "someone-else")  # nothing changes
    assert again.revoked_at == revoked.revoked_at and again.revoked_by == "admin-token"


async def test_rotate_at_once(keys: ApiKeys, clock: FakeClock) -> None:
    expires = clock() + timedelta(days=30)
    old, old_key = await keys.create(
        "alice", tenant="acme", groups=["g"], roles=["admin"], expires_at=expires, by="a"
    )
    new, new_key = await keys.rotate(old.id, "b")
    assert new.id != old.id and new_key != old_key
    assert (new.subject, new.tenant, new.groups, new.roles, new.expires_at) == (
        "alice",
        "acme",
        ("g",),
        ("admin",),
        expires,
    )
    assert new.created_by == "b"
    assert await _reason(keys, old_key) == "revoked"
    assert (await keys.authenticate(new_key)).key_id == new.id
    retired = await keys.get(old.id)
    assert retired.rotated_to == new.id and retired.revoked_by == "b"
    with pytest.raises(RegistryError) as caught:
        await keys.rotate(old.id, "b")
    assert (caught.value.status, caught.value.code) == (409, "key_rotated")


async def test_rotate_with_grace(keys: ApiKeys, clock: FakeClock) -> None:
    old, old_key = await keys.create("alice", by="a")
    new, new_key = await keys.rotate(old.id, "a", grace=300)
    assert (await keys.authenticate(old_key)).key_id == old.id  # still, for the grace period
    assert (await keys.authenticate(new_key)).key_id == new.id
    retired = await keys.get(old.id)
    assert retired.status(clock()) == "active" and retired.rotated_to == new.id
    assert retired.revoked_at == clock() + timedelta(seconds=300)
    clock.advance(300)
    assert await _reason(keys, old_key) == "revoked"
    assert (await keys.authenticate(new_key)).key_id == new.id


async def test_revoke_ends_a_grace_period(keys: ApiKeys, clock: FakeClock) -> None:
    old, old_key = await keys.create("alice", by="a")
    await keys.rotate(old.id, "a", grace=3600)
    clock.advance(10)
    assert (await keys.revoke(old.id, "b")).revoked_at == clock()
    assert await _reason(keys, old_key) == "revoked"


async def test_rotate_refuses_revoked_and_expired_keys(keys: ApiKeys, clock: FakeClock) -> None:
    revoked, _ = await keys.create("alice", by="a")
    await keys.revoke(revoked.id, "a")
    expiring, _ = await keys.create("bob", expires_at=clock() + timedelta(seconds=5), by="a")
    clock.advance(5)
    for key_id, code in ((revoked.id, "key_revoked"), (expiring.id, "key_expired")):
        with pytest.raises(RegistryError) as caught:
            await keys.rotate(key_id, "a")
        assert (caught.value.status, caught.value.code) == (409, code)
    for grace in (-1, 30 * 86400 + 1, float("nan"), True):
        with pytest.raises(RegistryError) as caught:
            await keys.rotate(expiring.id, "a", grace=grace)
        assert caught.value.code == "invalid_client"


async def test_expiry(keys: ApiKeys, clock: FakeClock) -> None:
    info, key = await keys.create("alice", expires_at=clock() + timedelta(hours=1), by="a")
    assert (await keys.authenticate(key)).subject == "alice"
    clock.advance(3599)
    assert (await keys.authenticate(key)).subject == "alice"
    clock.advance(1)
    assert await _reason(keys, key) == "expired"
    assert (await keys.get(info.id)).status(clock()) == "expired"


@pytest.mark.parametrize(
    "given",
    [
        "",
        "sbk_",
        "Bearer sbk_0123456789ab_" + "A" * 43,
        "sbk_0123456789AB_" + "A" * 43,  # the id is lowercase hex
        "sbk_0123456789a_" + "A" * 44,
        "sbk_0123456789ab_" + "A" * 42,
        "sbk_0123456789ab_" + "A" * 44,
        "sbk_0123456789ab_" + "A" * 42 + "=",
        "sbk_0123456789ab_" + "A" * 42 + "\n",
        "xyz_0123456789ab_" + "A" * 43,
        "sbk_0123456789ab_" + "é" * 43,
    ],
)
async def test_malformed_keys(keys: ApiKeys, given: str) -> None:
    assert await _reason(keys, given) == "malformed"


async def test_unknown_and_wrong_secret(keys: ApiKeys) -> None:
    _, key = await keys.create("alice", by="a")
    assert await _reason(keys, f"sbk_{'0' * 12}_{'A' * 43}") == "unknown_key"
    wrong = key[:-1] + ("B" if key[-1] != "B" else "C")
    assert await _reason(keys, wrong) == "unknown_key"  # a known id says no more than that


async def test_a_key_never_stands_for_a_built_in_principal(keys: ApiKeys, store: Store) -> None:
    with pytest.raises(RegistryError) as caught:
        await keys.create("admin-token", by="a")
    assert (caught.value.status, caught.value.code) == (422, "reserved_subject")
    # a key an older replica made during an upgrade is refused at sign-in
    info, key = await keys.create("someone", by="a")
    async with store.engine.begin() as conn:
        update = "UPDATE api_keys SET subject = 'read-token' WHERE id = :id"
        await conn.execute(text(update), {"id": info.id})
    assert await _reason(keys, key) == "revoked"


async def test_get_and_revoke_unknown(keys: ApiKeys) -> None:
    for key_id in ("0123456789ab", "not-an-id", "x" * 300):
        with pytest.raises(RegistryError) as caught:
            await keys.get(key_id)
        assert (caught.value.status, caught.value.code) == (404, "not_found")
        with pytest.raises(RegistryError):
            await keys.revoke(key_id, "a")
        with pytest.raises(RegistryError):
            await keys.rotate(key_id, "a")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"subject": ""}, "subject"),
        ({"subject": "  "}, "subject"),
        ({"subject": "a" * 257}, "subject"),
        ({"subject": "a\nb"}, "subject"),
        ({"tenant": ""}, "tenant"),
        ({"groups": "finance"}, "groups"),
        ({"groups": [""]}, "groups"),
        ({"groups": [f"g{n}" for n in range(65)]}, "groups"),
        ({"roles": ["root"]}, "roles"),
        ({"roles": "admin"}, "roles"),
        ({"description": "d" * 1025}, "description"),
        ({"expires_at": datetime(2020, 1, 1, tzinfo=UTC)}, "expires_at"),
        ({"expires_at": datetime(2099, 1, 1)}, "expires_at"),  # no timezone
    ],
)
async def test_bad_values(keys: ApiKeys, kwargs: dict[str, object], field: str) -> None:
    kwargs = dict(kwargs)
    subject = kwargs.pop("subject", "alice")
    with pytest.raises(RegistryError) as caught:
        await keys.create(subject, by="a", **kwargs)  # type: ignore[arg-type]
    assert (caught.value.status, caught.value.code) == (400, "invalid_client")
    assert caught.value.details == [{"field": field, "problem": caught.value.details[0]["problem"]}]
    assert (await keys.list()).items == []


async def test_concurrent_rotations_make_one_successor(
    keys: ApiKeys, open_store: OpenStore, db_url: str, clock: FakeClock
) -> None:
    other = ApiKeys(await open_store(db_url), clock=clock)
    old, _ = await keys.create("alice", by="a")
    results = await asyncio.gather(
        keys.rotate(old.id, "a"), other.rotate(old.id, "b"), return_exceptions=True
    )
    made = [r for r in results if isinstance(r, tuple)]
    refused = [r for r in results if isinstance(r, RegistryError)]
    assert len(made) == 1 and len(refused) == 1, results
    assert (refused[0].status, refused[0].code) == (409, "key_rotated")
    assert (await keys.get(old.id)).rotated_to == made[0][0].id
    assert len((await keys.list()).items) == 2


async def test_concurrent_requests_of_one_key_share_a_read_or_read_at_once_and_none_is_kept(
    keys: ApiKeys, store: Store
) -> None:
    _, key = await keys.create("alice", by="admin-token")
    reads: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM api_keys" in statement:
            reads.append(statement)

    engine = store.quick.reader or store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        principals = await asyncio.gather(*(keys.authenticate(key) for _ in range(20)))
        assert {p.subject for p in principals} == {"alice"}
        if store.quick.immediate:  # a SQLite file: each read at once, none in flight
            assert len(reads) == 20
        else:
            assert 1 <= len(reads) < 20  # shared while in flight
        await keys.revoke(key.split("_", 2)[1], by="admin-token")
        assert await _reason(keys, key) == "revoked"  # a finished read is never reused
    finally:
        event.remove(engine, "before_cursor_execute", count)


async def test_an_unknown_key_id_is_read_once_until_it_expires_or_a_key_gets_it(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood of one unknown key costs one read per ``UNKNOWN_TTL``; the id's key, once made
    here, is known at once."""
    now = [0.0]
    keys = ApiKeys(store, clock=clock, unknown_ttl=10, timer=lambda: now[0])
    reads: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "FROM api_keys" in statement:
            reads.append(statement)

    unknown = "sbk_0123456789ab_" + "A" * 43
    engine = store.quick.reader or store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        for _ in range(5):
            assert await _reason(keys, unknown) == "unknown_key"
        assert len(reads) == 1
        now[0] = 10.5
        assert await _reason(keys, unknown) == "unknown_key"
        assert len(reads) == 2
        monkeypatch.setattr("registry.access.apikeys._new_key", lambda: ("0123456789ab", unknown))
        await keys.create("alice", by="admin-token")
        assert (await keys.authenticate(unknown)).subject == "alice"
        assert len(reads) == 3
    finally:
        event.remove(engine, "before_cursor_execute", count)
