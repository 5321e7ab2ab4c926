"""router.choose.reasons (and the refusals of router.choose.words, meaning and chooser): every
cause of a -32050 has its own message, naming the decisive reason, and says it alike to a
JSON-RPC client of A2A 0.3 and 1.0, over HTTP+JSON and over gRPC; in 1.0 the ErrorInfo
metadata holds the scalar facts and the google.protobuf.Struct detail the closest skills."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2, status_pb2

from registry.appkeys import REGISTRY
from router.app import create_app
from router.transport.routes import GRPC_ENDPOINT, ROUTER
from seeds.demo_agents import caption_card, currency_card, translate_card
from tests.support.helpers import AUTH, card_v1, make_settings

grpc = pytest.importorskip("grpc")
a2a_pb2 = pytest.importorskip("a2a.types.a2a_pb2")
a2a_pb2_grpc = pytest.importorskip("a2a.types.a2a_pb2_grpc")

STRUCT = "type.googleapis.com/google.protobuf.Struct"
INFO = "type.googleapis.com/google.rpc.ErrorInfo"
REFUSED = "no agent can take this message: "


def _skill(skill_id: str, name: str, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    return {
        "id": skill_id,
        "name": name,
        "description": f"{name}.",
        "tags": name.lower().split(),
        "inputModes": inputs,
        "outputModes": outputs,
    }


def _card(url: str, name: str, skill: dict[str, Any], grpc_only: bool = False) -> dict[str, Any]:
    card = card_v1(url, name=name, skills=[skill])
    if grpc_only:
        card["supportedInterfaces"][0].update(protocolBinding="GRPC", protocolVersion="0.3")
    return card


async def _app(aiohttp_client: Any, sqlite_url: str, **settings: Any) -> TestClient:
    values = {"grpc_port": 0, "health_unreachable_after": 1, **settings}
    return await aiohttp_client(create_app(make_settings(sqlite_url, **values)))


async def _register(client: TestClient, agent_id: str, card: dict[str, Any]) -> None:
    resp = await client.post("/api/v1/agents", json={"card": card, "id": agent_id}, headers=AUTH)
    assert resp.status == 201, await resp.text()


def _parts(text: str, media: str | None) -> tuple[list[Any], list[Any]]:
    """A message's parts in 1.0 and 0.3 shapes: a text, and a file of ``media``."""
    v1: list[Any] = [{"text": text}] if text else []
    v03: list[Any] = [{"kind": "text", "text": text}] if text else []
    if media:
        v1.append({"url": "https://files.example.com/f", "mediaType": media, "filename": "f"})
        file = {"uri": "https://files.example.com/f", "mimeType": media, "name": "f"}
        v03.append({"kind": "file", "file": file})
    return v1, v03


async def _refused_everywhere(
    client: TestClient,
    text: str,
    *,
    media: str | None = None,
    accepted: list[str] | None = None,
    key: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """Send the message over JSON-RPC 0.3 and 1.0, HTTP+JSON 1.0 and gRPC; each answer is a
    -32050 (404, NOT_FOUND) with the same message and facts, which are returned (the 0.3
    ``data``)."""
    v1, v03 = _parts(text, media)
    config = {"acceptedOutputModes": accepted} if accepted else None
    auth = {"X-API-Key": key} if key else {}
    one = {"A2A-Version": "1.0", **auth}

    params03: dict[str, Any] = {"message": {"kind": "message", "role": "user", "messageId": "m"}}
    params03["message"]["parts"] = v03
    params1: dict[str, Any] = {"message": {"role": "ROLE_USER", "messageId": "m", "parts": v1}}
    if config:
        params03["configuration"] = params1["configuration"] = config

    rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params03}
    error03 = (await (await client.post("/", json=rpc, headers=auth)).json())["error"]
    assert error03["code"] == -32050, error03
    message, data = error03["message"], error03["data"]

    rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params1}
    error1 = (await (await client.post("/", json=rpc, headers=one)).json())["error"]
    assert (error1["code"], error1["message"]) == (-32050, message)
    info, *rest = error1["data"]
    _check_v1(info, rest, data)

    resp = await client.post("/message:send", json=params1, headers=one)
    body = (await resp.json())["error"]
    assert (resp.status, body["status"], body["message"]) == (404, "NOT_FOUND", message)
    _check_v1(body["details"][0], body["details"][1:], data)

    target = f"127.0.0.1:{client.app[GRPC_ENDPOINT].port}"
    metadata = (("a2a-version", "1.0"), *((("x-api-key", key),) if key else ()))
    async with grpc.aio.insecure_channel(target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)
        request = json_format.ParseDict(params1, a2a_pb2.SendMessageRequest())
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await stub.SendMessage(request, metadata=metadata)
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    trailer = dict(failed.value.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailer["grpc-status-details-bin"])
    assert status.message == message
    grpc_info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(grpc_info)
    struct = [struct_pb2.Struct() for d in status.details[1:] if d.Is(struct_pb2.Struct.DESCRIPTOR)]
    for detail, holder in zip(status.details[1:], struct, strict=False):
        detail.Unpack(holder)
    infos = json_format.MessageToDict(grpc_info)
    rest_ = [{"@type": STRUCT, "value": json_format.MessageToDict(s)} for s in struct]
    _check_v1({"@type": INFO, **infos}, rest_, data)
    return message, data


