"""Fixtures of the tracing tests: an SDK tracer provider with an in-memory exporter, made the
global provider for one test (and the API's no-op again after it)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from router.tracing.spans import TRACER_NAME


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
