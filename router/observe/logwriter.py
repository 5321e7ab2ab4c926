"""The log handler of ``switchboard serve``: every call's lines written once per turn of the
event loop instead of one by one.

Each A2A call logs two lines (``switchboard.a2a`` and the access line). Written one by one,
each is a system call and a formatting in the middle of the call's own work; under load that
cost the router about a tenth of its CPU. :class:`TurnHandler` keeps the records of the
loggers it is told to batch (records made in the event loop's thread while it runs, without
a traceback) and writes them at the end of the loop's current turn: formatted together, in
one ``write`` per 4 KiB (a write to a pipe up to that size is never interleaved with another
worker's lines). A call's lines thus leave after its answer has.

Every other record is written at once, after the lines put off before it
(:func:`router.observe.turn.run_held`: the calls' lines are made at the end of a turn too)
and the records held, so the order of the lines is the order of the calls that made them.
``flush`` and ``close`` (which ``logging.shutdown`` calls at exit) make and write what is
held; a process killed outright loses at most two turns' lines.
The records batched are made by Switchboard itself, from values that do not change after
(strings and numbers), so formatting them a moment later gives the same text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import IO

from router.observe.turn import run_held

__all__ = ["CHUNK", "TurnHandler"]

CHUNK = 4096
"""The most bytes one ``write`` of batched lines carries (``PIPE_BUF`` on Linux)."""


class TurnHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes the records of ``batched`` loggers once per turn of the
    running event loop (see the module docstring), every other record at once."""

    def __init__(self, stream: IO[str] | None = None, batched: Iterable[str] = ()) -> None:
        super().__init__(stream)
        self.batched = frozenset(batched)
        self._held: list[logging.LogRecord] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # where the write is scheduled

    def emit(self, record: logging.LogRecord) -> None:
        """Hold a batched logger's record until the end of the loop's turn; write any other
        after what is held (called with the handler's lock held)."""
        if record.name in self.batched and not record.exc_info and not record.stack_info:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # another thread, or no loop: written at once
                pass
            else:
                if self._loop is not loop:
                    self._loop = loop
                    loop.call_soon(self._end_of_turn, loop)
                self._held.append(record)
                return
        run_held()  # the lines of earlier calls first, made now
        self._write_held()
        super().emit(record)

    def flush(self) -> None:
        """Make the lines put off (:func:`router.observe.turn.run_held`), write what is held,
        then flush the stream."""
        with self.lock:  # type: ignore[union-attr]  # created by Handler.__init__
            run_held()
            self._write_held()
        super().flush()

    def close(self) -> None:
        """Write what is held, then close as a stream handler does (the stream stays open)."""
        self.flush()
        super().close()

    def _end_of_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._loop is loop:
                self._write_held()

    def _write_held(self) -> None:
        held, self._held, self._loop = self._held, [], None
        if not held:
            return
        lines: list[str] = []
        size = 0
        for record in held:
            try:
                line = self.format(record) + self.terminator
            except Exception:
                self.handleError(record)
                continue
            length = len(line) if line.isascii() else len(line.encode())
            if lines and size + length > CHUNK:
                self._write("".join(lines), held[0])
                lines, size = [], 0
            lines.append(line)
            size += length
        if lines:
            self._write("".join(lines), held[0])

    def _write(self, text: str, record: logging.LogRecord) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
