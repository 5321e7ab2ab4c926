"""Task and context ID mapping on SQLite and PostgreSQL, and rewriting of real wire payloads.

The payloads are the captures of the official SDK servers in ``tests/fixtures/wire``: after
rewriting, no upstream ID is left anywhere, and everything else is as it came.
"""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, func, select

from registry.store import Store
from router.ids.idmap import IdMap
from router.ids.refs import TaskRef
from router.ids.rewrite import Rewriter
from router.protocol.errors import INVALID_AGENT_RESPONSE, INVALID_PARAMS, TASK_NOT_FOUND, RpcError
from router.protocol.versions import Op, Version, canonical_state
from router.tables import SCHEMA, RouterContextEntry, RouterTaskEntry

WIRE = Path(__file__).parents[2] / "fixtures" / "wire"


async def _count(store: Store, table: type[Any], *where: Any) -> int:
    """Rows of a table, written ones only (flush the map first)."""
    async with store.session() as session:
        return (await session.exec(select(func.count()).select_from(table).where(*where))).one()


async def _row(store: Store, task_id: str) -> RouterTaskEntry:
    async with store.session() as session:
        row = await session.get(RouterTaskEntry, task_id)
    assert row is not None
    return row


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _is_uuid(value: str) -> bool:
    return str(uuid.UUID(value)) == value


def _is_token(value: str, prefix: str = "t1.") -> bool:
    return value.startswith(prefix) and len(value) <= 512


# --- the map ---------------------------------------------------------------------------------


async def test_tasks_are_created_once_and_found_again(ids: IdMap, store: Store) -> None:
    ref = await ids.task_for_upstream("wx", "up-1", "ctx-1")
    assert _is_token(ref.task_id)
    assert (ref.agent_id, ref.upstream_task_id, ref.context_id, ref.state) == (
        "wx",
        "up-1",
        "ctx-1",
        None,
    )
    assert await ids.task_for_upstream("wx", "up-1", "ctx-other") == ref  # context kept
    assert await ids.task(ref.task_id) == ref
    assert await ids.task_by_upstream("wx", "up-1") == ref
    # the same upstream id at another agent is another task
    other = await ids.task_for_upstream("inv", "up-1", None)
    assert other.task_id != ref.task_id and other.context_id is None
    # a task first seen without a context gets one later, once
    attached = await ids.task_for_upstream("inv", "up-1", "ctx-2")
    assert attached.task_id == other.task_id and attached.context_id == "ctx-2"
    assert (await ids.task_for_upstream("inv", "up-1", "ctx-3")).context_id == "ctx-2"
    await ids.flush()
    assert await _count(store, RouterTaskEntry) == 2
    stored = ~col(RouterTaskEntry.task_id).startswith("t1.")
    assert await _count(store, RouterTaskEntry, stored) == 0  # tokens need no mapping row
    # the same task gets the same ID in another process, with no shared cache
    assert (await IdMap(store).task_for_upstream("wx", "up-1", "ctx-1")).task_id == ref.task_id
    for unknown in ("nope", "", "x" * 10_000, "t1.", "t1.AAAA", ref.task_id[:-2]):
        assert await ids.task(unknown) is None
    assert await ids.task_by_upstream("wx", "up-2") is None
    with pytest.raises(ValueError):
        await ids.task_for_upstream("wx", "", None)
    with pytest.raises(ValueError):
        await ids.task_for_upstream("wx", "x" * 513, None)


async def test_a_restarted_router_still_resolves_old_ids(store: Store, db_url: str) -> None:
    before = IdMap(store)
    context_id = await before.context_for_upstream("wx", "uc-1", None)
    ref = await before.task_for_upstream("wx", "ut-1", context_id)
    await before.record_state(ref.task_id, "working")
    await before.ensure_context("client-ctx")
    await before.close()  # writes the queued task rows
    await store.close()

    restarted = Store(db_url, SCHEMA)  # a new process: new engine, empty caches
    try:
        after = IdMap(restarted)
        found = await after.task(ref.task_id)
        assert found is not None
        assert (found.agent_id, found.upstream_task_id, found.context_id) == (
            "wx",
            "ut-1",
            context_id,
        )
        listed, _ = await after.tasks.list_tasks()
        assert [(r.task_id, r.state) for r in listed] == [(ref.task_id, "TASK_STATE_WORKING")]
        assert await after.task_for_upstream("wx", "ut-1", None) == found
        assert await after.upstream_context(context_id, "wx") == "uc-1"
        assert await after.context_by_upstream("wx", "uc-1") == context_id
        assert await after.context_for_upstream("wx", "uc-1", "another") == context_id
        assert await after.context_agents(context_id) == {"wx"}
        await after.ensure_context("client-ctx")  # known: nothing new
        assert await _count(restarted, RouterContextEntry) == 1  # only the client's context
    finally:
        await restarted.close()


