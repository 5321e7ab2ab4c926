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
import time
from collections.abc import Awaitable, Callable

import numpy as np

__all__ = ["Batches"]

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


class Batches:
    """Texts embedded in batches of up to ``size`` by ``embed`` (one row per text, in order),
    ``parallel`` batches at a time (see the module docs)."""

    def __init__(self, embed: Embed, size: int = 32, parallel: int = 1) -> None:
        if size < 1 or parallel < 1:
            raise ValueError("a batch holds a text at least, and a batch at least goes at once")
        self._embed = embed
        self.size = size
        self.parallel = parallel
        self.batches = 0
        """Batches embedded so far."""
        self.texts = 0
        """Texts embedded so far (a text asked for while it waits or is embedded counts once)."""
        self._waiting: dict[str, asyncio.Future[np.ndarray]] = {}
        self._embedding: dict[str, asyncio.Future[np.ndarray]] = {}
        self._runners: set[asyncio.Task[None]] = set()
        self.observer: Callable[[int, float], None] | None = None
        """Called after each batch with its number of texts and its seconds (metrics)."""

    async def vector(self, text: str) -> np.ndarray:
        """The vector of ``text``, from the batch it goes in; raises what embedding that
        batch raised. A caller cancelled while it waits leaves the batch to the others."""
        future = self._embedding.get(text) or self._waiting.get(text)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[text] = future
            if len(self._runners) < self.parallel:
                self._runners.add(asyncio.create_task(self._run(), name="embed-batches"))
        return await asyncio.shield(future)

    def close(self) -> None:
        """Stop embedding: the batch under way and the texts waiting are cancelled."""
        for runner in self._runners:
            runner.cancel()
        for future in itertools.chain(self._waiting.values(), self._embedding.values()):
            future.cancel()
        self._waiting.clear()

    async def _run(self) -> None:
        try:
            await self._batches()
        finally:  # at once: a text that comes next must find room for a runner
            self._runners.discard(asyncio.current_task())  # type: ignore[arg-type]

    async def _batches(self) -> None:
        while self._waiting:
            texts = list(itertools.islice(self._waiting, self.size))
            batch = {text: self._waiting.pop(text) for text in texts}
            self._embedding.update(batch)
            self.batches += 1
            self.texts += len(texts)
            started = time.perf_counter()
            try:
                vectors = await self._embed(texts)
                if len(vectors) != len(texts):
                    raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
            except Exception as exc:
                self._observe(len(texts), started)
                for text, future in batch.items():
                    del self._embedding[text]
                    if not future.done():
                        future.set_exception(exc)
                        future.exception()  # retrieved: no warning if every caller left
                continue
            self._observe(len(texts), started)
            for (text, future), row in zip(batch.items(), vectors, strict=True):
                del self._embedding[text]
                if not future.done():
                    future.set_result(row)

    def _observe(self, texts: int, started: float) -> None:
        if self.observer is not None:
            self.observer(texts, time.perf_counter() - started)
