"""Rewriting IDs in A2A JSON between a client (router IDs) and one agent (its own IDs).

Works on plain JSON of both versions' shapes and returns new objects (the input is never
changed). Only ``id`` (of a task), ``taskId``, ``contextId`` and ``referenceTaskIds`` change;
``messageId`` and every other field pass through untouched.

An agent's task and context IDs become router IDs (made as needed), except in
``referenceTaskIds`` and in errors: there only IDs the router already maps are rewritten and
unknown ones are dropped, so an agent can neither make the router create tasks it never saw
nor leak its own IDs to the client.

The IDs are those of the owner scope of the :class:`router.ids.idmap.IdMap` view it is given
(:meth:`router.ids.idmap.IdMap.scoped`): another scope's task IDs are TaskNotFound as unknown
ones are, and another scope's context IDs are contexts the client names.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from router.ids.idmap import IdMap
from router.ids.refs import TaskRef
from router.protocol.errors import (
    ERROR_INFO_TYPE,
    INVALID_AGENT_RESPONSE,
    REASONS,
    TASK_NOT_FOUND,
    RpcError,
    error_domain,
)
from router.protocol.payloads import params_error
from router.protocol.versions import Op

if TYPE_CHECKING:
    from router.protocol.versions import Version

_WRAPPERS = ("task", "message", "statusUpdate", "artifactUpdate")  # 1.0 stream responses
_SCRUB_MIN = 8  # upstream IDs at least this long are also replaced inside error texts
_SHOWN_MAX = 512  # a task ID longer than this is not echoed back in TaskNotFound


class Rewriter:
    """ID rewriting for one client request forwarded to one agent.

    ``router_context`` is the request's router context; when it is None it is learnt from the
    request (its ``contextId``, or the context of the task it names) or from the first
    context the agent answers with, and new upstream contexts are attached to it.
    """

    def __init__(
        self, ids: IdMap, version: Version, agent_id: str, router_context: str | None
    ) -> None:
        self.ids = ids
        self.version = version
        self.agent_id = agent_id
        self.router_context = router_context
        self._tasks: dict[str, str] = {}  # upstream task id -> router task id, seen so far
        self._contexts: dict[str, str] = {}  # upstream context id -> router context id

    @property
    def known_tasks(self) -> Mapping[str, str]:
        """Upstream task ID -> router task ID, for the tasks seen in this exchange so far."""
        return self._tasks

    @property
    def known_contexts(self) -> Mapping[str, str]:
        """Upstream context ID -> router context ID, for the contexts seen so far."""
        return self._contexts

    # --- client -> agent ---------------------------------------------------------------------

    async def request_to_upstream(self, op: Op, params: dict[str, Any]) -> dict[str, Any]:
        """The request's params with router IDs replaced by this agent's IDs.

        A ``contextId`` this agent has no context for yet is removed (the agent makes one);
        an unknown ``contextId`` becomes a router context. An unknown task ID, or one owned by
        another agent, raises :class:`RpcError` -32001 (TaskNotFound).
        """
        out = dict(params) if isinstance(params, dict) else {}  # new dicts where IDs change
        if op in (Op.SEND, Op.STREAM):
            message = out.get("message")
            if isinstance(message, dict):
                out["message"] = message = dict(message)
                await self._message_to_upstream(message)
        elif op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
            if "id" in out:
                out["id"] = (await self._owned(out["id"])).upstream_task_id
        elif op is Op.PUSH_CONFIG:
            keys = ("taskId", "id") if self.version == "0.3" else ("taskId",)
            for key in keys:
                if isinstance(out.get(key), str) and out[key]:
                    out[key] = (await self._owned(out[key])).upstream_task_id
        return out

    async def _message_to_upstream(self, message: dict[str, Any]) -> None:
        context_id = message.get("contextId")
        if context_id is not None and context_id != "":
            if not isinstance(context_id, str):
                raise _invalid("message.contextId", "must be a string")
            await self.ids.ensure_context(context_id)
            if self.router_context is None:
                self.router_context = context_id
            upstream = await self.ids.upstream_context(context_id, self.agent_id)
            if upstream is None:
                del message["contextId"]  # the agent starts its own context
            else:
                message["contextId"] = upstream
                self._contexts[upstream] = context_id
        task_id = message.get("taskId")
        if task_id is not None and task_id != "":
            if not isinstance(task_id, str):
                raise _invalid("message.taskId", "must be a string")
            message["taskId"] = (await self._owned(task_id)).upstream_task_id
        if "referenceTaskIds" in message:
            refs = message["referenceTaskIds"]
            if not isinstance(refs, list):
                raise _invalid("message.referenceTaskIds", "must be a list")
            upstream_refs = []
            for ref_id in refs:
                ref = await self.ids.task(ref_id) if isinstance(ref_id, str) else None
                if ref is None:
                    raise _not_found(ref_id)
                if ref.agent_id == self.agent_id:  # another agent's task means nothing here
                    upstream_refs.append(ref.upstream_task_id)
                    self._tasks[ref.upstream_task_id] = ref.task_id
            if upstream_refs or not refs:
                message["referenceTaskIds"] = upstream_refs
            else:
                del message["referenceTaskIds"]

    async def _owned(self, task_id: Any) -> TaskRef:
        """The ref of a router task owned by this agent, else TaskNotFound."""
        ref = await self.ids.task(task_id) if isinstance(task_id, str) else None
        if ref is None or ref.agent_id != self.agent_id:
            raise _not_found(task_id)
        self._tasks[ref.upstream_task_id] = ref.task_id
        if self.router_context is None:
            self.router_context = ref.context_id
        return ref

    # --- agent -> client ---------------------------------------------------------------------

    async def result_from_upstream(self, op: Op, result: Any) -> Any:
        """A result (Task, Message, 1.0 ``{"task"}``/``{"message"}``, ListTasks) with the
        agent's IDs replaced by router IDs (new ones made as needed)."""
        return await self._payload(result)

    async def event_from_upstream(self, event: Any) -> Any:
        """One stream event (0.3 ``kind`` objects, 1.0 ``{"statusUpdate"}`` etc.), rewritten.

        A whole JSON-RPC response object is accepted too: its ``result``/``error`` are
        rewritten, its ``id`` is not.
        """
        if isinstance(event, dict) and "jsonrpc" in event:
            out = dict(event)
            if "result" in out:
                out["result"] = await self._payload(out["result"])
            if isinstance(out.get("error"), dict):
                out["error"] = await self._error(copy.deepcopy(out["error"]))
            return out
        return await self._payload(event)

    async def error_from_upstream(self, error: dict[str, Any]) -> dict[str, Any]:
        """A JSON-RPC error object with the agent's IDs in ``data`` replaced by router IDs.

        At any depth of ``data``, ID members are rewritten when the router maps them and
        removed when it does not: single IDs under ``id``, ``taskId``/``contextId`` and any
        key ending so (``parentTaskId``, ``task_id``, ...), and ID lists under ``ids``,
        ``referenceTaskIds``/``contextIds`` and any key ending so (unknown items dropped).
        Nothing is created. In free texts (``message`` and other strings) the IDs seen in
        this exchange are replaced and the rest is left as it is.
        """
        out = copy.deepcopy(error)
        return await self._error(out) if isinstance(out, dict) else out

    async def _payload(self, obj: Any) -> Any:
        """One result or event object, rewritten: new dicts along the paths that carry IDs,
        everything else shared with the input (never changed)."""
        if not isinstance(obj, dict):
            return obj
        kind = obj.get("kind")
        if kind == "task":
            return await self._task(obj)
        if kind == "message":
            return await self._message(obj, None)
        if kind in ("status-update", "artifact-update"):
            return await self._update(obj)
        if kind is not None:
            return obj  # an unknown kind: leave it alone
        if any(isinstance(obj.get(key), dict) for key in _WRAPPERS):
            out = dict(obj)
            for key in _WRAPPERS:
                value = obj.get(key)
                if isinstance(value, dict):
                    if key == "task":
                        out[key] = await self._task(value)
                    elif key == "message":
                        out[key] = await self._message(value, None)
                    else:
                        out[key] = await self._update(value)
            return out
        if isinstance(obj.get("tasks"), list):  # ListTasks
            tasks = [await self._task(t) if isinstance(t, dict) else t for t in obj["tasks"]]
            return {**obj, "tasks": tasks}
        if "messageId" in obj:
            return await self._message(obj, None)
        if "id" in obj and "status" in obj:
            return await self._task(obj)
        if "taskId" in obj:
            return await self._update(obj)
        return obj

    async def _task(self, task: dict[str, Any]) -> dict[str, Any]:
        out = dict(task)
        context_id = await self._context_in(out)
        task_id = out.get("id")
        if task_id is not None and task_id != "":
            out["id"] = await self._task_in(task_id, context_id, "id")
        await self._status(out, context_id)
        history = out.get("history")
        if isinstance(history, list):
            out["history"] = [
                await self._message(m, context_id) if isinstance(m, dict) else m for m in history
            ]
        return out

    async def _update(self, event: dict[str, Any]) -> dict[str, Any]:
        """A status-update or artifact-update event (artifacts carry no IDs)."""
        out = dict(event)
        context_id = await self._context_in(out)
        task_id = out.get("taskId")
        if task_id is not None and task_id != "":
            out["taskId"] = await self._task_in(task_id, context_id, "taskId")
        await self._status(out, context_id)
        return out

    async def _status(self, obj: dict[str, Any], context_id: str | None) -> None:
        """Rewrite the status message of ``obj`` (a new dict already) into a new status."""
        status = obj.get("status")
        if isinstance(status, dict) and isinstance(status.get("message"), dict):
            obj["status"] = {
                **status,
                "message": await self._message(status["message"], context_id),
            }

    async def _message(self, message: dict[str, Any], context_id: str | None) -> dict[str, Any]:
        out = dict(message)
        if out.get("contextId") not in (None, ""):
            context_id = await self._context_in(out)
        task_id = out.get("taskId")
        if task_id is not None and task_id != "":
            out["taskId"] = await self._task_in(task_id, context_id, "taskId")
        refs = out.get("referenceTaskIds")
        if isinstance(refs, list):
            # references are looked up, never created: a task the router never saw has no
            # router ID, and the agent's own ID must not reach the client, so it is dropped
            known = [await self._known_task(ref) if isinstance(ref, str) else None for ref in refs]
            mapped = [ref for ref in known if ref is not None]
            if mapped or not refs:
                out["referenceTaskIds"] = mapped
            else:
                del out["referenceTaskIds"]
        return out

    async def _context_in(self, obj: dict[str, Any]) -> str | None:
        """Replace ``obj["contextId"]`` (``obj`` a new dict already) by its router context;
        that context, or the request's when the object names none."""
        upstream = obj.get("contextId")
        if upstream is None or upstream == "":
            return self.router_context
        if isinstance(upstream, str) and upstream in self._contexts:  # seen in this exchange
            obj["contextId"] = self._contexts[upstream]
            return self._contexts[upstream]
        try:
            context_id = await self.ids.context_for_upstream(
                self.agent_id, upstream, self.router_context
            )
        except ValueError:
            raise self._bad_id("contextId", upstream) from None
        if self.router_context is None:
            self.router_context = context_id
        self._contexts[upstream] = context_id
        obj["contextId"] = context_id
        return context_id

    async def _task_in(self, upstream: Any, context_id: str | None, field: str) -> str:
        """The router task ID for an agent's task ID (made, in ``context_id``, if new)."""
        if isinstance(upstream, str) and upstream in self._tasks:  # seen in this exchange
            return self._tasks[upstream]
        try:
            ref = await self.ids.task_for_upstream(self.agent_id, upstream, context_id)
        except ValueError:
            raise self._bad_id(field, upstream) from None
        self._tasks[upstream] = ref.task_id
        return ref.task_id

    def _bad_id(self, field: str, value: Any) -> RpcError:
        return RpcError(
            INVALID_AGENT_RESPONSE,
            f"agent {self.agent_id!r} answered with an invalid {field}",
            {"agent": self.agent_id, "field": field, "type": type(value).__name__},
        )

    # --- errors ------------------------------------------------------------------------------

    async def _error(self, error: dict[str, Any]) -> dict[str, Any]:
        if "data" in error:
            error["data"] = await self._error_value(error["data"])
        if isinstance(error.get("message"), str):
            error["message"] = self._scrub(error["message"])
        return error

    async def _error_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._scrub(value)
        if isinstance(value, list):
            return [await self._error_value(item) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        for key, item in value.items():
            kind, many = _id_key(key)
            if kind is None:
                out[key] = await self._error_value(item)
            elif isinstance(item, str):
                mapped = await self._known_id(kind, item)
                if mapped is not None:
                    out[key] = mapped
            elif isinstance(item, list) and (many or all(isinstance(i, str) for i in item)):
                kept = []
                for entry in item:
                    if isinstance(entry, str):
                        mapped = await self._known_id(kind, entry)
                        if mapped is not None:
                            kept.append(mapped)
                    else:
                        kept.append(await self._error_value(entry))
                out[key] = kept
            else:
                out[key] = await self._error_value(item)
        return out

    async def _known_id(self, kind: str, upstream: str) -> str | None:
        """The router ID of a known upstream task (``kind`` "task"), context ("context") or
        either ("any"); None if unknown."""
        if kind in ("task", "any"):
            task_id = await self._known_task(upstream)
            if task_id is not None:
                return task_id
        if kind in ("context", "any"):
            return await self._known_context(upstream)
        return None

    async def _known_task(self, upstream: str) -> str | None:
        if upstream in self._tasks:
            return self._tasks[upstream]
        ref = await self.ids.task_by_upstream(self.agent_id, upstream)
        if ref is None:
            return None
        self._tasks[upstream] = ref.task_id  # known now: replaced in texts too
        return ref.task_id

    async def _known_context(self, upstream: str) -> str | None:
        if upstream in self._contexts:
            return self._contexts[upstream]
        context_id = await self.ids.context_by_upstream(self.agent_id, upstream)
        if context_id is not None:
            self._contexts[upstream] = context_id
        return context_id

    def _scrub(self, text: str) -> str:
        """Replace upstream IDs seen in this exchange inside a free text."""
        for mapping in (self._tasks, self._contexts):
            for upstream, router in mapping.items():
                if text == upstream or (len(upstream) >= _SCRUB_MIN and upstream in text):
                    text = text.replace(upstream, router)
        return text


def _not_found(task_id: Any) -> RpcError:
    if isinstance(task_id, str) and len(task_id) <= _SHOWN_MAX:
        return RpcError(TASK_NOT_FOUND, f"Task not found: {task_id}", {"taskId": task_id})
    return RpcError(TASK_NOT_FOUND, "Task not found", {})


def _invalid(field: str, rule: str) -> RpcError:
    return params_error([(field, rule)])


def _id_key(key: str) -> tuple[str | None, bool]:
    """What IDs a member of an error's ``data`` holds: ("task" | "context" | "any" | None,
    whether it is a list)."""
    name = key.replace("_", "").lower()
    if name in ("id", "ids"):
        return "any", name == "ids"
    for suffix, kind in (("taskid", "task"), ("contextid", "context")):
        if name.endswith(suffix):
            return kind, False
        if name.endswith(suffix + "s"):
            return kind, True
    return None, False


FORGOTTEN_TASK = "OWNER_FORGOT_TASK"  # data.reason of a TaskNotFound the owner answered


def owner_forgot_task(
    error: dict[str, Any], version: Version, task_id: str, agent_id: str
) -> dict[str, Any]:
    """The TaskNotFound (-32001) an agent answered for a task the router still lists, said
    plainly: the agent that owns it no longer knows it (its tasks were lost, e.g. in a
    restart). ``error`` is already in the client's ``version``; its code and data are kept,
    the message, ``detail``, ``reason``, ``agent`` and ``taskId`` are the router's, the agent's
    message moves to ``agentMessage`` (1.0: in the ErrorInfo's metadata, its reason left as it
    is). Other errors are returned unchanged."""
    if error.get("code") != TASK_NOT_FOUND:
        return error
    detail = (
        f"the agent {agent_id!r} that owns task {task_id!r} no longer knows it (its tasks "
        "were lost, e.g. when it restarted); Switchboard still lists the task, but its state "
        "and history are gone: start a new task"
    )
    facts = {"detail": detail, "reason": FORGOTTEN_TASK, "agent": agent_id, "taskId": task_id}
    if isinstance(error.get("message"), str):
        facts["agentMessage"] = error["message"]
    data = error.get("data")
    if version == "0.3":
        kept = data if isinstance(data, dict) else {} if data is None else {"value": data}
        data = {**kept, **facts}
    else:
        details = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
        info = next((d for d in details if d.get("@type") == ERROR_INFO_TYPE), None)
        if info is None:
            info = {"@type": ERROR_INFO_TYPE, "reason": REASONS[TASK_NOT_FOUND]}
            info["domain"] = error_domain(TASK_NOT_FOUND)
            details.insert(0, info)
        metadata = info.get("metadata") if isinstance(info.get("metadata"), dict) else {}
        details[details.index(info)] = {**info, "metadata": {**metadata, **facts}}
        data = details
    return {**error, "message": f"Task not found: {detail}", "data": data}
