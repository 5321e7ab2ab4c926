"""Metrics of the messages' embedding: how many texts each batch held and how long it took.

:class:`router.choose.batching.Batches` reports each batch to :func:`observe_batch` (wired
by the app). Batches that grow towards their limit (32) while their time grows mean that
messages wait for the model: the process is embedding-bound (docs/operations.md, "Sizing
routing by meaning").
"""

from __future__ import annotations

from prometheus_client import Histogram

from registry.metrics import METRICS

__all__ = ["EMBEDDING_BATCH_SECONDS", "EMBEDDING_BATCH_TEXTS", "observe_batch"]

EMBEDDING_BATCH_TEXTS = Histogram(
    "switchboard_embedding_batch_texts",
    "Message texts embedded together in one batch",
    buckets=(1, 2, 4, 8, 16, 32, 64),
    registry=METRICS,
)
EMBEDDING_BATCH_SECONDS = Histogram(
    "switchboard_embedding_batch_seconds",
    "Time to embed one batch of message texts (failed batches included)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
    registry=METRICS,
)


def observe_batch(texts: int, seconds: float) -> None:
    """Record one batch of ``texts`` message texts embedded in ``seconds``."""
    EMBEDDING_BATCH_TEXTS.observe(texts)
    EMBEDDING_BATCH_SECONDS.observe(seconds)
