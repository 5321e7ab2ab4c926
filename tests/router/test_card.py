"""The router's card and the per-agent cards, checked against the real a2a-sdk 1.x types, its
0.3 compatibility types and the A2A 0.3 JSON schema."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as types_v03
from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from registry.cards import parse_card
from registry.crawler import Crawler
from registry.errors import NotFound
from registry.records import AgentRecord, utcnow
from registry.service import Registry
from registry.signatures import StaticKeys, generate_key, sign_card
from registry.store import Store
from router.card import V03_CARD_FIELDS, agent_card_via_router, card_for, router_card
from router.choose.matcher import ROUTING_EXTENSION
from router.tables import SCHEMA
from seeds.demo_agents import caption_card, currency_card, translate_card
from tests.support.helpers import card_v03, card_v1, make_settings, schema_problems

BASE = "https://switchboard.example"
KEY = generate_key("ES256", kid="owner-key")


def check_v03(card: dict[str, Any]) -> types_v03.AgentCard:
    """The card is a valid A2A 0.3 card: by the JSON schema and by the SDK's 0.3 model."""
    assert schema_problems(card, {"$ref": "#/definitions/AgentCard"}, "card") == []
    return types_v03.AgentCard.model_validate(card)


def check_v1(card: dict[str, Any]) -> AgentCard:
    """The card is a valid A2A 1.0 card for the a2a-sdk 1.x types, and its client reads it."""
    parsed = ParseDict(copy.deepcopy(card), AgentCard(), ignore_unknown_fields=True)
    assert parse_agent_card(copy.deepcopy(card)) == parsed
    return parsed


CARD_03 = {"$ref": "#/definitions/AgentCard"}


def check_v1_closed(card: dict[str, Any]) -> AgentCard:
    """The card is a valid A2A 1.0 card in closed mode: no member the 1.0 AgentCard lacks
    (ProtoJSON parsing that refuses unknown fields), and the 1.x SDK client reads it."""
    parsed = ParseDict(copy.deepcopy(card), AgentCard())  # ParseError on any unknown member
    assert parse_agent_card(copy.deepcopy(card)) == parsed
    return parsed


async def test_a_v1_client_gets_a_closed_v1_card_and_others_the_shape_both_read(
    demo: Registry,
) -> None:
    raw = json.loads(await demo.raw_card("currency"))
    per_agent = agent_card_via_router(demo.get("currency"), raw, BASE)
    for card in (build(demo), per_agent):
        v1 = card_for(card, "1.0")
        assert not set(V03_CARD_FIELDS) & set(v1), v1
        check_v1_closed(v1)
        both = card_for(card, None)  # no A2A-Version: the card both read
        assert both == card and both["url"] and both["protocolVersion"]
        check_v1(both)
        check_v03(both)
        with pytest.raises(ParseError):  # ... which is not a closed 1.0 card
            check_v1_closed(card)
        v03 = card_for(card, "0.3")  # a client naming 0.3: a closed 0.3 card
        assert "supportedInterfaces" not in v03 and v03["url"] == card["url"]
        assert schema_problems(v03, CARD_03, "card", closed=True) == []
        assert schema_problems(card, CARD_03, "card", closed=True) == [
            "card.supportedInterfaces: not a member in A2A 0.3"
        ]


def record(agent_id: str, card: dict[str, Any]) -> AgentRecord:
    now = utcnow()
    return AgentRecord(
        id=agent_id,
        card=parse_card(card),
        source="push",
        card_sha256="0" * 64,
        created_at=now,
        updated_at=now,
        fetched_at=now,
    )


@pytest.fixture
async def registry(sqlite_url: str) -> AsyncIterator[Registry]:
    registry = Registry(
        Store(sqlite_url, SCHEMA),
        Crawler(make_settings(sqlite_url)),
        keys=StaticKeys(json.loads(KEY.export_public())),
    )
    await registry.load()
    yield registry
    await registry.store.close()


@pytest.fixture
async def demo(registry: Registry) -> Registry:
    await registry.register_card(currency_card("http://127.0.0.1:9101"), agent_id="currency")
    await registry.register_card(translate_card("http://127.0.0.1:9102"), agent_id="translate")
    await registry.register_card(caption_card("http://127.0.0.1:9103"), agent_id="caption")
    return registry


def build(registry: Registry) -> dict[str, Any]:
    return router_card(registry, BASE + "/", name="Switchboard", description="Routes messages.")


# --- the router's card ---------------------------------------------------------------------------


