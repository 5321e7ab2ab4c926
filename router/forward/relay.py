"""Relaying an agent's event stream to the client, event by event.

:meth:`Relay.open` starts the upstream SSE call (``message/stream``, ``tasks/resubscribe`` and
their 1.0 names), waits for the agent's response headers (they name the activated
extensions), and answers with an :class:`router.forward.call.EventStream` whose events are the
agent's, their IDs rewritten (:mod:`router.ids.rewrite`), translated to the client's version
(:mod:`router.compat.translate`) and put in its dialect (:mod:`router.compat.codec`), or,
when nothing but the IDs would change, the agent's bytes with its IDs swapped
(:mod:`router.forward.fastrelay`). An agent
that answers a streaming call with a plain JSON error gets that error relayed as a plain
answer. Errors in the middle of a stream end it with one error event. An agent whose card
does not say it streams is called unary, and its answers are relayed the same way as the
events they make (:mod:`router.forward.unarystream`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from router.choose.matcher import Choice
from router.compat import translate
from router.compat.codec import ClientCodec
from router.forward.call import Event, EventStream, Frames, Reply
from router.forward.fastrelay import FastPath
from router.forward.unarystream import UnaryStreams
from router.forward.upstream import EXTENSIONS_HEADER, Upstream, forward_headers
from router.ids.idmap import IdMap
from router.ids.rewrite import Rewriter
from router.observe.metrics import translated
from router.protocol.envelope import Request
from router.protocol.errors import AGENT_UNAVAILABLE, INTERNAL, RpcError, error_body, result_body
from router.protocol.events import ends_stream
from router.protocol.versions import Version, method_name
from router.tracing import spans

log = logging.getLogger(__name__)

Record = Callable[[Request, Any, IdMap], Awaitable[None]]
"""What the relay calls with every event it forwards, and the caller's ID map (the router
records task states)."""


class Relay:
    """The router's open event streams, at most ``max_streams`` at a time."""

    def __init__(
        self,
        upstream: Upstream,
        max_streams: int,
        record: Record,
        unary: UnaryStreams | None = None,
    ) -> None:
        self.upstream = upstream
        self.max_streams = max_streams
        self.open_streams = 0
        self._record = record
        self.unary = unary or UnaryStreams(upstream, poll_interval=1.0, poll_cap=30.0)
        """The streams of agents that do not stream (their unary answers as events)."""

    def check_capacity(self) -> None:
        """Raise -32052 when no further stream may open."""
        if self.open_streams >= self.max_streams:
            raise RpcError(
                AGENT_UNAVAILABLE,
                "too many streams are open through Switchboard; try again later",
                {"maxStreams": self.max_streams},
            )

    async def open(
        self,
        rpc: Request,
        choice: Choice,
        rewriter: Rewriter,
        params: dict[str, Any],
        headers: Mapping[str, str],
        client: ClientCodec | None,
    ) -> Reply | EventStream:
        """Open the agent's stream for ``rpc`` (``params`` already in the agent's version);
        for an agent that does not stream, the events of :attr:`unary` instead."""
        self.check_capacity()
        opened = spans.now()
        target = choice.target
        streams = bool(choice.agent.card.capabilities.streaming)
        on_headers = _Headers()
        fast = None
        if streams and target.version == rpc.version and client is None and rpc.id is not None:
            fast = FastPath(
                rpc.version,
                rpc.id,
                rewriter.known_tasks,
                rewriter.known_contexts,
            )
        sent = forward_headers(headers, target.version)
        if streams:
            upstream_events = self.upstream.stream(
                target,
                method_name(target.version, rpc.op),
                params,
                request_id=rpc.id,
                headers=sent,
                on_headers=on_headers,
                quick=None if fast is None else fast.quick,
            )
        else:
            upstream_events = self.unary.events(
                target, rpc.op, params, request_id=rpc.id, headers=sent, on_headers=on_headers
            )
        self.open_streams += 1
        try:
            # the agent's response headers first (they name the activated extensions)
            events = await _after_headers(upstream_events, on_headers.replied)
        except BaseException:
            self.open_streams -= 1
            with contextlib.suppress(Exception):
                await upstream_events.aclose()
            raise
        on_headers.replied = None  # the upstream stream holds on_headers while it lasts
        reply_headers = extensions_header(on_headers.extensions, rpc.version)
        if on_headers.plain:
            # the agent answered a plain JSON error before any event: so does the router
            try:
                events, failed = await _plain_error(events)
            except BaseException:
                self.open_streams -= 1
                with contextlib.suppress(Exception):
                    await events.aclose()
                raise
            if failed is not None:
                self.open_streams -= 1
                error = await rewriter.error_from_upstream(failed)
                error = translate.error_to(error, target.version, rpc.version)
                return Reply({"jsonrpc": "2.0", "id": rpc.id, "error": error}, reply_headers)

        rpc = replace(rpc, params={})  # the stream needs the call's ID and version, not its params
        pumped = self._pump(rpc, events, rewriter, target.version, fast)
        pumped = spans.relayed(pumped, rpc, choice, opened)  # the relay span, events counted
        shown = pumped if client is None else in_dialect(pumped, client)
        stream = EventStream(shown, reply_headers, functools.partial(self._close, events))
        if fast is not None:
            fast.enabled = stream.takes_bytes  # while the transport takes bytes
        return stream

    async def _close(self, events: AsyncGenerator[Any, None]) -> None:
        """A stream closed: its slot is free, the upstream connection closed at once."""
        self.open_streams -= 1
        with contextlib.suppress(Exception):
            await events.aclose()

    async def _pump(
        self,
        rpc: Request,
        events: AsyncIterator[Any],
        rewriter: Rewriter,
        source: Version,
        fast: FastPath | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Each upstream event as it arrives until the stream ends (translated from
        ``source``, the agent's version, to the client's first when they differ). With
        ``fast``, while the transport takes bytes (``fast.enabled()``), an event that needs
        no more than its IDs swapped is relayed as the agent's bytes (:mod:`.fastrelay`);
        the upstream stream yields those it recognized unparsed as :class:`Frames`."""
        try:
            async for upstream_answer in events:
                if type(upstream_answer) is Frames:
                    yield upstream_answer, None
                    del upstream_answer  # nothing held while the agent is silent
                    continue
                if fast is not None and fast.enabled():
                    data = fast.relay(upstream_answer)
                    if data is not None:
                        yield data, None
                        del upstream_answer, data
                        continue
                answer = upstream_answer
                if source != rpc.version and "result" in answer:
                    result = translate.result_to(rpc.op, answer["result"], source, rpc.version)
                    translated("event", source, rpc.version)
                    answer = {**answer, "result": result}
                if "error" in answer:  # IDs rewritten in the agent's shape, then translated
                    error = await rewriter.error_from_upstream(answer["error"])
                    error = translate.error_to(error, source, rpc.version)
                    yield {"jsonrpc": "2.0", "id": rpc.id, "error": error}, error_event(rpc)
                    return
                event = await rewriter.event_from_upstream(answer.get("result"))
                await self._record(rpc, event, rewriter.ids)
                if fast is not None:
                    fast.seen(upstream_answer)
                yield result_body(rpc.id, event), None
                if ends_stream(rpc.version, event):
                    return
                if source != rpc.version and ends_stream(source, upstream_answer):
                    return  # e.g. a 0.3 agent's final input-required update
                del upstream_answer, answer, event
        except RpcError as error:
            yield error_body(rpc.version, rpc.id, error), error_event(rpc)
        except (ConnectionResetError, asyncio.CancelledError, GeneratorExit):
            raise  # the client went away: the transport closes the stream
        except Exception:  # the stream has begun: end it with an error event, not a trace
            log.exception("internal error while streaming %s", rpc.method)
            error = RpcError(INTERNAL, "Switchboard failed internally; see its log", {})
            yield error_body(rpc.version, rpc.id, error), error_event(rpc)


async def in_dialect(
    events: AsyncGenerator[Event, None], client: ClientCodec
) -> AsyncGenerator[Event, None]:
    """``events`` as a legacy-dialect client sees them (one event may become several)."""
    try:
        async for body, kind in events:
            for item in await client.events(body):
                yield item, kind
    finally:
        await events.aclose()


def one_event(body: dict[str, Any], rpc: Request, client: ClientCodec | None) -> EventStream:
    """An error on an A2A 0.3 streaming call: a stream of one error event (as an a2a-sdk
    agent serving 0.3 answers a call it has read)."""

    async def single() -> AsyncGenerator[Event, None]:
        yield body, error_event(rpc)

    return EventStream(single() if client is None else in_dialect(single(), client))


def error_event(rpc: Request) -> str | None:
    """1.x SDK servers mark error events ``event: error``; 0.3 sends plain data events."""
    return "error" if rpc.version == "1.0" else None


def extensions_header(extensions: list[str], version: Version) -> dict[str, str]:
    """The agent's activated extensions, under the client version's header name."""
    return {EXTENSIONS_HEADER[version]: ", ".join(extensions)} if extensions else {}


class _Headers:
    """The ``on_headers`` of an upstream stream: the extensions the agent's response headers
    name, whether it answered plain JSON, and :attr:`replied` done once they are in."""

    __slots__ = ("extensions", "plain", "replied")

    def __init__(self) -> None:
        self.extensions: list[str] = []
        self.plain = False
        self.replied: asyncio.Future[None] | None = asyncio.get_running_loop().create_future()

    def __call__(self, found: list[str], streamed: bool) -> None:
        self.extensions.extend(found)
        self.plain = not streamed
        if self.replied is not None and not self.replied.done():
            self.replied.set_result(None)


async def _after_headers(
    events: AsyncGenerator[Any, None], replied: asyncio.Future[None] | None
) -> _Resumed:
    """``events``, once the agent's response headers are in (``replied`` is done) or its
    first item (or failure) is: that first read goes on and is the first item."""
    first = asyncio.ensure_future(anext(events))
    waiting: set[asyncio.Future[Any]] = {first} if replied is None else {first, replied}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        first.cancel()
        raise
    return _Resumed(first, events)


class _Resumed:
    """An upstream event stream whose first read has already started."""

    __slots__ = ("_events", "_first")

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
