"""Server-Sent Events: an incremental parser (upstream streams) and a writer (client streams).

:class:`SseParser` follows the WHATWG event-stream rules: lines end in CRLF, LF or CR (a CR at
the end of a chunk waits for the next one), lines starting with ``:`` are comments, ``data:``
lines of one event are joined with ``\\n``, an event is dispatched at a blank line and only when
it has data. Unlike a browser it also dispatches a last event that the stream ends without a
blank line (:meth:`SseParser.feed_eof`). Line length and event size are bounded.

:class:`SseWriter` streams ``data: <json>\\r\\n\\r\\n`` events to an aiohttp client, with
``: ping`` keep-alive comments whenever nothing was written for ``keepalive`` seconds. Its
JSON is pure ASCII: clients that split lines like :meth:`str.splitlines` (httpx
``aiter_lines()``, used by the a2a-sdk clients) also break at U+2028, U+2029, U+0085 and a
few ASCII controls, so a raw one inside a string would cut the event in two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from router.compat import codec

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "SseError",
    "SseEvent",
    "SseParser",
    "SseWriter",
]

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

_EOL = re.compile(rb"[\r\n]")
_BOM = b"\xef\xbb\xbf"
_CR = 0x0D
_LF = 0x0A


class SseError(ValueError):
    """An event stream that breaks the parser's limits (a line or an event too large).

    ``events`` holds the events the same :meth:`SseParser.feed` call completed before the
    violation, so a consumer can still deliver them; the parser is unusable afterwards.
    """

    def __init__(self, message: str, events: list[SseEvent] | None = None) -> None:
        super().__init__(message)
        self.events: list[SseEvent] = events or []


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event: its type (``"message"`` unless an ``event:`` field said otherwise),
    its data (``data:`` lines joined with ``\\n``), and the last ``id:``/``retry:`` seen."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Incremental event-stream parser: bytes in (:meth:`feed`), events out.

    Raises :class:`SseError` when a line exceeds ``max_line_bytes`` (even before its end has
    arrived) or an event's data exceeds ``max_event_bytes``. Comments are counted in
    :attr:`comments` and otherwise ignored.
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.max_line_bytes = max_line_bytes
        self.max_event_bytes = max_event_bytes
        self.comments = 0
        self._buf = bytearray()
        self._scan = 0  # bytes of _buf already known to hold no line end
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._last_id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Parse ``chunk``; return the events it completes (possibly none)."""
        self._buf += chunk
        if not self._started:
            if len(self._buf) < len(_BOM) and _BOM.startswith(bytes(self._buf)):
                return []
            self._started = True
            if self._buf.startswith(_BOM):
                del self._buf[: len(_BOM)]
        return self._lines(eof=False)

    def feed_eof(self) -> list[SseEvent]:
        """The stream ended: parse what is left, including an event with no blank line after it."""
        self._started = True
        events = self._lines(eof=True)
        if self._buf:
            self._check_line(len(self._buf))
            events.extend(self._line(bytes(self._buf)))
            self._buf.clear()
        if self._data:
            events.append(self._dispatch())
        self._reset_event()
        return events

    # -- internals ---------------------------------------------------------------------------

    def _lines(self, *, eof: bool) -> list[SseEvent]:
        buf = self._buf
        events: list[SseEvent] = []
        start = 0
        pos = self._scan
        while (match := _EOL.search(buf, pos)) is not None:
            end = match.start()
            if buf[end] == _CR:
                if end + 1 == len(buf) and not eof:
                    pos = end  # a CR LF may be split across chunks: wait for the next byte
                    break
                nxt = end + 2 if end + 1 < len(buf) and buf[end + 1] == _LF else end + 1
            else:
                nxt = end + 1
            try:
                self._check_line(end - start)
                events.extend(self._line(bytes(buf[start:end])))
            except SseError as exc:
                raise SseError(str(exc), events) from None
            start = pos = nxt
        else:
            pos = len(buf)
        del buf[:start]
        self._scan = pos - start
        try:
            self._check_line(len(buf) - (1 if buf.endswith(b"\r") else 0))
        except SseError as exc:
            raise SseError(str(exc), events) from None
        return events

    def _check_line(self, size: int) -> None:
        if size > self.max_line_bytes:
            raise SseError(f"an event-stream line exceeds {self.max_line_bytes} bytes")

    def _line(self, raw: bytes) -> list[SseEvent]:
        if not raw:
            if self._data:
                return [self._dispatch()]
            self._reset_event()
            return []
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            self.comments += 1
            return []
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_size += len(value) + 1
            if self._data_size > self.max_event_bytes:
                raise SseError(f"an event exceeds {self.max_event_bytes} bytes of data")
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._last_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return []

    def _dispatch(self) -> SseEvent:
        event = SseEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._last_id,
            retry=self._retry,
        )
        self._reset_event()
        return event

    def _reset_event(self) -> None:
        self._event = ""
        self._data = []
        self._data_size = 0


