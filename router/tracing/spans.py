"""The spans Switchboard records, their attribute names, and the hooks the core calls.

Every hook goes through the OpenTelemetry API, and only while a tracer provider is installed
(:func:`active`; :mod:`router.tracing.setup` installs the SDK's): without one the hooks call
the wrapped code directly and start no span at all, not even the API's no-op one (the
client's ``traceparent`` then reaches the agent through the forwarded headers, as it came).
Attributes are only computed for a span that records. No attribute carries message text, tokens or
credentials: methods, versions, agent and skill ids, scores, task ids, error codes.

Spans (names): ``A2A <method>`` (server, :mod:`router.tracing.middleware` renamed by
:func:`on_request`), ``choose agent`` (:func:`traced_choice`), ``agent <method>`` (client,
:func:`traced_call`, :func:`traced_stream`; its context goes to the agent in ``traceparent``
via :func:`inject`), ``relay stream`` (:func:`relayed`), ``translate <kind>``
(:func:`traced_translation`).
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from yarl import URL

from registry.netguard import redact_url
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    INTERNAL,
    INVALID_AGENT_RESPONSE,
    NO_MATCHING_AGENT,
    STREAM_FAILED,
    RpcError,
)

if TYPE_CHECKING:
    from router.choose.choice import Choice, Target
    from router.forward.call import Event
    from router.protocol.envelope import Request

__all__ = [
    "A2A_BINDING",
    "A2A_DIALECT",
    "A2A_METHOD",
    "A2A_VERSION",
    "AGENT",
    "ERROR_CODE",
    "FIRST_EVENT_MS",
    "MARGIN",
    "PINNED",
    "SCORE",
    "SKILL",
    "STREAM_EVENTS",
    "TIER",
    "TRACER_NAME",
    "TRANSLATION_FROM",
    "TRANSLATION_KIND",
    "TRANSLATION_TO",
    "VIA",
    "active",
    "chose",
    "inject",
    "now",
    "on_error",
    "on_request",
    "relayed",
    "traced_call",
    "traced_choice",
    "traced_stream",
    "traced_translation",
    "tracer",
]

TRACER_NAME = "switchboard"
"""The instrumentation scope of every Switchboard span."""

# -- attribute names (one place) ------------------------------------------------------------
A2A_METHOD = "a2a.method"
A2A_VERSION = "a2a.version"
A2A_DIALECT = "a2a.dialect"
A2A_BINDING = "a2a.binding"
PINNED = "switchboard.agent.pinned"
AGENT = "switchboard.agent.id"
SKILL = "switchboard.skill.id"
TIER = "switchboard.routing.tier"
VIA = "switchboard.routing.via"
SCORE = "switchboard.routing.score"
MARGIN = "switchboard.routing.margin"
ERROR_CODE = "rpc.jsonrpc.error_code"
STREAM_EVENTS = "switchboard.stream.events"
FIRST_EVENT_MS = "switchboard.stream.first_event_ms"
TRANSLATION_KIND = "switchboard.translation.kind"
TRANSLATION_FROM = "switchboard.translation.from"
TRANSLATION_TO = "switchboard.translation.to"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
URL_FULL = "url.full"

#: JSON-RPC errors that say Switchboard or the agent failed (the others are the caller's).
FAILURES = frozenset({INTERNAL, AGENT_UNAVAILABLE, STREAM_FAILED, INVALID_AGENT_RESPONSE})

F = TypeVar("F", bound=Callable[..., Any])
_INACTIVE = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_cached: tuple[Any, trace.Tracer] | None = None
_UNKNOWN = object()
_PROVIDER_FROM_ENV = OTEL_PYTHON_TRACER_PROVIDER in os.environ


def tracer() -> trace.Tracer:
    """Switchboard's tracer from the current global provider (the API's no-op without one)."""
    global _cached
    provider = trace.get_tracer_provider()
    if _cached is None or _cached[0] is not provider:
        _cached = (provider, provider.get_tracer(TRACER_NAME))
    return _cached[1]


def active() -> bool:
    """Whether a tracer provider is installed (else every hook is skipped).

    Called several times per request: the API's global is read directly when the API keeps
    it where 1.x does (``get_tracer_provider`` would look ``OTEL_PYTHON_TRACER_PROVIDER`` up
    in the environment on every call while none is set); else, or when that variable names a
    provider to load, through ``get_tracer_provider``."""
    provider = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and not _PROVIDER_FROM_ENV:
        return False
    if provider is None or provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
    return type(provider) not in _INACTIVE


def now() -> int:
    """The time in the unit spans take (nanoseconds since the epoch)."""
    return time.time_ns()


def inject(headers: MutableMapping[str, str]) -> None:
    """Put the current span context in ``headers`` (W3C ``traceparent``/``tracestate``, and
    ``baggage``), replacing what the client sent: the agent continues the router's span."""
    if active():
        propagate.inject(headers)


