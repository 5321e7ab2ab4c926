"""The server span of every request (router.tracing.middleware): the admin API, cards, errors."""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry.trace import SpanKind, StatusCode

from router.app import create_app
from router.tracing.middleware import API, CLIENT_GONE, HTTP_ROUTE, HTTP_STATUS
from tests.router.tracing.conftest import Spans
from tests.support.helpers import ADMIN, AUTH, base, make_settings

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


async def test_admin_api_calls_are_server_spans_continuing_the_callers_trace(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    traced = {**AUTH, "traceparent": f"00-{TRACE}-{PARENT}-01"}
    async with httpx.AsyncClient(timeout=30) as http:
        listed = await http.get(base(server) + "/api/v1/agents?limit=5", headers=traced)
        assert listed.status_code == 200, listed.text
        (span,) = await spans.ended("GET /api/v1/agents")
        missing = await http.get(base(server) + "/api/v1/agents/nobody", headers=AUTH)
        assert missing.status_code == 404
        (gone,) = await spans.ended("GET /api/v1/agents/{agent_id}")
        refused = await http.post(base(server) + "/api/v1/refresh", headers={})
        assert refused.status_code == 401
        (denied,) = await spans.ended("POST /api/v1/refresh")

    assert span.kind is SpanKind.SERVER and span.context is not None
    assert span.context.trace_id == int(TRACE, 16)
    assert span.parent is not None and span.parent.span_id == int(PARENT, 16)
    attributes = dict(span.attributes or {})
    assert attributes[API] == "admin" and attributes[HTTP_ROUTE] == "/api/v1/agents"
    assert attributes[HTTP_STATUS] == 200 and attributes["http.request.method"] == "GET"
    assert span.status.status_code is StatusCode.UNSET
    # the route's pattern, not the path: no ids in the name; 4xx is the caller's, not an error
    assert dict(gone.attributes or {})[HTTP_STATUS] == 404
    assert gone.parent is None and gone.status.status_code is StatusCode.UNSET
    assert dict(denied.attributes or {})[HTTP_STATUS] == 401
    # no credential in any span
    assert not [s.name for s in spans.all() if ADMIN in repr(dict(s.attributes or {}))]


async def test_cards_and_unknown_paths(aiohttp_server: Any, sqlite_url: str, spans: Spans) -> None:
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with httpx.AsyncClient(timeout=30) as http:
        card = await http.get(base(server) + "/.well-known/agent-card.json")
        assert card.status_code == 200
        (served,) = await spans.ended("GET /.well-known/agent-card.json")
        nothing = await http.get(base(server) + "/no/such/path")
        assert nothing.status_code == 404
        (unmatched,) = await spans.ended("GET unmatched")
    assert dict(served.attributes or {})[API] == "card"
    assert dict(unmatched.attributes or {})[API] == "other"
    assert dict(unmatched.attributes or {})[HTTP_STATUS] == 404
    assert CLIENT_GONE not in dict(served.attributes or {})


async def test_an_a2a_call_over_http_json_is_named_after_its_method(
    aiohttp_server: Any, sqlite_url: str, spans: Spans
) -> None:
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with httpx.AsyncClient(timeout=30) as http:
        got = await http.get(base(server) + "/tasks/unknown", headers={"A2A-Version": "1.0"})
        assert got.status_code == 404
        (span,) = await spans.ended("A2A GetTask")
    attributes = dict(span.attributes or {})
    assert attributes[API] == "a2a" and attributes[HTTP_ROUTE] == "/tasks/{id}"
    assert attributes["rpc.jsonrpc.error_code"] == -32001 and attributes[HTTP_STATUS] == 404
    assert span.status.status_code is StatusCode.UNSET  # the caller's mistake
