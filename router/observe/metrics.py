"""The router's Prometheus metrics, and the decorators that record them (one per fact).

Each fact is recorded where it is known, by decorating that one method:

- :func:`observed_handle` on :meth:`router.forward.handler.Router.handle`: every A2A call of
  every binding (method, client version, outcome, latency, router-added time; streams: open
  streams, duration), and one log line per call (``switchboard.a2a``).
- :func:`observed_choice` on the handler's choice of agent: decisions by tier and agent,
  decision latency.
- :func:`observed_call` and :func:`observed_stream` on :class:`router.forward.upstream.
  Upstream`: calls to agents by agent and outcome, latency, stream events.

Labels are bounded: methods (the protocol's), versions, outcomes, tiers and agent ids (the
catalog's). Task ids, message text and client addresses are never labels. Everything is in
:data:`registry.metrics.METRICS`. A place to add trace spans later: these decorators.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from registry.metrics import METRICS
from router.forward.call import Call, Event, EventStream, Reply
from router.observe.logformat import CALL_LOGGER, log_info
from router.observe.recent import RECENT
from router.observe.requestid import Observed, current, new_request_id, observing
from router.observe.turn import later
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INTERNAL,
    INVALID_AGENT_RESPONSE,
    NO_MATCHING_AGENT,
    STREAM_FAILED,
    UNSUPPORTED,
    RpcError,
)

__all__ = [
    "DECISIONS",
    "DECISION_SECONDS",
    "REQUESTS",
    "REQUEST_SECONDS",
    "ROUTER_SECONDS",
    "STREAMS_OPEN",
    "STREAM_EVENTS",
    "STREAM_SECONDS",
    "TRANSLATIONS",
    "UPSTREAM_CALLS",
    "UPSTREAM_SECONDS",
    "observed_call",
    "observed_choice",
    "observed_handle",
    "observed_stream",
    "outcome_of",
    "translated",
]

log = logging.getLogger(CALL_LOGGER)

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
_SLOW = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_LONG = (0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)

REQUESTS = Counter(
    "switchboard_a2a_requests",
    "A2A calls answered, by method (as the client named it), client protocol version and "
    "outcome (ok, refused, upstream_error, invalid_request, internal_error, a2a_error, error)",
    ["method", "version", "outcome"],
    registry=METRICS,
)
REQUEST_SECONDS = Histogram(
    "switchboard_a2a_request_seconds",
    "Time to answer an A2A call (a stream: until it is open), by method and client version",
    ["method", "version"],
    buckets=_SLOW,
    registry=METRICS,
)
ROUTER_SECONDS = Histogram(
    "switchboard_a2a_router_seconds",
    "The router's own part of an answered call: its time minus the time spent waiting for agents",
    ["method"],
    buckets=_FAST,
    registry=METRICS,
)
UPSTREAM_CALLS = Counter(
    "switchboard_upstream_requests",
    "Calls and streams to agents, by agent, kind (call, stream) and outcome (ok, agent_error, "
    "unavailable, invalid_response, stream_failed, unsupported, cancelled, error)",
    ["agent", "kind", "outcome"],
    registry=METRICS,
)
UPSTREAM_SECONDS = Histogram(
    "switchboard_upstream_request_seconds",
    "Time an agent took to answer a call (a stream: to send its first event), by agent and kind",
    ["agent", "kind"],
    buckets=_SLOW,
    registry=METRICS,
)
STREAMS_OPEN = Gauge(
    "switchboard_streams_open",
    "Streams open to clients now",
    multiprocess_mode="livesum",  # several workers (router/observe/multiprocess.py): their sum
    registry=METRICS,
)
STREAM_EVENTS = Counter(
    "switchboard_stream_events",
    "Stream events received from agents and relayed, by agent",
    ["agent"],
    registry=METRICS,
)
STREAM_SECONDS = Histogram(
    "switchboard_stream_seconds",
    "How long client streams stayed open, by agent (empty: none was reached)",
    ["agent"],
    buckets=_LONG,
    registry=METRICS,
)
DECISIONS = Counter(
    "switchboard_routing_decisions",
    "Choices of an agent for a message, by tier (task, pinned, hint, lexical, semantic, llm, "
    "default, refused) and agent (empty when refused)",
    ["tier", "agent"],
    registry=METRICS,
)
DECISION_SECONDS = Histogram(
    "switchboard_routing_decision_seconds",
    "Time to choose the agent for a message, by tier",
    ["tier"],
    buckets=_FAST,
    registry=METRICS,
)

TRANSLATIONS = Counter(
    "switchboard_translations",
    "Requests, answers and stream events translated between protocol versions, by part "
    "(request: client to agent; answer, event: agent to client) and direction (0.3->1.0, "
    "1.0->0.3)",
    ["part", "direction"],
    registry=METRICS,
)
_TRANSLATED = {
    (part, source, target): TRANSLATIONS.labels(part, f"{source}->{target}")
    for part in ("request", "answer", "event")
    for source, target in (("0.3", "1.0"), ("1.0", "0.3"))
}

_UPSTREAM_FAILURES = {
    AGENT_UNAVAILABLE: "unavailable",
    INVALID_AGENT_RESPONSE: "invalid_response",
    STREAM_FAILED: "stream_failed",
    UNSUPPORTED: "unsupported",
}


def outcome_of(body: Any) -> str:
    """The outcome label of a JSON-RPC answer: ``ok``, or its error code's class."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "ok"
    code = error.get("code")
    if not isinstance(code, int):
        return "error"
    if code == NO_MATCHING_AGENT:
        return "refused"
    if code in (AGENT_UNAVAILABLE, STREAM_FAILED, INVALID_AGENT_RESPONSE):
        return "upstream_error"
    if code == INTERNAL:
        return "internal_error"
    if -32700 <= code <= -32600:
        return "invalid_request"
    if -32099 <= code <= -32000:
        return "a2a_error"
    return "error"


