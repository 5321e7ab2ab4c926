"""The seam between a transport and the routing core: one call in, one answer out.

A transport (today the JSON-RPC binding over aiohttp, :mod:`router.transport.jsonrpc`) reads
an HTTP request into a :class:`Call`; the core (:class:`router.forward.handler.Router`)
answers it with a :class:`Reply` (one JSON-RPC body) or an :class:`EventStream` (JSON-RPC
bodies, one per event). Both are already in the client's version and dialect; the transport
only encodes them (JSON, or Server-Sent Events) and notices when the client goes away. The
core never sees the web framework.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from registry.access.principal import ANONYMOUS, Principal
from router.protocol.envelope import Request

__all__ = ["Call", "Event", "EventStream", "Frames", "Reply"]


class Frames(bytes):
    """Stream events ready for the wire: ``event_count`` plain data events, each
    ``data: <json>\\r\\n\\r\\n`` (one line of JSON with no character a client reads as a
    line break), as the byte relay (:mod:`router.forward.fastrelay`) makes them."""

    event_count: int

    def __new__(cls, events: list[bytes]) -> Frames:
        """``events``, each one event's JSON, framed and joined."""
        framed = super().__new__(cls, b"data: " + b"\r\n\r\ndata: ".join(events) + b"\r\n\r\n")
        framed.event_count = len(events)
        return framed


Event = tuple[dict[str, Any] | bytes, str | None]
"""One stream event: its JSON-RPC body and its SSE event type (None: a plain data event).
The body is bytes (the body's JSON, one line) only on a stream whose transport takes bytes
(:attr:`EventStream.as_bytes`); :class:`Frames` there are several events at once, framed."""


@dataclass(frozen=True)
class Call:
    """One A2A call as the core sees it.

    ``rpc`` is the parsed request (its ``version`` and ``dialect`` say what the client
    speaks); ``headers`` the client's headers that matter downstream (forwarded ones,
    extensions, ``Connection``); ``pinned`` the agent of a per-agent endpoint; ``caller`` who
    is calling, when a transport authenticated it; ``base_url`` where clients reach
    Switchboard (for cards an answer carries); ``binding`` the protocol binding the client
    called in (``JSONRPC``, ``HTTP+JSON``, ``GRPC``: for logs and metrics; the core answers
    every binding alike).
    """

    rpc: Request
    headers: Mapping[str, str] = field(default_factory=dict)
    pinned: str | None = None
    caller: Principal = ANONYMOUS
    base_url: str = ""
    binding: str = "JSONRPC"


@dataclass(frozen=True)
class Reply:
    """A one-body answer, with the response headers the client should see."""

    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)


class EventStream:
    """A streamed answer: :attr:`events` in order, then the end of the stream.

    A transport that writes events as JSON text sets :attr:`as_bytes` before reading
    :attr:`events`: bodies may then come as that text, UTF-8 encoded, to be written as they
    are. The transport must call :meth:`aclose` once it is done, whether the stream ended, the
    client went away or writing failed: it closes the upstream connection and frees the
    stream's slot (once; later calls do nothing).
    """

    def __init__(
        self,
        events: AsyncGenerator[Event, None],
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.events = events
        self.headers: Mapping[str, str] = dict(headers or {})
        self.as_bytes = False
        self._closers = [on_close] if on_close is not None else []
        self._closed = False

    def takes_bytes(self) -> bool:
        """Whether the transport takes bodies as their JSON text (:attr:`as_bytes`)."""
        return self.as_bytes

    def add_closer(self, closer: Callable[[], Awaitable[Any]]) -> None:
        """Also run ``closer`` when the stream is closed (after those added before)."""
        self._closers.append(closer)

    async def aclose(self) -> None:
        """Stop the events and release what the stream holds (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.events.aclose()
        finally:
            for closer in self._closers:
                await closer()