# -- the incoming call ------------------------------------------------------------------------


def on_request(rpc: Request, pinned: str | None) -> None:
    """Name the current (server) span after the A2A method and say what was asked."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.update_name(f"A2A {rpc.method}")
    span.set_attributes(
        {A2A_METHOD: rpc.method, A2A_VERSION: rpc.version, A2A_DIALECT: str(rpc.dialect)}
    )
    if pinned is not None:
        span.set_attribute(PINNED, pinned)


def on_error(error: RpcError) -> None:
    """The call is answered with ``error``: its code, and an error status when Switchboard or
    the agent failed (not for the caller's own mistakes, nor a refusal)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute(ERROR_CODE, error.code)
    if error.code == NO_MATCHING_AGENT:
        span.set_attribute(TIER, "refused")
    if error.code in FAILURES:
        span.set_status(Status(StatusCode.ERROR, _reason(error)))


# -- the decision -------------------------------------------------------------------------------


def chose(choice: Choice, span: Span | None = None) -> None:
    """Record ``choice`` (tier, agent, skill, score, margin) on ``span`` (default: current)."""
    span = span or trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {AGENT: choice.agent.id, VIA: choice.via}
    if choice.tier is not None:
        attributes[TIER] = choice.tier
    elif choice.via in ("task", "pinned"):
        attributes[TIER] = choice.via
    if choice.skill_id is not None:
        attributes[SKILL] = choice.skill_id
    if choice.score is not None:
        attributes[SCORE] = float(choice.score)
    if choice.margin is not None:
        attributes[MARGIN] = float(choice.margin)
    span.set_attributes(attributes)


def traced_choice(choose: F) -> F:
    """Wrap an async function returning a :class:`~router.choose.choice.Choice` in the
    ``choose agent`` span; the choice is recorded on it and on the request's span."""

    @functools.wraps(choose)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not active():
            return await choose(*args, **kwargs)
        request = trace.get_current_span()
        with tracer().start_as_current_span(
            "choose agent", record_exception=False, set_status_on_exception=False
        ) as span:
            try:
                choice = await choose(*args, **kwargs)
            except RpcError as error:
                if span.is_recording():
                    span.set_attribute(ERROR_CODE, error.code)
                    if error.code == NO_MATCHING_AGENT:
                        span.set_attribute(TIER, "refused")
                raise
            chose(choice, span)
            chose(choice, request)
            return choice

    return wrapper  # type: ignore[return-value]


# -- the upstream call --------------------------------------------------------------------------


def _client_attributes(target: Target, method: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        AGENT: target.agent_id,
        A2A_METHOD: method,
        A2A_VERSION: target.version,
        A2A_BINDING: target.binding,
        URL_FULL: redact_url(target.url),
    }
    try:
        url = URL(target.url)
        if url.host:
            attributes[SERVER_ADDRESS] = url.host
        if url.port:
            attributes[SERVER_PORT] = url.port
    except (ValueError, TypeError):
        pass
    return attributes


def _answered(span: Span, answer: Any) -> None:
    """The agent answered: an ``error`` answer marks the call failed, with its code."""
    if span.is_recording() and isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        code = answer["error"].get("code")
        if isinstance(code, int):
            span.set_attribute(ERROR_CODE, code)
        span.set_status(Status(StatusCode.ERROR, f"the agent answered JSON-RPC error {code}"))


def _failed(span: Span, error: BaseException) -> None:
    if not span.is_recording():
        return
    if isinstance(error, RpcError):
        span.set_attribute(ERROR_CODE, error.code)
        span.set_status(Status(StatusCode.ERROR, _reason(error)))
    else:
        span.set_status(Status(StatusCode.ERROR, type(error).__name__))


def traced_call(call: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
    """Wrap :meth:`Upstream.call <router.forward.upstream.Upstream.call>` in a client span
    ``agent <method>`` (current while the request is made, so :func:`inject` sends it)."""

    @functools.wraps(call)
    async def wrapper(
        self: Any, target: Target, method: str, params: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        if not active():
            return await call(self, target, method, params, **kwargs)
        with tracer().start_as_current_span(
            f"agent {method}",
            kind=SpanKind.CLIENT,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            if span.is_recording():
                span.set_attributes(_client_attributes(target, method))
            try:
                answer = await call(self, target, method, params, **kwargs)
            except Exception as error:
                _failed(span, error)
                raise
            _answered(span, answer)
            return answer

    return wrapper


def traced_stream(stream: Callable[..., AsyncGenerator[dict[str, Any], None]]) -> Any:
    """Wrap :meth:`Upstream.stream <router.forward.upstream.Upstream.stream>` in a client
    span ``agent <method>`` that lasts the stream and counts its events. The span is current
    only while the wrapped generator runs (never across a ``yield``)."""

    @functools.wraps(stream)
    def wrapper(
        self: Any, target: Target, method: str, params: dict[str, Any], **kwargs: Any
    ) -> AsyncGenerator[dict[str, Any], None]:
        events = stream(self, target, method, params, **kwargs)
        return _traced_stream(events, target, method) if active() else events

    return wrapper


async def _traced_stream(
    events: AsyncGenerator[dict[str, Any], None], target: Target, method: str
) -> AsyncGenerator[dict[str, Any], None]:
    """``events`` of an upstream stream in their client span (see :func:`traced_stream`)."""
    span = tracer().start_span(f"agent {method}", kind=SpanKind.CLIENT)
    if span.is_recording():
        span.set_attributes(_client_attributes(target, method))
    inside = trace.set_span_in_context(span)
    count = 0
    try:
        while True:
            token = otel_context.attach(inside)
            try:
                item = await anext(events)
            except StopAsyncIteration:
                break
            finally:
                otel_context.detach(token)
            count += 1
            _answered(span, item)
            yield item
    except Exception as error:
        _failed(span, error)
        raise
    finally:
        try:
            await events.aclose()
        finally:
            if span.is_recording():
                span.set_attribute(STREAM_EVENTS, count)
            span.end()


# -- the stream relay -----------------------------------------------------------------------------


def relayed(
    events: AsyncGenerator[Event, None], rpc: Request, choice: Choice, started: int
) -> AsyncGenerator[Event, None]:
    """``events`` (what the client is sent) in a ``relay stream`` span begun at ``started``
    (:func:`now`): the events counted, the time to the first one, an error event marked."""
    return _relayed(events, rpc, choice, started) if active() else events


async def _relayed(
    events: AsyncGenerator[Event, None], rpc: Request, choice: Choice, started: int
) -> AsyncGenerator[Event, None]:
    span = tracer().start_span("relay stream", start_time=started)
    if span.is_recording():
        span.set_attributes(
            {A2A_METHOD: rpc.method, A2A_VERSION: rpc.version, AGENT: choice.agent.id}
        )
    count = 0
    try:
        async for body, kind in events:
            count += getattr(body, "event_count", 1)  # Frames: several events
            if count == 1 and span.is_recording():
                span.set_attribute(FIRST_EVENT_MS, (now() - started) / 1e6)
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and span.is_recording():
                code = error.get("code")
                if isinstance(code, int):
                    span.set_attribute(ERROR_CODE, code)
                span.set_status(Status(StatusCode.ERROR, f"the stream ended with error {code}"))
            yield body, kind
    finally:
        try:
            await events.aclose()
        finally:
            if span.is_recording():
                span.set_attribute(STREAM_EVENTS, count)
            span.end()


# -- translation -------------------------------------------------------------------------------


def traced_translation(kind: str) -> Callable[[F], F]:
    """Wrap a translation function with ``src`` and ``dst`` (versions) parameters in a
    ``translate <kind>`` span."""

    def decorate(translate: F) -> F:
        signature = inspect.signature(translate)
        name = f"translate {kind}"

        @functools.wraps(translate)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not active():
                return translate(*args, **kwargs)
            with tracer().start_as_current_span(name) as span:
                if span.is_recording():
                    given = signature.bind(*args, **kwargs).arguments
                    span.set_attributes(
                        {
                            TRANSLATION_KIND: kind,
                            TRANSLATION_FROM: str(given.get("src")),
                            TRANSLATION_TO: str(given.get("dst")),
                        }
                    )
                return translate(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def _reason(error: RpcError) -> str:
    """What went wrong, in the error's own no-secret words (``data.reason`` when given)."""
    data = error.data if isinstance(error.data, dict) else {}
    reason = data.get("reason")
    return str(reason) if isinstance(reason, str) and reason else error.message
