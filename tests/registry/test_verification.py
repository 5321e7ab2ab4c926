"""Card signatures end to end: real signed cards registered through the API, trusted keys,
re-verification when keys change, the routing policy, search and stats."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from registry.api import REGISTRY
from registry.crawler import Crawler
from registry.keys_api import TRUST
from registry.service import Registry
from registry.signatures import StaticKeys, generate_key, sign_card
from registry.store import Store
from router.app import create_app
from tests.support.helpers import AUTH, CardServer, card_v03, card_v1, make_settings
from tests.support.sdk_peers import serve_sdk_agent


@pytest.fixture(scope="module")
def key() -> Any:
    return generate_key("ES256", kid="owner-key-1")


def _public(key: Any) -> dict[str, Any]:
    return json.loads(key.export_public())


async def _register(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
    data = await resp.json()
    assert resp.status == 201, data
    return data


async def test_sdk_signed_card_verified_through_allow_listed_jku(
    aiohttp_client: Any, sqlite_url: str, key: Any
) -> None:
    """The issue's 'done when': a card signed by a real a2a-sdk agent shows verified + kid."""
    async with serve_sdk_agent(signing_key=key) as base_url:
        settings = make_settings(sqlite_url, trusted_jku=[f"{base_url}/.well-known/"])
        client = await aiohttp_client(create_app(settings))
        agent = await _register(client, {"url": base_url})
    verification = agent["verification"]
    assert verification["status"] == "verified", verification
    assert verification["kid"] == "owner-key-1"
    assert verification["key_source"] == f"jku:{base_url}/.well-known/jwks.json"
    assert verification["payload_form"] in ("rfc8785", "a2a-sdk-1.x")


async def test_jku_off_the_allow_list_is_untrusted_until_the_key_is_added(
    aiohttp_client: Any, db_url: str, key: Any
) -> None:
    async with serve_sdk_agent(signing_key=key) as base_url:
        client = await aiohttp_client(create_app(make_settings(db_url)))
        agent = await _register(client, {"url": base_url})
    assert agent["verification"]["status"] == "untrusted-key"
    assert "SWITCHBOARD_TRUSTED_JKU" in agent["verification"]["reason"]
    # the operator trusts the owner's key: every agent is checked again
    resp = await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    assert resp.status == 201, await resp.json()
    again = await (await client.get(f"/api/v1/agents/{agent['id']}")).json()
    assert again["verification"]["status"] == "verified"
    assert again["verification"]["key_source"].startswith("trust-store:")
    # and when the key is removed, the agent is untrusted again
    key_id = (await resp.json())["id"]
    assert (await client.delete(f"/api/v1/keys/{key_id}", headers=AUTH)).status == 204
    final = await (await client.get(f"/api/v1/agents/{agent['id']}")).json()
    assert final["verification"]["status"] == "untrusted-key"