def _check_v1(info: dict[str, Any], rest: list[dict[str, Any]], data: dict[str, Any]) -> None:
    """A 1.0 refusal's details: the ErrorInfo with the scalar facts as strings, the Struct
    with all of them (the closest skills only there)."""
    assert info["@type"] == INFO and info["reason"] == "NO_MATCHING_AGENT"
    assert info["domain"] == "switchboard.a2a"
    scalars = {
        k: v if isinstance(v, str) else json.dumps(v)
        for k, v in data.items()
        if isinstance(v, str | int | float | bool)
    }
    metadata = info.get("metadata", {})
    assert set(metadata) == set(scalars) and metadata["reason"] == data["reason"]
    assert "closest" not in metadata
    if "closest" in data:
        (struct,) = [d["value"] for d in rest if d["@type"] == STRUCT]
        assert [c["skill"] for c in struct["closest"]] == [c["skill"] for c in data["closest"]]


@pytest.fixture
async def catalog(aiohttp_client: Any, sqlite_url: str) -> TestClient:
    """Matching by words: skills that fit different messages, each kept out by a filter."""
    client = await _app(aiohttp_client, sqlite_url)
    base = "http://127.0.0.1:9"
    await _register(client, "currency", currency_card(f"{base}1/"))
    await _register(client, "caption", caption_card(f"{base}2/"))
    scan = _skill("scan-page", "Scan page", ["image/*"], ["text/plain"])
    await _register(client, "scanner", _card(f"{base}3/", "Scanner", scan))
    radar = _skill("radar", "Weather radar map", ["text/plain"], ["image/png"])
    await _register(client, "radar", _card(f"{base}4/", "Radar", radar))
    podcast = _skill("podcast", "Podcast episode", ["text/plain"], ["audio/mpeg"])
    await _register(client, "podcast", _card(f"{base}5/", "Podcasts", podcast))
    fax = _skill("fax", "Fax machine", ["text/plain"], ["text/plain"])
    await _register(client, "fax", _card(f"{base}6/", "Fax", fax, grpc_only=True))
    permit = _skill("permit", "Parking permit", ["text/plain"], ["text/plain"])
    await _register(client, "parking", _card(f"{base}7/", "Parking", permit))
    await client.app[REGISTRY].upkeep.record_failure("parking", "refused", schedule=True)
    return client


@pytest.mark.parametrize(
    ("text", "media", "accepted", "expected", "facts"),
    [
        (
            "order pizza for the team lunch",
            None,
            None,
            "no skill matches its words well enough (a score of 0.5 or more)",
            {"reason": "no match", "tier": "refused", "threshold": 0.5},
        ),
        (
            "hi, thanks!",
            None,
            None,
            "the message has no words to route by; say what you need, or name a skill or "
            "agent with the routing extension",
            {"reason": "no content", "tier": "refused"},
        ),
        (
            "caption please",
            None,
            None,
            "the agents whose skills fit do not accept text/plain",
            {"reason": "filtered", "filter": "input"},
        ),
        (
            "weather radar map",
            None,
            ["audio/mpeg"],
            "the agents whose skills fit do not output any of audio/mpeg",
            {"reason": "filtered", "filter": "output"},
        ),
        (
            "fax machine",
            None,
            None,
            "the agents whose skills fit have no interface the router can call",
            {"reason": "filtered", "filter": "interface"},
        ),
        (
            "parking permit",
            None,
            None,
            "the agents whose skills fit are unreachable",
            {"reason": "filtered", "filter": "health"},
        ),
        (
            "the fax machine for my parking permit",
            None,
            None,
            "the agents whose skills fit cannot take it: some are unreachable, others have no "
            "interface the router can call",
            {"reason": "filtered", "filter": "several"},
        ),
        (
            "",
            "image/png",
            None,
            "it has no words to route by and 2 agents accept its media types; name a skill or "
            "agent with the routing extension",
            {"reason": "ambiguous", "tier": "refused", "agents": ["caption", "scanner"]},
        ),
    ],
)
async def test_each_refusal_by_words_says_why(
    catalog: TestClient,
    text: str,
    media: str | None,
    accepted: list[str] | None,
    expected: str,
    facts: dict[str, Any],
) -> None:
    message, data = await _refused_everywhere(catalog, text, media=media, accepted=accepted)
    assert message == REFUSED + expected
    assert facts.items() <= data.items()