async def test_concurrent_creation_yields_one_id(store: Store, db_url: str) -> None:
    replica = Store(db_url, SCHEMA)  # a second process on the same database
    try:
        maps = [IdMap(store), IdMap(replica)]
        refs = await asyncio.gather(
            *(maps[n % 2].task_for_upstream("wx", "race", "ctx") for n in range(16))
        )
        assert len({ref.task_id for ref in refs}) == 1
        await asyncio.gather(maps[0].flush(), maps[1].flush())
        assert await _count(store, RouterTaskEntry) == 1

        contexts = await asyncio.gather(
            *(maps[n % 2].context_for_upstream("wx", "uc-race", f"p{n}") for n in range(16))
        )
        assert len(set(contexts)) == 1
        assert await _count(store, RouterContextEntry) == 1

        # two upstream contexts of one agent proposed into the same router context at once:
        # one gets it, the other the token of its own context
        a, b = await asyncio.gather(
            maps[0].context_for_upstream("inv", "uc-a", "shared"),
            maps[1].context_for_upstream("inv", "uc-b", "shared"),
        )
        assert a != b and "shared" in {a, b}
        assert _is_token(({a, b} - {"shared"}).pop(), "c1.")
        assert await maps[0].upstream_context(a, "inv") == "uc-a"
        assert await maps[1].upstream_context(b, "inv") == "uc-b"

        await asyncio.gather(*(maps[n % 2].ensure_context("client") for n in range(8)))
        assert await _count(
            store, RouterContextEntry, col(RouterContextEntry.context_id) == "client"
        )
    finally:
        for idmap in maps:
            await idmap.close()
        await replica.close()


async def test_two_agents_in_one_router_context(ids: IdMap) -> None:
    context_id = await ids.context_for_upstream("wx", "wx-ctx", None)
    assert _is_token(context_id, "c1.")
    assert await ids.context_for_upstream("inv", "inv-ctx", context_id) == context_id
    assert await ids.upstream_context(context_id, "wx") == "wx-ctx"
    assert await ids.upstream_context(context_id, "inv") == "inv-ctx"
    assert await ids.upstream_context(context_id, "third") is None
    assert await ids.context_agents(context_id) == {"wx", "inv"}
    # the same upstream context id at two agents: two separate mappings
    assert await ids.context_for_upstream("third", "wx-ctx", context_id) == context_id
    assert await ids.upstream_context(context_id, "third") == "wx-ctx"
    # an agent's second conversation cannot take a router context where it already has one
    second = await ids.context_for_upstream("wx", "wx-ctx-2", context_id)
    assert second != context_id
    assert await ids.context_agents(second) == {"wx"}
    assert await ids.context_agents("unknown") == set()


async def test_ensure_context(ids: IdMap, store: Store) -> None:
    await ids.ensure_context("mine")
    await ids.ensure_context("mine")
    assert await _count(store, RouterContextEntry) == 1
    assert await ids.context_agents("mine") == set()  # known, served by nobody yet
    assert await ids.upstream_context("mine", "wx") is None
    # the first agent to answer in it takes the client's id as its router context
    assert await ids.context_for_upstream("wx", "uc", "mine") == "mine"
    assert await ids.context_agents("mine") == {"wx"}
    for bad in ("", "x" * 513, 5):
        with pytest.raises(RpcError) as info:
            await ids.ensure_context(bad)  # type: ignore[arg-type]
        assert info.value.code == INVALID_PARAMS
        assert info.value.data == {"fields": ["message.contextId"]}
        assert info.value.violations == (
            ("message.contextId", "must be a non-empty string of at most 512 characters"),
        )


async def test_record_state_writes_only_on_change(ids: IdMap, store: Store) -> None:
    ref = await ids.task_for_upstream("wx", "ut", None)
    await ids.record_state(ref.task_id, "submitted")
    await ids.flush()
    first = await _row(store, ref.task_id)
    assert first.state == "TASK_STATE_SUBMITTED"
    assert ref.updated_at is not None and _aware(first.updated_at) >= ref.updated_at
    await ids.record_state(ref.task_id, "TASK_STATE_SUBMITTED")  # same state, 1.0 spelling
    other = IdMap(store)
    await other.record_state(ref.task_id, "submitted")  # no cache: the SQL guard
    await other.close()
    await ids.flush()
    assert (await _row(store, ref.task_id)).updated_at == first.updated_at
    await ids.record_state(ref.task_id, "input-required")
    await ids.flush()
    second = await _row(store, ref.task_id)
    assert second.state == "TASK_STATE_INPUT_REQUIRED"
    assert _aware(second.updated_at) > _aware(first.updated_at)
    await ids.record_state(ref.task_id, "no-such-state")  # ignored
    await ids.record_state("unknown-task", "working")  # ignored
    current = await ids.task(ref.task_id)
    assert current is not None and current.state == "TASK_STATE_INPUT_REQUIRED"
    assert (await _row(store, ref.task_id)).state == "TASK_STATE_INPUT_REQUIRED"


