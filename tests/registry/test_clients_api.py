"""The clients routes (``/api/v1/clients``) and the audit log (``/api/v1/audit``) through the
real app: answers as the OpenAPI document says, admin-only reads, validation errors in the
API's shape, audit entries for writes and not for reads; SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from jsonschema import Draft202012Validator

from registry.access.errors import AuthError
from registry.api import access
from registry.clients_api import CLIENTS
from registry.openapi import openapi_document
from router.app import create_app
from tests.support.helpers import AUTH, make_settings

CLIENTS_PATH = "/api/v1/clients"


class Api:
    """Calls the API with the admin token; checks bodies and answers against the document."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.doc = openapi_document(client.app, access)

    def _check(self, schema: dict[str, Any], value: Any) -> None:
        validator = Draft202012Validator({**schema, "components": self.doc["components"]})
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
        assert errors == [], errors

    async def call(self, method: str, template: str, status: int, **kw: Any) -> Any:
        operation = self.doc["paths"][template][method.lower()]
        if "json" in kw and status < 400:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            self._check(schema, kw["json"])
        path = template.format(**kw.pop("path", {}))
        headers = kw.pop("headers", AUTH)
        resp = await self.client.request(method, path, headers=headers, **kw)
        body = await resp.json() if resp.status != 204 else None
        assert resp.status == status, body
        answer = operation["responses"][str(status)]
        if body is not None:
            self._check(answer["content"]["application/json"]["schema"], body)
        return body

    async def error(self, method: str, template: str, status: int, code: str, **kw: Any) -> Any:
        body = await self.call(method, template, status, **kw)
        assert body["error"]["code"] == code, body
        assert body["error"]["message"]
        return body["error"]


@pytest.fixture
def api(switchboard: TestClient) -> Api:
    return Api(switchboard)


def _no_secrets(answer: Any, *keys: str) -> None:
    text = str(answer)
    for key in keys:
        assert key not in text and key.split("_", 2)[2] not in text  # the secret may hold "_"
        assert hashlib.sha256(key.encode()).hexdigest() not in text


# --- keys ------------------------------------------------------------------------------------


async def test_create_list_show(api: Api) -> None:
    body = {
        "subject": "alice",
        "tenant": "acme",
        "groups": ["finance"],
        "roles": ["reader"],
        "description": "the finance bot",
        "expires_at": "2099-01-01T00:00:00Z",
    }
    resp = await api.client.post(CLIENTS_PATH, json=body, headers=AUTH)
    assert resp.status == 201
    assert resp.headers["Cache-Control"] == "no-store"
    created = await resp.json()
    key = created["key"]
    assert resp.headers["Location"] == f"{CLIENTS_PATH}/{created['id']}"
    assert key.startswith(created["prefix"] + "_") and created["prefix"] == f"sbk_{created['id']}"
    assert created["status"] == "active" and created["expires_at"] == "2099-01-01T00:00:00Z"
    assert (created["subject"], created["tenant"], created["groups"], created["roles"]) == (
        "alice",
        "acme",
        ["finance"],
        ["reader"],
    )
    principal = await api.client.app[CLIENTS].authenticate(key)
    assert (principal.subject, principal.key_id) == ("alice", created["id"])

    second = await api.call("POST", CLIENTS_PATH, 201, json={"subject": "bob"})
    assert (second["tenant"], second["groups"], second["roles"], second["expires_at"]) == (
        None,
        [],
        [],
        None,
    )
    listing = await api.call("GET", CLIENTS_PATH, 200)
    assert {c["id"] for c in listing["clients"]} == {created["id"], second["id"]}
    assert all("key" not in c for c in listing["clients"])
    _no_secrets(listing, key, second["key"])
    shown = await api.call(
        "GET", f"{CLIENTS_PATH}/{{client_id}}", 200, path={"client_id": created["id"]}
    )
    assert shown == {k: v for k, v in created.items() if k != "key"}
    _no_secrets(shown, key)

    page = await api.call("GET", CLIENTS_PATH, 200, params={"limit": "1"})
    assert len(page["clients"]) == 1 and page["next_cursor"]
    rest = await api.call(
        "GET", CLIENTS_PATH, 200, params={"limit": "1", "cursor": page["next_cursor"]}
    )
    assert {page["clients"][0]["id"], rest["clients"][0]["id"]} == {created["id"], second["id"]}
    assert rest["next_cursor"] is None
    only = await api.call("GET", CLIENTS_PATH, 200, params={"tenant": "acme"})
    assert [c["id"] for c in only["clients"]] == [created["id"]]
    only = await api.call("GET", CLIENTS_PATH, 200, params={"subject": "bob"})
    assert [c["id"] for c in only["clients"]] == [second["id"]]


