"""registry.vectors: skill texts embedded at index time, stored by model and content, read
back (not recomputed) by a restart or another replica, recomputed for another model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from registry.crawler import Crawler
from registry.embedding.remote import RemoteEmbedder
from registry.service import Registry
from registry.store import Store
from registry.vectors import SkillVectors, documents, skill_document, text_key
from router.choose.models import local_embedder
from tests.support.helpers import card_v1, make_settings


@pytest.fixture
async def registry(db_url: str) -> AsyncIterator[Registry]:
    store = Store(db_url)
    registry = Registry(store, Crawler(make_settings(db_url)))
    await registry.load()
    try:
        yield registry
    finally:
        await store.close()


async def _register(registry: Registry, n: int = 2) -> None:
    for i in range(n):
        card = card_v1(f"https://agent{i}.example.com", name=f"Agent {i}")
        await registry.register_card(card, f"agent{i}")


def _texts(registry: Registry) -> set[str]:
    return {t for a in registry.catalog.snapshot.agents.values() for t in documents(a)}


async def test_index_embeds_every_text_once_and_a_restart_reads_them(
    registry: Registry, model_dir: Path
) -> None:
    model = local_embedder(model_dir)
    vectors = SkillVectors(registry.store, model)
    registry.on_index = lambda snapshot: vectors.index(snapshot.agents.values())
    await _register(registry)
    await registry.indexed()  # the hook runs behind the registrations
    texts = _texts(registry)
    assert vectors.computed == len(texts) and len(vectors) == len(texts)
    skill = registry.catalog.snapshot.agents["agent0"].card.skills[0]
    found = vectors.get(skill_document(skill))
    assert found is not None and found.dtype == np.float32
    assert abs(float(np.linalg.norm(found)) - 1.0) < 1e-5
    assert await vectors.index(registry.catalog.snapshot.agents.values()) == 0

    again = SkillVectors(registry.store, model)  # a restart, or another replica
    assert await again.load() == len(texts)
    assert await again.index(registry.catalog.snapshot.agents.values()) == 0
    assert again.computed == 0
    np.testing.assert_array_equal(again.get(skill_document(skill)), found)


async def test_another_model_recomputes_everything(registry: Registry, model_dir: Path) -> None:
    first = SkillVectors(registry.store, local_embedder(model_dir))
    await _register(registry)
    await first.index(registry.catalog.snapshot.agents.values())
    other = SkillVectors(registry.store, local_embedder(model_dir, max_tokens=64))
    assert other.model_id != first.model_id
    assert await other.load() == 0
    assert await other.index(registry.catalog.snapshot.agents.values()) == len(_texts(registry))


async def test_a_failing_model_does_not_fail_the_write_and_is_retried(
    registry: Registry, model_dir: Path
) -> None:
    down = RemoteEmbedder("http://127.0.0.1:9/v1", "m", timeout=2.0)
    try:
        vectors = SkillVectors(registry.store, down)
        registry.on_index = lambda snapshot: vectors.index(snapshot.agents.values())
        await _register(registry, 1)  # the registration itself succeeds
        await registry.indexed()
        assert vectors.failure is not None and "127.0.0.1:9" in vectors.failure
        assert len(vectors) == 0
    finally:
        await down.close()
    # the texts are still due: a working model embeds them at the next call
    working = SkillVectors(registry.store, local_embedder(model_dir))
    assert await working.index(registry.catalog.snapshot.agents.values()) > 0
    assert working.failure is None


def test_text_key_is_the_content_address() -> None:
    assert text_key("a") == text_key("a") != text_key("b")
    assert len(text_key("")) == 64


async def test_vectors_of_equal_texts_are_shared(registry: Registry, model_dir: Path) -> None:
    vectors = SkillVectors(registry.store, local_embedder(model_dir))
    assert await vectors.ensure(["book a flight", "book a flight", ""]) == 1
    assert await vectors.ensure(["book a flight"]) == 0
