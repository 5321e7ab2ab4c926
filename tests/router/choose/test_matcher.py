"""Choosing the agent: pinned agents, routing hints, skill matching, the threshold, explain.

The catalog is real: cards (the three demo agents' among them) are pushed through the
registry service into a SQLite store, signed ones checked against trusted keys.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from registry.crawler import Crawler
from registry.service import Registry
from registry.signatures import StaticKeys, generate_key, sign_card
from registry.store import Store
from registry.textsearch import tokenize
from router.choose.choice import Target
from router.choose.chooser import Chooser
from router.choose.matcher import ROUTING_EXTENSION, Candidate, Matcher, query_text
from router.protocol.errors import (
    AGENT_UNAVAILABLE,
    BAD_ROUTING_HINT,
    CONTENT_TYPE,
    INVALID_PARAMS,
    NO_MATCHING_AGENT,
    VERSION_NOT_SUPPORTED,
    RpcError,
)
from router.protocol.versions import Op, Version
from router.tables import SCHEMA
from seeds.demo_agents import caption_card, currency_card, translate_card
from tests.support.helpers import card_v03, card_v1, make_settings

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
KEY = generate_key("ES256", kid="owner-key")
DEMO: dict[str, Callable[[str], dict[str, Any]]] = {
    "currency": currency_card,
    "translate": translate_card,
    "caption": caption_card,
}


def message(
    version: Version,
    text: str | None = None,
    *,
    file: tuple[str, str] | None = None,
    data: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    params_metadata: dict[str, Any] | None = None,
    accepted: list[str] | None = None,
) -> dict[str, Any]:
    """SendMessage/message/send params in the shape of ``version``; ``file``: (mime, base64)."""
    parts: list[dict[str, Any]] = []
    v1 = version == "1.0"
    if text is not None:
        parts.append({"text": text} if v1 else {"kind": "text", "text": text})
    if file is not None:
        mime, content = file
        parts.append(
            {"raw": content, "mediaType": mime}
            if v1
            else {"kind": "file", "file": {"bytes": content, "mimeType": mime}}
        )
    if data is not None:
        parts.append({"data": data} if v1 else {"kind": "data", "data": data})
    msg: dict[str, Any] = {
        "messageId": "m-1",
        "role": "ROLE_USER" if v1 else "user",
        "parts": parts,
    }
    if not v1:
        msg["kind"] = "message"
    if metadata is not None:
        msg["metadata"] = metadata
    params: dict[str, Any] = {"message": msg}
    if params_metadata is not None:
        params["metadata"] = params_metadata
    if accepted is not None:
        params["configuration"] = {"acceptedOutputModes": accepted}
    return params


def hint(**value: Any) -> dict[str, Any]:
    return {ROUTING_EXTENSION: value}


def both_versions_card(base_url: str, name: str = "Bilingual echo") -> dict[str, Any]:
    """A card as an a2a-sdk 1.3 server in 0.3-compat mode serves it: two JSON-RPC interfaces."""
    card = card_v1(base_url, name=name)
    card["supportedInterfaces"] = [
        {"url": f"{base_url}/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"{base_url}/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
    card["skills"] = [
        {
            "id": "echo",
            "name": "Echo",
            "description": "Repeats the message back.",
            "tags": ["echo", "test"],
            "examples": ["echo this sentence"],
        }
    ]
    return card


class Catalog:
    """A registry on a real SQLite store; cards are pushed under chosen ids."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def add(self, agent_id: str, card: dict[str, Any]) -> None:
        await self.registry.register_card(card, agent_id=agent_id)

    async def demo(self) -> None:
        for n, (agent_id, make) in enumerate(DEMO.items()):
            await self.add(agent_id, make(f"http://127.0.0.1:{9101 + n}"))

    def matcher(self, threshold: float = 0.5) -> Matcher:
        return Matcher(self.registry, threshold=threshold)


@pytest.fixture
async def catalog(sqlite_url: str) -> AsyncIterator[Catalog]:
    registry = Registry(
        Store(sqlite_url, SCHEMA),
        Crawler(make_settings(sqlite_url)),
        keys=StaticKeys(json.loads(KEY.export_public())),
    )
    await registry.load()
    yield Catalog(registry)
    await registry.store.close()


@pytest.fixture
async def demo(catalog: Catalog) -> Catalog:
    await catalog.demo()
    return catalog


def rpc_error(call: Callable[[], Any]) -> RpcError:
    with pytest.raises(RpcError) as info:
        call()
    return info.value


async def explain(
    matcher: Matcher, version: Version, op: Op, params: dict[str, Any], **kwargs: Any
) -> dict[str, Any]:
    """The explain view (:meth:`router.choose.chooser.Chooser.explain`) with this matcher."""
    return await Chooser(matcher).explain(version, op, params, **kwargs)