async def test_revoke(api: Api) -> None:
    created = await api.call("POST", CLIENTS_PATH, 201, json={"subject": "alice"})
    client_id = {"client_id": created["id"]}
    keys = api.client.app[CLIENTS]
    await keys.authenticate(created["key"])
    await api.call("DELETE", f"{CLIENTS_PATH}/{{client_id}}", 204, path=client_id)
    with pytest.raises(AuthError, match="revoked"):
        await keys.authenticate(created["key"])
    shown = await api.call("GET", f"{CLIENTS_PATH}/{{client_id}}", 200, path=client_id)
    assert shown["status"] == "revoked" and shown["revoked_at"]
    await api.call("DELETE", f"{CLIENTS_PATH}/{{client_id}}", 204, path=client_id)  # idempotent
    for method in ("GET", "DELETE"):
        await api.error(
            method, f"{CLIENTS_PATH}/{{client_id}}", 404, "not_found", path={"client_id": "nobody"}
        )


async def test_rotate(api: Api) -> None:
    created = await api.call(
        "POST", CLIENTS_PATH, 201, json={"subject": "alice", "groups": ["g"], "roles": ["admin"]}
    )
    path = f"{CLIENTS_PATH}/{{client_id}}/rotate"
    resp = await api.client.post(f"{CLIENTS_PATH}/{created['id']}/rotate", headers=AUTH)
    assert resp.status == 201 and resp.headers["Cache-Control"] == "no-store"
    rotated = await resp.json()
    assert rotated["id"] != created["id"] and rotated["key"] != created["key"]
    assert (rotated["subject"], rotated["groups"], rotated["roles"]) == ("alice", ["g"], ["admin"])
    assert resp.headers["Location"] == f"{CLIENTS_PATH}/{rotated['id']}"
    keys = api.client.app[CLIENTS]
    with pytest.raises(AuthError, match="revoked"):
        await keys.authenticate(created["key"])
    old = await api.call(
        "GET", f"{CLIENTS_PATH}/{{client_id}}", 200, path={"client_id": created["id"]}
    )
    assert (old["status"], old["rotated_to"]) == ("revoked", rotated["id"])
    await api.error("POST", path, 409, "key_rotated", path={"client_id": created["id"]})

    again = await api.call(
        "POST", path, 201, path={"client_id": rotated["id"]}, json={"grace_seconds": 600}
    )
    assert (await keys.authenticate(rotated["key"])).key_id == rotated["id"]  # grace period
    assert (await keys.authenticate(again["key"])).key_id == again["id"]
    before = await api.call(
        "GET", f"{CLIENTS_PATH}/{{client_id}}", 200, path={"client_id": rotated["id"]}
    )
    assert before["status"] == "active" and before["rotated_to"] == again["id"]
    await api.error("POST", path, 404, "not_found", path={"client_id": "nobody"})


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ([], "invalid_body"),
        ({}, "invalid_body"),
        ({"subject": 3}, "invalid_body"),
        ({"subject": "a", "key": "sbk_mine"}, "invalid_body"),
        ({"subject": "a", "tenant": 1}, "invalid_body"),
        ({"subject": "a", "groups": "finance"}, "invalid_body"),
        ({"subject": "a", "roles": [1]}, "invalid_body"),
        ({"subject": "a", "expires_at": "tomorrow"}, "invalid_body"),
        ({"subject": "a", "expires_at": "2099-01-01T00:00:00"}, "invalid_body"),
        ({"subject": ""}, "invalid_client"),
        ({"subject": "a", "roles": ["root"]}, "invalid_client"),
        ({"subject": "a", "expires_at": "2001-01-01T00:00:00Z"}, "invalid_client"),
        ({"subject": "a", "description": "d" * 2000}, "invalid_client"),
    ],
)
async def test_bad_bodies(api: Api, body: Any, code: str) -> None:
    await api.error("POST", CLIENTS_PATH, 400, code, json=body)
    assert (await api.call("GET", CLIENTS_PATH, 200))["clients"] == []


