"""Server-Sent Events to clients: :class:`SseWriter` streams ``data: <json>\\r\\n\\r\\n``
events over an aiohttp response, with ``: ping`` keep-alive comments whenever nothing was
written for ``keepalive`` seconds. Its JSON is pure ASCII: clients that split lines like
:meth:`str.splitlines` (httpx ``aiter_lines()``, used by the a2a-sdk clients) also break at
U+2028, U+2029, U+0085 and a few ASCII controls, so a raw one inside a string would cut the
event in two. :meth:`SseWriter.send_json` writes JSON a caller serialized (the byte relay,
:mod:`router.forward.fastrelay`, which keeps those characters out), several events at a time.

An idle stream costs little: the keep-alives of all writers on an event loop share one timer
(:class:`_Pings`, a task only for the moment a ping is written), and a writer keeps no
:class:`asyncio.Event` unless :attr:`SseWriter.lost` is asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

__all__ = ["PENDING_BYTES", "SseWriter"]

PENDING_BYTES = 64 * 1024
"""At most this many bytes of :meth:`SseWriter.send_json` events are held unwritten."""


class SseWriter:
    """Streams JSON events to a client over an aiohttp :class:`~aiohttp.web.StreamResponse`.

    Usage: ``await w.prepare(request)``, then ``await w.send(obj)`` per event, finally
    ``await w.close()``. While no event is written for ``keepalive`` seconds a ``: ping``
    comment is written (by the event loop's shared keep-alive timer; :meth:`close` stops it).

    Writes to a client that went away raise :class:`ConnectionResetError` (aiohttp's
    ``ClientConnectionResetError``); :attr:`lost` is set as soon as any write, including a
    keep-alive, fails that way, so an idle stream notices a gone client within about
    ``keepalive`` seconds even while nothing else is written. :meth:`on_lost` registers a
    callback for that moment (the JSON-RPC transport cancels its handler with it).

    A proxy waiting on a silent upstream should race each read against :meth:`wait_lost`, so
    that it stops (and closes the upstream connection) as soon as the client is gone::

        gone = asyncio.ensure_future(writer.wait_lost())
        try:
            while True:
                next_event = asyncio.ensure_future(anext(events, None))
                done, _ = await asyncio.wait(
                    {next_event, gone}, return_when=asyncio.FIRST_COMPLETED
                )
                if next_event not in done:  # the client left while the agent was silent
                    next_event.cancel()
                    await asyncio.wait({next_event})  # the generator closes its connection
                    break
                if (event := next_event.result()) is None:
                    break
                await writer.send(event)
        finally:
            gone.cancel()
            await events.aclose()
    """

    __slots__ = (
        "_event",
        "_flusher",
        "_held",
        "_held_bytes",
        "_last_write",
        "_lock",
        "_lost",
        "_on_lost",
        "_ping",
        "_pinging",
        "_prepare",
        "_response",
        "closed",
        "keepalive",
    )

    def __init__(
        self,
        *,
        keepalive: float | None = 15.0,
        headers: Mapping[str, str] | None = None,
        status: int = 200,
    ) -> None:
        self.keepalive = keepalive
        self.closed = False
        """True after :meth:`close`."""
        self._prepare: tuple[int, Mapping[str, str] | None] | None = (status, headers)
        self._response: web.StreamResponse | None = None
        self._lock = asyncio.Lock()  # its waiter queue is made only when two writes meet
        self._last_write = 0.0
        self._lost = False
        self._event: asyncio.Event | None = None  # made by `lost`, on demand
        self._on_lost: Callable[[], None] | None = None
        self._ping: list[Any] | None = None  # this writer's entry in the shared timer
        self._pinging: asyncio.Task[None] | None = None  # a keep-alive being written
        self._held: list[bytes] = []  # events of send_json() not written yet
        self._held_bytes = 0
        self._flusher: asyncio.Task[None] | None = None

    @property
    def response(self) -> web.StreamResponse:
        """The prepared response (RuntimeError before :meth:`prepare`)."""
        if self._response is None:
            raise RuntimeError("SseWriter.prepare() has not been called")
        return self._response

    @property
    def lost(self) -> asyncio.Event:
        """Set once the client is known to be gone (a write failed)."""
        if self._event is None:
            self._event = asyncio.Event()
            if self._lost:
                self._event.set()
        return self._event

    @property
    def is_lost(self) -> bool:
        """Whether the client is known to be gone (:attr:`lost` without making the event)."""
        return self._lost

    def on_lost(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback`` (no arguments, from whichever task noticed it) once the client is
        known to be gone; None removes it. One callback at a time."""
        self._on_lost = callback

    async def prepare(self, request: web.Request) -> web.StreamResponse:
        """Send the response headers (``text/event-stream``, no caching, no proxy buffering)
        and start the keep-alives."""
        status, headers = self._prepare or (200, None)
        self._prepare = None
        response = web.StreamResponse(status=status, headers=headers)
        response.content_type = "text/event-stream"
        response.charset = "utf-8"
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"
        await response.prepare(request)
        self._response = response
        loop = asyncio.get_running_loop()
        self._last_write = loop.time()
        if self.keepalive is not None and self.keepalive > 0:
            self._ping = _Pings.of(loop).add(self)
        return response

    async def send(self, data: Any, *, event: str | None = None) -> None:
        """Write one event ``data: <json>`` (optionally with an ``event:`` type) and drain.

        The JSON is ASCII only (no raw line separator can end up on the wire) and strict:
        NaN and infinities raise :class:`ValueError` before anything is written.
        """
        head = f"event: {_single_line(event)}\r\n" if event else ""
        await self._write(f"{head}data: {_dumps(data)}\r\n\r\n".encode())

    async def send_json(self, data: bytes, *, event: str | None = None) -> None:
        """Write one event whose data is ``data``, JSON already serialized by the caller, who
        vouches that it is one line with no character a client would read as a line break
        (see the module docstring).

        Such events are written together with those that follow before the stream's task next
        waits (an upstream chunk of many events: one socket write), at most
        :data:`PENDING_BYTES` held; :meth:`send`, :meth:`comment` and :meth:`close` write
        what is held first. A failed write of held events sets :attr:`lost` (the next write
        raises :class:`ConnectionResetError`).
        """
        head = f"event: {_single_line(event)}\r\n".encode() if event else b""
        await self._write(head + b"data: " + data + b"\r\n\r\n", hold=True)

    async def send_frames(self, frames: bytes) -> None:
        """Write events already framed (``data: <json>\\r\\n\\r\\n`` each, the JSON as
        :meth:`send_json` takes it) in one write, after those held."""
        await self._write(frames)

    async def comment(self, text: str = "ping") -> None:
        """Write a comment line ``: text`` (ignored by clients; keeps proxies from timing out)."""
        await self._write(f": {_single_line(text)}\r\n\r\n".encode())

    async def wait_lost(self) -> None:
        """Return once the client is known to be gone (:attr:`lost` is set): a write failed,
        at the latest the next keep-alive. Meant to be raced against the upstream read with
        :func:`asyncio.wait` (wrap it in a task once; see the class docstring)."""
        await self.lost.wait()

    async def close(self) -> None:
        """Stop the keep-alives and end the response (quietly if the client is gone)."""
        if self.closed:
            return
        self.closed = True
        self._unschedule()
        if (pinging := self._pinging) is not None:
            pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pinging
        await self._flushed()
        if self._response is not None and not self._lost:
            try:
                async with self._lock:
                    await self._response.write_eof()
            except ConnectionError:
                self._set_lost()

    async def _write(self, payload: bytes, *, hold: bool = False) -> None:
        if self.closed:
            raise RuntimeError("the event stream is closed")
        response = self.response
        if self._lost:
            raise ConnectionResetError("the client went away")
        if hold:
            self._held.append(payload)
            self._held_bytes += len(payload)
            if self._flusher is None:
                self._flusher = asyncio.create_task(self._flush(response))
            if self._held_bytes < PENDING_BYTES:
                return
        await self._flushed()
        if hold:
            return
        if self._lost:
            raise ConnectionResetError("the client went away")
        try:
            async with self._lock:
                await response.write(payload)
                self._last_write = asyncio.get_running_loop().time()
        except ConnectionError:
            self._set_lost()
            raise

    async def _flush(self, response: web.StreamResponse) -> None:
        """Write the held events, those held meanwhile too (a task of its own)."""
        try:
            while self._held:
                payload = b"".join(self._held)
                self._held.clear()
                self._held_bytes = 0
                async with self._lock:
                    await response.write(payload)
                    self._last_write = asyncio.get_running_loop().time()
        except (ConnectionError, RuntimeError):
            self._held.clear()
            self._set_lost()
        finally:
            self._flusher = None

    async def _flushed(self) -> None:
        """Wait until the held events are written (or the write failed)."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

    def _set_lost(self) -> None:
        if self._lost:
            return
        self._lost = True
        self._unschedule()
        if self._event is not None:
            self._event.set()
        if (callback := self._on_lost) is not None:
            self._on_lost = None
            callback()

    def _unschedule(self) -> None:
        if self._ping is not None:
            _Pings.drop(self._ping)
            self._ping = None

    def _due(self) -> float:
        """When the next keep-alive is due (the shared timer asks)."""
        assert self.keepalive is not None
        return self._last_write + self.keepalive

    def _start_ping(self) -> None:
        """Write a keep-alive now, in a short task (the shared timer calls this)."""
        if self._pinging is None and not self.closed and not self._lost:
            self._pinging = asyncio.ensure_future(self._write_ping())

    async def _write_ping(self) -> None:
        try:
            await self.comment("ping")
        except ConnectionError:
            pass  # _write has set `lost` (and stopped the keep-alives)
        except RuntimeError:
            self._unschedule()  # the response was ended without close(): nothing to keep alive
        finally:
            self._pinging = None


class _Pings:
    """The keep-alive timer of every :class:`SseWriter` on one event loop: a heap of
    ``[due, n, writer]`` entries and one :class:`asyncio.TimerHandle` for the earliest.
    A due writer that wrote meanwhile is put back at its new due time; one that did not
    writes a ping. A closed writer's entry is emptied (``writer = None``) and dropped when
    it comes up; the timer goes away with the last writer."""

    __slots__ = ("_at", "_heap", "_live", "_loop", "_timer")

    _loops: dict[asyncio.AbstractEventLoop, _Pings] = {}
    _numbers = itertools.count()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[list[Any]] = []
        self._live = 0
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Pings:
        """The timer of ``loop`` (made on first use)."""
        pings = cls._loops.get(loop)
        if pings is None:
            pings = cls._loops[loop] = cls(loop)
        return pings

    @classmethod
    def drop(cls, entry: list[Any]) -> None:
        """Stop the keep-alives of ``entry``'s writer."""
        if entry[2] is None:
            return
        entry[2] = None
        pings = cls._loops.get(entry[3])
        if pings is not None:
            pings._live -= 1
            if pings._live == 0:  # nothing left to keep alive: no timer, no entries
                if pings._timer is not None:
                    pings._timer.cancel()
                del cls._loops[entry[3]]

    def add(self, writer: SseWriter) -> list[Any]:
        """Keep ``writer`` alive; its entry (for :meth:`drop`)."""
        entry = [writer._due(), next(self._numbers), writer, self._loop]
        heapq.heappush(self._heap, entry)
        self._live += 1
        self._arm()
        return entry

    def _arm(self) -> None:
        at = self._heap[0][0]
        if self._timer is not None:
            if self._at <= at:
                return
            self._timer.cancel()
        self._at = at
        self._timer = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time() + 0.001  # a timer may fire a hair early
        heap = self._heap
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            writer: SseWriter | None = entry[2]
            if writer is None:
                continue
            due = writer._due()
            if due <= now:
                writer._start_ping()
                assert writer.keepalive is not None
                due = now + writer.keepalive  # checked again then (the ping's time counts)
            entry[0] = due
            heapq.heappush(heap, entry)
        if heap and self._live:
            self._arm()


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


# Every line break of str.splitlines(), which clients such as httpx's aiter_lines() honour.
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _single_line(text: str) -> str:
    """``text`` with line breaks replaced by spaces (they would end the SSE field)."""
    return _LINE_BREAKS.sub(" ", text)
