"""router.observe.logwriter: the batched loggers' lines leave at the end of the loop's turn, in
the order of the records, in writes of at most 4 KiB; everything else at once."""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading

import pytest

from router.observe.logwriter import CHUNK, TurnHandler
from router.observe.turn import later


class Writes(io.StringIO):
    """A stream that keeps each ``write``."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def _record(name: str, msg: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, (), None)


@pytest.fixture
def handler() -> TurnHandler:
    made = TurnHandler(Writes(), batched=("calls",))
    made.setFormatter(logging.Formatter("%(name)s %(message)s"))
    return made


def _lines(handler: TurnHandler) -> list[str]:
    stream = handler.stream
    assert isinstance(stream, Writes)
    return stream.getvalue().splitlines()


async def test_a_turns_lines_leave_together_at_its_end(handler: TurnHandler) -> None:
    for n in range(3):
        handler.handle(_record("calls", f"call {n}"))
    assert _lines(handler) == []  # held until the end of this turn
    await asyncio.sleep(0)  # the next turn begins once this one's callbacks have run
    assert _lines(handler) == ["calls call 0", "calls call 1", "calls call 2"]
    assert handler.stream.writes == ["calls call 0\ncalls call 1\ncalls call 2\n"]


async def test_another_loggers_record_leaves_at_once_after_those_held(
    handler: TurnHandler,
) -> None:
    handler.handle(_record("calls", "first"))
    handler.handle(_record("other", "second"))
    assert _lines(handler) == ["calls first", "other second"]
    handler.handle(_record("calls", "third"))
    await asyncio.sleep(0)
    assert _lines(handler) == ["calls first", "other second", "calls third"]


async def test_lines_put_off_are_made_and_written_before_another_record(
    handler: TurnHandler,
) -> None:
    later(handler.handle, _record("calls", "put off"))
    handler.handle(_record("other", "now"))
    assert _lines(handler) == ["calls put off", "other now"]
    later(handler.handle, _record("calls", "at exit"))
    handler.flush()  # as logging.shutdown does
    assert _lines(handler)[-1] == "calls at exit"


async def test_a_traceback_or_another_thread_is_written_at_once(handler: TurnHandler) -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logging.LogRecord("calls", logging.ERROR, __file__, 1, "bad", (), None)
        failed.exc_info = sys.exc_info()
    handler.handle(failed)
    assert _lines(handler)[0] == "calls bad"
    thread = threading.Thread(target=handler.handle, args=(_record("calls", "threaded"),))
    thread.start()
    thread.join()
    assert _lines(handler)[-1] == "calls threaded"


def test_without_a_running_loop_a_record_is_written_at_once(handler: TurnHandler) -> None:
    handler.handle(_record("calls", "no loop"))
    assert _lines(handler) == ["calls no loop"]


async def test_flush_and_close_write_what_is_held(handler: TurnHandler) -> None:
    handler.handle(_record("calls", "one"))
    handler.flush()
    assert _lines(handler) == ["calls one"]
    handler.handle(_record("calls", "two"))
    handler.close()
    assert _lines(handler) == ["calls one", "calls two"]
    await asyncio.sleep(0)  # the turn's own write finds nothing left
    assert _lines(handler) == ["calls one", "calls two"]


async def test_writes_are_at_most_a_chunk_and_cut_between_lines(handler: TurnHandler) -> None:
    lines = [f"{n:04d} " + "é" * (n % 300) for n in range(200)]
    for line in lines:
        handler.handle(_record("calls", line))
    await asyncio.sleep(0)
    writes = handler.stream.writes
    assert len(writes) > 1
    assert all(len(w.encode()) <= CHUNK and w.endswith("\n") for w in writes)
    assert _lines(handler) == [f"calls {line}" for line in lines]


def test_a_record_held_when_its_loop_ended_leaves_with_the_next_loops_turn(
    handler: TurnHandler,
) -> None:
    loop = asyncio.new_event_loop()
    loop.call_soon(loop.stop)  # the loop stops at the end of this turn, before the write
    loop.call_soon(handler.handle, _record("calls", "held"))
    loop.run_forever()
    loop.close()
    assert _lines(handler) == []

    async def log() -> None:
        handler.handle(_record("calls", "next"))
        await asyncio.sleep(0)

    asyncio.run(log())
    assert _lines(handler) == ["calls held", "calls next"]


async def test_a_line_that_cannot_be_formatted_is_reported_and_skipped(
    handler: TurnHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[str] = []
    monkeypatch.setattr(handler, "handleError", lambda record: reported.append(record.msg))
    bad = logging.LogRecord("calls", logging.INFO, __file__, 1, "%d", ("x",), None)
    handler.handle(bad)
    handler.handle(_record("calls", "fine"))
    await asyncio.sleep(0)
    assert reported == ["%d"]
    assert _lines(handler) == ["calls fine"]
