"""router.observe.turn: calls put off to the end of the loop's turn are made there, in order;
at once without a running loop; now with ``run_held``; a failing one does not stop the rest."""

from __future__ import annotations

import asyncio
import logging

import pytest

from router.observe.turn import later, run_held


async def test_held_calls_are_made_at_the_end_of_the_turn_in_order() -> None:
    made: list[int] = []
    for n in range(3):
        later(made.append, n)
    assert made == []
    await asyncio.sleep(0)  # this turn's callbacks run before the next turn resumes us
    assert made == [0, 1, 2]
    later(made.append, 3)
    await asyncio.sleep(0)
    assert made == [0, 1, 2, 3]


def test_without_a_running_loop_a_call_is_made_at_once() -> None:
    made: list[str] = []
    later(made.append, "now")
    assert made == ["now"]


async def test_run_held_makes_them_now_and_the_turn_finds_none_left() -> None:
    made: list[str] = []
    later(made.append, "a")
    run_held()
    assert made == ["a"]
    await asyncio.sleep(0)
    assert made == ["a"]


async def test_a_failing_call_is_logged_and_the_rest_are_made(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    later(made.append, "before")
    later(fail)
    later(made.append, "after")
    with caplog.at_level(logging.ERROR, logger="router.observe.turn"):
        await asyncio.sleep(0)
    assert made == ["before", "after"]
    assert "failed" in caplog.text and "boom" in caplog.text


def test_a_call_held_when_its_loop_ended_is_made_by_the_next_loops_turn() -> None:
    made: list[str] = []
    loop = asyncio.new_event_loop()
    loop.call_soon(loop.stop)  # the loop stops at the end of this turn, before the calls
    loop.call_soon(later, made.append, "held")
    loop.run_forever()
    loop.close()
    assert made == []

    async def next_turn() -> None:
        later(made.append, "next")
        await asyncio.sleep(0)

    asyncio.run(next_turn())
    assert made == ["held", "next"]