# --- matching the demo agents ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "text", "file", "agent", "skill"),
    [
        ("1.0", "convert 100 USD to EUR", None, "currency", "convert-currency"),
        ("0.3", "translate hello world to french", None, "translate", "translate-text"),
        ("1.0", "what is in this picture", ("image/png", PNG), "caption", "caption-image"),
        ("1.0", "How much is 250 GBP in JPY?", None, "currency", "convert-currency"),
    ],
)
async def test_demo_queries_pick_the_right_agent(
    demo: Catalog,
    version: Version,
    text: str,
    file: tuple[str, str] | None,
    agent: str,
    skill: str,
) -> None:
    choice = demo.matcher().choose(version, Op.SEND, message(version, text, file=file))
    assert (choice.agent.id, choice.skill_id, choice.via) == (agent, skill, "match")
    assert choice.score is not None and choice.score >= 0.5
    record = demo.registry.get(agent)
    assert choice.target == Target(agent, record.card.interfaces[0].url, version)
    chosen = [c for c in choice.candidates if c.reason.startswith("Chosen: ")]
    assert [(c.agent_id, c.skill_id) for c in chosen] == [(agent, skill)]


async def test_no_match_lists_the_closest_skills(demo: Catalog) -> None:
    params = message("1.0", "what's the weather in Paris")
    error = rpc_error(lambda: demo.matcher().choose("1.0", Op.SEND, params))
    assert error.code == NO_MATCHING_AGENT
    assert error.message == (
        "no agent can take this message: no skill matches its words well enough (a score of "
        "0.5 or more)"
    )
    data = error.data
    assert (data["reason"], data["tier"], data["threshold"]) == ("no match", "refused", 0.5)
    closest = {c["skill"]: c for c in data["closest"]}
    assert set(closest) == {"convert-currency", "translate-text", "caption-image"}
    assert all(c["score"] == 0 and c["reason"] for c in data["closest"])
    assert "No word of the message matches" in closest["convert-currency"]["reason"]
    assert closest["caption-image"]["reason"] == (
        "The skill does not accept text/plain (it takes image/*)."
    )
    assert "No word of the message matches" in closest["translate-text"]["reason"]


def test_lone_letters_do_not_count_as_words() -> None:
    """The ``s`` of "what's" would otherwise match "picture's" in the caption skill."""
    assert tokenize(query_text("what's the weather, don't 5 x")) == ["weather", "don"]
    assert query_text("x" * 5000) == "x" * 4096


async def test_closest_skills_are_capped_and_ranked(catalog: Catalog) -> None:
    for n in range(7):
        card = card_v1(f"http://127.0.0.1:{8000 + n}", name=f"Weather {n}")
        card["skills"][0]["tags"] = ["weather"] * (n + 1)
        await catalog.add(f"w{n}", card)
    params = message("1.0", "weather radar", accepted=["audio/mpeg"])
    error = rpc_error(lambda: catalog.matcher().choose("1.0", Op.SEND, params))
    scores = [c["score"] for c in error.data["closest"]]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True) and scores[0] > 0
    assert all("accepted output modes" in c["reason"] for c in error.data["closest"])


async def test_image_alone_goes_to_the_only_agent_accepting_it(demo: Catalog) -> None:
    params = message("1.0", file=("image/jpeg", PNG))
    choice = demo.matcher().choose("1.0", Op.SEND, params)
    assert choice.agent.id == "caption"
    assert "only agent accepting these media types" in choice.reason
    # stop words only: no searchable words either
    params = message("1.0", "what is this?", file=("image/gif", PNG))
    assert demo.matcher().choose("1.0", Op.SEND, params).agent.id == "caption"


async def test_text_alone_never_goes_to_an_image_only_skill(demo: Catalog) -> None:
    params = message("1.0", "describe this image")
    error = rpc_error(lambda: demo.matcher().choose("1.0", Op.SEND, params))
    caption = next(c for c in error.data["closest"] if c["agent"] == "caption")
    assert caption["score"] > 0.5
    assert "does not accept text/plain" in caption["reason"]
    # the skill that fits the words was dropped by its input modes: the message says so
    assert error.message == (
        "no agent can take this message: the agents whose skills fit do not accept text/plain"
    )
    assert (error.data["reason"], error.data["filter"]) == ("filtered", "input")


async def test_no_words_and_several_agents_is_an_error_unless_one_serves_the_context(
    catalog: Catalog,
) -> None:
    await catalog.add("invoices", card_v03("http://127.0.0.1:8001"))  # application/pdf, image/*
    await catalog.add("scans", card_v03("http://127.0.0.1:8002", name="Scan Reader"))
    matcher = catalog.matcher()
    params = message("0.3", file=("image/png", PNG))
    error = rpc_error(lambda: matcher.choose("0.3", Op.SEND, params))
    assert error.code == NO_MATCHING_AGENT
    assert error.data["agents"] == ["invoices", "scans"]
    assert error.data["extension"] == ROUTING_EXTENSION
    choice = matcher.choose("0.3", Op.SEND, params, context_agents={"scans"})
    assert choice.agent.id == "scans"
    assert "already serves this conversation" in choice.reason


