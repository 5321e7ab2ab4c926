"""The outbound credentials routes: set, show (never the secret), remove; 404s, validation,
auth, and a server without a secret key."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from registry.access.secrets import SecretError, generate_key
from registry.api import REGISTRY, access
from registry.apimodels import CredentialView
from registry.credentials_api import CREDENTIALS
from registry.openapi import openapi_document
from router.app import create_app
from tests.support.helpers import AUTH, card_v1, make_settings

SECRET = "sk-live-0123456789abcdef"
PATH = "/api/v1/agents/{}/credentials"


async def start(aiohttp_client: Any, db_url: str, **settings: Any) -> TestClient:
    client = await aiohttp_client(create_app(make_settings(db_url, **settings)))
    card = card_v1("https://weather.example.com")
    resp = await client.post("/api/v1/agents", json={"card": card, "id": "weather"}, headers=AUTH)
    assert resp.status == 201, await resp.text()
    return client


@pytest.fixture
async def api(aiohttp_client: Any, db_url: str) -> TestClient:
    """The app with a secret key, on each test database, and the agent ``weather``."""
    return await start(aiohttp_client, db_url, secret_key=generate_key())


async def answer(resp: Any, status: int) -> Any:
    body = await resp.json() if resp.status != 204 else None
    assert resp.status == status, body
    return body


async def test_put_get_delete_never_show_the_secret(
    api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = {"kind": "header", "header": "X-API-Key", "value": SECRET}
    resp = await api.put(PATH.format("weather"), json=body, headers=AUTH)
    assert SECRET not in await resp.text()
    view = await answer(resp, 200)
    CredentialView.model_validate(view)  # the document's schema
    assert view["kind"] == "header" and view["header"] == "X-API-Key" and view["scheme"] == ""
    assert view["has_secret"] is True and view["forward_client_auth"] is False
    assert view["updated_by"] == "admin-token" and view["problem"] is None

    resp = await api.get(PATH.format("weather"), headers=AUTH)
    assert SECRET not in await resp.text()
    assert await answer(resp, 200) == view

    oauth2 = {
        "kind": "oauth2",
        "token_url": "https://login.example.com/token",
        "client_id": "switchboard",
        "client_secret": SECRET,
        "scopes": ["a2a"],
        "forward_client_auth": True,
    }
    resp = await api.put(PATH.format("weather"), json=oauth2, headers=AUTH)
    assert SECRET not in await resp.text()
    view = await answer(resp, 200)
    assert view["kind"] == "oauth2" and view["client_id"] == "switchboard"
    assert view["scopes"] == ["a2a"] and view["forward_client_auth"] is True
    assert view["header"] is None and view["has_secret"] is True
    CredentialView.model_validate(view)

    await answer(await api.delete(PATH.format("weather"), headers=AUTH), 204)
    gone = await answer(await api.get(PATH.format("weather"), headers=AUTH), 404)
    assert (
        gone["error"]["code"] == "not_found"
        and "no outbound credential" in gone["error"]["message"]
    )
    await answer(await api.delete(PATH.format("weather"), headers=AUTH), 404)
    assert SECRET not in caplog.text
    assert "outbound credential of agent weather set (header) by admin-token" in caplog.text


async def test_unknown_agent(api: TestClient) -> None:
    body = {"kind": "header", "value": SECRET}
    for resp in (
        await api.put(PATH.format("nobody"), json=body, headers=AUTH),
        await api.get(PATH.format("nobody"), headers=AUTH),
        await api.delete(PATH.format("nobody"), headers=AUTH),
    ):
        error = (await answer(resp, 404))["error"]
        assert error["code"] == "not_found" and "nobody" in error["message"]


async def test_removing_the_agent_removes_its_credential(api: TestClient) -> None:
    body = {"kind": "header", "value": SECRET}
    await answer(await api.put(PATH.format("weather"), json=body, headers=AUTH), 200)
    await answer(await api.delete("/api/v1/agents/weather", headers=AUTH), 204)
    card = {"card": card_v1("https://elsewhere.example.com"), "id": "weather"}
    await answer(await api.post("/api/v1/agents", json=card, headers=AUTH), 201)
    await answer(await api.get(PATH.format("weather"), headers=AUTH), 404)
    # this process may still hold the old one in memory: it does not count for the new agent
    since = api.app[REGISTRY].get("weather").created_at
    assert api.app[CREDENTIALS].get("weather", agent_created_at=since) is None


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"kind": "header", "value": f"{SECRET}\nX-Evil: 1"}, "invalid_credential", "value"),
        (
            {"kind": "header", "header": "Bad Header", "value": SECRET},
            "invalid_credential",
            "header",
        ),
        (
            {
                "kind": "oauth2",
                "token_url": f"https://id:{SECRET}@login.example.com/token",
                "client_id": "id",
                "client_secret": SECRET,
            },
            "invalid_credential",
            "token_url",
        ),
        ({"kind": "header"}, "invalid_credential", "value"),
        ({"value": SECRET}, "invalid_credential", "kind"),
        (["not", "an", "object"], "invalid_body", None),
    ],
)
async def test_validation(api: TestClient, body: Any, code: str, field: str | None) -> None:
    resp = await api.put(PATH.format("weather"), json=body, headers=AUTH)
    assert SECRET not in await resp.text()
    error = (await answer(resp, 400))["error"]
    assert error["code"] == code
    if field is not None:
        assert error["details"]["field"] == field
    await answer(await api.get(PATH.format("weather"), headers=AUTH), 404)  # nothing stored


async def test_not_json_and_auth(api: TestClient) -> None:
    resp = await api.put(PATH.format("weather"), data="kind=header", headers=AUTH)
    assert (await answer(resp, 415))["error"]["code"] == "unsupported_media_type"
    resp = await api.put(PATH.format("weather"), json={"kind": "header", "value": SECRET})
    assert (await answer(resp, 401))["error"]["code"] == "unauthorized"
    resp = await api.delete(PATH.format("weather"))
    assert resp.status == 401


async def test_without_a_secret_key_storing_a_secret_is_refused(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    client = await start(aiohttp_client, sqlite_url)
    resp = await client.put(
        PATH.format("weather"), json={"kind": "header", "value": SECRET}, headers=AUTH
    )
    error = (await answer(resp, 409))["error"]
    assert error["code"] == "secret_key_missing" and "SWITCHBOARD_SECRET_KEY" in error["message"]
    resp = await client.put(
        PATH.format("weather"), json={"forward_client_auth": True}, headers=AUTH
    )
    view = await answer(resp, 200)
    assert view["kind"] == "forward" and view["has_secret"] is False


def test_the_routes_are_documented(sqlite_url: str) -> None:
    paths = openapi_document(create_app(make_settings(sqlite_url)), access)["paths"]
    operations = paths["/api/v1/agents/{agent_id}/credentials"]
    assert {"get", "put", "delete"} <= set(operations)
    assert operations["put"]["requestBody"]["content"]["application/json"]["schema"][
        "$ref"
    ].endswith("/NewCredential")


async def test_a_bad_secret_key_stops_the_start_with_a_clear_error(
    aiohttp_client: Any, sqlite_url: str
) -> None:
    app = create_app(make_settings(sqlite_url, secret_key="not-a-fernet-key"))
    with pytest.raises(SecretError) as caught:
        await aiohttp_client(app)
    assert (
        "SWITCHBOARD_SECRET_KEY" in caught.value.message
        and "not a Fernet key" in caught.value.message
    )
    assert "not-a-fernet-key" not in caught.value.message
