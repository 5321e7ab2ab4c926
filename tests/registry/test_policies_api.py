"""The ``/api/v1/policies`` routes and the ``tenant`` of a registration, through the real app
(SQLite and PostgreSQL); every answer is checked against the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jsonschema import Draft202012Validator

from registry.access.principal import Principal
from registry.api import POLICIES, access
from registry.openapi import openapi_document
from router.app import create_app
from tests.support.helpers import AUTH, card_v1, make_settings

CAROL = Principal("carol", "globex", method="jwt")
ALICE = Principal("alice", "acme", frozenset({"ops"}), method="jwt")


@pytest.fixture
async def switchboard(aiohttp_client: Any, db_url: str) -> TestClient:
    """The app with client authentication on (policies enforced), on each test database."""
    return await aiohttp_client(create_app(make_settings(db_url, client_auth="api-key")))


async def _answer(client: TestClient, resp: Any, status: int, template: str) -> Any:
    """The JSON of ``resp`` (``status``), checked against the document's answer schema."""
    body = await resp.json() if resp.status != 204 else None
    assert resp.status == status, body
    doc = openapi_document(client.app, access)
    answer = doc["paths"][template][resp.method.lower()]["responses"][str(status)]
    if body is not None:
        schema = answer["content"]["application/json"]["schema"]
        validator = Draft202012Validator({**schema, "components": doc["components"]})
        assert [e.message for e in validator.iter_errors(body)] == []
    return body