async def test_nothing_accepts_the_media_types(demo: Catalog) -> None:
    params = message("1.0", file=("application/pdf", PNG))
    error = rpc_error(lambda: demo.matcher().choose("1.0", Op.SEND, params))
    assert error.code == CONTENT_TYPE  # the spec's ContentTypeNotSupported, not a no-match
    assert error.message.startswith("Incompatible content types: no agent accepts application/pdf")
    assert error.data["mediaTypes"] == ["application/pdf"]
    assert "image/*" in error.data["acceptedInputModes"], error.data
    # a type some skill takes, with words no skill matches: a no-match, not a content type
    params = message("1.0", "sing me a song", file=("image/png", PNG))
    assert rpc_error(lambda: demo.matcher().choose("1.0", Op.SEND, params)).code == (
        NO_MATCHING_AGENT
    )


async def test_a_no_match_looks_only_until_some_skill_takes_the_media_types(
    catalog: Catalog,
) -> None:
    """A message about nothing in a catalog of many text skills is a no-match: finding that
    content types are not the reason stops at the first skill that takes text; a real
    content-type refusal still names what every skill accepts."""
    skills = [
        {"id": f"s{n}", "name": f"Ledger {n}", "description": f"Books entries of ledger {n}."}
        for n in range(150)
    ]
    await catalog.add("books", card_v1("http://127.0.0.1:9301", name="Books", skills=skills))
    matcher = catalog.matcher()
    looked: list[int] = []
    evaluate = matcher.evaluate

    def counted(index: Any, rows: Any, *args: Any, **kwargs: Any) -> Any:
        rows = list(rows)
        looked.append(len(rows))
        return evaluate(index, rows, *args, **kwargs)

    matcher.evaluate = counted  # type: ignore[method-assign]
    params = message("1.0", "sing me a song about the sea")
    assert rpc_error(lambda: matcher.choose("1.0", Op.SEND, params)).code == NO_MATCHING_AGENT
    assert sum(looked) < 150, looked  # not every skill
    looked.clear()
    params = message("1.0", "ledger entries", file=("application/pdf", PNG))
    error = rpc_error(lambda: matcher.choose("1.0", Op.SEND, params))
    assert error.code == CONTENT_TYPE and error.data["acceptedInputModes"] == ["text/plain"]


@pytest.mark.parametrize("seed", range(10))
async def test_a_no_match_lists_the_closest_skills_as_if_every_skill_was_looked_at(
    catalog: Catalog, seed: int
) -> None:
    """The closest skills of a refusal, found from the best-scored skills, equal those of
    evaluating every skill (ties in score, skills no word matched, agents that cannot take
    the call, skills of other media types, agents without skills)."""
    rnd = random.Random(seed)
    words = ["ledger", "invoice", "refund", "tax"]
    for a in range(10):
        skills = [
            {
                "id": rnd.choice("zyxabc") + str(k),
                "name": rnd.choice(words),  # few texts: many skills tie
                "description": rnd.choice(["", "tax"]) or "misc",
                "inputModes": rnd.choice([["text/plain"], ["image/png"]]),
            }
            for k in range(rnd.randint(0, 6))
        ]
        card = card_v1(f"http://127.0.0.1:{9400 + a}", name=f"Agent {a}", skills=skills)
        if rnd.random() < 0.2:
            card["capabilities"] = {"streaming": False}  # takes streams all the same
        await catalog.add(f"agent-{rnd.randrange(100):02d}-{a}", card)
    matcher = catalog.matcher(threshold=50.0)  # nothing reaches it: every message refused
    for query in ["ledger", "tax refund", "invoice", "weather", "refund"]:
        for op in (Op.SEND, Op.STREAM):
            params = message("1.0", query)
            fast = matcher.decide("1.0", op, params)
            full = matcher.decide("1.0", op, params, complete=True)
            assert fast.error is not None and full.error is not None
            assert fast.error.data["closest"] == full.error.data["closest"], query


# --- filters -----------------------------------------------------------------------------------


async def test_media_type_wildcards(catalog: Catalog) -> None:
    await catalog.add("invoices", card_v03("http://127.0.0.1:8001"))
    matcher = catalog.matcher()
    question = "what is the total of this invoice?"
    for mime in ("application/pdf", "image/jpeg", "IMAGE/PNG; q=1"):
        params = message("0.3", question, file=(mime, PNG))
        assert matcher.choose("0.3", Op.SEND, params).agent.id == "invoices"
    params = message("0.3", question, file=("audio/wav", PNG))
    error = rpc_error(lambda: matcher.choose("0.3", Op.SEND, params))
    assert error.code == CONTENT_TYPE and error.data["mediaTypes"] == ["audio/wav"]
    (invoices,) = error.data["closest"]
    assert "does not accept audio/wav" in invoices["reason"]
    # the text part is the instruction for the file; alone it is refused
    error = rpc_error(lambda: matcher.choose("0.3", Op.SEND, message("0.3", question)))
    assert "does not accept text/plain" in error.data["closest"][0]["reason"]


