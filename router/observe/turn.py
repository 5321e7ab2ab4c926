"""Work put off to the end of the event loop's turn: the per-call log lines, made together.

A call's log lines (the access line, ``switchboard.a2a``) are made after its answer: their
records, their values and their formatting cost several times more in the middle of a
call's own work than made in a row, one after another (docs/benchmarks.md). ``later(fn,
*args)`` holds the call until the end of the running loop's current turn, where every held
call is made, in the order held. Without a running loop (another thread, or none), the call
is made at once. :func:`run_held` makes the held calls now: the log handler
(:mod:`router.observe.logwriter`) does before writing anything else, and when flushed (so a
stop or ``logging.shutdown`` loses nothing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["later", "run_held"]

log = logging.getLogger(__name__)


class _Held:
    """The calls held in this process, and the loop whose turn's end will make them."""

    __slots__ = ("calls", "loop")

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., None], tuple[Any, ...]]] = []
        self.loop: asyncio.AbstractEventLoop | None = None


_HELD = _Held()


def later(fn: Callable[..., None], *args: Any) -> None:
    """Call ``fn(*args)`` at the end of the running loop's turn (at once without one)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fn(*args)
        return
    if _HELD.loop is not loop:
        _HELD.loop = loop
        loop.call_soon(_end_of_turn, loop)
    _HELD.calls.append((fn, args))


def run_held() -> None:
    """Make the held calls now, in the order held (a call that fails is logged and skipped)."""
    calls = _HELD.calls
    if not calls:
        return
    _HELD.calls, _HELD.loop = [], None
    for fn, args in calls:
        try:
            fn(*args)
        except Exception:
            log.exception("a call put off to the end of the loop's turn failed: %r", fn)


def _end_of_turn(loop: asyncio.AbstractEventLoop) -> None:
    if _HELD.loop is loop:
        run_held()
