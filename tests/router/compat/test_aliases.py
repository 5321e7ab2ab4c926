"""v0.1 clients' task IDs per owner scope on SQLite and PostgreSQL: two callers who choose
the same ID hold two bindings, neither sees the other's, with warm caches, after a restart
and when they bind at once (the aliases themselves: tests/router/compat/test_v01.py)."""

from __future__ import annotations

import asyncio

from registry.access.principal import Principal
from registry.store import Store
from router.compat.aliases import TaskAliases
from router.tables import SCHEMA

ALICE = Principal(subject="alice", tenant="acme", method="api-key").scope()
BOB = Principal(subject="bob", tenant="other", method="jwt").scope()
LONG = Principal(subject="s" * 300, method="jwt").scope()  # stored as its digest


async def test_the_same_alias_in_two_scopes(store: Store, db_url: str) -> None:
    aliases = TaskAliases(store)
    alice, bob, long = aliases.scoped(ALICE), aliases.scoped(BOB), aliases.scoped(LONG)
    assert aliases.scoped("") is aliases and alice.scoped(ALICE) is alice
    assert (aliases.scope, alice.scope) == ("", ALICE)
    assert await bob.alias("task-1") is None  # a miss, remembered briefly for Bob alone
    assert await alice.bind_alias("task-1", "t1.alice") == "t1.alice"
    assert await alice.alias("task-1") == "t1.alice"  # warm: cached for Alice
    assert await bob.alias("task-1") is None
    assert await aliases.alias("task-1") is None  # nor the anonymous scope's
    assert await bob.bind_alias("task-1", "t1.bob") == "t1.bob"  # Bob's own binding
    assert await long.bind_alias("task-1", "t1.long") == "t1.long"
    assert await alice.bind_alias("task-1", "t1.other") == "t1.alice"  # the first one wins
    assert await bob.alias("task-1") == "t1.bob"
    assert await aliases.bind_alias("task-1", "t1.anon") == "t1.anon"
    restarted = Store(db_url, SCHEMA)  # another process: no cache
    try:
        fresh = TaskAliases(restarted)
        assert await fresh.scoped(ALICE).alias("task-1") == "t1.alice"
        assert await fresh.scoped(BOB).alias("task-1") == "t1.bob"
        assert await fresh.scoped(LONG).alias("task-1") == "t1.long"
        assert await fresh.alias("task-1") == "t1.anon"
        assert await fresh.scoped('["acme","carol"]').alias("task-1") is None
    finally:
        await restarted.close()


async def test_concurrent_bindings_per_scope(store: Store, db_url: str) -> None:
    replica = Store(db_url, SCHEMA)  # a second process on the same database
    try:
        views = [TaskAliases(s).scoped(scope) for s in (store, replica) for scope in (ALICE, BOB)]
        bound = await asyncio.gather(
            *(views[n % 4].bind_alias("task-1", f"t1.{views[n % 4].scope}.{n}") for n in range(16))
        )
        per_scope = {
            scope: {b for b in bound if b.startswith(f"t1.{scope}.")} for scope in (ALICE, BOB)
        }
        assert all(len(one) == 1 for one in per_scope.values()), per_scope
        assert len(bound) == 16 and set(bound) == per_scope[ALICE] | per_scope[BOB]
    finally:
        await replica.close()