async def test_data_parts_are_application_json(demo: Catalog) -> None:
    params = message("1.0", "convert", data={"amount": 1, "from": "USD", "to": "EUR"})
    assert demo.matcher().choose("1.0", Op.SEND, params).agent.id == "currency"


async def test_accepted_output_modes(catalog: Catalog) -> None:
    await catalog.add("weather", card_v1("http://127.0.0.1:8001"))
    matcher = catalog.matcher()
    text = "weather radar map for Paris"
    # any overlap, wildcards either side: the radar skill renders image/png
    for accepted in (["image/*"], ["image/png", "text/html"], ["*/*"]):
        choice = matcher.choose("1.0", Op.SEND, message("1.0", text, accepted=accepted))
        assert choice.skill_id == "radar-image", accepted
    choice = matcher.choose("1.0", Op.SEND, message("1.0", text, accepted=["application/json"]))
    assert choice.skill_id == "forecast"
    # an output mode no skill produces: the content type is the reason (-32005), not the words
    params = message("1.0", text, accepted=["application/x-nothing"])
    error = rpc_error(lambda: matcher.choose("1.0", Op.SEND, params))
    assert error.code == CONTENT_TYPE, error
    assert error.data["acceptedOutputModes"] == ["application/x-nothing"]
    assert "image/png" in error.data["outputModes"] and "mediaTypes" not in error.data
    dropped = next(c for c in choice.candidates if c.skill_id == "radar-image")
    assert not dropped.kept
    assert dropped.reason == (
        "The skill outputs image/png, none of the accepted output modes (application/json)."
    )
    assert dropped.filter == "output"
    error = rpc_error(
        lambda: matcher.choose("1.0", Op.SEND, message("1.0", text, accepted=["video/mp4"]))
    )
    assert error.code == CONTENT_TYPE and error.data["acceptedOutputModes"] == ["video/mp4"]


async def test_streaming_calls_reach_agents_that_do_not_stream(catalog: Catalog) -> None:
    """The router streams their unary answers (router/forward/unarystream.py): no filter."""
    await catalog.add("invoices", card_v03("http://127.0.0.1:8001"))  # streaming: false
    matcher = catalog.matcher()
    params = message("0.3", "invoice total", file=("application/pdf", PNG))
    for op in (Op.SEND, Op.STREAM):
        assert matcher.choose("0.3", op, params).agent.id == "invoices"
    hinted = message(
        "1.0", "invoice", file=("application/pdf", PNG), metadata=hint(agent="invoices")
    )
    assert matcher.choose("1.0", Op.STREAM, hinted).agent.id == "invoices"


async def test_the_interface_of_the_clients_version_is_chosen(catalog: Catalog) -> None:
    await catalog.add("echo", both_versions_card("http://127.0.0.1:8001"))
    matcher = catalog.matcher()
    for version, path in (("1.0", "/v1"), ("0.3", "/v03")):
        choice = matcher.choose(version, Op.SEND, message(version, "echo this"))
        assert choice.target == Target("echo", f"http://127.0.0.1:8001{path}", version)


async def test_an_agent_of_the_other_version_is_a_translated_candidate(demo: Catalog) -> None:
    params = message("1.0", "translate hello world to french")
    choice = demo.matcher().choose("1.0", Op.SEND, params)
    assert (choice.agent.id, choice.skill_id) == ("translate", "translate-text")
    assert choice.target.version == "0.3"  # the agent's version: the router translates
    assert "translated: the client speaks A2A 1.0, the agent A2A 0.3" in choice.reason


async def test_the_interface_of_the_clients_version_is_preferred(catalog: Catalog) -> None:
    card = both_versions_card("http://127.0.0.1:8001")
    await catalog.add("both", card)
    for version in ("0.3", "1.0"):
        params = message(version, "echo hello")
        choice = catalog.matcher().choose(version, Op.SEND, params, pinned_agent="both")
        assert choice.target.version == version
        assert choice.target.url.endswith("/v1" if version == "1.0" else "/v03")
        assert "translated" not in choice.reason