async def test_an_agent_kept_out_by_the_signed_card_policy(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await _app(aiohttp_client, sqlite_url, require_signed_cards=True)
    await _register(client, "currency", currency_card("http://127.0.0.1:91/"))
    message, data = await _refused_everywhere(client, "convert 100 USD to EUR")
    assert message == REFUSED + (
        "the agents whose skills fit are not routable: their cards are not verified "
        "(SWITCHBOARD_REQUIRE_SIGNED_CARDS)"
    )
    assert (data["reason"], data["filter"]) == ("filtered", "policy")


async def test_a_skill_only_others_may_use(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await _app(aiohttp_client, sqlite_url, client_auth="api-key")
    await _register(client, "currency", currency_card("http://127.0.0.1:91/"))
    await _register(client, "translate", translate_card("http://127.0.0.1:92/"))
    policy = {"tenant": "acme", "rules": [{"groups": ["finance"]}]}
    assert (await client.put("/api/v1/policies/currency", json=policy, headers=AUTH)).ok
    made = await client.post(
        "/api/v1/clients", json={"subject": "dev", "tenant": "acme", "groups": ["dev"]},
        headers=AUTH,
    )  # fmt: skip
    key = (await made.json())["key"]
    message, data = await _refused_everywhere(client, "convert 100 USD to EUR", key=key)
    assert message == REFUSED + "no agent you may use offers this skill"
    assert data["reason"] == "not allowed" and "currency" not in json.dumps(data)


FLIGHTS = _skill("book-flights", "Flight booking", ["text/plain"], ["text/plain"])
FLIGHTS["description"] = "Books and changes airline tickets for business trips."
HOTELS = _skill("book-hotels", "Hotel booking", ["text/plain"], ["text/plain"])
HOTELS["description"] = "Reserves hotel rooms for business trips."
TRIP = "I need to get to Madrid for the conference next week"


async def _by_meaning(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, **settings: Any
) -> TestClient:
    values = {"matcher": "semantic", "embedding_model": str(model_dir), **settings}
    client = await _app(aiohttp_client, sqlite_url, **values)
    await _register(client, "flights", _card("http://127.0.0.1:91/", "Flights", FLIGHTS))
    await _register(client, "hotels", _card("http://127.0.0.1:92/", "Hotels", HOTELS))
    await client.app[REGISTRY].indexed()
    return client


def _calibrate(client: TestClient, **values: Any) -> None:
    semantic = client.app[ROUTER].matcher.semantic
    semantic.calibration = replace(semantic.calibration, llm_band=0.0, **values)


async def test_refusals_by_meaning_say_why(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path
) -> None:
    client = await _by_meaning(aiohttp_client, sqlite_url, model_dir)
    _calibrate(client, floor=0.99, margin=0.0)
    message, data = await _refused_everywhere(client, TRIP)
    best = data["score"]
    assert message == REFUSED + (
        f"no agent has a skill that matches it well enough: the best scores {best:g}, below "
        "the threshold 0.99"
    )
    assert (data["reason"], data["tier"], data["threshold"]) == ("no match", "refused", 0.99)
    assert 0 < best < 0.99 and data["closest"][0]["score"] == best

    _calibrate(client, floor=0.0, margin=1.0)
    message, data = await _refused_everywhere(client, TRIP)
    first, second = (c["agent"] for c in data["closest"][:2])
    assert message.startswith(REFUSED + f"agents {first!r} and {second!r} fit it almost equally (")
    assert message.endswith(
        f"a margin of {data['margin']:g} where 1 is needed); say more, or name a skill or "
        "agent with the routing extension"
    )
    assert (data["reason"], data["marginNeeded"]) == ("ambiguous", 1.0)


async def test_the_adjudicators_none_says_why(
    aiohttp_client: Any, sqlite_url: str, model_dir: Path, chat: Any
) -> None:
    server, http = chat
    server.content = '{"choice": "none", "reason": "not a travel request"}'
    client = await _by_meaning(
        aiohttp_client, sqlite_url, model_dir,
        router_llm_url=str(http.make_url("/v1")), router_llm_model="judge",
    )  # fmt: skip
    _calibrate(client, floor=0.0, margin=1.0)
    message, data = await _refused_everywhere(client, TRIP)
    assert message == REFUSED + (
        "the LLM adjudicator judged that none of the closest skills fits it (not a travel request)"
    )
    assert (data["reason"], data["tier"], data["verdict"]) == (
        "no match",
        "llm",
        "not a travel request",
    )
