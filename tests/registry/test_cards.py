"""Card readers: every shape normalizes to one model; bad cards name the bad field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from registry.cards import canonical_version, canonical_versions, detect_format, parse_card
from registry.errors import CardError
from tests.support.helpers import FIXTURES, card_v03, card_v1


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / "cards" / name).read_text())


def test_v1_card_reads_interfaces_and_skills() -> None:
    card = parse_card(card_v1("https://w.example"))
    assert card.card_format == "1.0"
    assert [(i.url, i.binding, i.protocol_version) for i in card.interfaces] == [
        ("https://w.example/a2a", "JSONRPC", "1.0")
    ]
    forecast, radar = card.skills
    assert forecast.input_modes == ["text/plain"]  # the card's defaults fill in
    assert forecast.output_modes == ["text/plain", "application/json"]
    assert radar.output_modes == ["image/png"]  # the skill's own modes win
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is False


def test_v03_card_reads_url_transport_and_additional_interfaces() -> None:
    data = card_v03(
        "https://i.example",
        additionalInterfaces=[
            {"url": "https://i.example/rpc", "transport": "JSONRPC"},
            {"url": "https://i.example/rest", "transport": "HTTP+JSON"},
            {"url": "i.example:443", "transport": "GRPC"},
        ],
    )
    card = parse_card(data)
    assert card.card_format == "0.3"
    assert [(i.url, i.binding, i.protocol_version) for i in card.interfaces] == [
        ("https://i.example/rpc", "JSONRPC", "0.3.0"),
        ("https://i.example/rest", "HTTP+JSON", "0.3.0"),
        ("i.example:443", "GRPC", "0.3.0"),
    ]
    assert card.capabilities.push_notifications is True
    assert card.skills[0].input_modes == ["application/pdf", "image/*"]


def test_sdk_13_card_ignores_unsigned_compat_fields() -> None:
    """a2a-sdk 1.3 injects url/preferredTransport/protocolVersion: interfaces come from
    supportedInterfaces only."""
    data = _fixture("signed_card_v1.json")
    data["url"] = "https://attacker.example/"
    card = parse_card(data)
    assert card.card_format == "1.0"
    assert {i.url for i in card.interfaces} == {"http://127.0.0.1:9910/a2a/jsonrpc"}
    assert [i.protocol_version for i in card.interfaces] == ["1.0", "0.3"]
    assert card.signatures[0]["protected"].startswith("eyJ")


def test_sdk_03_card() -> None:
    card = parse_card(_fixture("signed_card_v03.json"))
    assert card.card_format == "0.3"
    assert card.interfaces[0].url == "http://127.0.0.1:9903/"
    assert card.skills[0].tags == ["echo", "test"]


def test_v02_card() -> None:
    data = {
        "name": "Legacy 0.2",
        "description": "d",
        "url": "https://l.example/",
        "version": "1",
        "capabilities": {"streaming": True, "stateTransitionHistory": True},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [{"id": "s", "name": "S", "tags": ["t"]}],
        "supportsAuthenticatedExtendedCard": True,
    }
    card = parse_card(data)
    assert card.card_format == "0.2"
    assert card.interfaces[0].protocol_version == "0.2"
    assert card.capabilities.extended_card is True
    assert card.capabilities.state_transition_history is True


def test_v01_seed_shape_with_authentication() -> None:
    """The shape of protocol seed 004: url + authentication, modes as bare words."""
    data = {
        "name": "Old Agent",
        "description": "From the first spec",
        "url": "https://old.example/a2a",
        "provider": {"organization": "Acme", "url": "https://acme.example"},
        "version": "0.1",
        "documentationUrl": "https://acme.example/docs",
        "capabilities": {"streaming": False, "pushNotifications": False},
        "authentication": {"schemes": ["Bearer"], "credentials": None},
        "defaultInputModes": ["text", "file"],
        "defaultOutputModes": ["text"],
        "skills": [{"id": "summarize", "name": "Summarize", "description": "x", "tags": []}],
    }
    card = parse_card(data)
    assert card.card_format == "0.1"
    assert card.interfaces[0].protocol_version == "0.1"
    assert card.provider is not None and card.provider.organization == "Acme"
    assert card.skills[0].input_modes == ["text", "file"]


def test_draft_v1_card_without_interface_versions() -> None:
    """The 2026 draft (protocol seed 000): protocolVersions at the top, 'gRPC' spelling."""
    data = {
        "protocolVersions": ["1.0"],
        "name": "Draft",
        "description": "d",
        "version": "1",
        "supportedInterfaces": [
            {"url": "https://d.example/a2a", "protocolBinding": "JSONRPC"},
            {"url": "d.example:50051", "protocolBinding": "gRPC"},
        ],
        "capabilities": {},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [],
    }
    card = parse_card(data)
    assert [(i.binding, i.protocol_version) for i in card.interfaces] == [
        ("JSONRPC", "1.0"),
        ("GRPC", "1.0"),
    ]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"name": "x", "supportedInterfaces": []}, "supportedInterfaces"),
        ({"name": "x", "protocolVersion": "1.0"}, "supportedInterfaces"),
        ({"url": "https://a.example", "preferredTransport": "JSONRPC"}, "name"),
        ({"name": "", "url": "https://a.example"}, "name"),
        ({"name": "x", "url": "https://a.example", "skills": [{"id": 3}]}, "skills[0].id"),
        ({"name": "x", "url": "https://a.example", "skills": [{"id": "a"}]}, "skills[0].name"),
        (
            {
                "name": "x",
                "url": "https://a.example",
                "skills": [{"id": "a", "name": "A", "tags": "t"}],
            },
            "skills[0].tags",
        ),
        (
            {"name": "x", "url": "https://a.example", "capabilities": {"streaming": "yes"}},
            "capabilities.streaming",
        ),
        ({"name": "x", "url": "ftp://a.example"}, "url"),
        (
            {
                "name": "x",
                "supportedInterfaces": [{"url": "/relative", "protocolBinding": "JSONRPC"}],
            },
            "supportedInterfaces[0].url",
        ),
        (
            {"name": "x", "supportedInterfaces": [{"protocolBinding": "JSONRPC"}]},
            "supportedInterfaces[0].url",
        ),
        (
            {"name": "x", "url": "https://a.example", "defaultInputModes": "text/plain"},
            "defaultInputModes",
        ),
    ],
)
def test_invalid_cards_name_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(CardError) as info:
        parse_card(data)
    assert field in [d["field"] for d in info.value.details], info.value.details
    assert info.value.status == 422


def test_duplicate_skill_ids_are_refused() -> None:
    data = card_v1("https://w.example")
    data["skills"][1]["id"] = "forecast"
    with pytest.raises(CardError, match="skill id twice"):
        parse_card(data)


def test_not_an_object() -> None:
    with pytest.raises(CardError, match="JSON object"):
        parse_card(["a", "list"])


def test_unknown_fields_are_ignored() -> None:
    data = card_v1("https://w.example", futureField={"x": 1})
    data["skills"][0]["rating"] = 5
    assert parse_card(data).skills[0].id == "forecast"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"supportedInterfaces": []}, "1.0"),
        ({"url": "u", "preferredTransport": "JSONRPC"}, "0.3"),
        ({"url": "u", "protocolVersion": "0.3.0"}, "0.3"),
        ({"url": "u", "protocolVersion": "0.2.5"}, "0.2"),
        ({"url": "u", "authentication": {}}, "0.1"),
        ({"url": "u"}, "0.2"),
    ],
)
def test_detect_format(data: dict[str, Any], expected: str) -> None:
    assert detect_format(data) == expected


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda c: c["skills"][0]["tags"].append("t" * 129), "skills[0].tags[2]"),
        (lambda c: c["skills"][0].update(inputModes=["x/" + "y" * 300]), "skills[0].inputModes[0]"),
        (
            lambda c: c["supportedInterfaces"][0].update(protocolVersion="9" * 200),
            "supportedInterfaces[0].protocolVersion",
        ),
        (lambda c: c.update(name="n" * 257), "name"),
        (lambda c: c.update(skills=[{"id": str(n), "name": "s"} for n in range(1001)]), "skills"),
    ],
)
def test_oversized_fields_are_refused_by_name(mutate: Any, field: str) -> None:
    """Bounded so every value fits the index (PostgreSQL refuses huge index entries)."""
    card = card_v1("https://w.example")
    mutate(card)
    with pytest.raises(CardError) as info:
        parse_card(card)
    assert field in [d["field"] for d in info.value.details]


# --- only the published names, empty values read as absent -----------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.update(supported_interfaces=[{"url": "https://evil.example/a2a"}]),
        lambda c: c.update(default_input_modes=["image/evil"]),
        lambda c: c["skills"][0].update(input_modes=["image/evil"], output_modes=["x/y"]),
        lambda c: c["capabilities"].update(push_notifications=True, extended_agent_card=True),
        lambda c: c["supportedInterfaces"][0].update(
            protocol_binding="GRPC", protocol_version="0.2"
        ),
        lambda c: c.update(documentation_url="https://evil.example/docs"),
    ],
)
def test_snake_case_spellings_are_unknown_fields(edit: Any) -> None:
    """A second spelling of a field would be one the signature forms do not cover."""
    data = card_v1("https://w.example")
    before = parse_card(data)
    edit(data)
    assert parse_card(data) == before


def test_snake_case_alone_does_not_provide_a_field() -> None:
    data = card_v03("https://i.example")
    data["additional_interfaces"] = [{"url": "https://evil.example/rest"}]
    data["skills"][0]["input_modes"] = ["image/evil"]
    card = parse_card(data)
    assert [i.url for i in card.interfaces] == ["https://i.example/rpc"]
    assert card.skills[0].input_modes == ["application/pdf", "image/*"]


def test_empty_skill_modes_inherit_the_defaults() -> None:
    """`[]` reads like a missing list, as in protobuf and the SDKs' signed forms."""
    data = card_v1("https://w.example")
    data["skills"][0].update(inputModes=[], outputModes=[])
    data["skills"][1]["outputModes"] = []
    forecast, radar = parse_card(data).skills
    assert forecast.input_modes == ["text/plain"]
    assert forecast.output_modes == ["text/plain", "application/json"]
    assert radar.output_modes == ["text/plain", "application/json"]