async def test_http_json_interfaces_are_reached_json_rpc_preferred(catalog: Catalog) -> None:
    rest = both_versions_card("http://127.0.0.1:8001")
    for interface in rest["supportedInterfaces"]:
        interface["protocolBinding"] = "HTTP+JSON"
    await catalog.add("rest", rest)
    mixed = both_versions_card("http://127.0.0.1:8002")
    mixed["supportedInterfaces"][0]["protocolBinding"] = "HTTP+JSON"  # 1.0 over REST only
    r03 = {"url": "http://127.0.0.1:8002/r03", "protocolBinding": "HTTP+JSON"}
    mixed["supportedInterfaces"].append({**r03, "protocolVersion": "0.3"})
    await catalog.add("mixed", mixed)
    matcher = catalog.matcher()
    choice = matcher.choose("1.0", Op.SEND, message("1.0", "echo hi"), pinned_agent="rest")
    assert choice.target == Target("rest", "http://127.0.0.1:8001/v1", "1.0", binding="HTTP+JSON")
    assert "over HTTP+JSON" in choice.reason and "translated" not in choice.reason
    assert choice.to_json()["binding"] == "HTTP+JSON"
    # the client's version first (no translation), then JSON-RPC before HTTP+JSON
    choice = matcher.choose("1.0", Op.SEND, message("1.0", "echo hi"), pinned_agent="mixed")
    assert (choice.target.version, choice.target.binding) == ("1.0", "HTTP+JSON")
    choice = matcher.choose("0.3", Op.SEND, message("0.3", "echo hi"), pinned_agent="mixed")
    assert (choice.target.url, choice.target.binding) == ("http://127.0.0.1:8002/v03", "JSONRPC")


