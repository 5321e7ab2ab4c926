"""Awaiting with a deadline, and parsing whole SSE bodies, for the stream tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from router.forward.sse import SseEvent, SseParser

T = TypeVar("T")


async def within(aw: Awaitable[T], seconds: float = 5.0) -> T:
    """Await ``aw`` but fail fast instead of hanging the test run."""
    return await asyncio.wait_for(aw, seconds)


async def within_each(items: AsyncIterator[T], seconds: float = 5.0) -> AsyncIterator[T]:
    """``items``, failing fast when the next one does not come."""
    while True:
        try:
            yield await within(anext(items), seconds)
        except StopAsyncIteration:
            return


def parse_all(chunks: list[bytes], **limits: int) -> list[SseEvent]:
    """Every event of a body fed to a fresh :class:`SseParser` in ``chunks``, then its end."""
    parser = SseParser(**limits)
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    events.extend(parser.feed_eof())
    return events
