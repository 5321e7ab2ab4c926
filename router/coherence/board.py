"""The board the workers of one ``switchboard serve`` share: a write generation and, per live
worker, the generation it has applied.

It is a small anonymous shared memory map that the supervisor makes before it forks any worker
(``fork`` keeps ``MAP_SHARED`` mappings shared), laid out as 64-bit words:

- word 0: the **generation**, bumped once per acknowledged write, after its transaction
  committed (:meth:`Board.bump`);
- then one slot of two words per worker: its pid (0: free) and the generation it has applied
  (:meth:`Board.claim`, :meth:`Board.applied`, :meth:`Board.release`).

A request compares the generation with what its worker applied (:meth:`Board.generation`: one
read of shared memory, no system call) and catches up first when it is behind; a write waits
until every live slot reached its generation (:mod:`router.coherence.sync`). Only bumps and
claims take the lock (``lockf`` on a file of its own: the kernel drops it when a holder dies,
so a killed worker never leaves it taken); reads take none: each word is written whole by one
aligned store, and a reader that saw an old generation only catches up one request later.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import tempfile
from collections.abc import Iterator

__all__ = ["Board"]

_HEADER = 1  # words before the first slot: the generation
_SLOT = 2  # words per slot: pid, applied


class Board:
    """The shared generation and the workers' slots (see the module docs). Made once, before
    the workers are forked; every method is safe in any of them."""

    def __init__(self, slots: int) -> None:
        """A board for at most ``slots`` live workers at once (replacements during a reload
        included)."""
        if slots < 1:
            raise ValueError("a board needs at least one slot")
        self.slots = slots
        self._map = mmap.mmap(-1, 8 * (_HEADER + _SLOT * slots))  # MAP_SHARED | MAP_ANONYMOUS
        self._words = memoryview(self._map).cast("Q")
        self._lock = tempfile.TemporaryFile()  # noqa: SIM115  # lives as long as the board

    @property
    def generation(self) -> int:
        """The number of writes acknowledged so far (one shared-memory read)."""
        return self._words[0]

    def bump(self) -> int:
        """Count one more write (its transaction has committed); the new generation."""
        with self._locked():
            generation = self._words[0] + 1
            self._words[0] = generation
        return generation

    def claim(self, pid: int, applied: int) -> int | None:
        """Take a free slot for worker ``pid``, which has applied generation ``applied``; its
        index, or None when every slot is taken (the worker then catches up before each
        request as any does, but no write waits for it)."""
        with self._locked():
            for slot in range(self.slots):
                base = _HEADER + _SLOT * slot
                if self._words[base] == 0:
                    self._words[base + 1] = applied
                    self._words[base] = pid
                    return slot
        return None

    def applied(self, slot: int, generation: int) -> None:
        """Worker of ``slot`` has applied every write up to ``generation``."""
        base = _HEADER + _SLOT * slot
        if generation > self._words[base + 1]:
            self._words[base + 1] = generation

    def release(self, pid: int) -> None:
        """Free the slot of worker ``pid`` (it stopped or died); nothing if it had none."""
        with self._locked():
            for slot in range(self.slots):
                base = _HEADER + _SLOT * slot
                if self._words[base] == pid:
                    self._words[base] = 0
                    self._words[base + 1] = 0

    def behind(self, generation: int, *, besides: int | None = None) -> list[int]:
        """The pids of the live workers that have not applied ``generation`` yet (but
        ``besides``)."""
        lagging = []
        for slot in range(self.slots):
            base = _HEADER + _SLOT * slot
            pid = self._words[base]
            if pid and pid != besides and self._words[base + 1] < generation:
                lagging.append(pid)
        return lagging

    def workers(self) -> dict[int, int]:
        """Each live worker's pid and the generation it has applied."""
        out = {}
        for slot in range(self.slots):
            base = _HEADER + _SLOT * slot
            if self._words[base]:
                out[self._words[base]] = self._words[base + 1]
        return out

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.lockf(self._lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(self._lock.fileno(), fcntl.LOCK_UN)
