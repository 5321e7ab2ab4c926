"""Message texts embedded together: those that arrive while a batch is being embedded wait
and go together in the next batch, up to ``size`` texts.

Under load, many calls wait for their message's vector at once. One at a time, each pays the
model's fixed work: a forward pass on a small matrix, where the products run at a fraction
of the speed they reach on a tall one, and (for a local model in a thread) the interpreter
lock handed between that thread and the event loop around every numpy operation. A batch
pays it once for all its texts. A text that arrives when nothing is being embedded goes at
once, alone: no call waits for others to come, so a lone caller sees no added delay.

A batch's vectors can differ from those of the same texts embedded alone in the last bits
of a float32 (the products are blocked differently for another number of rows): cosine
similarities agree to about 1e-6.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import numpy as np

__all__ = ["Batches"]

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


class Batches:
    """Texts embedded in batches by ``embed`` (one row per text, in order), one batch at a
    time (see the module docs)."""

    def __init__(self, embed: Embed, size: int = 32) -> None:
        if size < 1:
            raise ValueError("a batch holds at least one text")
        self._embed = embed
        self.size = size
        self.batches = 0
        """Batches embedded so far."""
        self.texts = 0
        """Texts embedded so far (a text asked for while it waits or is embedded counts once)."""
        self._waiting: dict[str, asyncio.Future[np.ndarray]] = {}
        self._embedding: dict[str, asyncio.Future[np.ndarray]] = {}
        self._runner: asyncio.Task[None] | None = None

    async def vector(self, text: str) -> np.ndarray:
        """The vector of ``text``, from the batch it goes in; raises what embedding that
        batch raised. A caller cancelled while it waits leaves the batch to the others."""
        future = self._embedding.get(text) or self._waiting.get(text)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[text] = future
            if self._runner is None:
                self._runner = asyncio.create_task(self._run(), name="embed-batches")
        return await asyncio.shield(future)

    def close(self) -> None:
        """Stop embedding: the batch under way and the texts waiting are cancelled."""
        if self._runner is not None:
            self._runner.cancel()
        for future in itertools.chain(self._waiting.values(), self._embedding.values()):
            future.cancel()
        self._waiting.clear()

    async def _run(self) -> None:
        try:
            while self._waiting:
                texts = list(itertools.islice(self._waiting, self.size))
                batch = self._embedding = {text: self._waiting.pop(text) for text in texts}
                self.batches += 1
                self.texts += len(texts)
                try:
                    vectors = await self._embed(texts)
                    if len(vectors) != len(texts):
                        raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
                except Exception as exc:
                    self._embedding = {}
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(exc)
                            future.exception()  # retrieved: no warning if every caller left
                    continue
                self._embedding = {}
                for future, row in zip(batch.values(), vectors, strict=True):
                    if not future.done():
                        future.set_result(row)
        finally:
            self._runner = None