def test_canonical_state() -> None:
    assert canonical_state("working") == "TASK_STATE_WORKING"
    assert canonical_state("auth-required") == "TASK_STATE_AUTH_REQUIRED"
    assert canonical_state("TASK_STATE_CANCELED") == "TASK_STATE_CANCELED"
    assert canonical_state("unknown") == "TASK_STATE_UNSPECIFIED"
    assert canonical_state("TASK_STATE_RUNNING") is None
    assert canonical_state(None) is None


async def _page_all(ids: IdMap, size: int, **filters: Any) -> list[TaskRef]:
    out: list[TaskRef] = []
    token = None
    for _ in range(50):
        page, token = await ids.tasks.list_tasks(page_size=size, page_token=token, **filters)
        assert len(page) <= size
        out += page
        if token is None:
            return out
        assert page and isinstance(token, str)
    raise AssertionError("pagination does not end")


def _newest_first(refs: list[TaskRef]) -> list[str]:
    ordered = sorted(refs, key=lambda r: (r.updated_at, r.task_id), reverse=True)
    return [r.task_id for r in ordered]


async def test_list_tasks_filters_and_pages(ids: IdMap) -> None:
    made: list[TaskRef] = []
    for n in range(7):
        ref = await ids.task_for_upstream("wx" if n % 2 else "inv", f"ut-{n}", f"ctx-{n % 3}")
        await ids.record_state(ref.task_id, "completed" if n < 4 else "working")
        made.append(ref)
    await ids.record_state(made[0].task_id, "failed")  # now the most recently updated
    current = [await ids.task(ref.task_id) for ref in made]
    refs = [ref for ref in current if ref is not None]

    everything, token = await ids.tasks.list_tasks()
    assert token is None and [r.task_id for r in everything] == _newest_first(refs)
    assert everything[0].task_id == made[0].task_id
    for size in (1, 2, 3, 7):
        assert [r.task_id for r in await _page_all(ids, size)] == _newest_first(refs)
    assert await ids.tasks.count_tasks() == 7

    in_ctx = [r for r in refs if r.context_id == "ctx-1"]
    paged = await _page_all(ids, 1, context_id="ctx-1")
    assert [r.task_id for r in paged] == _newest_first(in_ctx)
    assert await ids.tasks.count_tasks(context_id="ctx-1") == len(in_ctx)

    working = [r for r in refs if r.state == "TASK_STATE_WORKING"]
    for spelling in ("working", "TASK_STATE_WORKING"):
        paged = await _page_all(ids, 2, state=spelling)
        assert [r.task_id for r in paged] == _newest_first(working)
    both = [r for r in working if r.context_id == "ctx-1"]
    paged = await _page_all(ids, 1, context_id="ctx-1", state="working")
    assert [r.task_id for r in paged] == _newest_first(both)
    assert await ids.tasks.count_tasks(state="TASK_STATE_FAILED") == 1
    wx = [r for r in refs if r.agent_id == "wx"]
    assert [r.task_id for r in await _page_all(ids, 2, agent_id="wx")] == _newest_first(wx)
    assert await ids.tasks.count_tasks(agent_id="wx", state="working") == len(
        [r for r in wx if r.state == "TASK_STATE_WORKING"]
    )
    # no filter
    assert (await ids.tasks.list_tasks(state="TASK_STATE_UNSPECIFIED"))[0] == everything
    assert await ids.tasks.list_tasks(context_id="nowhere") == ([], None)

    # a token is opaque, validated, and bound to its filters
    _, token = await ids.tasks.list_tasks(page_size=2)
    assert token is not None
    for kwargs in (
        {"page_token": token, "context_id": "ctx-1"},
        {"page_token": token, "state": "working"},
        {"page_token": token, "agent_id": "wx"},
        {"page_token": "W1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tbW1tb"},
        {"context_id": 5},
        {"state": 5},
        {"page_token": "not a token"},
        {"page_token": "e30"},  # base64 of {}
        {"page_token": "x" * 5000},
        {"page_size": 0},
        {"page_size": 101},
        {"page_size": True},
        {"state": "TASK_STATE_RUNNING"},
    ):
        with pytest.raises(RpcError) as info:
            await ids.tasks.list_tasks(**kwargs)
        assert info.value.code == INVALID_PARAMS, kwargs


async def test_list_tasks_pages_through_equal_timestamps(ids: IdMap, store: Store) -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    async with store.session() as session, session.begin():
        for n in range(5):
            session.add(
                RouterTaskEntry(
                    task_id=f"t{n}",
                    agent_id="wx",
                    upstream_task_id=f"u{n}",
                    created_at=moment,
                    updated_at=moment,
                )
            )
    paged = await _page_all(ids, 2)
    assert [r.task_id for r in paged] == ["t4", "t3", "t2", "t1", "t0"]
    assert paged[0].updated_at == moment


async def _add_tasks(store: Store, *rows: tuple[str, str | None, datetime]) -> None:
    """Task rows (task id, state, updated_at) made directly, at times in the past."""
    async with store.session() as session, session.begin():
        for task_id, state, when in rows:
            session.add(
                RouterTaskEntry(
                    task_id=task_id,
                    agent_id="wx",
                    upstream_task_id=f"up-{task_id}",
                    context_id="ctx",
                    state=state,
                    created_at=when,
                    updated_at=when,
                )
            )