class SseWriter:
    """Streams JSON events to a client over an aiohttp :class:`~aiohttp.web.StreamResponse`.

    Usage: ``await w.prepare(request)``, then ``await w.send(obj)`` per event, finally
    ``await w.close()``. While no event is written for ``keepalive`` seconds a ``: ping``
    comment is written (a background task, cancelled by :meth:`close`).

    Writes to a client that went away raise :class:`ConnectionResetError` (aiohttp's
    ``ClientConnectionResetError``); :attr:`lost` is set as soon as any write, including a
    keep-alive, fails that way, so an idle stream notices a gone client within about
    ``keepalive`` seconds even while nothing else is written.

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

    def __init__(
        self,
        *,
        keepalive: float | None = 15.0,
        headers: Mapping[str, str] | None = None,
        status: int = 200,
    ) -> None:
        self.keepalive = keepalive
        self.lost = asyncio.Event()
        self._extra_headers = dict(headers or {})
        self._status = status
        self._response: web.StreamResponse | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_write = 0.0
        self._closed = False

    @property
    def response(self) -> web.StreamResponse:
        """The prepared response (RuntimeError before :meth:`prepare`)."""
        if self._response is None:
            raise RuntimeError("SseWriter.prepare() has not been called")
        return self._response

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    async def prepare(self, request: web.Request) -> web.StreamResponse:
        """Send the response headers (``text/event-stream``, no caching, no proxy buffering)
        and start the keep-alive task."""
        response = web.StreamResponse(status=self._status, headers=self._extra_headers)
        response.content_type = "text/event-stream"
        response.charset = "utf-8"
        response.headers["Cache-Control"] = "no-cache"
        response.headers["X-Accel-Buffering"] = "no"
        await response.prepare(request)
        self._response = response
        self._last_write = asyncio.get_running_loop().time()
        if self.keepalive is not None and self.keepalive > 0:
            self._task = asyncio.create_task(self._keepalive_loop())
        return response

    async def send(self, data: Any, *, event: str | None = None) -> None:
        """Write one event ``data: <json>`` (optionally with an ``event:`` type) and drain.

        The JSON is ASCII only (no raw line separator can end up on the wire) and strict:
        NaN and infinities raise :class:`ValueError` before anything is written.
        A v0.1 client's events are first converted (:func:`router.compat.codec.current`): one event
        may become several.
        """
        client = codec.current()
        items = await client.events(data) if client is not None else [data]
        head = f"event: {_single_line(event)}\r\n" if event else ""
        bodies = [_dumps(item) for item in items]  # all checked before anything is written
        await self._write("".join(f"{head}data: {body}\r\n\r\n" for body in bodies).encode())

    async def comment(self, text: str = "ping") -> None:
        """Write a comment line ``: text`` (ignored by clients; keeps proxies from timing out)."""
        await self._write(f": {_single_line(text)}\r\n\r\n".encode())

    async def wait_lost(self) -> None:
        """Return once the client is known to be gone (:attr:`lost` is set): a write failed,
        at the latest the next keep-alive. Meant to be raced against the upstream read with
        :func:`asyncio.wait` (wrap it in a task once; see the class docstring)."""
        await self.lost.wait()

    async def close(self) -> None:
        """Stop the keep-alive task and end the response (quietly if the client is gone)."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._response is not None and not self.lost.is_set():
            try:
                async with self._lock:
                    await self._response.write_eof()
            except ConnectionError:
                self.lost.set()

    async def _write(self, payload: bytes) -> None:
        if self._closed:
            raise RuntimeError("the event stream is closed")
        response = self.response
        try:
            async with self._lock:
                await response.write(payload)
                self._last_write = asyncio.get_running_loop().time()
        except ConnectionError:
            self.lost.set()
            raise

    async def _keepalive_loop(self) -> None:
        assert self.keepalive is not None
        loop = asyncio.get_running_loop()
        while not self.lost.is_set():
            delay = self._last_write + self.keepalive - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            try:
                await self.comment("ping")
            except ConnectionError:
                return  # _write has set `lost`
            except RuntimeError:
                return  # the response was ended without close(): nothing left to keep alive


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


# Every line break of str.splitlines(), which clients such as httpx's aiter_lines() honour.
_LINE_BREAKS = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _single_line(text: str) -> str:
    """``text`` with line breaks replaced by spaces (they would end the SSE field)."""
    return _LINE_BREAKS.sub(" ", text)
