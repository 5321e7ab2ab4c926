"""The generated OpenAPI document: a valid OpenAPI 3.1 document of every route, whose schemas
the API's real answers (and the bodies it accepts) satisfy."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from jsonschema import Draft202012Validator
from jwcrypto.jwk import JWK
from openapi_spec_validator import validate

from registry.api import access
from registry.openapi import documented, openapi_document
from registry.queryparams import AgentsQuery
from tests.support.helpers import AUTH, CardServer


def _document(client: TestClient) -> dict[str, Any]:
    return openapi_document(client.app, access)


def _check(doc: dict[str, Any], schema: dict[str, Any], value: Any) -> None:
    """``value`` satisfies ``schema`` (refs into the document's components)."""
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
    assert errors == [], errors


class Api:
    """Calls the API and checks each body sent and answer received against the document."""

    def __init__(self, client: TestClient) -> None:
        self.client, self.doc = client, _document(client)

    async def call(self, method: str, template: str, status: int, **kw: Any) -> Any:
        operation = self.doc["paths"][template][method.lower()]
        if "json" in kw:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            _check(self.doc, schema, kw["json"])
        path = template.format(**kw.pop("path", {}))
        resp = await self.client.request(method, path, headers=AUTH, **kw)
        body = await resp.json() if resp.status != 204 else None
        assert resp.status == status, body
        answer = operation["responses"][str(status)]
        if body is not None:
            _check(self.doc, answer["content"]["application/json"]["schema"], body)
        return body


def test_the_document_is_valid_openapi(switchboard: TestClient) -> None:
    doc = _document(switchboard)
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    assert _document(switchboard) is doc  # built once per app


def test_query_parameters_come_from_the_models(switchboard: TestClient) -> None:
    doc = _document(switchboard)
    for path in ("/api/v1/agents", "/api/v1/skills"):
        params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"]}
        assert set(params) == set(AgentsQuery.model_fields)
        assert params["limit"]["schema"] == {"type": "integer", "minimum": 1}
        assert params["streaming"]["schema"] == {"type": "boolean"}
        assert params["tag"]["schema"]["type"] == "array"
        assert params["health"]["schema"]["enum"] == [
            "healthy",
            "degraded",
            "unreachable",
            "unknown",
        ]
        assert params["match"]["schema"] == {"enum": ["semantic", "lexical"], "type": "string"}
        assert not any(p["required"] for p in params.values())


def test_security_follows_the_auth_rule(switchboard: TestClient) -> None:
    paths = _document(switchboard)["paths"]
    assert paths["/api/v1/openapi.json"]["get"]["security"] == []
    assert paths["/api/v1/docs"]["get"]["security"] == []
    assert paths["/api/v1/agents"]["get"]["security"] == [{}, {"bearer": []}]
    assert paths["/api/v1/route/explain"]["post"]["security"] == [{}, {"bearer": []}]
    assert paths["/api/v1/agents"]["post"]["security"] == [{"bearer": []}]
    assert {"401", "403", "400", "409", "422"} <= set(paths["/api/v1/agents"]["post"]["responses"])
    agent = paths["/api/v1/agents/{agent_id}"]
    assert [p["name"] for p in agent["delete"]["parameters"]] == ["agent_id"]
    assert agent["delete"]["responses"]["204"] == {"description": "No content"}


def test_an_undocumented_route_is_an_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_get("/api/v1/thing", handler)
    with pytest.raises(LookupError, match="GET /api/v1/thing has no @documented operation"):
        openapi_document(app, access)
    documented("A thing", "things")(handler)
    assert openapi_document(app, access)["paths"]["/api/v1/thing"]["get"]["summary"] == "A thing"


async def test_answers_match_the_document(
    switchboard: TestClient, registered: dict[str, str], card_server: CardServer
) -> None:
    api = Api(switchboard)
    weather = {"agent_id": registered["weather"]}
    await api.call("GET", "/api/v1/agents", 200)
    found = await api.call("GET", "/api/v1/agents", 200, params={"q": "weather", "tag": "forecast"})
    assert found["agents"][0]["matched_skills"] == ["forecast"]
    await api.call("GET", "/api/v1/agents/{agent_id}", 200, path=weather)
    await api.call("GET", "/api/v1/agents/{agent_id}/revisions", 200, path=weather)
    await api.call("POST", "/api/v1/agents/{agent_id}/refresh", 200, path=weather)
    await api.call(
        "PATCH", "/api/v1/agents/{agent_id}", 200, path=weather, json={"refresh_interval": 60}
    )
    await api.call("POST", "/api/v1/refresh", 200, json={"all": True})
    await api.call("GET", "/api/v1/skills", 200, params={"q": "weather"})
    await api.call("GET", "/api/v1/stats", 200)
    jwk = JWK.generate(kty="EC", crv="P-256", kid="k1").export_public(as_dict=True)
    await api.call("POST", "/api/v1/keys", 201, json={"jwk": jwk})
    await api.call("GET", "/api/v1/keys", 200)
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "rain in Paris?"}]}
    await api.call("POST", "/api/v1/route/explain", 200, json={"message": message})
    await api.call(
        "POST",
        "/api/v1/route/feedback",
        201,
        json={"text": "umbrella tomorrow?", "agent": weather["agent_id"]},
    )
    skill = {**weather, "skill_id": "forecast"}
    await api.call("GET", "/api/v1/skills/{agent_id}/{skill_id}/examples", 200, path=skill)
    await api.call("GET", "/api/v1/agents/{agent_id}", 404, path={"agent_id": "nobody"})
    await api.call("GET", "/api/v1/skills", 400, params={"limit": "0"})
    await api.call("DELETE", "/api/v1/agents/{agent_id}", 204, path=weather)