async def test_list_tasks_skips_no_task_updated_while_paging(ids: IdMap, store: Store) -> None:
    base = datetime(2020, 5, 1, tzinfo=UTC)
    await _add_tasks(
        store, *[(f"t{n}", "TASK_STATE_WORKING", base.replace(day=1 + n)) for n in range(6)]
    )
    seen: list[str] = []
    pages: list[list[TaskRef]] = []
    page, token = await ids.tasks.list_tasks(page_size=2)
    assert [r.task_id for r in page] == ["t5", "t4"]
    # while the client pages: a task not listed yet is updated (a plain keyset on updated_at
    # skips it: it moves above the cursor), a listed one is updated, a new task is made
    await ids.record_state("t0", "TASK_STATE_COMPLETED")
    await ids.record_state("t5", "TASK_STATE_COMPLETED")
    made = await ids.task_for_upstream("wx", "brand-new", "ctx")
    while True:
        pages.append(page)
        seen += [r.task_id for r in page]
        if token is None:
            break
        page, token = await ids.tasks.list_tasks(page_size=2, page_token=token)
        assert page and len(page) <= 2
    # the tasks last updated before the first page, newest first; then those updated since,
    # oldest first from page to page (each page newest first); t5 is listed again
    assert [[r.task_id for r in listed] for listed in pages] == [
        ["t5", "t4"],
        ["t3", "t2"],
        ["t0", "t1"],
        [made.task_id, "t5"],
    ]
    assert pages[2][0].state == pages[3][1].state == "TASK_STATE_COMPLETED"
    for listed in pages:
        assert listed == sorted(listed, key=lambda r: (r.updated_at, r.task_id), reverse=True)
    # and the same walk with nothing changing lists each task once, newest first
    current = [r for r in [await ids.task(t) for t in set(seen)] if r is not None]
    for size in (1, 2, 3, 7, 8):
        assert [r.task_id for r in await _page_all(ids, size)] == _newest_first(current)


async def test_list_tasks_updated_after(ids: IdMap, store: Store) -> None:
    cut = datetime(2021, 1, 1, tzinfo=UTC)
    await _add_tasks(
        store,
        ("old-done", "TASK_STATE_COMPLETED", datetime(2020, 6, 1, tzinfo=UTC)),
        ("old-canceled", "TASK_STATE_CANCELED", datetime(2020, 6, 2, tzinfo=UTC)),
        ("old-working", "TASK_STATE_WORKING", datetime(2020, 6, 3, tzinfo=UTC)),
        ("old-unknown", None, datetime(2020, 6, 4, tzinfo=UTC)),
        ("at-cut", "TASK_STATE_FAILED", cut),
        ("new-done", "TASK_STATE_COMPLETED", datetime(2022, 1, 1, tzinfo=UTC)),
    )
    # the same instant in another zone; terminal tasks last updated before it are left out,
    # live ones stay (their agent may have moved them on since)
    after = datetime.fromisoformat("2021-01-01T01:00:00+01:00")
    expected = ["new-done", "at-cut", "old-unknown", "old-working"]
    assert [r.task_id for r in await _page_all(ids, 1, updated_after=after)] == expected
    assert [r.task_id for r in (await ids.tasks.list_tasks(updated_after=after))[0]] == expected
    assert await ids.tasks.count_tasks(updated_after=after) == 4
    assert await ids.tasks.count_tasks(updated_after=after, state="completed") == 1
    assert await ids.tasks.count_tasks() == 6
    _, token = await ids.tasks.list_tasks(page_size=1, updated_after=after)
    for kwargs in (
        {"page_token": token},  # made for another filter
        {"page_token": token, "updated_after": cut.replace(year=2020)},
        {"updated_after": datetime(2021, 1, 1)},  # no time zone
        {"updated_after": "2021-01-01T00:00:00Z"},
    ):
        with pytest.raises(RpcError) as info:
            await ids.tasks.list_tasks(page_size=1, **kwargs)
        assert info.value.code == INVALID_PARAMS, kwargs
    page, _ = await ids.tasks.list_tasks(page_size=1, page_token=token, updated_after=cut)
    assert [r.task_id for r in page] == ["at-cut"]


# --- request rewriting -----------------------------------------------------------------------


async def _two_agents(ids: IdMap) -> tuple[str, str, str]:
    """A router context served by wx and inv, and one task of each; (context, wx task, inv
    task)."""
    context_id = await ids.context_for_upstream("wx", "wx-ctx", None)
    await ids.context_for_upstream("inv", "inv-ctx", context_id)
    wx_task = await ids.task_for_upstream("wx", "wx-task-01", context_id)
    inv_task = await ids.task_for_upstream("inv", "inv-task-01", context_id)
    return context_id, wx_task.task_id, inv_task.task_id


