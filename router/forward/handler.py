"""The A2A endpoint: ``POST /`` routes each call to the agent whose skill fits, and
``POST /agents/{agent_id}`` is the same endpoint pinned to one agent.

A call is read and checked (:mod:`router.protocol.envelope`), its agent chosen (the task's owner, or
:class:`router.choose.matcher.Matcher`), its IDs rewritten (:mod:`router.ids.idmap`), and
it is forwarded
(:mod:`router.forward.upstream`): one answer for send/get/cancel, an event-by-event SSE proxy for
stream/subscribe. Clients only ever see the router's task and context IDs.

A client speaking a legacy dialect (docs/dialects.md) is served as the 0.3 or 1.0 call
:func:`router.protocol.envelope.read_request` makes of its call; a v0.1 client's answers go
through its
:mod:`router.compat.codec` where bodies are emitted (:func:`_json`, ``SseWriter.send``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from aiohttp import web

from registry.errors import NotFound
from registry.netguard import AddressPolicy
from registry.records import iso
from registry.service import Registry
from registry.settings import Settings
from router.choose.adjudicator import Adjudicator
from router.choose.chooser import Chooser
from router.choose.matcher import Choice, Matcher
from router.compat import codec, translate
from router.compat.aliases import TaskAliases
from router.forward.sse import SseWriter
from router.forward.upstream import EXTENSIONS_HEADER, Upstream, forward_headers
from router.ids.idmap import IdMap
from router.ids.refs import TaskRef
from router.ids.rewrite import Rewriter
from router.protocol import payloads as wire
from router.protocol.envelope import (
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    INTERNAL,
    PUSH_NOT_SUPPORTED,
    TASK_NOT_FOUND,
    VERSION_HEADER,
    Op,
    Request,
    RpcError,
    Version,
    error_body,
    method_name,
    read_request,
    request_version,
    result_body,
    version_of,
)

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
        self.matcher = Matcher(registry, threshold=settings.match_threshold)
        self.matcher.default_agent = settings.default_agent
        self.matcher.default_skill = settings.default_skill
        adjudicator = None
        if settings.router_llm_url and settings.router_llm_model:
            adjudicator = Adjudicator(
                settings.router_llm_url,
                settings.router_llm_model,
                settings.router_llm_api_key,
                timeout=settings.router_llm_timeout,
            )
        self.chooser = Chooser(self.matcher, adjudicator=adjudicator)
        self.upstream = Upstream(
            connect_timeout=settings.upstream_connect_timeout,
            read_timeout=settings.upstream_timeout,
            per_agent_limit=settings.upstream_max_connections_per_agent,
            total_limit=settings.upstream_max_connections,
            stream_limit=settings.max_streams,
            policy=AddressPolicy(settings.allow_networks),  # agents' cards choose the address
        )
        self._streams = 0
        self._openings: dict[tuple[str, str], asyncio.Lock] = {}

    async def handle(self, request: web.Request, pinned: str | None = None) -> web.StreamResponse:
        """Answer one JSON-RPC call (``pinned``: the agent of a per-agent endpoint)."""
        try:
            return await self._handle(request, pinned)
        finally:
            codec.close_codec()  # after the error bodies too: they go through the codec

    async def _handle(self, request: web.Request, pinned: str | None) -> web.StreamResponse:
        version: Version = "0.3"
        rpc: Request | None = None
        try:
            try:
                version = request_version(request)  # header, or ?A2A-Version= (spec 1.0)
            except RpcError as error:
                # a client that sends the header knows 1.x: answer in the 1.0 shape, with its id
                version, error.id = "1.0", await self._request_id(request)
                raise
            rpc = await self._read(request, version)
            version = rpc.version  # an A2A.-prefixed name is 1.0 whatever the header says
            if pinned is not None and pinned not in self.registry.catalog.snapshot.agents:
                raise RpcError(AGENT_UNAVAILABLE, f"no agent with id {pinned!r}", {"agent": pinned})
            header = request.headers.get(VERSION_HEADER)
            rpc, client = await codec.open_codec(self.ids, self.aliases, rpc, header=header)
            if rpc.op is Op.CARD:  # v0.1 agent/getCard
                card = await codec.v01_card(self.registry, self.settings, request, pinned)
                return _json(result_body(rpc.id, card))
            response = await self._dispatch(request, rpc, pinned)
            if client is not None:
                await client.flush()  # before the client can see the answer
            return response
        except RpcError as exc:
            error, request_id = exc, (rpc.id if rpc is not None else exc.id)
            version = exc.version or version
        except Exception:  # a bug or a database failure: still a JSON-RPC answer, no trace
            log.exception("internal error answering %s", rpc.method if rpc else "a request")
            error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
            request_id = rpc.id if rpc is not None else None
        body = error_body(version, request_id, error)
        if rpc is not None and rpc.op in (Op.STREAM, Op.SUBSCRIBE) and rpc.version == "0.3":
            # as an a2a-sdk agent serving 0.3 answers a call it has read: one SSE error event
            # (1.0, and a request that cannot be read, get a plain JSON answer)
            return await _one_event_stream(request, body, rpc)
        return _json(body)

    async def _read(self, request: web.Request, version: Version) -> Request:
        return await read_request(
            request,
            version,
            max_bytes=self.settings.max_request_bytes,
            max_depth=self.settings.max_json_depth,
        )

    async def _request_id(self, request: web.Request) -> Any:
        """The client's request id, read with either version's method table."""
        try:
            return (await self._read(request, "1.0")).id
        except RpcError as error:
            return error.id

    async def _dispatch(
        self, request: web.Request, rpc: Request, pinned: str | None
    ) -> web.StreamResponse:
        if rpc.op in (Op.SEND, Op.STREAM):
            return await self._message(request, rpc, pinned)
        if rpc.op in (Op.GET, Op.CANCEL, Op.SUBSCRIBE):
            return await self._task_call(request, rpc, pinned)
        if rpc.op is Op.LIST:
            return _json(result_body(rpc.id, await self._list(request, rpc, pinned)))
        raise RpcError(
            PUSH_NOT_SUPPORTED,
            "Switchboard does not relay push notifications; use message/stream or polling",
            {"method": rpc.method},
        )

    # --- choosing the agent ----------------------------------------------------------------

    async def _choose_for_message(
        self, rpc: Request, message: dict[str, Any], pinned: str | None
    ) -> Choice:
        task_id = message.get("taskId")
        if isinstance(task_id, str) and task_id:
            owner = (await self._owner(task_id, pinned)).agent_id
            self._check_hint_agrees(rpc, owner)
            return self.matcher.target_for(rpc.version, owner)
        context_id = message.get("contextId")
        serving: set[str] = set()
        if isinstance(context_id, str) and context_id:
            serving = await self.ids.context_agents(context_id)
        return await self.chooser.choose(
            rpc.version, rpc.op, rpc.params, context_agents=serving, pinned_agent=pinned
        )

    def _check_hint_agrees(self, rpc: Request, owner: str) -> None:
        """A message continuing a task goes to the task's owner; a routing hint naming
        another agent (or a skill the owner lacks) is an error, not silently ignored."""
        hint = self.matcher.hint(rpc.version, rpc.params)
        if not hint:
            return
        agent, skill = hint.get("agent"), hint.get("skill")
        owner_skills = {s.id for s in self.registry.get(owner).card.skills}
        if (agent and agent != owner) or (skill and skill not in owner_skills):
            raise RpcError(
                BAD_ROUTING_HINT,
                f"the routing hint does not fit task owner {owner!r}: a message that continues "
                "a task goes to the agent that owns it",
                {"hint": hint, "owner": owner},
            )

    async def _owner(self, task_id: str, pinned: str | None) -> TaskRef:
        """The mapping of a router task id, owned by a still registered agent."""
        ref = await self.ids.task(task_id)
        if ref is None or (pinned is not None and ref.agent_id != pinned):
            raise RpcError(TASK_NOT_FOUND, f"no task with id {task_id!r}", {"taskId": task_id})
        try:
            self.registry.get(ref.agent_id)
        except NotFound:
            raise RpcError(
                AGENT_UNAVAILABLE,
                f"the agent that owns task {task_id!r} is no longer registered",
                {"taskId": task_id, "agent": ref.agent_id},
            ) from None
        return ref

    # --- calls -----------------------------------------------------------------------------

    async def _message(
        self, request: web.Request, rpc: Request, pinned: str | None
    ) -> web.StreamResponse:
        message = wire.message_of(rpc.version, rpc.params)
        choice = await self._choose_for_message(rpc, message, pinned)
        context_id = message.get("contextId") or None  # checked a string by read_request
        async with self._first_turn(context_id, choice.agent.id):
            rewriter = Rewriter(self.ids, rpc.version, choice.agent.id, context_id)
            params = await rewriter.request_to_upstream(rpc.op, rpc.params)
            if rpc.op is Op.STREAM:
                return await self._stream(request, rpc, choice, rewriter, params)
            return await self._call(request, rpc, choice, rewriter, params)

    @contextlib.asynccontextmanager
    async def _first_turn(self, context_id: str | None, agent_id: str) -> AsyncIterator[None]:
        """Serialize the calls that would open an agent's upstream context for a router
        context, so concurrent first messages share one conversation (in this process)."""
        if context_id is None or await self.ids.upstream_context(context_id, agent_id):
            yield
            return
        key = (context_id, agent_id)
        lock = self._openings.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and self._openings.get(key) is lock:
                del self._openings[key]

    async def _task_call(
        self, request: web.Request, rpc: Request, pinned: str | None
    ) -> web.StreamResponse:
        task_id = wire.task_id_param(rpc.version, rpc.op, rpc.params)
        ref = await self._owner(task_id, pinned)
        choice = self.matcher.target_for(rpc.version, ref.agent_id)
        rewriter = Rewriter(self.ids, rpc.version, ref.agent_id, ref.context_id)
        params = await rewriter.request_to_upstream(rpc.op, rpc.params)
        if rpc.op is Op.SUBSCRIBE:
            return await self._stream(request, rpc, choice, rewriter, params)
        return await self._call(request, rpc, choice, rewriter, params)

    async def _call(
        self,
        request: web.Request,
        rpc: Request,
        choice: Choice,
        rewriter: Rewriter,
        params: dict[str, Any],
    ) -> web.Response:
        extensions: list[str] = []
        answer = await self._call_upstream(request, rpc, choice, rpc.op, params, extensions)
        headers = _extensions_header(extensions, rpc.version)
        if "error" in answer:  # IDs rewritten in the agent's shape, then translated
            error = await rewriter.error_from_upstream(answer["error"])
            error = translate.error_to(error, choice.target.version, rpc.version)
            return _json({"jsonrpc": "2.0", "id": rpc.id, "error": error}, headers)
        result = await rewriter.result_from_upstream(rpc.op, answer.get("result"))
        await self._record(rpc, result)
        return _json(result_body(rpc.id, result), headers)

    async def _call_upstream(
        self,
        request: web.Request,
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
            headers=forward_headers(request.headers, target.version),
            extensions=extensions,
        )
        if not translating or "result" not in answer:
            return answer
        result = translate.result_to(
            op, answer["result"], target.version, rpc.version, no_history=no_history
        )
        return {**answer, "result": result}

    async def _stream(
        self,
        request: web.Request,
        rpc: Request,
        choice: Choice,
        rewriter: Rewriter,
        params: dict[str, Any],
    ) -> web.StreamResponse:
        if self._streams >= self.settings.max_streams:
            raise RpcError(
                AGENT_UNAVAILABLE,
                "too many streams are open through Switchboard; try again later",
                {"maxStreams": self.settings.max_streams},
            )
        target = choice.target
        if target.version != rpc.version:
            params = _translated_params(rpc.op, params, rpc.version, choice)
        replied = asyncio.Event()
        extensions: list[str] = []
        plain: list[bool] = []

        def on_headers(found: list[str], streamed: bool) -> None:
            extensions.extend(found)
            plain.append(not streamed)
            replied.set()

        upstream_events = self.upstream.stream(
            target,
            method_name(target.version, rpc.op),
            params,
            request_id=rpc.id,
            headers=forward_headers(request.headers, target.version),
            on_headers=on_headers,
        )
        self._streams += 1
        try:
            # the agent's response headers first (they name the activated extensions)
            events = await _after_headers(upstream_events, replied)
        except BaseException:
            self._streams -= 1
            with contextlib.suppress(Exception):
                await upstream_events.aclose()
            raise
        headers = _extensions_header(extensions, rpc.version)
        if plain and plain[0]:
            # the agent answered a plain JSON error before any event: so does the router
            try:
                events, failed = await _plain_error(events)
            except BaseException:
                self._streams -= 1
                with contextlib.suppress(Exception):
                    await events.aclose()
                raise
            if failed is not None:
                self._streams -= 1
                error = await rewriter.error_from_upstream(failed)
                error = translate.error_to(error, target.version, rpc.version)
                return _json({"jsonrpc": "2.0", "id": rpc.id, "error": error}, headers)
        writer = SseWriter(keepalive=self.settings.sse_keepalive, headers=headers)
        try:
            await writer.prepare(request)
            await self._pump(rpc, events, rewriter, writer, target.version)
        finally:
            self._streams -= 1
            with contextlib.suppress(Exception):
                await events.aclose()  # closes the upstream connection at once
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await writer.close()
        return writer.response

    async def _pump(
        self,
        rpc: Request,
        events: Any,
        rewriter: Rewriter,
        writer: SseWriter,
        agent_version: Version | None = None,
    ) -> None:
        """Forward each upstream event as it arrives until the stream ends (translated from
        ``agent_version`` to the client's first when they differ)."""
        source = agent_version or rpc.version
        try:
            async for upstream_answer in _until_lost(events, writer):
                answer = upstream_answer
                if source != rpc.version and "result" in answer:
                    result = translate.result_to(rpc.op, answer["result"], source, rpc.version)
                    answer = {**answer, "result": result}
                if "error" in answer:  # IDs rewritten in the agent's shape, then translated
                    error = await rewriter.error_from_upstream(answer["error"])
                    error = translate.error_to(error, source, rpc.version)
                    await writer.send(
                        {"jsonrpc": "2.0", "id": rpc.id, "error": error}, event=_error_event(rpc)
                    )
                    return
                event = await rewriter.event_from_upstream(answer.get("result"))
                await self._record(rpc, event)
                await writer.send(result_body(rpc.id, event))
                if wire.ends_stream(rpc.version, event):
                    return
                if source != rpc.version and wire.ends_stream(source, upstream_answer):
                    return  # e.g. a 0.3 agent's final input-required update
        except RpcError as error:
            await writer.send(error_body(rpc.version, rpc.id, error), event=_error_event(rpc))
        except (ConnectionResetError, asyncio.CancelledError):
            raise  # the client went away: the caller closes the upstream stream
        except Exception:  # the stream has begun: end it with an error event, not a trace
            log.exception("internal error while streaming %s", rpc.method)
            error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
            await writer.send(error_body(rpc.version, rpc.id, error), event=_error_event(rpc))

    async def _record(self, rpc: Request, result: Any, op: Op | None = None) -> None:
        """Remember the last known state of every task an answer or event carries."""
        for task_id, state in wire.result_task_states(rpc.version, op or rpc.op, result):
            await self.ids.record_state(task_id, state)

    # --- ListTasks ---------------------------------------------------------------------------

    async def _list(self, request: web.Request, rpc: Request, pinned: str | None) -> dict[str, Any]:
        query = wire.list_tasks_query(rpc.params)
        refs, token = await self.ids.tasks.list_tasks(
            context_id=query.context_id,
            state=query.status,
            page_size=query.page_size,
            page_token=query.page_token,
            agent_id=pinned,
            updated_after=query.status_timestamp_after,
        )
        total = await self.ids.tasks.count_tasks(
            context_id=query.context_id,
            state=query.status,
            agent_id=pinned,
            updated_after=query.status_timestamp_after,
        )
        semaphore = asyncio.Semaphore(_LIST_CONCURRENCY)

        async def current(ref: Any) -> dict[str, Any]:
            async with semaphore:
                return await self._current_task(request, rpc, ref)

        tasks = list(await asyncio.gather(*(current(ref) for ref in refs)))
        await self._record(rpc, {"tasks": tasks}, Op.LIST)
        if query.status_timestamp_after:
            after = query.status_timestamp_after
            tasks = [t for t in tasks if wire.status_at_or_after(t, after)]
        if not query.include_artifacts:
            tasks = [{k: v for k, v in t.items() if k != "artifacts"} for t in tasks]
        return {
            "tasks": tasks,
            "nextPageToken": token or "",
            "pageSize": query.page_size,
            "totalSize": total,
        }

    async def _current_task(self, request: web.Request, rpc: Request, ref: Any) -> dict[str, Any]:
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
        if ref.state and wire.is_terminal_state("1.0", ref.state) and not _wants_detail(rpc):
            return fallback  # a finished task does not change: no need to ask its owner
        try:
            choice = self.matcher.target_for(rpc.version, ref.agent_id)
            rewriter = Rewriter(self.ids, rpc.version, ref.agent_id, ref.context_id)
            params = await rewriter.request_to_upstream(Op.GET, get)
            answer = await asyncio.wait_for(
                self._call_upstream(request, rpc, choice, Op.GET, params),
                timeout=_LIST_OWNER_TIMEOUT,
            )
        except (RpcError, TimeoutError):
            return fallback
        if "result" not in answer:
            return fallback
        task = await rewriter.result_from_upstream(Op.GET, answer["result"])
        return task if isinstance(task, dict) else fallback


def _translated_params(
    op: Op, params: dict[str, Any], client: Version, choice: Choice
) -> dict[str, Any]:
    """The client's params in the agent's version; for a 1.0 agent, with the tenant of the
    chosen interface when the client named none."""
    target = choice.target
    out = translate.params_to(op, params, client, target.version)
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
            and interface.binding == "JSONRPC"
            and version_of(interface.protocol_version) == target.version
        ):
            return interface.tenant
    return None


