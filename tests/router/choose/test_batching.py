"""Message texts embedded in batches: what waits together goes together, nothing is lost."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from registry.embedding.bert import BertEmbedder
from router.choose.batching import Batches


class Gated:
    """An embedder whose batches wait for ``release`` (set: they go at once); it records
    each batch and gives text ``t`` the vector ``[len(t)]``."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        self.started.set()
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


async def _under_way(batches: Batches, embed: Gated, text: str) -> asyncio.Task[np.ndarray]:
    """A task asking for ``text``, once a batch (its own) is being embedded."""
    task = asyncio.create_task(batches.vector(text))
    await embed.started.wait()
    return task


async def _started(batches: Batches, texts: list[str]) -> list[asyncio.Task[np.ndarray]]:
    """Tasks asking for ``texts``, each already waiting for its vector."""
    tasks = [asyncio.create_task(batches.vector(t)) for t in texts]
    for _ in texts:
        await asyncio.sleep(0)  # each task runs up to its wait (no time passes)
    return tasks


async def test_a_lone_text_goes_at_once_and_those_that_wait_go_together() -> None:
    embed = Gated()
    batches = Batches(embed, size=8)
    first = await _under_way(batches, embed, "a")
    assert embed.batches == [["a"]]  # nobody else was waiting: no delay for company
    later = await _started(batches, ["bb", "ccc", "bb", "dddd"])
    embed.release.set()
    assert float((await first)[0]) == 1.0
    assert [float(v[0]) for v in await asyncio.gather(*later)] == [2.0, 3.0, 2.0, 4.0]
    assert embed.batches == [["a"], ["bb", "ccc", "dddd"]]  # one batch, "bb" once
    assert (batches.batches, batches.texts) == (2, 4)


async def test_a_text_being_embedded_is_not_embedded_again() -> None:
    embed = Gated()
    batches = Batches(embed)
    first = await _under_way(batches, embed, "same")
    again = await _started(batches, ["same"])
    embed.release.set()
    assert float((await first)[0]) == float((await again[0])[0]) == 4.0
    assert embed.batches == [["same"]]


async def test_batches_hold_at_most_size_texts() -> None:
    embed = Gated()
    batches = Batches(embed, size=2)
    first = await _under_way(batches, embed, "x")
    rest = await _started(batches, ["a", "b", "c", "d", "e"])
    embed.release.set()
    await asyncio.gather(first, *rest)
    assert embed.batches == [["x"], ["a", "b"], ["c", "d"], ["e"]]


async def test_parallel_batches_go_at_once_and_the_rest_wait_for_one_to_end() -> None:
    embed = Gated()
    batches = Batches(embed, size=2, parallel=2)
    first = await _started(batches, ["a", "b", "c"])
    assert embed.batches == [["a", "b"], ["c"]]  # two batches under way, none waiting
    rest = await _started(batches, ["d", "e", "f"])
    assert len(embed.batches) == 2  # both runners busy: the rest waits
    embed.release.set()
    vectors = await asyncio.gather(*first, *rest)
    assert [float(v[0]) for v in vectors] == [1.0] * 6
    assert sorted(map(sorted, embed.batches)) == [["a", "b"], ["c"], ["d", "e"], ["f"]]


async def test_a_text_that_comes_as_the_last_batch_ends_is_embedded() -> None:
    """A runner that has just finished its last batch no longer counts, even before its task
    is done: a text asked for right then gets a runner (one runner at most here)."""
    ended = asyncio.Event()
    seen: list[list[str]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        seen.append(texts)
        ended.set()  # wakes `later` in the same turn as the runner's last step, before its end
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    batches = Batches(embed, parallel=1)

    async def later() -> np.ndarray:
        await ended.wait()
        return await batches.vector("bb")

    waiting = asyncio.create_task(later())
    await batches.vector("a")
    vector = await asyncio.wait_for(waiting, timeout=10)
    assert float(vector[0]) == 2.0 and seen == [["a"], ["bb"]]


async def test_a_failed_batch_fails_its_callers_and_the_next_batch_goes_on() -> None:
    embed = Gated()
    batches = Batches(embed)
    embed.fail = RuntimeError("model down")
    first = await _under_way(batches, embed, "a")
    waiting = await _started(batches, ["b"])
    embed.release.set()
    with pytest.raises(RuntimeError, match="model down"):
        await first
    with pytest.raises(RuntimeError, match="model down"):
        await waiting[0]
    embed.fail = None
    assert float((await batches.vector("ok"))[0]) == 2.0
    assert embed.batches == [["a"], ["b"], ["ok"]]


async def test_the_observer_hears_of_every_batch_failed_or_not() -> None:
    embed = Gated()
    embed.release.set()
    batches = Batches(embed)
    heard: list[tuple[int, float]] = []
    batches.observer = lambda texts, seconds: heard.append((texts, seconds))
    await asyncio.gather(batches.vector("a"), batches.vector("b"), batches.vector("c"))
    embed.fail = RuntimeError("model down")
    with pytest.raises(RuntimeError):
        await batches.vector("d")
    assert [texts for texts, _ in heard] == [len(b) for b in embed.batches] == [3, 1]
    assert all(seconds >= 0 for _, seconds in heard)


async def test_a_wrong_number_of_vectors_is_an_error_for_the_batch() -> None:
    async def short(texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts) - 1, 3), dtype=np.float32)

    with pytest.raises(ValueError, match="0 vectors for 1 texts"):
        await Batches(short).vector("a")


async def test_a_caller_that_leaves_does_not_cancel_the_batch() -> None:
    embed = Gated()
    batches = Batches(embed)
    leaving = await _under_way(batches, embed, "a")
    staying = await _started(batches, ["a"])
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    embed.release.set()
    assert float((await staying[0])[0]) == 1.0


async def test_close_cancels_the_batch_under_way_and_those_waiting() -> None:
    embed = Gated()
    batches = Batches(embed)
    embedding = await _under_way(batches, embed, "a")
    waiting = await _started(batches, ["b"])
    batches.close()
    for task in (embedding, *waiting):
        with pytest.raises(asyncio.CancelledError):
            await task


def test_a_batch_needs_room_for_a_text() -> None:
    async def never(texts: list[str]) -> np.ndarray:
        raise AssertionError

    with pytest.raises(ValueError):
        Batches(never, size=0)
    with pytest.raises(ValueError):
        Batches(never, parallel=0)


async def test_the_model_gives_a_text_in_a_batch_its_own_vector(bert: BertEmbedder) -> None:
    """With the real model: texts that waited together get the vectors they get alone."""
    texts = [
        "book me a flight to lisbon on friday",
        "my laptop will not start after the update",
        "what is the status of invoice 88213",
        "reset my password please",
    ]
    gate = asyncio.Event()

    async def embed(batch: list[str]) -> np.ndarray:
        await gate.wait()
        return await asyncio.to_thread(bert.embed, batch)

    batches = Batches(embed)
    tasks = [asyncio.create_task(batches.vector(t)) for t in texts]
    await asyncio.sleep(0)
    gate.set()
    together = np.stack(await asyncio.gather(*tasks))
    assert (batches.batches, batches.texts) == (1, 4)  # all four waited together
    np.testing.assert_allclose(together, bert.embed(texts), atol=2e-6)
    alone = np.concatenate([bert.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-6)
