"""One keep-alive HTTP/1.1 connection to an agent (an :class:`asyncio.Protocol`): a request
written whole, its answer read with aiohttp's C HTTP parser (llhttp, as aiohttp's own client
does: the same limits, ``Content-Length`` and chunked framing, refusal of ambiguous framing).

An answer is read either whole (:meth:`H1Conn.request`, unary calls: the body gathered into
one buffer as it arrives, bounded as it grows) or as it arrives (:meth:`H1Conn.open`, then
:meth:`H1Conn.read`: streams; the transport pauses while more than 128 KiB wait unread). No
``Accept-Encoding`` is sent by the pool, and a compressed answer is refused, never inflated.
The connection is reusable only when the answer ended cleanly and nothing came after it.

Nothing of a streamed answer's head is kept once it is handed over: an idle stream holds this
object, the parser, its payload reader and one silence timer.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from aiohttp.http import HttpResponseParser
from multidict import CIMultiDictProxy

__all__ = ["H1Conn", "H1Error", "H1Response", "TooLarge"]

_HIGH_WATER = 1 << 17  # unread bytes of a streamed answer above which the transport pauses


class H1Error(OSError):
    """A call that failed on the wire; :attr:`reason` says how, in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TooLarge(Exception):
    """The answer's body is longer than the pool's ``max_body_bytes``."""


class H1Response:
    """An agent's answer: status, reason phrase, headers and body (empty for the head of a
    streamed answer, whose body is read from the connection)."""

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: CIMultiDictProxy[str], body: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


