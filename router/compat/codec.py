"""The client edge of a legacy-dialect call: the client's task ID, and its answers' shape.

The router serves an A2A v0.1 call as the 0.3 call :mod:`router.compat.v01` makes of it; only
what the client sees differs. :func:`open_codec` (called once per call, before dispatch) maps
the task ID the v0.1 client chose to the router's task and returns a :class:`LegacyCodec`,
which the routing core (:mod:`router.forward.handler`, :mod:`router.forward.relay`) applies to
each answer and event before it leaves: each 0.3 answer or event becomes the v0.1 one named
with the client's ID, and the first router task an answer reveals is bound to that ID
(persisted, :mod:`router.compat.aliases`) before the client sees it. An ``A2A.``-prefixed call
gets a :class:`PrefixedCodec`, which puts its 1.0 results into seed 002's draft shapes. Other
dialects have no codec: their answers are emitted as they are.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from registry.errors import NotFound
from registry.jsonsafe import JsonLimitError, loads_limited
from registry.records import iso, utcnow
from router.card import agent_card_via_router, router_card, without_paths
from router.compat.prefixed import prefixed_event, prefixed_result
from router.compat.v01 import card_to_v01, v03_event_to_v01, v03_result_to_v01
from router.ids.tokens import TASK_PREFIX
from router.protocol.envelope import Request
from router.protocol.errors import AGENT_UNAVAILABLE, TASK_NOT_FOUND, RpcError
from router.protocol.versions import Op

if TYPE_CHECKING:
    from registry.service import Registry
    from registry.settings import Settings
    from router.compat.aliases import TaskAliases
    from router.ids.idmap import IdMap

__all__ = [
    "ClientCodec",
    "LegacyCodec",
    "PrefixedCodec",
    "open_codec",
    "v01_card",
]


async def open_codec(
    ids: IdMap, aliases: TaskAliases, rpc: Request, *, header: str | None
) -> tuple[Request, ClientCodec | None]:
    """The call to dispatch, and the codec its answers go through (None: as they are).

    A v0.1 send continues the router task its ``id`` names, if any (else it starts one); a
    v0.1 get/cancel/resubscribe is about that task (-32001 if the ID names none). A 0.3
    get/cancel/resubscribe without an ``A2A-Version`` header whose ``id`` is no router task
    but a v0.1 client's task ID is a v0.1 call too (v0.1 and 0.3 share those names).
    """
    if rpc.dialect == "0.3" and rpc.op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE) and not header:
        task_id = rpc.params.get("id")
        if await _is_alias(ids, aliases, task_id):
            rpc = dataclasses.replace(rpc, dialect="0.1", client_task_id=task_id)
    if rpc.dialect == "1.0-prefixed":
        return rpc, PrefixedCodec(rpc.op)
    if rpc.dialect != "0.1" or rpc.op is Op.CARD or rpc.client_task_id is None:
        return rpc, None
    client_id = rpc.client_task_id
    task_id = await aliases.alias(client_id)
    params = dict(rpc.params)
    if rpc.op in (Op.SEND, Op.STREAM):
        message = dict(params["message"])
        if task_id is not None:
            message["taskId"] = task_id
        params["message"] = message
        session = message.get("contextId")
    else:
        if task_id is None:
            raise RpcError(TASK_NOT_FOUND, f"Task not found: {client_id}", {"taskId": client_id})
        params["taskId" if "taskId" in params else "id"] = task_id  # push config set: taskId
        session = None
    codec = LegacyCodec(aliases, client_id, task_id, session)
    return dataclasses.replace(rpc, params=params), codec


async def _is_alias(ids: IdMap, aliases: TaskAliases, task_id: Any) -> bool:
    """Whether a header-less 0.3 call's ``id`` is a v0.1 client's task ID. A router task
    token (``t1.``) says itself that it is none, with no lookup; another ID is looked up as
    an alias (misses are cached briefly, :meth:`router.compat.aliases.TaskAliases.alias`)."""
    if not isinstance(task_id, str):
        return False
    if task_id.startswith(TASK_PREFIX) and (await ids.sealer()).open_task(task_id) is not None:
        return False  # one of ours (a client's own ID may start with "t1." too)
    return await aliases.alias(task_id) is not None


class ClientCodec:
    """What a legacy-dialect client sees of one call's answers (the base does nothing)."""

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON-RPC answer in the client's dialect."""
        return body

    async def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """One stream event (a JSON-RPC answer) as the events to write."""
        return [body]

    async def flush(self) -> None:
        """Persist what the answers taught (before the client sees them)."""