async def test_a_key_for_a_built_in_principal_is_refused(api: Api) -> None:
    for name in ("admin-token", "read-token"):
        error = await api.error(
            "POST", CLIENTS_PATH, 422, "reserved_subject", json={"subject": name, "tenant": "t"}
        )
        assert f"'{name}' is the name of a built-in principal" in error["message"]
        assert error["details"][0]["field"] == "subject"
    assert (await api.call("GET", CLIENTS_PATH, 200))["clients"] == []
    await api.call("POST", CLIENTS_PATH, 201, json={"subject": "admin-tokens"})


async def test_bad_requests(api: Api) -> None:
    resp = await api.client.post(CLIENTS_PATH, data="subject=a", headers=AUTH)
    assert resp.status == 415
    created = await api.call("POST", CLIENTS_PATH, 201, json={"subject": "alice"})
    rotate = {"client_id": created["id"]}
    path = f"{CLIENTS_PATH}/{{client_id}}/rotate"
    for grace in (-1, 10**9, "60", True):
        await api.error(
            "POST",
            path,
            400,
            "invalid_body" if isinstance(grace, str | bool) else "invalid_client",
            path=rotate,
            json={"grace_seconds": grace},
        )
    await api.error("POST", path, 400, "invalid_body", path=rotate, json={"grace": 60})
    await api.error("GET", CLIENTS_PATH, 400, "unknown_parameter", params={"q": "x"})
    await api.error("GET", CLIENTS_PATH, 400, "invalid_parameter", params={"limit": "0"})
    await api.error("GET", CLIENTS_PATH, 400, "invalid_cursor", params={"cursor": "nope"})
    error = await api.error(
        "GET", CLIENTS_PATH, 400, "invalid_parameter", params=[("subject", "a"), ("subject", "b")]
    )
    assert error["details"] == {"parameter": "subject"}


# --- who may -----------------------------------------------------------------------------------


async def test_every_route_needs_the_admin_token(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url, read_token="reader")))
    created = await client.post(CLIENTS_PATH, json={"subject": "a"}, headers=AUTH)
    client_id = (await created.json())["id"]
    routes = [
        ("GET", CLIENTS_PATH),
        ("POST", CLIENTS_PATH),
        ("GET", f"{CLIENTS_PATH}/{client_id}"),
        ("DELETE", f"{CLIENTS_PATH}/{client_id}"),
        ("POST", f"{CLIENTS_PATH}/{client_id}/rotate"),
        ("GET", "/api/v1/audit"),
    ]
    for method, path in routes:
        for headers in ({}, {"Authorization": "Bearer x"}):
            resp = await client.request(method, path, headers=headers, json={"subject": "b"})
            assert resp.status == 401, (method, path, headers)
            assert (await resp.json())["error"]["code"] == "unauthorized"
        reader = {"Authorization": "Bearer reader"}  # known, but not an admin
        resp = await client.request(method, path, headers=reader, json={"subject": "b"})
        assert resp.status == 403, (method, path)
        assert (await resp.json())["error"]["code"] == "forbidden"
    assert (await client.get(CLIENTS_PATH, headers=AUTH)).status == 200
    assert (await client.get("/api/v1/audit", headers=AUTH)).status == 200
    doc = openapi_document(client.app, access)
    for method, path in routes:
        template = path.replace(client_id, "{client_id}")
        operation = doc["paths"][template][method.lower()]
        assert operation["security"] == [{"bearer": []}], (method, path)
        assert {"401", "403"} <= set(operation["responses"])


async def test_without_an_admin_token_nothing_answers(aiohttp_client: Any, sqlite_url: str) -> None:
    client = await aiohttp_client(create_app(make_settings(sqlite_url, admin_token=None)))
    for method, path in (("GET", CLIENTS_PATH), ("POST", CLIENTS_PATH), ("GET", "/api/v1/audit")):
        resp = await client.request(method, path, headers=AUTH, json={"subject": "a"})
        assert resp.status == 403 and (await resp.json())["error"]["code"] == "writes_disabled"


# --- the audit log -----------------------------------------------------------------------------