class H1Conn(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight."""

    __slots__ = (
        "_answered",
        "_body",
        "_ended",
        "_failure",
        "_last",
        "_message",
        "_parser",
        "_paused",
        "_payload",
        "_reader",
        "_reusable",
        "_should_close",
        "_streamed",
        "_timeout",
        "_timer",
        "_waiter",
        "closed",
        "idle_handle",
        "loop",
        "max_body",
        "transport",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, max_body: int) -> None:
        self.loop = loop
        self.max_body = max_body
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_handle: asyncio.TimerHandle | None = None
        self._parser: Any = HttpResponseParser(
            self, loop, 2**16, response_with_body=True, read_until_eof=True, auto_decompress=False
        )
        self._waiter: asyncio.Future[H1Response] | None = None  # the answer, or a stream's head
        self._reader: asyncio.Future[None] | None = None  # a stream's read waiting for bytes
        self._message: Any = None  # a whole answer's head, until the answer is complete
        self._payload: Any = None
        self._body = bytearray()  # the body read so far (streams: not yet taken)
        self._streamed = False  # the answer is read as it arrives
        self._answered = False  # the answer's head came
        self._ended = False  # the answer's body is complete
        self._should_close = False
        self._failure: BaseException | None = None  # why a stream's answer failed
        self._paused = False
        self._reusable = False
        self._last = 0.0  # loop time of the last bytes received (read timeout)
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0

    # -- the StreamReader the parser feeds calls these; it is drained on every read --
    def pause_reading(self, **_: Any) -> None:
        """Ignored: the payload is drained into one buffer on every read (bounded by max_body
        for whole answers, by pausing the transport for streams)."""

    def resume_reading(self, **_: Any) -> None:
        """Ignored (see :meth:`pause_reading`)."""

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._busy():
            with contextlib.suppress(Exception):  # cut short: _finish sees it incomplete
                self._parser.feed_eof()  # an answer without framing ends with the connection
            if not self._finish():
                failure: BaseException = aiohttp.ServerDisconnectedError()
                if self._answered:
                    failure = aiohttp.ClientPayloadError("the answer was cut short")
                self._fail(failure)
        self._stop_timer()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        if not self._busy():
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        try:
            messages, _upgraded, _tail = self._parser.feed_data(data)
        except Exception as exc:
            self._fail(H1Error(f"malformed HTTP answer ({_short(exc)})"))
            return
        for message, payload in messages:
            if 100 <= message.code < 200 and message.code != 101:
                continue  # an interim answer (100 Continue, 103 Early Hints): the final follows
            if self._answered:  # one request, one answer: the rest is not ours
                self._fail(H1Error("malformed HTTP answer (more than one answer to a request)"))
                return
            self._head(message, payload)
            if not self._busy():
                return
        if self._payload is not None and self._drain() and self._finish():
            self._check_rest()

    # -- calls ---------------------------------------------------------------------------
    async def request(self, data: bytes, silence: float) -> H1Response:
        """Write ``data`` (a whole request) and wait for the whole answer, failing with
        TimeoutError when no bytes arrive for ``silence`` seconds."""
        self._start(data, silence, streamed=False)
        try:
            return await self._waiter  # type: ignore[misc]
        finally:
            self._stop_timer()
            self._waiter = None
            if not self._reusable:
                self.close()

    async def open(self, data: bytes, silence: float) -> H1Response:
        """Write ``data`` and wait for the answer's head (its body left empty: :meth:`read`
        it); TimeoutError when no bytes arrive for ``silence`` seconds. On failure the
        connection is closed."""
        self._start(data, silence, streamed=True)
        try:
            return await self._waiter  # type: ignore[misc]
        except BaseException:
            self.close()
            raise
        finally:
            self._stop_timer()
            self._waiter = None

    async def read(self, silence: float) -> bytes:
        """The next bytes of a streamed answer's body (b"" once it has ended); TimeoutError
        when none arrive for ``silence`` seconds, a transport error when the answer fails."""
        while not self._body:
            if self._ended:
                return b""
            if self._failure is not None:
                raise self._failure
            self._reader = self.loop.create_future()
            self._timeout = silence
            if self._timer is None:
                self._timer = self.loop.call_at(self._last + silence, self._check_silence)
            try:
                await self._reader
            finally:
                self._reader = None
        data = bytes(self._body)
        self._body.clear()
        if self._paused and not self.closed and self.transport is not None:
            self._paused = False
            self._last = self.loop.time()  # silence is counted while reading, not while paused
            self.transport.resume_reading()
        return data

    @property
    def reusable(self) -> bool:
        """Whether the last answer left the connection ready for another request."""
        return self._reusable and not self.closed

    def close(self) -> None:
        """Close the connection (an answer in flight fails)."""
        self.closed = True
        self._stop_timer()
        if self.idle_handle is not None:
            self.idle_handle.cancel()
            self.idle_handle = None
        if self.transport is not None:
            self.transport.close()

    # -- internals -----------------------------------------------------------------------
    def _start(self, data: bytes, silence: float, *, streamed: bool) -> None:
        assert self.transport is not None
        self._waiter = self.loop.create_future()
        self._payload = self._failure = self._message = None
        self._body = bytearray()
        self._streamed = streamed
        self._answered = self._ended = self._reusable = False
        self._timeout = silence
        self._last = self.loop.time()
        self._timer = self.loop.call_at(self._last + silence, self._check_silence)
        self.transport.write(data)

    def _busy(self) -> bool:
        """Whether an answer is awaited or being read."""
        if self._streamed:
            return not self._ended and self._failure is None
        return self._waiter is not None and not self._waiter.done()

    def _head(self, message: Any, payload: Any) -> None:
        """The final answer's head came: check it; a stream's is handed over at once."""
        self._answered, self._payload = True, payload
        self._should_close = message.should_close
        length = message.headers.get("Content-Length")
        if not self._streamed and length and length.isdigit() and int(length) > self.max_body:
            self._fail(TooLarge())
            return
        coding = _content_coding(message.headers)
        if coding is not None:
            self._fail(H1Error(f"the agent sent a compressed answer ({coding}), not asked for"))
            return
        if not self._streamed:
            self._message = message
        elif self._waiter is not None and not self._waiter.done():
            head = H1Response(message.code, message.reason, message.headers, b"")
            self._waiter.set_result(head)

    def _drain(self) -> bool:
        """Move what the payload holds into the body (within max_body for a whole answer);
        whether that went well (if not, the call failed and the connection is closed)."""
        exc = self._payload.exception()
        if exc is not None:
            self._fail(H1Error(f"malformed HTTP answer ({_short(exc)})"))
            return False
        chunk = self._payload.read_nowait(-1)
        if not chunk:
            return True
        self._body += chunk
        if self._streamed:
            self._wake()
            if len(self._body) > _HIGH_WATER and not self._paused and not self.closed:
                self._paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]
        elif len(self._body) > self.max_body:
            self._fail(TooLarge())
            return False
        return True

    def _finish(self) -> bool:
        """End the answer once its body is complete; whether it was."""
        payload = self._payload
        if payload is None or not payload.is_eof():
            return False
        if self._streamed:
            if not self._ended and self._drain():
                self._ended = True
                self._payload = None
                self._reusable = not self._should_close and not self.closed
                self._stop_timer()
                self._wake()
            return True
        message = self._message
        if self._waiter is None or message is None:
            return False
        if self._waiter.done() or not self._drain():
            return True
        self._reusable = not self._should_close and not self.closed
        answer = H1Response(message.code, message.reason, message.headers, bytes(self._body))
        self._body, self._message = bytearray(), None
        self._waiter.set_result(answer)
        return True

    def _check_rest(self) -> None:
        """Close the connection if the read that ended the answer held bytes beyond it.

        The parser has no call that says how much of a read an answer used; after a complete
        answer it is back at the start of a message, and only bytes beyond the answer start
        another one (so that ``feed_eof`` makes a message of them or fails). Such bytes are
        nobody's answer: reusing the connection would read them as the next request's."""
        if not self._reusable:
            return
        try:
            started = self._parser.feed_eof() is not None
        except Exception:
            started = True
        if started:
            self._reusable = False
            self.close()

    def _fail(self, exc: BaseException) -> None:
        self._reusable = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        elif self._streamed and not self._ended and self._failure is None:
            self._failure = exc
            self._wake()
        self.close()

    def _wake(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    def _check_silence(self) -> None:
        self._timer = None
        waiting = self._waiter is not None and not self._waiter.done()
        if not waiting and self._reader is None:
            return  # a stream nobody reads now: the next read arms the timer again
        due = self._last + self._timeout
        if self.loop.time() >= due:
            self._fail(TimeoutError())
        else:
            self._timer = self.loop.call_at(due, self._check_silence)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _content_coding(headers: CIMultiDictProxy[str]) -> str | None:
    """The answer's ``Content-Encoding`` unless it is none or identity (none is asked for:
    the pool sends no ``Accept-Encoding``, and a body is never inflated here)."""
    codings = [c.strip() for v in headers.getall("Content-Encoding", ()) for c in v.split(",")]
    codings = [c for c in codings if c and c.lower() != "identity"]
    return f"Content-Encoding: {', '.join(codings)}"[:100] if codings else None


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
