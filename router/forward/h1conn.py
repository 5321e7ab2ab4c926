"""One keep-alive HTTP/1.1 connection to an agent (an :class:`asyncio.Protocol`): a request
written whole, its answer read with httptools' parser (llhttp, the parser aiohttp and Node.js
use, with the leniencies aiohttp's client allows: a missing CR before LF, spaces after a chunk
size, lenient header values, but no NUL in them). Head limits as aiohttp's client: 128 fields of
at most 8,190 bytes; and at most 64 KiB of input that makes no progress (a head, trailers) at a
time. The head must be whole within the silence allowed (a head dripped a byte at a time, or an
endless run of interim 1xx answers, fails then; more than 16 interim answers fail at once).

An answer is read either whole (:meth:`H1Conn.request`, unary calls: the body gathered into
one buffer as it arrives, bounded as it grows) or as it arrives (:meth:`H1Conn.open`, then
:meth:`H1Conn.read`: streams; the transport pauses while more than 128 KiB wait unread). The pool
sends ``Accept-Encoding: identity``, and a compressed answer is refused, never inflated.
The connection is reusable only when the answer ended cleanly and nothing came after it.

The parser hands over each header, body piece and the answer's end as callbacks, so nothing
is buffered twice and nothing of a streamed answer's head is kept once it is handed over: an
idle stream holds this object, the parser and its place in the pool's SilenceWatch.
"""

from __future__ import annotations

import asyncio

import aiohttp
import httptools
from multidict import CIMultiDict, CIMultiDictProxy

__all__ = ["H1Conn", "H1Error", "H1Response", "SilenceWatch", "TooLarge"]

_HIGH_WATER = 1 << 17  # unread bytes of a streamed answer above which the transport pauses
_MAX_FIELDS = 128  # header fields of an answer (aiohttp's client: the same)
_MAX_FIELD = 8190  # bytes of a header's name or value, or of the reason phrase (the same)
_MAX_STALLED = 1 << 16  # bytes fed in a row without a head, body or end coming of them
_MAX_INTERIM = 16  # interim (1xx) answers before the final one
_SWITCHED = "malformed HTTP answer (a protocol switch, not asked for)"


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


class _Refused(Exception):
    """Raised in a parser callback: the answer is refused with this reason."""

    def __init__(self, failure: BaseException) -> None:
        super().__init__(str(failure))
        self.failure = failure