async def test_router_card_serves_both_sdk_generations(demo: Registry) -> None:
    card = build(demo)
    parsed = check_v1(card)
    assert [
        (i.url, i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces
    ] == [
        (f"{BASE}/", "JSONRPC", "1.0"),
        (f"{BASE}/", "JSONRPC", "0.3"),
        (BASE, "HTTP+JSON", "1.0"),
        (BASE, "HTTP+JSON", "0.3"),
    ]
    assert card["additionalInterfaces"] == [
        {"url": f"{BASE}/", "transport": "JSONRPC"},
        {"url": BASE, "transport": "HTTP+JSON"},
    ]
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        f"{BASE}/",
        "JSONRPC",
        "0.3.0",
    )
    legacy = check_v03(card)
    assert legacy.url == f"{BASE}/"
    assert card["name"] == "Switchboard" and card["description"] == "Routes messages."
    assert card["version"]
    json.dumps(card)


async def test_router_card_lists_the_grpc_interface_when_served(demo: Registry) -> None:
    card = router_card(
        demo, BASE, name="Switchboard", description="d", grpc_target="router.example:50051"
    )
    parsed = check_v1(card)
    assert (
        "router.example:50051",
        "GRPC",
        "1.0",
    ) in [(i.url, i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces]
    assert card["preferredTransport"] == "JSONRPC"  # 0.3 clients keep JSON-RPC


async def test_router_card_capabilities_declare_the_routing_extension(demo: Registry) -> None:
    card = build(demo)
    capabilities = card["capabilities"]
    assert capabilities["streaming"] is True
    assert capabilities["pushNotifications"] is True  # relayed (docs/push.md)
    (extension,) = capabilities["extensions"]
    assert extension["uri"] == ROUTING_EXTENSION == "urn:a2a-switchboard:routing:v1"
    assert extension["required"] is False
    assert "skill" in extension["description"] and "agent" in extension["description"]
    parsed = check_v1(card)
    assert parsed.capabilities.extensions[0].uri == ROUTING_EXTENSION


async def test_router_card_skills_and_modes_are_the_union_of_routable_agents(
    demo: Registry,
) -> None:
    card = build(demo)
    skills = {s["id"]: s for s in card["skills"]}
    assert list(skills) == ["caption-image", "convert-currency", "translate-text"]
    caption = skills["caption-image"]
    assert caption["inputModes"] == ["image/*"] and caption["outputModes"] == ["text/plain"]
    assert caption["tags"] == ["image", "vision", "caption"]
    assert caption["examples"] == ["describe this image", "what size is this picture?"]
    assert set(card["defaultInputModes"]) == {"image/*", "text/plain", "application/json"}
    assert set(card["defaultOutputModes"]) == {"text/plain", "application/json"}
    parsed = check_v1(card)
    assert [s.id for s in parsed.skills] == list(skills)


async def test_router_card_deduplicates_skills_by_id(registry: Registry) -> None:
    one = translate_card("http://127.0.0.1:9102")
    other = translate_card("http://127.0.0.1:9202")
    other["skills"][0].update(
        name="Translate (second)",
        tags=["translation", "italian"],
        examples=["translate cat to italian"],
        inputModes=["text/plain", "text/markdown"],
    )
    await registry.register_card(one, agent_id="tr-a")
    await registry.register_card(other, agent_id="tr-b")
    (skill,) = build(registry)["skills"]
    assert skill["name"] == "Translate text"  # the first agent's (by id)
    assert skill["tags"] == ["translation", "language", "text", "italian"]
    assert skill["examples"][-1] == "translate cat to italian"
    assert skill["inputModes"] == ["text/plain", "text/markdown"]
    check_v03(build(registry))


async def test_router_card_follows_the_policy_and_the_catalog(registry: Registry) -> None:
    signed = sign_card(currency_card("http://127.0.0.1:9101"), KEY)
    await registry.register_card(signed, agent_id="currency")
    await registry.register_card(translate_card("http://127.0.0.1:9102"), agent_id="translate")
    grpc = card_v1("http://127.0.0.1:9104")
    grpc["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    await registry.register_card(grpc, agent_id="grpc-weather")  # the router cannot relay it
    assert [s["id"] for s in build(registry)["skills"]] == ["convert-currency", "translate-text"]
    registry.require_signed = True
    card = build(registry)
    assert [s["id"] for s in card["skills"]] == ["convert-currency"]
    assert "image/*" not in card["defaultInputModes"]
    await registry.remove("currency")
    empty = build(registry)
    assert empty["skills"] == [] and empty["defaultInputModes"] == []
    check_v1(empty)
    check_v03(empty)


# --- per-agent cards -----------------------------------------------------------------------------


def interfaces(card: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (i["url"], i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]
    ]


def test_v1_card_points_at_the_router_and_loses_its_signatures() -> None:
    unsigned = currency_card("http://127.0.0.1:9101")
    # a 1.0-only agent (the demo one also serves 0.3, as a 1.3 SDK agent in compat mode does)
    unsigned["supportedInterfaces"] = unsigned["supportedInterfaces"][:1]
    for compat_field in ("url", "preferredTransport", "protocolVersion"):
        unsigned.pop(compat_field, None)
    raw = sign_card(unsigned, KEY)
    raw["x-vendor"] = {"kept": True}
    before = copy.deepcopy(raw)
    card = agent_card_via_router(record("currency", raw), raw, BASE + "/")
    assert raw == before  # the stored card is not touched
    endpoint = f"{BASE}/agents/currency"
    # the agent speaks 1.0 only; the router translates for 0.3 clients, so it offers 0.3 too
    assert interfaces(card) == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
        (endpoint, "HTTP+JSON", "1.0"),  # the router serves HTTP+JSON for each
        (endpoint, "HTTP+JSON", "0.3"),
    ]
    assert "signatures" not in card
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        endpoint,
        "JSONRPC",
        "0.3.0",
    )
    assert card["x-vendor"] == {"kept": True}
    assert card["provider"] == raw["provider"]  # not an interface URL: the agent's own
    added = (
        "supportedInterfaces",
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
        "capabilities",
    )
    assert {k: v for k, v in card.items() if k not in added} == {
        k: v
        for k, v in raw.items()
        if k not in ("supportedInterfaces", "signatures", "capabilities")
    }
    # streams and push are relayed, or provided by the router for an agent without them
    assert card["capabilities"] == {
        **raw["capabilities"],
        "streaming": True,
        "pushNotifications": True,
    }
    parsed = check_v1(card)
    assert parsed.supported_interfaces[0].url == endpoint
    assert not parsed.signatures
    assert check_v03(card).url == endpoint


