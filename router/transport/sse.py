"""Server-Sent Events to clients: :class:`SseWriter` streams ``data: <json>\\r\\n\\r\\n``
events over an aiohttp response, with ``: ping`` keep-alive comments whenever nothing was
written for ``keepalive`` seconds. Its JSON is pure ASCII: clients that split lines like
:meth:`str.splitlines` (httpx ``aiter_lines()``, used by the a2a-sdk clients) also break at
U+2028, U+2029, U+0085 and a few ASCII controls, so a raw one inside a string would cut the
event in two. :meth:`SseWriter.send_json` writes JSON a caller serialized (the byte relay,
:mod:`router.forward.fastrelay`, which keeps those characters out), several events at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any

from aiohttp import web

__all__ = ["PENDING_BYTES", "SseWriter"]

PENDING_BYTES = 64 * 1024
"""At most this many bytes of :meth:`SseWriter.send_json` events are held unwritten."""


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
        """Stop the keep-alive task and end the response (quietly if the client is gone)."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._flushed()
        if self._response is not None and not self.lost.is_set():
            try:
                async with self._lock:
                    await self._response.write_eof()
            except ConnectionError:
                self.lost.set()

    async def _write(self, payload: bytes, *, hold: bool = False) -> None:
        if self._closed:
            raise RuntimeError("the event stream is closed")
        response = self.response
        if self.lost.is_set():
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
        if self.lost.is_set():
            raise ConnectionResetError("the client went away")
        try:
            async with self._lock:
                await response.write(payload)
                self._last_write = asyncio.get_running_loop().time()
        except ConnectionError:
            self.lost.set()
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
            self.lost.set()
        finally:
            self._flusher = None

    async def _flushed(self) -> None:
        """Wait until the held events are written (or the write failed)."""
        if self._flusher is not None:
            await asyncio.shield(self._flusher)

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
