"""Catalog search semantics, media types, text ranking and cursors, without HTTP."""

from __future__ import annotations

import random
from typing import Any

import pytest

from registry import catalog, mediatypes
from registry.cards import parse_card
from registry.catalog import AGENTS, SKILLS, Query, Snapshot, version_matches
from registry.errors import RegistryError
from registry.paging import decode_cursor, encode_cursor, paginate
from registry.records import AgentRecord, utcnow
from registry.textsearch import tokenize
from tests.support.helpers import card_v03, card_v1


def _snapshot(*cards: dict) -> Snapshot:
    now = utcnow()
    records = [
        AgentRecord(
            id=f"agent-{n}",
            card=parse_card(card),
            source="push",
            card_sha256="0" * 64,
            created_at=now,
            updated_at=now,
            fetched_at=now,
        )
        for n, card in enumerate(cards)
    ]
    return Snapshot(records, version=1)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("image/png", "image/png", True),
        ("image/*", "image/png", True),
        ("image/png", "image/*", True),
        ("IMAGE/PNG", "image/png; q=0.9", True),
        ("*/*", "application/json", True),
        ("image/png", "image/jpeg", False),
        ("image/*", "text/*", False),
        ("text", "text/plain", True),
        ("file", "application/pdf", True),
        ("data", "application/json", True),
    ],
)
def test_media_types(a: str, b: str, expected: bool) -> None:
    assert mediatypes.matches(a, b) is expected


@pytest.mark.parametrize(
    ("wanted", "offered", "expected"),
    [
        ("0.3", "0.3.0", True),
        ("0.3.0", "0.3", True),
        ("1", "1.0", True),
        ("1.0", "1.0", True),
        ("0.3", "1.0", False),
        ("1.1", "1.0", False),
        ("", "1.0", False),
    ],
)
def test_version_matches(wanted: str, offered: str, expected: bool) -> None:
    assert version_matches(wanted, offered) is expected


def test_tokenize_folds_case_accents_plurals_and_stop_words() -> None:
    assert tokenize("Convert the Currencies to Euros, café!") == [
        "convert",
        "currency",
        "euro",
        "cafe",
    ]


def test_text_ranking_prefers_name_and_tags_over_examples() -> None:
    named = card_v1("https://a.example", name="Translator")
    named["skills"] = [{"id": "tr", "name": "Translate text", "tags": ["translation"]}]
    mentioned = card_v03("https://b.example", name="Helper")
    mentioned["skills"] = [
        {"id": "misc", "name": "Misc", "tags": [], "examples": ["translate this letter"]}
    ]
    hits = _snapshot(named, mentioned).skills(Query(q="translate"))
    assert [h.skill.id for h in hits] == ["tr", "misc"]
    assert hits[0].score > hits[1].score > 0


def test_agent_level_and_skill_level_filters() -> None:
    snap = _snapshot(card_v1("https://a.example"), card_v03("https://b.example"))
    assert [h.agent.id for h in snap.agents_for(Query(streaming=True))] == ["agent-0"]
    hits = snap.agents_for(Query(tags=("weather",)))
    assert hits[0].skills == ("forecast", "radar-image")
    assert snap.agents_for(Query(skill="forecast", output_mode="image/png")) == []


def test_cursors_round_trip_and_reject_garbage() -> None:
    shape = (float, str)
    assert decode_cursor(encode_cursor("agents:x", [-1.5, "x"]), "agents:x", shape) == [-1.5, "x"]
    bad = [
        "",
        "***",
        "e30",  # {}
        encode_cursor("agents:x", [-1.5]),  # wrong length
        encode_cursor("agents:x", ["a", "b"]),  # wrong types
        encode_cursor("agents:y", [-1.5, "x"]),  # another query
        "eyJzIjoiYWdlbnRzOngiLCJrIjpbTmFOLCJ4Il19",  # {"s":"agents:x","k":[NaN,"x"]}
    ]
    for cursor in bad:
        with pytest.raises(RegistryError) as info:
            decode_cursor(cursor or "=", "agents:x", shape)
        assert info.value.code == "invalid_cursor"


def test_paginate_pages_through_and_cursors_are_scoped() -> None:
    snap = _snapshot(card_v1("https://a.example"), card_v03("https://b.example"))
    query = Query()
    hits = snap.agents_for(query)
    first = paginate(hits, AGENTS, query, 1, None)
    assert [h.agent.id for h in first.items] == ["agent-0"]
    second = paginate(hits, AGENTS, query, 1, first.next_cursor)
    assert [h.agent.id for h in second.items] == ["agent-1"]
    assert second.next_cursor is None
    for other_query, ordering, items in (
        (Query(streaming=True), AGENTS, hits),
        (query, SKILLS, snap.skills(query)),
    ):
        with pytest.raises(RegistryError, match="another listing"):
            paginate(items, ordering, other_query, 1, first.next_cursor)


