"""The owner scopes of earlier versions: the IDs clients hold from them open for one version.

Until this version a task's owner scope was its caller's tenant and subject, whatever the
sign-in, so an API key and a JWT naming the same tenant and subject shared their tasks; now
it is also how the caller signed in and its issuer
(:meth:`registry.access.principal.Principal.scope`). Tokens are sealed for their scope
(:mod:`router.ids.tokens`) and clients hold them, so the old tasks and conversations cannot be
moved to the new scopes. Instead, for this version, a caller's view of the ID map also names
its old scope (:attr:`router.ids.idmap.IdMap.old`, from
:meth:`~registry.access.principal.Principal.old_scope`: never for a built-in principal or a
subject that names one):

- an exchange that names IDs of the old scope and none of the new one runs in the old scope
  (:func:`settle`): the old task or conversation goes on, answered with the IDs the client
  holds, and what it makes is the old scope's too;
- ListTasks lists the tasks of both (:class:`router.ids.tasklist.TaskList`).

So, until the next version drops this, a key and a JWT with the same tenant and subject still
share the tasks made before the upgrade (docs/security.md, docs/operations.md).
"""

from __future__ import annotations

from typing import Any

from router.ids.idmap import IdMap
from router.protocol.envelope import Request
from router.protocol.versions import Op

__all__ = ["named_ids", "settle"]


def named_ids(rpc: Request) -> tuple[list[str], list[str]]:
    """The router task IDs and context IDs a request names (unchecked: the request's own
    reading refuses bad ones)."""
    params = rpc.params if isinstance(rpc.params, dict) else {}
    if rpc.op in (Op.SEND, Op.STREAM):
        message = params.get("message")
        if not isinstance(message, dict):
            return [], []
        refs = message.get("referenceTaskIds")
        tasks = [message.get("taskId"), *(refs if isinstance(refs, list) else ())]
        return _strings(tasks), _strings([message.get("contextId")])
    if rpc.op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
        return _strings([params.get("id")]), []
    if rpc.op is Op.PUSH_CONFIG:  # as router.protocol.payloads.task_id_param reads it
        field = "taskId" if rpc.version == "1.0" or "taskId" in params else "id"
        return _strings([params.get(field)]), []
    return [], []


async def settle(ids: IdMap, rpc: Request) -> IdMap:
    """The view an exchange runs in: ``ids``, or, when none of the IDs the request names is
    its scope's and one is its :attr:`~router.ids.idmap.IdMap.old` scope's, that scope's
    view. Each ID is looked up in ``ids``'s own scope first (a token: no table read)."""
    if ids.old is None:
        return ids
    task_ids, context_ids = named_ids(rpc)
    if not task_ids and not context_ids:
        return ids
    earlier, found = ids.scoped(ids.old), False
    for task_id in task_ids:
        if await ids.task(task_id) is not None:
            return ids
        found = found or await earlier.task(task_id) is not None
    for context_id in context_ids:
        if await ids.knows_context(context_id):
            return ids
        found = found or await earlier.knows_context(context_id)
    return earlier if found else ids


def _strings(values: list[Any]) -> list[str]:
    return [value for value in values if isinstance(value, str) and value]
