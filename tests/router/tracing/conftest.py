"""Fixtures of the tracing tests: an SDK tracer provider with an in-memory exporter, made the
global provider for one test (and none again after it), and an a2a-sdk agent that records the
trace headers it is sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from router.tracing.spans import TRACER_NAME
from tests.support.sdk_peers import (
    TaskEchoExecutor,
    echo_card,
    listening_socket,
    sdk_app,
    serve_asgi,
)


class _Exporter(InMemorySpanExporter):
    """Keeps spans in memory and wakes the tests waiting for one (spans end on the event
    loop's thread: the router and the SDK agents all run in the test's loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.waiters: list[tuple[str, asyncio.Future[ReadableSpan]]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        for span in spans:
            for name, future in list(self.waiters):
                if span.name == name and not future.done():
                    future.get_loop().call_soon_threadsafe(_resolve, future, span)
        return result


def _resolve(future: asyncio.Future[ReadableSpan], span: ReadableSpan) -> None:
    if not future.done():
        future.set_result(span)


class Spans:
    """The spans Switchboard finished (those of other instrumentation, such as the a2a-sdk's
    own, left out)."""

    def __init__(self, exporter: _Exporter) -> None:
        self.exporter = exporter

    async def ended(self, name: str, count: int = 1) -> list[ReadableSpan]:
        """The spans called ``name`` once ``count`` of them have ended (waits for them)."""
        while len(self.named(name)) < count:
            future: asyncio.Future[ReadableSpan] = asyncio.get_running_loop().create_future()
            self.exporter.waiters.append((name, future))
            try:
                if len(self.named(name)) < count:  # not ended in between
                    await asyncio.wait_for(future, timeout=10)
            finally:
                self.exporter.waiters.remove((name, future))
        return self.named(name)

    def all(self) -> list[ReadableSpan]:
        """Every finished Switchboard span, in the order they ended."""
        return [
            s
            for s in self.exporter.get_finished_spans()
            if s.instrumentation_scope is not None and s.instrumentation_scope.name == TRACER_NAME
        ]

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``."""
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``."""
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def clear(self) -> None:
        """Forget the spans finished so far."""
        self.exporter.clear()


def _reset_global_provider() -> None:
    # what opentelemetry's own test utilities do: the global provider may be set once
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
    trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[Spans]:
    """An SDK provider exporting to memory, installed globally for this test."""
    exporter = _Exporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    try:
        yield Spans(exporter)
    finally:
        provider.shutdown()
        _reset_global_provider()


@dataclass
class Agent:
    """A running SDK agent and the trace headers of every JSON-RPC call it received."""

    url: str
    port: int
    traceparents: list[str] = field(default_factory=list)
    tracestates: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def recording_agent() -> AsyncIterator[Agent]:
    """An a2a-sdk 1.x task echo agent on a random port, behind an ASGI middleware that
    records the ``traceparent``/``tracestate`` of each POST."""
    sock = listening_socket()
    port = sock.getsockname()[1]
    agent = Agent(f"http://127.0.0.1:{port}", port)
    inner = sdk_app(echo_card(agent.url), executor=TaskEchoExecutor())

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            agent.traceparents.append(headers.get(b"traceparent", b"").decode())
            agent.tracestates.append(headers.get(b"tracestate", b"").decode())
        await inner(scope, receive, send)

    async with serve_asgi(app, sock):
        yield agent
