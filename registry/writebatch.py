"""A write-behind batcher: writes that arrive while one transaction is open join the next.

Each caller of :meth:`WriteBatcher.submit` still gets its own result or its own exception:
the batch function returns one outcome per item (a value, or the exception that item
raised), and an exception of the batch as a whole (its commit failed, the connection broke)
goes to every item of that batch. Items keep their arrival order within and across batches.
A caller that is cancelled while waiting does not stop the batch (its write may still land).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["WriteBatcher"]

T = TypeVar("T")
R = TypeVar("R")


class WriteBatcher(Generic[T, R]):
    """Runs ``write`` over the items submitted meanwhile, one batch at a time (at most
    ``max_batch`` items each)."""

    def __init__(
        self,
        write: Callable[[Sequence[T]], Awaitable[Sequence[R | BaseException]]],
        max_batch: int = 64,
    ) -> None:
        self._write = write
        self.max_batch = max_batch
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._task: asyncio.Task[None] | None = None
        self.batches = 0
        """Batches written so far (for tests and benchmarks)."""

    async def submit(self, item: T) -> R:
        """Write ``item`` in the next batch; its own outcome (a value, or it raises)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((item, future))
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            self._task = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
            try:
                outcomes: Sequence[R | BaseException] = await self._write([i for i, _ in batch])
                if len(outcomes) != len(batch):
                    raise RuntimeError("a batch write returned the wrong number of outcomes")
            except BaseException as exc:
                outcomes = [exc] * len(batch)
                if isinstance(exc, asyncio.CancelledError):
                    _settle(batch, outcomes)
                    _settle(self._queue, [exc] * len(self._queue))
                    self._queue.clear()
                    raise
            self.batches += 1
            _settle(batch, outcomes)


def _settle(batch: Sequence[tuple[object, asyncio.Future[R]]], outcomes: Sequence[object]) -> None:
    for (_, future), outcome in zip(batch, outcomes, strict=True):
        if future.done():  # its caller was cancelled
            continue
        if isinstance(outcome, asyncio.CancelledError):
            future.cancel()
        elif isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)  # type: ignore[arg-type]
