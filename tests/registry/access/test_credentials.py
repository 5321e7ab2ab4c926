"""Outbound credentials: the body an operator sends, and their storage (SQLite and PostgreSQL):
secrets stored encrypted, replicas in step, bound to the agent's registration."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import text

from registry.access.credentials import (
    AgentCredentials,
    CredentialError,
    CredentialSpec,
    Secret,
    parse_credential,
)
from registry.access.secrets import SecretBox, SecretError, generate_key
from registry.crawler import Crawler
from registry.errors import NotFound
from registry.service import Registry
from registry.store import Store
from tests.support.helpers import card_v1, make_settings

KEY = generate_key()
SECRET = "sk-live-0123456789abcdef"
HEADER = {"kind": "header", "header": "X-API-Key", "value": SECRET}
OAUTH2 = {
    "kind": "oauth2",
    "token_url": "https://login.example.com/oauth2/token",
    "client_id": "switchboard",
    "client_secret": SECRET,
    "scopes": ["agents.read", "agents.write", "agents.read"],
}


@pytest.fixture
async def registry(db_url: str) -> AsyncIterator[Registry]:
    """A registry on each test database with agents ``weather`` and ``invoices``."""
    store = Store(db_url)
    registry = Registry(store, Crawler(make_settings(db_url)))
    await registry.load()
    for agent_id in ("weather", "invoices"):
        await registry.register_card(card_v1(f"https://{agent_id}.example.com"), agent_id)
    try:
        yield registry
    finally:
        await store.close()


async def loaded(store: Store, box: SecretBox | None) -> AgentCredentials:
    credentials = AgentCredentials(store, box)
    await credentials.load()
    return credentials


async def stored_secret(store: Store, agent_id: str) -> str | None:
    async with store.engine.connect() as conn:
        result = await conn.execute(
            text("SELECT secret FROM agent_credentials WHERE agent_id = :id"), {"id": agent_id}
        )
        return result.scalar_one_or_none()


# --- the body --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"kind": "header", "value": SECRET},
            {"kind": "header", "header_name": "Authorization", "header_scheme": "Bearer"},
        ),
        (
            {"kind": "header", "scheme": "Basic", "value": "dXNlcjpwdw=="},
            {"header_name": "Authorization", "header_scheme": "Basic"},
        ),
        (HEADER, {"header_name": "X-API-Key", "header_scheme": ""}),
        (
            {**HEADER, "scheme": "Token", "forward_client_auth": False},
            {"header_scheme": "Token", "forward_client_auth": False},
        ),
        (
            OAUTH2,
            {
                "kind": "oauth2",
                "token_url": OAUTH2["token_url"],
                "client_id": "switchboard",
                "scopes": ("agents.read", "agents.write"),
                "audience": "",
            },
        ),
        (
            {**OAUTH2, "audience": "https://api.example.com"},
            {"audience": "https://api.example.com"},
        ),
        ({"forward_client_auth": True}, {"kind": "forward", "forward_client_auth": True}),
        ({"kind": "forward", "forward_client_auth": True}, {"kind": "forward", "secret": None}),
        ({**HEADER, "forward_client_auth": True}, {"kind": "header", "forward_client_auth": True}),
    ],
)
def test_parse_credential(body: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = parse_credential(body)
    for name, value in expected.items():
        assert getattr(spec, name) == value, name
    if spec.kind != "forward":
        assert spec.secret == Secret(body.get("value") or body.get("client_secret"))


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"value": SECRET}, "kind", "is required"),
        ({"kind": "basic", "value": SECRET}, "kind", "must be"),
        ({"kind": "header"}, "value", "is required"),
        ({"kind": "header", "value": ""}, "value", "is required"),
        ({"kind": "header", "value": 42}, "value", "is required"),
        ({"kind": "header", "value": f"{SECRET}\r\nX-Evil: 1"}, "value", "no CR, LF"),
        ({"kind": "header", "value": f" {SECRET}"}, "value", "spaces"),
        ({"kind": "header", "value": f"Bearer {SECRET}"}, "value", "give the token alone"),
        ({**HEADER, "header": "X-Key\r\nX-Evil"}, "header", "no CR, LF"),
        ({**HEADER, "header": "X Key"}, "header", "header name"),
        ({**HEADER, "header": "Host"}, "header", "set by the router"),
        ({**HEADER, "header": "A2A-Version"}, "header", "set by the router"),
        ({**HEADER, "scheme": "Bearer token"}, "scheme", "authentication scheme"),
        ({**HEADER, "forward_client_auth": "yes"}, "forward_client_auth", "true or false"),
        ({**OAUTH2, "token_url": "ftp://login.example.com/token"}, "token_url", "http or https"),
        ({**OAUTH2, "token_url": "/oauth2/token"}, "token_url", "http or https"),
        (
            {**OAUTH2, "token_url": f"https://switchboard:{SECRET}@login.example.com/token"},
            "token_url",
            "must not hold credentials",
        ),
        ({**OAUTH2, "token_url": "https://login.example.com/t#x"}, "token_url", "fragment"),
        ({**OAUTH2, "client_id": None}, "client_id", "is required"),
        ({k: v for k, v in OAUTH2.items() if k != "client_secret"}, "client_secret", "required"),
        ({**OAUTH2, "scopes": "agents.read"}, "scopes", "must be a list"),
        ({**OAUTH2, "scopes": ["agents read"]}, "scopes", "without spaces"),
        ({**OAUTH2, "scopes": [""]}, "scopes", "non-empty"),
        ({"kind": "forward"}, "forward_client_auth", "must be true"),
    ],
)
def test_parse_credential_refuses(body: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(CredentialError) as caught:
        parse_credential(body)
    err = caught.value
    assert (err.status, err.code) == (400, "invalid_credential")
    assert err.details["field"] == field and says in err.message
    assert SECRET not in err.message and SECRET not in str(err.details)


def test_parse_credential_unknown_fields_name_the_allowed_ones() -> None:
    with pytest.raises(CredentialError) as caught:
        parse_credential({**HEADER, "client_secret": SECRET})
    assert caught.value.details["unknown"] == ["client_secret"]
    assert "value" in caught.value.details["allowed"]
    with pytest.raises(CredentialError, match="JSON object"):
        parse_credential([HEADER])


def test_secrets_do_not_show_themselves() -> None:
    spec = parse_credential(HEADER)
    assert SECRET not in repr(spec) and SECRET not in str(spec.secret)
    assert spec.secret is not None and spec.secret.reveal() == SECRET


# --- storage ---------------------------------------------------------------------------------


async def test_put_get_stores_ciphertext_and_shows_no_secret(registry: Registry) -> None:
    box = SecretBox([KEY])
    credentials = await loaded(registry.store, box)
    credential = await credentials.put("weather", parse_credential(HEADER), by="admin-token")
    assert credential.header() == ("X-API-Key", SECRET)
    assert credentials.get("weather") == credential and credentials.get("invoices") is None
    view = credential.to_api()
    assert view["has_secret"] is True and view["header"] == "X-API-Key"
    assert view["updated_by"] == "admin-token" and view["problem"] is None
    for shown in (str(view), repr(credential), repr(credentials)):
        assert SECRET not in shown
    column = await stored_secret(registry.store, "weather")
    assert column is not None and SECRET not in column
    assert box.decrypt(column) == SECRET

    bearer = await credentials.put("invoices", parse_credential(OAUTH2), by="jwt:ops")
    assert bearer.scopes == ("agents.read", "agents.write")
    assert bearer.usable_secret() == SECRET
    assert SECRET not in (await stored_secret(registry.store, "invoices") or SECRET)
    assert [c.agent_id for c in credentials.all()] == ["invoices", "weather"]


async def test_other_replicas_follow_by_sync(registry: Registry) -> None:
    box = SecretBox([KEY])
    here, there = await loaded(registry.store, box), await loaded(registry.store, box)
    assert not await there.sync()
    await here.put("weather", parse_credential(HEADER), by="admin-token")
    assert there.get("weather") is None
    assert await there.sync() and not await there.sync()
    seen = there.get("weather")
    assert seen is not None and seen.header() == ("X-API-Key", SECRET)
    await here.put("weather", parse_credential({"kind": "header", "value": "v2"}), by="x")
    assert await there.sync() and there.get("weather").header() == ("Authorization", "Bearer v2")
    assert await here.delete("weather") and not await here.delete("weather")
    assert await there.sync() and there.get("weather") is None


async def test_without_a_key_secrets_cannot_be_stored(registry: Registry) -> None:
    credentials = await loaded(registry.store, None)
    with pytest.raises(SecretError) as caught:
        await credentials.put("weather", parse_credential(HEADER), by="admin-token")
    assert (caught.value.status, caught.value.code) == (409, "secret_key_missing")
    assert "SWITCHBOARD_SECRET_KEY" in caught.value.message
    assert await stored_secret(registry.store, "weather") is None
    forward = await credentials.put(
        "weather", parse_credential({"forward_client_auth": True}), by="admin-token"
    )
    assert forward.kind == "forward" and not forward.has_secret


async def test_unknown_agent(registry: Registry) -> None:
    credentials = await loaded(registry.store, SecretBox([KEY]))
    with pytest.raises(NotFound):
        await credentials.put("nobody", parse_credential(HEADER), by="admin-token")
    with pytest.raises(NotFound, match="no outbound credential"):
        credentials.require("weather")


async def test_a_wrong_or_missing_key_at_load_makes_the_credential_unusable(
    registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    await (await loaded(registry.store, SecretBox([KEY]))).put(
        "weather", parse_credential(HEADER), by="admin-token"
    )
    caplog.set_level(logging.WARNING)
    for box, says in ((SecretBox([generate_key()]), "another key"), (None, "no SWITCHBOARD")):
        credential = (await loaded(registry.store, box)).get("weather")
        assert credential is not None and credential.has_secret and credential.secret is None
        assert credential.problem is not None and says in credential.problem
        assert credential.to_api()["problem"] == credential.problem
        with pytest.raises(SecretError, match="SWITCHBOARD_SECRET_KEY"):
            credential.header()
    assert "cannot be used" in caplog.text and SECRET not in caplog.text


async def test_load_reencrypts_with_the_first_key(registry: Registry) -> None:
    old, new = generate_key(), generate_key()
    await (await loaded(registry.store, SecretBox([old]))).put(
        "weather", parse_credential(HEADER), by="admin-token"
    )
    before = await stored_secret(registry.store, "weather")
    rotated = await loaded(registry.store, SecretBox([new, old]))
    assert rotated.get("weather").header() == ("X-API-Key", SECRET)
    after = await stored_secret(registry.store, "weather")
    assert after is not None and after != before
    assert SecretBox([new]).decrypt(after) == SECRET
    assert await rotated.reencrypt() == 0  # nothing left under the old key
    only_new = await loaded(registry.store, SecretBox([new]))
    assert only_new.get("weather").header() == ("X-API-Key", SECRET)


async def test_removing_the_agent_removes_its_credential(registry: Registry) -> None:
    credentials = await loaded(registry.store, SecretBox([KEY]))
    await credentials.put("weather", parse_credential(HEADER), by="admin-token")
    first = registry.get("weather").created_at
    assert credentials.get("weather", agent_created_at=first) is not None
    await registry.remove("weather")
    assert await stored_secret(registry.store, "weather") is None  # the row went with the agent
    await registry.register_card(card_v1("https://elsewhere.example.com"), "weather")
    again = registry.get("weather").created_at
    assert again != first
    # this process still holds the old credential: it does not count for the new registration
    assert credentials.get("weather", agent_created_at=again) is None
    assert (await loaded(registry.store, SecretBox([KEY]))).get("weather") is None


async def test_spec_without_secret_for_header_kind_is_not_stored_as_one(registry: Registry) -> None:
    credentials = await loaded(registry.store, SecretBox([KEY]))
    spec = CredentialSpec("forward", forward_client_auth=True)
    stored = await credentials.put("weather", spec, by="admin-token")
    assert stored.to_api()["has_secret"] is False
    assert await stored_secret(registry.store, "weather") is None
