"""Owner scopes on SQLite and PostgreSQL: from one scope, another scope's tasks and contexts
are IDs that do not exist (the same answers, the same database work), warm caches, other
replicas and restarts included; ListTasks lists one scope; the stored form of scopes."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import col, func, select

from registry.access.principal import Principal
from registry.store import Store
from router.ids.idmap import IdMap
from router.ids.owners import owner_key, scope_digest, task_owner
from router.ids.rewrite import Rewriter
from router.protocol.errors import INVALID_AGENT_RESPONSE, INVALID_PARAMS, RpcError
from router.protocol.versions import Op
from router.tables import OWNER_MAX_LENGTH, SCHEMA, RouterContextEntry, RouterTaskEntry
from tests.support.statements import statements

ALICE = Principal(subject="alice", tenant="acme", method="api-key").scope()
BOB = Principal(subject="bob", tenant="acme", method="jwt").scope()
LONG = Principal(subject="s" * 300, tenant="big", method="jwt").scope()


async def _count(store: Store, table: type[Any], *where: Any) -> int:
    async with store.session() as session:
        return (await session.exec(select(func.count()).select_from(table).where(*where))).one()


def test_the_stored_form_of_a_scope() -> None:
    assert owner_key("") == "" and task_owner("") is None
    assert owner_key(ALICE) == ALICE == '["api-key","acme","alice"]' and task_owner(ALICE) == ALICE
    long = owner_key(LONG)
    assert long.startswith("sha256:") and len(long) <= OWNER_MAX_LENGTH
    assert owner_key(long) != long  # a scope that looks like a digest is hashed too
    assert owner_key(LONG + "x") != long
    wide = "é" * 100  # 100 characters, 200 bytes: too long for the keys it is part of
    assert owner_key(wide).startswith("sha256:") and owner_key("é" * 64) == "é" * 64
    assert scope_digest("") == "" and scope_digest(ALICE) != scope_digest(BOB)


async def test_views_share_the_map_and_are_cheap(ids: IdMap) -> None:
    alice = ids.scoped(ALICE)
    assert ids.scope == "" and ids.scoped("") is ids and alice.scoped(ALICE) is alice
    assert alice.store is ids.store and alice.log is ids.log
    assert alice.tasks.owner == ALICE and ids.tasks.owner == ""
    assert (await alice.sealer()).scope == ALICE and (await ids.sealer()).scope == ""


async def test_a_scopes_task_tokens_are_unknown_elsewhere(
    ids: IdMap, store: Store, db_url: str
) -> None:
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    context = await alice.context_for_upstream("wx", "uc-1", None)
    ref = await alice.task_for_upstream("wx", "ut-1", context)
    assert ref.owner == ALICE
    assert await alice.task(ref.task_id) == ref  # warm in the shared cache...
    for other in (bob, ids):  # ...and unknown from any other scope, the anonymous one too
        assert await other.task(ref.task_id) is None
        assert await other.task_by_upstream("wx", "ut-1") is None
        assert await other.context_by_upstream("wx", "uc-1") is None
        assert await other.upstream_context(context, "wx") is None
        assert await other.context_agents(context) == set()
        await other.record_state(ref.task_id, "completed")  # a task it does not have: ignored
    # the same upstream task met in another scope is another ID there
    theirs = await bob.task_for_upstream("wx", "ut-2", None)
    assert (await alice.task_for_upstream("wx", "ut-2", None)).task_id != theirs.task_id
    await ids.flush()
    restarted = Store(db_url, SCHEMA)  # another process: no cache at all
    try:
        fresh = IdMap(restarted)
        assert await fresh.scoped(BOB).task(ref.task_id) is None
        assert await fresh.task(ref.task_id) is None
        found = await fresh.scoped(ALICE).task(ref.task_id)
        assert found is not None and (found.upstream_task_id, found.owner) == ("ut-1", ALICE)
        assert await fresh.scoped(ALICE).task_by_upstream("wx", "ut-1") is not None
        assert await fresh.scoped(BOB).task_by_upstream("wx", "ut-1") is None
        assert await fresh.scoped(ALICE).context_by_upstream("wx", "uc-1") == context
        assert await fresh.scoped(BOB).context_by_upstream("wx", "uc-1") is None
        await fresh.close()
    finally:
        await restarted.close()


async def test_stored_task_ids_are_isolated(ids: IdMap, store: Store, db_url: str) -> None:
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    long_task = "T" * 500  # too long for a token: a stored ID
    ref = await alice.task_for_upstream("wx", long_task, None)
    assert not ref.task_id.startswith("t1.")
    assert await alice.task(ref.task_id) == ref
    assert await bob.task(ref.task_id) is None and await ids.task(ref.task_id) is None
    async with store.session() as session:
        row = await session.get(RouterTaskEntry, ref.task_id)
    assert row is not None and row.owner == ALICE
    # an agent handing the same task to another owner: that owner gets no ID for it
    with pytest.raises(ValueError):
        await bob.task_for_upstream("wx", long_task, None)
    rewriter = Rewriter(bob, "1.0", "wx", None)
    with pytest.raises(RpcError) as info:
        await rewriter.result_from_upstream(Op.SEND, {"task": {"id": long_task}})
    assert info.value.code == INVALID_AGENT_RESPONSE
    restarted = Store(db_url, SCHEMA)
    try:
        fresh = IdMap(restarted)
        assert await fresh.scoped(BOB).task(ref.task_id) is None
        assert (await fresh.scoped(ALICE).task(ref.task_id)) is not None
    finally:
        await restarted.close()


async def test_another_scopes_ids_cost_what_unknown_ids_cost(ids: IdMap, store: Store) -> None:
    """The class of answer and of work is that of an ID that does not exist: a foreign token
    is refused without a query, as a forged one is; a foreign stored ID costs the queries an
    unknown one costs."""
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    token = (await alice.task_for_upstream("wx", "ut-1", None)).task_id
    stored = (await alice.task_for_upstream("wx", "S" * 500, None)).task_id
    await ids.flush()
    work: dict[str, int] = {}
    cases = {
        "foreign token": token,
        "forged token": token[:-2] + ("AA" if token[-2:] != "AA" else "BB"),
        "foreign stored": stored,
        "unknown stored": "0b6a-nobody",
    }
    for name, task_id in cases.items():
        with statements(store) as seen:
            assert await bob.task(task_id) is None
        work[name] = len(seen)
    assert work["foreign token"] == work["forged token"] == 0
    assert work["foreign stored"] == work["unknown stored"] > 0
    # through the rewriter: the same TaskNotFound as for a task nobody has
    rewriter = Rewriter(bob, "1.0", "wx", None)
    errors = []
    for task_id in cases.values():
        with pytest.raises(RpcError) as info:
            await rewriter.request_to_upstream(Op.GET, {"id": task_id})
        errors.append((info.value.code, info.value.message.replace(task_id, "<id>")))
    assert len(set(errors)) == 1


async def test_list_tasks_lists_one_scope(ids: IdMap) -> None:
    alice, bob, long = ids.scoped(ALICE), ids.scoped(BOB), ids.scoped(LONG)
    mine = {(await alice.task_for_upstream("wx", f"a-{n}", "ctx")).task_id for n in range(3)}
    theirs = {(await bob.task_for_upstream("wx", f"b-{n}", "ctx")).task_id for n in range(2)}
    anonymous = (await ids.task_for_upstream("wx", "anon", "ctx")).task_id
    longs = (await long.task_for_upstream("wx", "long", "ctx")).task_id
    for view, expected in (
        (alice, mine),
        (bob, theirs),
        (ids, {anonymous}),
        (long, {longs}),
    ):
        listed, token = await view.tasks.list_tasks(page_size=100)
        assert {r.task_id for r in listed} == expected and token is None
        assert {r.owner for r in listed} == {view.scope}
        assert await view.tasks.count_tasks() == len(expected)
        assert await view.tasks.count_tasks(context_id="ctx") == len(expected)
    # a page token is one scope's: elsewhere it is no page token at all
    _, token = await alice.tasks.list_tasks(page_size=1)
    assert token is not None
    assert len((await alice.tasks.list_tasks(page_size=1, page_token=token))[0]) == 1
    foreign, garbage = [], []
    for view in (bob, ids):
        for bad, out in ((token, foreign), ("bm90IGEgdG9rZW4", garbage)):
            with pytest.raises(RpcError) as info:
                await view.tasks.list_tasks(page_size=1, page_token=bad)
            out.append((info.value.code, info.value.violations))
    assert foreign == garbage and foreign[0][0] == INVALID_PARAMS
    await ids.task_for_upstream("wx", "anon-2", None)
    _, anonymous_token = await ids.tasks.list_tasks(page_size=1)
    assert anonymous_token is not None
    with pytest.raises(RpcError) as info:
        await alice.tasks.list_tasks(page_size=1, page_token=anonymous_token)
    assert (info.value.code, info.value.violations) == foreign[0]


async def test_the_first_owner_keeps_an_upstream_task_row(ids: IdMap, store: Store) -> None:
    """An agent that gives one task to two owners: one row, the first owner's; the other's
    token still works for it, but its writes change nothing in the row."""
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    first = await alice.task_for_upstream("wx", "shared", "ctx-a")
    await alice.record_state(first.task_id, "working")
    await ids.flush()
    second = await bob.task_for_upstream("wx", "shared", "ctx-b")
    assert second.task_id != first.task_id
    await bob.record_state(second.task_id, "completed")
    assert await bob.task(second.task_id) is not None  # a token needs no row
    await ids.flush()
    async with store.session() as session:
        rows = (await session.exec(select(RouterTaskEntry))).all()
    assert [(r.task_id, r.owner, r.context_id, r.state) for r in rows] == [
        (first.task_id, ALICE, "ctx-a", "TASK_STATE_WORKING")
    ]
    assert await bob.tasks.count_tasks() == 0
    # queued together in one process: the first queued owner wins, the other is dropped
    carol = ids.scoped("carol")
    await carol.task_for_upstream("wx", "queued", None)
    await bob.task_for_upstream("wx", "queued", "ctx-b")
    assert ids.log.pending("wx", "queued", BOB) is None
    assert ids.log.pending("wx", "queued", "carol") is not None
    await ids.flush()
    assert await carol.tasks.count_tasks() == 1 and await bob.tasks.count_tasks() == 0


async def test_the_same_client_context_in_two_scopes_is_two_conversations(
    ids: IdMap, store: Store, db_url: str
) -> None:
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    await alice.ensure_context("ctx-1")
    await bob.ensure_context("ctx-1")
    assert await alice.context_for_upstream("wx", "uc-alice", "ctx-1") == "ctx-1"
    assert await bob.upstream_context("ctx-1", "wx") is None  # Alice's is not Bob's
    assert await bob.context_agents("ctx-1") == set()
    assert await bob.context_for_upstream("wx", "uc-bob", "ctx-1") == "ctx-1"
    assert await alice.upstream_context("ctx-1", "wx") == "uc-alice"
    assert await bob.upstream_context("ctx-1", "wx") == "uc-bob"
    assert await ids.upstream_context("ctx-1", "wx") is None  # nor the anonymous scope's
    # tasks in it: each scope's context has its own agents
    await alice.task_for_upstream("inv", "ut-inv", "ctx-1")
    assert await alice.context_agents("ctx-1") == {"wx", "inv"}
    assert await bob.context_agents("ctx-1") == {"wx"}
    assert await ids.context_agents("ctx-1") == set()
    per_scope = (
        await _count(store, RouterContextEntry, col(RouterContextEntry.owner) == ALICE),
        await _count(store, RouterContextEntry, col(RouterContextEntry.owner) == BOB),
    )
    assert per_scope == (2, 2)  # the context's own row and the agent's, each
    # the same upstream context met in two scopes: two router contexts
    assert await alice.context_by_upstream("wx", "uc-bob") is None
    assert await alice.context_for_upstream("wx", "uc-bob", None) != "ctx-1"
    await ids.flush()
    restarted = Store(db_url, SCHEMA)
    try:
        fresh = IdMap(restarted)
        assert await fresh.scoped(ALICE).upstream_context("ctx-1", "wx") == "uc-alice"
        assert await fresh.scoped(BOB).upstream_context("ctx-1", "wx") == "uc-bob"
        assert await fresh.scoped(ALICE).context_agents("ctx-1") == {"wx", "inv"}
        assert await fresh.scoped(BOB).context_agents("ctx-1") == {"wx"}
        assert await fresh.scoped(BOB).context_by_upstream("wx", "uc-alice") is None
    finally:
        await restarted.close()


async def test_a_context_token_is_a_new_context_elsewhere(ids: IdMap) -> None:
    """Another scope's context token names no conversation there: it is a context the client
    chose, as a forged token would be."""
    alice, bob = ids.scoped(ALICE), ids.scoped(BOB)
    context = await alice.context_for_upstream("wx", "uc-1", None)
    await bob.ensure_context(context)
    assert await bob.context_agents(context) == set()
    assert await bob.upstream_context(context, "wx") is None
    assert await bob.context_for_upstream("wx", "uc-bob", context) == context
    assert await bob.upstream_context(context, "wx") == "uc-bob"
    assert await alice.upstream_context(context, "wx") == "uc-1"  # untouched