@pytest.mark.parametrize(
    ("tamper", "field"),
    [
        (lambda c: c.update(name="Evil Weather"), "name"),
        (lambda c: c["skills"][0]["tags"].append("payments"), "a skill tag"),
        (lambda c: c["supportedInterfaces"][0].update(url="https://evil.example/a2a"), "url"),
        (lambda c: c["capabilities"].update(streaming=False), "capability"),
    ],
)
async def test_tampering_with_a_signed_field_is_invalid(
    aiohttp_client: Any, sqlite_url: str, key: Any, tamper: Any, field: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    signed = sign_card(card_v1("https://w.example"), key)
    good = await _register(client, {"card": signed, "id": "good"})
    assert good["verification"]["status"] == "verified"
    assert (await client.delete("/api/v1/agents/good", headers=AUTH)).status == 204
    tampered = json.loads(json.dumps(signed))
    tamper(tampered)
    bad = await _register(client, {"card": tampered, "id": "bad"})
    assert bad["verification"]["status"] == "invalid", field
    assert "does not match" in bad["verification"]["reason"]


async def test_policy_keeps_unverified_agents_out_of_routing(
    aiohttp_client: Any, sqlite_url: str, key: Any
) -> None:
    settings = make_settings(sqlite_url, require_signed_cards=True)
    client = await aiohttp_client(create_app(settings))
    await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    signed = await _register(client, {"card": sign_card(card_v1("https://s.example"), key)})
    unsigned = await _register(client, {"card": card_v03("https://u.example")})
    assert (signed["routable"], unsigned["routable"]) == (True, False)
    registry = client.app[REGISTRY]
    assert [a.id for a in registry.routable_agents()] == [signed["id"]]
    listing = await (await client.get("/api/v1/agents")).json()  # both stay in the catalog
    assert {a["id"] for a in listing["agents"]} == {signed["id"], unsigned["id"]}
    verified = await (await client.get("/api/v1/agents?verified=true")).json()
    assert [a["id"] for a in verified["agents"]] == [signed["id"]]
    not_verified = await (await client.get("/api/v1/agents?verification=unsigned")).json()
    assert [a["id"] for a in not_verified["agents"]] == [unsigned["id"]]
    stats = await (await client.get("/api/v1/stats")).json()
    assert stats["by_verification"] == {"unsigned": 1, "verified": 1}


async def test_policy_off_routes_everything(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    agent = await _register(client, {"card": card_v03("https://u.example")})
    assert agent["routable"] is True


async def test_refresh_reverifies_a_changed_card(
    aiohttp_client: Any, sqlite_url: str, card_server: CardServer, key: Any
) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    path = "/.well-known/agent-card.json"
    card_server.set(path, sign_card(card_v1(card_server.url()), key))
    agent = await _register(client, {"url": card_server.url()})
    assert agent["verification"]["status"] == "verified"
    tampered = sign_card(card_v1(card_server.url()), key)
    tampered["description"] = "changed after signing"
    card_server.set(path, tampered)
    resp = await client.post(f"/api/v1/agents/{agent['id']}/refresh", headers=AUTH)
    result = await resp.json()
    assert result["changed"] is True
    assert result["agent"]["verification"]["status"] == "invalid"


async def test_seed_keys_verify_seed_agents(
    aiohttp_client: Any, sqlite_url: str, tmp_path: Path, key: Any
) -> None:
    (tmp_path / "card.json").write_text(json.dumps(sign_card(card_v1("https://w.example"), key)))
    jwk = ", ".join(f'{k} = "{v}"' for k, v in _public(key).items())
    (tmp_path / "seeds.toml").write_text(
        f'[[agents]]\ncard_file = "card.json"\nid = "wx"\n\n[[keys]]\njwk = {{ {jwk} }}\n'
    )
    settings = make_settings(sqlite_url, seeds=[str(tmp_path / "seeds.toml")])
    client = await aiohttp_client(create_app(settings))
    agent = await (await client.get("/api/v1/agents/wx")).json()
    assert agent["verification"]["status"] == "verified"
    assert agent["verification"]["key_source"].startswith("trust-store:")


class _GatedKeys:
    """A key resolver over a mutable key set that can hold lookups until released."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.jwks = jwks
        self.looking = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()

    async def keys_for(self, kid: str, jku: str | None) -> Any:
        self.looking.set()
        await self.release.wait()
        return await StaticKeys(self.jwks).keys_for(kid, jku)


async def test_a_key_removed_while_a_card_is_being_checked_still_counts(
    sqlite_url: str, key: Any
) -> None:
    """Removing a key during a registration must not leave the new agent verified."""
    settings = make_settings(sqlite_url)
    keys = _GatedKeys({"keys": [_public(key)]})
    registry = Registry(Store(sqlite_url), Crawler(settings), keys=keys)
    await registry.load()
    try:
        keys.release.clear()
        pushing = asyncio.ensure_future(
            registry.register_card(sign_card(card_v1("https://w.example"), key))
        )
        await keys.looking.wait()  # the registration is checking the signature now
        keys.jwks = {"keys": []}  # the operator removes the key ...
        keys.release.set()
        await registry.reverify_all()  # ... which re-verifies every agent known so far
        record = await pushing
        assert record.verification.status == "untrusted-key"
        stored = await registry.store.get(record.id)
        assert stored is not None and stored.verification.status == "untrusted-key"
    finally:
        await registry.store.close()


async def test_refresh_checks_an_unchanged_card_again(
    aiohttp_client: Any, sqlite_url: str, card_server: CardServer, key: Any
) -> None:
    """Keys expire and are withdrawn: a refresh re-verifies even an unchanged (304) card."""
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    resp = await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    key_id = (await resp.json())["id"]
    signed = sign_card(card_v1(card_server.url()), key)
    card_server.set("/.well-known/agent-card.json", signed, ETag='"1"')
    agent = await _register(client, {"url": card_server.url()})
    assert agent["verification"]["status"] == "verified"
    # withdrawn by another route than the API (e.g. another replica, before its sync ran)
    await client.app[TRUST].remove(key_id)
    resp = await client.post(f"/api/v1/agents/{agent['id']}/refresh", headers=AUTH)
    result = await resp.json()
    fetches = [r for r in card_server.requests if r.path == "/.well-known/agent-card.json"]
    assert fetches[-1].headers.get("If-None-Match") == '"1"'
    assert result["changed"] is False  # 304: the same card ...
    assert result["agent"]["verification"]["status"] == "untrusted-key"  # ... checked again


async def test_concurrent_registrations_land_beside_a_bad_card_and_a_duplicate(
    aiohttp_client: Any, db_url: str, key: Any
) -> None:
    """Registrations that arrive together are written together; a card that fails
    verification still lands (as ``invalid``), a second agent with a taken id is refused
    alone, and every agent keeps its revision and its audit entry."""
    client = await aiohttp_client(create_app(make_settings(db_url)))
    await client.post("/api/v1/keys", json={"jwk": _public(key)}, headers=AUTH)
    bodies = [
        {"card": sign_card(card_v1(f"https://{n}.example", name=f"Agent {n}"), key), "id": f"a{n}"}
        for n in range(6)
    ]
    bodies[2]["card"]["name"] = "Tampered"  # its signature no longer matches
    twin = sign_card(card_v1("https://other.example"), key)
    bodies.append({"card": twin, "id": "a4"})  # a4 twice: whichever comes second is refused
    store = client.app[REGISTRY].store
    before = store.insert_batches
    responses = await asyncio.gather(
        *(client.post("/api/v1/agents", json=body, headers=AUTH) for body in bodies)
    )
    answers = [(r.status, await r.json()) for r in responses]
    assert store.insert_batches - before < len(bodies)  # some shared a transaction
    created = {a["id"]: a for status, a in answers if status == 201}
    refused = [a for status, a in answers if status != 201]
    assert sorted(created) == [f"a{n}" for n in range(6)]
    assert [(a["error"]["code"], a["error"]["details"]) for a in refused] == [
        ("duplicate_agent", {"existing_id": "a4"})
    ]
    statuses = {agent_id: a["verification"]["status"] for agent_id, a in created.items()}
    assert statuses == {f"a{n}": "invalid" if n == 2 else "verified" for n in range(6)}
    listing = await (await client.get("/api/v1/agents")).json()
    assert [a["id"] for a in listing["agents"]] == [f"a{n}" for n in range(6)]
    for agent_id in created:
        revisions = await (await client.get(f"/api/v1/agents/{agent_id}/revisions")).json()
        assert len(revisions["revisions"]) == 1, agent_id
    audit = await (
        await client.get("/api/v1/audit?action=POST /api/v1/agents", headers=AUTH)
    ).json()
    entries = audit["entries"]
    assert sorted(e["status"] for e in entries) == [201] * 6 + [409]
    assert [e["id"] for e in entries] == sorted((e["id"] for e in entries), reverse=True)
