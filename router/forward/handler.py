"""The routing core: one A2A call in (:class:`router.forward.call.Call`), one answer out.

A transport (:mod:`router.transport.jsonrpc`) has read and checked the call
(:mod:`router.protocol.envelope`); here its agent is chosen (the task's owner, or
:class:`router.choose.chooser.Chooser`), its IDs rewritten (:mod:`router.ids.rewrite`), its
params translated when the agent speaks the other version (:mod:`router.compat.translate`),
and it is forwarded (:mod:`router.forward.upstream`): one :class:`~router.forward.call.Reply`
for send/get/cancel/list, an :class:`~router.forward.call.EventStream` for stream/subscribe
(:mod:`router.forward.relay`). Clients only ever see the router's task and context IDs.

A client speaking a legacy dialect (docs/dialects.md) is served as the 0.3 or 1.0 call the
envelope makes of its call; its answers are put in its dialect by its
:mod:`router.compat.codec` before they leave the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from registry.access.principal import Principal
from registry.egress import OutboundProxy
from registry.errors import NotFound
from registry.netguard import AddressPolicy
from registry.records import iso
from registry.service import Registry
from registry.settings import Settings
from router.card import card_for, router_card
from router.cardsecurity import with_security
from router.choose.adjudicator import Adjudicator
from router.choose.chooser import Chooser, Scope
from router.choose.grants import EVERYTHING, Grant
from router.choose.matcher import Choice, Matcher
from router.compat import codec, translate
from router.compat.aliases import TaskAliases
from router.compat.codec import ClientCodec
from router.forward.addresses import hides_addresses
from router.forward.call import Call, EventStream, Reply
from router.forward.push import PushRelay, SendPush
from router.forward.relay import Relay, extensions_header, one_event
from router.forward.unarystream import UnaryStreams
from router.forward.upstream import Upstream, forward_headers
from router.ids.idmap import IdMap
from router.ids.oldscope import settle
from router.ids.refs import TaskRef
from router.ids.rewrite import Rewriter, owner_forgot_task
from router.observe.metrics import observed_choice, observed_handle, translated
from router.protocol import payloads as wire
from router.protocol.envelope import Request
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    EXTENDED_CARD_NOT_CONFIGURED,
    INTERNAL,
    TASK_NOT_FOUND,
    RpcError,
    error_body,
    result_body,
)
from router.protocol.events import result_task_states
from router.protocol.listing import list_tasks_query, status_at_or_after
from router.protocol.versions import (
    VERSION_HEADER,
    Op,
    Version,
    is_terminal_state,
    method_name,
    version_of,
)
from router.push.configs import PushConfigs
from router.push.outbox import Backoff, Outbox
from router.tracing import spans

log = logging.getLogger(__name__)

_LIST_CONCURRENCY = 8
_LIST_OWNER_TIMEOUT = 5.0  # ListTasks asks each owner for the current task at most this long


class Router:
    """Everything one A2A call needs: the registry, the ID map, the matcher, the upstream pool."""

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self.ids = IdMap(registry.store)
        self.aliases = TaskAliases(registry.store)  # v0.1 clients' own task IDs
        self.matcher = Matcher.configured(registry, settings)
        proxy = OutboundProxy.from_settings(settings)  # every request out, unless NO_PROXY
        adjudicator = None
        if settings.router_llm_url and settings.router_llm_model:
            adjudicator = Adjudicator(
                settings.router_llm_url,
                settings.router_llm_model,
                settings.router_llm_api_key,
                timeout=settings.router_llm_timeout,
                proxy=proxy,
            )
        self.chooser = Chooser(self.matcher, adjudicator=adjudicator)
        self.upstream = Upstream(
            connect_timeout=settings.upstream_connect_timeout,
            read_timeout=settings.upstream_timeout,
            per_agent_limit=settings.upstream_max_connections_per_agent,
            total_limit=settings.upstream_max_connections,
            stream_limit=settings.max_streams,
            policy=AddressPolicy(settings.allow_networks),  # agents' cards choose the address
            lean_calls=settings.upstream_client == "lean",
            proxy=proxy,
        )
        unary = UnaryStreams(
            self.upstream, poll_interval=settings.push_poll_interval,
            poll_cap=settings.push_poll_cap,
        )  # fmt: skip
        self.relay = Relay(self.upstream, settings.max_streams, self._record, unary)
        push_policy = AddressPolicy(settings.push_allow_networks)  # clients choose webhooks
        self.outbox = Outbox(
            registry.store,
            push_policy,
            backoff=Backoff(settings.push_retry_base, settings.push_retry_cap,
                            settings.push_max_attempts),
            timeout=settings.push_timeout, proxy=proxy,
        )  # fmt: skip
        self.push = PushRelay(
            PushConfigs(registry.store), self.outbox, self.ids, self.upstream, push_policy,
            receiver_base=settings.push_receiver_url, max_depth=settings.max_json_depth,
            poll_interval=settings.push_poll_interval, poll_cap=settings.push_poll_cap,
        )  # fmt: skip
        self.push.watcher.agent_of = self.push_agent
        self._openings: dict[tuple[str, str, str], asyncio.Lock] = {}
        self.grants: Callable[[Principal], Grant] = lambda principal: EVERYTHING
        """What a caller may use (the app sets the access policies' grants)."""

    @observed_handle
    @hides_addresses
    async def handle(self, call: Call) -> Reply | EventStream:
        """Answer one call: a JSON-RPC body, or a stream of them, in the client's dialect.

        Errors become JSON-RPC error answers (an internal failure too, logged, with no
        trace); an error on an A2A 0.3 streaming call is a stream of one error event.
        """
        rpc, client = call.rpc, None
        try:
            who = self._who(call)
            if call.pinned is not None:
                self._check_pinned(who.grant, call.pinned)
            header = call.headers.get(VERSION_HEADER)
            rpc, client = await codec.open_codec(who.ids, who.aliases, rpc, header=header)
            who = Caller(await settle(who.ids, rpc), who.aliases, who.grant)
            spans.on_request(rpc, call.pinned)
            if rpc.op is Op.CARD:  # v0.1 agent/getCard
                base, pinned = call.base_url, call.pinned
                card = await codec.v01_card(self.registry, self.settings, base, pinned)
                return Reply(result_body(rpc.id, card))
            self._check_tenant(call, rpc)
            answer = await self._dispatch(call, who, rpc, client)
            if client is not None and isinstance(answer, Reply):
                answer = Reply(client.answer(answer.body), answer.headers)
            if client is not None:
                await client.flush()  # what the answer taught, before the client sees it
            return answer
        except RpcError as exc:
            error, version = exc, exc.version or rpc.version
        except Exception:  # a bug or a database failure: still a JSON-RPC answer, no trace
            log.exception("internal error answering %s", rpc.method)
            error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
            version = rpc.version
        spans.on_error(error)
        body = error_body(version, rpc.id, error)
        if rpc.op in (Op.STREAM, Op.SUBSCRIBE) and rpc.version == "0.3":
            # as an a2a-sdk agent serving 0.3 answers a call it has read: one SSE error event
            return one_event(body, rpc, client)
        return Reply(client.answer(body) if client is not None else body)

    def _who(self, call: Call) -> Caller:
        """The caller's ID space (its tasks and contexts) and grant (what it may use)."""
        return self._caller(call.caller)

    def _caller(self, principal: Principal) -> Caller:
        ids = self.id_space(principal)
        aliases = self.aliases.scoped(ids.scope, ids.old)
        return Caller(ids, aliases, self.grants(principal))

    def id_space(self, principal: Principal) -> IdMap:
        """The view of the ID map ``principal`` finds and makes IDs in: its scope
        (:meth:`scope_of`) and, for one version, its scope of earlier versions
        (:mod:`router.ids.oldscope`)."""
        scope = self.scope_of(principal)
        if not scope:
            return self.ids
        return self.ids.scoped(scope, principal.old_scope(self.settings.task_scope))

    def scope_of(self, principal: Principal) -> str:
        """The owner of the tasks ``principal`` creates and may see: ``""`` (one shared
        space) with client authentication off, else per ``SWITCHBOARD_TASK_SCOPE``."""
        if self.settings.client_auth == "none":
            return ""
        return principal.scope(self.settings.task_scope)

    def _check_tenant(self, call: Call, rpc: Request) -> None:
        """A 1.0 request's ``tenant`` must be the caller's own (with client authentication
        on; admins may name any): -32602 otherwise, which says nothing about that tenant."""
        tenant = rpc.params.get("tenant") if rpc.version == "1.0" else None
        caller = call.caller
        if (
            tenant
            and self.settings.client_auth != "none"
            and not caller.is_admin
            and tenant != caller.tenant
        ):
            raise wire.params_error([("tenant", "must be the caller's own tenant, or left out")])

    def check_pinned(self, caller: Principal, agent_id: str) -> None:
        """The check of a per-agent endpoint: -32052 ``no agent with id`` when ``agent_id``
        is not registered or ``caller`` may not use it (to the caller, it does not exist)."""
        self._check_pinned(self.grants(caller), agent_id)

    def _check_pinned(self, grant: Grant, agent_id: str) -> None:
        if agent_id not in self.registry.catalog.snapshot.agents or not grant.allows(
            agent_id, None
        ):
            raise RpcError(AGENT_UNAVAILABLE, f"no agent with id {agent_id!r}", {"agent": agent_id})

    async def _dispatch(
        self, call: Call, who: Caller, rpc: Request, client: ClientCodec | None
    ) -> Reply | EventStream:
        if rpc.op in (Op.SEND, Op.STREAM):
            return await self._message(call, who, rpc, client)
        if rpc.op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
            return await self._task_call(call, who, rpc, client)
        if rpc.op is Op.LIST:
            return Reply(result_body(rpc.id, await self._list(call, who, rpc)))
        if rpc.op is Op.EXTENDED_CARD:
            return Reply(result_body(rpc.id, self._extended_card(call, who, rpc)))
        return Reply(result_body(rpc.id, await self._push_config(call, who, rpc)))

    async def _push_config(self, call: Call, who: Caller, rpc: Request) -> Any:
        """A push notification config method, about one of the caller's tasks (another's:
        -32001, as for GetTask)."""
        task_id = wire.task_id_param(rpc.version, rpc.op, rpc.params)
        ref = await self._owner(who, task_id, call.pinned)
        choice = self.matcher.target_for(rpc.version, ref.agent_id, grant=who.grant)
        capable = choice.agent.card.capabilities.push_notifications
        return await self.push.config_call(
            rpc, ref, choice.target, capable, call.base_url, who.ids.scope
        )

    def push_target(self, agent_id: str) -> Any:
        """Where the router asks ``agent_id`` for a task (the push receiver's whole-task
        fetch for 0.3 clients)."""
        return self.matcher.target_for("1.0", agent_id).target

    def push_agent(self, agent_id: str) -> tuple[Any, bool]:
        """How the router follows a task of ``agent_id`` for synthesized push: its target and
        whether it streams (raises when it is no longer registered)."""
        choice = self.matcher.target_for("1.0", agent_id)
        return choice.target, bool(choice.agent.card.capabilities.streaming)

    def _extended_card(self, call: Call, who: Caller, rpc: Request) -> dict[str, Any]:
        """The router's card as the caller may see it (the skills of the agents it may use),
        in its version's shape; -32007 without client authentication (every caller sees the
        public card, which is complete)."""
        settings = self.settings
        if settings.client_auth == "none":
            raise RpcError(
                EXTENDED_CARD_NOT_CONFIGURED,
                f"{rpc.method}: Switchboard has no extended agent card without client "
                "authentication; its public card at /.well-known/agent-card.json is complete",
                {"method": rpc.method, "version": rpc.version},
            )
        card = router_card(
            self.registry, call.base_url, name=settings.router_name,
            description=settings.router_description, grant=who.grant,
        )  # fmt: skip
        card = card_for(card, rpc.version)
        with_security(card, settings, rpc.version)
        return card

    # --- choosing the agent ----------------------------------------------------------------

    @observed_choice
    @spans.traced_choice
    async def _choose_for_message(
        self, who: Caller, rpc: Request, message: dict[str, Any], pinned: str | None
    ) -> Choice:
        """The agent for a message: :meth:`router.choose.chooser.Chooser.route`, as explain
        runs it (:meth:`explain`)."""
        scope = self._scope(who, pinned)
        routed = await self.chooser.route(rpc.version, rpc.op, rpc.params, scope, pinned=pinned)
        return routed.result()

    def _scope(self, who: Caller, pinned: str | None) -> Scope:
        """What routing needs of the caller: its grant, the owners of its tasks (on a
        pinned endpoint, that agent's only) and the agents serving its conversations."""

        async def owner(task_id: str) -> str:
            return (await self._owner(who, task_id, pinned)).agent_id

        return Scope(who.grant, owner, who.ids.context_agents)

    async def explain(
        self, principal: Principal, rpc: Request, *, header: str | None = None
    ) -> dict[str, Any]:
        """Where a message (``rpc``: a send or stream) from ``principal`` would go, and why:
        the send's own choice (:meth:`_choose_for_message`), in the caller's ID space and
        grant, with every candidate listed (``header``: the ``A2A-Version`` header)."""
        who = self._caller(principal)
        rpc, _ = await codec.open_codec(who.ids, who.aliases, rpc, header=header)
        who = Caller(await settle(who.ids, rpc), who.aliases, who.grant)
        scope = self._scope(who, None)
        return await self.chooser.explain(rpc.version, rpc.op, rpc.params, scope)

    async def _owner(self, who: Caller, task_id: str, pinned: str | None) -> TaskRef:
        """The mapping of one of the caller's router task ids, owned by a still registered
        agent the caller may use."""
        ref = await who.ids.task(task_id)
        if ref is None or (pinned is not None and ref.agent_id != pinned):
            raise RpcError(TASK_NOT_FOUND, f"no task with id {task_id!r}", {"taskId": task_id})
        try:
            self.registry.get(ref.agent_id)
            if not who.grant.allows(ref.agent_id, None):
                raise NotFound(f"agent {ref.agent_id!r}")  # no longer the caller's to use
        except NotFound:
            raise RpcError(
                AGENT_UNAVAILABLE,
                f"the agent that owns task {task_id!r} is no longer registered",
                {"taskId": task_id, "agent": ref.agent_id},
            ) from None
        return ref

    # --- calls -----------------------------------------------------------------------------

    async def _message(
        self, call: Call, who: Caller, rpc: Request, client: ClientCodec | None
    ) -> Reply | EventStream:
        message = wire.message_of(rpc.version, rpc.params)
        choice = await self._choose_for_message(who, rpc, message, call.pinned)
        context_id = message.get("contextId") or None  # checked a string by the envelope
        async with contextlib.AsyncExitStack() as turn:
            if context_id is not None:  # else nothing to serialize: no stack kept per stream
                await turn.enter_async_context(self._first_turn(who, context_id, choice.agent.id))
            rewriter = Rewriter(who.ids, rpc.version, choice.agent.id, context_id)
            params, pending = await self.push.on_send(
                rpc, rpc.params, who.ids.scope, choice.agent.id,
                choice.agent.card.capabilities.push_notifications, call.base_url,
            )  # fmt: skip
            params = await rewriter.request_to_upstream(rpc.op, params)
            if rpc.op is not Op.STREAM:
                task_id = message.get("taskId") or None  # a task the router knows
                reply = await self._call(call, rpc, choice, rewriter, params, task_id)
                await self._bind_push(pending, rpc, reply)
                return reply
            answer = await self._stream(call, rpc, choice, rewriter, params, client)
            if isinstance(answer, EventStream) and context_id is not None:
                answer.add_closer(turn.pop_all().aclose)  # the first turn lasts the stream
            return answer

    async def _bind_push(self, pending: SendPush | None, rpc: Request, reply: Reply) -> None:
        """Give a push config given on a send the task the send's answer names."""
        if pending is not None and isinstance(reply.body, dict):
            await self.push.bind_send(pending, rpc, reply.body)

    @contextlib.asynccontextmanager
    async def _first_turn(
        self, who: Caller, context_id: str | None, agent_id: str
    ) -> AsyncIterator[None]:
        """Serialize the calls that would open an agent's upstream context for a router
        context, so concurrent first messages share one conversation (in this process)."""
        if context_id is None or await who.ids.upstream_context(context_id, agent_id):
            yield
            return
        key = (who.ids.scope, context_id, agent_id)
        lock = self._openings.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._openings.get(key) is lock:
                del self._openings[key]

    async def _task_call(
        self, call: Call, who: Caller, rpc: Request, client: ClientCodec | None
    ) -> Reply | EventStream:
        task_id = wire.task_id_param(rpc.version, rpc.op, rpc.params)
        ref = await self._owner(who, task_id, call.pinned)
        choice = self.matcher.target_for(rpc.version, ref.agent_id, grant=who.grant)
        spans.chose(choice)
        rewriter = Rewriter(who.ids, rpc.version, ref.agent_id, ref.context_id)
        params = await rewriter.request_to_upstream(rpc.op, rpc.params)
        if rpc.op is Op.SUBSCRIBE:
            return await self._stream(call, rpc, choice, rewriter, params, client)
        return await self._call(call, rpc, choice, rewriter, params, task_id)

    async def _call(
        self,
        call: Call,
        rpc: Request,
        choice: Choice,
        rewriter: Rewriter,
        params: dict[str, Any],
        task_id: str | None = None,
    ) -> Reply:
        """One unary call; ``task_id`` is the router task the call names (its owner was found
        in the task list): a TaskNotFound from the agent then says that the owner forgot it."""
        extensions: list[str] = []
        answer = await self._call_upstream(call, rpc, choice, rpc.op, params, extensions)
        headers = extensions_header(extensions, rpc.version)
        if "error" in answer:  # IDs rewritten in the agent's shape, then translated
            error = await rewriter.error_from_upstream(answer["error"])
            error = translate.error_to(error, choice.target.version, rpc.version)
            if task_id is not None:
                error = owner_forgot_task(error, rpc.version, task_id, choice.agent.id)
            return Reply({"jsonrpc": "2.0", "id": rpc.id, "error": error}, headers)
        result = await rewriter.result_from_upstream(rpc.op, answer.get("result"))
        await self._record(rpc, result, rewriter.ids)
        return Reply(result_body(rpc.id, result), headers)

    async def _call_upstream(
        self,
        call: Call,
        rpc: Request,
        choice: Choice,
        op: Op,
        params: dict[str, Any],
        extensions: list[str] | None = None,
    ) -> dict[str, Any]:
        """One JSON-RPC call to the chosen agent, in its version's method name and headers.

        ``params`` are in the client's version and so is the answer's ``result``: when the
        agent speaks the other version, both are translated (:mod:`router.compat.translate`); an
        ``error`` is left in the agent's shape (IDs are rewritten before it is translated).
        """
        target = choice.target
        translating = target.version != rpc.version
        no_history = False
        if translating:
            no_history = target.version == "0.3" and translate.asks_no_history(op, params)
            params = _translated_params(op, params, rpc.version, choice)
        answer = await self.upstream.call(
            target,
            method_name(target.version, op),
            params,
            request_id=rpc.id,
            headers=forward_headers(call.headers, target.version),
            extensions=extensions,
        )
        if not translating or "result" not in answer:
            return answer
        result = translate.result_to(
            op, answer["result"], target.version, rpc.version, no_history=no_history
        )
        translated("answer", target.version, rpc.version)
        return {**answer, "result": result}

    async def _stream(
        self,
        call: Call,
        rpc: Request,
        choice: Choice,
        rewriter: Rewriter,
        params: dict[str, Any],
        client: ClientCodec | None,
    ) -> Reply | EventStream:
        self.relay.check_capacity()
        if choice.target.version != rpc.version:
            params = _translated_params(rpc.op, params, rpc.version, choice)
        return await self.relay.open(rpc, choice, rewriter, params, call.headers, client)

    async def _record(self, rpc: Request, result: Any, ids: IdMap, op: Op | None = None) -> None:
        """Remember the last known state of every task an answer or event carries (``ids``:
        the caller's ID space)."""
        for task_id, state in result_task_states(rpc.version, op or rpc.op, result):
            await ids.record_state(task_id, state)

    # --- ListTasks ---------------------------------------------------------------------------

    async def _list(self, call: Call, who: Caller, rpc: Request) -> dict[str, Any]:
        pinned = call.pinned
        query = list_tasks_query(rpc.params)
        refs, token = await who.ids.tasks.list_tasks(
            context_id=query.context_id,
            state=query.status,
            page_size=query.page_size,
            page_token=query.page_token,
            agent_id=pinned,
            updated_after=query.status_timestamp_after,
        )
        total = await who.ids.tasks.count_tasks(
            context_id=query.context_id,
            state=query.status,
            agent_id=pinned,
            updated_after=query.status_timestamp_after,
        )
        semaphore = asyncio.Semaphore(_LIST_CONCURRENCY)

        async def current(ref: Any) -> dict[str, Any]:
            async with semaphore:
                return await self._current_task(call, who, rpc, ref)

        tasks = list(await asyncio.gather(*(current(ref) for ref in refs)))
        await self._record(rpc, {"tasks": tasks}, who.ids, Op.LIST)
        if query.status_timestamp_after:
            after = query.status_timestamp_after
            tasks = [t for t in tasks if status_at_or_after(t, after)]
        if not query.include_artifacts:
            tasks = [{k: v for k, v in t.items() if k != "artifacts"} for t in tasks]
        return {
            "tasks": tasks,
            "nextPageToken": token or "",
            "pageSize": query.page_size,
            "totalSize": total,
        }

    async def _current_task(
        self, call: Call, who: Caller, rpc: Request, ref: Any
    ) -> dict[str, Any]:
        """The task as its owner reports it now, or its last known state if it cannot say."""
        status = {"state": ref.state or "TASK_STATE_UNSPECIFIED"}
        if ref.updated_at is not None:
            status["timestamp"] = iso(ref.updated_at)
        fallback = {"id": ref.task_id, "status": status}
        if ref.context_id:
            fallback["contextId"] = ref.context_id
        get = {"id": ref.task_id}
        if "historyLength" in rpc.params:
            get["historyLength"] = rpc.params["historyLength"]
        if ref.state and is_terminal_state("1.0", ref.state) and not _wants_detail(rpc):
            return fallback  # a finished task does not change: no need to ask its owner
        try:
            choice = self.matcher.target_for(rpc.version, ref.agent_id, grant=who.grant)
            rewriter = Rewriter(who.ids.view_of(ref), rpc.version, ref.agent_id, ref.context_id)
            params = await rewriter.request_to_upstream(Op.GET, get)
            answer = await asyncio.wait_for(
                self._call_upstream(call, rpc, choice, Op.GET, params),
                timeout=_LIST_OWNER_TIMEOUT,
            )
        except (RpcError, TimeoutError):
            return fallback
        if "result" not in answer:
            return fallback
        task = await rewriter.result_from_upstream(Op.GET, answer["result"])
        return task if isinstance(task, dict) else fallback


@dataclass(frozen=True)
class Caller:
    """One caller as the core serves it: its ID space (tasks and contexts it may see, v0.1
    aliases) and its grant (the agents and skills it may use)."""

    ids: IdMap
    aliases: TaskAliases
    grant: Grant


def _translated_params(
    op: Op, params: dict[str, Any], client: Version, choice: Choice
) -> dict[str, Any]:
    """The client's params in the agent's version; for a 1.0 agent, with the tenant of the
    chosen interface when the client named none."""
    target = choice.target
    out = translate.params_to(op, params, client, target.version)
    translated("request", client, target.version)
    if target.version == "1.0" and "tenant" not in out:
        tenant = target.tenant or _interface_tenant(choice)
        if tenant:
            out["tenant"] = tenant
    return out


def _interface_tenant(choice: Choice) -> str | None:
    """The tenant of the interface ``choice.target`` names, on the agent's card."""
    target = choice.target
    for interface in choice.agent.card.interfaces:
        if (
            interface.url == target.url
            and interface.binding == target.binding
            and version_of(interface.protocol_version) == target.version
        ):
            return interface.tenant
    return None


def _wants_detail(rpc: Request) -> bool:
    """Whether ListTasks asked for more than the mapping table knows (artifacts, history)."""
    return bool(rpc.params.get("includeArtifacts")) or bool(rpc.params.get("historyLength"))
