"""Self-describing router IDs: sealed tokens, replicas and restarts, the stored previous
scheme, the written-behind task list, and a hot path that reads no table."""

from __future__ import annotations

import base64
import json
import os
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from aiohttp.test_utils import TestServer
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from registry.api import REGISTRY
from registry.store import Store
from router.app import create_app
from router.compat.aliases import TaskAliases
from router.ids.idmap import IdMap
from router.ids.rewrite import Rewriter
from router.ids.tokens import (
    CONTEXT_PREFIX,
    CTX_NONE,
    CTX_ROUTER,
    CTX_UPSTREAM,
    TASK_PREFIX,
    Sealer,
)
from router.protocol.errors import TASK_NOT_FOUND, RpcError
from router.protocol.versions import Op
from router.tables import SCHEMA, RouterTaskEntry
from router.transport.routes import ROUTER
from seeds.demo_agents import DemoAgents
from tests.support.helpers import make_settings
from tests.support.old_tables import forget_revision, old_table, old_task, start_on
from tests.support.statements import statements

AGENTS = ("currency", "caption")


# --- the sealer ------------------------------------------------------------------------------


def test_tokens_round_trip_and_refuse_forgeries() -> None:
    sealer = Sealer(os.urandom(64))
    task = sealer.seal_task("currency", "up-1", CTX_UPSTREAM, "uc-1")
    assert task.startswith(TASK_PREFIX) and len(task) < 200
    assert sealer.seal_task("currency", "up-1", CTX_UPSTREAM, "uc-1") == task  # deterministic
    assert sealer.open_task(task) == ("currency", "up-1", CTX_UPSTREAM, "uc-1")
    odd = sealer.seal_task("a\x00b", "ü/\n\"'", CTX_ROUTER, "client's ctx")
    assert sealer.open_task(odd) == ("a\x00b", "ü/\n\"'", CTX_ROUTER, "client's ctx")
    assert sealer.open_task(sealer.seal_task("a", "b", CTX_NONE, None)) == ("a", "b", 0, None)
    context = sealer.seal_context("currency", "uc-1")
    assert context.startswith(CONTEXT_PREFIX)
    assert sealer.open_context(context) == ("currency", "uc-1")
    assert sealer.seal_context("caption", "uc-1") != context  # per agent

    body = task[len(TASK_PREFIX) :]
    raw = bytearray(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    raw[-1] ^= 1
    tampered = TASK_PREFIX + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
    for forged in (
        tampered,
        task[:-3],
        task + "A",
        Sealer(os.urandom(64)).seal_task("currency", "up-1", CTX_UPSTREAM, "uc-1"),  # other key
        CONTEXT_PREFIX + body,  # a task token is no context token
        "t1.",
        "t1.!!!",
        "t1." + "A" * 10_000,
        "not a token",
    ):
        assert sealer.open_task(forged) is None, forged
    assert sealer.open_context(TASK_PREFIX + context[len(CONTEXT_PREFIX) :]) is None
    with pytest.raises(ValueError):
        Sealer(b"short")


def _sealed_before_scopes(key: bytes, prefix: str, data: list[Any]) -> str:
    """A token as versions before owner scopes sealed it: the prefix alone as associated
    data."""
    plain = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    sealed = AESSIV(key).encrypt(plain, [prefix.encode()])
    return prefix + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()


def test_the_anonymous_scope_keeps_the_tokens_of_earlier_versions() -> None:
    key = os.urandom(64)
    task = _sealed_before_scopes(key, TASK_PREFIX, ["wx", "up-1", CTX_UPSTREAM, "uc-1"])
    context = _sealed_before_scopes(key, CONTEXT_PREFIX, ["wx", "uc-1"])
    for sealer in (Sealer(key), Sealer(key, '["acme","alice"]').scoped("")):
        assert sealer.scope == ""
        assert sealer.open_task(task) == ("wx", "up-1", CTX_UPSTREAM, "uc-1")
        assert sealer.open_context(context) == ("wx", "uc-1")
        assert sealer.seal_task("wx", "up-1", CTX_UPSTREAM, "uc-1") == task  # the same IDs
        assert sealer.seal_context("wx", "uc-1") == context
    # in any other scope, an ID made before opens no more than a forged one
    assert Sealer(key, '["acme","alice"]').open_task(task) is None
    assert Sealer(key, '["acme","alice"]').open_context(context) is None


def test_a_token_opens_only_in_its_own_scope() -> None:
    key = os.urandom(64)
    anonymous = Sealer(key)
    alice, bob = anonymous.scoped('["acme","alice"]'), anonymous.scoped('["acme","bob"]')
    assert anonymous.scoped("") is anonymous and alice.scoped(alice.scope) is alice
    tokens = {
        sealer.scope: (
            sealer.seal_task("wx", "up-1", CTX_ROUTER, "ctx-1"),
            sealer.seal_context("wx", "uc-1"),
        )
        for sealer in (anonymous, alice, bob)
    }
    assert len({t for pair in tokens.values() for t in pair}) == 6  # the same IDs, 3 scopes
    for sealer in (anonymous, alice, bob):
        for scope, (task, context) in tokens.items():
            mine = scope == sealer.scope
            assert (sealer.open_task(task) is not None) is mine, (sealer.scope, scope)
            assert (sealer.open_context(context) is not None) is mine, (sealer.scope, scope)
    # another process (the same key, the same scope) opens them too
    fresh = Sealer(key, alice.scope)
    assert fresh.open_task(tokens[alice.scope][0]) == ("wx", "up-1", CTX_ROUTER, "ctx-1")
    assert fresh.seal_context("wx", "uc-1") == tokens[alice.scope][1]


# --- through the router, with real agents ----------------------------------------------------


async def _switchboard(aiohttp_server: Any, database_url: str, demo: DemoAgents) -> TestServer:
    settings = make_settings(database_url, catalog_sync_interval=3600.0)
    server = await aiohttp_server(create_app(settings))
    registry = server.app[REGISTRY]
    for name in AGENTS:
        if name not in registry.catalog.snapshot.agents:
            await registry.register_url(demo.urls[name], name)
    return server


async def _rpc(
    http: httpx.AsyncClient, server: TestServer, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    url = str(server.make_url("/"))
    return (await http.post(url, json=body, headers={"A2A-Version": "1.0"})).json()


def _message(text: str, **ids: str) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}], **ids}


