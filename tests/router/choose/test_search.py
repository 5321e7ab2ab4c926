"""Catalog search by meaning scored by the router (``router/choose/search.py``) with the real
model and the shipped calibration: texts that share no word with a card find it on both
endpoints, the score is routing's own, nothing under the threshold is returned, and without
a model (or vectors) a search goes by words and says why."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from registry.appkeys import REGISTRY
from registry.textsearch import tokenize
from router.app import MODEL, create_app
from router.transport.routes import ROUTER
from tests.support.helpers import AUTH, make_record, make_settings


def _card(name: str, description: str, skill: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"https://{skill['id']}.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"tags": [], **skill}],
    }


CARDS = {
    "helpdesk": _card(
        "IT Helpdesk",
        "Technical support for employees' laptops and accounts.",
        {
            "id": "troubleshoot-device",
            "name": "Troubleshoot hardware",
            "description": "Diagnoses sluggish or crashing laptops, jammed printers and "
            "Wi-Fi that drops.",
            "tags": ["support"],
            "examples": ["my laptop keeps freezing"],
        },
    ),
    "expenses": _card(
        "Expense desk",
        "Travel and purchase expense claims.",
        {
            "id": "expense-claim",
            "name": "Expense reimbursement",
            "description": "Files receipts and pays back costs employees covered themselves.",
            "tags": ["finance", "receipts"],
            "examples": ["claim my hotel receipt"],
        },
    ),
    "rooms": _card(
        "Meeting rooms",
        "Books meeting rooms in every office.",
        {
            "id": "book-room",
            "name": "Book a meeting room",
            "description": "Reserves a room with a projector or a video screen for a meeting.",
            "tags": ["facilities"],
            "examples": ["a room for six on Thursday at 10"],
        },
    ),
}
PARAPHRASES = [
    ("my computer is slow", "helpdesk", "troubleshoot-device"),
    ("reimburse", "expenses", "expense-claim"),
    ("get my money returned for the taxi I took to the airport", "expenses", "expense-claim"),
]


async def _app(aiohttp_client: Any, sqlite_url: str, retry: float = 30, **settings: Any) -> Any:
    """The app of these settings (the model looked for every ``retry`` seconds while it is
    missing), the three cards registered."""
    app = create_app(make_settings(sqlite_url, **settings))
    app[MODEL].retry = retry
    client = await aiohttp_client(app)
    for agent_id, card in CARDS.items():
        body = {"card": card, "id": agent_id}
        resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
        assert resp.status == 201, await resp.text()
    return client


@pytest.fixture
async def searching(aiohttp_client: Any, sqlite_url: str, model_dir: Path) -> TestClient:
    """The app matching by meaning with the real model, the three cards registered (each
    registration answers once its vectors are stored)."""
    return await _app(
        aiohttp_client, sqlite_url, matcher="semantic", embedding_model=str(model_dir)
    )


async def _get(client: TestClient, path: str, **params: Any) -> Any:
    resp = await client.get(path, params=params)
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def _explained(client: TestClient, text: str) -> dict[tuple[str, str], float]:
    message = {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]}
    resp = await client.post("/api/v1/route/explain", json={"message": message})
    assert resp.status == 200, await resp.text()
    return {(c["agent_id"], c["skill_id"]): c["score"] for c in (await resp.json())["candidates"]}


def _words(card: dict[str, Any]) -> set[str]:
    skill = card["skills"][0]
    texts = [card["name"], card["description"], skill["id"].replace("-", " "), skill["name"]]
    texts += [skill["description"], *skill["tags"], *skill["examples"]]
    return {word for text in texts for word in tokenize(text)}


@pytest.mark.parametrize(("text", "agent", "skill"), PARAPHRASES)
async def test_a_text_sharing_no_word_with_the_card_finds_it(
    searching: TestClient, text: str, agent: str, skill: str
) -> None:
    assert not set(tokenize(text)) & _words(CARDS[agent])  # no word in common
    words = await _get(searching, "/api/v1/agents", q=text, match="lexical")
    assert words["match"] == "lexical" and agent not in [a["id"] for a in words["agents"]]
    found = await _get(searching, "/api/v1/agents", q=text)  # the default: the matcher's
    assert found["match"] == "semantic" and "match_fallback" not in found
    assert found["agents"][0]["id"] == agent
    assert found["agents"][0]["matched_skills"] == [skill]
    skills = await _get(searching, "/api/v1/skills", q=text)
    assert skills["match"] == "semantic"
    assert (skills["skills"][0]["agent"]["id"], skills["skills"][0]["id"]) == (agent, skill)


async def test_the_score_is_routings_and_nothing_under_the_threshold_is_found(
    searching: TestClient,
) -> None:
    text = "my computer is slow"
    explained = await _explained(searching, text)
    found = (await _get(searching, "/api/v1/skills", q=text))["skills"]
    matcher = searching.app[ROUTER].matcher
    semantic, threshold = matcher.semantic, matcher.cutoff().threshold
    for row in found:
        score = row["score"]
        assert threshold <= score <= 1
        assert score == pytest.approx(explained[(row["agent"]["id"], row["id"])], abs=2e-6)
    assert {(r["agent"]["id"], r["id"]) for r in found} == {
        key for key, score in explained.items() if score >= threshold
    }
    # a threshold between the best two: only the best is found, on both endpoints
    ranked = sorted(explained.values(), reverse=True)
    semantic.calibration = replace(semantic.calibration, floor=(ranked[0] + ranked[1]) / 2)
    skills = await _get(searching, "/api/v1/skills", q=text)
    assert [s["id"] for s in skills["skills"]] == ["troubleshoot-device"]
    agents = await _get(searching, "/api/v1/agents", q=text)
    assert [a["id"] for a in agents["agents"]] == ["helpdesk"]
    assert agents["agents"][0]["score"] == skills["skills"][0]["score"]
    semantic.calibration = replace(semantic.calibration, floor=1.0)  # above every score
    assert (await _get(searching, "/api/v1/agents", q=text))["agents"] == []


async def test_a_skill_without_its_vectors_yet_means_words_meanwhile(
    searching: TestClient,
) -> None:
    registry = searching.app[REGISTRY]
    card = _card("Parking", "Visitor parking.", {"id": "park", "name": "Reserve a parking spot"})
    record, _ = make_record("parking", card)
    assert registry.catalog.upsert(record, registry.catalog.snapshot.version + 1)  # not embedded
    found = await _get(searching, "/api/v1/agents", q="parking spot")
    assert found["match"] == "lexical"
    assert (
        found["match_fallback"]
        == "1 skill(s) not embedded yet (registered or changed a moment ago)"
    )
    assert [a["id"] for a in found["agents"]] == ["parking"]


async def test_the_default_follows_the_matcher(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await _app(aiohttp_client, sqlite_url, matcher="lexical")
    found = await _get(client, "/api/v1/skills", q="reimbursement")
    assert found["match"] == "lexical" and "match_fallback" not in found
    assert [s["id"] for s in found["skills"]] == ["expense-claim"] and found["skills"][0][
        "score"
    ] > 1
    asked = await _get(client, "/api/v1/skills", q="reimbursement", match="semantic")
    assert asked["match"] == "lexical"
    assert asked["match_fallback"] == "lexical (SWITCHBOARD_MATCHER=lexical)"
    assert asked["skills"] == found["skills"]


async def test_while_the_model_is_missing_then_once_it_is_there(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, tmp_path: Path
) -> None:
    later = tmp_path / "model"
    later.mkdir()
    settings = {"matcher": "semantic", "embedding_model": str(later)}
    client = await _app(aiohttp_client, sqlite_url, retry=0.05, **settings)
    loader = client.app[MODEL]
    found = await _get(client, "/api/v1/agents", q="my computer is slow")
    assert found == {
        "agents": [],
        "next_cursor": None,
        "match": "lexical",
        "match_fallback": client.app[ROUTER].matcher.status,
    }
    assert "no embedding model" in found["match_fallback"]
    _copy_files(model_dir, later)  # what `switchboard models fetch` puts there
    async with loader.embedded:
        await asyncio.wait_for(loader.embedded.wait_for(lambda: loader.state == "ok"), 30)
    found = await _get(client, "/api/v1/agents", q="my computer is slow")
    assert found["match"] == "semantic" and found["agents"][0]["id"] == "helpdesk"


def _copy_files(source: Path, target: Path) -> None:
    for item in source.iterdir():
        if item.is_file():
            shutil.copy(item, target / item.name)
