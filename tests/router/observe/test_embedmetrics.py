"""The embedding batches' metrics."""

from __future__ import annotations

from registry.metrics import METRICS
from router.observe.embedmetrics import observe_batch


def _samples() -> list[float]:
    """Batches, texts and seconds so far, and the batches of at most 4 texts."""
    names = ("texts_count", "texts_sum", "seconds_sum")
    found = [METRICS.get_sample_value(f"switchboard_embedding_batch_{n}") for n in names]
    small = METRICS.get_sample_value("switchboard_embedding_batch_texts_bucket", {"le": "4.0"})
    return [value or 0.0 for value in (*found, small)]


def test_a_batch_counts_its_texts_and_its_time() -> None:
    before = _samples()
    observe_batch(3, 0.02)
    observe_batch(20, 0.1)
    grown = [round(a - b, 6) for a, b in zip(_samples(), before, strict=True)]
    assert grown == [2, 23, 0.12, 1]
