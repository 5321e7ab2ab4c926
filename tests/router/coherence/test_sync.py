"""A worker's side of read your writes, with several "workers" in this process sharing one
board: a write waits for every sibling to apply it, a lagging one is counted and catches up
before its next request, syncs run one at a time, a failure is retried."""

from __future__ import annotations

import asyncio

import pytest

from router.coherence.board import Board
from router.coherence.sync import Coherence


class Worker:
    """A worker's memory: it applies what the "database" holds when it syncs."""

    def __init__(self, database: list[str], board: Board, pid: int, ack_timeout: float = 1.0):
        self.database = database
        self.memory: list[str] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.siblings: list[Worker] = []
        self.coherence = Coherence(
            self.sync, board=board, tell=self.tell, ack_timeout=ack_timeout, pid=pid
        )

    async def sync(self) -> None:
        await self.gate.wait()
        if self.fail:
            raise OSError("database is down")
        self.memory = list(self.database)

    def tell(self) -> None:  # the supervisor's relay: every other worker is told
        for sibling in self.siblings:
            asyncio.get_running_loop().call_soon(sibling.coherence.on_ping)

    async def write(self, item: str) -> int:
        self.database.append(item)
        self.memory.append(item)  # its own write is in its memory at once
        return await self.coherence.published()


def workers(count: int, ack_timeout: float = 1.0) -> list[Worker]:
    board, database = Board(count + 2), []
    made = [Worker(database, board, 1000 + n, ack_timeout) for n in range(count)]
    for worker in made:
        worker.siblings = [w for w in made if w is not worker]
        worker.coherence.begin()
        worker.coherence.join()
    return made


async def test_a_write_answers_once_every_worker_has_it() -> None:
    a, b, c = workers(3)
    assert await a.write("agent-1") == 0
    assert b.memory == c.memory == ["agent-1"]  # applied before the answer
    assert not b.coherence.behind and not c.coherence.behind
    assert a.coherence.syncs == 0  # the writer had every earlier write: no sync of its own


async def test_a_lagging_worker_is_counted_and_catches_up_before_its_next_request() -> None:
    a, b = workers(2, ack_timeout=0.05)
    b.gate.clear()  # b is stuck (a long request, a slow database)
    assert await a.write("agent-1") == 1
    assert b.coherence.behind
    b.gate.set()
    await b.coherence.fresh()  # what the middleware does before b's next request
    assert b.memory == ["agent-1"] and not b.coherence.behind


async def test_a_request_waits_for_a_sync_under_way() -> None:
    a, b = workers(2, ack_timeout=0.05)
    b.gate.clear()
    await a.write("agent-1")
    waiters = [asyncio.create_task(b.coherence.fresh()) for _ in range(5)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    b.gate.set()
    assert await asyncio.gather(*waiters) == [True] * 5
    assert b.memory == ["agent-1"]


async def test_concurrent_writes_are_all_applied() -> None:
    a, b, c = workers(3)
    await asyncio.gather(*(w.write(f"agent-{n}") for n, w in enumerate([a, b, c, a, b])))
    for worker in (a, b, c):
        await worker.coherence.fresh()
        assert sorted(worker.memory) == [f"agent-{n}" for n in range(5)]
        assert not worker.coherence.behind


async def test_a_failed_sync_is_tried_again() -> None:
    a, b = workers(2, ack_timeout=0.05)
    b.fail = True
    assert await a.write("agent-1") == 1
    assert not await b.coherence.fresh()
    assert b.coherence.failure == "OSError: database is down"
    assert b.coherence.behind
    b.fail = False
    assert await b.coherence.fresh()
    assert b.memory == ["agent-1"] and b.coherence.failure is None


async def test_a_worker_that_joins_late_catches_up_and_is_waited_for() -> None:
    a, b = workers(2)
    late = Worker(a.database, a.coherence.board, 2000)  # type: ignore[arg-type]
    late.coherence.begin()  # it starts loading
    await a.write("agent-1")  # a write while it loads
    late.siblings, a.siblings = [a, b], [b, late]
    late.coherence.join()  # ready: it catches up at once
    assert late.coherence.behind
    await late.coherence.fresh()
    assert late.memory == ["agent-1"]
    assert await a.write("agent-2") == 0  # and later writes wait for it
    assert late.memory == ["agent-1", "agent-2"]


async def test_a_worker_that_left_is_not_waited_for() -> None:
    a, b = workers(2, ack_timeout=5)
    b.gate.clear()
    b.coherence.leave()
    assert await asyncio.wait_for(a.write("agent-1"), 1) == 0


async def test_alone_nothing_to_wait_for() -> None:
    synced = []

    async def sync() -> None:
        synced.append(1)

    announced = []

    async def announce() -> None:
        announced.append(1)

    alone = Coherence(sync, announce=announce)
    alone.begin()
    alone.join()
    assert not alone.behind
    assert await alone.fresh()
    assert await alone.published() == 0
    assert announced == [1] and synced == []


async def test_announcements_share_one_sync() -> None:
    gate = asyncio.Event()
    runs = []

    async def sync() -> None:
        runs.append(1)
        await gate.wait()

    coherence = Coherence(sync)
    for _ in range(10):
        coherence.on_announce()
    await asyncio.sleep(0)
    gate.set()
    follow = coherence._following
    assert follow is not None
    await follow
    assert len(runs) == 1


@pytest.mark.parametrize("count", [1, 4])
async def test_every_write_counts_once(count: int) -> None:
    made = workers(count)
    for n in range(10):
        assert await made[n % count].write(f"a{n}") == 0
    assert made[0].coherence.board is not None
    assert made[0].coherence.board.generation == 10
