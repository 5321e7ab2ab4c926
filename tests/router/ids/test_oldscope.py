"""router.ids.oldscope on SQLite and PostgreSQL: an exchange that names only IDs of its
caller's scope of earlier versions runs in that scope; IDs of the caller's own scope win;
ListTasks lists both scopes; v0.1 aliases of the old scope are found; nobody else's."""

from __future__ import annotations

from typing import Any

from registry.access.principal import Principal
from registry.store import Store
from router.compat.aliases import TaskAliases
from router.ids.idmap import IdMap
from router.ids.oldscope import named_ids, settle
from router.protocol.envelope import Request
from router.protocol.versions import Op

KEY = Principal("alice", tenant="acme", method="api-key", key_id="k1")
TOKEN = Principal("alice", tenant="acme", method="jwt", issuer="https://idp.example")
BOB = Principal("bob", tenant="acme", method="api-key", key_id="k2")
OLD = '["acme","alice"]'


def _get(task_id: str, op: Op = Op.GET) -> Request:
    return Request(id=1, method="GetTask", params={"id": task_id}, op=op, version="1.0")


def _send(**ids: Any) -> Request:
    message = {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "x"}], **ids}
    return Request(
        id=1, method="SendMessage", params={"message": message}, op=Op.SEND, version="1.0"
    )


def _view(ids: IdMap, principal: Principal) -> IdMap:
    return ids.scoped(principal.scope(), principal.old_scope())


async def test_an_exchange_naming_only_old_ids_runs_in_the_old_scope(ids: IdMap) -> None:
    assert KEY.old_scope() == TOKEN.old_scope() == OLD
    earlier = ids.scoped(OLD)  # what an earlier version made for alice@acme
    context = await earlier.context_for_upstream("wx", "uc-1", None)
    old = await earlier.task_for_upstream("wx", "ut-1", context)
    await earlier.ensure_context("chat-1")
    key = _view(ids, KEY)
    new = await key.task_for_upstream("wx", "ut-2", None)
    assert await key.task(old.task_id) is None  # not the new scope's

    for request in (
        _get(old.task_id),
        _get(old.task_id, Op.CANCEL),
        _send(taskId=old.task_id),
        _send(contextId=context),
        _send(contextId="chat-1"),
        _send(referenceTaskIds=[old.task_id]),
        Request(1, "GetTaskPushNotificationConfig", {"taskId": old.task_id, "id": "c"},
                Op.PUSH_CONFIG, "1.0"),
    ):  # fmt: skip
        settled = await settle(key, request)
        assert (settled.scope, settled.old) == (OLD, None), request
        # the old task opens there, with its context: the exchange answers with old IDs
        assert await settled.task(old.task_id) == old
    # a JWT of the same tenant and subject: the same old scope (shared until next version)
    assert (await settle(_view(ids, TOKEN), _get(old.task_id))).scope == OLD
    # an unknown context beside an old task: the old scope still
    assert (await settle(key, _send(taskId=old.task_id, contextId="fresh"))).scope == OLD
    # the caller's own IDs, unknown ones, and requests naming none stay in its scope
    for request in (
        _get(new.task_id),
        _send(taskId=new.task_id, referenceTaskIds=[old.task_id]),  # its own ID wins
        _get("t1.forged"),
        _send(contextId="fresh"),
        _send(),
        Request(1, "ListTasks", {"contextId": context}, Op.LIST, "1.0"),
    ):
        assert await settle(key, request) is key, request
    # a context the caller names in its own scope too is its own from then on
    await key.ensure_context("chat-1")
    assert await settle(key, _send(contextId="chat-1")) is key
    # another caller, a caller without an old scope, and the anonymous view: never
    for view in (_view(ids, BOB), ids.scoped(KEY.scope()), ids):
        assert await settle(view, _get(old.task_id)) is view


def test_named_ids() -> None:
    assert named_ids(_send(taskId="t", contextId="c", referenceTaskIds=["r", 5, ""])) == (
        ["t", "r"],
        ["c"],
    )
    assert named_ids(_get("t")) == (["t"], [])
    assert named_ids(Request(1, "x", {"message": "no"}, Op.SEND, "1.0")) == ([], [])
    push03 = Request(1, "tasks/pushNotificationConfig/get", {"id": "t"}, Op.PUSH_CONFIG, "0.3")
    assert named_ids(push03) == (["t"], [])
    assert named_ids(Request(1, "ListTasks", {}, Op.LIST, "1.0")) == ([], [])


async def test_list_tasks_lists_both_scopes_and_states_land_in_each(ids: IdMap) -> None:
    earlier, key = ids.scoped(OLD), _view(ids, KEY)
    old = await earlier.task_for_upstream("wx", "ut-1", None)
    new = await key.task_for_upstream("wx", "ut-2", None)
    theirs = await _view(ids, BOB).task_for_upstream("wx", "ut-3", None)
    listed, token = await key.tasks.list_tasks(page_size=100)
    assert token is None
    assert {(ref.task_id, ref.owner) for ref in listed} == {
        (old.task_id, OLD),
        (new.task_id, KEY.scope()),
    }
    assert await key.tasks.count_tasks() == 2
    assert theirs.task_id not in {ref.task_id for ref in listed}
    # paging over both
    first, token = await key.tasks.list_tasks(page_size=1)
    assert token is not None
    second, token = await key.tasks.list_tasks(page_size=1, page_token=token)
    assert {first[0].task_id, second[0].task_id} == {old.task_id, new.task_id}
    # each listed task is asked of its owner in its own scope
    [old_ref] = [ref for ref in listed if ref.task_id == old.task_id]
    assert key.view_of(old_ref).scope == OLD and key.view_of(new).scope == KEY.scope()
    # a state seen for an old task (ListTasks asks its owner) is recorded in the old scope
    await key.record_state(old.task_id, "TASK_STATE_COMPLETED")
    await key.record_state(new.task_id, "TASK_STATE_WORKING")
    listed, _ = await key.tasks.list_tasks(page_size=100)
    assert {ref.task_id: ref.state for ref in listed} == {
        old.task_id: "TASK_STATE_COMPLETED",
        new.task_id: "TASK_STATE_WORKING",
    }
    # the old scope alone and another caller see no more than before
    assert [r.task_id for r in (await earlier.tasks.list_tasks(page_size=100))[0]] == [old.task_id]
    assert [r.task_id for r in (await _view(ids, BOB).tasks.list_tasks())[0]] == [theirs.task_id]


async def test_v01_aliases_of_the_old_scope_are_found(store: Store, ids: IdMap) -> None:
    aliases = TaskAliases(store)
    old = await ids.scoped(OLD).task_for_upstream("wx", "ut-1", None)
    await aliases.scoped(OLD).bind_alias("my-task", old.task_id)
    key = aliases.scoped(KEY.scope(), KEY.old_scope())
    assert await key.alias("my-task") == old.task_id
    assert await key.bind_alias("my-task", "t1.other") == old.task_id  # the first binding wins
    assert await key.alias("another") is None
    assert await aliases.scoped(BOB.scope(), BOB.old_scope()).alias("my-task") is None
    assert await aliases.scoped(KEY.scope()).alias("my-task") is None
    assert aliases.scoped("", None) is aliases