async def test_writes_are_audited_and_reads_are_not(api: Api) -> None:
    created = await api.call("POST", CLIENTS_PATH, 201, json={"subject": "alice"})
    client_id = {"client_id": created["id"]}
    rotated = await api.call("POST", f"{CLIENTS_PATH}/{{client_id}}/rotate", 201, path=client_id)
    await api.call(
        "DELETE", f"{CLIENTS_PATH}/{{client_id}}", 204, path={"client_id": rotated["id"]}
    )
    await api.error("POST", CLIENTS_PATH, 400, "invalid_client", json={"subject": ""})
    await api.call("POST", "/api/v1/agents", 201, json={"card": _card()})
    await api.call("DELETE", "/api/v1/agents/{agent_id}", 204, path={"agent_id": "echo-agent"})
    # reads, and POSTs that only read, are not recorded
    await api.call("GET", CLIENTS_PATH, 200)
    await api.call("GET", f"{CLIENTS_PATH}/{{client_id}}", 200, path=client_id)
    await api.call("GET", "/api/v1/agents", 200)
    message = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hello"}]}
    await api.call("POST", "/api/v1/route/explain", 200, json={"message": message})

    log = await api.call("GET", "/api/v1/audit", 200)
    entries = log["entries"]
    assert [(e["action"], e["target"], e["status"]) for e in entries] == [
        ("DELETE /api/v1/agents/{agent_id}", "echo-agent", 204),
        ("POST /api/v1/agents", "echo-agent", 201),
        ("POST /api/v1/clients", None, 400),
        ("DELETE /api/v1/clients/{client_id}", rotated["id"], 204),
        ("POST /api/v1/clients/{client_id}/rotate", created["id"], 201),
        ("POST /api/v1/clients", created["id"], 201),
    ]
    assert entries[0]["details"] is None
    assert entries[1]["details"] == {"created": "/api/v1/agents/echo-agent"}
    assert entries[2]["details"] == {"error": "invalid_client"}
    assert entries[4]["details"] == {"created": f"/api/v1/clients/{rotated['id']}"}
    assert entries[5]["details"] == {"created": f"/api/v1/clients/{created['id']}"}
    assert entries[0]["path"] == "/api/v1/agents/echo-agent"
    _no_secrets(log, created["key"], rotated["key"])
    ids = [e["id"] for e in entries]
    assert ids == sorted(ids, reverse=True)

    page = await api.call("GET", "/api/v1/audit", 200, params={"limit": "2"})
    assert [e["id"] for e in page["entries"]] == ids[:2]
    nxt = await api.call(
        "GET", "/api/v1/audit", 200, params={"limit": "2", "cursor": page["next_cursor"]}
    )
    assert [e["id"] for e in nxt["entries"]] == ids[2:4]
    deletes = await api.call(
        "GET", "/api/v1/audit", 200, params={"action": "DELETE /api/v1/clients/{client_id}"}
    )
    assert [e["id"] for e in deletes["entries"]] == [ids[3]]
    actor = entries[0]["actor"]
    assert (
        len((await api.call("GET", "/api/v1/audit", 200, params={"actor": actor}))["entries"]) == 6
    )
    none = await api.call("GET", "/api/v1/audit", 200, params={"actor": "somebody-else"})
    assert none["entries"] == []
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (await api.call("GET", "/api/v1/audit", 200, params={"since": future}))["entries"] == []
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert (
        len((await api.call("GET", "/api/v1/audit", 200, params={"since": past}))["entries"]) == 6
    )


async def test_audit_query_errors(api: Api) -> None:
    for params, code in (
        ({"since": "yesterday"}, "invalid_parameter"),
        ({"since": "2026-01-01T00:00:00"}, "invalid_parameter"),
        ({"limit": "x"}, "invalid_parameter"),
        ({"limit": "100000"}, "invalid_parameter"),
        ({"who": "me"}, "unknown_parameter"),
        ({"cursor": "bm9wZQ"}, "invalid_cursor"),
    ):
        error = await api.error("GET", "/api/v1/audit", 400, code, params=params)
        if "since" in params:
            assert error["message"].startswith("since must be an ISO 8601 time with a timezone")


def _card() -> dict[str, Any]:
    return {
        "name": "Echo Agent",
        "description": "Echoes.",
        "version": "1.0",
        "supportedInterfaces": [
            {
                "url": "https://echo.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["echo"]}],
    }
