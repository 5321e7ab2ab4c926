"""router.choose.meaning: the ranking that scores only the best rows by words gives exactly the
order and the scores of scoring every row, and the decision by meaning reads the calibration."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.echo_agent import card as echo_card
from bench.routing_eval.dataset import cards, messages
from bench.routing_eval.harness import Env, catalog
from router.choose import meaning
from router.choose.meaning import _Ranking
from router.choose.models import local_embedder
from router.choose.semantic import Calibration, fuse
from router.choose.skillindex import query_text
from router.protocol.errors import RpcError
from router.protocol.versions import Op

SOME = ("flights", "hotels", "car-rental", "rail", "expenses", "corporate-cards", "leave", "fx")


@pytest.fixture
async def env(model_dir: Path) -> AsyncIterator[Env]:
    card_set = {k: v for k, v in cards().items() if k in SOME}
    cal = Calibration(agent=0.3, example=0.5, lexical=0.5, lexical_k=3.0)
    async with catalog(local_embedder(model_dir), cal, card_set=card_set) as env:
        yield env


@pytest.mark.parametrize("small", [0, meaning.SMALL])  # 0: the candidates scored as arrays
@pytest.mark.parametrize("first", [1, 3, 8, 1000])
async def test_the_lazy_ranking_equals_scoring_every_row(
    env: Env, first: int, small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(meaning, "SMALL", small)
    index = env.matcher.skill_index()
    semantic = env.semantic
    sindex = semantic.index_for(index, index.pairs)
    cal = semantic.calibration
    texts = [m.text for m in messages()[:40]] + ["convert 100 USD to EUR", "zzz"]
    for text in texts:
        query = query_text(text)
        skill, agent, example, learned = sindex.features(await semantic.query_vector(text))
        lexical = np.zeros(len(index.rows), dtype=np.float32)
        for n, value in index.text.scores(query).items():
            if n < len(lexical):
                lexical[n] = value
        full = fuse(cal, skill, agent, example, lexical, learned)
        zero = np.zeros(len(skill), dtype=np.float32)
        ranking = _Ranking(
            cal, index, query, fuse(cal, skill, agent, example, zero, learned), first
        )
        got = list(ranking.descending())
        assert sorted(n for n, _ in got) == list(range(len(index.rows)))
        scores = [s for _, s in got]
        assert scores == sorted(scores, reverse=True), text
        np.testing.assert_allclose([full[n] for n, _ in got], scores, atol=1e-5)


async def test_the_floor_and_the_margin_decide(env: Env) -> None:
    params = {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m",
            "parts": [{"text": "the rental counter in Faro says my booking for the van is gone"}],
        }
    }
    semantic = env.semantic
    choice = await env.chooser.choose("1.0", Op.SEND, params)
    assert choice.tier == "semantic" and choice.agent.id == "car-rental"
    assert choice.margin is not None and choice.margin > 0
    semantic.calibration = replace(semantic.calibration, floor=choice.score + 0.01)
    with pytest.raises(RpcError) as refused:
        await env.chooser.choose("1.0", Op.SEND, params)
    assert refused.value.data["reason"] == "no match" and refused.value.data["closest"]
    semantic.calibration = replace(semantic.calibration, floor=-1.0, margin=choice.margin + 0.01)
    with pytest.raises(RpcError) as ambiguous:
        await env.chooser.choose("1.0", Op.SEND, params)
    assert ambiguous.value.data["reason"] == "ambiguous"
    assert ambiguous.value.data["margin"] == pytest.approx(choice.margin, abs=1e-6)


async def test_a_skill_not_embedded_yet_is_routed_by_its_words(env: Env) -> None:
    """Registered while its vectors are pending (here the index hook never embeds): its skills
    are scored by their words alone, tier ``lexical-fallback`` (as admin-api.md promises),
    while a refusal by meaning of the embedded skills stands."""

    async def not_yet(snapshot: object) -> None:
        return None

    env.registry.on_index = not_yet
    card = echo_card("https://echo.example.com")
    await env.registry.register_card(card, "echo")
    params = {
        "message": {
            "role": "ROLE_USER",
            "messageId": "m",
            "parts": [{"text": "echo hello benchmark"}],
        }
    }
    choice = await env.chooser.choose("1.0", Op.SEND, params)
    assert (choice.agent.id, choice.skill_id, choice.tier) == ("echo", "echo", "lexical-fallback")
    semantic = env.semantic
    semantic.calibration = replace(semantic.calibration, floor=2.0)  # meaning refuses all
    flights = dict(params, message={**params["message"], "parts": [{"text": "book a flight"}]})
    with pytest.raises(RpcError) as refused:  # the words pick an embedded skill: refused
        await env.chooser.choose("1.0", Op.SEND, flights)
    assert refused.value.data["reason"] == "no match"
    choice = await env.chooser.choose("1.0", Op.SEND, params)
    assert choice.agent.id == "echo" and choice.tier == "lexical-fallback"