async def test_request_ids_v03(ids: IdMap) -> None:
    context_id, wx_task, inv_task = await _two_agents(ids)
    params = {
        "message": {
            "kind": "message",
            "role": "user",
            "messageId": "m-1",
            "contextId": context_id,
            "taskId": wx_task,
            "referenceTaskIds": [wx_task, inv_task],
            "parts": [{"kind": "text", "text": "more"}],
            "metadata": {"contextId": "left alone"},
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "blocking": True},
    }
    before = copy.deepcopy(params)
    out = await Rewriter(ids, "0.3", "wx", context_id).request_to_upstream(Op.SEND, params)
    assert params == before  # the input is never changed
    expected = copy.deepcopy(params)
    expected["message"].update(
        contextId="wx-ctx", taskId="wx-task-01", referenceTaskIds=["wx-task-01"]
    )  # the other agent's task means nothing to wx: dropped, never leaked
    assert out == expected

    # inv in the same router context gets its own context; wx's task is not its own
    rewriter = Rewriter(ids, "0.3", "inv", context_id)
    with pytest.raises(RpcError) as info:
        await rewriter.request_to_upstream(Op.STREAM, params)
    assert info.value.code == TASK_NOT_FOUND and info.value.data == {"taskId": wx_task}
    del params["message"]["taskId"]
    params["message"]["referenceTaskIds"] = [wx_task]
    out = await rewriter.request_to_upstream(Op.STREAM, params)
    assert out["message"]["contextId"] == "inv-ctx"
    assert "taskId" not in out["message"] and "referenceTaskIds" not in out["message"]

    for op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
        got = await Rewriter(ids, "0.3", "wx", None).request_to_upstream(
            op, {"id": wx_task, "historyLength": 3, "metadata": {}}
        )
        assert got == {"id": "wx-task-01", "historyLength": 3, "metadata": {}}
        for bad in ("no-such-task", inv_task, 7):
            with pytest.raises(RpcError) as info:
                await Rewriter(ids, "0.3", "wx", None).request_to_upstream(op, {"id": bad})
            assert info.value.code == TASK_NOT_FOUND
            assert info.value.data == ({"taskId": bad} if isinstance(bad, str) else {})

    # a task id names its context when the request has none
    rewriter = Rewriter(ids, "0.3", "wx", None)
    await rewriter.request_to_upstream(Op.GET, {"id": wx_task})
    assert rewriter.router_context == context_id


async def test_request_ids_v1(ids: IdMap) -> None:
    context_id, wx_task, _ = await _two_agents(ids)
    params = {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m-2",
            "contextId": context_id,
            "taskId": wx_task,
            "parts": [{"text": "hi"}],
            "extensions": ["urn:x"],
        },
        "metadata": {"k": "v"},
    }
    out = await Rewriter(ids, "1.0", "wx", context_id).request_to_upstream(Op.SEND, params)
    assert out["message"]["contextId"] == "wx-ctx" and out["message"]["taskId"] == "wx-task-01"
    assert out["message"]["messageId"] == "m-2" and out["metadata"] == {"k": "v"}
    assert out["message"]["parts"] == params["message"]["parts"]

    # an agent new to the router context: the contextId is removed, the agent makes its own
    rewriter = Rewriter(ids, "1.0", "third", context_id)
    fresh = {"message": {"role": "ROLE_USER", "messageId": "m-3", "contextId": context_id}}
    out = await rewriter.request_to_upstream(Op.STREAM, fresh)
    assert out == {"message": {"role": "ROLE_USER", "messageId": "m-3"}}
    answer = {"task": {"id": "t3", "contextId": "third-ctx", "status": {"state": "X"}}}
    result = await rewriter.result_from_upstream(Op.STREAM, answer)
    assert result["task"]["contextId"] == context_id
    assert await ids.upstream_context(context_id, "third") == "third-ctx"
    assert await ids.context_agents(context_id) == {"wx", "inv", "third"}

    # a client's own, unseen contextId becomes a router context
    rewriter = Rewriter(ids, "1.0", "wx", None)
    mine = {"message": {"role": "ROLE_USER", "messageId": "m-4", "contextId": "client-made"}}
    assert "contextId" not in (await rewriter.request_to_upstream(Op.SEND, mine))["message"]
    assert rewriter.router_context == "client-made"
    answer = {"message": {"messageId": "r", "contextId": "wx-ctx-9", "role": "ROLE_AGENT"}}
    assert (await rewriter.result_from_upstream(Op.SEND, answer))["message"] == {
        "messageId": "r",
        "contextId": "client-made",
        "role": "ROLE_AGENT",
    }
    again = await Rewriter(ids, "1.0", "wx", "client-made").request_to_upstream(Op.SEND, mine)
    assert again["message"]["contextId"] == "wx-ctx-9"

    for bad in (
        {"message": {"taskId": "nope"}},
        {"message": {"referenceTaskIds": ["nope"]}},
    ):
        with pytest.raises(RpcError) as info:
            await Rewriter(ids, "1.0", "wx", None).request_to_upstream(Op.SEND, bad)
        assert info.value.code == TASK_NOT_FOUND and info.value.data == {"taskId": "nope"}
    for bad, field in (
        ({"message": {"taskId": 5}}, "message.taskId"),
        ({"message": {"contextId": ["x"]}}, "message.contextId"),
        ({"message": {"referenceTaskIds": "x"}}, "message.referenceTaskIds"),
        ({"message": {"contextId": "x" * 600}}, "message.contextId"),
    ):
        with pytest.raises(RpcError) as info:
            await Rewriter(ids, "1.0", "wx", None).request_to_upstream(Op.SEND, bad)
        assert info.value.code == INVALID_PARAMS
        assert info.value.data == {"fields": [field]}
        assert [name for name, _ in info.value.violations] == [field]