def test_v1_card_with_both_versions_keeps_each_and_adds_the_03_fields() -> None:
    raw = card_v1("http://127.0.0.1:8001")
    raw["supportedInterfaces"] = [
        {"url": "http://127.0.0.1:8001/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "http://127.0.0.1:8001/g", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {
            "url": "http://127.0.0.1:8001/r",
            "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0",
        },
        {
            "url": "http://127.0.0.1:8001/v03",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "0.3",
        },
    ]
    # the 0.3 fields an a2a-sdk 1.x server adds (not covered by its signature)
    raw.update(url="http://127.0.0.1:8001/v03", preferredTransport="JSONRPC", protocolVersion="0.3")
    card = agent_card_via_router(record("echo", raw), raw, BASE)
    endpoint = f"{BASE}/agents/echo"
    assert interfaces(card) == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
        (endpoint, "HTTP+JSON", "1.0"),  # the router serves HTTP+JSON for each
        (endpoint, "HTTP+JSON", "0.3"),
    ]
    assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
        endpoint,
        "JSONRPC",
        "0.3",
    )
    check_v1(card)
    assert check_v03(card).url == endpoint
    # without a 0.3 interface the agent's stale 0.3 fields go: the router's (translating)
    # endpoint takes their place
    raw["supportedInterfaces"] = raw["supportedInterfaces"][:1]
    card = agent_card_via_router(record("echo", raw), raw, BASE)
    assert (card["url"], card["protocolVersion"]) == (endpoint, "0.3.0")
    assert interfaces(card) == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
        (endpoint, "HTTP+JSON", "1.0"),  # the router serves HTTP+JSON for each
        (endpoint, "HTTP+JSON", "0.3"),
    ]