class H1Conn(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight."""

    __slots__ = (
        "_answered",
        "_began",
        "_body",
        "_ended",
        "_failure",
        "_fields",
        "_head",
        "_interims",
        "_last",
        "_parser",
        "_paused",
        "_reader",
        "_reason",
        "_reusable",
        "_should_close",
        "_stalled",
        "_streamed",
        "_timeout",
        "_timer",
        "_until_eof",
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
        self._parser = httptools.HttpResponseParser(self)
        self._parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self._waiter: asyncio.Future[H1Response] | None = None  # the answer, or a stream's head
        self._reader: asyncio.Future[None] | None = None  # a stream's read waiting for bytes
        self._head: H1Response | None = None  # a whole answer's head, until it is complete
        self._fields: list[tuple[str, str]] | None = None  # the head being read
        self._reason = bytearray()
        self._body = bytearray()  # the body read so far (streams: not yet taken)
        self._streamed = False  # the answer is read as it arrives
        self._answered = False  # the final answer's head came
        self._ended = False  # the answer is complete
        self._until_eof = False  # the answer's body ends with the connection
        self._should_close = False
        self._failure: BaseException | None = None  # why a stream's answer failed
        self._paused = False
        self._reusable = False
        self._stalled = 0  # bytes fed since the parser last made progress
        self._last = 0.0  # loop time of the last bytes received (read timeout)
        self._began = 0.0  # loop time the request was written (the head's deadline)
        self._interims = 0  # interim (1xx) answers to this request
        self._timer: asyncio.TimerHandle | None = None
        self._timeout = 0.0

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._busy():
            if self._answered and self._until_eof:
                self._complete()  # an answer without framing ends with the connection
                self._deliver()
            elif self._answered:
                self._fail(aiohttp.ClientPayloadError("the answer was cut short"))
            else:
                self._fail(aiohttp.ServerDisconnectedError())
        self._stop_timer()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def data_received(self, data: bytes) -> None:
        self._last = self.loop.time()
        if not self._busy():
            self.close()  # bytes nobody asked for: the connection cannot be trusted
            return
        self._stalled += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(H1Error(_SWITCHED))
            return
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _Refused):  # raised in a callback: its reason
                self._fail(exc.__context__.failure)
            elif self._ended:  # garbage after a complete answer: never reused
                self._reusable = False
                self._deliver()
                self.close()
            else:
                self._fail(H1Error(f"malformed HTTP answer ({_short(exc)})"))
            return
        if self._ended:
            self._deliver()
        elif self._stalled > _MAX_STALLED:
            self._fail(H1Error("malformed HTTP answer (a head or trailer too large)"))

    # -- the parser's callbacks ----------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._answered:  # bytes beyond the answer: nobody's, the connection is not reused
            self._reusable = False
            if not self._busy():
                self.close()
            return
        self._fields, self._reason = [], bytearray()

    def on_status(self, data: bytes) -> None:
        self._reason += data
        if len(self._reason) > _MAX_FIELD:
            raise _Refused(H1Error("malformed HTTP answer (a reason phrase too long)"))

    def on_header(self, name: bytes, value: bytes) -> None:
        fields = self._fields
        if fields is None or self._answered:
            return  # a trailer: not read
        if len(name) > _MAX_FIELD or len(value) > _MAX_FIELD or len(fields) >= _MAX_FIELDS:
            raise _Refused(H1Error("malformed HTTP answer (a header too large or too many)"))
        if b"\x00" in value:  # llhttp's lenient values let it through; aiohttp refuses it too
            raise _Refused(H1Error("malformed HTTP answer (a NUL in a header value)"))
        fields.append((name.decode("latin-1"), value.decode("utf-8", "surrogateescape")))

    def on_headers_complete(self) -> None:
        self._stalled = 0
        if self._answered:  # a second answer, in the read that ended the first: which is real?
            raise _Refused(H1Error("malformed HTTP answer (more than one answer to a request)"))
        status = self._parser.get_status_code()
        if status == 101:
            raise _Refused(H1Error(_SWITCHED))
        if 100 <= status < 200:
            self._fields = None  # an interim answer (100 Continue, 103 Early Hints)
            self._interims += 1
            if self._interims > _MAX_INTERIM:
                raise _Refused(
                    H1Error(f"malformed HTTP answer (more than {_MAX_INTERIM} interim 1xx answers)")
                )
            return
        headers = CIMultiDictProxy(CIMultiDict(self._fields or ()))
        self._fields, self._answered = None, True
        self._should_close = not self._parser.should_keep_alive()
        reason = self._reason.decode("utf-8", "surrogateescape").strip()
        self._until_eof = status not in (204, 304) and _unframed(headers)
        length = headers.get("Content-Length", "")
        if not self._streamed and length.isdigit() and int(length) > self.max_body:
            raise _Refused(TooLarge())
        coding = _content_coding(headers)
        if coding is not None:
            raise _Refused(H1Error(f"the agent sent a compressed answer ({coding}), not asked for"))
        head = H1Response(status, reason, headers, b"")
        if not self._streamed:
            self._head = head
        elif self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(head)

    def on_body(self, data: bytes) -> None:
        self._stalled = 0
        if self._ended:
            return  # a second answer's (refused when its head came)
        self._body += data
        if self._streamed:
            self._wake()
            if len(self._body) > _HIGH_WATER and not self._paused and not self.closed:
                self._paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]
        elif len(self._body) > self.max_body:
            raise _Refused(TooLarge())

    def on_message_complete(self) -> None:
        self._stalled = 0
        if self._answered and not self._ended:
            self._complete()

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

    async def read(self, silence: float, watch: SilenceWatch) -> bytes:
        """The next bytes of a streamed answer's body (b"" once it has ended); TimeoutError
        when none arrive for ``silence`` seconds (noticed by ``watch``), a transport error
        when the answer fails."""
        while not self._body:
            if self._ended:
                return b""
            if self._failure is not None:
                raise self._failure
            self._reader = self.loop.create_future()
            self._timeout = silence
            watch.add(self)
            try:
                await self._reader
            finally:
                self._reader = None
                watch.discard(self)
        data = bytes(self._body)
        self._body.clear()
        if self._paused and not self.closed and self.transport is not None:
            self._paused = False
            self._last = self.loop.time()  # silence is counted while reading, not while paused
            self.transport.resume_reading()
        return data

    def silent(self, now: float) -> bool:
        """Whether a read has waited longer than its silence allows (at loop time ``now``)."""
        return self._reader is not None and now >= self._last + self._timeout

    def time_out(self) -> None:
        """Fail the answer being read: the agent was silent for too long."""
        self._fail(TimeoutError())

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
        self._head = self._failure = None
        self._body = bytearray()
        self._streamed = streamed
        self._answered = self._ended = self._reusable = self._until_eof = False
        self._stalled = self._interims = 0
        self._timeout = silence
        self._last = self._began = self.loop.time()
        self._timer = self.loop.call_at(self._last + silence, self._check_silence)
        self.transport.write(data)

    def _busy(self) -> bool:
        """Whether an answer is awaited or being read."""
        if self._streamed:
            return not self._ended and self._failure is None
        return self._waiter is not None and not self._waiter.done()

    def _complete(self) -> None:
        """The answer ended (handed over at the end of the read that ended it)."""
        self._ended = True
        self._reusable = not self._should_close and not self._until_eof and not self.closed

    def _deliver(self) -> None:
        """Hand a whole answer over, wake a stream's reader."""
        if self._streamed:
            self._stop_timer()
            self._wake()
            return
        head, self._head = self._head, None
        if head is not None and self._waiter is not None and not self._waiter.done():
            head.body, self._body = bytes(self._body), bytearray()
            self._waiter.set_result(head)

    def _fail(self, exc: BaseException) -> None:
        self._reusable = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        elif self._streamed:
            if not self._ended and self._failure is None:
                self._failure = exc
            self._wake()  # a stream's reader learns of the failure, or of the end before it
        self.close()

    def _wake(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    def _check_silence(self) -> None:
        self._timer = None
        if self._waiter is None or self._waiter.done():
            return  # answered: a stream's reads are timed by their SilenceWatch
        if not self._answered:  # the head, however it trickles in, is due within the silence
            due = self._began + self._timeout
            if self.loop.time() >= due:
                silent = self._last == self._began
                self._fail(TimeoutError() if silent else H1Error(self._slow_head()))
                return
        else:
            due = self._last + self._timeout
            if self.loop.time() >= due:
                self._fail(TimeoutError())
                return
        self._timer = self.loop.call_at(due, self._check_silence)

    def _slow_head(self) -> str:
        if self._interims:
            return f"{self._interims} interim answers but no final one within {self._timeout:g} s"
        return f"the head of the agent's answer was not whole within {self._timeout:g} s"

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class SilenceWatch:
    """One timer for the silences of many streams' reads (a timer per idle stream costs
    about 0.5 KiB): every ``period`` seconds, a read that has waited longer than its silence
    allows fails, so a silence is noticed at most one period late."""

    __slots__ = ("_conns", "_handle", "_loop", "_period")

    def __init__(self, loop: asyncio.AbstractEventLoop, period: float) -> None:
        self._loop = loop
        self._period = period
        self._conns: set[H1Conn] = set()
        self._handle: asyncio.TimerHandle | None = None

    def add(self, conn: H1Conn) -> None:
        """Watch ``conn``'s read."""
        self._conns.add(conn)
        if self._handle is None:
            self._handle = self._loop.call_later(self._period, self._tick)

    def discard(self, conn: H1Conn) -> None:
        """Stop watching ``conn`` (its read is over)."""
        self._conns.discard(conn)

    def close(self) -> None:
        """Stop the timer (reads still watched are no longer timed)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        self._handle = None
        now = self._loop.time()
        for conn in [c for c in self._conns if c.silent(now)]:
            self._conns.discard(conn)
            conn.time_out()
        if self._conns:
            self._handle = self._loop.call_later(self._period, self._tick)


def _unframed(headers: CIMultiDictProxy[str]) -> bool:
    """Whether an answer's body runs until the connection closes: no Content-Length, and no
    Transfer-Encoding ending in chunked (as llhttp reads an answer)."""
    codings = [
        c.strip().lower() for v in headers.getall("Transfer-Encoding", ()) for c in v.split(",")
    ]
    if codings:
        return codings[-1] != "chunked"
    return "Content-Length" not in headers


def _content_coding(headers: CIMultiDictProxy[str]) -> str | None:
    """The answer's ``Content-Encoding`` unless it is none or identity (none is asked for:
    the pool sends ``Accept-Encoding: identity``, and a body is never inflated here)."""
    codings = [c.strip() for v in headers.getall("Content-Encoding", ()) for c in v.split(",")]
    codings = [c for c in codings if c and c.lower() != "identity"]
    return f"Content-Encoding: {', '.join(codings)}"[:100] if codings else None


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
