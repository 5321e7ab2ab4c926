"""The index hook run behind the catalog: registrations do not wait for it.

:class:`IndexFollower` calls a hook (the router's: embed the new skill texts,
:mod:`registry.vectors`) with the newest catalog snapshot after each change, in a background
task. Changes made while a call runs share the next call (it gets the newest snapshot, which
holds them all). :attr:`IndexFollower.version` is the catalog version the last finished call
saw; :meth:`IndexFollower.wait` waits until it reaches a version (tests, and anything that
must see a registration's vectors); :meth:`IndexFollower.close` stops it at shutdown.

With a ``quiet`` period, a burst of changes (a bulk registration, a crawl) is let finish
first: a call starts once no change came for ``quiet`` seconds, or ``max_delay`` seconds
after the first change it is due for, whichever is sooner, and at once when somebody
waits for it. The burst's writes then do not share the cores with the hook (embedding is
the costliest step of a registration); until a call runs, the new skills are matched by
their words (:func:`router.choose.meaning.until_embedded`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from registry.catalog import Catalog, Snapshot

__all__ = ["IndexFollower"]

log = logging.getLogger(__name__)

Hook = Callable[[Snapshot], Awaitable[Any]]


class IndexFollower:
    """Runs ``hook()`` (the current hook, or None) on the catalog's newest snapshot, in the
    background, once for all the changes made while the previous call ran."""

    def __init__(
        self,
        catalog: Catalog,
        hook: Callable[[], Hook | None],
        *,
        quiet: float = 0.0,
        max_delay: float = 30.0,
    ) -> None:
        self._catalog = catalog
        self._hook = hook
        self.quiet = quiet
        """Seconds without a change before a call starts (0: at once)."""
        self.max_delay = max_delay
        """Seconds a due call waits for a burst of changes to end, at most."""
        self.version = -1
        """The catalog version of the snapshot the last finished call was given (-1: none
        yet); every text of that snapshot has been through the hook (see :attr:`failure`)."""
        self.calls = 0
        """Finished hook calls (for tests and benchmarks)."""
        self.failure: str | None = None
        """Why the last call raised, if it did (the hook's own failures, such as a model
        that is down, are the hook's to report: ``SkillVectors.failure``)."""
        self._dirty = False
        self._task: asyncio.Task[None] | None = None
        self._progress = asyncio.Event()
        self._hurry = asyncio.Event()  # somebody waits, or the follower closes: no more quiet
        self._changed = 0.0  # the loop time of the last change
        self._waiting = 0
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether a call runs or is due."""
        return self._dirty or (self._task is not None and not self._task.done())

    @property
    def backlog(self) -> int:
        """Catalog versions not yet through the hook (0 when it is idle or there is none)."""
        if self._hook() is None or not self.busy:
            return 0
        return max(0, self._catalog.snapshot.version - self.version)

    def poke(self) -> None:
        """The catalog changed: run the hook (again) on its newest snapshot, soon."""
        if self._closed or self._hook() is None:
            return
        self._dirty = True
        self._changed = asyncio.get_running_loop().time()
        task = self._task
        if task is None or task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait(self, version: int | None = None) -> int:
        """Wait until the hook has run on a snapshot at least ``version`` new (default: the
        current one); the version it reached. Returns at once without a hook; a version
        not in the catalog yet is waited for until a change brings it."""
        target = self._catalog.snapshot.version if version is None else version
        self._waiting += 1
        self._hurry.set()
        try:
            while self._hook() is not None and self.version < target and not self._closed:
                if not self.busy and target <= self._catalog.snapshot.version:
                    self.poke()  # a change that did not ask (a removal): ask now
                self._progress.clear()
                await self._progress.wait()
        finally:
            self._waiting -= 1
        return self.version

    async def close(self, grace: float) -> None:
        """Stop: a call in progress gets ``grace`` seconds to finish, then is cancelled
        (its texts are embedded at the next start: stored vectors are read, the rest
        computed)."""
        self._closed = True
        self._dirty = False
        self._hurry.set()
        task = self._task
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._progress.set()

    async def _run(self) -> None:
        while self._dirty and not self._closed:
            await self._quiet_down()
            if self._closed:
                break
            self._dirty = False
            hook = self._hook()
            if hook is None:
                break
            snapshot = self._catalog.snapshot
            try:
                await hook(snapshot)
                self.failure = None
            except Exception as exc:  # the write it follows succeeded: keep going
                self.failure = f"{type(exc).__name__}: {exc}"
                log.exception("the catalog index hook failed at version %d", snapshot.version)
            self.version = max(self.version, snapshot.version)
            self.calls += 1
            self._progress.set()
        self._progress.set()

    async def _quiet_down(self) -> None:
        """Wait until no change came for :attr:`quiet` seconds (at most :attr:`max_delay`
        seconds from now), unless somebody waits for the index or the follower closes."""
        if self.quiet <= 0:
            return
        loop = asyncio.get_running_loop()
        latest = loop.time() + self.max_delay
        while not self._waiting and not self._closed:
            left = min(self._changed + self.quiet, latest) - loop.time()
            if left <= 0:
                return
            self._hurry.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._hurry.wait()