def test_empty_optional_texts_read_as_their_defaults() -> None:
    data = card_v1(
        "https://w.example",
        documentationUrl="",
        iconUrl="",
        provider={"organization": "", "url": ""},
        protocolVersions=["", "1.1"],
    )
    data["supportedInterfaces"][0].update(protocolBinding="", protocolVersion="", tenant="")
    card = parse_card(data)
    assert (card.documentation_url, card.icon_url, card.provider) == (None, None, None)
    assert [(i.binding, i.protocol_version, i.tenant) for i in card.interfaces] == [
        ("JSONRPC", "1.1", None)
    ]
    data = card_v03("https://i.example", preferredTransport="", protocolVersion="")
    data["additionalInterfaces"] = [{"url": "https://i.example/2", "transport": ""}]
    card = parse_card(data)
    assert [(i.binding, i.protocol_version) for i in card.interfaces] == [
        ("JSONRPC", "0.3.0"),
        ("JSONRPC", "0.3.0"),
    ]
    assert parse_card(card_v1("https://w.example", provider={})).provider is None


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("0.3.0", "0.3"),
        ("0.3", "0.3"),
        (" 0.3 ", "0.3"),
        ("1", "1.0"),
        ("1.0", "1.0"),
        ("1.0.0", "1.0"),
        ("0.2.5", "0.2"),
        ("01.00", "1.0"),
        ("v1.0", "v1.0"),  # not numbers and dots: as written
        ("0.3.0-rc1", "0.3.0-rc1"),
        ("1..0", "1..0"),
        ("", ""),
    ],
)
def test_canonical_version_is_major_dot_minor(written: str, canonical: str) -> None:
    assert canonical_version(written) == canonical


def test_canonical_versions_are_distinct_in_card_order_and_the_card_keeps_its_spelling() -> None:
    assert canonical_versions(["1.0.0", "0.3", "1", "0.3.0"]) == ["1.0", "0.3"]
    interfaces = [
        {"url": "https://w.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://w.example/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
        {"url": "https://w.example/v3", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
    ]
    card = parse_card(card_v1("https://w.example", supportedInterfaces=interfaces))
    assert card.protocol_versions == ["1.0", "0.3.0", "0.3"]
    assert card.canonical_protocol_versions == ["1.0", "0.3"]