async def test_agents_without_a_callable_interface_are_dropped(catalog: Catalog) -> None:
    card = card_v1("http://127.0.0.1:8001")  # the router has no client for 0.3's gRPC service
    card["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    await catalog.add("grpc-weather", card)
    params = message("1.0", "weather forecast")
    error = rpc_error(lambda: catalog.matcher().choose("1.0", Op.SEND, params))
    assert "it offers GRPC 0.3" in error.data["closest"][0]["reason"]


async def test_grpc_10_agents_are_called_last(catalog: Catalog) -> None:
    card = card_v1("http://127.0.0.1:8001")
    card["supportedInterfaces"] = [
        {"url": "127.0.0.1:8002", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {
            "url": "http://127.0.0.1:8001/r",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
    ]
    await catalog.add("both", card)
    choice = catalog.matcher().choose("1.0", Op.SEND, message("1.0", "hi"), pinned_agent="both")
    assert choice.target.binding == "HTTP+JSON"
    card["supportedInterfaces"] = [{**card["supportedInterfaces"][0], "url": "127.0.0.1:8003"}]
    await catalog.add("grpc-only", card)
    choice = catalog.matcher().choose(
        "0.3", Op.SEND, message("0.3", "hi"), pinned_agent="grpc-only"
    )
    assert (choice.target.url, choice.target.version) == ("127.0.0.1:8003", "1.0")
    assert choice.target.binding == "GRPC" and "over GRPC" in choice.reason


async def test_what_an_agent_offers_names_each_version_once(catalog: Catalog) -> None:
    card = card_v1("http://127.0.0.1:8001")
    card["supportedInterfaces"] = [
        {
            "url": "http://127.0.0.1:8001/g1",
            "protocolBinding": "WEBSOCKET",
            "protocolVersion": "1.0.0",
        },
        {"url": "http://127.0.0.1:8001/g2", "protocolBinding": "WEBSOCKET", "protocolVersion": "1"},
        {"url": "http://127.0.0.1:8001/r", "protocolBinding": "GRPC", "protocolVersion": "0.3.0"},
    ]
    await catalog.add("grpc-weather", card)
    params = message("1.0", "weather forecast")
    error = rpc_error(lambda: catalog.matcher().choose("1.0", Op.SEND, params))
    assert "(it offers WEBSOCKET 1.0, GRPC 0.3)" in error.data["closest"][0]["reason"]


async def test_agents_without_skills_are_not_matched(catalog: Catalog) -> None:
    card = card_v1("http://127.0.0.1:8001", name="Weather oracle", skills=[])
    await catalog.add("oracle", card)
    params = message("1.0", "weather oracle")
    error = rpc_error(lambda: catalog.matcher().choose("1.0", Op.SEND, params))
    assert error.data["closest"] == []  # only skills are listed
    explained = await explain(catalog.matcher(), "1.0", Op.SEND, params)
    (candidate,) = explained["candidates"]
    assert candidate["skill_id"] is None
    assert candidate["reason"] == "The agent declares no skills to match against."
    assert candidate["filter"] == "skills"
    # a hint may still name it
    params = message("1.0", "hello", metadata=hint(agent="oracle"))
    assert catalog.matcher().choose("1.0", Op.SEND, params).agent.id == "oracle"


# --- ranking -------------------------------------------------------------------------------------


async def test_best_skill_wins_and_the_agent_takes_its_best_skill(catalog: Catalog) -> None:
    await catalog.add("weather", card_v1("http://127.0.0.1:8001"))
    await catalog.add("currency", currency_card("http://127.0.0.1:9101"))
    params = message("1.0", "weather radar map")
    choice = catalog.matcher().choose("1.0", Op.SEND, params)
    assert (choice.agent.id, choice.skill_id) == ("weather", "radar-image")
    other = next(c for c in choice.candidates if c.skill_id == "forecast")
    assert other.kept and other.reason == (
        "It could take the call too, but another skill of its agent fits better."
    )
    assert 0 < other.score < choice.score
    scores = [c.score for c in choice.candidates]
    assert scores == sorted(scores, reverse=True)


async def test_ties_prefer_the_agent_serving_the_context_then_the_id(catalog: Catalog) -> None:
    await catalog.add("echo-b", both_versions_card("http://127.0.0.1:8001"))
    await catalog.add("echo-a", both_versions_card("http://127.0.0.1:8002"))
    await catalog.add("echo-c", both_versions_card("http://127.0.0.1:8003"))
    matcher = catalog.matcher()
    params = message("1.0", "echo this sentence")
    choice = matcher.choose("1.0", Op.SEND, params)
    assert choice.agent.id == "echo-a"
    assert choice.reason == (
        "It has the best score by words (7.84385; threshold 0.5), tied, and its agent comes "
        "first by id."
    )
    choice = matcher.choose("1.0", Op.SEND, params, context_agents={"echo-c", "unknown"})
    assert choice.agent.id == "echo-c"
    assert "already serves this conversation" in choice.reason
    others = {c.agent_id: c.reason for c in choice.candidates if c.agent_id != "echo-c"}
    lower = "It could take the call too, but the chosen skill ranks higher."
    assert others == {"echo-a": lower, "echo-b": lower}


async def test_context_does_not_beat_a_better_score(demo: Catalog) -> None:
    params = message("1.0", "convert 100 USD to EUR")
    choice = demo.matcher().choose("1.0", Op.SEND, params, context_agents={"caption"})
    assert choice.agent.id == "currency"


async def test_threshold_is_configurable(demo: Catalog) -> None:
    params = message("1.0", "convert 100 USD to EUR")
    error = rpc_error(lambda: demo.matcher(threshold=50).choose("1.0", Op.SEND, params))
    assert error.data["threshold"] == 50
    closest = error.data["closest"][0]
    assert closest["agent"] == "currency"
    assert (
        closest["reason"].startswith("It scores ")
        and "below the threshold 50." in closest["reason"]
    )
    # zero: any candidate that passes the filters will do
    params = message("1.0", "unrelated words entirely")
    choice = demo.matcher(threshold=0).choose("1.0", Op.SEND, params)
    assert choice.agent.id in ("currency", "translate")  # both take text, one version or other


async def test_the_matcher_follows_catalog_changes(catalog: Catalog) -> None:
    matcher = catalog.matcher()
    params = message("1.0", "convert 100 USD to EUR")
    rpc_error(lambda: matcher.choose("1.0", Op.SEND, params))
    await catalog.add("currency", currency_card("http://127.0.0.1:9101"))
    assert matcher.choose("1.0", Op.SEND, params).agent.id == "currency"
    await catalog.registry.remove("currency")
    rpc_error(lambda: matcher.choose("1.0", Op.SEND, params))


# --- signed-card policy -------------------------------------------------------------------------


async def test_require_signed_drops_unverified_agents(catalog: Catalog) -> None:
    signed = sign_card(both_versions_card("http://127.0.0.1:8001", name="Signed echo"), KEY)
    await catalog.add("signed", signed)
    await catalog.add("plain", both_versions_card("http://127.0.0.1:8002"))
    assert catalog.registry.get("signed").verification.status == "verified"
    matcher = catalog.matcher()
    params = message("1.0", "echo this sentence")
    assert matcher.choose("1.0", Op.SEND, params).agent.id == "plain"  # by id, both allowed
    catalog.registry.require_signed = True
    choice = matcher.choose("1.0", Op.SEND, params)
    assert choice.agent.id == "signed"
    plain = next(c for c in choice.candidates if c.agent_id == "plain")
    assert not plain.kept
    assert "'unsigned'" in plain.reason and "SWITCHBOARD_REQUIRE_SIGNED_CARDS" in plain.reason
    # the closest skills of a no-match error never name agents the policy excludes
    await catalog.registry.remove("signed")
    error = rpc_error(lambda: matcher.choose("1.0", Op.SEND, params))
    assert error.data["closest"] == []
    # nor can a hint or a pinned endpoint reach them
    hinted = message("1.0", "echo", metadata=hint(agent="plain"))
    error = rpc_error(lambda: matcher.choose("1.0", Op.SEND, hinted))
    assert error.code == BAD_ROUTING_HINT and "SWITCHBOARD_REQUIRE_SIGNED_CARDS" in error.message
    error = rpc_error(lambda: matcher.choose("1.0", Op.SEND, params, pinned_agent="plain"))
    assert error.code == NO_MATCHING_AGENT and error.data["agent"] == "plain"


# --- hints ---------------------------------------------------------------------------------------


async def test_hint_names_a_skill_or_an_agent(demo: Catalog) -> None:
    matcher = demo.matcher()
    text = "convert 100 USD to EUR"  # would match currency
    await demo.add("echo", both_versions_card("http://127.0.0.1:8001"))
    for value in ({"skill": "echo"}, {"agent": "echo"}, {"agent": "echo", "skill": "echo"}):
        choice = matcher.choose("1.0", Op.SEND, message("1.0", text, metadata=hint(**value)))
        assert (choice.agent.id, choice.skill_id, choice.via) == ("echo", "echo", "hint")
        assert choice.reason.startswith("The routing hint names it")
    # in the request's metadata too; the message's wins
    params = message("1.0", text, params_metadata=hint(agent="echo"))
    assert matcher.choose("1.0", Op.SEND, params).agent.id == "echo"
    params = message(
        "1.0", text, metadata=hint(agent="currency"), params_metadata=hint(agent="echo")
    )
    assert matcher.choose("1.0", Op.SEND, params).agent.id == "currency"
    # no threshold applies to a hint, and the hint extension's other keys are ignored
    params = message("0.3", "zzz", metadata=hint(skill="translate-text", note="x"))
    assert matcher.choose("0.3", Op.SEND, params).agent.id == "translate"
    assert matcher.hint("0.3", params) == {"skill": "translate-text"}
    assert matcher.hint("0.3", message("0.3", "zzz", metadata={"other": 1})) is None


async def test_a_shared_skill_id_hint_picks_among_its_agents(catalog: Catalog) -> None:
    await catalog.add("echo-b", both_versions_card("http://127.0.0.1:8001"))
    await catalog.add("echo-a", both_versions_card("http://127.0.0.1:8002"))
    matcher = catalog.matcher()
    params = message("1.0", "hi", metadata=hint(skill="echo"))
    assert matcher.choose("1.0", Op.SEND, params).agent.id == "echo-a"
    choice = matcher.choose("1.0", Op.SEND, params, context_agents={"echo-b"})
    assert choice.agent.id == "echo-b"


@pytest.mark.parametrize(
    "value",
    ["currency", {}, {"skill": 3}, {"agent": ""}, {"agent": "currency", "skill": None}, [1]],
)
async def test_malformed_hints_are_errors(demo: Catalog, value: Any) -> None:
    params = message("1.0", "convert 100 USD to EUR", metadata={ROUTING_EXTENSION: value})
    if value == {"agent": "currency", "skill": None}:
        # null means absent
        assert demo.matcher().choose("1.0", Op.SEND, params).agent.id == "currency"
        return
    error = rpc_error(lambda: demo.matcher().choose("1.0", Op.SEND, params))
    assert error.code == BAD_ROUTING_HINT
    assert error.data["field"] == "message.metadata"
    assert error.data["extension"] == ROUTING_EXTENSION


@pytest.mark.parametrize(
    ("version", "value", "op", "expected"),
    [
        ("1.0", {"agent": "nobody"}, Op.SEND, "agent 'nobody', which is not registered"),
        ("1.0", {"skill": "fly"}, Op.SEND, "skill 'fly', which no registered agent has"),
        ("1.0", {"agent": "currency", "skill": "caption-image"}, Op.SEND, "no skill"),
        ("1.0", {"agent": "grpc"}, Op.SEND, "no JSON-RPC or HTTP+JSON interface for A2A"),
        ("1.0", {"skill": "caption-image"}, Op.SEND, "does not accept text/plain"),
    ],
)
async def test_unusable_hints_are_errors_never_a_fallback(
    demo: Catalog, version: Version, value: dict[str, str], op: Op, expected: str
) -> None:
    await demo.add("invoices", card_v03("http://127.0.0.1:8001"))
    grpc = card_v1("http://127.0.0.1:8002")
    grpc["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    await demo.add("grpc", grpc)
    text = "convert 100 USD to EUR" if "invoices" not in value.values() else "invoice"
    params = message(version, text, metadata=hint(**value))
    if "invoices" in value.values():
        params = message(version, text, file=("application/pdf", PNG), metadata=hint(**value))
    error = rpc_error(lambda: demo.matcher().choose(version, op, params))
    assert error.code == BAD_ROUTING_HINT, error
    assert expected in error.message
    assert error.data["hint"] == value
    explained = await explain(demo.matcher(), version, op, params)
    assert explained["choice"] is None
    assert explained["error"]["code"] == BAD_ROUTING_HINT


# --- pinned agents -------------------------------------------------------------------------------


async def test_pinned_agent_skips_matching(demo: Catalog) -> None:
    matcher = demo.matcher()
    params = message("1.0", "what's the weather in Paris")  # matches nothing
    choice = matcher.choose("1.0", Op.SEND, params, pinned_agent="currency")
    assert (choice.agent.id, choice.via, choice.skill_id) == ("currency", "pinned", None)
    assert choice.target == Target("currency", "http://127.0.0.1:9101/", "1.0")
    # task calls carry no message: the owner is pinned
    choice = matcher.choose("0.3", Op.GET, {"id": "t-1"}, pinned_agent="translate")
    assert choice.target == Target("translate", "http://127.0.0.1:9102/", "0.3")
    owner = matcher.target_for("0.3", "translate")
    assert (owner.via, owner.target) == ("task", choice.target)


async def test_pinned_agent_errors(demo: Catalog) -> None:
    matcher = demo.matcher()
    error = rpc_error(lambda: matcher.choose("1.0", Op.GET, {"id": "t"}, pinned_agent="gone"))
    assert error.code == AGENT_UNAVAILABLE and error.data == {"agent": "gone"}
    choice = matcher.choose("1.0", Op.GET, {"id": "t"}, pinned_agent="translate")
    assert choice.target.version == "0.3"  # translated
    grpc = card_v1("http://127.0.0.1:8002")
    grpc["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    await demo.add("grpc", grpc)
    matcher = demo.matcher()
    error = rpc_error(lambda: matcher.choose("1.0", Op.GET, {"id": "t"}, pinned_agent="grpc"))
    assert error.code == VERSION_NOT_SUPPORTED
    assert error.data == {"agent": "grpc", "requested": "1.0", "supportedVersions": []}


# --- explain -----------------------------------------------------------------------------------


async def test_explain_ranks_every_candidate_with_its_reason(demo: Catalog) -> None:
    params = message("1.0", "convert 100 USD to EUR", accepted=["text/plain"])
    out = await explain(demo.matcher(), "1.0", Op.SEND, params)
    assert out["version"] == "1.0"
    assert (out["threshold"], out["threshold_source"], out["scale"]) == (
        0.5,
        "default",
        "BM25 score",
    )
    assert out["media_types"] == ["text/plain"]
    assert out["accepted_output_modes"] == ["text/plain"]
    assert out["words"] == ["convert", "100", "usd", "eur"]
    assert out["error"] is None and out["hint"] is None
    assert out["choice"] == {
        "agent_id": "currency",
        "skill_id": "convert-currency",
        "via": "match",
        "tier": "lexical",
        "score": out["candidates"][0]["score"],
        "margin": None,
        "reason": out["choice"]["reason"],
        "url": "http://127.0.0.1:9101/",
        "version": "1.0",
        "binding": "JSONRPC",
    }
    assert out["choice"]["reason"].startswith("It has the best score by words (")
    assert out["matcher"].startswith("lexical") and out["uncertain"] is None
    by_agent = {c["agent_id"]: c for c in out["candidates"]}
    assert list(by_agent) == [c["agent_id"] for c in out["candidates"]]
    assert set(by_agent) == {"currency", "translate", "caption"}
    assert by_agent["currency"]["kept"] and by_agent["currency"]["reason"].startswith("Chosen")
    assert not by_agent["caption"]["kept"]
    assert by_agent["translate"] == {
        "agent_id": "translate",
        "skill_id": "translate-text",
        "score": 0.0,
        "kept": False,
        "reason": "No word of the message matches this skill (threshold 0.5).",
        "url": "http://127.0.0.1:9102/",
        "version": "0.3",  # the agent's version: a call would be translated
        "binding": "JSONRPC",
        "filter": "score",
    }
    assert out["total_candidates"] == 3
    json.dumps(out)  # plain JSON


async def test_explain_reports_errors_instead_of_raising(demo: Catalog) -> None:
    matcher = demo.matcher()
    out = await explain(matcher, "1.0", Op.SEND, message("1.0", "what's the weather in Paris"))
    assert out["choice"] is None
    assert out["error"]["code"] == NO_MATCHING_AGENT
    assert len(out["error"]["data"]["closest"]) == 3
    assert all(not c["kept"] for c in out["candidates"])
    out = await explain(matcher, "1.0", Op.SEND, {"message": {"parts": "nope"}})
    assert out["error"]["code"] == INVALID_PARAMS and out["candidates"] == []
    out = await explain(matcher, "1.0", Op.SEND, message("1.0", "convert 1 USD to EUR"), limit=1)
    assert len(out["candidates"]) == 1 and out["total_candidates"] == 3


def test_candidate_json_round_trip() -> None:
    candidate = Candidate("a", "s", 1.5, True, "chosen: x", "http://a/", "1.0")
    assert candidate.to_json() == {
        "agent_id": "a",
        "skill_id": "s",
        "score": 1.5,
        "kept": True,
        "reason": "chosen: x",
        "url": "http://a/",
        "version": "1.0",
        "binding": "JSONRPC",
    }
