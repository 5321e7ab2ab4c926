"""The semantic tier's start: the embedding model loaded, the catalog's vectors made, then
routing by meaning switched on.

- A model at hand (the local directory is complete, or an embeddings endpoint) is loaded before
  the server accepts requests, as it always was.
- A model still to fetch (``SWITCHBOARD_MODEL_FETCH``, first start) or missing (an operator's
  ``switchboard models fetch`` still running) is loaded in the background: the server is ready
  at once, ``/readyz`` says ``checks.model: "loading"``, routing goes by words (tier
  ``lexical-fallback``) and writes answer ``"vectors": "pending"``; a missing model is looked
  for again every :data:`RETRY` seconds. Once it loads, every text of the catalog is embedded
  (stored vectors are read) before matching by meaning starts.
- Texts whose embedding failed (an embeddings endpoint down) are tried again after a backoff
  (:data:`RETRY_MIN` doubling to :data:`RETRY`), so their vectors come as soon as they can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from registry.catalog import Snapshot
from registry.embedding.fetch import is_complete
from registry.examples import LearnedExamples
from registry.service import Registry
from registry.settings import Settings
from registry.vectors import SkillVectors
from router.choose.chooser import Chooser
from router.choose.models import Loaded, load_embedder, model_directory
from router.choose.semantic import Calibration, Semantic
from router.cpus import embedding_threads
from router.observe.embedmetrics import observe_batch

__all__ = ["LOADING", "RETRY", "RETRY_MIN", "ModelLoader"]

log = logging.getLogger(__name__)

LOADING = "lexical (fallback: the embedding model is loading)"
RETRY = 30.0
"""Seconds between looks for a missing model, and the longest wait before embedding again
texts whose embedding failed."""
RETRY_MIN = 1.0
"""Seconds before the first new try of texts whose embedding failed."""


class ModelLoader:
    """Loads the model and switches the router to matching by meaning (see the module docs)."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        chooser: Chooser,
        examples: LearnedExamples,
    ) -> None:
        self.settings = settings
        self.registry = registry
        self.chooser = chooser
        self.matcher = chooser.matcher
        self.examples = examples
        self.loading = False
        """Whether the model is being fetched or looked for in the background."""
        self.retry = RETRY
        """Seconds between looks for a missing model (tests make it short)."""
        self.retry_min = RETRY_MIN
        """Seconds before texts whose embedding failed are tried again, doubling to
        :attr:`retry`."""
        self.embedded = asyncio.Condition()
        """Notified after each embedding of the catalog's new texts, and once the model is
        installed (tests and benchmarks wait on it)."""
        self._task: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._backoff = 0.0  # the next retry's delay (0: the first, retry_min)

    @property
    def state(self) -> str:
        """``checks.model`` of ``/readyz``: ``ok``, ``loading``, ``off`` (words by
        configuration), or why there is no model or why embedding failed."""
        semantic = self.matcher.semantic
        if semantic is not None:
            failure = semantic.vectors.failure
            return f"embedding failed: {failure}" if failure else "ok"
        if self.settings.matcher == "lexical":
            return "off"
        return "loading" if self.loading else self.matcher.status

    async def start(self) -> None:
        """Load the model now when it is at hand, else in the background."""
        await self.examples.load()
        settings = self.settings
        if settings.matcher == "lexical":
            self.matcher.status = "lexical (SWITCHBOARD_MATCHER=lexical)"
            return
        if not settings.embeddings_url and not is_complete(model_directory(settings)):
            self.loading = settings.model_fetch and not settings.embedding_model  # fetching
            self.matcher.status = LOADING if self.loading else _missing(settings)
            self._task = asyncio.create_task(self._load_later())
            return
        loaded = await load_embedder(settings)
        if loaded.embedder is None:
            self.matcher.status = loaded.status
            return
        await self._install(loaded)

    async def close(self) -> None:
        """Stop loading (at shutdown)."""
        if self._retry is not None:
            self._retry.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def embed_examples(self) -> None:
        """Embed the learned examples not embedded yet (nothing without a model)."""
        semantic = self.matcher.semantic
        if semantic is not None:
            await semantic.vectors.ensure(e.text for e in self.examples.all)

    async def _load_later(self) -> None:
        """Fetch (``SWITCHBOARD_MODEL_FETCH``) or wait for the local model, then install it."""
        settings, said = self.settings, False
        while True:
            if settings.model_fetch or is_complete(model_directory(settings)):
                loaded = await load_embedder(settings, quiet=said)
                if loaded.embedder is not None:
                    break
                self.loading, self.matcher.status = False, loaded.status
            if not said:
                log.warning("looking for the embedding model again every %g s", self.retry)
                said = True
            await asyncio.sleep(self.retry)
        await self._install(loaded)
        self.loading = False
        async with self.embedded:
            self.embedded.notify_all()

    async def _install(self, loaded: Loaded) -> None:
        """Embed the catalog and the learned examples with ``loaded``, then match by meaning."""
        registry, settings = self.registry, self.settings
        vectors = SkillVectors(registry.store, loaded.embedder)
        stored = await vectors.load()
        threads = settings.embedding_threads or embedding_threads(settings.workers)
        semantic = Semantic(
            loaded.embedder, vectors, self.examples, Calibration.load(), threads=threads
        )
        semantic.batches.observer = observe_batch
        registry.on_index = self._indexer(vectors)
        registry.vectors = vectors
        await registry.indexed()  # the whole catalog, before matching by meaning starts
        computed = vectors.computed + await vectors.ensure(e.text for e in self.examples.all)
        self.matcher.semantic = self.chooser.semantic = semantic
        self.matcher.status = loaded.status
        log.info(
            "%s: %d stored vector(s) read, %d computed; messages embedded in %d thread(s)",
            loaded.status, stored, computed, threads,
        )  # fmt: skip

    def _indexer(self, vectors: SkillVectors) -> Callable[[Snapshot], Awaitable[None]]:
        """The index hook: a snapshot's texts embedded; a failure tried again later."""

        async def index(snapshot: Snapshot) -> None:
            await vectors.index(snapshot.agents.values())
            if vectors.failure is None:
                self._backoff = 0.0
            elif self._retry is None:
                delay = self._backoff or self.retry_min
                self._backoff = min(self.retry, delay * 2)
                self._retry = asyncio.get_running_loop().call_later(delay, self._again)
            async with self.embedded:
                self.embedded.notify_all()

        return index

    def _again(self) -> None:
        self._retry = None
        self.registry.indexing.poke()


def _missing(settings: Settings) -> str:
    return (
        f"lexical (fallback: no embedding model in {model_directory(settings)} yet; "
        "run `switchboard models fetch`)"
    )
