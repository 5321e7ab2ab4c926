"""The write-behind batcher: batches in arrival order, one outcome per item, errors apart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from registry.writebatch import WriteBatcher


class Gate:
    """A batch function that records its batches and waits for the test before answering."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def write(self, items: Sequence[int]) -> list[int | BaseException]:
        self.batches.append(list(items))
        self.entered.set()
        await self.release.wait()
        return [ValueError(f"bad {i}") if i < 0 else i * 10 for i in items]


async def test_writes_arriving_during_a_batch_join_the_next_one_in_order() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate.write)
    first = asyncio.ensure_future(batcher.submit(1))
    await gate.entered.wait()  # the first batch is open: the next three wait for it
    gate.entered.clear()
    later = [asyncio.ensure_future(batcher.submit(n)) for n in (2, 3, 4)]
    gate.release.set()
    assert await first == 10
    assert await asyncio.gather(*later) == [20, 30, 40]
    assert gate.batches == [[1], [2, 3, 4]]
    assert batcher.batches == 2


async def test_each_caller_gets_its_own_error_and_the_others_their_results() -> None:
    gate = Gate()
    gate.release.set()
    batcher = WriteBatcher(gate.write)
    outcomes = await asyncio.gather(
        *(batcher.submit(n) for n in (1, -2, 3)), return_exceptions=True
    )
    assert outcomes[0] == 10 and outcomes[2] == 30
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "bad -2"
    assert gate.batches == [[1, -2, 3]]


async def test_a_failing_batch_fails_its_items_and_not_the_next_batch() -> None:
    calls: list[list[str]] = []

    async def write(items: Sequence[str]) -> list[str | BaseException]:
        calls.append(list(items))
        if "boom" in items:
            raise RuntimeError("the commit failed")
        return list(items)

    batcher = WriteBatcher(write)
    failed = await asyncio.gather(
        *(batcher.submit(i) for i in ("a", "boom")), return_exceptions=True
    )
    assert [str(e) for e in failed] == ["the commit failed"] * 2
    assert await batcher.submit("c") == "c"
    assert calls == [["a", "boom"], ["c"]]


async def test_max_batch_splits_a_burst() -> None:
    gate = Gate()
    gate.release.set()
    batcher = WriteBatcher(gate.write, max_batch=2)
    assert await asyncio.gather(*(batcher.submit(n) for n in range(5))) == [0, 10, 20, 30, 40]
    assert gate.batches == [[0, 1], [2, 3], [4]]


async def test_a_cancelled_caller_does_not_stop_the_batch() -> None:
    gate = Gate()
    batcher = WriteBatcher(gate.write)
    gone = asyncio.ensure_future(batcher.submit(1))
    stays = asyncio.ensure_future(batcher.submit(2))
    await gate.entered.wait()
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    gate.release.set()
    assert await stays == 20
    assert gate.batches == [[1, 2]]
