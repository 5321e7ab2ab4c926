"""The audit log: entries stored and listed newest first (SQLite and PostgreSQL), and the
middleware that records every admin write, through a real aiohttp server."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from registry.access.audit import AUDIT, Audit, audit_middleware, is_audited
from registry.access.principal import ADMIN, ANONYMOUS, PRINCIPAL_KEY, Principal
from registry.api import error_middleware
from registry.errors import NotFound, RegistryError
from registry.store import Store
from tests.support.clock import FakeClock

OpenStore = Callable[[str], Awaitable[Store]]  # the open_store fixture (conftest.py)

ALICE = Principal(
    subject="alice",
    tenant="acme",
    roles=frozenset({ADMIN}),
    method="api-key",
    key_id="0a1b2c3d4e5f",
)
TOKEN = Principal(subject="admin", roles=frozenset({ADMIN}), method="admin-token")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(open_store: OpenStore, db_url: str) -> Store:
    return await open_store(db_url)


@pytest.fixture
def audit(store: Store, clock: FakeClock) -> Audit:
    return Audit(store, clock=clock)


async def _record(audit: Audit, principal: Principal, action: str, status: int = 200) -> int:
    method, path = action.split(" ", 1)
    entry = await audit.record(principal, method=method, path=path, action=action, status=status)
    return entry.id


# --- storage -------------------------------------------------------------------------------


async def test_record_and_list_newest_first(audit: Audit, clock: FakeClock) -> None:
    entry = await audit.record(
        ALICE,
        method="DELETE",
        path="/api/v1/agents/weather",
        action="DELETE /api/v1/agents/{agent_id}",
        status=204,
        target="weather",
        details={"note": "x"},
    )
    assert entry.to_api() == {
        "id": entry.id,
        "at": "2026-01-01T12:00:00Z",
        "actor": "api-key:0a1b2c3d4e5f alice",
        "subject": "alice",
        "tenant": "acme",
        "method": "DELETE",
        "path": "/api/v1/agents/weather",
        "action": "DELETE /api/v1/agents/{agent_id}",
        "target": "weather",
        "status": 204,
        "details": {"note": "x"},
    }
    clock.advance(1)
    second = await _record(audit, ANONYMOUS, "POST /api/v1/agents", 401)
    page = await audit.list(10)
    assert [e.id for e in page.items] == [second, entry.id] and page.next_cursor is None
    assert page.items[0].actor == "anonymous" and page.items[0].subject is None
    assert page.items[1] == entry


async def test_list_pages_and_filters(audit: Audit, clock: FakeClock) -> None:
    ids = []
    for n in range(7):
        principal = ALICE if n % 2 else TOKEN
        action = "POST /api/v1/agents" if n < 4 else "DELETE /api/v1/agents/{agent_id}"
        ids.append(await _record(audit, principal, action))
        clock.advance(60)
    seen, cursor = [], None
    while True:
        page = await audit.list(3, cursor)
        seen += [e.id for e in page.items]
        if (cursor := page.next_cursor) is None:
            break
    assert seen == list(reversed(ids))

    by_alice = [e.id for e in (await audit.list(10, actor="alice")).items]
    assert by_alice == [ids[5], ids[3], ids[1]]
    assert [e.id for e in (await audit.list(10, actor="api-key:0a1b2c3d4e5f alice")).items] == (
        by_alice
    )
    assert len((await audit.list(10, actor="admin-token")).items) == 4
    deletes = await audit.list(10, action="DELETE /api/v1/agents/{agent_id}")
    assert [e.id for e in deletes.items] == [ids[6], ids[5], ids[4]]
    since = await audit.list(10, since=clock() - timedelta(seconds=180))  # the last 3
    assert [e.id for e in since.items] == [ids[6], ids[5], ids[4]]
    both = await audit.list(1, actor="alice", action="POST /api/v1/agents")
    assert [e.id for e in both.items] == [ids[3]]
    assert both.next_cursor is not None
    nxt = await audit.list(1, both.next_cursor, actor="alice", action="POST /api/v1/agents")
    assert [e.id for e in nxt.items] == [ids[1]]
    with pytest.raises(RegistryError) as caught:  # a cursor belongs to its filters
        await audit.list(1, both.next_cursor, actor="admin-token")
    assert caught.value.code == "invalid_cursor"


def test_which_requests_are_audited() -> None:
    assert is_audited("POST", "/api/v1/agents")
    assert is_audited("DELETE", "/api/v1/clients/0a1b2c3d4e5f")
    assert is_audited("PATCH", "/api/v1/agents/x")
    assert is_audited("PUT", "/api/v1/agents/x/card")
    assert not is_audited("GET", "/api/v1/agents")
    assert not is_audited("HEAD", "/api/v1/agents")
    assert not is_audited("OPTIONS", "/api/v1/agents")
    assert not is_audited("POST", "/api/v1/route/explain")  # a POST that only reads
    assert not is_audited("POST", "/")  # the router, not the admin API


# --- the middleware, in a real server ------------------------------------------------------


def _app(audit: Audit, principal: Principal | None) -> web.Application:
    @web.middleware
    async def authenticated(request: web.Request, handler: Any) -> web.StreamResponse:
        if principal is not None:
            request[PRINCIPAL_KEY] = principal
        return await handler(request)

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"ok": True}, status=201)

    async def created(request: web.Request) -> web.Response:
        return web.json_response({}, status=201, headers={"Location": "/api/v1/things/new-id"})

    async def missing(request: web.Request) -> web.Response:
        raise NotFound("no such thing", details={"id": request.match_info["thing_id"]})

    async def gone(request: web.Request) -> web.Response:
        raise web.HTTPGone()

    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("boom")

    async def body(request: web.Request) -> web.Response:
        return web.json_response(await request.json())

    app = web.Application(middlewares=[error_middleware, authenticated, audit_middleware])
    app[AUDIT] = audit
    app.router.add_post("/api/v1/things", created)
    app.router.add_get("/api/v1/things", ok)
    app.router.add_post("/api/v1/route/explain", ok)
    app.router.add_delete("/api/v1/things/{thing_id}", missing)
    app.router.add_put("/api/v1/things/{thing_id}/parts/{part_id}", ok)
    app.router.add_post("/api/v1/gone", gone)
    app.router.add_post("/api/v1/broken", broken)
    app.router.add_post("/api/v1/secret", body)
    app.router.add_post("/elsewhere", ok)
    return app


async def test_middleware_records_writes_only(aiohttp_client: Any, audit: Audit) -> None:
    client: TestClient = await aiohttp_client(_app(audit, ALICE))
    assert (await client.get("/api/v1/things")).status == 201
    assert (await client.head("/api/v1/things")).status == 201
    assert (await client.post("/api/v1/route/explain")).status == 201
    assert (await client.post("/elsewhere")).status == 201
    assert (await client.post("/api/v1/nowhere")).status == 404  # no such route: not recorded
    assert (await client.patch("/api/v1/things")).status == 405
    assert (await audit.list(10)).items == []

    assert (await client.post("/api/v1/things")).status == 201
    assert (await client.put("/api/v1/things/t1/parts/p2")).status == 201
    [put, post] = (await audit.list(10)).items
    assert (post.actor, post.subject, post.tenant) == (
        "api-key:0a1b2c3d4e5f alice",
        "alice",
        "acme",
    )
    assert (post.method, post.path, post.action) == (
        "POST",
        "/api/v1/things",
        "POST /api/v1/things",
    )
    assert (post.target, post.status) == ("new-id", 201)
    assert post.details == {"created": "/api/v1/things/new-id"}
    assert put.action == "PUT /api/v1/things/{thing_id}/parts/{part_id}"
    assert (put.path, put.target, put.details) == ("/api/v1/things/t1/parts/p2", "t1/p2", None)


async def test_middleware_records_failures_with_their_status(
    aiohttp_client: Any, audit: Audit
) -> None:
    client: TestClient = await aiohttp_client(_app(audit, TOKEN))
    resp = await client.delete("/api/v1/things/t9")
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "not_found"
    assert (await client.post("/api/v1/gone")).status == 410
    resp = await client.post("/api/v1/broken")
    assert resp.status == 500 and (await resp.json())["error"]["code"] == "internal_error"
    broken, gone, missing = (await audit.list(10)).items
    assert (missing.action, missing.target, missing.status) == (
        "DELETE /api/v1/things/{thing_id}",
        "t9",
        404,
    )
    assert missing.details == {"error": "not_found"} and missing.actor == "admin-token"
    assert (gone.status, gone.details) == (410, None)
    assert (broken.status, broken.details) == (500, {"error": "internal_error"})


async def test_middleware_never_records_bodies(aiohttp_client: Any, audit: Audit) -> None:
    client: TestClient = await aiohttp_client(_app(audit, TOKEN))
    secret = "client-secret-5f2a9c"
    resp = await client.post("/api/v1/secret?x=1", json={"client_secret": secret})
    assert resp.status == 200
    [entry] = (await audit.list(10)).items
    assert secret not in str(entry.to_api()) and entry.path == "/api/v1/secret"


async def test_without_a_principal_the_actor_is_anonymous(
    aiohttp_client: Any, audit: Audit
) -> None:
    client: TestClient = await aiohttp_client(_app(audit, None))
    assert (await client.post("/api/v1/things")).status == 201
    [entry] = (await audit.list(10)).items
    assert (entry.actor, entry.subject) == ("anonymous", None)


async def test_a_failure_to_record_is_logged_and_the_answer_stands(
    aiohttp_client: Any, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(db_url, ())  # no audit_log table in this database: every insert fails
    try:
        client: TestClient = await aiohttp_client(_app(Audit(store), TOKEN))
        with caplog.at_level(logging.ERROR, logger="registry.access.audit"):
            resp = await client.post("/api/v1/things")
            assert resp.status == 201
            resp = await client.delete("/api/v1/things/t9")
            assert resp.status == 404
    finally:
        await store.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "registry.access.audit"]
    assert messages == [
        "audit entry not written for POST /api/v1/things (status 201)",
        "audit entry not written for DELETE /api/v1/things/t9 (status 404)",
    ]
