"""The router's signing key: loaded or created once, shared by replicas, published as JWKS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.errors import RegistryError
from registry.signatures import StaticKeys, generate_key, verify_card
from router.app import SIGNER, create_app
from router.signing import read_key_file
from tests.support.helpers import card_v1, make_settings


async def test_replicas_share_one_generated_key(aiohttp_client: Any, db_url: str) -> None:
    a = await aiohttp_client(create_app(make_settings(db_url)))
    b = await aiohttp_client(create_app(make_settings(db_url)))
    jwks_a = await (await a.get("/.well-known/jwks.json")).json()
    resp = await b.get("/.well-known/jwks.json")
    assert resp.content_type == "application/jwk-set+json"
    assert await resp.json() == jwks_a
    (key,) = jwks_a["keys"]
    assert key["kty"] == "EC" and "d" not in key  # public half only


async def test_resigned_card_verifies_against_the_published_jwks(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url)))
    jwks = await (await client.get("/.well-known/jwks.json")).json()
    card = card_v1("https://router.example/agents/weather")
    card["signatures"] = [{"protected": "e30", "signature": "AAAA"}]  # the agent's, now stale
    signed = client.app[SIGNER].resign(card)
    assert len(signed["signatures"]) == 1
    verification = await verify_card(signed, StaticKeys(jwks))
    assert verification.status == "verified"
    assert verification.kid == jwks["keys"][0]["kid"]


async def test_key_file(aiohttp_client: Any, sqlite_url: str, tmp_path: Path) -> None:
    key = generate_key("EdDSA", kid="router-1")
    path = tmp_path / "router.jwk"
    path.write_text(key.export())
    client = await aiohttp_client(create_app(make_settings(sqlite_url, signing_key_file=str(path))))
    jwks = await (await client.get("/.well-known/jwks.json")).json()
    assert [k["kid"] for k in jwks["keys"]] == ["router-1"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read signing key"),
        ("not json", "is not a JWK"),
        (json.dumps({"kty": "oct", "k": "AAAA"}), "must be a private"),
        ("public", "must be a private"),
    ],
)
def test_bad_key_files(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "key.jwk"
    if content == "public":
        content = generate_key("ES256").export_public()
    if content is not None:
        path.write_text(content)
    with pytest.raises(RegistryError, match=message):
        read_key_file(path)