async def _error(client: TestClient, resp: Any, status: int, code: str, template: str) -> Any:
    error = (await _answer(client, resp, status, template))["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


async def _register(client: TestClient, agent_id: str = "wx", **extra: Any) -> dict[str, Any]:
    card = card_v1(f"https://{agent_id}.example")
    body = {"card": card, "id": agent_id, **extra}
    resp = await client.post("/api/v1/agents", json=body, headers=AUTH)
    assert resp.status == 201, await resp.text()
    return await resp.json()


ONE = "/api/v1/policies/{agent_id}"
ALL = "/api/v1/policies"


async def test_set_show_list_and_delete_a_policy(switchboard: TestClient) -> None:
    await _register(switchboard)
    # no policy yet: the default one (shared, no rules)
    resp = await switchboard.get("/api/v1/policies/wx", headers=AUTH)
    assert await _answer(switchboard, resp, 200, ONE) == {
        "agent_id": "wx",
        "tenant": None,
        "rules": [],
        "updated_at": None,
        "updated_by": None,
    }
    assert await _answer(switchboard, await switchboard.get(ALL, headers=AUTH), 200, ALL) == {
        "policies": []
    }

    body = {"tenant": "acme", "rules": [{"groups": ["ops"], "skills": ["forecast"]}, {}]}
    resp = await switchboard.put("/api/v1/policies/wx", json=body, headers=AUTH)
    policy = await _answer(switchboard, resp, 200, ONE)
    assert policy["tenant"] == "acme"
    assert policy["rules"] == [
        {"tenants": [], "groups": ["ops"], "subjects": [], "skills": ["forecast"]},
        {"tenants": [], "groups": [], "subjects": [], "skills": []},
    ]
    assert policy["updated_by"] == "admin-token" and policy["updated_at"]
    assert await _answer(
        switchboard, await switchboard.get("/api/v1/policies/wx", headers=AUTH), 200, ONE
    ) == (policy)
    listing = await _answer(switchboard, await switchboard.get(ALL, headers=AUTH), 200, ALL)
    assert listing == {"policies": [policy]}
    policies = switchboard.app[POLICIES]
    assert not policies.visible(CAROL, "wx")
    assert policies.usable_skills(ALICE, "wx", ["forecast", "other"]) == {"forecast", "other"}

    # a member left out is null / no rules: the whole policy is replaced
    resp = await switchboard.put("/api/v1/policies/wx", json={}, headers=AUTH)
    assert (await _answer(switchboard, resp, 200, ONE))["tenant"] is None

    resp = await switchboard.delete("/api/v1/policies/wx", headers=AUTH)
    await _answer(switchboard, resp, 204, ONE)
    resp = await switchboard.delete("/api/v1/policies/wx", headers=AUTH)
    await _error(switchboard, resp, 404, "not_found", ONE)
    assert policies.get("wx") is None


async def test_unknown_agents_and_bad_bodies_are_refused(switchboard: TestClient) -> None:
    resp = await switchboard.put("/api/v1/policies/ghost", json={"tenant": "a"}, headers=AUTH)
    error = await _error(switchboard, resp, 404, "not_found", ONE)
    assert "ghost" in error["message"]
    await _error(
        switchboard,
        await switchboard.get("/api/v1/policies/ghost", headers=AUTH),
        404,
        "not_found",
        ONE,
    )
    await _register(switchboard)
    for body, code in (
        ([], "invalid_body"),
        ({"tenant": "a", "owner": "b"}, "invalid_body"),
        ({"tenant": ""}, "invalid_policy"),
        ({"rules": {"groups": ["a"]}}, "invalid_policy"),
        ({"rules": [{"groups": ["a"], "roles": ["x"]}]}, "invalid_policy"),
        ({"rules": [{"skills": [7]}]}, "invalid_policy"),
    ):
        resp = await switchboard.put("/api/v1/policies/wx", json=body, headers=AUTH)
        error = await _error(switchboard, resp, 400, code, ONE)
        if code == "invalid_policy":
            assert error["details"][0]["field"].startswith(("tenant", "rules"))
    resp = await switchboard.put("/api/v1/policies/wx", data="tenant=a", headers=AUTH)
    await _error(switchboard, resp, 415, "unsupported_media_type", ONE)
    assert switchboard.app[POLICIES].all() == []


async def test_writes_need_the_admin_token(switchboard: TestClient) -> None:
    await _register(switchboard)
    resp = await switchboard.put("/api/v1/policies/wx", json={"tenant": "acme"})
    await _error(switchboard, resp, 401, "unauthorized", ONE)
    resp = await switchboard.delete("/api/v1/policies/wx")
    await _error(switchboard, resp, 401, "unauthorized", ONE)
    assert switchboard.app[POLICIES].all() == []


async def test_registration_names_a_tenant(switchboard: TestClient) -> None:
    agent = await _register(switchboard, tenant="acme")
    assert agent["id"] == "wx"
    policy = await _answer(
        switchboard, await switchboard.get("/api/v1/policies/wx", headers=AUTH), 200, ONE
    )
    assert (policy["tenant"], policy["rules"]) == ("acme", [])
    policies = switchboard.app[POLICIES]
    assert policies.visible(ALICE, "wx") and not policies.visible(CAROL, "wx")

    # a policy outlives its agent; registering the id again with a tenant keeps its rules
    body = {"tenant": "acme", "rules": [{"groups": ["ops"]}]}
    assert (await switchboard.put("/api/v1/policies/wx", json=body, headers=AUTH)).status == 200
    assert (await switchboard.delete("/api/v1/agents/wx", headers=AUTH)).status == 204
    assert policies.get("wx") is not None
    await _register(switchboard, tenant="globex")
    policy = await _answer(
        switchboard, await switchboard.get("/api/v1/policies/wx", headers=AUTH), 200, ONE
    )
    assert policy["tenant"] == "globex" and policy["rules"][0]["groups"] == ["ops"]

    # without a tenant (or null) nothing is written
    await _register(switchboard, "shared", tenant=None)
    assert policies.get("shared") is None


async def test_a_bad_tenant_registers_nothing(switchboard: TestClient) -> None:
    for tenant in ("", 5, " acme"):
        body = {"card": card_v1("https://wx.example"), "id": "wx", "tenant": tenant}
        resp = await switchboard.post("/api/v1/agents", json=body, headers=AUTH)
        error = await _error(switchboard, resp, 400, "invalid_policy", "/api/v1/agents")
        assert "tenant" in error["message"]
    assert (await switchboard.get("/api/v1/agents/wx", headers=AUTH)).status == 404


async def test_replicas_see_each_others_policies(aiohttp_client: Any, db_url: str) -> None:
    a = await aiohttp_client(create_app(make_settings(db_url, client_auth="api-key")))
    b = await aiohttp_client(create_app(make_settings(db_url, client_auth="api-key")))
    await _register(a)
    resp = await b.put("/api/v1/policies/wx", json={"tenant": "acme"}, headers=AUTH)
    assert resp.status == 200, await resp.text()  # b's catalog is synced before the check
    assert a.app[POLICIES].visible(CAROL, "wx")  # a has not synced yet
    assert await a.app[POLICIES].sync() is True  # what a's sync loop does every interval
    assert not a.app[POLICIES].visible(CAROL, "wx")
    assert await a.app[POLICIES].sync() is False
    listing = await (await a.get(ALL, headers=AUTH)).json()
    assert [p["tenant"] for p in listing["policies"]] == ["acme"]