async def _send(http: httpx.AsyncClient, server: TestServer, text: str, **ids: str) -> Any:
    answer = await _rpc(http, server, "SendMessage", {"message": _message(text, **ids)})
    assert "result" in answer, answer
    return answer["result"]["task"]


async def test_the_hot_path_reads_and_writes_no_table(
    aiohttp_server: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, demo)
    ids = server.app[ROUTER].ids
    ids.log.delay = 3600.0  # the written-behind rows wait for the explicit flush below
    await _send(http, server, "convert 1 USD to EUR")  # warm-up: pools, caches, connections
    await ids.flush()
    with statements(ids.store) as seen:
        first = await _send(http, server, "I need some currency converted")
    assert seen == [], "a new task with no context"
    assert first["id"].startswith(TASK_PREFIX) and first["contextId"].startswith(CONTEXT_PREFIX)
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    with statements(ids.store) as seen:
        second = await _send(
            http, server, "convert 100 USD to EUR", taskId=first["id"], contextId=first["contextId"]
        )
        third = await _send(http, server, "convert 3 USD to GBP", contextId=first["contextId"])
    assert seen == [], "follow-ups in the same context"
    assert second["id"] == first["id"] and second["status"]["state"] == "TASK_STATE_COMPLETED"
    assert third["contextId"] == first["contextId"] and third["id"] != first["id"]
    with statements(ids.store) as seen:
        got = await _rpc(http, server, "GetTask", {"id": first["id"]})
    assert seen == [], "GetTask"
    assert got["result"]["id"] == first["id"]
    assert got["result"]["contextId"] == first["contextId"]
    # the rows are written later, in one batch: the counter does see statements
    with statements(ids.store) as seen:
        await ids.flush()
    assert seen
    listed = await _rpc(http, server, "ListTasks", {"contextId": first["contextId"]})
    states = {t["id"]: t["status"]["state"] for t in listed["result"]["tasks"]}
    assert states == {first["id"]: "TASK_STATE_COMPLETED", third["id"]: "TASK_STATE_COMPLETED"}