_CHILDREN: dict[tuple[int, tuple[str, ...]], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once: prometheus-client's lookup takes a lock
    and checks the labels on every call (the children are bounded as the labels are)."""
    key = (id(metric), labels)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*labels)
    return child


def translated(part: str, source: str, target: str) -> None:
    """Count one translation of a ``part`` (``request``, ``answer``, ``event``) from version
    ``source`` to ``target``."""
    child = _TRANSLATED.get((part, source, target))
    if child is None:
        child = _TRANSLATED[part, source, target] = TRANSLATIONS.labels(part, f"{source}->{target}")
    child.inc()


H = TypeVar("H", bound=Callable[..., Awaitable[Reply | EventStream]])


def observed_handle(handle: H) -> H:
    """Decorate ``Router.handle(self, call)``: count and time the call, and follow its stream."""

    @functools.wraps(handle)
    async def observed(self: Any, call: Call) -> Reply | EventStream:
        observed, restore = current(), None
        if observed is None:  # a binding without the HTTP middleware (gRPC)
            observed = Observed(new_request_id())
            restore = observing(observed)
        try:
            observed.method, observed.version = call.rpc.method, call.rpc.version
            started, waited = time.perf_counter(), observed.upstream_seconds
            answer = await handle(self, call)
            elapsed = time.perf_counter() - started
            _child(REQUEST_SECONDS, call.rpc.method, call.rpc.version).observe(elapsed)
            router_part = elapsed - (observed.upstream_seconds - waited)
            _child(ROUTER_SECONDS, call.rpc.method).observe(max(router_part, 0.0))
            if isinstance(answer, EventStream):
                _follow(answer, observed, started)
            else:
                _finish(observed, outcome_of(answer.body), elapsed)
            return answer
        finally:
            if restore is not None:
                restore()

    return observed  # type: ignore[return-value]


def _follow(stream: EventStream, observed: Observed, started: float) -> None:
    """Count an open stream until it is closed; its outcome is that of its error event."""
    STREAMS_OPEN.inc()
    followed = _Followed(observed, started)
    stream.events = followed.events(stream.events)
    stream.add_closer(followed.closed)


class _Followed:
    """An open stream's count, duration and outcome (one small object per stream)."""

    __slots__ = ("observed", "outcome", "started")

    def __init__(self, observed: Observed, started: float) -> None:
        self.observed, self.started, self.outcome = observed, started, "ok"

    async def events(self, inner: AsyncGenerator[Event, None]) -> AsyncGenerator[Event, None]:
        """``inner``'s events, the first error event's outcome noted."""
        try:
            async for body, kind in inner:
                if self.outcome == "ok":
                    self.outcome = outcome_of(body)
                yield body, kind
        finally:
            await inner.aclose()

    async def closed(self) -> None:
        """The stream closed: count it and write its log line."""
        STREAMS_OPEN.dec()
        duration = time.perf_counter() - self.started
        _child(STREAM_SECONDS, self.observed.agent_id or "").observe(duration)
        _finish(self.observed, self.outcome, duration)


def _finish(observed: Observed, outcome: str, duration: float) -> None:
    """Count the call and write its log line."""
    observed.outcome, observed.duration = outcome, duration
    _child(REQUESTS, observed.method or "", observed.version or "", outcome).inc()
    if log.isEnabledFor(logging.INFO):
        later(_log_line, observed, outcome, duration)  # after the answer, with the others


def _log_line(observed: Observed, outcome: str, duration: float) -> None:
    """The call's ``switchboard.a2a`` line, in its request's context."""
    restore = observing(observed)  # made at the end of the loop's turn, outside the request
    try:
        log_info(
            log,
            "%s (A2A %s) -> %s%s: %s in %.1f ms",
            observed.method,
            observed.version,
            observed.agent_id or "no agent",
            f" (tier {observed.tier})" if observed.tier else "",
            outcome,
            duration * 1000,
        )
    finally:
        restore()


C = TypeVar("C", bound=Callable[..., Awaitable[Any]])


def observed_choice(choose: C) -> C:
    """Decorate the handler's choice of agent for a message (it returns a
    :class:`router.choose.choice.Choice`): count decisions by tier and agent, time them."""

    @functools.wraps(choose)
    async def observed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            choice = await choose(*args, **kwargs)
        except RpcError as error:
            if error.code == NO_MATCHING_AGENT:
                _decided("refused", "", started)
            raise
        _decided(choice.tier or choice.via, choice.agent.id, started)
        return choice

    return observed  # type: ignore[return-value]


def _decided(tier: str, agent: str, started: float) -> None:
    _child(DECISIONS, tier, agent).inc()
    RECENT.record(tier, agent)
    _child(DECISION_SECONDS, tier).observe(time.perf_counter() - started)
    observed = current()
    if observed is not None:
        observed.tier, observed.agent_id = tier, agent or None


class _Upstreamed:
    """One upstream stream's counts: its events, the time to its first, its outcome."""

    __slots__ = ("agent", "events", "outcome", "started", "waiting", "watching")

    def __init__(self, target: Any) -> None:
        self.watching = current()
        self.agent = _agent_of(target, self.watching)
        self.outcome, self.waiting = "cancelled", True
        self.events = _child(STREAM_EVENTS, self.agent)
        self.started = time.perf_counter()

    def first(self) -> None:
        """An event or the failure came: the time to the first, once."""
        if self.waiting:
            self.waiting = False
            elapsed = time.perf_counter() - self.started
            if self.watching is not None:
                self.watching.upstream_seconds += elapsed
            _child(UPSTREAM_SECONDS, self.agent, "stream").observe(elapsed)

    def done(self) -> None:
        """The stream ended, failed or was closed: count it by outcome."""
        if self.outcome == "cancelled" and not self.waiting:
            self.outcome = "ok"  # closed by the router after events: not the agent's failure
        _child(UPSTREAM_CALLS, self.agent, "stream", self.outcome).inc()


def _upstream_failure(error: RpcError) -> str:
    return _UPSTREAM_FAILURES.get(error.code, "error")


def _agent_of(target: Any, observed: Observed | None) -> str:
    agent: str = target.agent_id
    if observed is not None:
        observed.agent_id = agent
    return agent


def observed_call(call: C) -> C:
    """Decorate ``Upstream.call(self, target, ...)``: count and time calls to agents."""

    @functools.wraps(call)
    async def observed(self: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        watching = current()
        agent, outcome = _agent_of(target, watching), "error"
        started = time.perf_counter()
        try:
            answer = await call(self, target, *args, **kwargs)
            outcome = "agent_error" if "error" in answer else "ok"
            return answer
        except RpcError as error:
            outcome = _upstream_failure(error)
            raise
        except BaseException:
            outcome = "cancelled"
            raise
        finally:
            elapsed = time.perf_counter() - started
            if watching is not None:
                watching.upstream_seconds += elapsed
            _child(UPSTREAM_CALLS, agent, "call", outcome).inc()
            _child(UPSTREAM_SECONDS, agent, "call").observe(elapsed)

    return observed  # type: ignore[return-value]


S = TypeVar("S", bound=Callable[..., AsyncIterator[Any]])


def observed_stream(stream: S) -> S:
    """Decorate ``Upstream.stream(self, target, ...)``: count the stream and its events, time
    its first event. Closing the decorated generator closes the agent's at once."""

    @functools.wraps(stream)
    async def observed(
        self: Any, target: Any, *args: Any, **kwargs: Any
    ) -> AsyncGenerator[Any, None]:
        watch = _Upstreamed(target)
        inner = stream(self, target, *args, **kwargs)
        del args, kwargs  # the request: not held while the stream lasts
        try:
            async for item in inner:
                watch.first()
                watch.events.inc(getattr(item, "event_count", 1))  # Frames: several
                if isinstance(item, dict) and "error" in item:
                    watch.outcome = "agent_error"
                yield item
                del item  # nothing held while the agent is silent
        except RpcError as error:
            watch.first()
            watch.outcome = _upstream_failure(error)
            raise
        finally:
            watch.done()
            await inner.aclose()  # type: ignore[attr-defined]

    return observed  # type: ignore[return-value]