# --- results and events from the real captures -----------------------------------------------


def _capture(name: str) -> list[str]:
    """The JSON texts of a capture: an HTTP body, each SSE ``data:`` line, or the bodies of
    the JSONL pushes to one path (``file.jsonl#/path``); lines cut short are skipped."""
    name, _, path = name.partition("#")
    raw = (WIRE / name).read_bytes().decode()
    if name.endswith(".jsonl"):
        pushes = [json.loads(line) for line in raw.splitlines() if line]
        texts = [json.dumps(push["body"]) for push in pushes if push["path"] == path]
    elif "data: " in raw:
        texts = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    else:
        texts = [raw.split("\r\n\r\n", 1)[-1].strip()]
    out = []
    for text in texts:
        try:
            json.loads(text)
        except ValueError:
            continue
        out.append(text)
    return out


def _upstream_ids(value: Any, found: set[str]) -> set[str]:
    """Every task and context id in a payload (never a messageId or the JSON-RPC id)."""
    if isinstance(value, list):
        for item in value:
            _upstream_ids(item, found)
    elif isinstance(value, dict):
        for key, item in value.items():
            is_task_id = key == "id" and "status" in value
            if isinstance(item, str) and (key in ("taskId", "contextId") or is_task_id):
                found.add(item)
            elif key == "referenceTaskIds":
                found.update(item)
            else:
                _upstream_ids(item, found)
    return found


# (the resubscribe captures are left out: every line of them is cut short)
CAPTURES: list[tuple[str, Version, bool]] = [
    ("v03_send.out", "0.3", False),
    ("v03_nonblocking.out", "0.3", False),
    ("v03_stream.out", "0.3", True),
    ("v1compat_v03_send.out", "0.3", False),
    ("v1compat_v03_stream.out", "0.3", True),
    ("v1_send.out", "1.0", False),
    ("v1_nonblocking.out", "1.0", False),
    ("v1_stream.out", "1.0", True),
    ("push_notifications.jsonl#/v03", "0.3", True),
    ("push_notifications.jsonl#/v1", "1.0", True),
]


@pytest.mark.parametrize(("name", "version", "stream"), CAPTURES)
async def test_captured_payloads_carry_only_router_ids(
    ids: IdMap, name: str, version: Version, stream: bool
) -> None:
    texts = _capture(name)
    assert texts, name
    if ".jsonl" in name:
        documents = [json.loads(t) for t in texts]
    else:
        documents = [json.loads(t)["result"] for t in texts]
    upstream = set()
    for document in documents:
        _upstream_ids(document, upstream)
    assert upstream, name

    rewriter = Rewriter(ids, version, "echo", None)
    outputs = []
    for document in documents:
        before = copy.deepcopy(document)
        if stream:
            out = await rewriter.event_from_upstream(document)
        else:
            out = await rewriter.result_from_upstream(Op.SEND, document)
        assert document == before  # never mutated
        outputs.append(out)

    mapping: dict[str, str] = {}  # upstream -> router
    for up in upstream:
        ref = await ids.task_by_upstream("echo", up)
        router = ref.task_id if ref else await ids.context_by_upstream("echo", up)
        assert router is not None and router != up
        mapping[up] = router
    for out, text in zip(outputs, texts, strict=True):
        serialized = json.dumps(out)
        for up in upstream:
            assert up not in serialized, (name, up)
        # everything but the ids is as it came, key order included
        replaced = text
        for up, router in mapping.items():
            replaced = replaced.replace(up, router)
        expected = json.loads(replaced)
        if ".jsonl" not in name:
            expected = expected["result"]
        assert json.dumps(expected) == serialized
    # tasks live in the router context of their upstream context
    for up, router in mapping.items():
        ref = await ids.task(router)
        if ref is not None:
            assert ref.agent_id == "echo" and ref.upstream_task_id == up
            assert ref.context_id == rewriter.router_context
    assert await ids.context_agents(rewriter.router_context or "") == {"echo"}


