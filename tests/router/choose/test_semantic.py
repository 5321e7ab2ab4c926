"""router.choose.semantic: the fused score (on [0, 1]), the shipped calibration and its operating
points, and the index of one snapshot's vectors (with the real model)."""

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
from router.choose.semantic import (
    CALIBRATION_FILE,
    Calibration,
    Cutoff,
    SemanticIndex,
    fuse,
    saturate,
    similarity,
)
from router.tables import SCHEMA
from tests.support.helpers import card_v1


def test_fuse_weighs_and_saturates() -> None:
    cal = Calibration(skill=1.0, agent=0.0, example=0.0, lexical=1.0, lexical_k=5.0)
    skill = np.array([0.5, 0.5, 0.2], dtype=np.float32)
    zero = np.zeros(3, dtype=np.float32)
    none = np.full(3, np.nan, dtype=np.float32)
    lexical = np.array([0.0, 5.0, 1000.0], dtype=np.float32)
    fused = fuse(cal, skill, zero, none, lexical)
    np.testing.assert_allclose(fused, [0.25, 0.5, (0.2 + 1000 / 1005) / 2], rtol=1e-6)


def test_an_example_counts_only_when_closer_than_the_document() -> None:
    cal = Calibration(skill=1.0, agent=0.0, example=1.0, lexical=0.0)
    skill = np.array([0.6, 0.6], dtype=np.float32)
    example = np.array([np.nan, 0.9], dtype=np.float32)  # no example; a close one
    zero = np.zeros(2, dtype=np.float32)
    fused = fuse(cal, skill, zero, example, zero)
    np.testing.assert_allclose(fused, [0.6, 0.75], rtol=1e-6)


def test_a_learned_example_stands_for_the_skill_whatever_the_weights() -> None:
    cal = Calibration(skill=1.0, agent=0.5, example=0.0, lexical=0.5)
    zero = np.zeros(2, dtype=np.float32)
    none = np.full(2, np.nan, dtype=np.float32)
    skill = np.array([0.5, 0.3], dtype=np.float32)
    learned = np.array([np.nan, 0.95], dtype=np.float32)
    fused = fuse(cal, skill, zero, none, zero, learned)
    assert fused[1] > fused[0]


def test_the_shipped_calibration_is_a_fit_and_loads() -> None:
    data = json.loads(CALIBRATION_FILE.read_text())
    cal = Calibration.load()
    assert cal.to_json() == {**Calibration().to_json(), **data}
    assert "dev messages" in cal.fitted_on  # written by bench/routing_eval/fit.py
    assert 0 <= cal.margin < 1 and 0 < cal.floor < 1
    assert cal.strict_floor is not None and cal.floor <= cal.strict_floor < 1


def test_features_and_scores_are_on_zero_to_one() -> None:
    assert list(similarity(np.array([-1.0, 0.0, 1.0, 1.0001]))) == [0.0, 0.5, 1.0, 1.0]
    assert saturate(0.0, 10.0) == 0.0 and saturate(10.0, 10.0) == 0.5
    cal = Calibration(skill=1.0, agent=0.5, example=0.5, lexical=0.5, lexical_k=10.0)
    one, nan = np.ones(1, np.float32), np.full(1, np.nan, np.float32)
    assert fuse(cal, one, one, nan, np.array([1e9]), nan)[0] == pytest.approx(1.0)
    zero = np.zeros(1, np.float32)
    assert fuse(cal, zero, zero, nan, zero, nan)[0] == 0.0


def test_the_operating_points_and_the_operators_threshold() -> None:
    cal = Calibration(floor=0.55, margin=0.001, strict_floor=0.58, strict_margin=0.002)
    assert cal.cutoff() == Cutoff(0.55, 0.001, "calibrated", "calibrated")
    assert cal.cutoff("never") == Cutoff(0.55, 0.001, "calibrated", "never")
    assert cal.cutoff("strict") == Cutoff(0.58, 0.002, "calibrated", "strict")
    assert cal.cutoff("strict", 0.7) == Cutoff(0.7, 0.002, "operator", "strict")
    assert replace(cal, strict_floor=None).cutoff("strict").threshold == 0.55
    assert cal.cutoff().to_json() == {
        "threshold": 0.55,
        "threshold_source": "calibrated",
        "margin_needed": 0.001,
        "refuse": "calibrated",
    }


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


async def test_index_features_are_similarities_of_the_real_model(
    store: Store, model_dir: Path
) -> None:
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
    assert example[0] > 0.9  # its card example is nearly the question (cosine over 0.8)
    assert np.isnan(example[1])  # the radar skill has no example
    assert np.isnan(learned_sim[0]) and learned_sim[1] > 0.65
    assert all(0 <= v <= 1 for v in (*skill, *agent_sim, example[0], learned_sim[1]))


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
    assert np.isnan(example).all() and np.isnan(learned_sim).all()


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
    assert skill[9] > 0.55 and list(skill[:9]) == [0.0] * 9  # the embedded agent's only
    assert learned_sim[0] > 0.75 and np.isnan(learned_sim[1:]).all()

    learned_only = SemanticIndex(rows[:2], vectors, learned)  # no row embedded, one example
    assert learned_only.dim == 384 and learned_only.missing == 2
