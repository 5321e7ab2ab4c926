"""Server-Sent Events from agents: an incremental parser of upstream streams.

:class:`SseParser` follows the WHATWG event-stream rules: lines end in CRLF, LF or CR (a CR at
the end of a chunk waits for the next one), lines starting with ``:`` are comments, ``data:``
lines of one event are joined with ``\\n``, an event is dispatched at a blank line and only when
it has data. Unlike a browser it also dispatches a last event that the stream ends without a
blank line (:meth:`SseParser.feed_eof`). Line length and event size are bounded.
The writer of client streams is :mod:`router.transport.sse`.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "SseError",
    "SseEvent",
    "SseParser",
]

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024

_EOL = re.compile(rb"[\r\n]")
_new = tuple.__new__
# consecutive events of one "data: " line each, ended by a blank line (CR LF or LF throughout)
_CRLF_RUN = re.compile(rb"(?:data: [^\r\n]*\r\n\r\n)+")
_LF_RUN = re.compile(rb"(?:data: [^\r\n]*\n\n)+")
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


class SseEvent(NamedTuple):
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
        return self._feed(chunk, False)  # type: ignore[return-value]

    def feed_data(self, chunk: bytes) -> list[SseEvent | str]:
        """:meth:`feed`, but a ``message`` event of one ``data:`` line that the parser took
        without walking its lines comes as its data alone (a str; its id and retry are those
        of the events around it)."""
        return self._feed(chunk, True)

    def _feed(self, chunk: bytes, plain: bool) -> list[SseEvent | str]:
        self._buf += chunk
        if not self._started:
            if len(self._buf) < len(_BOM) and _BOM.startswith(bytes(self._buf)):
                return []
            self._started = True
            if self._buf.startswith(_BOM):
                del self._buf[: len(_BOM)]
        return self._lines(eof=False, plain=plain)

    def feed_eof(self) -> list[SseEvent]:
        """The stream ended: parse what is left, including an event with no blank line after it."""
        self._started = True
        events: list[SseEvent] = self._lines(eof=True)  # type: ignore[assignment]
        if self._buf:
            self._check_line(len(self._buf))
            events.extend(self._line(bytes(self._buf)))
            self._buf.clear()
        if self._data:
            events.append(self._dispatch())
        self._reset_event()
        return events

    # -- internals ---------------------------------------------------------------------------

    def _lines(self, *, eof: bool, plain: bool = False) -> list[SseEvent | str]:
        buf = self._buf
        # only once a line end came (after _scan: the bytes known to hold none), else a long
        # line arriving in many chunks would be read again with each of them
        simple = not self._data and not self._event and _EOL.search(buf, self._scan) is not None
        events = self._simple(plain) if simple else []
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

    def _simple(self, plain: bool) -> list[SseEvent | str]:
        """The events at the start of the buffer that are one ``data: `` line each, all ended
        by CR LF CR LF or all by LF LF (what servers write), taken off the buffer in one piece
        without walking their lines (as their data alone when ``plain``); the general walk
        does the rest."""
        buf = self._buf
        end = b"\r\n\r\n" if b"\r" in buf else b"\n\n"
        run = (_CRLF_RUN if len(end) == 4 else _LF_RUN).match(buf)
        if run is None:
            return []
        size = run.end()
        limit = min(self.max_line_bytes, self.max_event_bytes)
        if size > limit and any(len(line) > limit for line in bytes(buf[:size]).split(end)):
            return []  # the walk raises the limit's error where it applies
        text = bytes(buf[:size]).decode("utf-8", errors="replace")
        del buf[:size]
        self._scan = 0
        # "data: A<end>data: B<end>" -> ["A", "B"]
        data: list[Any] = text[6 : -len(end)].split(f"{end.decode()}data: ")
        if plain:
            return data
        last_id, retry = self._last_id, self._retry
        return [_new(SseEvent, ("message", d, last_id, retry)) for d in data]

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