async def test_whole_responses_and_bare_tasks(ids: IdMap) -> None:
    text = _capture("v03_stream.out")[1]  # status-update with a status message
    envelope = json.loads(text)
    out = await Rewriter(ids, "0.3", "echo", None).event_from_upstream(envelope)
    assert out["id"] == 2 and out["jsonrpc"] == "2.0"  # the JSON-RPC id is not a task id
    result = out["result"]
    task = await ids.task(result["taskId"])
    assert task is not None and task.upstream_task_id == envelope["result"]["taskId"]
    assert result["status"]["message"]["taskId"] == task.task_id
    assert result["status"]["message"]["contextId"] == result["contextId"] == task.context_id
    assert result["status"]["message"]["messageId"] == "cc98e9a5-a84a-43bc-bbfe-c7e7b3f2e5ce"

    # 1.0 GetTask/CancelTask answer a bare Task; ListTasks a list of them
    bare = json.loads(_capture("v1_send.out")[0])["result"]["task"]
    rewriter = Rewriter(ids, "1.0", "echo", None)
    got = await rewriter.result_from_upstream(Op.GET, bare)
    listed = await rewriter.result_from_upstream(
        Op.LIST, {"tasks": [bare], "nextPageToken": "", "pageSize": 50}
    )
    assert listed == {"tasks": [got], "nextPageToken": "", "pageSize": 50}
    assert got["id"] != bare["id"] and got["contextId"] != bare["contextId"]
    assert {m["taskId"] for m in got["history"]} == {got["id"]}
    assert got["artifacts"] == bare["artifacts"]

    # unknown shapes and kinds pass through
    for odd in (None, 3, "text", [1], {"kind": "future", "taskId": "x"}, {"nothing": 1}):
        assert await Rewriter(ids, "0.3", "echo", None).event_from_upstream(odd) == odd


async def test_answer_references_are_looked_up_never_created(ids: IdMap, store: Store) -> None:
    """An agent's referenceTaskIds name tasks the router may never have seen: known ones get
    their router IDs, unknown ones are dropped (no phantom task rows, no leaked IDs)."""
    context_id, wx_task, inv_task = await _two_agents(ids)
    await ids.flush()
    rows = await _count(store, RouterTaskEntry)
    message = {
        "kind": "message",
        "messageId": "m",
        "role": "agent",
        "referenceTaskIds": ["wx-task-01", "UPT-never-seen", "inv-task-01", 7],
        "parts": [],
    }
    out = await Rewriter(ids, "0.3", "wx", None).result_from_upstream(Op.SEND, message)
    assert out["referenceTaskIds"] == [wx_task]  # inv's upstream ID means nothing for wx
    assert out["messageId"] == "m" and out["parts"] == []
    only_unknown = {**message, "referenceTaskIds": ["UPT-never-seen", "x" * 600]}
    out = await Rewriter(ids, "0.3", "wx", None).result_from_upstream(Op.SEND, only_unknown)
    assert "referenceTaskIds" not in out
    empty = {**message, "referenceTaskIds": []}
    assert (await Rewriter(ids, "0.3", "wx", None).result_from_upstream(Op.SEND, empty)) == empty

    # in every place a message sits: 1.0 results, status messages, history, stream events
    rewriter = Rewriter(ids, "1.0", "inv", context_id)
    refs = ["UPT-1", "inv-task-01"]
    task = {
        "id": "inv-task-02",
        "contextId": "inv-ctx",
        "status": {
            "state": "TASK_STATE_COMPLETED",
            "message": {"messageId": "s", "role": "ROLE_AGENT", "referenceTaskIds": refs},
        },
        "history": [{"messageId": "h", "role": "ROLE_USER", "referenceTaskIds": ["UPT-2"]}],
    }
    got = await rewriter.result_from_upstream(Op.GET, task)
    new_task = await ids.task_by_upstream("inv", "inv-task-02")  # the answered task is made
    assert new_task is not None and got["id"] == new_task.task_id
    assert got["status"]["message"]["referenceTaskIds"] == [inv_task]
    assert "referenceTaskIds" not in got["history"][0]
    event = {"message": {"messageId": "e", "role": "ROLE_AGENT", "referenceTaskIds": refs}}
    got = await rewriter.event_from_upstream({"jsonrpc": "2.0", "id": 1, "result": event})
    assert got["result"]["message"]["referenceTaskIds"] == [inv_task]
    # the task the answer itself names counts as known
    reply = {
        "kind": "message",
        "messageId": "r",
        "taskId": "wx-new",
        "referenceTaskIds": ["wx-new"],
        "parts": [],
    }
    got = await Rewriter(ids, "0.3", "wx", context_id).result_from_upstream(Op.SEND, reply)
    assert got["referenceTaskIds"] == [got["taskId"]] and got["taskId"] != "wx-new"

    await ids.flush()
    assert await _count(store, RouterTaskEntry) == rows + 2  # inv-task-02 and wx-new only
    for phantom in ("UPT-never-seen", "UPT-1", "UPT-2"):
        assert await ids.task_by_upstream("wx", phantom) is None
        assert await ids.task_by_upstream("inv", phantom) is None


async def test_invalid_upstream_ids_are_an_invalid_agent_response(ids: IdMap) -> None:
    for bad in (
        {"kind": "task", "id": 12, "contextId": "c", "status": {}},
        {"kind": "task", "id": "t", "contextId": "c" * 600, "status": {}},
        {"statusUpdate": {"taskId": ["t"], "contextId": "c", "status": {}}},
    ):
        with pytest.raises(RpcError) as info:
            await Rewriter(ids, "1.0", "echo", None).result_from_upstream(Op.SEND, bad)
        assert info.value.code == INVALID_AGENT_RESPONSE