def test_text_query_lists_only_matching_skills() -> None:
    snap = _snapshot(card_v1("https://a.example"))
    (hit,) = snap.agents_for(Query(q="radar"))
    assert hit.skills == ("radar-image",)
    (hit,) = snap.agents_for(Query(q="weather agent"))  # the agent's own name
    assert hit.score > 0


def _random_catalog(seed: int, agents: int = 40) -> Snapshot:
    """Agents whose skills draw words from a small vocabulary: many ties and shared words."""
    rnd = random.Random(seed)
    words = ["rain", "sun", "map", "tide", "wind", "storm", "city", "report", "data", "image"]
    cards = []
    for n in range(agents):
        card = card_v1(f"https://a{n}.example", name=f"Agent {rnd.choice(words)} {n}")
        card["capabilities"] = {"streaming": rnd.random() < 0.5}
        card["skills"] = [
            {
                "id": f"s{k}",
                "name": " ".join(rnd.sample(words, 2)),
                "description": " ".join(rnd.choices(words, k=rnd.randint(0, 6))),
                "tags": rnd.sample(words, rnd.randint(0, 2)),
            }
            for k in range(rnd.randint(1, 4))
        ]
        cards.append(card)
    return _snapshot(*cards)


def _walk(ranked: Any, ordering: Any, query: Query, limit: int) -> list[Any]:
    """Every page of a ranked walk, each after the last item of the one before."""
    walked: list[Any] = []
    after = None
    while True:
        page, more = ranked(query, limit, after)
        walked += page
        if not more:
            return walked
        after = ordering.key(page[-1])


@pytest.mark.parametrize("seed", range(8))
def test_the_ranked_walk_pages_like_the_full_scan(seed: int) -> None:
    """Every page of a ranked text search found best first equals that page of the full,
    sorted scan, cursors included (ties across page boundaries too)."""
    snapshot = _random_catalog(seed)
    rnd = random.Random(seed)
    for text in ("rain", "storm city", "map data image", "tide", "nothing here"):
        for streaming in (None, True):
            query = Query(q=text, streaming=streaming)
            full = snapshot.skills(query)
            walked = _walk(snapshot.ranked_skills, SKILLS, query, rnd.randint(1, 7))
            assert [(h.agent.id, h.skill.id, h.score) for h in walked] == [
                (h.agent.id, h.skill.id, h.score) for h in full
            ]


@pytest.mark.parametrize("seed", range(8))
def test_the_ranked_walk_pages_agents_like_the_full_scan(seed: int) -> None:
    snapshot = _random_catalog(seed, agents=60)
    rnd = random.Random(seed)
    for text in ("rain", "storm city", "map data image", "agent", "tide wind", "nothing here"):
        for streaming in (None, False):
            query = Query(q=text, streaming=streaming)
            full = snapshot.agents_for(query)
            walked = _walk(snapshot.ranked_agents, AGENTS, query, rnd.randint(1, 9))
            assert [(h.agent.id, h.score, h.skills) for h in walked] == [
                (h.agent.id, h.score, h.skills) for h in full
            ]


def test_interface_owners_follow_each_change_from_the_previous_snapshot() -> None:
    first = _snapshot(card_v1("https://a.example"), card_v1("https://b.example"))
    assert first.interface_owners("https://a.example/a2a", None) == ("agent-0",)
    assert first.interface_owners("https://c.example/a2a", None) == ()
    a, b = first.agents["agent-0"], first.agents["agent-1"]
    moved = a.model_copy(update={"card": parse_card(card_v1("https://c.example"))})
    twin = b.model_copy(update={"id": "agent-2"})  # an older database may hold two
    second = Snapshot([moved, b, twin], 2, first)
    assert second.interface_owners("https://a.example/a2a", None) == ()
    assert second.interface_owners("https://c.example/a2a", None) == ("agent-0",)
    assert second.interface_owners("https://b.example/a2a", None) == ("agent-1", "agent-2")
    third = Snapshot([moved], 3, second)  # agent-1 and agent-2 removed
    assert third.interface_owners("https://b.example/a2a", None) == ()
    assert third.interface_owners("https://c.example/a2a", None) == ("agent-0",)
    fresh = Snapshot([moved, b, twin], 4)  # built from nothing: the same answers
    assert fresh._owners == {k: v for k, v in second._owners.items() if v}