class PrefixedCodec(ClientCodec):
    """Answers of one ``A2A.``-prefixed call: 1.0 results in seed 002's draft shapes
    (:func:`router.compat.prefixed.prefixed_result`); errors are 1.0's."""

    def __init__(self, op: Op) -> None:
        self.op = op

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """A 1.0 answer with its result in the draft's shape."""
        if "result" not in body:
            return body
        return {**body, "result": prefixed_result(self.op, body["result"])}

    async def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A 1.0 stream event with the object it wraps in the draft's shape."""
        if not isinstance(body, dict) or "result" not in body:
            return [body]
        return [{**body, "result": prefixed_event(body["result"])}]


class LegacyCodec(ClientCodec):
    """Answers of one v0.1 call: 0.3 bodies in, v0.1 bodies out, named ``client_task_id``.

    ``task_id`` is the router task the client's ID stands for (None until an answer names
    one); ``session_id`` the client's ``sessionId``, if it sent one.
    """

    def __init__(
        self,
        aliases: TaskAliases,
        client_task_id: str,
        task_id: str | None,
        session_id: str | None,
    ) -> None:
        self.aliases = aliases
        self.client_task_id = client_task_id
        self.task_id = task_id
        self.session_id = session_id
        self._bound = task_id is not None
        self._indexes: dict[str, int] = {}  # artifact ID -> v0.1 index, for a whole stream

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON-RPC answer in v0.1 (errors are the same in both, the router's task ID
        named by the client's). Call :meth:`flush` before the client can see it."""
        if "result" not in body:
            return self._error(body)
        self._learn(body["result"])
        result = v03_result_to_v01(
            body["result"], self.client_task_id, self.session_id, iso(utcnow())
        )
        return {**body, "result": result}

    async def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """One 0.3 stream event (a JSON-RPC answer) as the v0.1 events to write, the task
        ID already bound."""
        if not isinstance(body, dict) or "result" not in body:
            return [self._error(body)]
        self._learn(body["result"])
        await self.flush()
        results = v03_event_to_v01(
            body["result"], self.client_task_id, self.session_id, self._indexes, iso(utcnow())
        )
        return [{**body, "result": result} for result in results]

    def _error(self, body: Any) -> Any:
        """An error answer with the router's task ID replaced by the client's, in its
        message and anywhere in its ``data``."""
        if self.task_id is None or not isinstance(body, dict) or "error" not in body:
            return body
        return {**body, "error": _replaced(body["error"], self.task_id, self.client_task_id)}

    async def flush(self) -> None:
        """Persist the binding of the client's task ID learnt from an answer (once)."""
        if self.task_id is not None and not self._bound:
            self._bound = True
            self.task_id = await self.aliases.bind_alias(self.client_task_id, self.task_id)

    def _learn(self, result: Any) -> None:
        """The router task of the first answer that names one (a Task's ``id``, an
        update's ``taskId``)."""
        if self.task_id is not None or not isinstance(result, dict):
            return
        kind = result.get("kind")
        if kind is None:  # 0.3 requires it; tolerate its absence as router.protocol.payloads does
            kind = "task" if "status" in result and "id" in result else "update"
        task_id = result.get("id") if kind == "task" else result.get("taskId")
        if kind not in ("task", "status-update", "artifact-update", "update"):
            task_id = None
        if isinstance(task_id, str) and task_id:
            self.task_id = task_id


def _replaced(value: Any, old: str, new: str) -> Any:
    """``value`` (JSON) with the string ``old`` replaced by ``new`` in every string."""
    if isinstance(value, str):
        return value.replace(old, new) if old in value else value
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: _replaced(item, old, new) for key, item in value.items()}
    return value


async def v01_card(
    registry: Registry, settings: Settings, base_url: str, pinned: str | None
) -> dict[str, Any]:
    """The answer to v0.1 ``agent/getCard``: the router's card, or on a per-agent endpoint
    that agent's card as reached through the router, in the v0.1 shape (unsigned: v0.1
    cards have no signatures). ``base_url``: where clients reach Switchboard."""
    base = base_url.rstrip("/")
    if pinned is None:
        card = router_card(
            registry, base, name=settings.router_name, description=settings.router_description
        )
        return card_to_v01(card)
    record = registry.get(pinned)
    problem = None if registry.routable(record) else "is not routable (its card is unverified)"
    if problem is None:
        try:
            raw = loads_limited(await registry.raw_card(pinned), max_depth=256)
            if record.verification.status == "verified":
                raw = without_paths(raw, record.verification.uncovered_fields)
            return card_to_v01(agent_card_via_router(record, raw, base))
        except NotFound:
            problem = "has no JSON-RPC or HTTP+JSON interface for A2A 0.3 or 1.0"
        except JsonLimitError:
            problem = "has a stored card that cannot be read"
    raise RpcError(AGENT_UNAVAILABLE, f"agent {pinned!r} {problem}", {"agent": pinned})