async def test_forged_and_tampered_ids_are_task_not_found(
    aiohttp_server: Any, sqlite_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    server = await _switchboard(aiohttp_server, sqlite_url, demo)
    task = await _send(http, server, "convert 1 USD to EUR")
    sealer = Sealer(os.urandom(64))  # another router's key
    upstream = (await server.app[ROUTER].ids.task(task["id"])).upstream_task_id
    forged = [
        task["id"][:-2] + ("AA" if task["id"][-2:] != "AA" else "BB"),
        sealer.seal_task("currency", upstream, CTX_NONE, None),
        "t1.",
        "t1.%%%",
        TASK_PREFIX + "A" * 500,
    ]
    for bad in forged:
        for method in ("GetTask", "CancelTask"):
            answer = await _rpc(http, server, method, {"id": bad})
            assert answer["error"]["code"] == TASK_NOT_FOUND, (method, bad, answer)
        answer = await _rpc(http, server, "SendMessage", {"message": _message("hi", taskId=bad)})
        assert answer["error"]["code"] == TASK_NOT_FOUND, answer
    # a forged context token is only a context the client names: a new conversation
    fresh = await _send(http, server, "convert 2 USD to EUR", contextId="c1.not-ours")
    assert fresh["contextId"] == "c1.not-ours"


async def test_replicas_and_restarts_resolve_each_others_ids(
    aiohttp_server: Any, db_url: str, demo: DemoAgents, http: httpx.AsyncClient
) -> None:
    one = await _switchboard(aiohttp_server, db_url, demo)
    two = await _switchboard(aiohttp_server, db_url, demo)  # same database, no shared cache
    first = await _send(http, one, "I need some currency converted")
    # the other replica continues the task and the conversation, and answers GetTask
    second = await _send(
        http, two, "convert 100 USD to EUR", taskId=first["id"], contextId=first["contextId"]
    )
    assert (second["id"], second["contextId"]) == (first["id"], first["contextId"])
    got = await _rpc(http, two, "GetTask", {"id": first["id"]})
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    other = await _send(http, two, "convert 5 USD to GBP")
    assert (await _rpc(http, one, "GetTask", {"id": other["id"]}))["result"]["id"] == other["id"]
    # another agent joins the conversation on one replica; the other one knows it
    png = base64.b64encode(_png()).decode()
    picture = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "contextId": first["contextId"],
        "parts": [{"raw": png, "mediaType": "image/png", "filename": "p.png"}],
    }
    joined = (await _rpc(http, one, "SendMessage", {"message": picture}))["result"]["task"]
    assert joined["contextId"] == first["contextId"]
    ids_two = two.app[ROUTER].ids
    assert await ids_two.upstream_context(first["contextId"], "caption") is not None
    # a replica's ListTasks sees another's new tasks once they are written
    await one.app[ROUTER].ids.flush()
    await ids_two.flush()
    listed = await _rpc(http, one, "ListTasks", {"contextId": first["contextId"]})
    assert {t["id"] for t in listed["result"]["tasks"]} == {first["id"], joined["id"]}
    # a restart: a new process on the same database keeps every ID valid
    await one.close()
    await two.close()
    again = await _switchboard(aiohttp_server, db_url, demo)
    for task in (first, other, joined):
        got = await _rpc(http, again, "GetTask", {"id": task["id"]})
        assert got["result"]["id"] == task["id"] and got["result"]["contextId"] == task["contextId"]
    total = (await _rpc(http, again, "ListTasks", {}))["result"]["totalSize"]
    assert total == 3


def _png() -> bytes:
    from tests.support.images import png

    return png(8, 8)


# --- the previous scheme and the written-behind list -----------------------------------------