@pytest.mark.parametrize("seed", range(6))
def test_catalog_writes_equal_a_snapshot_built_from_scratch(seed: int) -> None:
    """Upserts (new agents and changed ones), removals, applied changes and patches, made
    without sorting or rescanning every agent, leave the same agents in id order and the
    same interface owners as a snapshot built from the records alone."""
    rnd = random.Random(seed)
    now = utcnow()

    def record(agent_id: str) -> AgentRecord:
        host = f"https://h{rnd.randrange(6)}.example"  # shared URLs: several owners
        return AgentRecord(
            id=agent_id, card=parse_card(card_v1(host)), source="push", card_sha256="0" * 64,
            created_at=now, updated_at=now, fetched_at=now,
        )  # fmt: skip

    cat = catalog.Catalog()
    cat.replace([record(f"a{n:02d}") for n in range(0, 20, 2)], 1)
    for _ in range(60):
        version, ids = cat.snapshot.version + 1, [f"a{rnd.randrange(30):02d}" for _ in range(3)]
        cat.snapshot.interface_owners("", None)  # owners built: the next write updates them
        step = rnd.choice(["upsert", "remove", "apply", "patch"])
        if step == "upsert":
            assert cat.upsert(record(ids[0]), version)
        elif step == "remove":
            assert cat.remove(ids[0], version)
        elif step == "apply":
            cat.apply({i: None if rnd.random() < 0.3 else record(i) for i in ids}, version)
        else:
            cat.patch(record(ids[0]))
        fresh = Snapshot(list(cat.snapshot.agents.values()), version)
        assert list(cat.snapshot.agents) == sorted(cat.snapshot.agents) == list(fresh.agents)
        owners = {k: sorted(v) for k, v in cat.snapshot._owners.items() if v}
        assert owners == {k: sorted(v) for k, v in fresh._owners.items()}


@pytest.mark.parametrize("seed", range(4))
def test_ranked_agents_with_skill_less_agents_and_a_keep_filter(seed: int) -> None:
    """Agents without skills (matched on their own text only) and a further filter (as the
    API's health filter) give the page the full scan gives, filtered the same way."""
    snapshot = _random_catalog(seed, agents=50)
    records = list(snapshot.agents.values())
    bare = [
        r.model_copy(update={"card": r.card.model_copy(update={"skills": []})})
        for r in records[::3]
    ]
    snapshot = Snapshot([*records[1::3], *records[2::3], *bare], version=2)
    assert any(not r.card.skills for r in snapshot.agents.values())
    odd = {r.id for r in records[::2]}
    for text in ("rain", "agent storm", "map data image"):
        query = Query(q=text)
        full = [h for h in snapshot.agents_for(query) if h.agent.id not in odd]
        for limit in (1, 4, 50):
            page, more = snapshot.ranked_agents(query, limit, keep=lambda h: h.agent.id not in odd)
            assert [(h.agent.id, h.score, h.skills) for h in page] == [
                (h.agent.id, h.score, h.skills) for h in full[:limit]
            ]
            assert more == (len(full) > limit)


def test_skill_filters_from_the_indexes_equal_checking_every_skill() -> None:
    """The filter indexes give exactly the skills the filters accept, in the same order."""
    snapshot = _random_catalog(3, agents=40)
    modes = ["text/plain", "image/png", "IMAGE/JPEG", "application/pdf; q=1", "json"]
    records = []
    for n, record in enumerate(snapshot.agents.values()):
        skills = [
            s.model_copy(
                update={
                    "input_modes": [modes[(n + k) % 5], modes[k % 5]],
                    "output_modes": [modes[(n * k) % 5]],
                }
            )
            for k, s in enumerate(record.card.skills)
        ]
        records.append(
            record.model_copy(update={"card": record.card.model_copy(update={"skills": skills})})
        )
    snapshot = Snapshot(records, version=2)
    queries = [
        Query(input_mode="image/*"),
        Query(input_mode="image/*", tags=("rain",)),
        Query(output_mode="application/pdf", tags=("MAP",), streaming=True),
        Query(input_mode="text", output_mode="image"),
        Query(input_mode="video/*"),
        Query(skill="s1", input_mode="*/*"),
        Query(q="rain storm", input_mode="image/png"),
        Query(tags=("rain", "sun"), push=False),
    ]
    found = 0
    for query in queries:
        expected = [
            (a.id, s.id)
            for a in snapshot.agents.values()
            for s in a.card.skills
            if catalog.agent_ok(a, query)
            and catalog.skill_ok(s, query)
            and (
                not query.q
                or snapshot._skill_index.score_of(query.q, snapshot._skill_rows[(a.id, s.id)]) > 0
            )
        ]
        got = [(h.agent.id, h.skill.id) for h in snapshot.skills(query)]
        assert sorted(got) == sorted(expected)
        if not query.q:
            assert got == expected
        found += bool(got)
    assert found >= 4  # (the comparisons are not all of empty lists)