def test_v03_card_points_at_the_router() -> None:
    raw = translate_card("http://127.0.0.1:9102")
    raw["additionalInterfaces"] = [
        {"url": "http://127.0.0.1:9102/", "transport": "JSONRPC"},
        {"url": "http://127.0.0.1:9102/grpc", "transport": "GRPC"},
    ]
    raw["signatures"] = [{"protected": "e30", "signature": "AAAA"}]
    card = agent_card_via_router(record("translate", raw), raw, BASE)
    endpoint = f"{BASE}/agents/translate"
    assert card["url"] == endpoint
    assert card["protocolVersion"] == "0.3.0" and card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [
        {"url": endpoint, "transport": "JSONRPC"},
        {"url": endpoint, "transport": "HTTP+JSON"},
    ]
    assert "signatures" not in card and "supportedInterfaces" not in card
    legacy = check_v03(card)
    assert legacy.url == endpoint
    # a 1.x client converts it to one 0.3 interface at the router
    parsed = check_v1_via_resolver(card)
    assert [
        (i.url, i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces
    ] == [
        (endpoint, "JSONRPC", "0.3.0"),
        (endpoint, "JSONRPC", "0.3.0"),
        (endpoint, "HTTP+JSON", "0.3.0"),
    ]


def check_v1_via_resolver(card: dict[str, Any]) -> AgentCard:
    return parse_agent_card(copy.deepcopy(card))


def test_v03_card_whose_main_transport_is_not_jsonrpc() -> None:
    raw = card_v03("http://127.0.0.1:8001", preferredTransport="GRPC")
    raw["additionalInterfaces"] = [{"url": "http://127.0.0.1:8001/rpc2", "transport": "JSONRPC"}]
    card = agent_card_via_router(record("invoices", raw), raw, BASE)
    endpoint = f"{BASE}/agents/invoices"
    assert (card["url"], card["preferredTransport"]) == (endpoint, "JSONRPC")
    assert card["additionalInterfaces"] == [
        {"url": endpoint, "transport": "JSONRPC"},
        {"url": endpoint, "transport": "HTTP+JSON"},
    ]
    check_v03(card)


@pytest.mark.parametrize("version", ["0.2.5", None])
def test_v02_card_points_at_the_router(version: str | None) -> None:
    raw: dict[str, Any] = {
        "name": "Old agent",
        "description": "From 2025.",
        "url": "http://127.0.0.1:8001/a2a",
        "version": "1",
        "securitySchemes": {},
        "capabilities": {},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": []}],
    }
    if version:
        raw["protocolVersion"] = version
    card = agent_card_via_router(record("old", raw), raw, BASE)
    capabilities = {"streaming": True, "pushNotifications": True}
    expected = {**raw, "url": f"{BASE}/agents/old", "capabilities": capabilities}
    assert card == expected


def test_agents_the_router_cannot_relay_have_no_card() -> None:
    raw = card_v1("http://127.0.0.1:8001")  # gRPC of A2A 0.3 (a2a.v1.A2AService): no client
    raw["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    with pytest.raises(NotFound) as info:
        agent_card_via_router(record("grpc", raw), raw, BASE)
    assert info.value.code == "not_relayable"


def test_rewritten_cards_round_trip_through_the_sdk() -> None:
    """Every rewritten 1.0 card survives ParseDict -> MessageToDict with its URLs."""
    for make in (currency_card, caption_card):
        raw = make("http://127.0.0.1:9101")
        card = agent_card_via_router(record("a", raw), raw, BASE)
        back = MessageToDict(check_v1(card))
        assert {i["url"] for i in back["supportedInterfaces"]} == {f"{BASE}/agents/a"}
        assert [i["protocolVersion"] for i in back["supportedInterfaces"]] == [
            "1.0",
            "0.3",
            "1.0",
            "0.3",
        ]
        assert back["skills"] == card["skills"]


def test_a_rest_only_agent_is_offered_in_both_bindings() -> None:
    raw = card_v1("http://127.0.0.1:8001")
    raw["supportedInterfaces"] = [
        {"url": "http://127.0.0.1:8001/r", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ]
    card = agent_card_via_router(record("rest", raw), raw, BASE)
    endpoint = f"{BASE}/agents/rest"
    # the router calls it over HTTP+JSON and serves it in JSON-RPC and HTTP+JSON, both versions
    assert interfaces(card) == [
        (endpoint, "JSONRPC", "1.0"),
        (endpoint, "JSONRPC", "0.3"),
        (endpoint, "HTTP+JSON", "1.0"),
        (endpoint, "HTTP+JSON", "0.3"),
    ]
    check_v1(card)
    assert check_v03(card).url == endpoint
    # a 0.3 card whose only transport is HTTP+JSON
    old = translate_card("http://127.0.0.1:9102")
    old["preferredTransport"] = "HTTP+JSON"
    old.pop("additionalInterfaces", None)
    assert [i.binding for i in record("old-rest", old).card.interfaces] == ["HTTP+JSON"]
    card = agent_card_via_router(record("old-rest", old), old, BASE)
    endpoint = f"{BASE}/agents/old-rest"
    assert (card["url"], card["preferredTransport"]) == (endpoint, "JSONRPC")
    old["additionalInterfaces"] = [{"url": "http://127.0.0.1:9102/", "transport": "HTTP+JSON"}]
    card = agent_card_via_router(record("old-rest", old), old, BASE)
    assert card["additionalInterfaces"] == [
        {"url": endpoint, "transport": "JSONRPC"},
        {"url": endpoint, "transport": "HTTP+JSON"},
    ]
    check_v03(card)
