"""Spans around the registry's crawls and verifications (router.tracing.registry), made by
registering agents through the admin API of a real app."""

from __future__ import annotations

from typing import Any

import httpx
from opentelemetry.trace import SpanKind, StatusCode

from router.app import create_app
from router.tracing.registry import CARD_NOT_MODIFIED, ERROR_CODE, VERIFICATION
from tests.router.tracing.conftest import Spans
from tests.support.helpers import AUTH, CardServer, base, card_v1, make_settings


async def test_registering_an_agent_crawls_and_verifies_its_card(
    aiohttp_server: Any, sqlite_url: str, spans: Spans, card_server: CardServer
) -> None:
    card_server.set("/.well-known/agent-card.json", card_v1(card_server.url("")))
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with httpx.AsyncClient(timeout=30) as http:
        added = await http.post(
            base(server) + "/api/v1/agents", json={"url": card_server.url("")}, headers=AUTH
        )
        assert added.status_code == 201, added.text
        (request,) = await spans.ended("POST /api/v1/agents")
    assert request.context is not None
    discover, crawl, verify = (spans.one(n) for n in ("discover card", "crawl card", "verify card"))
    assert discover.parent is not None and discover.parent.span_id == request.context.span_id
    assert crawl.parent is not None and crawl.parent.span_id == discover.context.span_id  # type: ignore[union-attr]
    assert verify.parent is not None and verify.parent.span_id == request.context.span_id
    assert crawl.kind is SpanKind.CLIENT
    crawled = dict(crawl.attributes or {})
    assert crawled["url.full"] == card_server.url("/.well-known/agent-card.json")
    assert crawled["http.response.status_code"] == 200 and crawled[CARD_NOT_MODIFIED] is False
    assert dict(verify.attributes or {})[VERIFICATION] == "unsigned"


async def test_a_failed_crawl_is_an_error_span_with_the_registrys_code(
    aiohttp_server: Any, sqlite_url: str, spans: Spans, card_server: CardServer
) -> None:
    server = await aiohttp_server(create_app(make_settings(sqlite_url)))
    async with httpx.AsyncClient(timeout=30) as http:
        added = await http.post(
            base(server) + "/api/v1/agents", json={"url": card_server.url("")}, headers=AUTH
        )
        assert added.status_code == 422, added.text
        await spans.ended("POST /api/v1/agents")
    discover = spans.one("discover card")
    assert discover.status.status_code is StatusCode.ERROR
    assert dict(discover.attributes or {})[ERROR_CODE] == "card_not_found"
    crawls = spans.named("crawl card")
    assert len(crawls) == 2  # both well-known paths were tried
    for crawl in crawls:
        assert dict(crawl.attributes or {})[ERROR_CODE] == "remote_not_found"
        assert crawl.status.status_code is StatusCode.ERROR
    assert not spans.named("verify card")