async def test_ids_of_the_stored_scheme_still_resolve(store: Store) -> None:
    """The IDs of a version before sealed tokens, moved by the schema migrations."""
    moment = datetime(2025, 1, 2, tzinfo=UTC)
    await old_table(
        store, "router_tasks", old_task("0b6a-old-task", "wx-task", "0b6a-old-ctx", moment)
    )
    alias = {"alias": "v01-old", "task_id": "0b6a-old-task", "created_at": moment}
    await old_table(store, "router_task_aliases", alias)
    context = {"context_id": "0b6a-old-ctx", "agent_id": "wx", "upstream_context_id": "wx-ctx"}
    await old_table(store, "router_contexts", {**context, "created_at": moment})
    await forget_revision(store)
    assert (await start_on(store.url)).action == "upgraded"  # lists the stored tasks
    assert (await start_on(store.url)).action == "current"  # again, as another replica
    ids = IdMap(store)
    await ids.start()
    try:
        ref = await ids.task("0b6a-old-task")
        assert ref is not None and (ref.agent_id, ref.upstream_task_id) == ("wx", "wx-task")
        listed, _ = await ids.tasks.list_tasks()
        assert [(r.task_id, r.state) for r in listed] == [("0b6a-old-task", "TASK_STATE_WORKING")]
        assert await ids.tasks.count_tasks() == 1
        # a call on the old IDs: the agent's answer maps back to the same old IDs
        rewriter = Rewriter(ids, "1.0", "wx", ref.context_id)
        sent = await rewriter.request_to_upstream(
            Op.SEND, {"message": {"contextId": "0b6a-old-ctx", "taskId": "0b6a-old-task"}}
        )
        assert sent["message"] == {"contextId": "wx-ctx", "taskId": "wx-task"}
        answer = {"task": {"id": "wx-task", "contextId": "wx-ctx", "status": {"state": "x"}}}
        out = await rewriter.result_from_upstream(Op.SEND, answer)
        assert out["task"]["id"] == "0b6a-old-task"
        assert out["task"]["contextId"] == "0b6a-old-ctx"
        # v0.1 aliases: the old ones resolve, new ones bind tokens (longer than the old column)
        aliases = TaskAliases(store)
        assert await aliases.alias("v01-old") == "0b6a-old-task"
        token = (await ids.task_for_upstream("wx", "wx-task-2", "0b6a-old-ctx")).task_id
        assert len(token) > 64
        assert await aliases.bind_alias("v01-new", token) == token
        assert await aliases.bind_alias("v01-new", "another") == token  # the first binding wins
        assert await TaskAliases(store).alias("v01-new") == token
        assert await TaskAliases(store).bind_alias("v01-old", token) == "0b6a-old-task"
        # and in a process that never saw the old ID, the agent's task keeps its listed ID
        assert (await IdMap(store).task_by_upstream("wx", "wx-task")).task_id == "0b6a-old-task"
    finally:
        await ids.close()


async def test_long_upstream_ids_fall_back_to_stored_ids(store: Store) -> None:
    ids = IdMap(store)
    try:
        long_task, long_ctx = "T" * 500, "C" * 500
        context_id = await ids.context_for_upstream("wx", long_ctx, None)
        ref = await ids.task_for_upstream("wx", long_task, context_id)
        assert len(context_id) <= 512 and len(ref.task_id) <= 512
        assert not ref.task_id.startswith(TASK_PREFIX)
        other = IdMap(store)  # another replica
        found = await other.task(ref.task_id)
        assert found is not None and found.upstream_task_id == long_task
        assert await other.upstream_context(context_id, "wx") == long_ctx
        assert (await other.task_for_upstream("wx", long_task, context_id)).task_id == ref.task_id
        await other.close()
    finally:
        await ids.close()


async def test_written_behind_rows_reach_list_tasks(store: Store) -> None:
    writer, reader = IdMap(store, flush_delay=3600.0), IdMap(store)
    try:
        ref = await writer.task_for_upstream("wx", "ut-1", None)
        await writer.record_state(ref.task_id, "working")
        assert await reader.tasks.count_tasks() == 0  # queued in the writer's process only
        listed, _ = await writer.tasks.list_tasks()  # this process's own list waits for its queue
        assert [(r.task_id, r.state) for r in listed] == [(ref.task_id, "TASK_STATE_WORKING")]
        await writer.record_state(ref.task_id, "completed")
        await writer.task_for_upstream("wx", "ut-1", None)  # seen again: still one row
        await writer.flush()
        listed, _ = await reader.tasks.list_tasks()
        assert [(r.task_id, r.state) for r in listed] == [(ref.task_id, "TASK_STATE_COMPLETED")]
        # an older state written later (another replica's slower batch) does not win
        stale = IdMap(store)
        stale_ref = await stale.task(ref.task_id)
        assert stale_ref is not None
        await stale.record_state(ref.task_id, "working")
        stale.log.pending("wx", "ut-1").updated_at = datetime(2000, 1, 1, tzinfo=UTC)  # type: ignore[union-attr]
        await stale.close()
        listed, _ = await reader.tasks.list_tasks()
        assert listed[0].state == "TASK_STATE_COMPLETED"
    finally:
        await writer.close()
        await reader.close()


async def test_a_failed_write_keeps_the_rows_queued(store: Store) -> None:
    ids = IdMap(store, flush_delay=3600.0)
    ref = await ids.task_for_upstream("wx", "ut-1", None)
    broken = Store("sqlite:////nonexistent-dir/x.db", SCHEMA)
    ids.log.store = broken
    with pytest.raises(Exception):  # noqa: B017 - whatever the driver raises
        await ids.flush()
    assert ids.log.pending("wx", "ut-1") is not None
    await broken.close()
    ids.log.store = store
    await ids.close()
    async with store.session() as session:
        assert await session.get(RouterTaskEntry, ref.task_id) is not None
    with pytest.raises(RpcError):
        await ids.tasks.list_tasks(page_size=0)