def _extensions_header(extensions: list[str], version: Version) -> dict[str, str]:
    """The agent's activated extensions, under the client version's header name."""
    return {EXTENSIONS_HEADER[version]: ", ".join(extensions)} if extensions else {}


async def _after_headers(events: AsyncGenerator[Any, None], replied: asyncio.Event) -> _Resumed:
    """``events``, once the agent's response headers are in (``replied``) or its first
    item (or failure) is: that first read goes on and is the first item."""
    first = asyncio.ensure_future(anext(events))
    waiting = asyncio.ensure_future(replied.wait())
    try:
        await asyncio.wait({first, waiting}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        first.cancel()
        raise
    finally:
        waiting.cancel()
    return _Resumed(first, events)


class _Resumed:
    """An upstream event stream whose first read has already started."""

    def __init__(self, first: asyncio.Future[Any], events: AsyncGenerator[Any, None]) -> None:
        self._first: asyncio.Future[Any] | None = first
        self._events = events

    def __aiter__(self) -> _Resumed:
        return self

    async def __anext__(self) -> Any:
        if self._first is not None:
            first, self._first = self._first, None
            return await first  # StopAsyncIteration too, if the agent sent nothing
        return await anext(self._events)

    async def aclose(self) -> None:
        """Stop the first read if it still runs, and close the upstream stream."""
        if self._first is not None:
            self._first.cancel()
            with contextlib.suppress(BaseException):
                await self._first
        await self._events.aclose()


async def _one_event_stream(
    request: web.Request, body: dict[str, Any], rpc: Request
) -> web.StreamResponse:
    """An error on an A2A 0.3 streaming call: an SSE stream of one error event."""
    writer = SseWriter(keepalive=3600)
    await writer.prepare(request)
    try:
        await writer.send(body, event=_error_event(rpc))
    finally:
        await writer.close()
    return writer.response


async def _plain_error(events: _Resumed) -> tuple[_Resumed, dict[str, Any] | None]:
    """The agent's plain JSON answer to a streaming call: its ``error`` (the stream is closed),
    or None with the answer put back as the stream's first item (a plain result is relayed
    as a one-event stream, as before)."""
    answer = await anext(events)
    if isinstance(answer, dict) and "error" in answer:
        await events.aclose()
        return events, answer["error"]
    first: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    first.set_result(answer)
    return _Resumed(first, events), None


def _json(body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    """A JSON answer that is always valid JSON (no NaN/Infinity), as the spec requires, in
    the client's dialect (:func:`router.compat.codec.current`)."""
    client = codec.current()
    if client is not None:
        body = client.answer(body)
    dumps = functools.partial(json.dumps, allow_nan=False)
    return web.json_response(body, dumps=dumps, headers=headers)


def _wants_detail(rpc: Request) -> bool:
    """Whether ListTasks asked for more than the mapping table knows (artifacts, history)."""
    return bool(rpc.params.get("includeArtifacts")) or bool(rpc.params.get("historyLength"))


async def _until_lost(events: AsyncIterator[Any], writer: SseWriter) -> AsyncIterator[Any]:
    """``events``, ending as soon as the client is gone (noticed by a failed write, such as
    a keep-alive ping), even while the agent is silent."""
    lost = asyncio.ensure_future(writer.lost.wait())
    following: asyncio.Future[Any] | None = None
    try:
        while True:
            following = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({following, lost}, return_when=asyncio.FIRST_COMPLETED)
            if following not in done:
                raise ConnectionResetError("the client went away")
            try:
                item = following.result()
            except StopAsyncIteration:
                return
            following = None
            yield item
    finally:
        lost.cancel()
        if following is not None and not following.done():
            following.cancel()  # stops the upstream read; the caller then closes the stream
            with contextlib.suppress(BaseException):
                await following


def _error_event(rpc: Request) -> str | None:
    """1.x SDK servers mark error events ``event: error``; 0.3 sends plain data events."""
    return "error" if rpc.version == "1.0" else None