async def test_error_data_ids(ids: IdMap) -> None:
    context_id, wx_task, _ = await _two_agents(ids)
    rewriter = Rewriter(ids, "1.0", "wx", context_id)
    await rewriter.request_to_upstream(Op.GET, {"id": wx_task})
    error = {
        "code": -32001,
        "message": "Task wx-task-01 not found",
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND",
                "metadata": {"taskId": "wx-task-01", "contextId": "wx-ctx", "note": "wx-task-01!"},
            },
            {"taskId": "someone-elses", "contextId": "unknown-ctx", "id": "cfg-1"},
        ],
    }
    before = copy.deepcopy(error)
    out = await rewriter.error_from_upstream(error)
    assert error == before
    assert out == {
        "code": -32001,
        "message": f"Task {wx_task} not found",
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND",
                "metadata": {"taskId": wx_task, "contextId": context_id, "note": f"{wx_task}!"},
            },
            {},  # unknown task/context ids are removed, not leaked
        ],
    }
    # a 0.3 error with plain data, known from the database rather than this exchange
    out = await Rewriter(ids, "0.3", "wx", None).error_from_upstream(
        {"code": -32002, "message": "nope", "data": {"taskId": "wx-task-01", "id": "wx-task-01"}}
    )
    assert out["data"] == {"taskId": wx_task, "id": wx_task}
    captured = json.loads(_capture("v1_send_noversion.out")[0])
    assert await rewriter.event_from_upstream(captured) == captured
    assert await rewriter.error_from_upstream(captured["error"]) == captured["error"]


async def test_error_data_drops_unknown_ids_under_any_id_key(ids: IdMap) -> None:
    context_id, wx_task, _ = await _two_agents(ids)
    rewriter = Rewriter(ids, "0.3", "wx", context_id)
    error = {
        "code": -32603,
        "message": "UPT-1 failed after wx-task-01 (see UPT-2)",
        "data": {
            "nested": {"task": {"id": "UPT-1", "state": "failed"}, "other": {"id": "wx-task-01"}},
            "ids": ["UPT-2", "wx-task-01", "wx-ctx", 3],
            "taskIds": "wx-task-01",
            "parentTaskId": "UPT-3",
            "reference_task_ids": ["UPT-4", "wx-task-01"],
            "contextIds": ["wx-ctx", "UPC-9"],
            "upstream_context_id": "UPC-9",
            "task_id": ["wx-task-01", "UPT-5"],
            "items": [{"id": "UPT-6", "messageId": "msg-UPT-6"}, {"contextId": "wx-ctx"}],
            "messageId": "msg-1",
            "detail": "UPT-1 and wx-task-01 and wx-ctx",
            "id": 12,
        },
    }
    out = await rewriter.error_from_upstream(error)
    assert out == {
        "code": -32603,
        # free text: known IDs replaced (the database knows wx-task-01), the rest left
        "message": f"UPT-1 failed after {wx_task} (see UPT-2)",
        "data": {
            "nested": {"task": {"state": "failed"}, "other": {"id": wx_task}},
            "ids": [wx_task, context_id, 3],
            "taskIds": wx_task,
            "reference_task_ids": [wx_task],
            "contextIds": [context_id],
            "task_id": [wx_task],
            "items": [{"messageId": "msg-UPT-6"}, {"contextId": context_id}],
            "messageId": "msg-1",
            "detail": f"UPT-1 and {wx_task} and wx-ctx",  # (too short to replace in texts)
            "id": 12,
        },
    }
    # 1.0 detail lists: the same at any depth
    details = [{"@type": "x", "metadata": {"taskId": "UPT-1", "ids": ["UPT-2"]}}]
    out = await rewriter.error_from_upstream({"code": -32001, "message": "m", "data": details})
    assert out["data"] == [{"@type": "x", "metadata": {"ids": []}}]


async def test_a_new_context_is_not_reopened_and_stays_in_its_scope(ids: IdMap) -> None:
    """The answer's new context token, sealed here, gives the task its upstream context
    without a decrypt (what opening it would give); another scope's map neither knows the
    token nor reads it from the shared memo."""
    context = await ids.context_for_upstream("a", "ctx-up", None)
    sealer = await ids.sealer()
    opened = sealer.open_context
    calls: list[str] = []
    sealer.open_context = lambda token: calls.append(token) or opened(token)  # type: ignore[method-assign]
    try:
        ref = await ids.task_for_upstream("a", "task-up", context)
        assert calls == []  # remembered from the seal
        assert ref.context_id == context
        other = ids.scoped("someone")
        assert await other.upstream_context(context, "a") is None
        assert await ids.upstream_context(context, "a") == "ctx-up"
    finally:
        del sealer.open_context  # type: ignore[attr-defined]
    fresh = await ids.task(ref.task_id)
    assert fresh is not None and sealer.open_task(ref.task_id) == ("a", "task-up", 1, "ctx-up")
