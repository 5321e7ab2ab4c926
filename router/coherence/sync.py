"""Read your writes: a worker's side of the state every process keeps in memory.

Each process keeps the catalog, access policies, outbound credentials, learned examples and
trusted keys in memory, read from the database (:class:`router.coherence.state.SharedState`).
:class:`Coherence` keeps that memory as new as every write acknowledged to a client:

- **Within one ``serve``** (its workers share a :class:`~router.coherence.board.Board`): a
  write that succeeded bumps the board's generation (:meth:`Coherence.published`), tells the
  sibling workers through the supervisor (a byte on a pipe), which catch up at once and say
  so on the board, and answers once every live worker has (or after :attr:`ack_timeout`
  seconds, saying how many lagged). Every request first compares the board's generation with
  its worker's (:meth:`Coherence.fresh`): a worker that lagged catches up before it answers,
  so no request after an acknowledgement is answered from before the write.
- **Across replicas** (PostgreSQL): the write is announced with ``NOTIFY``
  (:mod:`router.coherence.notify`) and every other replica's workers sync on it; the poll
  (``SWITCHBOARD_CATALOG_SYNC_INTERVAL``) stays as the fallback.

A sync reads the counters of each part and reloads only what changed; the whole of it runs
one at a time per process (a request that arrives meanwhile waits for it, then runs another
only if the generation moved again).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable

from router.coherence.board import Board

__all__ = ["Coherence"]

log = logging.getLogger(__name__)

Sync = Callable[[], Awaitable[object]]


class Coherence:
    """One process's position in the stream of writes (see the module docs)."""

    def __init__(
        self,
        sync: Sync,
        *,
        board: Board | None = None,
        tell: Callable[[], None] | None = None,
        announce: Callable[[], Awaitable[None]] | None = None,
        ack_timeout: float = 1.0,
        pid: int | None = None,
    ) -> None:
        """``sync`` reloads what changed in the database; ``board`` and ``tell`` (a byte to
        the supervisor, relayed to the other workers) when this is a worker of several;
        ``announce`` tells other replicas (PostgreSQL ``NOTIFY``); ``pid``: this worker's
        name on the board (its process id)."""
        self.pid = pid or os.getpid()
        self._sync = sync
        self.board = board
        self._tell = tell or (lambda: None)
        self._announce = announce
        self.ack_timeout = ack_timeout
        """Seconds a write waits for the other workers to apply it, at most."""
        self.applied = board.generation if board is not None else 0
        """The board's generation this process's memory holds every write of."""
        self.slot: int | None = None
        self.syncs = 0
        """Syncs run (for tests and ``/api/v1/status``)."""
        self.failure: str | None = None
        """Why the last sync failed, if it did (the next request tries again)."""
        self._lock = asyncio.Lock()
        self._progress = asyncio.Event()
        self._synced = asyncio.Condition()
        self._pending: set[asyncio.Task[object]] = set()
        self._announced = False
        self._following: asyncio.Task[None] | None = None

    # --- a worker's life -----------------------------------------------------------------

    def begin(self) -> None:
        """The process is about to load its state: what it loads holds at least the writes
        counted so far."""
        if self.board is not None:
            self.applied = self.board.generation

    def join(self) -> None:
        """The worker serves from now on: take a slot on the board, so that writes wait for
        it, and catch up on what was written while it loaded."""
        if self.board is None or self.slot is not None:
            return
        self.slot = self.board.claim(self.pid, self.applied)
        if self.slot is None:
            log.warning(
                "no free slot on the workers' board (%d): writes do not wait for worker %d, "
                "which still catches up before each request",
                self.board.slots,
                self.pid,
            )
        self.on_ping()

    def leave(self) -> None:
        """The worker stops: free its slot (the supervisor does it too when it reaps it)."""
        if self.board is not None and self.slot is not None:
            self.board.release(self.pid)
            self.slot = None
        for task in (*self._pending, self._following):
            if task is not None:
                task.cancel()

    # --- requests --------------------------------------------------------------------------

    @property
    def behind(self) -> bool:
        """Whether a write acknowledged by another worker is not in this one's memory yet."""
        return self.board is not None and self.board.generation > self.applied

    async def fresh(self) -> bool:
        """Catch up with every write acknowledged so far (nothing when none is missing); False
        when the sync failed (logged; the next request tries again)."""
        board = self.board
        if board is None:
            return True
        target = board.generation
        if target <= self.applied:
            return True
        async with self._lock:
            if target <= self.applied:
                return True  # a sync that ran while this waited brought it
            return await self._run(board.generation)

    async def refresh(self) -> bool:
        """Sync now, whatever the board says (another replica announced a write, or the poll);
        False when it failed."""
        async with self._lock:
            return await self._run(self.board.generation if self.board is not None else 0)

    async def _run(self, generation: int) -> bool:
        """Sync (the lock is held): afterwards this process holds ``generation``."""
        try:
            await self._sync()
        except Exception as exc:  # a database hiccup: the next request or poll tries again
            self.failure = f"{type(exc).__name__}: {exc}"
            log.warning("state sync failed", exc_info=True)
            return False
        self.failure = None
        self.syncs += 1
        async with self._synced:
            self._synced.notify_all()
        if generation > self.applied:
            self.applied = generation
            if self.board is not None and self.slot is not None:
                self.board.applied(self.slot, generation)
                self._tell()  # a writer waiting for this worker looks again
        self._progress.set()
        return True

    async def next_sync(self) -> None:
        """Wait until the next sync of this process has run (tests, benchmarks)."""
        async with self._synced:
            await self._synced.wait()

    # --- writes ----------------------------------------------------------------------------

    async def published(self) -> int:
        """A write has committed: count it, tell the other workers and replicas, and wait
        (at most :attr:`ack_timeout` seconds) until every live worker of this ``serve``,
        this one included, has applied it. The number of workers that had not (each catches
        up before its next request)."""
        announced = self._announce() if self._announce is not None else None
        board = self.board
        if board is None:
            if announced is not None:
                await announced
            return 0
        target = board.bump()
        if self.applied == target - 1:  # no other write since this worker's last sync:
            self.applied = target  # its memory has them all, its own write included
            if self.slot is not None:
                board.applied(self.slot, target)
        self._tell()
        if announced is not None:
            await announced
        await self.fresh()  # else it catches up with the others' too
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.ack_timeout
        while True:
            self._progress.clear()
            lagging = board.behind(target)
            remaining = deadline - loop.time()
            if not lagging or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._progress.wait(), remaining)
        if lagging:
            log.warning(
                "write %d acknowledged with %d stale worker(s) (pids %s): not applied within "
                "%g s; each catches up before its next request",
                target,
                len(lagging),
                ", ".join(map(str, lagging)),
                self.ack_timeout,
            )
        return len(lagging)

    def on_ping(self) -> None:
        """Another worker says the board changed: catch up now if behind, and let the writes
        waiting here look again."""
        self._progress.set()
        if self.behind:
            task = asyncio.get_running_loop().create_task(self.fresh())
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    def on_announce(self) -> None:
        """Another replica announced a write: sync in the background (announcements that come
        while a sync runs share the next one)."""
        self._announced = True
        if self._following is None or self._following.done():
            self._following = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        while self._announced:
            self._announced = False
            await self.refresh()
