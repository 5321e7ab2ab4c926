"""router.choose.semantic: the fused score, the shipped calibration, and the index of one snapshot's
vectors (with the real model)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from registry.cards import parse_card
from registry.examples import Example
from registry.records import AgentRecord, utcnow
from registry.store import Store
from registry.vectors import SkillVectors
from router.choose.models import local_embedder
from router.choose.semantic import CALIBRATION_FILE, Calibration, SemanticIndex, fuse
from router.tables import SCHEMA
from tests.support.helpers import card_v1


def test_fuse_weighs_and_saturates() -> None:
    cal = Calibration(skill=1.0, agent=0.0, example=0.0, lexical=1.0, lexical_k=5.0)
    skill = np.array([0.5, 0.5, 0.2], dtype=np.float32)
    zero = np.zeros(3, dtype=np.float32)
    none = np.full(3, -1.0, dtype=np.float32)
    lexical = np.array([0.0, 5.0, 1000.0], dtype=np.float32)
    fused = fuse(cal, skill, zero, none, lexical)
    np.testing.assert_allclose(fused, [0.25, 0.5, (0.2 + 1000 / 1005) / 2], rtol=1e-6)


def test_an_example_counts_only_when_closer_than_the_document() -> None:
    cal = Calibration(skill=1.0, agent=0.0, example=1.0, lexical=0.0)
    skill = np.array([0.6, 0.6], dtype=np.float32)
    example = np.array([-1.0, 0.9], dtype=np.float32)  # no example; a close one
    zero = np.zeros(2, dtype=np.float32)
    fused = fuse(cal, skill, zero, example, zero)
    np.testing.assert_allclose(fused, [0.6, 0.75], rtol=1e-6)


def test_a_learned_example_stands_for_the_skill_whatever_the_weights() -> None:
    cal = Calibration(skill=1.0, agent=0.5, example=0.0, lexical=0.5)
    zero = np.zeros(2, dtype=np.float32)
    none = np.full(2, -1.0, dtype=np.float32)
    skill = np.array([0.5, 0.3], dtype=np.float32)
    learned = np.array([-1.0, 0.95], dtype=np.float32)
    fused = fuse(cal, skill, zero, none, zero, learned)
    assert fused[1] > fused[0]


def test_the_shipped_calibration_is_a_fit_and_loads() -> None:
    data = json.loads(CALIBRATION_FILE.read_text())
    cal = Calibration.load()
    assert cal.to_json() == {**Calibration().to_json(), **data}
    assert "dev messages" in cal.fitted_on  # written by bench/routing_eval/fit.py
    assert 0 <= cal.margin < 1 and -1 < cal.floor < 1


def test_unknown_keys_in_a_calibration_file_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"floor": 0.42, "future": 1}))
    assert Calibration.load(path) == replace(Calibration(), floor=0.42)
    assert Calibration.load(tmp_path / "missing.json") == Calibration()


@pytest.fixture
async def store(sqlite_url: str) -> Store:
    store = Store(sqlite_url, SCHEMA)
    await store.create_schema()
    yield store
    await store.close()


async def test_index_features_are_cosines_of_the_real_model(store: Store, model_dir: Path) -> None:
    now = utcnow()
    card = parse_card(card_v1("https://w.example.com"))
    agent = AgentRecord(
        id="w", card=card, source="push", card_sha256="0" * 64,
        created_at=now, updated_at=now, fetched_at=now,
    )  # fmt: skip
    vectors = SkillVectors(store, local_embedder(model_dir))
    await vectors.index([agent])
    rows = [(agent, s) for s in card.skills]
    learned = [Example("e1", "w", "radar-image", "show me the rain clouds", "feedback", None, now)]
    await vectors.ensure([learned[0].text])
    index = SemanticIndex(rows, vectors, learned)
    assert index.dim == 384 and index.missing == 0
    query = vectors.embedder.embed(["is it going to rain in Paris tomorrow?"])[0]
    skill, agent_sim, example, learned_sim = index.features(query)
    assert skill[0] > skill[1]  # the forecast skill, not the radar map
    assert agent_sim[0] == agent_sim[1]  # the same agent
    assert example[0] > 0.8  # its card example is nearly the question
    assert example[1] == -1.0  # the radar skill has no example
    assert learned_sim[0] == -1.0 and learned_sim[1] > 0.3


async def test_an_index_without_any_vector_yet_matches_nothing(
    store: Store, model_dir: Path
) -> None:
    """Another process registered the only agent; this one has not read its vectors yet."""
    now = utcnow()
    card = parse_card(card_v1("https://w.example.com"))
    agent = AgentRecord(
        id="w", card=card, source="push", card_sha256="0" * 64,
        created_at=now, updated_at=now, fetched_at=now,
    )  # fmt: skip
    vectors = SkillVectors(store, local_embedder(model_dir))
    index = SemanticIndex([(agent, s) for s in card.skills], vectors, [])
    assert index.dim == 0 and index.missing == len(card.skills)
    query = vectors.embedder.embed(["is it going to rain in Paris tomorrow?"])[0]
    skill, agent_sim, example, learned_sim = index.features(query)
    assert list(skill) == list(agent_sim) == [0.0] * len(card.skills)
    assert list(example) == list(learned_sim) == [-1.0] * len(card.skills)


async def test_an_index_takes_its_dimension_from_whichever_text_has_a_vector(
    store: Store, model_dir: Path
) -> None:
    """A burst of registrations is embedded once it ends: meanwhile the first agents' texts
    have no vector, while a later agent's do, and so does a learned example."""
    now = utcnow()

    def agent(n: int) -> AgentRecord:
        skill = {"id": "forecast", "name": f"Forecast {n}", "description": f"Weather in city {n}."}
        card = card_v1(f"https://w{n}.example.com", name=f"W {n}", skills=[skill])
        return AgentRecord(
            id=f"w{n}", card=parse_card(card), source="push", card_sha256="0" * 64,
            created_at=now, updated_at=now, fetched_at=now,
        )  # fmt: skip

    agents = [agent(n) for n in range(10)]
    vectors = SkillVectors(store, local_embedder(model_dir))
    await vectors.index(agents[9:])  # only the last agent embedded so far
    rows = [(a, a.card.skills[0]) for a in agents]
    learned = [Example("e1", "w0", "forecast", "will it rain tomorrow", "feedback", None, now)]
    await vectors.ensure([learned[0].text])
    index = SemanticIndex(rows, vectors, learned)
    assert index.dim == 384 and index.missing == 9
    query = vectors.embedder.embed(["is it going to rain in Paris tomorrow?"])[0]
    skill, _agent, _example, learned_sim = index.features(query)
    assert skill[9] > 0.1 and list(skill[:9]) == [0.0] * 9  # the embedded agent's only
    assert learned_sim[0] > 0.5 and list(learned_sim[1:]) == [-1.0] * 9

    learned_only = SemanticIndex(rows[:2], vectors, learned)  # no row embedded, one example
    assert learned_only.dim == 384 and learned_only.missing == 2
