"""Catalog search by meaning as the admin API serves it (``match=semantic``): the mode chosen,
the hook's scores ranked with the other filters and the caller's visibility, the cursors of
each mode, the fallback to words. The hook here is a table of scores (the router's, with the
real model, is tested in tests/router/choose/test_search.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from registry.appkeys import REGISTRY, SEARCH_BY_MEANING
from registry.meaningsearch import NO_ROUTER, ScoreByMeaning, Scored, Unavailable
from router.app import create_app
from tests.support.helpers import AUTH, card_v03, card_v1, make_settings

SCORES = {"radar-image": 0.91, "forecast": 0.8, "extract-invoice": 0.66}
"""What the table hook finds for any text (skills of other ids: nothing)."""


def table(app: Any, scores: Mapping[str, float] = SCORES) -> ScoreByMeaning:
    """A hook that scores the skills of the current snapshot from ``scores`` (by skill id)."""

    async def score(text: str) -> Scored | Unavailable:
        snapshot = app[REGISTRY].catalog.snapshot
        found = {
            (agent.id, n): scores[skill.id]
            for agent in snapshot.agents.values()
            for n, skill in enumerate(agent.card.skills)
            if skill.id in scores
        }
        return Scored(snapshot, found, 0.6)

    return score


async def _client(aiohttp_client: Any, sqlite_url: str, hook: str = "table", **settings: Any):
    """The app (``settings`` over the tests' own) with the table hook (``hook="table"``),
    one saying the model is loading (``"loading"``), or none (``"none"``); the weather agent
    (forecast, radar-image) and the invoice agent (extract-invoice) registered."""
    app = create_app(make_settings(sqlite_url, **settings))
    if hook == "table":
        app[SEARCH_BY_MEANING] = table(app)
    elif hook == "loading":

        async def loading(text: str) -> Unavailable:
            return Unavailable("lexical (fallback: the embedding model is loading)")

        app[SEARCH_BY_MEANING] = loading
    else:
        app.pop(SEARCH_BY_MEANING, None)  # a registry without a router
    client = await aiohttp_client(app)
    for agent_id, card in (
        ("wx", card_v1("https://wx.example")),
        ("inv", card_v03("https://inv.example")),
    ):
        resp = await client.post(
            "/api/v1/agents", json={"card": card, "id": agent_id}, headers=AUTH
        )
        assert resp.status == 201, await resp.text()
    return client


async def _get(client: TestClient, path: str, status: int = 200, **params: Any) -> Any:
    resp = await client.get(path, params=params)
    body = await resp.json()
    assert resp.status == status, body
    return body


async def test_both_endpoints_rank_by_the_hooks_scores(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url)
    agents = await _get(client, "/api/v1/agents", q="drizzle", match="semantic")
    assert agents["match"] == "semantic" and "match_fallback" not in agents
    assert [(a["id"], a["score"], a["matched_skills"]) for a in agents["agents"]] == [
        ("wx", 0.91, ["forecast", "radar-image"]),  # its best skill's score; card order
        ("inv", 0.66, ["extract-invoice"]),
    ]
    skills = await _get(client, "/api/v1/skills", q="drizzle", match="semantic")
    assert skills["match"] == "semantic"
    assert [(s["id"], s["agent"]["id"], s["score"]) for s in skills["skills"]] == [
        ("radar-image", "wx", 0.91),
        ("forecast", "wx", 0.8),
        ("extract-invoice", "inv", 0.66),
    ]


@pytest.mark.parametrize(
    ("params", "agents", "skills"),
    [
        ({"tag": "forecast"}, [("wx", 0.8, ["forecast"])], ["forecast"]),
        ({"skill": "extract-invoice"}, [("inv", 0.66, ["extract-invoice"])], ["extract-invoice"]),
        ({"output_mode": "image/*"}, [("wx", 0.91, ["radar-image"])], ["radar-image"]),
        ({"streaming": "false"}, [("inv", 0.66, ["extract-invoice"])], ["extract-invoice"]),
        (
            {"protocol_version": "1.0"},
            [("wx", 0.91, ["forecast", "radar-image"])],
            ["radar-image", "forecast"],
        ),
        ({"verification": "verified"}, [], []),
        (
            {"health": "unknown", "tag": "weather"},
            [("wx", 0.91, ["forecast", "radar-image"])],
            ["radar-image", "forecast"],
        ),
        ({"health": "healthy"}, [], []),
    ],
)
async def test_the_other_filters_hold_as_they_do_by_words(
    aiohttp_client: Any,
    sqlite_url: str,
    params: dict[str, str],
    agents: list[Any],
    skills: list[str],
) -> None:
    client = await _client(aiohttp_client, sqlite_url)
    found = await _get(client, "/api/v1/agents", q="anything", match="semantic", **params)
    assert [(a["id"], a["score"], a["matched_skills"]) for a in found["agents"]] == agents
    found = await _get(client, "/api/v1/skills", q="anything", match="semantic", **params)
    assert [s["id"] for s in found["skills"]] == skills


async def test_the_default_is_the_routers_matcher(
    aiohttp_client: Any, sqlite_url: str, tmp_path: Path
) -> None:
    by_words = await _client(aiohttp_client, sqlite_url, matcher="lexical")
    found = await _get(by_words, "/api/v1/agents", q="radar")
    assert found["match"] == "lexical" and "match_fallback" not in found
    assert [(a["id"], a["score"] > 1) for a in found["agents"]] == [("wx", True)]  # BM25
    asked = await _get(by_words, "/api/v1/agents", q="radar", match="semantic")
    assert asked["match"] == "semantic" and asked["agents"][0]["score"] == 0.91
    other = f"sqlite:///{tmp_path / 'other.db'}"
    by_meaning = await _client(aiohttp_client, other, matcher="semantic")
    found = await _get(by_meaning, "/api/v1/skills", q="radar")
    assert found["match"] == "semantic" and found["skills"][0]["score"] == 0.91
    words = await _get(by_meaning, "/api/v1/skills", q="radar", match="lexical")
    assert words["match"] == "lexical" and [s["id"] for s in words["skills"]] == ["radar-image"]
    listing = await _get(by_meaning, "/api/v1/agents")  # no q: nothing ranked, no mode
    assert "match" not in listing and "score" not in listing["agents"][0]


@pytest.mark.parametrize(
    ("hook", "why"),
    [("loading", "the embedding model is loading"), ("none", NO_ROUTER)],
)
async def test_without_a_model_a_search_goes_by_words_and_says_why(
    aiohttp_client: Any, sqlite_url: str, hook: str, why: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url, hook, matcher="semantic")
    for asked in ({}, {"match": "semantic"}):
        found = await _get(client, "/api/v1/agents", q="invoice totals", **asked)
        assert found["match"] == "lexical" and why in found["match_fallback"]
        assert [a["id"] for a in found["agents"]] == ["inv"] and found["agents"][0]["score"] > 1
    found = await _get(client, "/api/v1/skills", q="invoice totals", match="lexical")
    assert "match_fallback" not in found


async def test_pages_and_a_cursor_of_one_mode_refused_in_the_other(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url)
    seen, cursor = [], None
    while True:
        extra = {"cursor": cursor} if cursor else {}
        page = await _get(
            client, "/api/v1/skills", q="weather invoice", match="semantic", limit=1, **extra
        )
        seen += [s["id"] for s in page["skills"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["radar-image", "forecast", "extract-invoice"]
    for path in ("/api/v1/agents", "/api/v1/skills"):
        semantic = await _get(client, path, q="weather invoice", match="semantic", limit=1)
        lexical = await _get(client, path, q="weather invoice", match="lexical", limit=1)
        for mode, cursor in (
            ("lexical", semantic["next_cursor"]),
            ("semantic", lexical["next_cursor"]),
        ):
            refused = await _get(
                client, path, 400, q="weather invoice", match=mode, limit=1, cursor=cursor
            )
            assert refused["error"]["code"] == "invalid_cursor"
            assert "match mode" in refused["error"]["message"]


async def test_a_bad_match_is_a_400_naming_the_choices(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url)
    for path in ("/api/v1/agents", "/api/v1/skills"):
        error = (await _get(client, path, 400, q="weather", match="fuzzy"))["error"]
        assert error["code"] == "invalid_parameter"
        assert error["details"] == {
            "parameter": "match",
            "value": "fuzzy",
            "allowed": ["semantic", "lexical"],
        }
    error = await _get(client, "/api/v1/agents", 400, q="weather", match=["lexical", "semantic"])
    assert error["error"]["code"] == "invalid_parameter"


async def test_a_caller_finds_only_the_skills_it_may_use(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _client(aiohttp_client, sqlite_url, client_auth="api-key")
    made = await client.post("/api/v1/clients", json={"subject": "bob"}, headers=AUTH)
    key = (await made.json())["key"]
    rules = {"rules": [{"subjects": ["bob"], "skills": ["forecast"]}]}
    assert (await client.put("/api/v1/policies/wx", json=rules, headers=AUTH)).status == 200
    policy = {"rules": [{"subjects": ["nobody"]}]}
    assert (await client.put("/api/v1/policies/inv", json=policy, headers=AUTH)).status == 200
    bob = {"Authorization": f"Bearer {key}"}
    resp = await client.get("/api/v1/agents", params={"q": "x", "match": "semantic"}, headers=bob)
    found = await resp.json()
    assert [(a["id"], a["score"], a["matched_skills"]) for a in found["agents"]] == [
        ("wx", 0.8, ["forecast"])  # not the radar's 0.91: bob may not use it
    ]
    resp = await client.get("/api/v1/skills", params={"q": "x", "match": "semantic"}, headers=bob)
    assert [s["id"] for s in (await resp.json())["skills"]] == ["forecast"]
